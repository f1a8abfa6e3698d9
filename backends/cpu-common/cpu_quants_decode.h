/*
 * cpu_quants_decode.h — the scalar block decoders of the CPU plugins (cpu-avx,
 * cpu-neon): the single place that knows the element order inside each
 * block (documented in cpu_blocks.h). Static inline, so each file that
 * includes it inlines them where it uses them.
 */
#ifndef TESSERA_CPU_COMMON_CPU_QUANTS_DECODE_H
#define TESSERA_CPU_COMMON_CPU_QUANTS_DECODE_H

#include <stdint.h>

#include "cpu_blocks.h"

/* ------------------------------------------------------- block decoding */

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7). */
static inline void k4_scale_min(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q3_K: the 16 6-bit scales, minus 32. */
static inline void q3k_scales(const uint8_t *packed, int *sc) {
    for (int i = 0; i < 16; i++) {
        int low = i < 8 ? packed[i] & 0xF : packed[i - 8] >> 4;
        int high = (packed[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
        sc[i] = (low | (high << 4)) - 32;
    }
}

/* Integer values of the 32 elements of a 32-block (offsets not applied). */
static inline void decode_nibbles(const uint8_t *qs, uint8_t *q) {
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 0xF;
        q[j + 16] = qs[j] >> 4;
    }
}

static inline void add_high_bits(const uint8_t *qh4, uint8_t *q) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 32; j++) q[j] |= ((qh >> j) & 1) << 4;
}

/* K-quants: integer values of all 256 elements, with the per-group data. */
static inline void decode_q2k(const blk_q2_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, j = (e % 128) / 32, l = e % 32;
        q[e] = (int8_t)((b->qs[32 * n + l] >> (2 * j)) & 3);
    }
}

static inline void decode_q3k(const blk_q3_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, j = (e % 128) / 32, l = e % 32;
        int v = (b->qs[32 * n + l] >> (2 * j)) & 3;
        int high = (b->hmask[l] >> (4 * n + j)) & 1;
        q[e] = (int8_t)(v - (high ? 0 : 4));
    }
}

static inline void decode_q4k(const blk_q4_k *b, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(b->qs[32 * c + l] & 0xF);
            q[64 * c + 32 + l] = (int8_t)(b->qs[32 * c + l] >> 4);
        }
}

static inline void decode_q5k(const blk_q5_k *b, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = b->qs[32 * c + l] & 0xF, hi = b->qs[32 * c + l] >> 4;
            lo |= ((b->qh[l] >> (2 * c)) & 1) << 4;
            hi |= ((b->qh[l] >> (2 * c + 1)) & 1) << 4;
            q[64 * c + l] = (int8_t)lo;
            q[64 * c + 32 + l] = (int8_t)hi;
        }
}

static inline void decode_q6k(const blk_q6_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, k = (e % 128) / 32, l = e % 32;
        int low = b->ql[64 * n + l + 32 * (k & 1)];
        low = (k >> 1) ? low >> 4 : low & 0xF;
        int high = (b->qh[32 * n + l] >> (2 * k)) & 3;
        q[e] = (int8_t)((low | (high << 4)) - 32);
    }
}

#endif
