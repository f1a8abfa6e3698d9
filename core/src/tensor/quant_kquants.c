/*
 * quant_kquants — the 256-element super-block formats Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K and the activation format Q8_K.
 *
 * The quantizers reproduce llama.cpp's reference (*_ref) quantizers, which is
 * what llama-quantize uses without an importance matrix:
 *   Q2_K  16 sub-blocks of 16, 2-bit quants with a min; per sub-block scale and
 *         min from make_qkx2 (weights |x|, mean absolute error), then both
 *         requantized to 4 bits against fp16 super-scales d and dmin.
 *   Q3_K  16 sub-blocks of 16, signed 3-bit quants; scales from make_q3
 *         (iterative weighted least squares, weights x^2), requantized to 6 bits.
 *   Q4_K  8 sub-blocks of 32, 4-bit quants with a min; make_qkx2 with weights
 *         rms(x) + |x|, 20 steps; scales/mins to 6 bits.
 *   Q5_K  as Q4_K with 5-bit quants and 15 steps.
 *   Q6_K  16 sub-blocks of 16, signed 6-bit quants; make_qx with weights x^2,
 *         scales to signed 8 bits.
 * The float arithmetic below keeps llama.cpp's operation order, because a
 * different order changes the chosen quants on real data.
 *
 * Element e of a super-block maps to packed storage as follows (a = e/128,
 * k = (e%128)/32, l = e%32 unless noted):
 *   Q2_K/Q3_K low bits: qs[32a + l] >> 2k; Q3_K high bit: hmask[e%32] bit e/32
 *   Q4_K/Q5_K (a = e/64, h = (e%64)/32): qs[32a + l] nibble h; Q5_K high bit
 *            qh[l] bit 2a+h
 *   Q6_K low bits: ql[64a + 32(k&1) + l] nibble k>>1; high: qh[32a + l] >> 2k
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Below this a group counts as all zero (llama.cpp's GROUP_MAX_EPS). */
#define GROUP_MAX_EPS 1e-15f

/* ------------------------------------------------ sub-block scale fits */

/* x at inverse scale iscale as levels in [-nmax, nmax-1], and the
 * weighted sums of the least-squares scale sumlx / suml2 (weights qw, or
 * x^2 when qw is NULL); each level plus offset into L unless L is NULL. */
static void fit_symmetric(int n, int nmax, const float *x, const float *qw, float iscale, int offset, int8_t *L,
                          float *sumlx_out, float *suml2_out) {
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = quant_nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        if (L) L[i] = (int8_t)(l + offset);
        const float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    *sumlx_out = sumlx;
    *suml2_out = suml2;
}

/* The first fit of quant_make_qx and make_q3_quants: at iscale -nmax/max,
 * max the element of largest magnitude with its sign. False, with L zeroed,
 * for a group that is all (nearly) zero. */
static bool fit_start(int n, int nmax, const float *x, const float *qw, int offset, int8_t *L, float *max,
                      float *sumlx, float *suml2) {
    float amax;
    *max = quant_signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return false;
    }
    fit_symmetric(n, nmax, x, qw, -nmax / *max, offset, L, sumlx, suml2);
    return true;
}

/* Symmetric quants in [-nmax, nmax-1] for x (llama.cpp's make_qx_quants,
 * rmse_type 1): the weighted least-squares scale (weights qw, x^2 when
 * NULL), best of 18 starting scales around nmax/max. L receives quants
 * offset by nmax; returns the scale. */
