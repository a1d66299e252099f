/* Exercises every function of librocm_kpack through the generated header,
 * error paths included. Arguments: noop.kpack zstd.kpack good.marker
 * missing.marker bad.marker empty.kpack. Prints "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
#define CHECK(cond) do { if (cond) passed++; else { failed++; fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static void *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, 1 << 16, f);
  fclose(f);
  return buf;
}

static int seen;
static bool count_all(const char *arch, void *user) { (void)arch; (*(int *)user)++; return true; }
static bool stop_first(const char *arch, void *user) { (void)arch; (*(int *)user)++; return false; }

int main(int argc, char **argv) {
  if (argc != 7) { fprintf(stderr, "usage\n"); return 2; }
  const char *noop = argv[1], *zstd = argv[2], *empty = argv[6];
  kpack_archive_t a = NULL;
  size_t n = 0;
  const char *s = NULL;
  void *data = NULL;
  size_t size = 0;

  /* kpack_open */
  CHECK(kpack_open(NULL, &a) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_open(noop, NULL) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_open("/nonexistent/x.kpack", &a) == KPACK_ERROR_FILE_NOT_FOUND);
  CHECK(kpack_open(empty, &a) == KPACK_ERROR_IO_ERROR);
  CHECK(kpack_open(noop, &a) == KPACK_SUCCESS && a != NULL);

  /* architectures */
  CHECK(kpack_get_architecture_count(NULL, &n) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_architecture_count(a, NULL) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_architecture_count(a, &n) == KPACK_SUCCESS && n == 2);
  CHECK(kpack_get_architecture(a, 0, &s) == KPACK_SUCCESS && strcmp(s, "gfx900") == 0);
  CHECK(kpack_get_architecture(a, 1, &s) == KPACK_SUCCESS && strcmp(s, "gfx906") == 0);
  CHECK(kpack_get_architecture(a, 2, &s) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_architecture(a, 0, NULL) == KPACK_ERROR_INVALID_ARGUMENT);

  /* binaries, byte-wise sorted */
  CHECK(kpack_get_binary_count(NULL, &n) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_binary_count(a, &n) == KPACK_SUCCESS && n == 2);
  CHECK(kpack_get_binary(a, 0, &s) == KPACK_SUCCESS && strcmp(s, "bin/testapp#0") == 0);
  CHECK(kpack_get_binary(a, 1, &s) == KPACK_SUCCESS && strcmp(s, "lib/libtest.so#0") == 0);
  CHECK(kpack_get_binary(a, 99, &s) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_binary(a, 0, NULL) == KPACK_ERROR_INVALID_ARGUMENT);

  /* kernels */
  CHECK(kpack_get_kernel(a, "lib/libtest.so#0", "gfx906", &data, &size) == KPACK_SUCCESS && size == 219 &&
        memcmp(data, "KERNEL2_GFX906_DATA", 19) == 0);
  kpack_free_kernel(data);
  CHECK(kpack_get_kernel(a, "bin/testapp#0", "gfx900", &data, &size) == KPACK_SUCCESS && size == 168 &&
        ((unsigned char *)data)[167] == 0xff);
  kpack_free_kernel(data);
  CHECK(kpack_get_kernel(a, "bin/testapp#0", "gfx906", &data, &size) == KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK(kpack_get_kernel(a, "nope#0", "gfx900", &data, &size) == KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK(kpack_get_kernel(NULL, "bin/testapp#0", "gfx900", &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_kernel(a, NULL, "gfx900", &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_kernel(a, "bin/testapp#0", NULL, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_kernel(a, "bin/testapp#0", "gfx900", NULL, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_get_kernel(a, "bin/testapp#0", "gfx900", &data, NULL) == KPACK_ERROR_INVALID_ARGUMENT);
  kpack_free_kernel(NULL);
  kpack_close(a);
  kpack_close(NULL);

  CHECK(kpack_open(zstd, &a) == KPACK_SUCCESS);
  CHECK(kpack_get_kernel(a, "lib/libhip.so#0", "gfx1100", &data, &size) == KPACK_SUCCESS && size == 1019 &&
        memcmp(data, "HIP_KERNEL_GFX1100_AAA", 22) == 0 && ((char *)data)[1018] == 'B');
  kpack_free_kernel(data);
  CHECK(kpack_get_binary(a, 0, &s) == KPACK_SUCCESS && strcmp(s, "bin/hiptest#0") == 0);
  kpack_close(a);

  /* enumerate */
  int count = 0;
  CHECK(kpack_enumerate_architectures(zstd, count_all, &count) == KPACK_SUCCESS && count == 2);
  count = 0;
  CHECK(kpack_enumerate_architectures(zstd, stop_first, &count) == KPACK_SUCCESS && count == 1);
  CHECK(kpack_enumerate_architectures(NULL, count_all, &count) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_enumerate_architectures(zstd, NULL, &count) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_enumerate_architectures("/nonexistent/x.kpack", count_all, &count) == KPACK_ERROR_FILE_NOT_FOUND);
  (void)seen;

  /* loader */
  size_t mlen = 0, missing_len = 0, bad_len = 0;
  void *marker = slurp(argv[3], &mlen), *missing = slurp(argv[4], &missing_len), *bad = slurp(argv[5], &bad_len);
  CHECK(marker && missing && bad);
  kpack_cache_t c = NULL;
  CHECK(kpack_cache_create(NULL) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_cache_create(&c) == KPACK_SUCCESS && c != NULL);
  const char *prio[] = {"gfx906", "gfx900"};
  const char *with_null[] = {NULL, "amdgcn-amd-amdhsa--gfx900"};
  const char *other[] = {"gfx1100"};
  const char *bin = "/opt/app/lib/libtest.so";
  CHECK(kpack_load_code_object(c, marker, bin, 0, prio, 2, &data, &size) == KPACK_SUCCESS && size == 219);
  kpack_free_code_object(data);
  CHECK(kpack_load_code_object(c, marker, bin, 0, with_null, 2, &data, &size) == KPACK_SUCCESS && size == 119);
  kpack_free_code_object(data);
  kpack_free_code_object(NULL);
  CHECK(kpack_load_code_object(c, marker, bin, 999, prio, 2, &data, &size) == KPACK_ERROR_KERNEL_NOT_FOUND);
  CHECK(kpack_load_code_object(c, marker, bin, 0, other, 1, &data, &size) == KPACK_ERROR_ARCH_NOT_FOUND);
  char diag[4096];
  size_t dlen = 0;
  CHECK(kpack_cache_last_diagnostic(c, diag, sizeof diag, &dlen) == KPACK_SUCCESS && dlen > 0 &&
        strstr(diag, "amd_test_noop.kpack") != NULL);
  CHECK(kpack_cache_last_diagnostic(c, NULL, 0, &dlen) == KPACK_SUCCESS && dlen > 0);
  CHECK(kpack_cache_last_diagnostic(c, diag, 8, NULL) == KPACK_SUCCESS && strlen(diag) == 7);
  CHECK(kpack_cache_last_diagnostic(NULL, diag, sizeof diag, &dlen) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_cache_last_diagnostic(c, NULL, 4, &dlen) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, missing, bin, 0, prio, 2, &data, &size) == KPACK_ERROR_ARCHIVE_NOT_FOUND);
  CHECK(kpack_cache_last_diagnostic(c, diag, sizeof diag, &dlen) == KPACK_SUCCESS && strstr(diag, "does not exist") != NULL);
  CHECK(kpack_load_code_object(c, bad, bin, 0, prio, 2, &data, &size) == KPACK_ERROR_INVALID_METADATA);
  CHECK(kpack_load_code_object(NULL, marker, bin, 0, prio, 2, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, NULL, bin, 0, prio, 2, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, marker, NULL, 0, prio, 2, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, marker, bin, 0, NULL, 2, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, marker, bin, 0, prio, 0, &data, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, marker, bin, 0, prio, 2, NULL, &size) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_load_code_object(c, marker, bin, 0, prio, 2, &data, NULL) == KPACK_ERROR_INVALID_ARGUMENT);
  kpack_cache_destroy(c);
  kpack_cache_destroy(NULL);

  /* ROCM_KPACK_DISABLE is read at cache creation */
  setenv("ROCM_KPACK_DISABLE", "1", 1);
  CHECK(kpack_cache_create(&c) == KPACK_SUCCESS);
  CHECK(kpack_load_code_object(c, marker, bin, 0, prio, 2, &data, &size) == KPACK_ERROR_NOT_IMPLEMENTED);
  kpack_cache_destroy(c);
  unsetenv("ROCM_KPACK_DISABLE");

  /* path discovery */
  char path[4096];
  size_t off = 0;
  CHECK(kpack_discover_binary_path((const void *)&main, path, sizeof path, &off) == KPACK_SUCCESS &&
        strstr(path, "test_kpack") != NULL);
  CHECK(kpack_discover_binary_path((const void *)&main, path, sizeof path, NULL) == KPACK_SUCCESS);
  CHECK(kpack_discover_binary_path((const void *)&main, path, 4, &off) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_discover_binary_path(NULL, path, sizeof path, &off) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_discover_binary_path((const void *)&main, NULL, sizeof path, &off) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_discover_binary_path((const void *)&main, path, 0, &off) == KPACK_ERROR_INVALID_ARGUMENT);
  CHECK(kpack_discover_binary_path((const void *)16, path, sizeof path, &off) == KPACK_ERROR_PATH_DISCOVERY_FAILED);

  free(marker);
  free(missing);
  free(bad);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
