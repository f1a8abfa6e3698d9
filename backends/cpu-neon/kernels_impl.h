/*
 * kernels_impl.h — the NEON kernels, compiled once per feature level by
 * kernels_<level>.c, which define KERNELS_INIT, KERNELS_NAME,
 * KERNELS_DOTPROD (0/1: sdot) and KERNELS_I8MM (0/1: smmla) before including
 * this file; meson.build gives each the matching -march.
 *
 * Every dot kernel computes one weight row against nc <= CPU_NC activation
 * columns (out[c] = sum_k w[k] * a_c[k]), so a weight block is loaded and
 * unpacked once and reused for all columns: the GEMM driver (cpu_matmul.c) tiles
 * columns in fours for prompt processing and calls with nc = 1 for decoding,
 * where the loop is bound by reading the weights. The i8mm tiles compute
 * 2 rows x 2 columns. The straightforward version of each kernel is the
 * plain C kernel of the same name in cpu_mm_quants.c: one integer dot per block
 * (or group) and column, times the block's scales.
 *
 * Integer layout: weights are unpacked to signed 8-bit values with their
 * zero point already subtracted (Q4_0: q-8, Q5_0: q-16, Q6_K: q-32), in
 * element order, so one s8 x s8 dot against the act8/act8k values (cpu_blocks.h)
 * gives the block's integer sum directly.
 */
#include <arm_neon.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"
#include <tessera/plugin_quants.h>

#define ACT(c) ((const void *)((const uint8_t *)act + (size_t)(c) * act_stride))

/* fp16 -> f32 by the scalar fcvt (ARMv8.0): 2 instructions per scale where
 * cpu_fp16_to_f32's bit arithmetic takes ~15; exact either way. */
static inline float f16s(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

/* --------------------------------------------------------- float dots */

/* 4 f16 / bf16 values widened to f32 (fcvtl is ARMv8.0 Advanced SIMD). */
static inline float32x4_t load4_f16(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline float32x4_t load4_bf16(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

static inline float w_f16(uint16_t v) { return f16s(v); }
static inline float w_bf16(uint16_t v) { return cpu_bf16_to_f32(v); }

/* The dot kernel NAME: NAME##_nc (always inline, nc a parameter) copied
 * once per column count, so each copy's column loop unrolls and its
 * accumulators stay in registers (decoding, nc = 1, has no column
 * bookkeeping at all). */
#define NC_DISPATCH(NAME)                                                                          \
    static void NAME(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) { \
        switch (nc) {                                                                              \
        case 1: NAME##_nc(K, w, act, act_stride, 1, out); break;                                   \
        case 2: NAME##_nc(K, w, act, act_stride, 2, out); break;                                   \
        case 3: NAME##_nc(K, w, act, act_stride, 3, out); break;                                   \
        default: NAME##_nc(K, w, act, act_stride, 4, out); break;                                  \
        }                                                                                          \
    }

/* F16/BF16 weights x f32 activations: 8 weights widened per step, one FMA
 * per column and half (two chains per column). Like ggml's vec_dot_f16, only
 * the first K & ~31 elements go through the vector loop; the rest (all of a
 * short row, e.g. attention over few cells or a head of 8) are summed in
 * double: tiny models are sensitive enough to that order that llama.cpp's
 * logits depend on it. Straightforward version: dot_f16/dot_bf16 in cpu_mm_quants.c. */
#define FLOAT_DOT(NAME, T, LOADW, SCALARW)                                                 \
    static inline __attribute__((always_inline)) void NAME##_nc(                           \
        int64_t K, const void *w, const void *act, size_t act_stride, const int nc,       \
        float *out) {                                                                      \
        const T *x = w;                                                                    \
        const float *ac[CPU_NC];                                                          \
        float32x4_t s[CPU_NC][2];                                                         \
        for (int c = 0; c < CPU_NC; c++) {                                                \
            ac[c] = ACT(c < nc ? c : 0);                                                   \
            s[c][0] = s[c][1] = vdupq_n_f32(0.0f);                                         \
        }                                                                                  \
        const int64_t kv = K & ~(int64_t)31;                                               \
        for (int64_t k = 0; k < kv; k += 8) {                                              \
            float32x4_t w0 = LOADW(x + k), w1 = LOADW(x + k + 4);                          \
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {                         \
                s[c][0] = vfmaq_f32(s[c][0], w0, vld1q_f32(ac[c] + k));                    \
                s[c][1] = vfmaq_f32(s[c][1], w1, vld1q_f32(ac[c] + k + 4));                \
            }                                                                              \
        }                                                                                  \
        for (int c = 0; c < nc; c++) {                                                     \
            double r = (double)vaddvq_f32(vaddq_f32(s[c][0], s[c][1]));                    \
            for (int64_t j = kv; j < K; j++) r += (double)(SCALARW(x[j]) * ac[c][j]);      \
            out[c] = (float)r;                                                             \
        }                                                                                  \
    }                                                                                      \
    NC_DISPATCH(NAME)

FLOAT_DOT(dot_f16_v, uint16_t, load4_f16, w_f16)
FLOAT_DOT(dot_bf16_v, uint16_t, load4_bf16, w_bf16)

/* F32 weights: products and sums in double, as the ref oracle does. F32
 * weights only occur in small models, whose logits are sensitive enough to
 * summation order to miss llama.cpp's by more than 1e-3 with f32 sums; the
 * cost (half the f32 rate) does not matter there. Straightforward version:
 * dot_f32 in cpu_mm_quants.c, in double. */
static void dot_f32_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const float *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        float64x2_t s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            float32x4_t xv = vld1q_f32(x + k), av = vld1q_f32(a + k);
            s0 = vfmaq_f64(s0, vcvt_f64_f32(vget_low_f32(xv)), vcvt_f64_f32(vget_low_f32(av)));
            s1 = vfmaq_f64(s1, vcvt_high_f64_f32(xv), vcvt_high_f64_f32(av));
        }
        double r = vaddvq_f64(vaddq_f64(s0, s1));
        for (; k < K; k++) r += (double)x[k] * (double)a[k];
        out[c] = (float)r;
    }
}

/* ------------------------------------------------ 8-bit integer products */

/* acc[i] += sum of a[4i..4i+3] * b[4i..4i+3] (which lanes get which products
 * differs between the two versions; only the lane total matters). Baseline:
 * widening multiplies into i16 (|a| <= 128, |b| <= 127, so a pair of
 * products fits) and a pairwise add into i32. */
static inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if KERNELS_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    p = vmlal_high_s8(p, a, b);
    return vpadalq_s16(acc, p);
#endif
}

/* The 32 signed values of a 32-block, elements 0..15 in v[0], 16..31 in
 * v[1], zero point subtracted for the _0 types. */
typedef struct { int8x16_t v[2]; } q32x2;