float quant_make_qx(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float max, sumlx, suml2;
    if (!fit_start(n, nmax, x, qw, nmax, L, &max, &sumlx, &suml2)) return 0.0f;
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float iscale = -((float)nmax + 0.1f * (float)is) / max;
        fit_symmetric(n, nmax, x, qw, iscale, nmax, NULL, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            fit_symmetric(n, nmax, x, qw, iscale, nmax, L, &sumlx, &suml2); /* the same sums, and L */
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit-style quants in [-nmax, nmax-1] refined by coordinate
 * descent on the x^2-weighted error (up to 5 sweeps). L offset by nmax. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    (void)qw; /* the x^2 weights are its rule; the signature is quant_make_qx's */
    float max, sumlx, suml2;
    if (!fit_start(n, nmax, x, NULL, 0, L, &max, &sumlx, &suml2)) return 0.0f;
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int new_l = quant_nearest_int(x[i] * sl2 / slx);
                new_l = MAX(-nmax, MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric quants in [0, nmax] with x ~ scale*L - the_min: a grid of
 * nstep+1 candidate scales, each refit by weighted least squares, keeping the
 * one of least weighted error (absolute when use_mad, else squared).
 * llama.cpp's make_qkx2_quants, and make_qkx3_quants with weights given
 * (the two differ only when weights is NULL, which never happens here). */
float quant_make_qkx(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = quant_nearest_int(iscale * (x[i] - min));
            l = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Non-negative quants in [0, nmax] of the sub-block scales (or mins) x of a
 * super-block, with weights qw (the sub-blocks' summed importance):
 * llama.cpp's make_qp_quants. The best of 9 starting scales around
 * nmax/max by weighted squared error, then up to 5 sweeps of coordinate
 * descent on the weighted least-squares scale. Returns the scale. */
float quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw) {
    float max = 0.0f;
    for (int i = 0; i < n; i++) max = MAX(max, x[i]);
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)quant_nearest_int(iscale * x[i]);
    const float scale = 1 / iscale;
    float best_mse = 0.0f;
    for (int i = 0; i < n; i++) {
        const float diff = x[i] - scale * (float)L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        const float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        const float scale_is = 1 / iscale_is;
        float mse = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = MIN(nmax, quant_nearest_int(iscale_is * x[i]));
            const float diff = x[i] - scale_is * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = MIN(nmax, quant_nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                const int new_l = MIN(nmax, quant_nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

/* Importance weights of a group of n under the weighted quantizers:
 * qw[i] * sqrt(sigma2 + x[i]^2), sigma2 the group's (or row's) mean square
 * scaled as the caller says; the sum into *sumw unless NULL. */
void quant_imatrix_weights(const float *x, const float *qw, int n, float sigma2, float *w, float *sumw) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) w[i] = qw[i] * sqrtf(sigma2 + x[i] * x[i]);
    for (int i = 0; i < n; i++) s += w[i];
    if (sumw) *sumw = s;
}

static float sum_squares(const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* Scale and min (6 bits each) of sub-block j of a Q4_K/Q5_K block: j < 4 in
 * the low 6 bits of bytes j and j+4; j >= 4 split between a nibble of byte
 * j+4 and the top 2 bits of bytes j-4 (scale) and j (min). */
static inline void kquant_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void kquant_pack_scale_min(int j, uint8_t ls, uint8_t lm, uint8_t *q) {
    if (j < 4) {
        q[j] = ls;
        q[j + 4] = lm;
    } else {
        q[j + 4] = (uint8_t)((ls & 0x0f) | ((lm & 0x0f) << 4));
        q[j - 4] |= (uint8_t)((ls >> 4) << 6);
        q[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Signed 6-bit scale j (-32..31) of a Q3_K block: low nibble in byte j (j<8)
 * or the high nibble of byte j-8; top 2 bits in byte 8 + j%4 at bit 2*(j/4). */
static inline int q3k_scale(const uint8_t *s, int j) {
    int lo = j < 8 ? (s[j] & 0x0f) : (s[j - 8] >> 4);
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---------------------------------------------- what the formats share */

/* A sub-block's levels recomputed against its stored (rounded) scale d and
 * min dm: nearest((x + dm) / d) within [lo, hi], plus offset. */
static void requantize(const float *x, int n, float d, float dm, int lo, int hi, int offset, uint8_t *L) {
    for (int i = 0; i < n; i++) {
        const int l = quant_nearest_int((x[i] + dm) / d);
        L[i] = (uint8_t)(MAX(lo, MIN(hi, l)) + offset);
    }
}

/* 2-bit levels 0..3 of a super-block into qs (Q2_K, and Q3_K's low bits):
 * element e in bits 2k of qs[32a + l], a = e/128, k = (e%128)/32, l = e%32. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

static inline int q2k_quant(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

/* A super-block's dot with a min (Q2_K, Q4_K, Q5_K): with isum the sum of
 * scale * level * q8 and summs the sum of min * q8 over the sub-blocks,
 * y_d * (d * isum - dmin * summs). */
static float dot_with_min(float y_d, float d, float dmin, int isum, int summs) {
    const float dall = y_d * d, dmins = y_d * dmin;
    return dall * (float)isum - dmins * (float)summs;
}

/* Q3_K and Q6_K are one rule, x = d * sc_j * level in sub-block j of 16,
 * with signed scales and levels; they differ only in how these are packed,
 * which their unpack function undoes. */
typedef struct signed16_block {
    float d;
    int sc[QK_K / 16];
    int8_t lv[QK_K];
} signed16_block;
typedef void (*signed16_unpack_fn)(const void *block, signed16_block *out);

static void signed16_to_f32(const void *src, size_t block_bytes, signed16_unpack_fn unpack, float *y, int64_t n) {
    signed16_block b;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        unpack((const uint8_t *)src + (size_t)i * block_bytes, &b);
        for (int e = 0; e < QK_K; e++) y[e] = b.d * (float)b.sc[e / 16] * (float)b.lv[e];
    }
}

static void signed16_dot(const void *vx, size_t block_bytes, signed16_unpack_fn unpack, const block_q8_K *y,
                         int64_t n, float *out) {
    signed16_block b;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack((const uint8_t *)vx + (size_t)i * block_bytes, &b);
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int sub = 0;
            for (int l = 0; l < 16; l++) sub += b.lv[16 * j + l] * y[i].qs[16 * j + l];
            isum += b.sc[j] * sub;
        }
        sum += b.d * y[i].d * (float)isum;
    }
    *out = sum;
}

/* Q4_K and Q5_K are one rule, x = d * sc_j * level - dmin * m_j in
 * sub-block j of 32 (6-bit sc and m, kquant_scale_min); they differ only in
 * the levels' width, which their unpack function undoes. */
typedef struct min32_block {
    float d, dmin;
    const uint8_t *scales; /* K_SCALE_SIZE packed scales and mins */
    uint8_t lv[QK_K];
} min32_block;
typedef void (*min32_unpack_fn)(const void *block, min32_block *out);

static void min32_to_f32(const void *src, size_t block_bytes, min32_unpack_fn unpack, float *y, int64_t n) {
    min32_block b;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        unpack((const uint8_t *)src + (size_t)i * block_bytes, &b);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            kquant_scale_min(j, b.scales, &sc, &m);
            const float d1 = b.d * (float)sc, m1 = b.dmin * (float)m;
            for (int l = 0; l < 32; l++) y[32 * j + l] = d1 * (float)b.lv[32 * j + l] - m1;
        }
    }
}

static void min32_dot(const void *vx, size_t block_bytes, min32_unpack_fn unpack, const block_q8_K *y, int64_t n,
                      float *out) {
    min32_block b;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        unpack((const uint8_t *)vx + (size_t)i * block_bytes, &b);
        int sumi = 0, summs = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            kquant_scale_min(j, b.scales, &sc, &m);
            int sub = 0;
            for (int l = 0; l < 32; l++) sub += b.lv[32 * j + l] * y[i].qs[32 * j + l];
            sumi += sc * sub;
            summs += m * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        }
        sum += dot_with_min(y[i].d, b.d, b.dmin, sumi, summs);
    }
    *out = sum;
}

/* Q3_K's and Q6_K's first step: each sub-block of 16 fitted on its own
 * (fit(16, nmax, ...): its scale, its levels into L), then the super-block
 * scale is the sub-block scale of largest magnitude, sign kept (its
 * magnitude into *amax unless NULL). */
static float signed16_scales(const float *x, int nmax,
                             float (*fit)(int n, int nmax, const float *x, int8_t *L, const float *qw),
                             const float *qw, int8_t *L, float *scales, float *amax) {
    for (int j = 0; j < QK_K / 16; j++) scales[j] = fit(16, nmax, x + 16 * j, L + 16 * j, qw ? qw + 16 * j : NULL);
    float a;
    const float max = quant_signed_absmax(scales, QK_K / 16, &a);
    if (amax) *amax = a;
    return max;
}

/* ------------------------------------------------------------------ Q2_K */

/* Q2_K's last step, once d, dmin and the 4-bit scales are stored: the
 * levels recomputed against them, packed. */
static void q2k_finish(const float *x, block_q2_K *y, uint8_t *L) {
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = fp16_to_f32(y->d) * (float)(y->scales[j] & 0x0f);
        if (!d) continue;
        const float dm = fp16_to_f32(y->dmin) * (float)(y->scales[j] >> 4);
        requantize(x + 16 * j, 16, d, dm, 0, 3, 0, L + 16 * j);
    }
    pack_2bit(L, y->qs);
}

void quant_q2_K_from_f32(const float *x, void *dst, int64_t n) {
    block_q2_K *y = dst;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float max_scale = 0.0f, max_min = 0.0f;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = quant_make_qkx(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
            y[i].d = f32_to_fp16(max_scale / q4scale);
        } else {
            memset(y[i].scales, 0, sizeof y[i].scales);
            y[i].d = f32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)(quant_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = f32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = f32_to_fp16(0.0f);
        }
        q2k_finish(x, &y[i], L);
    }
}

/* llama.cpp's quantize_row_q2_K_impl: per sub-block make_qkx3 with weights
 * qw * sqrt(sigma2 + x^2) (sigma2 the super-block's mean square), then the
 * scales and the mins each fitted to 4 bits by make_qp_quants weighted by
 * the sub-blocks' summed weights. */
void quant_q2_K_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    block_q2_K *y = dst;
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float weight[16], mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = sum_squares(x, QK_K) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            quant_imatrix_weights(x + 16 * j, qw + 16 * j, 16, sigma2, weight, &sw[j]);
            scales[j] = quant_make_qkx(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36,
                                       false);
        }
        y[i].d = f32_to_fp16(quant_make_qp(QK_K / 16, 15, scales, Ls, sw));
        y[i].dmin = f32_to_fp16(quant_make_qp(QK_K / 16, 15, mins, Lm, sw));
        for (int j = 0; j < QK_K / 16; j++) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2k_finish(x, &y[i], L);
    }
}

