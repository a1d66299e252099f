// A tiny C++ user of an installed rocm-kpack (built by tests/install.rs with
// CMake and with pkg-config): opens an archive, lists its architectures and
// loads one kernel (`bin/hiptest#0` for gfx1100 of AMD's zstd test vector).
#include <rocm_kpack/kpack.h>

#include <cstdio>
#include <string>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer ARCHIVE\n");
    return 2;
  }
  kpack_archive_t archive = nullptr;
  if (kpack_open(argv[1], &archive) != KPACK_SUCCESS) {
    std::fprintf(stderr, "kpack_open %s failed\n", argv[1]);
    return 1;
  }
  size_t count = 0;
  kpack_get_architecture_count(archive, &count);
  std::string arches;
  for (size_t i = 0; i < count; i++) {
    const char *arch = nullptr;
    if (kpack_get_architecture(archive, i, &arch) == KPACK_SUCCESS) {
      arches += (arches.empty() ? "" : ",") + std::string(arch);
    }
  }
  void *kernel = nullptr;
  size_t size = 0;
  kpack_error_t err = kpack_get_kernel(archive, "bin/hiptest#0", "gfx1100", &kernel, &size);
#ifdef ROCM_KPACK_STATIC
  const char *linkage = "static";  // defined by the CMake package's static target, as AMD's
#else
  const char *linkage = "shared";
#endif
  std::printf("%s: arches %s kernel %zu bytes (error %d)\n", linkage, arches.c_str(), size,
              static_cast<int>(err));
  kpack_free_kernel(kernel);
  kpack_close(archive);
  return err == KPACK_SUCCESS ? 0 : 1;
}
