/* A stub HIP runtime for kpack's tests (no GPU): built as libamdhip64.so.5
 * with the hip_4.2 symbol version the fixtures link against. It implements
 * the registration entry points and the few API calls the fixtures make,
 * and logs what the module constructors register, one line per event, to
 * $KPACK_STUB_LOG (or stderr):
 *   fatbin <magic> <version> <reserved1> [<kernel_name> <search_path>...]
 *   function <device name>
 *   var <name>
 *   launch
 * For HIPK wrappers it decodes the marker msgpack map the wrapper points at.
 * When built with -DKPACK_LOAD and linked with librocm_kpack, it also loads
 * every code object through the marker (see kpack_load.c).
 * With $KPACK_STUB_DUMP set to a directory, every HIPF wrapper's bundle
 * (plain, or CCOB v2/v3, which carry their size) is written there as
 * <n>.bundle, n counting registrations: what a HIP runtime receives.
 * Devices: $KPACK_STUB_DEVICES lists them as gcnArchName[=CUs], comma
 * separated (`gfx1103=12,gfx1100=96`); hipGetDeviceCount and
 * hipGetDevicePropertiesR0600 report them (name "Stub GPU <n>"), with the
 * members at their offsets in HIP 6's hipDeviceProp_tR0600. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t x, y, z; } dim3;
typedef struct {
  uint32_t magic;
  uint32_t version;
  const void *binary;
  uint64_t reserved1;
} fatbin_wrapper;

#define HIPF 0x48495046u
#define HIPK 0x4B504948u

static FILE *log_file(void) {
  static FILE *f;
  if (!f) {
    const char *p = getenv("KPACK_STUB_LOG");
    f = p ? fopen(p, "a") : stderr;
    if (!f) f = stderr;
  }
  return f;
}

/* Minimal msgpack reading for the marker: strings and arrays of strings. */
static const uint8_t *mp_str(const uint8_t *p, const char **s, uint32_t *n) {
  if ((*p & 0xe0) == 0xa0) { *n = *p & 0x1f; *s = (const char *)p + 1; return p + 1 + *n; }
  if (*p == 0xd9) { *n = p[1]; *s = (const char *)p + 2; return p + 2 + *n; }
  if (*p == 0xda) { *n = (uint32_t)p[1] << 8 | p[2]; *s = (const char *)p + 3; return p + 3 + *n; }
  return NULL;
}

static void log_marker(FILE *f, const uint8_t *p) {
  uint32_t entries;
  if ((*p & 0xf0) != 0x80) { fprintf(f, " <marker is not a map>"); return; }
  entries = *p++ & 0x0f;
  char name[4096] = "", paths[8192] = "";
  for (uint32_t i = 0; i < entries && p; i++) {
    const char *k; uint32_t kn;
    p = mp_str(p, &k, &kn);
    if (!p) break;
    if (kn == 11 && !memcmp(k, "kernel_name", 11)) {
      const char *v; uint32_t vn;
      p = mp_str(p, &v, &vn);
      if (p && vn < sizeof name) { memcpy(name, v, vn); name[vn] = 0; }
    } else if (kn == 18 && !memcmp(k, "kpack_search_paths", 18) && (*p & 0xf0) == 0x90) {
      uint32_t m = *p++ & 0x0f;
      for (uint32_t j = 0; j < m && p; j++) {
        const char *v; uint32_t vn;
        p = mp_str(p, &v, &vn);
        if (p && strlen(paths) + vn + 2 < sizeof paths) { strcat(paths, " "); strncat(paths, v, vn); }
      }
    } else {
      fprintf(f, " <unexpected key>");
      return;
    }
  }
  fprintf(f, " %s%s", name, paths);
}

#ifdef KPACK_LOAD
void kpack_stub_load(const fatbin_wrapper *w, FILE *f);
#endif

/* The length of the bundle at p: a plain bundle ends with its furthest
 * code object (or its header); a CCOB v2/v3 stores its total size. 0 when
 * unknown (CCOB v1). */
static uint64_t bundle_len(const uint8_t *p) {
  uint64_t v;
  if (!memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24)) {
    uint64_t n, end, pos = 32;
    memcpy(&n, p + 24, 8);
    end = pos;
    for (uint64_t i = 0; i < n; i++) {
      uint64_t off, size, id_len;
      memcpy(&off, p + pos, 8);
      memcpy(&size, p + pos + 8, 8);
      memcpy(&id_len, p + pos + 16, 8);
      pos += 24 + id_len;
      if (off + size > end) end = off + size;
    }
    return pos > end ? pos : end;
  }
  if (!memcmp(p, "CCOB", 4)) {
    uint16_t version;
    memcpy(&version, p + 4, 2);
    if (version == 2) { uint32_t t; memcpy(&t, p + 8, 4); return t; }
    if (version == 3) { memcpy(&v, p + 8, 8); return v; }
  }
  return 0;
}

