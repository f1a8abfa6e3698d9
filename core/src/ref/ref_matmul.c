/*
 * ref_matmul — MUL_MAT: the product of weights and f32 activations as
 * llama.cpp's CPU backend computes it, written plainly.
 *
 *   w [K, M, B2/r2, B3/r3] any readable dtype, x [K, N, B2, B3] -> dst [M, N, B2, B3]
 *   dst[m, n, b2, b3] = sum_k w[k, m, b2/r2, b3/r3] * x[k, n, b2, b3]
 *
 * llama.cpp first converts each activation row to the weight type's
 * "vec_dot_type" and then takes dot products in that form:
 *   - quantized weights: activations quantized to the matching 8-bit blocks
 *     (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the
 *     K-quants);
 *   - F16 / BF16 weights: activations rounded to F16 / BF16;
 *   - F32 weights: activations as they are.
 * Those roundings are what make Tessera's logits land on llama.cpp's, so the
 * reference does them too: each activation row is converted to that type
 * and back. Then every product of dequantized weight and activation is
 * exact in double, summed in k order and rounded to f32 once. (Measured on
 * ../shared/golden: this lands within 6e-6 of llama.cpp's logits for Q4_0,
 * Q2_K, Q4_K and Q6_K files, closer than summing block dot products in
 * float does.) Weights with a per-block minimum and Q8_1 activations (Q4_1,
 * Q5_1) take the block dot product of tensor/ instead, because llama.cpp
 * multiplies the minimum by the activation block's sum stored in fp16
 * (Q8_1's s), which a dequantized row does not carry: on synth-s-Q4_1 that
 * halves the error (0.054 -> 0.021), on SmolLM2 Q4_1 1.13 -> 0.83.
 */
#include <stdlib.h>
#include <string.h>

#include "ref/ref_internal.h"
#include "tensor/dtype.h"
#include "util/error.h"

/* How activations meet weights of this node. */
typedef struct mm_mode {
    const dtype_traits *act; /* activations go through this type and back (NULL: as they are) */
    size_t act_row_bytes;
    dtype_vec_dot_fn block_dot; /* Q8_1 activations: the block dot product */
} mm_mode;

static mm_mode mm_mode_for(const tsr_tensor *w) {
    mm_mode mode = {0};
    const dtype_traits *tr = dtype_traits_get(w->dtype);
    const int64_t K = w->ne[0];
    if (!tr) return mode;
    /* (the dtype table pairs F16/BF16 weights with F32 for their exact dot) */
    const int32_t act = w->dtype == TSR_DTYPE_F16 || w->dtype == TSR_DTYPE_BF16 ? w->dtype
                        : tr->quantized                                        ? tr->vec_dot_type
                                                                               : TSR_DTYPE_F32;
    const dtype_traits *at = act != TSR_DTYPE_F32 ? dtype_traits_get(act) : NULL;
    if (at && at->from_f32 && at->to_f32 && K % at->block_size == 0) {
        mode.act = at;
        mode.act_row_bytes = dtype_row_bytes(act, K);
        if (act == TSR_DTYPE_Q8_1 && tr->vec_dot && K % tr->block_size == 0 && w->nb[0] == (int64_t)tr->block_bytes)
            mode.block_dot = tr->vec_dot;
    }
    return mode;
}

