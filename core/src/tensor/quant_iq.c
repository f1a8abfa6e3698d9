/*
 * quant_iq — IQ4_XS, the grid-based IQ formats (IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S, IQ1_M), the ternary TQ1_0/TQ2_0 and MXFP4.
 *
 * Dequantizing and the dot products go through the block decoders of
 * tessera/plugin_quants.h (value = sc[e/16] * q[e]), the same ones the CPU
 * plugins use, so the layout is written once. Those decoders give the same
 * bits as llama.cpp's to_float (tests/tensor/test_quant_ref.c, on random
 * blocks dumped from ggml by tools/quant-ref/ggml_quant_ref.c).
 *
 * Quantizers (byte-exact with llama.cpp's, checked on rows quantized by
 * ggml_quantize_chunk in the same test):
 *   IQ4_XS: per 32-block the IQ4_NL fit (x^2-weighted, best of 15 starting
 *           scales); the eight block scales then share one d = -max/32
 *           with 6-bit multipliers, and the elements are re-fit to them
 *   TQ2_0:  d = amax, q = round(x/d) + 1 in 2 bits
 *   TQ1_0:  the same q packed five (four) to a byte in base 3
 *   MXFP4:  a power-of-two scale from amax, nearest E2M1 value per element
 * The grid formats' quantizers are in quant_iq_grid.c (IQ3_XXS so far); the
 * others have none (from_f32 NULL).
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <tessera/plugin_quants.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

/* ------------------------------------------------ reading, every type */

/* y (Q8_K blocks) dotted with x of dtype: per group of 16 the integer sum
 * of q * y.qs, times the group's scale and y's d. */
static float dot_q8k(int32_t dtype, int64_t n, const void *vx, const void *vy) {
    const tsr_quant_decode_fn dec = tsr_quant_decoder(dtype);
    const uint8_t *x = vx;
    const block_q8_K *y = vy;
    const size_t bb = (size_t)tsr_dtype_block_bytes(dtype);
    int8_t q[256];
    float sc[16];
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        dec(x + (size_t)i * bb, q, sc);
        for (int g = 0; g < 16; g++) {
            int sumi = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) sumi += q[j] * y[i].qs[j];
            sum += sc[g] * y[i].d * (float)sumi;
        }
    }
    return sum;
}

#define READ_Q8K(t, T)                                                                \
    void quant_##t##_to_f32(const void *src, float *dst, int64_t n) {                 \
        tsr_quant_dequant_row(T, src, dst, n);                                        \
    }                                                                                 \
    void quant_##t##_dot(int64_t n, float *out, const void *x, const void *y) {       \
        *out = dot_q8k(T, n, x, y);                                                   \
    }

READ_Q8K(iq4_xs, TSR_DTYPE_IQ4_XS)
READ_Q8K(tq1_0, TSR_DTYPE_TQ1_0)
READ_Q8K(tq2_0, TSR_DTYPE_TQ2_0)
READ_Q8K(iq2_xxs, TSR_DTYPE_IQ2_XXS)
READ_Q8K(iq2_xs, TSR_DTYPE_IQ2_XS)
READ_Q8K(iq2_s, TSR_DTYPE_IQ2_S)
READ_Q8K(iq3_xxs, TSR_DTYPE_IQ3_XXS)
READ_Q8K(iq3_s, TSR_DTYPE_IQ3_S)
READ_Q8K(iq1_s, TSR_DTYPE_IQ1_S)
READ_Q8K(iq1_m, TSR_DTYPE_IQ1_M)

void quant_mxfp4_to_f32(const void *src, float *dst, int64_t n) {
    tsr_quant_dequant_row(TSR_DTYPE_MXFP4, src, dst, n);
}

/* MXFP4 x Q8_0: per 32-block the integer sum times both scales. */
void quant_mxfp4_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const tsr_block_mxfp4 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += TSR_MXFP4_VALUES[x[i].qs[j] & 0xf] * y[i].qs[j];
            sumi += TSR_MXFP4_VALUES[x[i].qs[j] >> 4] * y[i].qs[j + 16];
        }
        sum += tsr_e8m0_half(x[i].e) * fp16_to_f32(y[i].d) * (float)sumi;
    }
    *out = sum;
}

/* ---------------------------------------------------------- IQ4_XS */

/* With importance weights qw (or NULL: x^2) each element weighs
 * qw * sqrt(sigma2 + x^2), sigma2 twice the super-block's mean square. */
static void iq4xs_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    tsr_block_iq4_xs *y = dst;
    float weight[32];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float scales[8], max_scale = 0.0f, amax_scale = 0.0f;
        float sigma2 = 0.0f;
        for (int j = 0; j < QK_K; j++) sigma2 += x[j] * x[j];
        sigma2 *= 2.f / QK_K;
        for (int ib = 0; ib < 8; ib++) {
            if (qw) quant_imatrix_weights(x + 32 * ib, qw + QK_K * i + 32 * ib, 32, sigma2, weight, NULL);
            scales[ib] = quant_iq4nl_scale(x + 32 * ib, qw ? weight : NULL);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        const float d = -max_scale / 32;
        const float id = d ? 1 / d : 0.0f;
        memset(&y[i], 0, sizeof y[i]);
        y[i].d = f32_to_fp16(d);
        for (int ib = 0; ib < 8; ib++) {
            int l = quant_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            const float dl = d * (float)l;
            const float idl = dl ? 1 / dl : 0.0f;
            const float *xb = x + 32 * ib;
            for (int j = 0; j < 16; j++)
                y[i].qs[16 * ib + j] = (uint8_t)(quant_iq4nl_best_index(idl * xb[j]) | (quant_iq4nl_best_index(idl * xb[j + 16]) << 4));
            l += 32;
            y[i].scales_l[ib / 2] |= (uint8_t)((l & 0xf) << (4 * (ib % 2)));
            y[i].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    }
}

