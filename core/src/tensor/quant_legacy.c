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
#include <tessera/plugin_quants.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* -------------------------------------------- levels of Q4_0 ... Q5_1 */

/* Q4_0, Q4_1, Q5_0 and Q5_1 store one level per element, 0..2^bits - 1:
 *   x = (level - 2^(bits-1)) * d      (_0: symmetric)
 *   x = level * d + m                 (_1: affine, m the block's minimum)
 * The low 4 bits of element j are a nibble of qs (j < 16: the low one of
 * qs[j]; else the high one of qs[j - 16]); a 5-bit level keeps its fifth
 * bit in bit j of qh. QK = 32 for all four. */
enum { QK_LEGACY = 32 };

/* Levels of x quantized against min and inverse scale id as llama.cpp does:
 * (x - min) * id + offset truncated toward zero, at most top. */
static void levels_truncate(const float *x, float min, float id, float offset, int top, uint8_t *lv) {
    for (int j = 0; j < QK_LEGACY; j++) lv[j] = (uint8_t)MIN(top, (int8_t)((x[j] - min) * id + offset));
}

/* _0: d = the signed value of largest magnitude / -2^(bits-1), so that it
 * maps to level 0; returns d. */
static float levels_symmetric(const float *x, int bits, uint8_t *lv) {
    float amax;
    const float d = quant_signed_absmax(x, QK_LEGACY, &amax) / (float)-(1 << (bits - 1));
    const float id = d ? 1.0f / d : 0.0f;
    /* (x - 0) * id == x * id: the offset holds the 0.5 of rounding */
    levels_truncate(x, 0.0f, id, (float)(1 << (bits - 1)) + 0.5f, (1 << bits) - 1, lv);
    return d;
}

/* _1: d = (max - min) / (2^bits - 1), levels from the minimum. llama.cpp
 * clamps Q4_1's levels and not Q5_1's; (x - min) * id <= 2^bits - 1 up to
 * rounding, so the clamp never bites and both take it. */
static void levels_affine(const float *x, int bits, uint8_t *lv, float *d_out, float *min_out) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK_LEGACY; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / (float)((1 << bits) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    levels_truncate(x, min, id, 0.5f, (1 << bits) - 1, lv);
    *d_out = d;
    *min_out = min;
}

/* Pack 32 levels into qs, and their fifth bits into qh (NULL: 4-bit levels). */
static void levels_pack(const uint8_t *lv, uint8_t *qs, uint8_t *qh) {
    uint32_t hi = 0;
    for (int j = 0; j < QK_LEGACY / 2; j++) {
        qs[j] = (uint8_t)((lv[j] & 0x0f) | ((lv[j + QK_LEGACY / 2] & 0x0f) << 4));
        hi |= (uint32_t)(lv[j] >> 4) << j | (uint32_t)(lv[j + QK_LEGACY / 2] >> 4) << (j + QK_LEGACY / 2);
    }
    if (qh) memcpy(qh, &hi, sizeof hi);
}

/* The 32 levels of qs and qh (NULL: 4-bit levels). */
static void levels_unpack(const uint8_t *qs, const uint8_t *qh, uint8_t *lv) {
    uint32_t hi = 0;
    if (qh) memcpy(&hi, qh, sizeof hi);
    for (int j = 0; j < QK_LEGACY; j++) {
        const int nibble = j < QK_LEGACY / 2 ? qs[j] & 0x0f : qs[j - QK_LEGACY / 2] >> 4;
        lv[j] = (uint8_t)(nibble | (int)((hi >> j) & 1u) << 4);
    }
}

/* A block of any of the four, unpacked: its scale, minimum (0 for _0) and
 * levels; and what tells the four apart: the width of a level, the zero
 * point, and where the fields are (pack and unpack). */
typedef struct legacy_block {
    float d, m;
    uint8_t lv[QK_LEGACY];
} legacy_block;

typedef struct legacy_format {
    int bits;    /* 4 or 5 */
    bool affine; /* _1: x = level * d + m, else (level - 2^(bits-1)) * d */
    size_t block_bytes;
    void (*pack)(const legacy_block *b, void *dst);
    void (*unpack)(const void *src, legacy_block *b);
} legacy_format;

