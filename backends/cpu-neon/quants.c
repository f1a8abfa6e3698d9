/* quants — scalar block decoding, activation quantizers and plain C dot
 * kernels (see quants.h). Element order inside each block is documented in
 * blocks.h; the decode_* helpers below are the single place that knows it. */
#include "quants.h"

#include <math.h>
#include <tessera/plugin.h>

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
static void decode_q2k(const blk_q2_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, j = (e % 128) / 32, l = e % 32;
        q[e] = (int8_t)((b->qs[32 * n + l] >> (2 * j)) & 3);
    }
}

static void decode_q3k(const blk_q3_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, j = (e % 128) / 32, l = e % 32;
        int v = (b->qs[32 * n + l] >> (2 * j)) & 3;
        int high = (b->hmask[l] >> (4 * n + j)) & 1;
        q[e] = (int8_t)(v - (high ? 0 : 4));
    }
}

static void decode_q4k(const blk_q4_k *b, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(b->qs[32 * c + l] & 0xF);
            q[64 * c + 32 + l] = (int8_t)(b->qs[32 * c + l] >> 4);
        }
}

static void decode_q5k(const blk_q5_k *b, int8_t *q) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int lo = b->qs[32 * c + l] & 0xF, hi = b->qs[32 * c + l] >> 4;
            lo |= ((b->qh[l] >> (2 * c)) & 1) << 4;
            hi |= ((b->qh[l] >> (2 * c + 1)) & 1) << 4;
            q[64 * c + l] = (int8_t)lo;
            q[64 * c + 32 + l] = (int8_t)hi;
        }
}

static void decode_q6k(const blk_q6_k *b, int8_t *q) {
    for (int e = 0; e < 256; e++) {
        int n = e / 128, k = (e % 128) / 32, l = e % 32;
        int low = b->ql[64 * n + l + 32 * (k & 1)];
        low = (k >> 1) ? low >> 4 : low & 0xF;
        int high = (b->qh[32 * n + l] >> (2 * k)) & 3;
        q[e] = (int8_t)((low | (high << 4)) - 32);
    }
}

/* ------------------------------------------------------------ to f32 */

int quants_row_supported(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16:
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: return 1;
    default: return 0;
    }
}

void quants_row_to_f32(int32_t dtype, const void *src, float *y, int64_t n) {
    const uint8_t *p = src;
    switch (dtype) {
    case TSR_DTYPE_F32: memcpy(y, src, (size_t)n * 4); return;
    case TSR_DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = neon_fp16_to_f32(h);
        }
        return;
    case TSR_DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            y[i] = neon_bf16_to_f32(h);
        }
        return;
    default: break;
    }
    int64_t nb = n / tsr_dtype_block_size(dtype);
    uint8_t q[32];
    int8_t qk[256];
    for (int64_t ib = 0; ib < nb; ib++) {
        switch (dtype) {
        case TSR_DTYPE_Q4_0: {
            const blk_q4_0 *b = (const blk_q4_0 *)p + ib;
            float d = neon_fp16_to_f32(b->d);
            decode_nibbles(b->qs, q);
            for (int j = 0; j < 32; j++) y[j] = ((int)q[j] - 8) * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q4_1: {
            const blk_q4_1 *b = (const blk_q4_1 *)p + ib;
            float d = neon_fp16_to_f32(b->d), m = neon_fp16_to_f32(b->m);
            decode_nibbles(b->qs, q);
            for (int j = 0; j < 32; j++) y[j] = q[j] * d + m;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q5_0: {
            const blk_q5_0 *b = (const blk_q5_0 *)p + ib;
            float d = neon_fp16_to_f32(b->d);
            decode_nibbles(b->qs, q);
            add_high_bits(b->qh, q);
            for (int j = 0; j < 32; j++) y[j] = ((int)q[j] - 16) * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q5_1: {
            const blk_q5_1 *b = (const blk_q5_1 *)p + ib;
            float d = neon_fp16_to_f32(b->d), m = neon_fp16_to_f32(b->m);
            decode_nibbles(b->qs, q);
            add_high_bits(b->qh, q);
            for (int j = 0; j < 32; j++) y[j] = q[j] * d + m;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q8_0: {
            const blk_q8_0 *b = (const blk_q8_0 *)p + ib;
            float d = neon_fp16_to_f32(b->d);
            for (int j = 0; j < 32; j++) y[j] = b->qs[j] * d;
            y += 32;
            break;
        }
        case TSR_DTYPE_Q2_K: {
            const blk_q2_k *b = (const blk_q2_k *)p + ib;
            float d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
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
            float d = neon_fp16_to_f32(b->d);
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
                d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
                scales = b->scales;
                decode_q4k(b, qk);
            } else {
                const blk_q5_k *b = (const blk_q5_k *)p + ib;
                d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
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
            float d = neon_fp16_to_f32(b->d);
            decode_q6k(b, qk);
            for (int e = 0; e < 256; e++) y[e] = d * b->scales[e / 16] * qk[e];
            y += 256;
            break;
        }
        default: return;
        }
    }
}

void quants_row_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = neon_f32_to_fp16(src[i]);
}

void quants_row_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = neon_f32_to_bf16(src[i]);
}

/* ----------------------------------------------------- activations */

act_kind quants_act_kind(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16: return ACT_F32;
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: return ACT_Q8;
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K: case TSR_DTYPE_Q5_K:
    case TSR_DTYPE_Q6_K: return ACT_Q8K;
    default: return ACT_NONE;
    }
}

