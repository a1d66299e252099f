/* librocm_kpack.a and Debian's libzstd.a in one program: both zstd copies
 * are used (the archive's kernels decode through librocm_kpack's, the round
 * trip below through libzstd's), and the link only succeeds when
 * librocm_kpack.a exports no ZSTD_* symbol. Argument: a zstd .kpack archive. */
#include <rocm_kpack/kpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: zstd_coexist ARCHIVE\n"); return 2; }
  kpack_archive_t a = NULL;
  if (kpack_open(argv[1], &a) != KPACK_SUCCESS) { fprintf(stderr, "kpack_open failed\n"); return 1; }
  void *kernel = NULL;
  size_t kernel_size = 0;
  if (kpack_get_kernel(a, "bin/hiptest#0", "gfx1100", &kernel, &kernel_size) != KPACK_SUCCESS) {
    fprintf(stderr, "kpack_get_kernel failed\n");
    return 1;
  }
  size_t bound = ZSTD_compressBound(kernel_size);
  void *packed = malloc(bound), *back = malloc(kernel_size);
  size_t packed_size = ZSTD_compress(packed, bound, kernel, kernel_size, 3);
  if (ZSTD_isError(packed_size)) { fprintf(stderr, "ZSTD_compress failed\n"); return 1; }
  size_t back_size = ZSTD_decompress(back, kernel_size, packed, packed_size);
  if (ZSTD_isError(back_size) || back_size != kernel_size || memcmp(back, kernel, kernel_size) != 0) {
    fprintf(stderr, "libzstd round trip failed\n");
    return 1;
  }
  printf("kernel %zu bytes, libzstd %s round trip ok\n", kernel_size, ZSTD_versionString());
  free(packed);
  free(back);
  kpack_free_kernel(kernel);
  kpack_close(a);
  return 0;
}
