/* Loads from a `zstd-delta` (KPAK v2) archive through the C ABI: every code
 * object, cold then warm, must equal the file the test wrote for it, whether
 * it is stored alone or as a delta against a kernel of another key.
 * Arguments: MARKER_FILE BINARY_PATH ARCH EXPECT_DIR CO_COUNT, where
 * EXPECT_DIR/<co>.bin holds code object <co>. Prints "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: delta_loads MARKER BINARY ARCH EXPECT_DIR CO_COUNT\n");
    return 2;
  }
  size_t mlen = 0;
  unsigned char *marker = slurp(argv[1], &mlen);
  unsigned count = (unsigned)atoi(argv[5]);
  kpack_cache_t cache;
  if (!marker || count == 0 || kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  const char *arches[] = {argv[3]};
  for (unsigned round = 0; round < 2; round++) {
    for (unsigned co = 0; co < count; co++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%u.bin", argv[4], co);
      size_t want_len = 0;
      unsigned char *want = slurp(path, &want_len);
      void *data = NULL;
      size_t size = 0;
      kpack_error_t e = kpack_load_code_object(cache, marker, argv[2], co, arches, 1, &data, &size);
      int ok = e == KPACK_SUCCESS && want && size == want_len && memcmp(data, want, size) == 0;
      if (!ok) fprintf(stderr, "round %u co %u: error %d, %zu bytes\n", round, co, (int)e, size);
      check(ok, "load equals the written code object");
      kpack_free_code_object(data);
      free(want);
    }
  }
  kpack_cache_destroy(cache);
  free(marker);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
