/*
 * cpu_rows — the inner loops of cpu_ops over contiguous f32 rows, written so
 * the compiler vectorizes them: no calls, no branches but selects, and
 * reductions kept in ROW_LANES independent partial results (a plain
 * `s += x[i]` loop is left scalar, since reordering float sums changes the
 * result and the compiler may not do it on its own). Each says what the
 * straightforward loop is; cpu-avx builds this with AVX2+FMA+F16C, cpu-neon
 * with plain ARMv8 NEON.
 */
#ifndef TESSERA_CPU_COMMON_CPU_ROWS_H
#define TESSERA_CPU_COMMON_CPU_ROWS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_blocks.h"

#if defined(__F16C__)
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#define ROW_LANES 8

/* ---------------------------------------------------- fp16 rows */

/* y[i] = cpu_f32_to_fp16(x[i]). F16C's conversion with round-to-nearest-even
 * gives the same bits for every input, NaN payloads included. */
static inline void row_f32_to_f16(const float *restrict x, uint16_t *restrict y, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) y[i] = cpu_f32_to_fp16(x[i]);
}

/* y[i] = cpu_fp16_to_f32(x[i]), exact. F16C (and AArch64's fcvtl, part of
 * ARMv8.0) give the same bits except that a signalling NaN comes back quiet
 * (still NaN; checked over all 2^16). The f32 -> fp16 direction above was
 * checked over all 2^32 inputs. */
static inline void row_f16_to_f32(const uint16_t *restrict x, float *restrict y, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
#elif defined(__aarch64__) && defined(__ARM_NEON)
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
#endif
    for (; i < n; i++) y[i] = cpu_fp16_to_f32(x[i]);
}

/* ------------------------------------------------------------ exp */

/* expf(x) for vector loops (expf is a call the loop cannot vectorize
 * through), computed in double so that rounding to float lands on expf's
 * result but in rare near-halfway cases: the llama goldens are that
 * sensitive, since activations end up rounded to fp16 (a float exp with a
 * 1-2 ulp error moved stories260K's logits by 1e-3). e^x = 2^n e^r with
 * n = round(x / ln 2), |r| <= ln2/2, e^r by its Taylor series to r^9
 * (relative error < 1e-11). x above 89 clamps to where the result is inf;
 * NaN stays NaN. Results below FLT_MIN (x < -87.33, masked -inf included)
 * are flushed to 0 rather than made subnormal: a subnormal result costs a
 * microcode assist of ~100 cycles on Intel, and causal masks make half of
 * a softmax row -inf. */
static inline float exp_row_elem(float x) {
    const double magic = 6755399441055744.0; /* 1.5 * 2^52: adding it rounds to an integer */
    float xc = x < -87.33f ? -87.33f : x;
    xc = xc > 89.0f ? 89.0f : xc;
    const double xd = (double)xc;
    const double t = xd * 1.4426950408889634 + magic;
    const double n = t - magic;
    uint64_t tb;
    memcpy(&tb, &t, 8);
    const int64_t ni = (int64_t)(tb - 0x4338000000000000u); /* n as an integer, in [-126, 129] */
    const double r = xd - n * 0.6931471805599453;
    double p = 1.0 / 362880; /* (fma: one instruction where the target has it) */
    p = fma(p, r, 1.0 / 40320);
    p = fma(p, r, 1.0 / 5040);
    p = fma(p, r, 1.0 / 720);
    p = fma(p, r, 1.0 / 120);
    p = fma(p, r, 1.0 / 24);
    p = fma(p, r, 1.0 / 6);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    const uint64_t sb = (uint64_t)(ni + 1023) << 52;
    double scale;
    memcpy(&scale, &sb, 8);
    const float y = (float)(p * scale);
    return x < -87.33f ? 0.0f : y;
}

/* x[i] = exp(x[i] - max), returning the sum in double (as the softmax
 * reference sums): for (i) { x[i] = expf(x[i] - max); sum += x[i]; } */
static inline double row_exp_sub_sum(float *restrict x, int64_t n, float max) {
    double lane[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) {
            float e = exp_row_elem(x[i + j] - max);
            x[i + j] = e;
            lane[j] += (double)e;
        }
    double sum = 0.0;
    for (; i < n; i++) {
        x[i] = exp_row_elem(x[i] - max);
        sum += (double)x[i];
    }
    for (int j = 0; j < ROW_LANES; j++) sum += lane[j];
    return sum;
}

/* --------------------------------------------------- activations */

/* z[i] = silu(x[i]) = x[i] / (1 + e^-x[i]) */
static inline void row_silu(const float *x, float *z, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] / (1.0f + exp_row_elem(-x[i]));
}

/* z[i] = silu(x[i]) * y[i] */
static inline void row_swiglu(const float *x, const float *y, float *z, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] / (1.0f + exp_row_elem(-x[i])) * y[i];
}

/* erf(z) in float for vector loops (erff is a call the loop cannot
 * vectorize through): both halves computed, one kept by a select.
 *   |z| < 1: z P(z^2), P of degree 6 fitted to erf(sqrt t)/sqrt t on [0, 1]
 *            (Chebyshev, mpmath's chebyfit: error 1.2e-9);
 *   |z| >= 1: 1 - e^-z^2 Q(1/|z|), Q of degree 9 fitted to erfc(a) e^(a^2)
 *            as a function of u = 1/a on [1/4, 1] (error 4.7e-9 relative),
 *            |z| clamped to 4 (erfc(4) = 1.5e-8 rounds 1 - erfc to 1), z^2
 *            split into hi + lo with an fma so e^-z^2 = e^-hi (1 - lo)
 *            (e^-hi by exp_row_elem).
 * Against glibc's erff over every float with |x| <= 9 (x / sqrt 2 as
 * GELU_ERF's argument, one float in seven): 39% the same bits, the rest
 * within 3 ulp (glibc 2.36's erff itself differs from erf rounded to float
 * in 6%). NaN stays NaN (through the final product in GELU_ERF). */