static inline q32x2 nibbles(const uint8_t *qs) {
    uint8x16_t b = vld1q_u8(qs);
    q32x2 q = {{vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f))), vreinterpretq_s8_u8(vshrq_n_u8(b, 4))}};
    return q;
}

/* Q5: bit j of the little-endian u32 qh is the 5th bit of element j. */
static inline q32x2 add_fifth_bit(q32x2 q, const uint8_t *qh) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    /* byte i / 8 of qh in lane i: one tbl per 16 elements from the u32 */
    static const uint8_t idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    const uint8x16_t sel = vld1q_u8(bit), sixteen = vdupq_n_u8(0x10);
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    const uint8x16_t hb = vreinterpretq_u8_u32(vdupq_n_u32(h));
    uint8x16_t h0 = vqtbl1q_u8(hb, vld1q_u8(idx)), h1 = vqtbl1q_u8(hb, vld1q_u8(idx + 16));
    q.v[0] = vorrq_s8(q.v[0], vreinterpretq_s8_u8(vandq_u8(vtstq_u8(h0, sel), sixteen)));
    q.v[1] = vorrq_s8(q.v[1], vreinterpretq_s8_u8(vandq_u8(vtstq_u8(h1, sel), sixteen)));
    return q;
}

static inline q32x2 offset(q32x2 q, int z) {
    q.v[0] = vsubq_s8(q.v[0], vdupq_n_s8((int8_t)z));
    q.v[1] = vsubq_s8(q.v[1], vdupq_n_s8((int8_t)z));
    return q;
}

static inline q32x2 unpack_q4_0(const void *blk) { return offset(nibbles(((const blk_q4_0 *)blk)->qs), 8); }
static inline q32x2 unpack_q4_1(const void *blk) { return nibbles(((const blk_q4_1 *)blk)->qs); }
static inline q32x2 unpack_q5_0(const void *blk) {
    const blk_q5_0 *b = blk;
    return offset(add_fifth_bit(nibbles(b->qs), b->qh), 16);
}
static inline q32x2 unpack_q5_1(const void *blk) {
    const blk_q5_1 *b = blk;
    return add_fifth_bit(nibbles(b->qs), b->qh);
}
static inline q32x2 unpack_q8_0(const void *blk) {
    const blk_q8_0 *b = blk;
    q32x2 q = {{vld1q_s8(b->qs), vld1q_s8(b->qs + 16)}};
    return q;
}

/* Scale d and min m of a 32-block (m = 0 for the _0 types). */
static inline float scale_q4_0(const void *b) { return f16s(((const blk_q4_0 *)b)->d); }
static inline float scale_q4_1(const void *b) { return f16s(((const blk_q4_1 *)b)->d); }
static inline float scale_q5_0(const void *b) { return f16s(((const blk_q5_0 *)b)->d); }
static inline float scale_q5_1(const void *b) { return f16s(((const blk_q5_1 *)b)->d); }
static inline float scale_q8_0(const void *b) { return f16s(((const blk_q8_0 *)b)->d); }
static inline float min_q4_1(const void *b) { return f16s(((const blk_q4_1 *)b)->m); }
static inline float min_q5_1(const void *b) { return f16s(((const blk_q5_1 *)b)->m); }
static inline float min_none(const void *b) { (void)b; return 0.0f; }

/* 32-block types x act8: per block and column one integer dot (two dot16),
 * converted and scaled by d_w * d_a into a vector accumulator; the _1 types
 * add m_w * s_a (s_a = d_a * sum(a), precomputed in act8). One copy per
 * column count (nc a constant in each), so the column loop unrolls and the
 * accumulators stay in registers: decoding (nc = 1) runs with no column
 * bookkeeping at all. */
#define DOT32(NAME, BLK, UNPACK, SCALE, MIN, HAS_MIN)                                      \
    static inline __attribute__((always_inline)) void NAME##_nc(                           \
        int64_t K, const void *w, const void *act, size_t act_stride, const int nc,       \
        float *out) {                                                                      \
        const BLK *x = w;                                                                  \
        const int64_t nb = K / 32;                                                         \
        float32x4_t acc[CPU_NC];                                                          \
        float macc[CPU_NC];                                                               \
        for (int c = 0; c < CPU_NC; c++) acc[c] = vdupq_n_f32(0.0f), macc[c] = 0.0f;      \
        for (int64_t ib = 0; ib < nb; ib++) {                                              \
            q32x2 q = UNPACK(x + ib);                                                      \
            float dw = SCALE(x + ib);                                                      \
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {                         \
                const act8 *a = (const act8 *)ACT(c) + ib;                                 \
                int32x4_t p = dot16(vdupq_n_s32(0), q.v[0], vld1q_s8(a->qs));              \
                p = dot16(p, q.v[1], vld1q_s8(a->qs + 16));                                \
                acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(p), dw * a->d);                 \
                if (HAS_MIN) macc[c] += MIN(x + ib) * a->s;                                \
            }                                                                              \
        }                                                                                  \
        for (int c = 0; c < nc; c++) out[c] = vaddvq_f32(acc[c]) + macc[c];                \
    }                                                                                      \
    NC_DISPATCH(NAME)

DOT32(dot_q4_0_v, blk_q4_0, unpack_q4_0, scale_q4_0, min_none, 0)
DOT32(dot_q4_1_v, blk_q4_1, unpack_q4_1, scale_q4_1, min_q4_1, 1)
DOT32(dot_q5_0_v, blk_q5_0, unpack_q5_0, scale_q5_0, min_none, 0)
DOT32(dot_q5_1_v, blk_q5_1, unpack_q5_1, scale_q5_1, min_q5_1, 1)
DOT32(dot_q8_0_v, blk_q8_0, unpack_q8_0, scale_q8_0, min_none, 0)

/* IQ4_NL, MXFP4, IQ4_XS: nibbles index a 16-entry table of int8 levels
 * (plugin_quants.h), one tbl per 16 values. */
static inline q32x2 lookup16(q32x2 q, const int8_t *values) {
    const int8x16_t t = vld1q_s8(values);
    q.v[0] = vqtbl1q_s8(t, vreinterpretq_u8_s8(q.v[0]));
    q.v[1] = vqtbl1q_s8(t, vreinterpretq_u8_s8(q.v[1]));
    return q;
}
static inline q32x2 unpack_iq4_nl(const void *blk) {
    return lookup16(nibbles(((const tsr_block_iq4_nl *)blk)->qs), TSR_IQ4NL_VALUES);
}
static inline q32x2 unpack_mxfp4(const void *blk) {
    return lookup16(nibbles(((const tsr_block_mxfp4 *)blk)->qs), TSR_MXFP4_VALUES);
}
static inline float scale_iq4_nl(const void *b) { return f16s(((const tsr_block_iq4_nl *)b)->d); }
static inline float scale_mxfp4(const void *b) { return tsr_e8m0_half(((const tsr_block_mxfp4 *)b)->e); }
DOT32(dot_iq4_nl_v, tsr_block_iq4_nl, unpack_iq4_nl, scale_iq4_nl, min_none, 0)
DOT32(dot_mxfp4_v, tsr_block_mxfp4, unpack_mxfp4, scale_mxfp4, min_none, 0)

