/* cpu_mm_quants — activation formats and plain C dot kernels (see
 * cpu_mm_quants.h); the block decoders are in cpu_quants_decode.h. */
#include "cpu_mm_quants.h"

#include <math.h>
#include <string.h>
#include <tessera/plugin.h>

#include "cpu_quants_decode.h"
#include <tessera/plugin_quants.h>

/* ----------------------------------------------------- activations */

act_kind quants_act_kind(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16: return ACT_F32;
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_MXFP4: return ACT_Q8;
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K: case TSR_DTYPE_Q5_K:
    case TSR_DTYPE_Q6_K: case TSR_DTYPE_IQ4_XS: case TSR_DTYPE_TQ1_0: case TSR_DTYPE_TQ2_0:
    case TSR_DTYPE_IQ2_XXS: case TSR_DTYPE_IQ2_XS: case TSR_DTYPE_IQ2_S: case TSR_DTYPE_IQ3_XXS:
    case TSR_DTYPE_IQ3_S: case TSR_DTYPE_IQ1_S: case TSR_DTYPE_IQ1_M: return ACT_Q8K;
    default: return ACT_NONE;
    }
}

size_t quants_act_row_bytes(act_kind kind, int64_t K) {
    switch (kind) {
    case ACT_F32: return (size_t)K * 4;
    case ACT_Q8: return (size_t)(K / 32) * sizeof(act8);
    case ACT_Q8K: return (size_t)(K / 256) * sizeof(act8k);
    case ACT_Q8P: return (size_t)((K + 127) / 128) * sizeof(act8p);
    default: return 0;
    }
}

void quants_act8p_from_f32(const float *x, act8p *y, int64_t n, int offset, act8_quantizer q8) {
    act8 blk[4];
    if (!q8) q8 = cpu_quants_act8_from_f32;
    for (int64_t g = 0; g < (n + 127) / 128; g++, x += 128) {
        int nblk = n - 128 * g >= 128 ? 4 : 2; /* n % 64 == 0 */
        q8(x, blk, 32 * nblk);
        memset(&y[g], 0, sizeof y[g]);
        for (int i = 0; i < nblk; i++) {
            memcpy(y[g].qs + 16 * i, blk[i].qs, 16);
            memcpy(y[g].qs + 64 + 16 * i, blk[i].qs + 16, 16);
        }
        for (int l = 0; l < 4 * nblk; l++) {
            const int8_t *lo = y[g].qs + 4 * l, *hi = y[g].qs + 64 + 4 * l;
            y[g].d[l] = blk[l / 4].d;
            y[g].corr[l] = -offset * (lo[0] + lo[1] + lo[2] + lo[3] + hi[0] + hi[1] + hi[2] + hi[3]);
        }
    }
}

/* ------------------------------------------------ plain C dot kernels */

#define ACT(c) ((const void *)((const uint8_t *)act + (size_t)(c) * act_stride))

static void dot_f32(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const float *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += x[k] * a[k];
        out[c] = s;
    }
}

static void dot_f16(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const uint16_t *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += cpu_fp16_to_f32(x[k]) * a[k];
        out[c] = s;
    }
}

static void dot_bf16(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const uint16_t *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += cpu_bf16_to_f32(x[k]) * a[k];
        out[c] = s;
    }
}

static inline int sum_u8_s8(const uint8_t *q, const int8_t *a, int n) {
    int s = 0;
    for (int j = 0; j < n; j++) s += q[j] * a[j];
    return s;
}

static inline int sum_s8_s8(const int8_t *q, const int8_t *a, int n) {
    int s = 0;
    for (int j = 0; j < n; j++) s += q[j] * a[j];
    return s;
}

/* 32-blocks: decode one weight block, then one integer dot per column. */
#define DOT32(NAME, BLK, DECODE, ACCUM)                                                  \
    static void NAME(int64_t K, const void *w, const void *act, size_t act_stride,       \
                     int nc, float *out) {                                               \
        const BLK *x = w;                                                                \
        float acc[CPU_NC] = {0};                                                         \
        uint8_t q[32];                                                                   \
        for (int64_t ib = 0; ib < K / 32; ib++) {                                        \
            const BLK *b = x + ib;                                                       \
            DECODE;                                                                      \
            for (int c = 0; c < nc; c++) {                                               \
                const act8 *a = (const act8 *)ACT(c) + ib;                               \
                int sumi = sum_u8_s8(q, a->qs, 32);                                      \
                ACCUM;                                                                   \
            }                                                                            \
        }                                                                                \
        for (int c = 0; c < nc; c++) out[c] = acc[c];                                    \
    }

DOT32(dot_q4_0, blk_q4_0, decode_nibbles(b->qs, q),
      acc[c] += cpu_fp16_to_f32(b->d) * a->d * (float)(sumi - 8 * a->isum))
