/*
 * tessera/plugin_quants.h — the block structs and decoders of GGUF's IQ,
 * ternary (TQ) and MXFP4 weight formats, one definition for the host's
 * reference backend and every plugin.
 *
 * Each decoder turns one block into small integers and per-16 scales:
 *
 *     value of element e = sc[e / 16] * q[e]
 *
 * (q int8; 32 elements for IQ4_NL and MXFP4, 256 for the rest). The scale
 * is formed with the float operations llama.cpp's dequantizers use and
 * sc * q rounds once, so tsr_quant_dequant_block gives the same bits as
 * ggml's to_float (tests/tensor/test_quant_ref.c checks this on random
 * blocks dumped from ggml). Where a format adds a fraction to the grid
 * value (IQ1_S, IQ1_M: grid +- 1/8), q is eight times it and sc an eighth
 * of the scale, which is exact. Integer dot kernels use q and sc as they
 * are: sum_g sc[g] * sum(q * a) over each group of 16.
 *
 * Layouts (little-endian, packed; d is a binary16 scale):
 *   IQ4_NL  {d; qs[16]}          nibble j (low of qs[j], high of qs[j-16]) indexes TSR_IQ4NL_VALUES
 *   IQ4_XS  {d; u16 scales_h; scales_l[4]; qs[128]}  8 x 32: 6-bit scale (ls - 32) * d, nibbles as IQ4_NL
 *   MXFP4   {e; qs[16]}          E8M0 scale 2^(e-128) (half of 2^(e-127)) times doubled E2M1 values
 *   TQ1_0   {qs[48]; qh[4]; d}   5 (qh: 4) base-3 digits per byte, in fixed point: (q - 1) * d
 *   TQ2_0   {qs[64]; d}          2 bits per element: (q - 1) * d
 *   IQ2_XXS {d; u16 qs[32]}      8 x 32: 4 grid indices (8 bits), 4 x 7 sign bits, 4-bit scale
 *   IQ2_XS  {d; u16 qs[32]; scales[8]}  9-bit grid index + 7 sign bits per 8 values; 4-bit scales per 16
 *   IQ2_S   {d; qs[64]; qh[8]; scales[8]} 10-bit indices (2 high bits in qh), 8 sign bits per 8 values
 *   IQ3_XXS {d; qs[96]}          64 grid indices (4 values each), then 8 u32 of signs and scale
 *   IQ3_S   {d; qs[64]; qh[8]; signs[32]; scales[4]}  9-bit indices, 4-bit scales per 32
 *   IQ1_S   {d; qs[32]; u16 qh[8]}  11-bit indices into the +-1/0 grid, 3-bit scale, delta sign
 *   IQ1_M   {qs[32]; qh[16]; scales[8]}  as IQ1_S with 3-bit scales per 16; d in the scales' top nibbles
 * The grids are tessera/iq_grids.h (generated from llama.cpp's ggml).
 *
 * Header-only, C99, static inline; includes tessera/plugin_util.h.
 */
#ifndef TESSERA_PLUGIN_QUANTS_H
#define TESSERA_PLUGIN_QUANTS_H

#include <stdint.h>
#include <string.h>

#include "iq_grids.h"
#include "plugin_util.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_block_iq4_nl { uint16_t d; uint8_t qs[16]; } tsr_block_iq4_nl;
typedef struct tsr_block_iq4_xs { uint16_t d, scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } tsr_block_iq4_xs;
typedef struct tsr_block_mxfp4 { uint8_t e; uint8_t qs[16]; } tsr_block_mxfp4;
typedef struct tsr_block_tq1_0 { uint8_t qs[48]; uint8_t qh[4]; uint16_t d; } tsr_block_tq1_0;
typedef struct tsr_block_tq2_0 { uint8_t qs[64]; uint16_t d; } tsr_block_tq2_0;
typedef struct tsr_block_iq2_xxs { uint16_t d; uint16_t qs[32]; } tsr_block_iq2_xxs;
typedef struct tsr_block_iq2_xs { uint16_t d; uint16_t qs[32]; uint8_t scales[8]; } tsr_block_iq2_xs;
typedef struct tsr_block_iq2_s { uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t scales[8]; } tsr_block_iq2_s;
typedef struct tsr_block_iq3_xxs { uint16_t d; uint8_t qs[96]; } tsr_block_iq3_xxs;
typedef struct tsr_block_iq3_s {
    uint16_t d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4];
} tsr_block_iq3_s;
typedef struct tsr_block_iq1_s { uint16_t d; uint8_t qs[32]; uint16_t qh[8]; } tsr_block_iq1_s;
typedef struct tsr_block_iq1_m { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; } tsr_block_iq1_m;