void quant_q2_K_to_f32(const void *src, float *y, int64_t n) {
    const block_q2_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
        const float d = fp16_to_f32(x[i].d), min = fp16_to_f32(x[i].dmin);
        for (int e = 0; e < QK_K; e++) {
            const uint8_t sc = x[i].scales[e / 16];
            const float dl = d * (float)(sc & 0x0f), ml = min * (float)(sc >> 4);
            y[e] = dl * (float)q2k_quant(x[i].qs, e) - ml;
        }
    }
}

void quant_q2_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int summs = 0, isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            summs += (x[i].scales[j] >> 4) * y[i].bsums[j];
            int sub = 0;
            for (int l = 0; l < 16; l++) sub += q2k_quant(x[i].qs, 16 * j + l) * y[i].qs[16 * j + l];
            isum += (x[i].scales[j] & 0x0f) * sub;
        }
        sum += dot_with_min(y[i].d, fp16_to_f32(x[i].d), fp16_to_f32(x[i].dmin), isum, summs);
    }
    *out = sum;
}

/* ------------------------------------------------------------------ Q3_K */

/* Q3_K's last step, once d and the 6-bit scales are stored: the levels
 * recomputed against them (L keeps make_q3/make_qx's where a scale is 0),
 * the high bits into hmask, the low bits packed. */
