#include "gguf_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void img_reserve(img *b, size_t more) {
    if (b->n + more <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(1);
    }
    b->p = p;
    b->cap = cap;
}

void img_free(img *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void img_bytes(img *b, const void *p, size_t n) {
    img_reserve(b, n);
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

void img_u8(img *b, uint8_t v) { img_bytes(b, &v, 1); }
void img_u32(img *b, uint32_t v) { img_bytes(b, &v, 4); }
void img_u64(img *b, uint64_t v) { img_bytes(b, &v, 8); }
void img_f32(img *b, float v) { img_bytes(b, &v, 4); }

void img_str(img *b, const char *s) {
    img_u64(b, strlen(s));
    img_bytes(b, s, strlen(s));
}

void img_pad(img *b, size_t align) {
    while (b->n % align) img_u8(b, 0);
}

void img_header(img *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    img_bytes(b, "GGUF", 4);
    img_u32(b, version);
    img_u64(b, n_tensors);
    img_u64(b, n_kv);
}

void img_key(img *b, const char *key, uint32_t type) {
    img_str(b, key);
    img_u32(b, type);
}

void img_tensor(img *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t dtype,
                uint64_t offset) {
    img_str(b, name);
    img_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) img_u64(b, ne[d]);
    img_u32(b, dtype);
    img_u64(b, offset);
}

uint8_t *read_whole_file(const char *path, size_t *size) {
    char *bytes = harness_read_file(path, size);
    REQUIRE(bytes != NULL, "cannot read %s", path);
    return (uint8_t *)bytes;
}
