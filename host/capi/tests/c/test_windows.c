/* librocm_kpack built for x86_64-pc-windows-gnu, run under wine: path
 * discovery names the EXE and the DLL themselves, archives open through
 * Windows paths, relative marker search paths resolve against the
 * discovered EXE path, and ROCM_KPACK_PATH is split at ';' (its entries
 * hold drive-letter ':'s). Arguments: noop.kpack rocm_kpack.dll good.marker
 * missing.marker rel.marker, all as Windows paths. ROCM_KPACK_PATH is set
 * by the caller to "<missing archive>;<noop.kpack>". Prints
 * "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
#define CHECK(cond) do { if (cond) passed++; else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static void *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 16);
  size_t n = fread(buf, 1, 1 << 16, f);
  fclose(f);
  if (n == 0) { free(buf); return NULL; }
  return buf;
}

/* Case-insensitive suffix test: Windows paths compare without case. */
static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && _stricmp(s + n - m, suffix) == 0;
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage\n"); return 2; }
  const char *noop = argv[1], *dll = argv[2];
  void *good = slurp(argv[3]), *missing = slurp(argv[4]), *rel = slurp(argv[5]);
  CHECK(good && missing && rel);

  /* kpack_discover_binary_path: the EXE for an address in the EXE, the
   * DLL for an address in the DLL (through GetProcAddress: &kpack_open in
   * the EXE may be its import thunk). */
  char exe_path[4096], dll_path[4096];
  size_t off = 0;
  CHECK(kpack_discover_binary_path((const void *)&main, exe_path, sizeof exe_path, &off) == KPACK_SUCCESS);
  printf("exe %s offset %zu\n", exe_path, off);
  CHECK(ends_with(exe_path, "\\test_windows.exe"));
  CHECK(off > 0);
  HMODULE module = GetModuleHandleA("rocm_kpack.dll");
  CHECK(module != NULL);
  FARPROC open_fn = module ? GetProcAddress(module, "kpack_open") : NULL;
  CHECK(open_fn != NULL);
  if (open_fn) {
    CHECK(kpack_discover_binary_path((const void *)open_fn, dll_path, sizeof dll_path, &off) == KPACK_SUCCESS);
    printf("dll %s offset %zu\n", dll_path, off);
    CHECK(_stricmp(dll_path, dll) == 0);
  }
  CHECK(kpack_discover_binary_path((const void *)&main, exe_path, 4, &off) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_discover_binary_path((const void *)16, dll_path, sizeof dll_path, &off) == KPACK_ERROR_PATH_DISCOVERY_FAILED);

  /* An archive through a Windows path. */
  kpack_archive_t a = NULL;
  void *data = NULL;
  size_t size = 0;
  CHECK(kpack_open(noop, &a) == KPACK_SUCCESS && a != NULL);
  CHECK(kpack_get_kernel(a, "lib/libtest.so#0", "gfx906", &data, &size) == KPACK_SUCCESS && size == 219 &&
        memcmp(data, "KERNEL2_GFX906_DATA", 19) == 0);
  kpack_free_kernel(data);
  kpack_close(a);

  const char *prio[] = {"gfx906", "gfx900"};
  kpack_cache_t c = NULL;

  /* ROCM_KPACK_PATH ("<missing>;<noop>") replaces the marker's paths:
   * the missing marker's archive does not exist, the list's second entry
   * does. Split at ':' the list would be "Z", "\...": nothing loads. */
  CHECK(kpack_cache_create(&c) == KPACK_SUCCESS);
  CHECK(kpack_load_code_object(c, missing, exe_path, 0, prio, 2, &data, &size) == KPACK_SUCCESS && size == 219 &&
        memcmp(data, "KERNEL2_GFX906_DATA", 19) == 0);
  kpack_free_code_object(data);
  kpack_cache_destroy(c);

  /* Without it, the marker's own paths: relative to the EXE's directory
   * (what CLR passes: the discovered path), absolute as given. */
  CHECK(SetEnvironmentVariableA("ROCM_KPACK_PATH", NULL));
  CHECK(kpack_cache_create(&c) == KPACK_SUCCESS);
  CHECK(kpack_load_code_object(c, rel, exe_path, 0, prio, 2, &data, &size) == KPACK_SUCCESS && size == 219 &&
        memcmp(data, "KERNEL2_GFX906_DATA", 19) == 0);
  kpack_free_code_object(data);
  CHECK(kpack_load_code_object(c, good, exe_path, 0, prio, 2, &data, &size) == KPACK_SUCCESS && size == 219);
  kpack_free_code_object(data);
  CHECK(kpack_load_code_object(c, missing, exe_path, 0, prio, 2, &data, &size) == KPACK_ERROR_ARCHIVE_NOT_FOUND);
  kpack_cache_destroy(c);

  free(good);
  free(missing);
  free(rel);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
