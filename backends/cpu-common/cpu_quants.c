/* cpu_quants — the scalar conversions shared by the CPU plugins (see
 * cpu_quants.h): rows to f32 and back, and the activation quantizers. */
#include "cpu_quants.h"

#include <float.h>
#include <math.h>
#include <string.h>
#include <tessera/plugin.h>

#include "cpu_quants_decode.h"
#include <tessera/plugin_quants.h>

/* ------------------------------------------------------------ to f32 */

int cpu_quants_row_supported(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16:
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: return 1;
    default: return tsr_quant_decoder(dtype) != NULL; /* IQ, TQ, MXFP4 */
    }
}

void cpu_quants_row_to_f32(int32_t dtype, const void *src, float *y, int64_t n) {
    const uint8_t *p = src;
    switch (dtype) {
    case TSR_DTYPE_F32: memcpy(y, src, (size_t)n * 4); return;
    case TSR_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = cpu_fp16_to_f32(h);
        }
        return;
    case TSR_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = cpu_bf16_to_f32(h);
        }
        return;
    default:
        if (tsr_quant_decoder(dtype)) { /* IQ4_NL, IQ4_XS, MXFP4, TQ*, the grid IQ types */
            tsr_quant_dequant_row(dtype, src, y, n);
            return;
        }
        break;
    }
    int64_t nb = n / tsr_dtype_block_size(dtype);
    uint8_t q[32];
    int8_t qk[256];
    for (int64_t ib = 0; ib < nb; ib++) {
        switch (dtype) {
        case TSR_DTYPE_Q4_0: {
            const blk_q4_0 *b = (const blk_q4_0 *)p + ib;
            float d = cpu_fp16_to_f32(b->d);
            decode_nibbles(b->qs, q);
            for (int j = 0; j < 32; j++) y[j] = ((int)q[j] - 8) * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q4_1: {
            const blk_q4_1 *b = (const blk_q4_1 *)p + ib;
            float d = cpu_fp16_to_f32(b->d), m = cpu_fp16_to_f32(b->m);
            decode_nibbles(b->qs, q);
            for (int j = 0; j < 32; j++) y[j] = q[j] * d + m;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q5_0: {
            const blk_q5_0 *b = (const blk_q5_0 *)p + ib;
            float d = cpu_fp16_to_f32(b->d);
            decode_nibbles(b->qs, q);
            add_high_bits(b->qh, q);
            for (int j = 0; j < 32; j++) y[j] = ((int)q[j] - 16) * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q5_1: {
            const blk_q5_1 *b = (const blk_q5_1 *)p + ib;
            float d = cpu_fp16_to_f32(b->d), m = cpu_fp16_to_f32(b->m);
            decode_nibbles(b->qs, q);
            add_high_bits(b->qh, q);
            for (int j = 0; j < 32; j++) y[j] = q[j] * d + m;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q8_0: {
            const blk_q8_0 *b = (const blk_q8_0 *)p + ib;
            float d = cpu_fp16_to_f32(b->d);
            for (int j = 0; j < 32; j++) y[j] = b->qs[j] * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q2_K: {
            const blk_q2_k *b = (const blk_q2_k *)p + ib;
            float d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
            decode_q2k(b, qk);
            for (int e = 0; e < 256; e++) {
                int s = b->scales[e / 16];
                y[e] = d * (s & 0xF) * qk[e] - dmin * (s >> 4);
            }
            y += 256;
            break;
        }
        case TSR_DTYPE_Q3_K: {
            const blk_q3_k *b = (const blk_q3_k *)p + ib;
            float d = cpu_fp16_to_f32(b->d);
            int sc[16];
            q3k_scales(b->scales, sc);
            decode_q3k(b, qk);
            for (int e = 0; e < 256; e++) y[e] = d * sc[e / 16] * qk[e];
            y += 256;
            break;
        }
        case TSR_DTYPE_Q4_K:
        case TSR_DTYPE_Q5_K: {
            const uint8_t *scales;
            float d, dmin;
            if (dtype == TSR_DTYPE_Q4_K) {
                const blk_q4_k *b = (const blk_q4_k *)p + ib;
                d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
                scales = b->scales;
                decode_q4k(b, qk);
            } else {
                const blk_q5_k *b = (const blk_q5_k *)p + ib;
                d = cpu_fp16_to_f32(b->d), dmin = cpu_fp16_to_f32(b->dmin);
                scales = b->scales;
                decode_q5k(b, qk);
            }
            for (int j = 0; j < 8; j++) {
                int sc, m;
                k4_scale_min(j, scales, &sc, &m);
                float dl = d * sc, ml = dmin * m;
                for (int l = 0; l < 32; l++) y[32 * j + l] = dl * qk[32 * j + l] - ml;
            }
            y += 256;
            break;
        }
        case TSR_DTYPE_Q6_K: {
            const blk_q6_k *b = (const blk_q6_k *)p + ib;
            float d = cpu_fp16_to_f32(b->d);
            decode_q6k(b, qk);
            for (int e = 0; e < 256; e++) y[e] = d * b->scales[e / 16] * qk[e];
            y += 256;
            break;
        }
        default: return;
        }
    }
}

void cpu_quants_row_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cpu_f32_to_fp16(src[i]);
}

void cpu_quants_row_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = cpu_f32_to_bf16(src[i]);
}

/* ----------------------------------------------------- activations */

/* As ggml's Q8_0/Q8_1: d = amax/127, q = round(x/d), d kept as fp16. */
void cpu_quants_act8_from_f32(const float *x, act8 *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = (int)lrintf(x[j] * id);
            y[ib].qs[j] = (int8_t)v;
            sum += v;
        }
        y[ib].d = fp16_round(d);
        y[ib].isum = sum;
        y[ib].s = fp16_round(d * (float)sum);
        y[ib].pad = 0;
    }
}

