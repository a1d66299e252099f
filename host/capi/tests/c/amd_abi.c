/* The C ABI as AMD's rocm_kpack/kpack.h declares it (spec section 10),
 * written here by hand from the spec rather than included from our
 * generated header, so a drift in a prototype, an enum value or a type
 * shows up as a wrong result or a link failure.
 * Usage: amd_abi NOOP.kpack ZSTD.kpack EMPTY_FILE */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct kpack_archive* kpack_archive_t;
typedef struct kpack_cache* kpack_cache_t;

typedef enum {
    KPACK_SUCCESS = 0,
    KPACK_ERROR_INVALID_ARGUMENT = 1,
    KPACK_ERROR_FILE_NOT_FOUND = 2,
    KPACK_ERROR_INVALID_FORMAT = 3,
    KPACK_ERROR_UNSUPPORTED_VERSION = 4,
    KPACK_ERROR_KERNEL_NOT_FOUND = 5,
    KPACK_ERROR_DECOMPRESSION_FAILED = 6,
    KPACK_ERROR_OUT_OF_MEMORY = 7,
    KPACK_ERROR_NOT_IMPLEMENTED = 8,
    KPACK_ERROR_IO_ERROR = 9,
    KPACK_ERROR_MSGPACK_PARSE_FAILED = 10,
    KPACK_ERROR_PATH_DISCOVERY_FAILED = 11,
    KPACK_ERROR_INVALID_METADATA = 12,
    KPACK_ERROR_ARCHIVE_NOT_FOUND = 13,
    KPACK_ERROR_ARCH_NOT_FOUND = 14
} kpack_error_t;

typedef enum {
    KPACK_COMPRESSION_NOOP = 0,
    KPACK_COMPRESSION_ZSTD_PER_KERNEL = 1
} kpack_compression_scheme_t;

typedef bool (*kpack_arch_callback_t)(const char* arch, void* user_data);

kpack_error_t kpack_open(const char* path, kpack_archive_t* out);
void kpack_close(kpack_archive_t archive);
kpack_error_t kpack_get_architecture_count(kpack_archive_t archive, size_t* n);
kpack_error_t kpack_get_architecture(kpack_archive_t archive, size_t i, const char** out);
kpack_error_t kpack_get_binary_count(kpack_archive_t archive, size_t* n);
kpack_error_t kpack_get_binary(kpack_archive_t archive, size_t i, const char** out);
kpack_error_t kpack_get_kernel(kpack_archive_t archive, const char* key, const char* arch,
                               void** data, size_t* size);
void kpack_free_kernel(void* data);
kpack_error_t kpack_cache_create(kpack_cache_t* out);
void kpack_cache_destroy(kpack_cache_t cache);
kpack_error_t kpack_discover_binary_path(const void* addr, char* buf, size_t buf_size,
                                         size_t* offset_out);
kpack_error_t kpack_load_code_object(kpack_cache_t cache, const void* hipk_metadata,
                                     const char* binary_path, uint32_t co_index,
                                     const char* const* arch_list, size_t arch_count,
                                     void** out, size_t* out_size);
void kpack_free_code_object(void* data);
kpack_error_t kpack_enumerate_architectures(const char* archive_path, kpack_arch_callback_t cb,
                                            void* user_data);

static int passed, failed;
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            printf("FAILED line %d: %s\n", __LINE__, #cond);               \
        }                                                                  \
    } while (0)

static bool count_arches(const char* arch, void* user) {
    (void)arch;
    ++*(int*)user;
    return true;
}

