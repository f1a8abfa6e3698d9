/*
 * ref_matmul — MUL_MAT: the exact product of dequantized weights and f32
 * activations.
 *
 *   w [K, M, B2/r2, B3/r3] any readable dtype, x [K, N, B2, B3] -> dst [M, N, B2, B3]
 *   dst[m, n, b2, b3] = sum_k w[k, m, b2/r2, b3/r3] * x[k, n, b2, b3]
 *
 * Each product of two floats is exact in double and the sum accumulates in
 * double in k order; the result is rounded to f32 once. (llama.cpp's CPU
 * backend instead rounds activations to 8 bits for quantized weights, to F16
 * for F16 weights; the conformance suite's tolerances allow for that.)
 */
#include <stdlib.h>

#include "ref/ref_internal.h"
#include "util/error.h"

tsr_status ref_op_mul_mat(const tsr_node *node) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *dst = node->dst;
    const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];

    /* xs: the N activation rows of one batch, as f32; wrow: one weight row */
    float *xs = malloc((size_t)(K * N + K) * sizeof *xs);
    if (!xs) {
        error_set("ref: MUL_MAT '%s': out of memory for %lld x %lld activations",
                  ref_node_label(node), (long long)K, (long long)N);
        return TSR_ERR_NO_MEMORY;
    }
    float *wrow = xs + K * N;
    uint8_t *pd = ref_tensor_base(dst);

    for (int64_t b3 = 0; b3 < x->ne[3]; b3++)
        for (int64_t b2 = 0; b2 < x->ne[2]; b2++) {
            for (int64_t n = 0; n < N; n++) ref_row_load(x, n, b2, b3, xs + n * K);
            for (int64_t m = 0; m < M; m++) {
                ref_row_load(w, m, b2 / r2, b3 / r3, wrow);
                for (int64_t n = 0; n < N; n++) {
                    const float *xn = xs + n * K;
                    double sum = 0.0;
                    for (int64_t k = 0; k < K; k++) sum += (double)wrow[k] * (double)xn[k];
                    ref_store(dst->dtype, pd + ref_offset(dst, m, n, b2, b3), (float)sum);
                }
            }
        }
    free(xs);
    return TSR_OK;
}