/* IQ4_XS x act8k: per 32-element sub-block an integer dot times its 6-bit
 * scale (ls - 32), summed in i32; one float FMA per block and column. */
static inline __attribute__((always_inline)) void dot_iq4_xs_v_nc(int64_t K, const void *w, const void *act,
                                                                 size_t act_stride, const int nc, float *out) {
    const tsr_block_iq4_xs *x = w;
    float32x4_t acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = vdupq_n_f32(0.0f);
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const tsr_block_iq4_xs *b = x + ib;
        int32x4_t isum[CPU_NC];
        for (int c = 0; c < CPU_NC; c++) isum[c] = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const int ls = (((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((b->scales_h >> (2 * j)) & 3) << 4)) - 32;
            const q32x2 q = lookup16(nibbles(b->qs + 16 * j), TSR_IQ4NL_VALUES);
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {
                const act8k *a = (const act8k *)ACT(c) + ib;
                int32x4_t p = dot16(vdupq_n_s32(0), q.v[0], vld1q_s8(a->qs + 32 * j));
                p = dot16(p, q.v[1], vld1q_s8(a->qs + 32 * j + 16));
                isum[c] = vmlaq_n_s32(isum[c], p, ls);
            }
        }
        const float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(isum[c]), d * a->d);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = vaddvq_f32(acc[c]);
}
NC_DISPATCH(dot_iq4_xs_v)

/* The grid IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 * IQ1_M) x act8k, per 32-element sub-block: the weights' magnitudes
 * gathered from the grids of tessera/iq_grids.h (the one copy of them),
 * one 8-byte entry per 8 weights (IQ3: 4 bytes per 4), as two int8x16_t;
 * the signs applied to them as +1/-1 bytes (a multiply; 7-bit sign indices
 * expand through quants_iq_sign8, built at init from tsr_iq_signs, and
 * IQ2_S/IQ3_S's explicit sign bits through vtst; IQ1's grid is signed
 * already, see iq1_w16); one integer dot (dot16) times the sub-block's (or
 * 16-group's) odd scale 2s + 1 summed in i32, one float FMA per block and
 * column with d times the format's 1/8 (IQ2, IQ1) or 1/4 (IQ3_XXS).
 * TQ1_0/TQ2_0 follow (TQ_DOT). Straightforward version of all: dot_decoded
 * in cpu_mm_quants.c (the same integer sums per group; it applies the
 * scales in float per 16, so the results differ in the last bits). */

static inline int8x16_t pair8(uint64_t lo, uint64_t hi) {
    return vreinterpretq_s8_u64(vcombine_u64(vcreate_u64(lo), vcreate_u64(hi)));
}

static inline int8x16_t quad4(const uint32_t *t, const uint8_t *i, uint32_t h, int hshift) {
    /* entries i[m] | (bit m of h) << 8 (hshift 8; IQ3_XXS: h = 0) */
    const uint32_t v[4] = {t[i[0] | ((h << hshift) & 256)], t[i[1] | ((h << (hshift - 1)) & 256)],
                           t[i[2] | ((h << (hshift - 2)) & 256)], t[i[3] | ((h << (hshift - 3)) & 256)]};
    return vreinterpretq_s8_u32(vld1q_u32(v));
}

/* +1/-1 bytes of the four 7-bit sign indices in the low 28 bits of aux
 * (IQ2_XXS, IQ3_XXS): elements 0..15 in s[0], 16..31 in s[1]. */
static inline void signs_aux28(uint32_t aux, int8x16_t *s) {
    s[0] = pair8(quants_iq_sign8[aux & 127], quants_iq_sign8[(aux >> 7) & 127]);
    s[1] = pair8(quants_iq_sign8[(aux >> 14) & 127], quants_iq_sign8[(aux >> 21) & 127]);
}

/* +1/-1 bytes of the 16 sign bits at s (bit k: element k). */
static inline int8x16_t signs_bits16(const uint8_t *s) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint16_t h;
    memcpy(&h, s, 2);
    const uint8x16_t b = vcombine_u8(vdup_n_u8((uint8_t)h), vdup_n_u8((uint8_t)(h >> 8)));
    return vreinterpretq_s8_u8(vorrq_u8(vtstq_u8(b, vld1q_u8(bit)), vdupq_n_u8(1)));
}

/* One sub-block: the signed weights of elements 0..15 ([0]) and 16..31
 * ([1]), and their scales. The grid types make them as magnitude times
 * +1/-1 (signed_grid). */
typedef struct {
    int8x16_t w[2];
    int ls[2];
} iq_sub;

static inline int8x16_t signed_grid(int8x16_t g, int8x16_t s) { return vmulq_s8(g, s); }

/* The scale of a block times the format's fraction (1/8 for IQ2 and IQ1,
 * 1/4 for IQ3_XXS). */
static inline float dw_eighth(uint16_t d) { return 0.125f * f16s(d); }
static inline float dw_quarter(uint16_t d) { return 0.25f * f16s(d); }
#define IQ_DW_EIGHTH(b) dw_eighth((b)->d)
#define IQ_DW_QUARTER(b) dw_quarter((b)->d)
#define IQ_DW_ONE(b) f16s((b)->d)

#define IQ_GRID_DOT(NAME, BLK, SUB, DW)                                                               \
    static inline __attribute__((always_inline)) void NAME##_nc(int64_t K, const void *w, const void *act, \
                                                               size_t act_stride, const int nc, float *out) { \
        const BLK *x = w;                                                                             \
        float32x4_t acc[CPU_NC];                                                                      \
        for (int c = 0; c < CPU_NC; c++) acc[c] = vdupq_n_f32(0.0f);                                  \
        for (int64_t ib = 0; ib < K / 256; ib++) {                                                    \
            const BLK *b = x + ib;                                                                    \
            int32x4_t isum[CPU_NC];                                                                   \
            for (int c = 0; c < CPU_NC; c++) isum[c] = vdupq_n_s32(0);                                \
            for (int j = 0; j < 8; j++) {                                                             \
                const iq_sub u = SUB(b, j);                                                           \
                const int8x16_t w0 = u.w[0], w1 = u.w[1];                                             \
                _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {                                \
                    const int8_t *aq = ((const act8k *)ACT(c) + ib)->qs + 32 * j;                     \
                    isum[c] = vmlaq_n_s32(isum[c], dot16(vdupq_n_s32(0), w0, vld1q_s8(aq)), u.ls[0]); \
                    isum[c] = vmlaq_n_s32(isum[c], dot16(vdupq_n_s32(0), w1, vld1q_s8(aq + 16)), u.ls[1]); \
                }                                                                                     \
            }                                                                                         \
            const float d = DW(b);                                                                    \
            for (int c = 0; c < nc; c++)                                                              \
                acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(isum[c]), d * ((const act8k *)ACT(c) + ib)->d); \
        }                                                                                             \
        for (int c = 0; c < nc; c++) out[c] = vaddvq_f32(acc[c]);                                     \
    }                                                                                                 \
    NC_DISPATCH(NAME)