static void dump_bundle(const void *binary) {
  static unsigned n;
  const char *dir = getenv("KPACK_STUB_DUMP");
  uint64_t len;
  char path[4096];
  FILE *out;
  if (!dir) return;
  len = bundle_len(binary);
  snprintf(path, sizeof path, "%s/%u.bundle", dir, n++);
  if (!len || !(out = fopen(path, "wb"))) return;
  fwrite(binary, 1, len, out);
  fclose(out);
}

void **__hipRegisterFatBinary(const void *data) {
  const fatbin_wrapper *w = data;
  FILE *f = log_file();
  const char *magic = w->magic == HIPF ? "HIPF" : w->magic == HIPK ? "HIPK" : "other";
  fprintf(f, "fatbin %s %u %llu", magic, w->version, (unsigned long long)w->reserved1);
  if (w->magic == HIPK) log_marker(f, w->binary);
  if (w->magic == HIPF && memcmp(w->binary, "__CLANG_OFFLOAD_BUNDLE__", 24) != 0 &&
      memcmp(w->binary, "CCOB", 4) != 0)
    fprintf(f, " <HIPF pointer is not at a bundle>");
  else if (w->magic == HIPF)
    dump_bundle(w->binary);
  fprintf(f, "\n");
#ifdef KPACK_LOAD
  if (w->magic == HIPK) kpack_stub_load(w, f);
#endif
  fflush(f);
  static void *handle = 0;
  return &handle;
}

void __hipRegisterFunction(void **modules, const void *host_function, char *device_function,
                           const char *device_name, unsigned int thread_limit, void *tid, void *bid,
                           dim3 *block_dim, dim3 *grid_dim, int *wsize) {
  (void)modules; (void)host_function; (void)device_function; (void)thread_limit;
  (void)tid; (void)bid; (void)block_dim; (void)grid_dim; (void)wsize;
  fprintf(log_file(), "function %s\n", device_name);
}

void __hipRegisterVar(void **modules, char *host_var, char *device_address, const char *device_name,
                      int ext, size_t size, int constant, int global) {
  (void)modules; (void)host_var; (void)device_address; (void)ext; (void)size; (void)constant; (void)global;
  fprintf(log_file(), "var %s\n", device_name);
}

void __hipUnregisterFatBinary(void **modules) { (void)modules; }
int __hipPushCallConfiguration(dim3 g, dim3 b, size_t shmem, void *stream) {
  (void)g; (void)b; (void)shmem; (void)stream; return 0;
}
int __hipPopCallConfiguration(dim3 *g, dim3 *b, size_t *shmem, void **stream) {
  (void)g; (void)b; (void)shmem; (void)stream; return 0;
}
int hipMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
int hipFree(void *p) { free(p); return 0; }
int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **args, size_t shmem, void *stream) {
  (void)f; (void)g; (void)b; (void)args; (void)shmem; (void)stream;
  fprintf(log_file(), "launch\n");
  return 0;
}
int hipDeviceSynchronize(void) { return 0; }
/* Real libraries check for launch errors: none ever happens here. */
int hipGetLastError(void) { return 0; }
const char *hipGetErrorString(int error) { return error ? "stub error" : "hipSuccess"; }

/* The n-th entry of $KPACK_STUB_DEVICES: its name into arch (at most
 * len-1 bytes) and its CU count (0 when not given); -1 past the end. */
static int stub_device(int n, char *arch, size_t len, int *cus) {
  const char *p = getenv("KPACK_STUB_DEVICES");
  if (!p || !*p) return -1;
  for (int i = 0; i < n; i++) {
    p = strchr(p, ',');
    if (!p) return -1;
    p++;
  }
  size_t k = strcspn(p, "=,");
  if (k >= len) k = len - 1;
  memcpy(arch, p, k);
  arch[k] = 0;
  *cus = p[k] == '=' ? atoi(p + k + 1) : 0;
  return 0;
}

int hipGetDeviceCount(int *count) {
  char arch[256];
  int cus, n = 0;
  while (stub_device(n, arch, sizeof arch, &cus) == 0) n++;
  *count = n;
  return n ? 0 : 100; /* hipErrorNoDevice */
}

int hipGetDevicePropertiesR0600(void *prop, int device) {
  char arch[256];
  int cus;
  if (device < 0 || stub_device(device, arch, sizeof arch, &cus) != 0) return 101;
  /* name at 0, multiProcessorCount at 388, gcnArchName at 1160. */
  snprintf((char *)prop, 256, "Stub GPU %d", device);
  memcpy((char *)prop + 388, &cus, sizeof cus);
  memcpy((char *)prop + 1160, arch, strlen(arch) + 1);
  return 0;
}