static void legacy_from_f32(const legacy_format *f, const float *x, void *dst, int64_t n) {
    legacy_block b = {0};
    for (int64_t i = 0; i < n / QK_LEGACY; i++, x += QK_LEGACY) {
        if (f->affine) levels_affine(x, f->bits, b.lv, &b.d, &b.m);
        else b.d = levels_symmetric(x, f->bits, b.lv);
        f->pack(&b, (uint8_t *)dst + (size_t)i * f->block_bytes);
    }
}

static void legacy_to_f32(const legacy_format *f, const void *src, float *y, int64_t n) {
    legacy_block b;
    const int zero = 1 << (f->bits - 1);
    for (int64_t i = 0; i < n / QK_LEGACY; i++, y += QK_LEGACY) {
        f->unpack((const uint8_t *)src + (size_t)i * f->block_bytes, &b);
        for (int j = 0; j < QK_LEGACY; j++)
            y[j] = f->affine ? (float)b.lv[j] * b.d + b.m : (float)(b.lv[j] - zero) * b.d;
    }
}

/* y quantized to Q8_0 (_0) or Q8_1 (_1); integer sums per block, scaled
 * once (the formulation fast backends implement). For _1, with Q8_1's
 * s = d_y * sum(q8): sum((d*l + m) * d_y*q8) = d*d_y*sum(l*q8) + m*s. */
static void legacy_dot(const legacy_format *f, int64_t n, float *out, const void *vx, const void *vy) {
    legacy_block b;
    const int zero = f->affine ? 0 : 1 << (f->bits - 1);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_LEGACY; i++) {
        f->unpack((const uint8_t *)vx + (size_t)i * f->block_bytes, &b);
        const int8_t *q8 = f->affine ? ((const block_q8_1 *)vy)[i].qs : ((const block_q8_0 *)vy)[i].qs;
        int sumi = 0;
        for (int j = 0; j < QK_LEGACY; j++) sumi += (b.lv[j] - zero) * q8[j];
        if (f->affine) {
            const block_q8_1 *y = (const block_q8_1 *)vy + i;
            sum += b.d * fp16_to_f32(y->d) * (float)sumi + b.m * fp16_to_f32(y->s);
        } else {
            sum += (float)sumi * b.d * fp16_to_f32(((const block_q8_0 *)vy)[i].d);
        }
    }
    *out = sum;
}

/* ------------------------------------------- Q4_0, Q4_1, Q5_0, Q5_1 */

static void q4_0_pack(const legacy_block *b, void *dst) {
    block_q4_0 *y = dst;
    y->d = f32_to_fp16(b->d);
    levels_pack(b->lv, y->qs, NULL);
}

static void q4_0_unpack(const void *src, legacy_block *b) {
    const block_q4_0 *x = src;
    b->d = fp16_to_f32(x->d);
    levels_unpack(x->qs, NULL, b->lv);
}

static void q4_1_pack(const legacy_block *b, void *dst) {
    block_q4_1 *y = dst;
    y->d = f32_to_fp16(b->d);
    y->m = f32_to_fp16(b->m);
    levels_pack(b->lv, y->qs, NULL);
}

static void q4_1_unpack(const void *src, legacy_block *b) {
    const block_q4_1 *x = src;
    b->d = fp16_to_f32(x->d);
    b->m = fp16_to_f32(x->m);
    levels_unpack(x->qs, NULL, b->lv);
}

static void q5_0_pack(const legacy_block *b, void *dst) {
    block_q5_0 *y = dst;
    y->d = f32_to_fp16(b->d);
    levels_pack(b->lv, y->qs, y->qh);
}

static void q5_0_unpack(const void *src, legacy_block *b) {
    const block_q5_0 *x = src;
    b->d = fp16_to_f32(x->d);
    levels_unpack(x->qs, x->qh, b->lv);
}

static void q5_1_pack(const legacy_block *b, void *dst) {
    block_q5_1 *y = dst;
    y->d = f32_to_fp16(b->d);
    y->m = f32_to_fp16(b->m);
    levels_pack(b->lv, y->qs, y->qh);
}

static void q5_1_unpack(const void *src, legacy_block *b) {
    const block_q5_1 *x = src;
    b->d = fp16_to_f32(x->d);
    b->m = fp16_to_f32(x->m);
    levels_unpack(x->qs, x->qh, b->lv);
}