#define TSR_QSIZE_CHECK_(type, bytes) typedef char type##_size_check_[sizeof(type) == (bytes) ? 1 : -1]
TSR_QSIZE_CHECK_(tsr_block_iq4_nl, 18);
TSR_QSIZE_CHECK_(tsr_block_iq4_xs, 136);
TSR_QSIZE_CHECK_(tsr_block_mxfp4, 17);
TSR_QSIZE_CHECK_(tsr_block_tq1_0, 54);
TSR_QSIZE_CHECK_(tsr_block_tq2_0, 66);
TSR_QSIZE_CHECK_(tsr_block_iq2_xxs, 66);
TSR_QSIZE_CHECK_(tsr_block_iq2_xs, 74);
TSR_QSIZE_CHECK_(tsr_block_iq2_s, 82);
TSR_QSIZE_CHECK_(tsr_block_iq3_xxs, 98);
TSR_QSIZE_CHECK_(tsr_block_iq3_s, 110);
TSR_QSIZE_CHECK_(tsr_block_iq1_s, 50);
TSR_QSIZE_CHECK_(tsr_block_iq1_m, 56);
#undef TSR_QSIZE_CHECK_

/* IQ4_NL's and IQ4_XS's 16 non-linear levels. */
static const int8_t TSR_IQ4NL_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
/* MXFP4: E2M1 values times 2 (the scale is halved to match). */
static const int8_t TSR_MXFP4_VALUES[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* E8M0 exponent byte e as float times 1/2: 2^(e-128) (subnormal below 2). */
static inline float tsr_e8m0_half(uint8_t e) {
    return tsr_f32_from_bits(e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23);
}

/* The 8 signs of a 7-bit sign index: bit 7 makes the count of minus signs
 * even. */
static inline uint8_t tsr_iq_signs(uint32_t i) {
    i &= 127;
    uint32_t p = i ^ (i >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return (uint8_t)(i | ((p & 1) << 7));
}

/* The 8 (or 4) bytes of a grid entry with the sign bits s applied. */
static inline void tsr_iq_grid8(uint64_t g, uint8_t s, int8_t *q) {
    for (int j = 0; j < 8; j++) {
        const int8_t v = (int8_t)((g >> (8 * j)) & 0xff);
        q[j] = (int8_t)((s >> j) & 1 ? -v : v);
    }
}
static inline void tsr_iq_grid4(uint32_t g, uint8_t s, int8_t *q) {
    for (int j = 0; j < 4; j++) {
        const int8_t v = (int8_t)((g >> (8 * j)) & 0xff);
        q[j] = (int8_t)((s >> j) & 1 ? -v : v);
    }
}

static inline uint32_t tsr_le32_(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline void tsr_decode_iq4_nl(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq4_nl *b = (const tsr_block_iq4_nl *)blk;
    sc[0] = sc[1] = tsr_fp16_to_f32(b->d);
    for (int j = 0; j < 16; j++) {
        q[j] = TSR_IQ4NL_VALUES[b->qs[j] & 0xf];
        q[j + 16] = TSR_IQ4NL_VALUES[b->qs[j] >> 4];
    }
}

static inline void tsr_decode_mxfp4(const void *blk, int8_t *q, float *sc) {
    const tsr_block_mxfp4 *b = (const tsr_block_mxfp4 *)blk;
    sc[0] = sc[1] = tsr_e8m0_half(b->e);
    for (int j = 0; j < 16; j++) {
        q[j] = TSR_MXFP4_VALUES[b->qs[j] & 0xf];
        q[j + 16] = TSR_MXFP4_VALUES[b->qs[j] >> 4];
    }
}

static inline void tsr_decode_iq4_xs(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq4_xs *b = (const tsr_block_iq4_xs *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const int ls = ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b->scales_h >> (2 * ib)) & 3) << 4);
        sc[2 * ib] = sc[2 * ib + 1] = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            q[32 * ib + j] = TSR_IQ4NL_VALUES[b->qs[16 * ib + j] & 0xf];
            q[32 * ib + 16 + j] = TSR_IQ4NL_VALUES[b->qs[16 * ib + j] >> 4];
        }
    }
}

/* TQ1_0: byte v holds base-3 digits as the fraction v/256 of 3^5; digit n
 * is the integer part of 3 * frac(v * 3^n / 256). */
