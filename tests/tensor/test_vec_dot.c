/*
 * test_vec_dot — the quantized dot products are the integer formulation of
 * the dequantized data.
 *
 * For each weight dtype: x random, quantized to the dtype; y random,
 * quantized to its vec_dot_type. Then
 *  1. vec_dot(x, y) equals sum(deq(x)[i] * deq(y)[i]) computed in double, up
 *     to float rounding: |diff| <= 1e-5 * sum(|deq(x)||deq(y)|);
 *  2. it is close to the unquantized activations' result
 *     sum(deq(x)[i] * y[i]) within the activation's quantization error:
 *     |diff| <= 0.02 * sum(|deq(x)||y|) (8-bit activations, <= 1/254 per
 *     element relative to the block's max).
 * F32/F16/BF16 take F32 activations: check 1 with 1e-6.
 * Q4_1/Q5_1 with Q8_1: the integer form uses the block minimum times Q8_1's
 * s = fp16(d * sum(q)), which is rounded to fp16; check 1 allows that
 * rounding, sum over blocks of |m| * |s| * 2^-11.
 */
#include <string.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "tensor/dtype.h"
#include "util/error.h"

enum { N = 2048 };

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double urand(void) {
    return harness_urand(&rng_state);
}
static double grand(void) {
    return harness_grand(&rng_state);
}

TEST(test_vec_dot) {
    static float x[N], y[N], xd[N], yd[N];
    static unsigned char xq[N * 4], yq[N * 4];
    int checked = 0;
    printf("%-7s %-5s %14s %14s %12s %12s\n", "weight", "act", "vec_dot", "deq.deq", "rel_err_deq",
           "rel_err_f32");
    for (int32_t t = 0; t < TSR_DTYPE_COUNT; t++) {
        const dtype_traits *tr = dtype_traits_get(t);
        if (!tr || !tr->vec_dot) continue;
        const dtype_traits *act = dtype_traits_get(tr->vec_dot_type);
        for (int trial = 0; trial < 3; trial++) {
            for (int i = 0; i < N; i++) {
                x[i] = (float)grand() * (trial == 2 ? 1000.0f : 1.0f);
                y[i] = (float)(grand() + (trial == 1 ? 0.5 : 0.0)); /* biased: exercises mins */
            }
            /* weights: from the type's quantizer, or for types Tessera
             * cannot produce (the grid IQ formats) random bytes with a
             * sane scale */
            if (tr->from_f32) {
                tr->from_f32(x, xq, N);
            } else {
                for (size_t i = 0; i < dtype_row_bytes(t, N); i++) xq[i] = (unsigned char)(urand() * 256);
                for (size_t b = 0; b < dtype_row_bytes(t, N); b += tr->block_bytes)
                    REQUIRE(dtype_block_set_scale(t, xq + b, (float)(0.01 + urand() * 0.02)) == 0, "%s", tr->name);
            }
            tr->to_f32(xq, xd, N);
            act->from_f32(y, yq, N);
            act->to_f32(yq, yd, N);
            float got;
            tr->vec_dot(N, &got, xq, yq);
            double ref = 0, mag = 0, ref_f32 = 0, mag_f32 = 0;
            for (int i = 0; i < N; i++) {
                ref += (double)xd[i] * yd[i];
                mag += fabs((double)xd[i] * yd[i]);
                ref_f32 += (double)xd[i] * y[i];
                mag_f32 += fabs((double)xd[i] * y[i]);
            }
            double s_allow = 0;
            if (tr->vec_dot_type == TSR_DTYPE_Q8_1) {
                for (int b = 0; b < N / 32; b++) {
                    uint16_t m, sy;
                    memcpy(&m, xq + b * tr->block_bytes + 2, 2);
                    memcpy(&sy, yq + b * act->block_bytes + 2, 2);
                    s_allow += fabs(fp16_to_f32(m)) * fabs(fp16_to_f32(sy)) * 0x1p-11;
                }
            }
            const double e1 = fmax(0.0, fabs(got - ref) - s_allow) / mag, e2 = fabs(got - ref_f32) / mag_f32;
            const double tol1 = tr->quantized ? 1e-5 : 1e-6;
            const int ok = isfinite(got) && e1 <= tol1 && e2 <= 0.02;
            if (trial == 0 || !ok)
                printf("%-7s %-5s %14.6f %14.6f %12.3g %12.3g %s\n", tr->name, act->name, got, ref, e1,
                       e2, ok ? "ok" : "FAIL");
            EXPECT(ok, "%s x %s, trial %d: vec_dot %g, deq.deq %g", tr->name, act->name, trial, got, ref);
            checked++;
        }
    }
    printf("%d dot products checked\n", checked);
}

HARNESS_MAIN("vec_dot", HARNESS_TEST(test_vec_dot))