static void q3k_finish(const float *x, block_q3_K *y, int8_t *L) {
    uint8_t *lv = (uint8_t *)L; /* 0..7 from here on */
    for (int j = 0; j < QK_K / 16; j++) {
        const float d = fp16_to_f32(y->d) * (float)q3k_scale(y->scales, j);
        if (d) requantize(x + 16 * j, 16, d, 0.0f, -4, 3, 4, lv + 16 * j);
    }
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < QK_K; j++) {
        if (lv[j] > 3) {
            y->hmask[j % 32] |= (uint8_t)(1u << (j / 32));
            lv[j] = (uint8_t)(lv[j] - 4);
        }
    }
    pack_2bit(lv, y->qs);
}

/* Stores 6-bit scale j (0..63, 32 meaning 0) of a Q3_K block (scales
 * zeroed first): the low nibble in byte j or j-8, the top 2 bits in byte
 * 8 + j%4. */
static void q3k_pack_scale(uint8_t *scales, int j, int l) {
    if (j < 8)
        scales[j] = (uint8_t)(l & 0x0f);
    else
        scales[j - 8] |= (uint8_t)((l & 0x0f) << 4);
    scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
}

void quant_q3_K_from_f32(const float *x, void *dst, int64_t n) {
    block_q3_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float max_scale = signed16_scales(x, 4, make_q3_quants, NULL, L, scales, NULL);
        memset(y[i].scales, 0, sizeof y[i].scales);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                /* llama.cpp stores nearest_int in an int8_t before clamping */
                int8_t l = (int8_t)quant_nearest_int(iscale * scales[j]);
                l = (int8_t)(MAX(-32, MIN(31, l)) + 32);
                q3k_pack_scale(y[i].scales, j, (uint8_t)l);
            }
            y[i].d = f32_to_fp16(1 / iscale);
        } else {
            y[i].d = f32_to_fp16(0.0f);
        }
        q3k_finish(x, &y[i], L);
    }
}