static inline int tsr_tq1_digit(uint8_t v, int n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t x = (uint8_t)(v * pow3[n]);
    return ((uint16_t)x * 3) >> 8;
}

static inline void tsr_decode_tq1_0(const void *blk, int8_t *q, float *sc) {
    const tsr_block_tq1_0 *b = (const tsr_block_tq1_0 *)blk;
    for (int g = 0; g < 16; g++) sc[g] = tsr_fp16_to_f32(b->d);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 32; m++) q[32 * n + m] = (int8_t)(tsr_tq1_digit(b->qs[m], n) - 1);
    for (int n = 0; n < 5; n++)
        for (int m = 0; m < 16; m++) q[160 + 16 * n + m] = (int8_t)(tsr_tq1_digit(b->qs[32 + m], n) - 1);
    for (int n = 0; n < 4; n++)
        for (int m = 0; m < 4; m++) q[240 + 4 * n + m] = (int8_t)(tsr_tq1_digit(b->qh[m], n) - 1);
}

static inline void tsr_decode_tq2_0(const void *blk, int8_t *q, float *sc) {
    const tsr_block_tq2_0 *b = (const tsr_block_tq2_0 *)blk;
    for (int g = 0; g < 16; g++) sc[g] = tsr_fp16_to_f32(b->d);
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 4; l++)
            for (int m = 0; m < 32; m++) q[128 * h + 32 * l + m] = (int8_t)(((b->qs[32 * h + m] >> (2 * l)) & 3) - 1);
}

static inline void tsr_decode_iq2_xxs(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq2_xxs *b = (const tsr_block_iq2_xxs *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t idx = tsr_le32_((const uint8_t *)b->qs + 8 * ib);
        const uint32_t aux = tsr_le32_((const uint8_t *)b->qs + 8 * ib + 4);
        sc[2 * ib] = sc[2 * ib + 1] = d * (0.5f + (float)(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++)
            tsr_iq_grid8(tsr_iq2xxs_grid[(idx >> (8 * l)) & 0xff], tsr_iq_signs(aux >> (7 * l)), q + 32 * ib + 8 * l);
    }
}

static inline void tsr_decode_iq2_xs(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq2_xs *b = (const tsr_block_iq2_xs *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        sc[2 * ib] = d * (0.5f + (float)(b->scales[ib] & 0xf)) * 0.25f;
        sc[2 * ib + 1] = d * (0.5f + (float)(b->scales[ib] >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint16_t v = b->qs[4 * ib + l];
            tsr_iq_grid8(tsr_iq2xs_grid[v & 511], tsr_iq_signs(v >> 9), q + 32 * ib + 8 * l);
        }
    }
}

static inline void tsr_decode_iq2_s(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq2_s *b = (const tsr_block_iq2_s *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    const uint8_t *signs = b->qs + 32;
    for (int ib = 0; ib < 8; ib++) {
        sc[2 * ib] = d * (0.5f + (float)(b->scales[ib] & 0xf)) * 0.25f;
        sc[2 * ib + 1] = d * (0.5f + (float)(b->scales[ib] >> 4)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
            tsr_iq_grid8(tsr_iq2s_grid[idx], signs[4 * ib + l], q + 32 * ib + 8 * l);
        }
    }
}

static inline void tsr_decode_iq3_xxs(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq3_xxs *b = (const tsr_block_iq3_xxs *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t aux = tsr_le32_(b->qs + 64 + 4 * ib);
        sc[2 * ib] = sc[2 * ib + 1] = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            const uint8_t s = tsr_iq_signs(aux >> (7 * l));
            int8_t *o = q + 32 * ib + 8 * l;
            tsr_iq_grid4(tsr_iq3xxs_grid[b->qs[8 * ib + 2 * l]], s, o);
            tsr_iq_grid4(tsr_iq3xxs_grid[b->qs[8 * ib + 2 * l + 1]], (uint8_t)(s >> 4), o + 4);
        }
    }
}

static inline void tsr_decode_iq3_s(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq3_s *b = (const tsr_block_iq3_s *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const int s4 = b->scales[ib / 2];
        sc[2 * ib] = sc[2 * ib + 1] = d * (float)(1 + 2 * (ib % 2 ? s4 >> 4 : s4 & 0xf));
        const int qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            const uint8_t s = b->signs[4 * ib + l];
            int8_t *o = q + 32 * ib + 8 * l;
            tsr_iq_grid4(tsr_iq3s_grid[b->qs[8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256)], s, o);
            tsr_iq_grid4(tsr_iq3s_grid[b->qs[8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256)], (uint8_t)(s >> 4), o + 4);
        }
    }
}

/* IQ1_S/IQ1_M: 8 grid values (-1, 0, 1) times 8 plus delta (+-1). */
static inline void tsr_iq1_grid(int idx, int delta, int8_t *q) {
    const uint64_t g = tsr_iq1s_grid[idx];
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(8 * (int8_t)((g >> (8 * j)) & 0xff) + delta);
}

static inline void tsr_decode_iq1_s(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq1_s *b = (const tsr_block_iq1_s *)blk;
    const float d = tsr_fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        const int h = b->qh[ib];
        sc[2 * ib] = sc[2 * ib + 1] = d * (float)(2 * ((h >> 12) & 7) + 1) * 0.125f;
        const int delta = h & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; l++) tsr_iq1_grid(b->qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8), delta, q + 32 * ib + 8 * l);
    }
}