static const legacy_format fmt_q4_0 = {4, false, sizeof(block_q4_0), q4_0_pack, q4_0_unpack};
static const legacy_format fmt_q4_1 = {4, true, sizeof(block_q4_1), q4_1_pack, q4_1_unpack};
static const legacy_format fmt_q5_0 = {5, false, sizeof(block_q5_0), q5_0_pack, q5_0_unpack};
static const legacy_format fmt_q5_1 = {5, true, sizeof(block_q5_1), q5_1_pack, q5_1_unpack};

void quant_q4_0_from_f32(const float *x, void *dst, int64_t n) { legacy_from_f32(&fmt_q4_0, x, dst, n); }
void quant_q4_1_from_f32(const float *x, void *dst, int64_t n) { legacy_from_f32(&fmt_q4_1, x, dst, n); }
void quant_q5_0_from_f32(const float *x, void *dst, int64_t n) { legacy_from_f32(&fmt_q5_0, x, dst, n); }
void quant_q5_1_from_f32(const float *x, void *dst, int64_t n) { legacy_from_f32(&fmt_q5_1, x, dst, n); }

/* With importance weights (llama.cpp's quantize_row_q4_0_impl and its
 * siblings): each element weighs qw * sqrt(sigma2 + x^2), sigma2 the mean
 * square of the whole row; the _0 types fit a symmetric scale by make_qx,
 * the _1 types a scale and minimum by make_qkx3 (37 candidate scales). */
static void legacy_from_f32_w(const legacy_format *f, const float *x, void *dst, int64_t n, const float *qw) {
    legacy_block b = {0};
    float sum_x2 = 0.0f, weight[QK_LEGACY];
    for (int64_t j = 0; j < n; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n;
    for (int64_t i = 0; i < n / QK_LEGACY; i++, x += QK_LEGACY, qw += QK_LEGACY) {
        quant_imatrix_weights(x, qw, QK_LEGACY, sigma2, weight, NULL);
        if (f->affine) {
            uint8_t Laux[QK_LEGACY];
            float min;
            b.d = quant_make_qkx(QK_LEGACY, (1 << f->bits) - 1, x, weight, b.lv, &min, Laux, -0.9f, 0.05f, 36,
                                 false);
            b.m = -min;
        } else {
            int8_t L[QK_LEGACY];
            b.d = quant_make_qx(QK_LEGACY, 1 << (f->bits - 1), x, L, weight);
            for (int j = 0; j < QK_LEGACY; j++) b.lv[j] = (uint8_t)L[j];
        }
        f->pack(&b, (uint8_t *)dst + (size_t)i * f->block_bytes);
    }
}

void quant_q4_0_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    legacy_from_f32_w(&fmt_q4_0, x, dst, n, qw);
}
void quant_q4_1_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    legacy_from_f32_w(&fmt_q4_1, x, dst, n, qw);
}
void quant_q5_0_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    legacy_from_f32_w(&fmt_q5_0, x, dst, n, qw);
}
void quant_q5_1_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    legacy_from_f32_w(&fmt_q5_1, x, dst, n, qw);
}

void quant_q4_0_to_f32(const void *src, float *y, int64_t n) { legacy_to_f32(&fmt_q4_0, src, y, n); }
void quant_q4_1_to_f32(const void *src, float *y, int64_t n) { legacy_to_f32(&fmt_q4_1, src, y, n); }
void quant_q5_0_to_f32(const void *src, float *y, int64_t n) { legacy_to_f32(&fmt_q5_0, src, y, n); }
void quant_q5_1_to_f32(const void *src, float *y, int64_t n) { legacy_to_f32(&fmt_q5_1, src, y, n); }

void quant_q4_0_dot(int64_t n, float *out, const void *x, const void *y) { legacy_dot(&fmt_q4_0, n, out, x, y); }
void quant_q4_1_dot(int64_t n, float *out, const void *x, const void *y) { legacy_dot(&fmt_q4_1, n, out, x, y); }
void quant_q5_0_dot(int64_t n, float *out, const void *x, const void *y) { legacy_dot(&fmt_q5_0, n, out, x, y); }
void quant_q5_1_dot(int64_t n, float *out, const void *x, const void *y) { legacy_dot(&fmt_q5_1, n, out, x, y); }

/* ------------------------------------------------------------------ Q8_0 */

static float block_absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        const float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    return amax;
}

/* Q8_0's and Q8_1's quants of a block: d = amax / 127, q = roundf(x / d);
 * returns d. */
static float q8_block(const float *x, int8_t *qs) {
    const float d = block_absmax(x, QK8_0) / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK8_0; j++) qs[j] = (int8_t)roundf(x[j] * id);
    return d;
}