/* llama.cpp's quantize_row_q3_K_impl: per sub-block make_qx with weights
 * qw * sqrt(sigma2 + x^2) (sigma2 twice the super-block's mean square),
 * then the 16 scales themselves fitted to signed 6 bits by make_qx
 * weighted by the sub-blocks' summed weights. */
void quant_q3_K_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    block_q3_K *y = dst;
    int8_t L[QK_K], Ls[QK_K / 16];
    float weight[16], scales[QK_K / 16], sw[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, qw += QK_K) {
        const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
        for (int j = 0; j < QK_K / 16; j++) {
            quant_imatrix_weights(x + 16 * j, qw + 16 * j, 16, sigma2, weight, &sw[j]);
            scales[j] = quant_make_qx(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        memset(y[i].scales, 0, sizeof y[i].scales);
        const float d_block = quant_make_qx(QK_K / 16, 32, scales, Ls, sw);
        for (int j = 0; j < QK_K / 16; j++) q3k_pack_scale(y[i].scales, j, Ls[j]);
        y[i].d = f32_to_fp16(d_block);
        q3k_finish(x, &y[i], L);
    }
}

static void q3k_unpack(const void *block, signed16_block *out) {
    const block_q3_K *b = block;
    out->d = fp16_to_f32(b->d);
    for (int j = 0; j < QK_K / 16; j++) out->sc[j] = q3k_scale(b->scales, j);
    for (int e = 0; e < QK_K; e++) { /* low 2 bits; the high bit set means no -4 */
        const int high = (b->hmask[e % 32] >> (e / 32)) & 1;
        out->lv[e] = (int8_t)(q2k_quant(b->qs, e) - (high ? 0 : 4));
    }
}

void quant_q3_K_to_f32(const void *src, float *y, int64_t n) {
    signed16_to_f32(src, sizeof(block_q3_K), q3k_unpack, y, n);
}

void quant_q3_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    signed16_dot(vx, sizeof(block_q3_K), q3k_unpack, vy, n, out);
}

/* ------------------------------------------------------------ Q4_K, Q5_K */

/* Shared first half of Q4_K and Q5_K: per 32-element sub-block scale and
 * min from make_qkx2, packed to 6 bits against fp16 super-scales, then the
 * quants recomputed with the stored (rounded) scales. */
static void kquant_4_5_requantize(const float *x, int nmax, const uint16_t *d_out, const uint16_t *dmin_out,
                                  const uint8_t *packed_scales, uint8_t *L);

/* qw NULL: llama.cpp's reference rule (below). Otherwise its
 * quantize_row_q4_K_impl / q5_K_impl: make_qkx3 with weights
 * qw * sqrt(sigma2 + x^2), sigma2 twice the super-block's mean square, and
 * the scales and mins each fitted to 6 bits by make_qp_quants weighted by
 * the sub-blocks' summed weights. */
