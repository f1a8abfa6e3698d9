/*
 * gguf_test — what the gguf tests share besides harness.h: a little-endian
 * byte builder for hand-made GGUF images (valid ones, and the corrupt ones
 * the reader must reject).
 */
#ifndef TESSERA_TESTS_GGUF_TEST_H
#define TESSERA_TESTS_GGUF_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"

/* A growing byte buffer; allocation failure aborts the test. */
typedef struct img {
    uint8_t *p;
    size_t n, cap;
} img;

void img_free(img *b);
void img_bytes(img *b, const void *p, size_t n);
void img_u8(img *b, uint8_t v);
void img_u32(img *b, uint32_t v);
void img_u64(img *b, uint64_t v);
void img_f32(img *b, float v);
void img_str(img *b, const char *s); /* u64 length + bytes */
void img_pad(img *b, size_t align);  /* zeros up to a multiple of align */
/* "GGUF", version, n_tensors, n_kv */
void img_header(img *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
/* key + type (the value follows) */
void img_key(img *b, const char *key, uint32_t type);
/* name, n_dims, ne[n_dims], dtype, offset */
void img_tensor(img *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t dtype,
                uint64_t offset);

/* Read a whole file (fails the test when it cannot); *size gets its length. */
uint8_t *read_whole_file(const char *path, size_t *size);

#endif