void quant_q8_0_from_f32(const float *x, void *dst, int64_t n) {
    block_q8_0 *y = dst;
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) y[i].d = f32_to_fp16(q8_block(x, y[i].qs));
}

/* x = q * d, for Q8_0 and Q8_1 alike. */
static void q8_block_to_f32(const int8_t *qs, uint16_t d16, float *y) {
    const float d = fp16_to_f32(d16);
    for (int j = 0; j < QK8_0; j++) y[j] = (float)qs[j] * d;
}

void quant_q8_0_to_f32(const void *src, float *y, int64_t n) {
    const block_q8_0 *x = src;
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) q8_block_to_f32(x[i].qs, x[i].d, y);
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
        const float d = q8_block(x, y[i].qs);
        y[i].d = f32_to_fp16(d);
        int sum = 0; /* s = d * sum(q): the block's sum, for the _1 formats' minimum */
        for (int j = 0; j < QK8_1; j++) sum += y[i].qs[j];
        y[i].s = f32_to_fp16((float)sum * d);
    }
}

void quant_q8_1_to_f32(const void *src, float *y, int64_t n) {
    const block_q8_1 *x = src;
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) q8_block_to_f32(x[i].qs, x[i].d, y);
}

/* ---------------------------------------------------------------- IQ4_NL */

/* The non-linear 4-bit codebook of IQ4_NL (plugin_quants.h's, shared with
 * the plugins). */
static const int8_t *const iq4nl_values = TSR_IQ4NL_VALUES;

/* Index of the codebook value nearest to x (ties to the upper value unless
 * strictly nearer the lower one, as llama.cpp's best_index_int8). */
int quant_iq4nl_best_index(float x) {
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
 * id: returns sum(w*q*x) and sum(w*q*q) with w the weights, x^2 if NULL. */
static void iq4nl_fit(const float *x, const float *weight, float id, float *sumqx, float *sumq2) {
    float sx = 0.0f, s2 = 0.0f;
    for (int j = 0; j < QK4_NL; j++) {
        const float q = iq4nl_values[quant_iq4nl_best_index(id * x[j])];
        const float w = weight ? weight[j] : x[j] * x[j];
        sx += w * q * x[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

float quant_iq4nl_scale(const float *x, const float *weight) {
    enum { NTRY = 7 };
    float amax;
    const float max = quant_signed_absmax(x, QK4_NL, &amax);
    if (amax < 1e-15f) return 0.0f; /* llama.cpp's GROUP_MAX_EPS */
    float sumqx, sumq2;
    iq4nl_fit(x, weight, 1 / (-max / iq4nl_values[0]), &sumqx, &sumq2);
    float d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -NTRY; itry <= NTRY; itry++) {
        iq4nl_fit(x, weight, (float)(itry + iq4nl_values[0]) / max, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* llama.cpp's quantize_row_iq4_nl_impl with one 32-block per super-block
 * and ntry = 7; with importance weights qw (or NULL, the reference rule:
 * x^2) each element weighs qw * sqrt(sigma2 + x^2), sigma2 twice the
 * block's mean square. */
static void iq4nl_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    block_iq4_nl *y = dst;
    float weight[QK4_NL];
    for (int64_t i = 0; i < n / QK4_NL; i++, x += QK4_NL) {
        float sigma2 = 0.0f;
        for (int j = 0; j < QK4_NL; j++) sigma2 += x[j] * x[j];
        sigma2 *= 2.f / QK4_NL;
        if (qw) quant_imatrix_weights(x, qw + QK4_NL * i, QK4_NL, sigma2, weight, NULL);
        const float scale = quant_iq4nl_scale(x, qw ? weight : NULL);
        y[i].d = f32_to_fp16(scale);
        const float id = scale ? 1 / scale : 0.0f;
        for (int j = 0; j < QK4_NL / 2; j++) {
            const int l0 = quant_iq4nl_best_index(id * x[j]);
            const int l1 = quant_iq4nl_best_index(id * x[j + QK4_NL / 2]);
            y[i].qs[j] = (uint8_t)(l0 | (l1 << 4));
        }
    }
}

void quant_iq4_nl_from_f32(const float *x, void *dst, int64_t n) { iq4nl_quantize(x, dst, n, NULL); }

void quant_iq4_nl_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq4nl_quantize(x, dst, n, qw);
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
