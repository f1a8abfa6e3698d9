/*
 * quant_legacy — the 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q8_1 and IQ4_NL.
 *
 * Quantizers follow llama.cpp's reference row quantizers step by step (same
 * float operations in the same order) so that they produce the same bytes:
 *   Q4_0/Q5_0: d = (signed value of largest magnitude) / -8 (or -16),
 *              q = min(15|31, (int8)(x/d + 8.5|16.5))  (truncation, not rounding)
 *   Q4_1/Q5_1: d = (max - min) / 15|31, m = min, q = (x - min)/d + 0.5 truncated
 *   Q8_0/Q8_1: d = amax / 127, q = roundf(x/d)
 *   IQ4_NL:    nearest entry of a fixed 16-value codebook; the scale is the
 *              x^2-weighted least-squares fit, best of 15 starting scales
 * Dot products take y quantized to Q8_0 (or Q8_1 for the *_1 types) and sum
 * integer products per block before scaling, the integer formulation fast
 * backends implement.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Element of largest magnitude, sign kept (first one on ties). */
static float block_signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void block_min_max(const float *x, int n, float *min_out, float *max_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    *min_out = min;
    *max_out = max;
}

/* ------------------------------------------------------------------ Q4_0 */

void quant_q4_0_from_f32(const float *x, void *dst, int64_t n) {
    block_q4_0 *y = dst;
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        const float d = block_signed_absmax(x, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK4_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)MIN(15, (int8_t)(x0 + 8.5f));
            const uint8_t q1 = (uint8_t)MIN(15, (int8_t)(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_q4_0_to_f32(const void *src, float *y, int64_t n) {
    const block_q4_0 *x = src;
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void quant_q4_0_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK4_0 / 2];
        }
        sum += (float)sumi * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q4_1 */

void quant_q4_1_from_f32(const float *x, void *dst, int64_t n) {
    block_q4_1 *y = dst;
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        block_min_max(x, QK4_1, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[QK4_1 / 2 + j] - min) * id;
            const uint8_t q0 = (uint8_t)MIN(15, (int8_t)(x0 + 0.5f));
            const uint8_t q1 = (uint8_t)MIN(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_q4_1_to_f32(const void *src, float *y, int64_t n) {
    const block_q4_1 *x = src;
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void quant_q4_1_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_1; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (x[i].qs[j] & 0x0f) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + QK4_1 / 2];
        }
        /* sum(d_x*q + m) * d_y*q8 = d_x*d_y*sumi + m * (d_y*sum(q8)) */
        sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * (float)sumi +
               fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q5_0 */

void quant_q5_0_from_f32(const float *x, void *dst, int64_t n) {
    block_q5_0 *y = dst;
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        const float d = block_signed_absmax(x, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            const float x0 = x[j] * id;
            const float x1 = x[QK5_0 / 2 + j] * id;
            const uint8_t q0 = (uint8_t)MIN(31, (int8_t)(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)MIN(31, (int8_t)(x1 + 16.5f));
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + QK5_0 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}

/* The 5-bit value of element j (0..31) of a Q5 block. */
static inline int q5_value(const uint8_t *qs, uint32_t qh, int j) {
    int lo = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
    return lo | (int)(((qh >> j) & 1u) << 4);
}

void quant_q5_0_to_f32(const void *src, float *y, int64_t n) {
    const block_q5_0 *x = src;
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        const float d = fp16_to_f32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_0; j++) y[j] = (float)(q5_value(x[i].qs, qh, j) - 16) * d;
    }
}

void quant_q5_0_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_0; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0; j++) sumi += (q5_value(x[i].qs, qh, j) - 16) * y[i].qs[j];
        sum += (float)sumi * fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d);
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q5_1 */

void quant_q5_1_from_f32(const float *x, void *dst, int64_t n) {
    block_q5_1 *y = dst;
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        block_min_max(x, QK5_1, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        y[i].m = f32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[QK5_1 / 2 + j] - min) * id;
            /* no clamp here, unlike Q4_1: llama.cpp relies on (max-min)/d <= 31 */
            const uint8_t q0 = (uint8_t)(x0 + 0.5f);
            const uint8_t q1 = (uint8_t)(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
            qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + QK5_1 / 2);
        }
        memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void quant_q5_1_to_f32(const void *src, float *y, int64_t n) {
    const block_q5_1 *x = src;
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK5_1; j++) y[j] = (float)q5_value(x[i].qs, qh, j) * d + m;
    }
}