/* IQ2_XXS: 4 grid indices (u8), then a u32 of four 7-bit sign indices and
 * the scale s in its top 4 bits. */
static inline iq_sub iq2_xxs_sub(const tsr_block_iq2_xxs *b, int j) {
    const uint8_t *q = (const uint8_t *)b->qs + 8 * j;
    uint32_t aux;
    memcpy(&aux, q + 4, 4);
    const int ls = 2 * (int)(aux >> 28) + 1;
    int8x16_t s[2];
    signs_aux28(aux, s);
    return (iq_sub){{signed_grid(pair8(tsr_iq2xxs_grid[q[0]], tsr_iq2xxs_grid[q[1]]), s[0]),
                     signed_grid(pair8(tsr_iq2xxs_grid[q[2]], tsr_iq2xxs_grid[q[3]]), s[1])},
                    {ls, ls}};
}
IQ_GRID_DOT(dot_iq2_xxs_v, tsr_block_iq2_xxs, iq2_xxs_sub, IQ_DW_EIGHTH)

/* IQ2_XS: per 8 weights a u16 (9-bit grid index, 7-bit sign index);
 * 4-bit scales per 16. */
static inline iq_sub iq2_xs_sub(const tsr_block_iq2_xs *b, int j) {
    const uint16_t *q = b->qs + 4 * j;
    return (iq_sub){{signed_grid(pair8(tsr_iq2xs_grid[q[0] & 511], tsr_iq2xs_grid[q[1] & 511]),
                                 pair8(quants_iq_sign8[q[0] >> 9], quants_iq_sign8[q[1] >> 9])),
                     signed_grid(pair8(tsr_iq2xs_grid[q[2] & 511], tsr_iq2xs_grid[q[3] & 511]),
                                 pair8(quants_iq_sign8[q[2] >> 9], quants_iq_sign8[q[3] >> 9]))},
                    {2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1}};
}
IQ_GRID_DOT(dot_iq2_xs_v, tsr_block_iq2_xs, iq2_xs_sub, IQ_DW_EIGHTH)

/* IQ2_S: 10-bit grid indices (2 high bits per index in qh[j]), 8 sign bits
 * per 8 weights in qs[32..63]; scales as IQ2_XS. */
static inline iq_sub iq2_s_sub(const tsr_block_iq2_s *b, int j) {
    const uint8_t *q = b->qs + 4 * j;
    const uint32_t h = b->qh[j];
    return (iq_sub){{signed_grid(pair8(tsr_iq2s_grid[q[0] | (h << 8 & 0x300)], tsr_iq2s_grid[q[1] | (h << 6 & 0x300)]),
                                 signs_bits16(q + 32)),
                     signed_grid(pair8(tsr_iq2s_grid[q[2] | (h << 4 & 0x300)], tsr_iq2s_grid[q[3] | (h << 2 & 0x300)]),
                                 signs_bits16(q + 34))},
                    {2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1}};
}
IQ_GRID_DOT(dot_iq2_s_v, tsr_block_iq2_s, iq2_s_sub, IQ_DW_EIGHTH)

/* IQ3_XXS: 8 grid indices (u8, 4 values each), then per sub-block a u32 of
 * four 7-bit sign indices and the scale. */
static inline iq_sub iq3_xxs_sub(const tsr_block_iq3_xxs *b, int j) {
    const uint8_t *q = b->qs + 8 * j;
    uint32_t aux;
    memcpy(&aux, b->qs + 64 + 4 * j, 4);
    const int ls = 2 * (int)(aux >> 28) + 1;
    int8x16_t s[2];
    signs_aux28(aux, s);
    return (iq_sub){{signed_grid(quad4(tsr_iq3xxs_grid, q, 0, 8), s[0]),
                     signed_grid(quad4(tsr_iq3xxs_grid, q + 4, 0, 8), s[1])},
                    {ls, ls}};
}
IQ_GRID_DOT(dot_iq3_xxs_v, tsr_block_iq3_xxs, iq3_xxs_sub, IQ_DW_QUARTER)

/* IQ3_S: 9-bit grid indices (bit m of qh[j] the 9th of index m), 8 sign
 * bits per 8 weights, a 4-bit scale per sub-block: d (2s + 1). */
static inline iq_sub iq3_s_sub(const tsr_block_iq3_s *b, int j) {
    const uint8_t *q = b->qs + 8 * j;
    const int ls = 2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15) + 1;
    return (iq_sub){{signed_grid(quad4(tsr_iq3s_grid, q, b->qh[j], 8), signs_bits16(b->signs + 4 * j)),
                     signed_grid(quad4(tsr_iq3s_grid, q + 4, b->qh[j] >> 4u, 8), signs_bits16(b->signs + 4 * j + 2))},
                    {ls, ls}};
}
IQ_GRID_DOT(dot_iq3_s_v, tsr_block_iq3_s, iq3_s_sub, IQ_DW_ONE)

/* IQ1_S and IQ1_M: weights 8g + delta as bytes, g (-1, 0, 1) from two
 * 8-byte entries of tsr_iq1s_grid per 16 weights (g = -1 is 0xff, so a
 * byte shift by 3 gives -8), delta +-1 per 8 or per sub-block;
 * |8g + delta| <= 9. The format's 1/8 goes with d. */
static inline int8x16_t iq1_w16(uint32_t i0, uint32_t i1, int8x16_t delta) {
    return vaddq_s8(vshlq_n_s8(pair8(tsr_iq1s_grid[i0], tsr_iq1s_grid[i1]), 3), delta);
}

/* IQ1_S: per sub-block 4 bytes of index and a u16 qh: 3 more index bits
 * per 8 weights, a 3-bit scale s (2s + 1) and the sign of delta (bit 15). */
static inline iq_sub iq1_s_sub(const tsr_block_iq1_s *b, int j) {
    const uint8_t *q = b->qs + 4 * j;
    const uint32_t h = b->qh[j];
    const int8x16_t delta = vdupq_n_s8(h & 0x8000 ? -1 : 1);
    const int ls = 2 * (int)(h >> 12 & 7) + 1;
    return (iq_sub){{iq1_w16(q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), delta),
                     iq1_w16(q[2] | (h << 2 & 0x700), q[3] | (h >> 1 & 0x700), delta)},
                    {ls, ls}};
}
IQ_GRID_DOT(dot_iq1_s_v, tsr_block_iq1_s, iq1_s_sub, IQ_DW_EIGHTH)

