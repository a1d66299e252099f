/* Side-by-side runtime driver for bench/amd-runtime.sh: the same C code is
 * linked against AMD's librocm_kpack and against ours, so both pay the same
 * caller costs. Per round: kpack_cache_create + one kpack_load_code_object
 * (new cache, first load: the "cold" path a freshly started application
 * pays, page cache warm), then WARM more loads on the same cache. Prints
 * p50 / min of both in microseconds.
 * Usage: cold MARKER_FILE BINARY ARCH CO_INDEX ROUNDS WARM */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int kpack_error_t;
typedef struct kpack_cache* kpack_cache_t;
kpack_error_t kpack_cache_create(kpack_cache_t*);
void kpack_cache_destroy(kpack_cache_t);
kpack_error_t kpack_load_code_object(kpack_cache_t, const void*, const char*, uint32_t,
                                     const char* const*, size_t, void**, size_t*);
void kpack_free_code_object(void*);

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: cold MARKER BINARY ARCH CO ROUNDS WARM\n");
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  static char marker[65536];
  size_t n = fread(marker, 1, sizeof marker, f);
  fclose(f);
  if (n == 0) return 2;
  const char* arch[1] = {argv[3]};
  uint32_t co = (uint32_t)atoi(argv[4]);
  int rounds = atoi(argv[5]), warm = atoi(argv[6]);
  double* cold = calloc(rounds, sizeof(double));
  double* hot = calloc((size_t)rounds * (warm ? warm : 1), sizeof(double));
  size_t nh = 0, size = 0;
  for (int r = 0; r < rounds; r++) {
    void* out = NULL;
    double t0 = now_us();
    kpack_cache_t c;
    if (kpack_cache_create(&c)) return 1;
    kpack_error_t e = kpack_load_code_object(c, marker, argv[2], co, arch, 1, &out, &size);
    cold[r] = now_us() - t0;
    if (e) {
      fprintf(stderr, "load failed: error %d\n", e);
      return 1;
    }
    kpack_free_code_object(out);
    for (int w = 0; w < warm; w++) {
      t0 = now_us();
      e = kpack_load_code_object(c, marker, argv[2], co, arch, 1, &out, &size);
      hot[nh++] = now_us() - t0;
      if (e) return 1;
      kpack_free_code_object(out);
    }
    kpack_cache_destroy(c);
  }
  qsort(cold, rounds, sizeof(double), cmp);
  printf("kernel #%u (%zu bytes): new cache + first load p50 %.1f us (min %.1f)", co, size,
         cold[rounds / 2], cold[0]);
  if (nh) {
    qsort(hot, nh, sizeof(double), cmp);
    printf("; warm load p50 %.1f us (min %.1f)", hot[nh / 2], hot[0]);
  }
  printf("\n");
  return 0;
}
