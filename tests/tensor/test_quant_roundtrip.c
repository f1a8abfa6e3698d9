/*
 * test_quant_roundtrip — quantize -> dequantize error of every producible
 * dtype stays within the type's bound, on random and adversarial blocks.
 *
 * Bounds are per block, relative to the block's largest magnitude A:
 *   max |x - deq(q(x))| <= k_max * A   and   RMS error <= k_rms * A
 * k_max follows from the format (quant step / 2 plus the fp16 rounding of
 * the scales, and the clamp of the extreme level for Q4_0/Q5_0). k_rms is
 * the typical error with margin; for Q4_1/Q5_1 it equals k_max because a
 * block whose values sit halfway between two levels (e.g. zeros next to an
 * outlier) really has RMS error = step/2. The K-quant bounds are measured
 * worst cases (uniform data is hardest) with ~1.5x margin.
 * Data: Gaussian, uniform, heavy-tailed, all zeros, constant blocks (both
 * signs), large magnitudes (up to 3e4, inside the fp16 scale range) and tiny
 * magnitudes (1e-30 .. 1e-6, where fp16 scales underflow and the error is
 * at most the tiny value itself). Output must never contain NaN or Inf.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tensor/dtype.h"
#include "util/error.h"

typedef struct type_bound {
    int32_t dtype;
    double k_max, k_rms;
} type_bound;

static const type_bound bounds[] = {
    {TSR_DTYPE_F16, 0.0005, 0.0003},
    {TSR_DTYPE_BF16, 0.004, 0.003},
    {TSR_DTYPE_Q8_0, 0.0045, 0.003},
    {TSR_DTYPE_Q8_1, 0.0045, 0.003},
    {TSR_DTYPE_Q8_K, 0.0045, 0.003},
    {TSR_DTYPE_Q4_0, 0.127, 0.07},
    {TSR_DTYPE_Q4_1, 0.068, 0.068},
    {TSR_DTYPE_Q5_0, 0.064, 0.035},
    {TSR_DTYPE_Q5_1, 0.034, 0.034},
    {TSR_DTYPE_IQ4_NL, 0.13, 0.06},
    {TSR_DTYPE_Q2_K, 0.60, 0.30},
    {TSR_DTYPE_Q3_K, 0.30, 0.12},
    {TSR_DTYPE_Q4_K, 0.14, 0.06},
    {TSR_DTYPE_Q5_K, 0.07, 0.03},
    {TSR_DTYPE_Q6_K, 0.035, 0.015},
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    return harness_urand(&rng_state);
}
static double grand(void) {
    return harness_grand(&rng_state);
}

enum { N = 4096 }; /* 16 super-blocks, 128 small blocks */

/* Fill x with pattern p; returns its name. */
static const char *fill(int p, float *x) {
    switch (p) {
    case 0: for (int i = 0; i < N; i++) x[i] = (float)grand(); return "gaussian";
    case 1: for (int i = 0; i < N; i++) x[i] = (float)(urand() * 2 - 1); return "uniform";
    case 2: for (int i = 0; i < N; i++) x[i] = (float)(grand() * exp(3 * grand())); return "heavy-tailed";
    case 3: memset(x, 0, N * sizeof *x); return "all-zero";
    case 4: for (int i = 0; i < N; i++) x[i] = 0.75f; return "constant+";
    case 5: for (int i = 0; i < N; i++) x[i] = -3.25f; return "constant-";
    case 6: for (int i = 0; i < N; i++) x[i] = (float)(grand() * 3e4 / 4); return "large";
    case 7: for (int i = 0; i < N; i++) x[i] = (float)(grand() * 1e-6); return "tiny-1e-6";
    case 8: for (int i = 0; i < N; i++) x[i] = (float)(grand() * 1e-30); return "tiny-1e-30";
    case 9: /* each 32-block: mostly zero with one spike, alternating sign */
        for (int i = 0; i < N; i++) x[i] = (i % 32 == 7) ? ((i / 32) % 2 ? 5.0f : -5.0f) : 0.0f;
        return "spikes";
    case 10: /* positive only (exercises the min > 0 paths) */
        for (int i = 0; i < N; i++) x[i] = (float)(1 + urand());
        return "positive";
    default: return NULL;
    }
}