/* IQ1_M: indices as IQ1_S with the 3 high bits and the delta sign of each
 * 8 weights in a nibble of qh (bit 3: delta of the low 8); 3-bit scales
 * per 16 in the four u16 of scales, whose top nibbles hold d. */
static inline int8x16_t iq1_m_delta(uint32_t h) {
    return vcombine_s8(vdup_n_s8(h & 0x08 ? -1 : 1), vdup_n_s8(h & 0x80 ? -1 : 1));
}

static inline iq_sub iq1_m_sub(const tsr_block_iq1_m *b, int j) {
    const uint8_t *q = b->qs + 4 * j;
    const uint32_t h0 = b->qh[2 * j], h1 = b->qh[2 * j + 1];
    uint16_t sc;
    memcpy(&sc, b->scales + 2 * (j / 2), 2);
    const uint32_t s = (uint32_t)sc >> (6 * (j % 2));
    return (iq_sub){{iq1_w16(q[0] | (h0 << 8 & 0x700), q[1] | (h0 << 4 & 0x700), iq1_m_delta(h0)),
                     iq1_w16(q[2] | (h1 << 8 & 0x700), q[3] | (h1 << 4 & 0x700), iq1_m_delta(h1))},
                    {2 * (int)(s & 7) + 1, 2 * (int)(s >> 3 & 7) + 1}};
}

static inline float iq1_m_dw(const tsr_block_iq1_m *b) {
    uint16_t sc[4];
    memcpy(sc, b->scales, 8);
    return dw_eighth((uint16_t)((sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000)));
}
IQ_GRID_DOT(dot_iq1_m_v, tsr_block_iq1_m, iq1_m_sub, iq1_m_dw)

/* The ternary types x act8k: the block unpacked once to 16 registers of
 * weights -1, 0, 1 in element order (TQ_DOT's UNPACK), then per column 16
 * integer dots and one float FMA with d times the activation's d. */
#define TQ_DOT(NAME, BLK, UNPACK)                                                                      \
    static inline __attribute__((always_inline)) void NAME##_nc(int64_t K, const void *w, const void *act, \
                                                               size_t act_stride, const int nc, float *out) { \
        const BLK *x = w;                                                                             \
        float32x4_t acc[CPU_NC];                                                                      \
        for (int c = 0; c < CPU_NC; c++) acc[c] = vdupq_n_f32(0.0f);                                  \
        for (int64_t ib = 0; ib < K / 256; ib++) {                                                    \
            const BLK *b = x + ib;                                                                    \
            int8x16_t q[16];                                                                          \
            UNPACK(b, q);                                                                             \
            const float d = f16s(b->d);                                                               \
            _Pragma("GCC unroll 4") for (int c = 0; c < nc; c++) {                                    \
                const act8k *a = (const act8k *)ACT(c) + ib;                                          \
                int32x4_t p0 = vdupq_n_s32(0), p1 = vdupq_n_s32(0);                                   \
                for (int r = 0; r < 16; r += 2) {                                                     \
                    p0 = dot16(p0, q[r], vld1q_s8(a->qs + 16 * r));                                   \
                    p1 = dot16(p1, q[r + 1], vld1q_s8(a->qs + 16 * r + 16));                          \
                }                                                                                     \
                acc[c] = vfmaq_n_f32(acc[c], vcvtq_f32_s32(vaddq_s32(p0, p1)), d * a->d);             \
            }                                                                                         \
        }                                                                                             \
        for (int c = 0; c < nc; c++) out[c] = vaddvq_f32(acc[c]);                                     \
    }                                                                                                 \
    NC_DISPATCH(NAME)

/* TQ2_0: element 128h + 32l + m is bits 2l..2l+1 of qs[32h + m], a level
 * 0..2 meaning -1..1. */
static inline void tq2_0_unpack(const tsr_block_tq2_0 *b, int8x16_t *q) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    const int8x16_t one = vdupq_n_s8(1);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 2; k++) {
            const uint8x16_t v = vld1q_u8(b->qs + 32 * h + 16 * k);
            q[8 * h + k] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m3)), one);
            q[8 * h + 2 + k] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), m3)), one);
            q[8 * h + 4 + k] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), m3)), one);
            q[8 * h + 6 + k] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 6)), one);
        }
}
TQ_DOT(dot_tq2_0_v, tsr_block_tq2_0, tq2_0_unpack)

/* TQ1_0 digits (plugin_quants.h's tsr_tq1_digit): byte v holds base-3
 * digits as the fraction v / 256 of 3^5; digit n is floor(3 t / 256) with
 * t = v * 3^n mod 256 (one byte multiply by the lanes' powers p), i.e.
 * (t >= 86) + (t >= 171). The compares give -1 per step, so their sum is
 * -digit and its complement digit - 1, the weight. */
static inline int8x16_t tq1_weights(uint8x16_t v, uint8x16_t p) {
    const uint8x16_t t = vmulq_u8(v, p);
    const uint8x16_t neg = vaddq_u8(vcgeq_u8(t, vdupq_n_u8(86)), vcgeq_u8(t, vdupq_n_u8(171)));
    return vreinterpretq_s8_u8(vmvnq_u8(neg));
}

/* TQ1_0: elements 32n + m (n < 5) are digit n of qs[m], 160 + 16n + m
 * digit n of qs[32 + m], 240 + 4n + m digit n of qh[m] (the 4 bytes of qh
 * in every word, multiplied by a power per word). */
static inline void tq1_0_unpack(const tsr_block_tq1_0 *b, int8x16_t *q) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    static const uint8_t p_qh[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    const uint8x16_t v0 = vld1q_u8(b->qs), v1 = vld1q_u8(b->qs + 16), v2 = vld1q_u8(b->qs + 32);
    for (int n = 0; n < 5; n++) {
        const uint8x16_t p = vdupq_n_u8(pow3[n]);
        q[2 * n] = tq1_weights(v0, p);
        q[2 * n + 1] = tq1_weights(v1, p);
        q[10 + n] = tq1_weights(v2, p);
    }
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    q[15] = tq1_weights(vreinterpretq_u8_u32(vdupq_n_u32(qh)), vld1q_u8(p_qh));
}
TQ_DOT(dot_tq1_0_v, tsr_block_tq1_0, tq1_0_unpack)

#if KERNELS_I8MM
/* 2x2 tiles with smmla. smmla(acc, X, Y) treats X and Y as 2x8 matrices
 * (bytes 0..7 row 0, 8..15 row 1) and adds X * Y^T: lanes are
 * [x0.y0, x0.y1, x1.y0, x1.y1]. Per 32-block the two weight rows' values are
 * interleaved 8 at a time into X, the two columns' into Y, and four smmla
 * cover the block. Result lanes = out[2r + c], scaled by d_wr * d_ac. */