int main(int argc, char** argv) {
    if (argc != 4) return 2;
    const char *noop = argv[1], *zstd = argv[2], *empty = argv[3];
    kpack_archive_t a = NULL;

    CHECK(kpack_open(NULL, &a) == KPACK_ERROR_INVALID_ARGUMENT);
    CHECK(kpack_open("/nonexistent/x.kpack", &a) == KPACK_ERROR_FILE_NOT_FOUND);
    CHECK(kpack_open(empty, &a) == KPACK_ERROR_IO_ERROR);

    /* test_noop.kpack: gfx900, gfx906; bin/testapp#0, lib/libtest.so#0. */
    CHECK(kpack_open(noop, &a) == KPACK_SUCCESS);
    size_t n = 0;
    const char* s = NULL;
    CHECK(kpack_get_architecture_count(a, &n) == KPACK_SUCCESS && n == 2);
    CHECK(kpack_get_architecture(a, 1, &s) == KPACK_SUCCESS && strcmp(s, "gfx906") == 0);
    CHECK(kpack_get_architecture(a, 2, &s) == KPACK_ERROR_INVALID_ARGUMENT);
    CHECK(kpack_get_binary_count(a, &n) == KPACK_SUCCESS && n == 2);
    CHECK(kpack_get_binary(a, 0, &s) == KPACK_SUCCESS && strcmp(s, "bin/testapp#0") == 0);
    void* data = NULL;
    size_t size = 0;
    CHECK(kpack_get_kernel(a, "lib/libtest.so#0", "gfx906", &data, &size) == KPACK_SUCCESS &&
          size == 219);
    kpack_free_kernel(data);
    CHECK(kpack_get_kernel(a, "lib/libtest.so#0", "gfx1100", &data, &size) ==
          KPACK_ERROR_KERNEL_NOT_FOUND);
    kpack_close(a);
    kpack_close(NULL);

    /* test_zstd.kpack: lib/libhip.so#0 for gfx1101 is 619 bytes. */
    CHECK(kpack_open(zstd, &a) == KPACK_SUCCESS);
    CHECK(kpack_get_kernel(a, "lib/libhip.so#0", "gfx1101", &data, &size) == KPACK_SUCCESS &&
          size == 619);
    kpack_free_kernel(data);
    kpack_close(a);

    int arches = 0;
    CHECK(kpack_enumerate_architectures(noop, count_arches, &arches) == KPACK_SUCCESS &&
          arches == 2);
    CHECK(kpack_enumerate_architectures(NULL, count_arches, &arches) ==
          KPACK_ERROR_INVALID_ARGUMENT);

    char path[4096];
    size_t offset = 0;
    CHECK(kpack_discover_binary_path((const void*)&main, path, sizeof path, &offset) ==
          KPACK_SUCCESS);
    CHECK(kpack_discover_binary_path(NULL, path, sizeof path, &offset) ==
          KPACK_ERROR_INVALID_ARGUMENT);

    /* A marker as spec 3.1 writes it, naming the noop archive absolutely. */
    kpack_cache_t cache = NULL;
    CHECK(kpack_cache_create(&cache) == KPACK_SUCCESS);
    unsigned char marker[4096];
    size_t m = 0, plen = strlen(noop);
    if (plen > 255) return 2;
    marker[m++] = 0x82;
    marker[m++] = 0xb2;
    memcpy(marker + m, "kpack_search_paths", 18);
    m += 18;
    marker[m++] = 0x91;
    marker[m++] = 0xd9;
    marker[m++] = (unsigned char)plen;
    memcpy(marker + m, noop, plen);
    m += plen;
    marker[m++] = 0xab;
    memcpy(marker + m, "kernel_name", 11);
    m += 11;
    marker[m++] = 0xae;
    memcpy(marker + m, "lib/libtest.so", 14);
    m += 14;
    const char* archs[] = {"amdgcn-amd-amdhsa--gfx906:xnack-"};
    void* code = NULL;
    size_t code_size = 0;
    CHECK(kpack_load_code_object(cache, marker, path, 0, archs, 1, &code, &code_size) ==
              KPACK_SUCCESS &&
          code_size == 219);
    kpack_free_code_object(code);
    const char* other[] = {"gfx1100"};
    CHECK(kpack_load_code_object(cache, marker, path, 0, other, 1, &code, &code_size) ==
          KPACK_ERROR_ARCH_NOT_FOUND);
    CHECK(kpack_load_code_object(cache, marker, path, 0, archs, 0, &code, &code_size) ==
          KPACK_ERROR_INVALID_ARGUMENT);
    CHECK(kpack_load_code_object(cache, "\xc1", path, 0, archs, 1, &code, &code_size) ==
          KPACK_ERROR_INVALID_METADATA);
    kpack_cache_destroy(cache);
    kpack_free_code_object(NULL);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
