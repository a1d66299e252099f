/* Two GPUs of different architectures in one process: one cache serves the
 * arch lists of a gfx1100 and a gfx1201 device alternately, from several
 * threads at once, as a HIP runtime loading per device does. Every code
 * object must be the one for the asked arch and index: entry (arch, co) is
 * the text "<arch>#<co>;" repeated to 1000 + 37 * co bytes.
 * Arguments: MARKER_FILE BINARY_PATH CO_COUNT. Prints "N passed, M failed". */
#include <rocm_kpack/kpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8
#define ROUNDS 200

static unsigned char marker[65536];
static const char *binary;
static unsigned co_count;
static kpack_cache_t cache;
static atomic_int passed, failed;

/* The arch lists a device of each kind passes, and the arch whose object
 * each must yield. The last ones list both devices' targets (a process
 * asking for either, most preferred first). */
static const char *const gfx1100[] = {"gfx1100"};
static const char *const gfx1201[] = {"gfx1201"};
static const char *const prefer_1201[] = {"gfx1201", "gfx1100"};
static const char *const prefer_1100[] = {"amdgcn-amd-amdhsa--gfx1100", "gfx1201"};
static const struct {
  const char *const *list;
  size_t count;
  const char *expect;
} devices[] = {
    {gfx1100, 1, "gfx1100"},
    {gfx1201, 1, "gfx1201"},
    {prefer_1201, 2, "gfx1201"},
    {prefer_1100, 2, "gfx1100"},
};
#define DEVICES (sizeof devices / sizeof devices[0])

/* Whether `data` is entry (arch, co). */
static int is_entry(const unsigned char *data, size_t size, const char *arch, unsigned co) {
  char unit[64];
  int n = snprintf(unit, sizeof unit, "%s#%u;", arch, co);
  size_t want = 1000 + 37 * (size_t)co;
  if (size != want) return 0;
  for (size_t i = 0; i < size; i++)
    if (data[i] != (unsigned char)unit[i % (size_t)n]) return 0;
  return 1;
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(size_t)arg;
  for (unsigned r = 0; r < ROUNDS; r++) {
    /* Neighbouring threads and rounds alternate devices and indices. */
    unsigned d = (id + r) % DEVICES;
    unsigned co = (id * 7 + r * 3) % co_count;
    void *data = NULL;
    size_t size = 0;
    kpack_error_t e = kpack_load_code_object(cache, marker, binary, co, devices[d].list,
                                             devices[d].count, &data, &size);
    if (e == KPACK_SUCCESS && is_entry(data, size, devices[d].expect, co)) {
      atomic_fetch_add(&passed, 1);
    } else {
      atomic_fetch_add(&failed, 1);
      fprintf(stderr, "FAIL thread %u round %u: device %u co %u: error %d, %zu bytes\n", id, r, d,
              co, (int)e, size);
    }
    kpack_free_code_object(data);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: two_gpus MARKER BINARY CO_COUNT\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) return 2;
  size_t n = fread(marker, 1, sizeof marker, f);
  fclose(f);
  if (n == 0) return 2;
  binary = argv[2];
  co_count = (unsigned)atoi(argv[3]);
  if (co_count == 0 || kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;

  pthread_t threads[THREADS];
  for (size_t i = 0; i < THREADS; i++)
    if (pthread_create(&threads[i], NULL, worker, (void *)i) != 0) return 2;
  for (size_t i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);

  /* The same cache, single-threaded afterwards: still no cross-talk. */
  for (unsigned co = 0; co < co_count; co++) {
    for (unsigned d = 0; d < DEVICES; d++) {
      void *data = NULL;
      size_t size = 0;
      kpack_error_t e = kpack_load_code_object(cache, marker, binary, co, devices[d].list,
                                               devices[d].count, &data, &size);
      if (e == KPACK_SUCCESS && is_entry(data, size, devices[d].expect, co))
        atomic_fetch_add(&passed, 1);
      else {
        atomic_fetch_add(&failed, 1);
        fprintf(stderr, "FAIL after: device %u co %u: error %d\n", d, co, (int)e);
      }
      kpack_free_code_object(data);
    }
  }
  kpack_cache_destroy(cache);
  printf("%d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
  return atomic_load(&failed) != 0;
}
