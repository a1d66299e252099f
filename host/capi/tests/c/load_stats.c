/* ROCM_KPACK_STATS=1 (set by the test): two loads of one code object and
 * one of a key the archive lacks, through one cache, which is then
 * destroyed (MODE "destroy": the cache prints its statistics) or left for
 * the process exit to report (MODE "exit").
 * Arguments: MARKER_FILE BINARY_PATH ARCH MODE. Prints "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: load_stats MARKER BINARY ARCH destroy|exit\n");
    return 2;
  }
  unsigned char *marker = slurp(argv[1], NULL);
  const char *arches[] = {argv[3]};
  kpack_cache_t cache;
  if (!marker || kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  for (int i = 0; i < 2; i++) {
    void *data = NULL;
    size_t size = 0;
    kpack_error_t e = kpack_load_code_object(cache, marker, argv[2], 0, arches, 1, &data, &size);
    check(e == KPACK_SUCCESS && size > 0, "load");
    kpack_free_code_object(data);
  }
  void *data = NULL;
  size_t size = 0;
  kpack_error_t e = kpack_load_code_object(cache, marker, argv[2], 7, arches, 1, &data, &size);
  check(e == KPACK_ERROR_KERNEL_NOT_FOUND, "missing key");
  printf("%d passed, %d failed\n", passed, failed);
  fflush(stdout);
  if (strcmp(argv[4], "destroy") == 0) kpack_cache_destroy(cache);
  free(marker);
  return failed != 0;
}