void quant_q5_1_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK5_1; i++) {
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1; j++) sumi += q5_value(x[i].qs, qh, j) * y[i].qs[j];
        sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * (float)sumi +
               fp16_to_f32(x[i].m) * fp16_to_f32(y[i].s);
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q8_0 */

static float block_absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    return amax;
}

void quant_q8_0_from_f32(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        const float d = block_absmax(x, QK8_0) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void quant_q8_0_to_f32(const void *src, float *y, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

void quant_q8_0_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_0 *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += (float)sumi * (fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d));
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q8_1 */

void quant_q8_1_from_f32(const float *x, void *dst, int64_t n) {
    block_q8_1 *y = dst;
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        const float d = block_absmax(x, QK8_1) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = f32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = (int8_t)roundf(x[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = f32_to_fp16((float)sum * d);
    }
}

void quant_q8_1_to_f32(const void *src, float *y, int64_t n) {
    const block_q8_1 *x = src;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = (float)x[i].qs[j] * d;
    }
}

/* ---------------------------------------------------------------- IQ4_NL */

/* The non-linear 4-bit codebook of IQ4_NL (llama.cpp's kvalues_iq4nl). */
static const int8_t iq4nl_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Index of the codebook value nearest to x (ties to the upper value unless
 * strictly nearer the lower one, as llama.cpp's best_index_int8). */
static int iq4nl_best_index(float x) {
    if (x <= iq4nl_values[0]) return 0;
    if (x >= iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    return x - iq4nl_values[hi - 1] < iq4nl_values[hi] - x ? hi - 1 : hi;
}

/* Weighted fit of the scale for codebook indices chosen with inverse scale
 * id: returns sum(w*q*x) and sum(w*q*q) with w = x^2. */
static void iq4nl_fit(const float *x, float id, float *sumqx, float *sumq2) {
    float sx = 0.0f, s2 = 0.0f;
    for (int j = 0; j < QK4_NL; j++) {
        const float q = iq4nl_values[iq4nl_best_index(id * x[j])];
        const float w = x[j] * x[j];
        sx += w * q * x[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* llama.cpp's quantize_row_iq4_nl_ref: quantize_row_iq4_nl_impl with one
 * 32-block per super-block, no importance weights and ntry = 7. */
void quant_iq4_nl_from_f32(const float *x, void *dst, int64_t n) {
    enum { NTRY = 7 };
    block_iq4_nl *y = dst;
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_NL; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        float scale = 0.0f;
        if (amax >= 1e-15f) { /* llama.cpp's GROUP_MAX_EPS */
            float sumqx, sumq2;
            iq4nl_fit(x, 1 / (-max / iq4nl_values[0]), &sumqx, &sumq2);
            float d = sumqx / sumq2;
            float best = d * sumqx;
            for (int itry = -NTRY; itry <= NTRY; itry++) {
                iq4nl_fit(x, (float)(itry + iq4nl_values[0]) / max, &sumqx, &sumq2);
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    d = sumqx / sumq2;
                    best = d * sumqx;
                }
            }
            scale = d;
        }
        y[i].d = f32_to_fp16(scale);
        const float id = scale ? 1 / scale : 0.0f;
        for (int j = 0; j < QK4_NL / 2; j++) {
            const int l0 = iq4nl_best_index(id * x[j]);
            const int l1 = iq4nl_best_index(id * x[j + QK4_NL / 2]);
            y[i].qs[j] = (uint8_t)(l0 | (l1 << 4));
        }
    }
}

void quant_iq4_nl_to_f32(const void *src, float *y, int64_t n) {
    const block_iq4_nl *x = src;
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        const float d = fp16_to_f32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * (float)iq4nl_values[x[i].qs[j] & 0x0f];
            y[j + QK4_NL / 2] = d * (float)iq4nl_values[x[i].qs[j] >> 4];
        }
    }
}

void quant_iq4_nl_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        int sumi = 0;
        for (int j = 0; j < QK4_NL / 2; j++) {
            sumi += iq4nl_values[x[i].qs[j] & 0x0f] * y[i].qs[j];
            sumi += iq4nl_values[x[i].qs[j] >> 4] * y[i].qs[j + QK4_NL / 2];
        }
        sum += fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d) * (float)sumi;
    }
    *out = sum;
}