/* As ggml's Q8_K: scale from the signed value of largest magnitude so that
 * it maps to -127 (no quant needs -128); q clamped to 127. */
void cpu_quants_act8k_from_f32(const float *x, act8k *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        memset(y[ib].pad, 0, sizeof y[ib].pad);
        if (amax == 0.0f) {
            y[ib].d = 0.0f;
            memset(y[ib].qs, 0, 256);
            memset(y[ib].bsums, 0, sizeof y[ib].bsums);
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            int v = (int)lrintf(iscale * x[j]);
            y[ib].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[ib].qs[16 * g + l];
            y[ib].bsums[g] = (int16_t)s;
        }
        y[ib].d = 1.0f / iscale;
    }
}

/* ------------------------------------------- f32 -> KV cache block types */

/* As llama.cpp's reference row quantizers (and core's tensor/quant_legacy.c),
 * same float operations in the same order, so the same bytes. */

static float blk_signed_absmax(const float *x) { /* sign kept, first on ties */
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    return max;
}

static void blk_min_max(const float *x, float *min, float *max) {
    *min = FLT_MAX, *max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

/* Nibbles q[0..32) (low: elements 0..15, high: 16..31) and the fifth bits. */
static void blk_pack(const uint8_t *q, uint8_t *qs, uint8_t *qh) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[16 + j] & 0x0f) << 4));
        h |= (uint32_t)((q[j] >> 4) & 1u) << j;
        h |= (uint32_t)((q[16 + j] >> 4) & 1u) << (j + 16);
    }
    if (qh) memcpy(qh, &h, 4);
}

int cpu_quants_from_f32_supported(int32_t dtype) {
    return dtype == TSR_DTYPE_Q8_0 || dtype == TSR_DTYPE_Q4_0 || dtype == TSR_DTYPE_Q4_1 ||
           dtype == TSR_DTYPE_Q5_0 || dtype == TSR_DTYPE_Q5_1;
}

void cpu_quants_row_from_f32(int32_t dtype, const float *x, void *dst, int64_t n) {
    uint8_t q[32];
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32) {
        switch (dtype) {
        case TSR_DTYPE_Q8_0: {
            blk_q8_0 *b = (blk_q8_0 *)dst + ib;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
            const float d = amax / ((1 << 7) - 1), id = d ? 1.0f / d : 0.0f;
            b->d = cpu_f32_to_fp16(d);
            for (int j = 0; j < 32; j++) b->qs[j] = (int8_t)roundf(x[j] * id);
            break;
        }
        case TSR_DTYPE_Q4_0:
        case TSR_DTYPE_Q5_0: {
            const int q5 = dtype == TSR_DTYPE_Q5_0, top = q5 ? 31 : 15;
            const float d = blk_signed_absmax(x) / (q5 ? -16 : -8), id = d ? 1.0f / d : 0.0f;
            const float off = q5 ? 16.5f : 8.5f;
            for (int j = 0; j < 32; j++) {
                const float v = x[j] * id;
                const int t = (int8_t)(v + off);
                q[j] = (uint8_t)(t < top ? t : top);
            }
            if (q5) {
                blk_q5_0 *b = (blk_q5_0 *)dst + ib;
                b->d = cpu_f32_to_fp16(d);
                blk_pack(q, b->qs, b->qh);
            } else {
                blk_q4_0 *b = (blk_q4_0 *)dst + ib;
                b->d = cpu_f32_to_fp16(d);
                blk_pack(q, b->qs, NULL);
            }
            break;
        }
        case TSR_DTYPE_Q4_1:
        case TSR_DTYPE_Q5_1: {
            const int q5 = dtype == TSR_DTYPE_Q5_1;
            float min, max;
            blk_min_max(x, &min, &max);
            const float d = (max - min) / (q5 ? (1 << 5) - 1 : (1 << 4) - 1), id = d ? 1.0f / d : 0.0f;
            for (int j = 0; j < 32; j++) {
                const float v = (x[j] - min) * id;
                const int t = (int8_t)(v + 0.5f);
                /* Q5_1 has no clamp (as llama.cpp: (max - min) / d <= 31) */
                q[j] = q5 ? (uint8_t)(v + 0.5f) : (uint8_t)(t < 15 ? t : 15);
            }
            if (q5) {
                blk_q5_1 *b = (blk_q5_1 *)dst + ib;
                b->d = cpu_f32_to_fp16(d), b->m = cpu_f32_to_fp16(min);
                blk_pack(q, b->qs, b->qh);
            } else {
                blk_q4_1 *b = (blk_q4_1 *)dst + ib;
                b->d = cpu_f32_to_fp16(d), b->m = cpu_f32_to_fp16(min);
                blk_pack(q, b->qs, NULL);
            }
            break;
        }
        default: return;
        }
    }
}
