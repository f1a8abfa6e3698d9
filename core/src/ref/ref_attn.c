/*
 * ref_attn — FLASH_ATTN, fused attention written out the long way.
 *
 *   q [D, n_q, H, 1], k [D, n_kv, H_kv, 1], v [D, n_kv, H_kv, 1],
 *   mask [n_kv, >= n_q] optional (0 or -inf, any value added as is)
 *   -> dst [D, H, n_q, 1] (the H heads of one query adjacent)
 *
 * For query i of head h, with kv head g = h / (H / H_kv) (grouped-query
 * attention: consecutive query heads share a kv head):
 *   s_j = scale * (q_i . k_j) + mask[j, i]
 *   p   = softmax(s)
 *   out = sum_j p_j v_j
 * Dot products and the weighted sum accumulate in double. A query whose
 * every score is -inf gets zeros.
 */
#include <math.h>
#include <stdlib.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "util/error.h"

tsr_status ref_op_flash_attn(const tsr_node *node) {
    const tsr_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2], *dst = node->dst;
    const tsr_tensor *mask = node->n_src > 3 ? node->src[3] : NULL;
    const float scale = tsr_flash_attn_params_of(node).scale;
    const int64_t D = q->ne[0], n_q = q->ne[1], H = q->ne[2];
    const int64_t n_kv = k->ne[1], H_kv = k->ne[2], group = H / H_kv;

    /* ks, vs: the kv head's keys and values as f32 [D, n_kv]; qrow [D];
     * s [n_kv] scores then weights; acc [D] in double */
    float *ks = malloc((size_t)(2 * D * n_kv + D + n_kv) * sizeof *ks);
    double *acc = malloc((size_t)D * sizeof *acc);
    if (!ks || !acc) {
        free(ks);
        free(acc);
        error_set("ref: FLASH_ATTN '%s': out of memory for %lld keys of %lld", ref_node_label(node),
                  (long long)n_kv, (long long)D);
        return TSR_ERR_NO_MEMORY;
    }
    float *vs = ks + D * n_kv, *qrow = vs + D * n_kv, *s = qrow + D;
    const uint8_t *pm = mask ? ref_tensor_base(mask) : NULL;

    for (int64_t h = 0; h < H; h++) {
        const int64_t g = h / group;
        if (h % group == 0)
            for (int64_t j = 0; j < n_kv; j++) {
                ref_row_load(k, j, g, 0, ks + j * D);
                ref_row_load(v, j, g, 0, vs + j * D);
            }
        for (int64_t i = 0; i < n_q; i++) {
            ref_row_load(q, i, h, 0, qrow);
            float max = -INFINITY;
            for (int64_t j = 0; j < n_kv; j++) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; d++) dot += (double)qrow[d] * (double)ks[j * D + d];
                s[j] = scale * (float)dot;
                if (pm) s[j] += ref_load(mask->dtype, pm + ref_offset(mask, j, i, 0, 0));
                if (s[j] > max) max = s[j];
            }
            for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
            if (max != -INFINITY) {
                double sum = 0.0;
                for (int64_t j = 0; j < n_kv; j++) {
                    s[j] = expf(s[j] - max);
                    sum += (double)s[j];
                }
                for (int64_t j = 0; j < n_kv; j++)
                    for (int64_t d = 0; d < D; d++) acc[d] += (double)s[j] * (double)vs[j * D + d];
                for (int64_t d = 0; d < D; d++) acc[d] /= sum;
            }
            for (int64_t d = 0; d < D; d++) qrow[d] = (float)acc[d];
            ref_row_store(dst, h, i, 0, qrow); /* dst row (h, i): [D, H, n_q] */
        }
    }
    free(ks);
    free(acc);
    return TSR_OK;
}