static inline int8x16_t rows8(int8x16_t r0, int8x16_t r1, int hi) {
    int64x2_t a = vreinterpretq_s64_s8(r0), b = vreinterpretq_s64_s8(r1);
    return vreinterpretq_s8_s64(hi ? vzip2q_s64(a, b) : vzip1q_s64(a, b));
}

static inline int32x4_t mmla32(q32x2 w0, q32x2 w1, const int8_t *a0, const int8_t *a1) {
    int32x4_t p = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        int8x16_t c0 = vld1q_s8(a0 + 16 * h), c1 = vld1q_s8(a1 + 16 * h);
        p = vmmlaq_s32(p, rows8(w0.v[h], w1.v[h], 0), rows8(c0, c1, 0));
        p = vmmlaq_s32(p, rows8(w0.v[h], w1.v[h], 1), rows8(c0, c1, 1));
    }
    return p;
}

#define TILE32(NAME, BLK, UNPACK, SCALE, MIN, HAS_MIN)                                        \
    static void NAME(int64_t K, const void *w, size_t w_stride, const void *act,               \
                     size_t act_stride, float *out) {                                          \
        const BLK *x0 = w, *x1 = (const BLK *)((const uint8_t *)w + w_stride);                 \
        const act8 *a0 = ACT(0), *a1 = ACT(1);                                                 \
        float32x4_t acc = vdupq_n_f32(0.0f), macc = vdupq_n_f32(0.0f);                         \
        for (int64_t ib = 0; ib < K / 32; ib++) {                                              \
            int32x4_t p = mmla32(UNPACK(x0 + ib), UNPACK(x1 + ib), a0[ib].qs, a1[ib].qs);      \
            float32x2_t dw = {SCALE(x0 + ib), SCALE(x1 + ib)};                                 \
            float32x2_t da = {a0[ib].d, a1[ib].d};                                             \
            /* [dw0*da0, dw0*da1, dw1*da0, dw1*da1] */                                         \
            float32x4_t dd = vmulq_f32(vcombine_f32(vdup_lane_f32(dw, 0), vdup_lane_f32(dw, 1)), \
                                       vcombine_f32(da, da));                                  \
            acc = vfmaq_f32(acc, vcvtq_f32_s32(p), dd);                                        \
            if (HAS_MIN) {                                                                     \
                float32x2_t mw = {MIN(x0 + ib), MIN(x1 + ib)};                                 \
                float32x2_t sa = {a0[ib].s, a1[ib].s};                                         \
                macc = vfmaq_f32(macc, vcombine_f32(vdup_lane_f32(mw, 0), vdup_lane_f32(mw, 1)), \
                                 vcombine_f32(sa, sa));                                        \
            }                                                                                  \
        }                                                                                      \
        vst1q_f32(out, vaddq_f32(acc, macc));                                                  \
    }

TILE32(tile_q4_0, blk_q4_0, unpack_q4_0, scale_q4_0, min_none, 0)
TILE32(tile_q4_1, blk_q4_1, unpack_q4_1, scale_q4_1, min_q4_1, 1)
TILE32(tile_q5_0, blk_q5_0, unpack_q5_0, scale_q5_0, min_none, 0)
TILE32(tile_q5_1, blk_q5_1, unpack_q5_1, scale_q5_1, min_q5_1, 1)
TILE32(tile_q8_0, blk_q8_0, unpack_q8_0, scale_q8_0, min_none, 0)
#endif

/* ------------------------------------------------------------ K-quants */

/* Sum over 8 groups of 32: sum_j mn[j] * (bsums[2j] + bsums[2j+1]). */
static inline int32_t mins_dot(const int16_t *bsums, const int16_t *mn8) {
    int16x8_t g = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    int16x8_t m = vld1q_s16(mn8);
    int32x4_t s = vmull_s16(vget_low_s16(g), vget_low_s16(m));
    s = vmlal_high_s16(s, g, m);
    return vaddvq_s32(s);
}

/* Q4_K x act8k. Layout: qs[32c + l] holds element 64c + l (low nibble) and
 * 64c + 32 + l (high nibble); sub-block j (32 elements) has a 6-bit scale
 * sc[j] and min mn[j]. value = d*sc*q - dmin*mn, so
 *   dot = d_a * (d * sum_j sc_j * dot_j - dmin * sum_j mn_j * asum_j). */
static void dot_q4_k_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                       float *out) {
    const blk_q4_k *x = w;
    float acc[CPU_NC] = {0};
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q4_k *b = x + ib;
        int sc[8], mn[8];
        int16_t mn16[8];
        quants_k4_scales(b->scales, sc, mn);
        for (int j = 0; j < 8; j++) mn16[j] = (int16_t)mn[j];
        int8x16_t q[16]; /* sub-block j: q[2j], q[2j+1] */
        for (int c4 = 0; c4 < 4; c4++) {
            for (int h = 0; h < 2; h++) {
                uint8x16_t bytes = vld1q_u8(b->qs + 32 * c4 + 16 * h);
                q[4 * c4 + h] = vreinterpretq_s8_u8(vandq_u8(bytes, m4));
                q[4 * c4 + 2 + h] = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4));
            }
        }
        float d = f16s(b->d), dmin = f16s(b->dmin);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int32x4_t sumv = vdupq_n_s32(0);
            for (int j = 0; j < 8; j++) {
                int32x4_t p = dot16(vdupq_n_s32(0), q[2 * j], vld1q_s8(a->qs + 32 * j));
                p = dot16(p, q[2 * j + 1], vld1q_s8(a->qs + 32 * j + 16));
                sumv = vmlaq_n_s32(sumv, p, sc[j]);
            }
            int32_t isum = vaddvq_s32(sumv), imin = mins_dot(a->bsums, mn16);
            acc[c] += a->d * (d * (float)isum - dmin * (float)imin);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

/* Q6_K x act8k. For half n (128 elements) and quarter k (32 elements), value
 * l is ql[64n + 32(k&1) + l] nibble (k>>1) | ((qh[32n + l] >> 2k) & 3) << 4,
 * minus 32; its two groups of 16 use scales[8n + 2k] and [8n + 2k + 1]. */
