/*
 * gguf_mini — build small GGUF v3 images in memory (metadata only) for
 * vocabulary tests: hand-made vocabularies and deliberately broken ones.
 * Written byte by byte so the tests do not depend on the GGUF writer.
 */
#ifndef TESSERA_TESTS_VOCAB_GGUF_MINI_H
#define TESSERA_TESTS_VOCAB_GGUF_MINI_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

typedef struct mini {
    uint8_t *p;
    size_t n, cap;
    uint64_t n_kv;
} mini;

static inline void mini_bytes(mini *m, const void *s, size_t n) {
    if (m->n + n > m->cap) {
        m->cap = (m->n + n) * 2 + 64;
        m->p = realloc(m->p, m->cap);
    }
    memcpy(m->p + m->n, s, n);
    m->n += n;
}
static inline void mini_u32(mini *m, uint32_t x) { mini_bytes(m, &x, 4); }
static inline void mini_u64(mini *m, uint64_t x) { mini_bytes(m, &x, 8); }
static inline void mini_s(mini *m, const char *s) {
    mini_u64(m, strlen(s));
    mini_bytes(m, s, strlen(s));
}

static inline void mini_begin(mini *m) {
    memset(m, 0, sizeof *m);
    mini_bytes(m, "GGUF", 4);
    mini_u32(m, 3);
    mini_u64(m, 0); /* tensors */
    mini_u64(m, 0); /* kv count, patched by mini_open */
}

static inline void mini_key(mini *m, const char *key, gguf_type t) {
    mini_s(m, key);
    mini_u32(m, (uint32_t)t);
    m->n_kv++;
}
static inline void kv_str(mini *m, const char *key, const char *v) {
    mini_key(m, key, GGUF_TYPE_STRING);
    mini_s(m, v);
}
static inline void kv_u32(mini *m, const char *key, uint32_t v) {
    mini_key(m, key, GGUF_TYPE_UINT32);
    mini_u32(m, v);
}
static inline void kv_bool(mini *m, const char *key, bool v) {
    mini_key(m, key, GGUF_TYPE_BOOL);
    uint8_t b = v;
    mini_bytes(m, &b, 1);
}
static inline void kv_arr_str(mini *m, const char *key, const char *const *v, size_t n) {
    mini_key(m, key, GGUF_TYPE_ARRAY);
    mini_u32(m, GGUF_TYPE_STRING);
    mini_u64(m, n);
    for (size_t i = 0; i < n; i++) mini_s(m, v[i]);
}
static inline void kv_arr_f32(mini *m, const char *key, const float *v, size_t n) {
    mini_key(m, key, GGUF_TYPE_ARRAY);
    mini_u32(m, GGUF_TYPE_FLOAT32);
    mini_u64(m, n);
    mini_bytes(m, v, 4 * n);
}
static inline void kv_arr_i32(mini *m, const char *key, const int32_t *v, size_t n) {
    mini_key(m, key, GGUF_TYPE_ARRAY);
    mini_u32(m, GGUF_TYPE_INT32);
    mini_u64(m, n);
    mini_bytes(m, v, 4 * n);
}

/* Finish the image (pad to the default alignment) and open it. The image
 * stays owned by m; free it with mini_free after gguf_close. */
static inline gguf_file *mini_open(mini *m) {
    memcpy(m->p + 16, &m->n_kv, 8);
    static const uint8_t zeros[GGUF_DEFAULT_ALIGNMENT] = {0};
    size_t pad = (GGUF_DEFAULT_ALIGNMENT - m->n % GGUF_DEFAULT_ALIGNMENT) % GGUF_DEFAULT_ALIGNMENT;
    mini_bytes(m, zeros, pad);
    return gguf_open_memory(m->p, m->n, "mini.gguf");
}

static inline void mini_free(mini *m) {
    free(m->p);
    memset(m, 0, sizeof *m);
}

#endif
