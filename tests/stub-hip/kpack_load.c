/* The loading half of the stub HIP runtime (test code): hip_stub.c, built
 * with -DKPACK_LOAD and linked with librocm_kpack, calls kpack_stub_load()
 * for every HIPK wrapper, doing what CLR does (spec rocm-kpack §3.5, §10):
 * find the file the wrapper lives in, then load code object `reserved1`
 * through the marker `binary` points at, for the device arch list in
 * $KPACK_STUB_ARCHS (comma-separated, most preferred first). One log line
 * per wrapper:
 *   load <co_index> <arch list> ok <sha256 hex> <size>
 *   load <co_index> <arch list> error <code> <diagnostic, newlines as "|">
 * A small SHA-256 (FIPS 180-4) lives here so the Rust test can compare
 * against clang-offload-bundler's checksums without the stub writing files. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack.h"

typedef struct {
  uint32_t magic;
  uint32_t version;
  const void *binary;
  uint64_t reserved1;
} fatbin_wrapper;

/* ---- SHA-256 ---------------------------------------------------------- */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

/* Lowercase hex digest of `len` bytes at `data` into `out` (65 bytes). */
static void sha256_hex(const uint8_t *data, size_t len, char out[65]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  size_t i = 0;
  for (; i + 64 <= len; i += 64) sha256_block(h, data + i);
  uint8_t tail[128] = {0};
  size_t rest = len - i;
  memcpy(tail, data + i, rest);
  tail[rest] = 0x80;
  size_t blocks = rest + 9 <= 64 ? 1 : 2;
  uint64_t bits = (uint64_t)len * 8;
  for (int j = 0; j < 8; j++) tail[blocks * 64 - 1 - j] = (uint8_t)(bits >> (8 * j));
  for (size_t j = 0; j < blocks; j++) sha256_block(h, tail + 64 * j);
  for (int j = 0; j < 8; j++) snprintf(out + 8 * j, 9, "%08x", h[j]);
}

/* ---- loading ---------------------------------------------------------- */

static kpack_cache_t cache(void) {
  static kpack_cache_t c;
  if (!c) {
    kpack_error_t e = kpack_cache_create(&c);
    if (e != KPACK_SUCCESS) { fprintf(stderr, "kpack_cache_create: %d\n", (int)e); exit(90); }
  }
  return c;
}

/* Split $KPACK_STUB_ARCHS on ',' into at most 16 entries (NULL entries are
 * allowed by the ABI; "-" in the list stands for one, to test that). */
static size_t arch_list(const char **out, char *buf, size_t buf_size) {
  const char *env = getenv("KPACK_STUB_ARCHS");
  if (!env) env = "gfx90a";
  snprintf(buf, buf_size, "%s", env);
  size_t n = 0;
  for (char *tok = strtok(buf, ","); tok && n < 16; tok = strtok(NULL, ","))
    out[n++] = strcmp(tok, "-") == 0 ? NULL : tok;
  return n;
}

void kpack_stub_load(const fatbin_wrapper *w, FILE *f);

void kpack_stub_load(const fatbin_wrapper *w, FILE *f) {
  char archbuf[1024];
  const char *archs[16];
  size_t n = arch_list(archs, archbuf, sizeof archbuf);
  const char *shown = getenv("KPACK_STUB_ARCHS") ? getenv("KPACK_STUB_ARCHS") : "gfx90a";
  uint32_t co_index = (uint32_t)w->reserved1;
  fprintf(f, "load %u %s", co_index, shown);

  char path[4096];
  size_t offset = 0;
  kpack_error_t e = kpack_discover_binary_path(w, path, sizeof path, &offset);
  if (e != KPACK_SUCCESS) {
    fprintf(f, " error %d kpack_discover_binary_path failed\n", (int)e);
    return;
  }
  void *co = NULL;
  size_t size = 0;
  e = kpack_load_code_object(cache(), w->binary, path, co_index, archs, n, &co, &size);
  if (e == KPACK_SUCCESS) {
    char hex[65];
    sha256_hex(co, size, hex);
    fprintf(f, " ok %s %zu\n", hex, size);
    kpack_free_code_object(co);
    return;
  }
  size_t len = 0;
  kpack_cache_last_diagnostic(cache(), NULL, 0, &len);
  char *diag = malloc(len + 1);
  if (diag && kpack_cache_last_diagnostic(cache(), diag, len + 1, NULL) == KPACK_SUCCESS) {
    for (char *p = diag; *p; p++)
      if (*p == '\n') *p = '|';
  }
  fprintf(f, " error %d %s\n", (int)e, diag ? diag : "<no memory>");
  free(diag);
}
