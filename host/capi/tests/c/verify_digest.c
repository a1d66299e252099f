/* A load of a code object whose bytes no longer have the sha256 its
 * archive's TOC records: with ROCM_KPACK_VERIFY=1 (set by the test) it
 * fails with KPACK_ERROR_DECOMPRESSION_FAILED and kpack_last_error_detail
 * names the entry; a second cache made with ROCM_KPACK_VERIFY unset loads
 * the changed bytes as AMD's loader would.
 * Arguments: MARKER_FILE BINARY_PATH ARCH KEY. Prints "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: verify_digest MARKER BINARY ARCH KEY\n");
    return 2;
  }
  unsigned char *marker = slurp(argv[1], NULL);
  const char *arches[] = {argv[3]};
  kpack_cache_t cache;
  if (!marker || kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  void *data = NULL;
  size_t size = 0;
  kpack_error_t e = kpack_load_code_object(cache, marker, argv[2], 0, arches, 1, &data, &size);
  check(e == KPACK_ERROR_DECOMPRESSION_FAILED, "verified load fails");
  check(data == NULL, "no buffer on failure");
  char detail[4096];
  size_t len = 0;
  check(kpack_last_error_detail(detail, sizeof detail, &len) == KPACK_SUCCESS, "detail");
  check(strstr(detail, argv[4]) != NULL, "detail names the key");
  check(strstr(detail, "sha256") != NULL, "detail says sha256");
  printf("detail: %s\n", detail);
  kpack_cache_destroy(cache);

  unsetenv("ROCM_KPACK_VERIFY");
  if (kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  e = kpack_load_code_object(cache, marker, argv[2], 0, arches, 1, &data, &size);
  check(e == KPACK_SUCCESS && size > 0, "unverified load succeeds");
  kpack_free_code_object(data);
  kpack_cache_destroy(cache);
  free(marker);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