static void kquant_4_5_quants(const float *x, int nmax, float rmin, int nstep, uint16_t *d_out,
                              uint16_t *dmin_out, uint8_t *packed_scales, uint8_t *L, const float *qw) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0.0f, max_min = 0.0f;
    if (qw) {
        uint8_t Ls[QK_K / 32], Lm[QK_K / 32];
        float sw[QK_K / 32];
        const float sigma2 = 2 * sum_squares(x, QK_K) / QK_K;
        for (int j = 0; j < QK_K / 32; j++) {
            quant_imatrix_weights(x + 32 * j, qw + 32 * j, 32, sigma2, weights, &sw[j]);
            scales[j] = quant_make_qkx(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f,
                                       36, false);
        }
        const float d_block = quant_make_qp(QK_K / 32, 63, scales, Ls, sw);
        const float m_block = quant_make_qp(QK_K / 32, 63, mins, Lm, sw);
        memset(packed_scales, 0, K_SCALE_SIZE);
        for (int j = 0; j < QK_K / 32; j++) kquant_pack_scale_min(j, Ls[j], Lm[j], packed_scales);
        *d_out = f32_to_fp16(d_block);
        *dmin_out = f32_to_fp16(m_block);
        kquant_4_5_requantize(x, nmax, d_out, dmin_out, packed_scales, L);
        return;
    }
    for (int j = 0; j < QK_K / 32; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = quant_make_qkx(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                     0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.0f;
    memset(packed_scales, 0, K_SCALE_SIZE);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        ls = MIN(63, ls);
        lm = MIN(63, lm);
        kquant_pack_scale_min(j, ls, lm, packed_scales);
    }
    *d_out = f32_to_fp16(max_scale / 63.f);
    *dmin_out = f32_to_fp16(max_min / 63.f);
    kquant_4_5_requantize(x, nmax, d_out, dmin_out, packed_scales, L);
}

/* The levels recomputed against the stored (rounded) scales and mins. */
static void kquant_4_5_requantize(const float *x, int nmax, const uint16_t *d_out, const uint16_t *dmin_out,
                                  const uint8_t *packed_scales, uint8_t *L) {
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, m;
        kquant_scale_min(j, packed_scales, &sc, &m);
        const float d = fp16_to_f32(*d_out) * (float)sc;
        if (!d) continue;
        const float dm = fp16_to_f32(*dmin_out) * (float)m;
        requantize(x + 32 * j, 32, d, dm, 0, nmax, 0, L + 32 * j);
    }
}

static void q4k_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    block_q4_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        kquant_4_5_quants(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin, y[i].scales, L, qw ? qw + QK_K * i : NULL);
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void quant_q4_K_from_f32(const float *x, void *dst, int64_t n) { q4k_quantize(x, dst, n, NULL); }

void quant_q4_K_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) { q4k_quantize(x, dst, n, qw); }

static inline int q4k_quant(const uint8_t *qs, int e) {
    const uint8_t b = qs[32 * (e / 64) + e % 32];
    return (e % 64) < 32 ? (b & 0x0f) : (b >> 4);
}

static void q4k_unpack(const void *block, min32_block *out) {
    const block_q4_K *b = block;
    out->d = fp16_to_f32(b->d);
    out->dmin = fp16_to_f32(b->dmin);
    out->scales = b->scales;
    for (int e = 0; e < QK_K; e++) out->lv[e] = (uint8_t)q4k_quant(b->qs, e);
}

void quant_q4_K_to_f32(const void *src, float *y, int64_t n) {
    min32_to_f32(src, sizeof(block_q4_K), q4k_unpack, y, n);
}

void quant_q4_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    min32_dot(vx, sizeof(block_q4_K), q4k_unpack, vy, n, out);
}

static void q5k_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    block_q5_K *y = dst;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        kquant_4_5_quants(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L, qw ? qw + QK_K * i : NULL);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int j = 0; j < QK_K; j += 64) {
            const int a = j / 64;
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l], l2 = L[j + l + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[i].qh[l] |= (uint8_t)(1u << (2 * a));
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[i].qh[l] |= (uint8_t)(2u << (2 * a));
                }
                y[i].qs[j / 2 + l] = (uint8_t)(l1 | (l2 << 4));
            }
        }
    }
}

void quant_q5_K_from_f32(const float *x, void *dst, int64_t n) { q5k_quantize(x, dst, n, NULL); }

void quant_q5_K_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) { q5k_quantize(x, dst, n, qw); }

static void q5k_unpack(const void *block, min32_block *out) {
    const block_q5_K *b = block;
    out->d = fp16_to_f32(b->d);
    out->dmin = fp16_to_f32(b->dmin);
    out->scales = b->scales;
    for (int e = 0; e < QK_K; e++) { /* the fifth bit: qh[e % 32] bit 2a + h */
        const int a = e / 64, h = (e % 64) / 32;
        out->lv[e] = (uint8_t)(q4k_quant(b->qs, e) | (((b->qh[e % 32] >> (2 * a + h)) & 1) << 4));
    }
}