TEST(test_quant_roundtrip) {
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    void *q = malloc(N * 8);
    printf("%-6s %-13s %12s %12s %10s %10s\n", "type", "data", "max_err/A", "rms_err/A", "k_max", "k_rms");
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        const type_bound *tb = &bounds[b];
        const dtype_traits *tr = dtype_traits_get(tb->dtype);
        const int64_t bs = tr->block_size > 1 ? tr->block_size : 32;
        for (int p = 0;; p++) {
            const char *pname = fill(p, x);
            if (!pname) break;
            if (dtype_quantize_row(tb->dtype, x, q, N) != 0 || dtype_dequantize_row(tb->dtype, q, y, N) != 0) {
                ADD_FAILURE("%s %s: %s", tr->name, pname, error_get());
                continue;
            }
            double worst_max = 0, worst_rms = 0;
            int bad_values = 0;
            for (int64_t i0 = 0; i0 < N; i0 += bs) {
                double amax = 0, se = 0, me = 0;
                for (int64_t i = i0; i < i0 + bs; i++) {
                    if (!isfinite(y[i])) bad_values++;
                    amax = fmax(amax, fabs(x[i]));
                    double e = fabs((double)x[i] - y[i]);
                    me = fmax(me, e);
                    se += e * e;
                }
                double rms = sqrt(se / bs);
                if (amax == 0) {
                    if (me != 0) bad_values++; /* zeros must come back exactly */
                    continue;
                }
                /* below fp16's smallest subnormal a scale may flush to 0:
                 * the block comes back as zeros (error <= A) or, for the
                 * types with a minimum, as -dmin*m with dmin a subnormal
                 * half (error <= 2A + 63 * 2^-24: absolute, not relative,
                 * precision down there) */
                if (amax < 1e-4 && tb->dtype != TSR_DTYPE_Q8_K && tb->dtype != TSR_DTYPE_BF16) {
                    if (me > 2 * amax * (1 + 1e-6) + 63 * 0x1p-24) bad_values++;
                    continue;
                }
                worst_max = fmax(worst_max, me / amax);
                worst_rms = fmax(worst_rms, rms / amax);
            }
            int ok = bad_values == 0 && worst_max <= tb->k_max && worst_rms <= tb->k_rms;
            if (!ok || p < 3)
                printf("%-6s %-13s %12.6f %12.6f %10.4f %10.4f %s\n", tr->name, pname, worst_max,
                       worst_rms, tb->k_max, tb->k_rms,
                       ok ? "ok" : bad_values ? "FAIL (NaN/Inf or bad zero/tiny block)" : "FAIL");
            EXPECT(ok, "%s %s: max %g rms %g, bounds %g %g", tr->name, pname, worst_max, worst_rms, tb->k_max,
                   tb->k_rms);
        }
    }

    /* Rows whose length is not a multiple of the block size are rejected. */
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        const dtype_traits *tr = dtype_traits_get(bounds[b].dtype);
        if (tr->block_size == 1) continue;
        const int64_t n = tr->block_size + 1;
        error_clear();
        if (dtype_row_bytes(bounds[b].dtype, n) != 0 || dtype_quantize_row(bounds[b].dtype, x, q, n) == 0 ||
            !strstr(error_get(), "not a multiple")) {
            ADD_FAILURE("%s: row of %lld elements was not rejected clearly ('%s')", tr->name,
                   (long long)n, error_get());
        }
    }
    /* Types Tessera cannot produce say so. */
    if (dtype_quantize_row(TSR_DTYPE_IQ2_XXS, x, q, 256) == 0 || !strstr(error_get(), "IQ2_XXS")) {
        ADD_FAILURE("quantizing to IQ2_XXS was not refused by name ('%s')", error_get());
    } else {
        printf("refused as expected: %s\n", error_get());
    }
    /* Values beyond the fp16 scale range must not crash (the scale becomes
     * inf as in llama.cpp; the result is not checked). */
    for (int i = 0; i < N; i++) x[i] = (float)(grand() * 1e30);
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) dtype_quantize_row(bounds[b].dtype, x, q, N);

    free(x);
    free(y);
    free(q);
}

HARNESS_MAIN("round-trip: all types within bounds", HARNESS_TEST(test_quant_roundtrip))
