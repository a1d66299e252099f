/* Shared by the C test programs: read a whole file, and count checks. */
#ifndef KPACK_TEST_UTIL_H
#define KPACK_TEST_UTIL_H
#include <stdio.h>
#include <stdlib.h>

/* The whole file at `path` (free() it), or NULL; its length in `*len`
 * unless `len` is NULL. */
static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (len) *len = (size_t)n;
  return buf;
}

static int passed = 0, failed = 0;

/* Count one check; a failed one is named on stderr. */
static void check(int ok, const char *what) {
  if (ok) {
    passed++;
  } else {
    failed++;
    fprintf(stderr, "FAIL: %s\n", what);
  }
}

#endif