DOT32(dot_q4_1, blk_q4_1, decode_nibbles(b->qs, q),
      acc[c] += cpu_fp16_to_f32(b->d) * a->d * (float)sumi + cpu_fp16_to_f32(b->m) * a->s)
DOT32(dot_q5_0, blk_q5_0, (decode_nibbles(b->qs, q), add_high_bits(b->qh, q)),
      acc[c] += cpu_fp16_to_f32(b->d) * a->d * (float)(sumi - 16 * a->isum))
DOT32(dot_q5_1, blk_q5_1, (decode_nibbles(b->qs, q), add_high_bits(b->qh, q)),
      acc[c] += cpu_fp16_to_f32(b->d) * a->d * (float)sumi + cpu_fp16_to_f32(b->m) * a->s)

static void dot_q8_0(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q8_0 *x = w;
    for (int c = 0; c < nc; c++) {
        const act8 *a = ACT(c);
        float acc = 0.0f;
        for (int64_t ib = 0; ib < K / 32; ib++)
            acc += cpu_fp16_to_f32(x[ib].d) * a[ib].d * (float)sum_s8_s8(x[ib].qs, a[ib].qs, 32);
        out[c] = acc;
    }
}

/* K-quants: per group of 16 (or 32) an integer dot times the group scale. */
static void dot_q2_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q2_k *x = w;
    int8_t q[256];
    float acc[CPU_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q2_k *b = x + ib;
        decode_q2k(b, q);
        float d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int isc = 0, imin = 0;
            for (int g = 0; g < 16; g++) {
                isc += (b->scales[g] & 0xF) * sum_s8_s8(q + 16 * g, a->qs + 16 * g, 16);
                imin += (b->scales[g] >> 4) * a->bsums[g];
            }
            acc[c] += a->d * (d * (float)isc - dmin * (float)imin);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

static void dot_q3_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q3_k *x = w;
    int8_t q[256];
    int sc[16];
    float acc[CPU_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q3_k *b = x + ib;
        decode_q3k(b, q);
        q3k_scales(b->scales, sc);
        float d = cpu_fp16_to_f32(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int isum = 0;
            for (int g = 0; g < 16; g++) isum += sc[g] * sum_s8_s8(q + 16 * g, a->qs + 16 * g, 16);
            acc[c] += a->d * d * (float)isum;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

static void dot_q45_k(int dtype, int64_t K, const void *w, const void *act, size_t act_stride,
                      int nc, float *out) {
    int8_t q[256];
    float acc[CPU_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const uint8_t *scales;
        float d, dmin;
        if (dtype == TSR_DTYPE_Q4_K) {
            const blk_q4_k *b = (const blk_q4_k *)w + ib;
            decode_q4k(b, q);
            scales = b->scales, d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
        } else {
            const blk_q5_k *b = (const blk_q5_k *)w + ib;
            decode_q5k(b, q);
            scales = b->scales, d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
        }
        int sc[8], mn[8];
        for (int j = 0; j < 8; j++) k4_scale_min(j, scales, &sc[j], &mn[j]);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int isc = 0, imin = 0;
            for (int j = 0; j < 8; j++) {
                isc += sc[j] * sum_s8_s8(q + 32 * j, a->qs + 32 * j, 32);
                imin += mn[j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
            }
            acc[c] += a->d * (d * (float)isc - dmin * (float)imin);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

static void dot_q4_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    dot_q45_k(TSR_DTYPE_Q4_K, K, w, act, act_stride, nc, out);
}

static void dot_q5_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    dot_q45_k(TSR_DTYPE_Q5_K, K, w, act, act_stride, nc, out);
}

static void dot_q6_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q6_k *x = w;
    int8_t q[256];
    float acc[CPU_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q6_k *b = x + ib;
        decode_q6k(b, q);
        float d = cpu_fp16_to_f32(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int isum = 0;
            for (int g = 0; g < 16; g++) isum += b->scales[g] * sum_s8_s8(q + 16 * g, a->qs + 16 * g, 16);
            acc[c] += a->d * d * (float)isum;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

/* The IQ, TQ and MXFP4 formats: each block decoded once (plugin_quants.h:
 * value = sc[e/16] * q[e]), then per column and group of 16 an integer
 * dot times the group's scale. 32-element types read act8, the others
 * act8k. */
static void dot_decoded(int32_t dtype, int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                        float *out) {
    const tsr_quant_decode_fn dec = tsr_quant_decoder(dtype);
    const int64_t bs = tsr_dtype_block_size(dtype), bb = tsr_dtype_block_bytes(dtype);
    int8_t q[256];
    float sc[16];
    float acc[CPU_NC] = {0};
    for (int64_t ib = 0; ib < K / bs; ib++) {
        dec((const uint8_t *)w + ib * bb, q, sc);
        for (int c = 0; c < nc; c++) {
            const int8_t *aq;
            float ad;
            if (bs == 32) {
                const act8 *a = (const act8 *)ACT(c) + ib;
                aq = a->qs, ad = a->d;
            } else {
                const act8k *a = (const act8k *)ACT(c) + ib;
                aq = a->qs, ad = a->d;
            }
            float s = 0.0f;
            for (int g = 0; g < bs / 16; g++) s += sc[g] * (float)sum_s8_s8(q + 16 * g, aq + 16 * g, 16);
            acc[c] += ad * s;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

#define DOT_DECODED(name, T)                                                                              \
    static void name(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) { \
        dot_decoded(T, K, w, act, act_stride, nc, out);                                                   \
    }
DOT_DECODED(dot_iq4_nl, TSR_DTYPE_IQ4_NL)
DOT_DECODED(dot_mxfp4, TSR_DTYPE_MXFP4)
DOT_DECODED(dot_iq4_xs, TSR_DTYPE_IQ4_XS)
DOT_DECODED(dot_tq1_0, TSR_DTYPE_TQ1_0)
DOT_DECODED(dot_tq2_0, TSR_DTYPE_TQ2_0)
DOT_DECODED(dot_iq2_xxs, TSR_DTYPE_IQ2_XXS)
DOT_DECODED(dot_iq2_xs, TSR_DTYPE_IQ2_XS)
DOT_DECODED(dot_iq2_s, TSR_DTYPE_IQ2_S)
DOT_DECODED(dot_iq3_xxs, TSR_DTYPE_IQ3_XXS)
DOT_DECODED(dot_iq3_s, TSR_DTYPE_IQ3_S)
DOT_DECODED(dot_iq1_s, TSR_DTYPE_IQ1_S)
DOT_DECODED(dot_iq1_m, TSR_DTYPE_IQ1_M)

cpu_dot_fn quants_scalar_dot(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: return dot_f32;
    case TSR_DTYPE_F16: return dot_f16;
    case TSR_DTYPE_BF16: return dot_bf16;
    case TSR_DTYPE_Q4_0: return dot_q4_0;
    case TSR_DTYPE_Q4_1: return dot_q4_1;
    case TSR_DTYPE_Q5_0: return dot_q5_0;
    case TSR_DTYPE_Q5_1: return dot_q5_1;
    case TSR_DTYPE_Q8_0: return dot_q8_0;
    case TSR_DTYPE_Q2_K: return dot_q2_k;
    case TSR_DTYPE_Q3_K: return dot_q3_k;
    case TSR_DTYPE_Q4_K: return dot_q4_k;
    case TSR_DTYPE_Q5_K: return dot_q5_k;
    case TSR_DTYPE_Q6_K: return dot_q6_k;
    case TSR_DTYPE_IQ4_NL: return dot_iq4_nl;
    case TSR_DTYPE_MXFP4: return dot_mxfp4;
    case TSR_DTYPE_IQ4_XS: return dot_iq4_xs;
    case TSR_DTYPE_TQ1_0: return dot_tq1_0;
    case TSR_DTYPE_TQ2_0: return dot_tq2_0;
    case TSR_DTYPE_IQ2_XXS: return dot_iq2_xxs;
    case TSR_DTYPE_IQ2_XS: return dot_iq2_xs;
    case TSR_DTYPE_IQ2_S: return dot_iq2_s;
    case TSR_DTYPE_IQ3_XXS: return dot_iq3_xxs;
    case TSR_DTYPE_IQ3_S: return dot_iq3_s;
    case TSR_DTYPE_IQ1_S: return dot_iq1_s;
    case TSR_DTYPE_IQ1_M: return dot_iq1_m;
    default: return NULL;
    }
}

/* ------------------------------------------ decoders for the kernels */

uint64_t quants_iq_sign8[128];

void quants_iq_sign8_init(void) {
    for (uint32_t i = 0; i < 128; i++) {
        const uint8_t s = tsr_iq_signs(i);
        uint64_t v = 0;
        for (int j = 0; j < 8; j++) v |= (uint64_t)((s >> j) & 1 ? 0xff : 0x01) << (8 * j);
        quants_iq_sign8[i] = v;
    }
}

void quants_decode_q2k(const blk_q2_k *b, int8_t *q) { decode_q2k(b, q); }
void quants_decode_q3k(const blk_q3_k *b, int8_t *q) { decode_q3k(b, q); }
void quants_decode_q5k(const blk_q5_k *b, int8_t *q) { decode_q5k(b, q); }
void quants_q3k_scales(const uint8_t *packed, int *sc) { q3k_scales(packed, sc); }

void quants_k4_scales(const uint8_t *packed, int *sc, int *mn) {
    for (int j = 0; j < 8; j++) k4_scale_min(j, packed, &sc[j], &mn[j]);
}