static void dot_q6_k_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                       float *out) {
    const blk_q6_k *x = w;
    float acc[CPU_NC] = {0};
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(3);
    const int8x16_t m32 = vdupq_n_s8(32);
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q6_k *b = x + ib;
        int8x16_t q[16]; /* group g of 16 elements: q[g] */
        for (int n = 0; n < 2; n++) {
            for (int h = 0; h < 2; h++) { /* first or second 16 of each 32 */
                uint8x16_t l0 = vld1q_u8(b->ql + 64 * n + 16 * h);
                uint8x16_t l1 = vld1q_u8(b->ql + 64 * n + 32 + 16 * h);
                uint8x16_t hb = vld1q_u8(b->qh + 32 * n + 16 * h);
                uint8x16_t lows[4] = {vandq_u8(l0, m4), vandq_u8(l1, m4), vshrq_n_u8(l0, 4), vshrq_n_u8(l1, 4)};
                uint8x16_t highs[4] = {vandq_u8(hb, m2), vandq_u8(vshrq_n_u8(hb, 2), m2),
                                       vandq_u8(vshrq_n_u8(hb, 4), m2), vshrq_n_u8(hb, 6)};
                for (int k = 0; k < 4; k++) {
                    uint8x16_t v = vorrq_u8(lows[k], vshlq_n_u8(highs[k], 4));
                    q[8 * n + 2 * k + h] = vsubq_s8(vreinterpretq_s8_u8(v), m32);
                }
            }
        }
        float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int32x4_t sumv = vdupq_n_s32(0);
            for (int g = 0; g < 16; g++) {
                int32x4_t p = dot16(vdupq_n_s32(0), q[g], vld1q_s8(a->qs + 16 * g));
                sumv = vmlaq_n_s32(sumv, p, b->scales[g]);
            }
            acc[c] += a->d * d * (float)vaddvq_s32(sumv);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

/* Q2_K, Q3_K, Q5_K blocks -> 256 integers, as cpu_quants_decode.h's
 * decode_q2k/q3k/q5k (same element order, values before scales), 16
 * elements per step. Q2_K: element 128n + 32j + l is bits 2j..2j+1 of
 * qs[32n + l]; Q3_K: the same minus 4 unless bit 4n + j of hmask[l] is
 * set; Q5_K: Q4_K's nibbles with bit 2c (low) / 2c + 1 (high) of qh[l] as
 * the fifth bit. */
static inline uint8x16_t bits2(uint8x16_t v, int j) {
    return vandq_u8(vshlq_u8(v, vdupq_n_s8((int8_t)(-2 * j))), vdupq_n_u8(3));
}

static inline uint8x16_t bit_to(uint8x16_t v, int bit, uint8_t to) {
    return vandq_u8(vtstq_u8(v, vdupq_n_u8((uint8_t)(1u << bit))), vdupq_n_u8(to));
}

static inline void decode_q2k_v(const blk_q2_k *b, int8_t *q) {
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++) {
            uint8x16_t v = vld1q_u8(b->qs + 32 * n + 16 * h);
            for (int j = 0; j < 4; j++) vst1q_s8(q + 128 * n + 32 * j + 16 * h, vreinterpretq_s8_u8(bits2(v, j)));
        }
}

static inline void decode_q3k_v(const blk_q3_k *b, int8_t *q) {
    const int8x16_t four = vdupq_n_s8(4);
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++) {
            uint8x16_t v = vld1q_u8(b->qs + 32 * n + 16 * h), hm = vld1q_u8(b->hmask + 16 * h);
            for (int j = 0; j < 4; j++) {
                uint8x16_t u = vorrq_u8(bits2(v, j), bit_to(hm, 4 * n + j, 4));
                vst1q_s8(q + 128 * n + 32 * j + 16 * h, vsubq_s8(vreinterpretq_s8_u8(u), four));
            }
        }
}

static inline void decode_q5k_v(const blk_q5_k *b, int8_t *q) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int c = 0; c < 4; c++)
        for (int h = 0; h < 2; h++) {
            uint8x16_t v = vld1q_u8(b->qs + 32 * c + 16 * h), hb = vld1q_u8(b->qh + 16 * h);
            uint8x16_t lo = vorrq_u8(vandq_u8(v, m4), bit_to(hb, 2 * c, 16));
            uint8x16_t hi = vorrq_u8(vshrq_n_u8(v, 4), bit_to(hb, 2 * c + 1, 16));
            vst1q_s8(q + 64 * c + 16 * h, vreinterpretq_s8_u8(lo));
            vst1q_s8(q + 64 * c + 32 + 16 * h, vreinterpretq_s8_u8(hi));
        }
}

/* Q2_K, Q3_K, Q5_K: the block is decoded once to 256 integers (above), then
 * each column is 16 (or 8) vector group dots.
 * Q2_K: value = d*(sc&15)*q - dmin*(sc>>4) per group of 16; Q3_K: d*sc*q;
 * Q5_K: as Q4_K with 5-bit q. */
static void dot_q2_k_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                       float *out) {
    const blk_q2_k *x = w;
    float acc[CPU_NC] = {0};
    int8_t q[256];
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q2_k *b = x + ib;
        decode_q2k_v(b, q);
        float d = f16s(b->d), dmin = f16s(b->dmin);
        int16_t mn16[16];
        for (int g = 0; g < 16; g++) mn16[g] = (int16_t)(b->scales[g] >> 4);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int32x4_t sumv = vdupq_n_s32(0);
            for (int g = 0; g < 16; g++) {
                int32x4_t p = dot16(vdupq_n_s32(0), vld1q_s8(q + 16 * g), vld1q_s8(a->qs + 16 * g));
                sumv = vmlaq_n_s32(sumv, p, b->scales[g] & 0xF);
            }
            int16x8_t b0 = vld1q_s16(a->bsums), b1 = vld1q_s16(a->bsums + 8);
            int16x8_t n0 = vld1q_s16(mn16), n1 = vld1q_s16(mn16 + 8);
            int32x4_t mv = vmull_s16(vget_low_s16(b0), vget_low_s16(n0));
            mv = vmlal_high_s16(mv, b0, n0);
            mv = vmlal_s16(mv, vget_low_s16(b1), vget_low_s16(n1));
            mv = vmlal_high_s16(mv, b1, n1);
            acc[c] += a->d * (d * (float)vaddvq_s32(sumv) - dmin * (float)vaddvq_s32(mv));
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

static void dot_q3_k_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                       float *out) {
    const blk_q3_k *x = w;
    float acc[CPU_NC] = {0};
    int8_t q[256];
    int sc[16];
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q3_k *b = x + ib;
        decode_q3k_v(b, q);
        quants_q3k_scales(b->scales, sc);
        float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int32x4_t sumv = vdupq_n_s32(0);
            for (int g = 0; g < 16; g++) {
                int32x4_t p = dot16(vdupq_n_s32(0), vld1q_s8(q + 16 * g), vld1q_s8(a->qs + 16 * g));
                sumv = vmlaq_n_s32(sumv, p, sc[g]);
            }
            acc[c] += a->d * d * (float)vaddvq_s32(sumv);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

static void dot_q5_k_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                       float *out) {
    const blk_q5_k *x = w;
    float acc[CPU_NC] = {0};
    int8_t q[256];
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q5_k *b = x + ib;
        int sc[8], mn[8];
        int16_t mn16[8];
        decode_q5k_v(b, q);
        quants_k4_scales(b->scales, sc, mn);
        for (int j = 0; j < 8; j++) mn16[j] = (int16_t)mn[j];
        float d = f16s(b->d), dmin = f16s(b->dmin);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int32x4_t sumv = vdupq_n_s32(0);
            for (int j = 0; j < 8; j++) {
                int32x4_t p = dot16(vdupq_n_s32(0), vld1q_s8(q + 32 * j), vld1q_s8(a->qs + 32 * j));
                p = dot16(p, vld1q_s8(q + 32 * j + 16), vld1q_s8(a->qs + 32 * j + 16));
                sumv = vmlaq_n_s32(sumv, p, sc[j]);
            }
            int32_t imin = mins_dot(a->bsums, mn16);
            acc[c] += a->d * (d * (float)vaddvq_s32(sumv) - dmin * (float)imin);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

/* ------------------------------------------------ activation quantizers */

/* f32 -> act8, as cpu_quants_act8_from_f32: amax by vector max, q = x/d rounded
 * to nearest even (fcvtns, like lrintf), narrowed with saturation. */
static void act8_from_f32_v(const float *x, act8 *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32) {
        float32x4_t v[8];
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int i = 0; i < 8; i++) {
            v[i] = vld1q_f32(x + 4 * i);
            mx = vmaxnmq_f32(mx, vabsq_f32(v[i])); /* NaN ignored, as fmaxf */
        }
        float amax = vmaxvq_f32(mx);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int32x4_t sum = vdupq_n_s32(0);
        for (int i = 0; i < 8; i += 2) {
            int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(v[i], id));
            int32x4_t q1 = vcvtnq_s32_f32(vmulq_n_f32(v[i + 1], id));
            sum = vaddq_s32(sum, vaddq_s32(q0, q1));
            int16x8_t q16 = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
            vst1_s8(y[ib].qs + 4 * i, vqmovn_s16(q16));
        }
        int isum = vaddvq_s32(sum);
        y[ib].d = fp16_round(d);
        y[ib].isum = isum;
        y[ib].s = fp16_round(d * (float)isum);
        y[ib].pad = 0;
    }
}