tsr_status ref_op_mul_mat(const tsr_node *node) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *dst = node->dst;
    const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1];
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];

    const mm_mode mode = mm_mode_for(w);
    /* xs: the N activation rows of one batch, as f32; wrow: one weight row;
     * xq: one activation row in the weight's activation type */
    float *xs = malloc((size_t)(K * N + K) * sizeof *xs);
    const size_t n_xq = mode.block_dot ? (size_t)N : 1; /* the block dot reads every row quantized */
    uint8_t *xq = mode.act ? malloc(mode.act_row_bytes * n_xq) : NULL;
    if (!xs || (mode.act && !xq)) {
        free(xs);
        free(xq);
        error_set("ref: MUL_MAT '%s': out of memory for %lld x %lld activations",
                  ref_node_label(node), (long long)K, (long long)N);
        return TSR_ERR_NO_MEMORY;
    }
    float *wrow = xs + K * N;
    uint8_t *pd = ref_tensor_base(dst);

    for (int64_t b3 = 0; b3 < x->ne[3]; b3++)
        for (int64_t b2 = 0; b2 < x->ne[2]; b2++) {
            for (int64_t n = 0; n < N; n++) {
                float *xn = xs + n * K;
                ref_row_load(x, n, b2, b3, xn);
                if (mode.act) {
                    uint8_t *q = xq + (mode.block_dot ? (size_t)n * mode.act_row_bytes : 0);
                    mode.act->from_f32(xn, q, K);
                    mode.act->to_f32(q, xn, K);
                }
            }
            for (int64_t m = 0; m < M; m++) {
                if (mode.block_dot) {
                    const uint8_t *wq = ref_tensor_base(w) + m * w->nb[1] + (b2 / r2) * w->nb[2] + (b3 / r3) * w->nb[3];
                    for (int64_t n = 0; n < N; n++) {
                        float v;
                        mode.block_dot(K, &v, wq, xq + (size_t)n * mode.act_row_bytes);
                        ref_store(dst->dtype, pd + ref_offset(dst, m, n, b2, b3), v);
                    }
                    continue;
                }
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
    free(xq);
    return TSR_OK;
}

/*
 * MUL_MAT_ID (ABI 1.4): each token's chosen experts, each one a MUL_MAT of
 * one activation row by one expert's matrix, so the roundings above apply
 * unchanged (llama.cpp's CPU backend converts the activations the same way
 * before it groups the rows by expert).
 *
 *   experts [K, N, E], x [K, n_b, T], ids I32 [n_used, T] -> dst [N, n_used, T]
 *   dst[:, s, t] = experts[:, :, ids[s, t]] x[:, s % n_b, t]
 *
 * Every id is checked before anything is written: one outside 0..E-1 fails
 * the node with TSR_ERR_INVALID naming the slot and token.
 */
tsr_status ref_op_mul_mat_id(const tsr_node *node) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *ids = node->src[2], *dst = node->dst;
    const int64_t E = w->ne[2], n_used = ids->ne[0], T = ids->ne[1], n_b = x->ne[1];
    const uint8_t *pids = ref_tensor_base(ids);
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < n_used; s++) {
            int32_t e;
            memcpy(&e, pids + ref_offset(ids, s, t, 0, 0), sizeof e);
            if (e < 0 || e >= E) {
                error_set("ref: MUL_MAT_ID '%s': expert id %d of slot %lld of token %lld is outside 0..%lld",
                          ref_node_label(node), (int)e, (long long)s, (long long)t, (long long)(E - 1));
                return TSR_ERR_INVALID;
            }
        }
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < n_used; s++) {
            int32_t e;
            memcpy(&e, pids + ref_offset(ids, s, t, 0, 0), sizeof e);
            /* one MUL_MAT over views: expert e [K, N], row [K, 1], out [N, 1] */
            tsr_tensor we = *w, xr = *x, out = *dst;
            we.buffer = xr.buffer = out.buffer = NULL;
            we.data = ref_tensor_base(w) + e * w->nb[2];
            xr.data = ref_tensor_base(x) + (s % n_b) * x->nb[1] + t * x->nb[2];
            out.data = ref_tensor_base(dst) + s * dst->nb[1] + t * dst->nb[2];
            we.ne[2] = xr.ne[1] = xr.ne[2] = out.ne[1] = out.ne[2] = 1;
            tsr_node mm = {.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &out, .src = {&we, &xr}};
            const tsr_status st = ref_op_mul_mat(&mm);
            if (st != TSR_OK) return st;
        }
    return TSR_OK;
}