void quant_iq4_xs_from_f32(const float *x, void *dst, int64_t n) { iq4xs_quantize(x, dst, n, NULL); }

void quant_iq4_xs_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq4xs_quantize(x, dst, n, qw);
}

/* ---------------------------------------------------- TQ1_0, TQ2_0 */

/* The block's scale (amax) and each element's level 0, 1, 2. */
static float ternary_levels(const float *x, uint8_t *lv) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float id = amax ? 1 / amax : 0.0f;
    for (int j = 0; j < QK_K; j++) lv[j] = (uint8_t)(lroundf(x[j] * id) + 1);
    return amax;
}

void quant_tq2_0_from_f32(const float *x, void *dst, int64_t n) {
    tsr_block_tq2_0 *y = dst;
    uint8_t lv[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        y[i].d = f32_to_fp16(ternary_levels(x, lv));
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 32; m++) {
                uint8_t q = 0;
                for (int l = 0; l < 4; l++) q |= (uint8_t)(lv[128 * h + 32 * l + m] << (2 * l));
                y[i].qs[32 * h + m] = q;
            }
    }
}

/* Digits d[0] (most significant) .. d[k-1] as the byte TQ1_0 stores: the
 * base-3 number over 3^5, as a fraction of 256 rounded up. */
static uint8_t tq1_pack(const uint8_t *lv, int stride, int k) {
    unsigned q = 0;
    for (int t = 0; t < k; t++) q = q * 3 + lv[t * stride];
    for (int t = k; t < 5; t++) q *= 3;
    return (uint8_t)((q * 256 + 242) / 243);
}

void quant_tq1_0_from_f32(const float *x, void *dst, int64_t n) {
    tsr_block_tq1_0 *y = dst;
    uint8_t lv[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        y[i].d = f32_to_fp16(ternary_levels(x, lv));
        for (int m = 0; m < 32; m++) y[i].qs[m] = tq1_pack(lv + m, 32, 5);
        for (int m = 0; m < 16; m++) y[i].qs[32 + m] = tq1_pack(lv + 160 + m, 16, 5);
        for (int m = 0; m < 4; m++) y[i].qh[m] = tq1_pack(lv + 240 + m, 4, 4);
    }
}

/* ------------------------------------------------------------ MXFP4 */

/* Index of the doubled E2M1 value nearest x / e (ties to the smaller
 * magnitude), the sign in bit 3. */
static uint8_t mxfp4_best_index(float x, float e) {
    int best = 0;
    float best_err = fabsf(TSR_MXFP4_VALUES[0] * e - x);
    for (int k = 1; k < 16; k++) {
        const float err = fabsf(TSR_MXFP4_VALUES[k] * e - x);
        if (err < best_err) {
            best = k;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

void quant_mxfp4_from_f32(const float *x, void *dst, int64_t n) {
    tsr_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const uint8_t e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = tsr_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(mxfp4_best_index(x[j], d) | (mxfp4_best_index(x[j + 16], d) << 4));
    }
}

/* ------------------------------------------------------------ scales */

int dtype_block_set_scale(int32_t dtype, void *block, float d) {
    uint8_t *b = block;
    const uint16_t h = f32_to_fp16(d);
    switch (dtype) {
    case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_IQ4_XS: case TSR_DTYPE_IQ2_XXS: case TSR_DTYPE_IQ2_XS:
    case TSR_DTYPE_IQ2_S: case TSR_DTYPE_IQ3_XXS: case TSR_DTYPE_IQ3_S: case TSR_DTYPE_IQ1_S:
        memcpy(b, &h, 2);
        return 0;
    case TSR_DTYPE_TQ1_0: memcpy(b + offsetof(tsr_block_tq1_0, d), &h, 2); return 0;
    case TSR_DTYPE_TQ2_0: memcpy(b + offsetof(tsr_block_tq2_0, d), &h, 2); return 0;
    case TSR_DTYPE_IQ1_M: /* the half is the top nibbles of the four u16 scales */
        for (int i = 0; i < 4; i++) {
            uint16_t sc;
            memcpy(&sc, b + offsetof(tsr_block_iq1_m, scales) + 2 * i, 2);
            sc = (uint16_t)((sc & 0x0fff) | (((h >> (4 * i)) & 0xf) << 12));
            memcpy(b + offsetof(tsr_block_iq1_m, scales) + 2 * i, &sc, 2);
        }
        return 0;
    case TSR_DTYPE_MXFP4: { /* 2^(e-128) nearest d, in the exponent's range */
        const int e = d > 0 ? (int)lrintf(log2f(d)) + 128 : 0;
        b[0] = (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
        return 0;
    }
    default: return -1;
    }
}