void quant_q5_K_to_f32(const void *src, float *y, int64_t n) {
    min32_to_f32(src, sizeof(block_q5_K), q5k_unpack, y, n);
}

void quant_q5_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    min32_dot(vx, sizeof(block_q5_K), q5k_unpack, vy, n, out);
}

/* ------------------------------------------------------------------ Q6_K */

/* llama.cpp's quantize_row_q6_K_impl: with importance weights qw (one per
 * element, or NULL) each sub-block's make_qx uses them instead of x^2. */
static void q6k_quantize(const float *x, void *dst, int64_t n, const float *qw_row) {
    block_q6_K *y = dst;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        const float *qw = qw_row ? qw_row + QK_K * i : NULL;
        float max_abs_scale;
        const float max_scale = signed16_scales(x, 32, quant_make_qx, qw, L, scales, &max_abs_scale);
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            y[i].d = f32_to_fp16(0.0f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = f32_to_fp16(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)MIN(127, quant_nearest_int(iscale * scales[ib]));
        uint8_t *lv = (uint8_t *)L; /* 0..63 */
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = fp16_to_f32(y[i].d) * (float)y[i].scales[j];
            if (d) requantize(x + 16 * j, 16, d, 0.0f, -32, 31, 32, lv + 16 * j);
        }
        for (int j = 0; j < QK_K; j += 128) {
            uint8_t *ql = y[i].ql + j / 2, *qh = y[i].qh + j / 4;
            for (int l = 0; l < 32; l++) {
                const int q1 = lv[j + l] & 0x0f, q2 = lv[j + l + 32] & 0x0f;
                const int q3 = lv[j + l + 64] & 0x0f, q4 = lv[j + l + 96] & 0x0f;
                ql[l] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((lv[j + l] >> 4) | ((lv[j + l + 32] >> 4) << 2) |
                                  ((lv[j + l + 64] >> 4) << 4) | ((lv[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void quant_q6_K_from_f32(const float *x, void *dst, int64_t n) { q6k_quantize(x, dst, n, NULL); }

void quant_q6_K_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) { q6k_quantize(x, dst, n, qw); }

static void q6k_unpack(const void *block, signed16_block *out) {
    const block_q6_K *b = block;
    out->d = fp16_to_f32(b->d);
    for (int j = 0; j < QK_K / 16; j++) out->sc[j] = b->scales[j];
    for (int e = 0; e < QK_K; e++) {
        const int a = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lb = b->ql[64 * a + 32 * (k & 1) + l];
        const int low = (k >> 1) ? (lb >> 4) : (lb & 0x0f);
        const int high = (b->qh[32 * a + l] >> (2 * k)) & 3;
        out->lv[e] = (int8_t)((low | (high << 4)) - 32);
    }
}

void quant_q6_K_to_f32(const void *src, float *y, int64_t n) {
    signed16_to_f32(src, sizeof(block_q6_K), q6k_unpack, y, n);
}

void quant_q6_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    signed16_dot(vx, sizeof(block_q6_K), q6k_unpack, vy, n, out);
}

/* ------------------------------------------------------------------ Q8_K */

void quant_q8_K_from_f32(const float *x, void *dst, int64_t n) {
    block_q8_K *y = dst;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax;
        const float max = quant_signed_absmax(x, QK_K, &amax);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        /* -127 (not -128) so that no quant needs the value -128 */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            const int v = quant_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t)MIN(127, v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void quant_q8_K_to_f32(const void *src, float *y, int64_t n) {
    const block_q8_K *x = src;
    for (int64_t i = 0; i < n / QK_K; i++, y += QK_K)
        for (int j = 0; j < QK_K; j++) y[j] = x[i].d * (float)x[i].qs[j];
}

void quant_q8_K_dot(int64_t n, float *out, const void *vx, const void *vy) {
    const block_q8_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        int sumi = 0;
        for (int j = 0; j < QK_K; j++) sumi += x[i].qs[j] * y[i].qs[j];
        sum += x[i].d * y[i].d * (float)sumi;
    }
    *out = sum;
}