static inline float erf_row_elem(float z) {
    /* (Horner steps written out: a loop over a coefficient table is not
     * unrolled inside the row loop, which then stays scalar) */
    const float a = fabsf(z), t = a * a;
    float p = fmaf(7.875875063e-05f, t, -8.016864287e-04f);
    p = fmaf(p, t, 5.189087423e-03f);
    p = fmaf(p, t, -2.685421201e-02f);
    p = fmaf(p, t, 1.128359472e-01f);
    p = fmaf(p, t, -3.761262667e-01f);
    p = fmaf(p, t, 1.128379166e+00f);
    const float near0 = a * p;
    const float ac = a < 1.0f ? 1.0f : a > 4.0f ? 4.0f : a, u = 1.0f / ac;
    float q = fmaf(2.503254319e-02f, u, -1.478984446e-01f);
    q = fmaf(q, u, 3.608618604e-01f);
    q = fmaf(q, u, -4.298337486e-01f);
    q = fmaf(q, u, 1.454773476e-01f);
    q = fmaf(q, u, 2.825897937e-01f);
    q = fmaf(q, u, -3.948595879e-01f);
    q = fmaf(q, u, 2.484752126e-02f);
    q = fmaf(q, u, 5.612146380e-01f);
    q = fmaf(q, u, 1.516556858e-04f);
    const float hi = ac * ac, lo = fmaf(ac, ac, -hi);
    const float far = 1.0f - exp_row_elem(-hi) * (1.0f - lo) * q;
    return copysignf(a < 1.0f ? near0 : far, z);
}

/* The exact GELU as llama.cpp writes it: 0.5 x (1 + erf(x / sqrt 2)), the
 * argument and the sum in float (ref's gelu_erf_one with erf_row_elem for
 * erff). */
static inline float gelu_erf_elem(float x) {
    return 0.5f * x * (1.0f + erf_row_elem(x * 0.70710678118654752440f));
}

/* z[i] = gelu_erf(x[i]) (z may be x) */
static inline void row_gelu_erf(const float *x, float *z, int64_t n) {
    for (int64_t i = 0; i < n; i++) z[i] = gelu_erf_elem(x[i]);
}

/* ----------------------------------------------------- reductions */

/* The largest of x[0..n) ignoring NaN, -inf if none:
 * for (i) max = x[i] > max ? x[i] : max.
 * In ROW_LANES lanes of a GCC/clang vector (a plain lane array is not
 * vectorized: without -ffinite-math-only the select is no MAX_EXPR). */
typedef float row_f32v __attribute__((vector_size(4 * ROW_LANES)));
typedef int32_t row_i32v __attribute__((vector_size(4 * ROW_LANES)));

static inline float row_max(const float *x, int64_t n) {
    row_f32v lane;
    for (int j = 0; j < ROW_LANES; j++) lane[j] = -INFINITY;
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES) {
        row_f32v v;
        memcpy(&v, x + i, sizeof v);
        row_i32v gt = v > lane; /* all ones where v wins */
        lane = (row_f32v)((gt & (row_i32v)v) | (~gt & (row_i32v)lane));
    }
    float mx = -INFINITY;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int j = 0; j < ROW_LANES; j++) mx = lane[j] > mx ? lane[j] : mx;
    return mx;
}

/* n less the -inf values at the end of x (what a causal mask leaves):
 * while (n > 0 && x[n - 1] == -INFINITY) n--, a vector at a time. */
static inline int64_t row_len_before_ninf(const float *x, int64_t n) {
    row_f32v ninf;
    for (int j = 0; j < ROW_LANES; j++) ninf[j] = -INFINITY;
    while (n >= ROW_LANES) {
        row_f32v v;
        memcpy(&v, x + n - ROW_LANES, sizeof v);
        row_i32v diff = v != ninf, none = {0};
        if (memcmp(&diff, &none, sizeof diff) != 0) break;
        n -= ROW_LANES;
    }
    while (n > 0 && x[n - 1] == -INFINITY) n--;
    return n;
}

/* x . y in ROW_LANES float lanes: for (i) s += x[i] * y[i] */
static inline float row_dot(const float *restrict x, const float *restrict y, int64_t n) {
    float lane[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) lane[j] += x[i + j] * y[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += x[i] * y[i];
    for (int j = 0; j < ROW_LANES; j++) s += lane[j];
    return s;
}

/* y += p * x: for (i) y[i] += p * x[i] */
static inline void row_add_scaled(float *restrict y, float p, const float *restrict x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += p * x[i];
}

/* sum of x[i] in double: sum += x[i] */
static inline double row_sum(const float *x, int64_t n) {
    double lane[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) lane[j] += (double)x[i + j];
    double sum = 0.0;
    for (; i < n; i++) sum += (double)x[i];
    for (int j = 0; j < ROW_LANES; j++) sum += lane[j];
    return sum;
}

/* sum of (x[i] - mean)^2, each square rounded to float, summed in double */
static inline double row_sum_sq(const float *x, int64_t n, float mean) {
    double lane[ROW_LANES] = {0};
    int64_t i = 0;
    for (; i + ROW_LANES <= n; i += ROW_LANES)
        for (int j = 0; j < ROW_LANES; j++) {
            float v = x[i + j] - mean;
            lane[j] += (double)(v * v);
        }
    double sum = 0.0;
    for (; i < n; i++) {
        float v = x[i] - mean;
        sum += (double)(v * v);
    }
    for (int j = 0; j < ROW_LANES; j++) sum += lane[j];
    return sum;
}

#endif