static inline void tsr_decode_iq1_m(const void *blk, int8_t *q, float *sc) {
    const tsr_block_iq1_m *b = (const tsr_block_iq1_m *)blk;
    uint16_t s[4];
    memcpy(s, b->scales, 8);
    const uint16_t dh = (uint16_t)((s[0] >> 12) | ((s[1] >> 8) & 0x00f0) | ((s[2] >> 4) & 0x0f00) | (s[3] & 0xf000));
    const float d = tsr_fp16_to_f32(dh);
    for (int ib = 0; ib < 8; ib++) {
        const int sh = 6 * (ib % 2);
        sc[2 * ib] = d * (float)(2 * ((s[ib / 2] >> sh) & 7) + 1) * 0.125f;
        sc[2 * ib + 1] = d * (float)(2 * ((s[ib / 2] >> (sh + 3)) & 7) + 1) * 0.125f;
        const uint8_t *qs = b->qs + 4 * ib, *qh = b->qh + 2 * ib;
        int8_t *o = q + 32 * ib;
        tsr_iq1_grid(qs[0] | ((qh[0] << 8) & 0x700), qh[0] & 0x08 ? -1 : 1, o);
        tsr_iq1_grid(qs[1] | ((qh[0] << 4) & 0x700), qh[0] & 0x80 ? -1 : 1, o + 8);
        tsr_iq1_grid(qs[2] | ((qh[1] << 8) & 0x700), qh[1] & 0x08 ? -1 : 1, o + 16);
        tsr_iq1_grid(qs[3] | ((qh[1] << 4) & 0x700), qh[1] & 0x80 ? -1 : 1, o + 24);
    }
}

/* The decoder of dtype (NULL if it is none of the formats above). */
typedef void (*tsr_quant_decode_fn)(const void *blk, int8_t *q, float *sc);

static inline tsr_quant_decode_fn tsr_quant_decoder(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_IQ4_NL: return tsr_decode_iq4_nl;
    case TSR_DTYPE_IQ4_XS: return tsr_decode_iq4_xs;
    case TSR_DTYPE_MXFP4: return tsr_decode_mxfp4;
    case TSR_DTYPE_TQ1_0: return tsr_decode_tq1_0;
    case TSR_DTYPE_TQ2_0: return tsr_decode_tq2_0;
    case TSR_DTYPE_IQ2_XXS: return tsr_decode_iq2_xxs;
    case TSR_DTYPE_IQ2_XS: return tsr_decode_iq2_xs;
    case TSR_DTYPE_IQ2_S: return tsr_decode_iq2_s;
    case TSR_DTYPE_IQ3_XXS: return tsr_decode_iq3_xxs;
    case TSR_DTYPE_IQ3_S: return tsr_decode_iq3_s;
    case TSR_DTYPE_IQ1_S: return tsr_decode_iq1_s;
    case TSR_DTYPE_IQ1_M: return tsr_decode_iq1_m;
    default: return NULL;
    }
}

/* Dequantize n elements (whole blocks) of dtype, which must have a decoder. */
static inline void tsr_quant_dequant_row(int32_t dtype, const void *src, float *y, int64_t n) {
    const tsr_quant_decode_fn dec = tsr_quant_decoder(dtype);
    const int64_t bs = tsr_dtype_block_size(dtype), bb = tsr_dtype_block_bytes(dtype);
    int8_t q[256];
    float sc[16];
    for (int64_t i = 0; i < n / bs; i++, y += bs) {
        dec((const uint8_t *)src + i * bb, q, sc);
        for (int64_t e = 0; e < bs; e++) y[e] = sc[e / 16] * (float)q[e];
    }
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_QUANTS_H */