/* f32 -> act8k, as cpu_quants_act8k_from_f32: the scale comes from the signed
 * value of largest magnitude (the first one, as the scalar loop finds it),
 * q = round(x * -127/max) to nearest even, clamped to 127; bsums by
 * pairwise widening adds of the 16-element groups. */
static void act8k_from_f32_v(const float *x, act8k *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256) {
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int i = 0; i < 256; i += 4) mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(x + i)));
        float amax = vmaxvq_f32(mx);
        memset(y[ib].pad, 0, sizeof y[ib].pad);
        if (amax == 0.0f) {
            y[ib].d = 0.0f;
            memset(y[ib].qs, 0, 256);
            memset(y[ib].bsums, 0, sizeof y[ib].bsums);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        const float iscale = -127.0f / max;
        for (int g = 0; g < 16; g++) {
            int16x8_t q16[2];
            for (int h = 0; h < 2; h++) {
                int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 8 * h), iscale));
                int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 16 * g + 8 * h + 4), iscale));
                a = vminq_s32(a, vdupq_n_s32(127));
                b = vminq_s32(b, vdupq_n_s32(127));
                q16[h] = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
            }
            int8x16_t q8 = vcombine_s8(vmovn_s16(q16[0]), vmovn_s16(q16[1]));
            vst1q_s8(y[ib].qs + 16 * g, q8);
            y[ib].bsums[g] = (int16_t)vaddlvq_s8(q8);
        }
        y[ib].d = 1.0f / iscale;
    }
}

/* ------------------------------------------------------------- table */

void KERNELS_INIT(cpu_kernels *k) {
    memset(k, 0, sizeof *k);
    k->name = KERNELS_NAME;
    for (int t = 0; t < TSR_DTYPE_COUNT; t++) k->dot[t] = quants_scalar_dot(t);
    k->dot[TSR_DTYPE_F32] = dot_f32_v;
    k->dot[TSR_DTYPE_F16] = dot_f16_v;
    k->dot[TSR_DTYPE_BF16] = dot_bf16_v;
    k->dot[TSR_DTYPE_Q4_0] = dot_q4_0_v;
    k->dot[TSR_DTYPE_Q4_1] = dot_q4_1_v;
    k->dot[TSR_DTYPE_Q5_0] = dot_q5_0_v;
    k->dot[TSR_DTYPE_Q5_1] = dot_q5_1_v;
    k->dot[TSR_DTYPE_Q8_0] = dot_q8_0_v;
    k->dot[TSR_DTYPE_Q2_K] = dot_q2_k_v;
    k->dot[TSR_DTYPE_Q3_K] = dot_q3_k_v;
    k->dot[TSR_DTYPE_Q4_K] = dot_q4_k_v;
    k->dot[TSR_DTYPE_Q5_K] = dot_q5_k_v;
    k->dot[TSR_DTYPE_Q6_K] = dot_q6_k_v;
    k->dot[TSR_DTYPE_IQ4_NL] = dot_iq4_nl_v;
    k->dot[TSR_DTYPE_MXFP4] = dot_mxfp4_v;
    k->dot[TSR_DTYPE_IQ4_XS] = dot_iq4_xs_v;
    quants_iq_sign8_init();
    k->dot[TSR_DTYPE_IQ2_XXS] = dot_iq2_xxs_v;
    k->dot[TSR_DTYPE_IQ2_XS] = dot_iq2_xs_v;
    k->dot[TSR_DTYPE_IQ2_S] = dot_iq2_s_v;
    k->dot[TSR_DTYPE_IQ3_XXS] = dot_iq3_xxs_v;
    k->dot[TSR_DTYPE_IQ3_S] = dot_iq3_s_v;
    k->dot[TSR_DTYPE_IQ1_S] = dot_iq1_s_v;
    k->dot[TSR_DTYPE_IQ1_M] = dot_iq1_m_v;
    k->dot[TSR_DTYPE_TQ1_0] = dot_tq1_0_v;
    k->dot[TSR_DTYPE_TQ2_0] = dot_tq2_0_v;
#if KERNELS_I8MM
    k->tile[TSR_DTYPE_Q4_0] = tile_q4_0;
    k->tile[TSR_DTYPE_Q4_1] = tile_q4_1;
    k->tile[TSR_DTYPE_Q5_0] = tile_q5_0;
    k->tile[TSR_DTYPE_Q5_1] = tile_q5_1;
    k->tile[TSR_DTYPE_Q8_0] = tile_q8_0;
#endif
    k->act8_from_f32 = act8_from_f32_v;
    k->act8k_from_f32 = act8k_from_f32_v;
}