size_t quants_act_row_bytes(act_kind kind, int64_t K) {
    switch (kind) {
    case ACT_F32: return (size_t)K * 4;
    case ACT_Q8: return (size_t)(K / 32) * sizeof(act8);
    case ACT_Q8K: return (size_t)(K / 256) * sizeof(act8k);
    default: return 0;
    }
}

/* As ggml's Q8_0/Q8_1: d = amax/127, q = round(x/d), d kept as fp16. */
void quants_act8_from_f32(const float *x, act8 *y, int64_t n) {
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
void quants_act8k_from_f32(const float *x, act8k *y, int64_t n) {
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
        for (int64_t k = 0; k < K; k++) s += neon_fp16_to_f32(x[k]) * a[k];
        out[c] = s;
    }
}

static void dot_bf16(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const uint16_t *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += neon_bf16_to_f32(x[k]) * a[k];
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
        float acc[NEON_NC] = {0};                                                         \
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
      acc[c] += neon_fp16_to_f32(b->d) * a->d * (float)(sumi - 8 * a->isum))
DOT32(dot_q4_1, blk_q4_1, decode_nibbles(b->qs, q),
      acc[c] += neon_fp16_to_f32(b->d) * a->d * (float)sumi + neon_fp16_to_f32(b->m) * a->s)
DOT32(dot_q5_0, blk_q5_0, (decode_nibbles(b->qs, q), add_high_bits(b->qh, q)),
      acc[c] += neon_fp16_to_f32(b->d) * a->d * (float)(sumi - 16 * a->isum))
DOT32(dot_q5_1, blk_q5_1, (decode_nibbles(b->qs, q), add_high_bits(b->qh, q)),
      acc[c] += neon_fp16_to_f32(b->d) * a->d * (float)sumi + neon_fp16_to_f32(b->m) * a->s)

static void dot_q8_0(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q8_0 *x = w;
    for (int c = 0; c < nc; c++) {
        const act8 *a = ACT(c);
        float acc = 0.0f;
        for (int64_t ib = 0; ib < K / 32; ib++)
            acc += neon_fp16_to_f32(x[ib].d) * a[ib].d * (float)sum_s8_s8(x[ib].qs, a[ib].qs, 32);
        out[c] = acc;
    }
}

/* K-quants: per group of 16 (or 32) an integer dot times the group scale. */
static void dot_q2_k(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q2_k *x = w;
    int8_t q[256];
    float acc[NEON_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q2_k *b = x + ib;
        decode_q2k(b, q);
        float d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
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
    float acc[NEON_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q3_k *b = x + ib;
        decode_q3k(b, q);
        q3k_scales(b->scales, sc);
        float d = neon_fp16_to_f32(b->d);
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
    float acc[NEON_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const uint8_t *scales;
        float d, dmin;
        if (dtype == TSR_DTYPE_Q4_K) {
            const blk_q4_k *b = (const blk_q4_k *)w + ib;
            decode_q4k(b, q);
            scales = b->scales, d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
        } else {
            const blk_q5_k *b = (const blk_q5_k *)w + ib;
            decode_q5k(b, q);
            scales = b->scales, d = neon_fp16_to_f32(b->d), dmin = neon_fp16_to_f32(b->dmin);
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
    float acc[NEON_NC] = {0};
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const blk_q6_k *b = x + ib;
        decode_q6k(b, q);
        float d = neon_fp16_to_f32(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            int isum = 0;
            for (int g = 0; g < 16; g++) isum += b->scales[g] * sum_s8_s8(q + 16 * g, a->qs + 16 * g, 16);
            acc[c] += a->d * d * (float)isum;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = acc[c];
}

neon_dot_fn quants_scalar_dot(int32_t dtype) {
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
    default: return NULL;
    }
}

/* ------------------------------------------ decoders for the kernels */

void quants_decode_q2k(const blk_q2_k *b, int8_t *q) { decode_q2k(b, q); }
void quants_decode_q3k(const blk_q3_k *b, int8_t *q) { decode_q3k(b, q); }
void quants_decode_q5k(const blk_q5_k *b, int8_t *q) { decode_q5k(b, q); }
void quants_q3k_scales(const uint8_t *packed, int *sc) { q3k_scales(packed, sc); }

void quants_k4_scales(const uint8_t *packed, int *sc, int *mn) {
    for (int j = 0; j < 8; j++) k4_scale_min(j, packed, &sc[j], &mn[j]);
}
