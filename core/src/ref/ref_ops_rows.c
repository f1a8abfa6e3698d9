/*
 * ref_ops_rows — ops that move data rather than compute with it:
 * GET_ROWS, CPY, CONCAT, ARGMAX, TOP_K; and SUM_ROWS.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "util/error.h"

/* a [n, r, b2, b3], rows I32 [m, b2, b3] -> dst [n, m, b2, b3]
 * dst[:, i, j, k] = to_f32(a[:, rows[i, j, k], j, k]) */
tsr_status ref_op_get_rows(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *rows = node->src[1], *dst = node->dst;
    const uint8_t *prows = ref_tensor_base(rows);
    float *row = malloc((size_t)a->ne[0] * sizeof *row);
    if (!row) {
        error_set("ref: GET_ROWS '%s': out of memory for a row of %lld", ref_node_label(node),
                  (long long)a->ne[0]);
        return TSR_ERR_NO_MEMORY;
    }
    for (int64_t i3 = 0; i3 < rows->ne[2]; i3++)
        for (int64_t i2 = 0; i2 < rows->ne[1]; i2++)
            for (int64_t i1 = 0; i1 < rows->ne[0]; i1++) {
                int32_t r;
                memcpy(&r, prows + ref_offset(rows, i1, i2, i3, 0), sizeof r);
                if (r < 0 || r >= a->ne[1]) {
                    error_set("ref: GET_ROWS '%s': row index %d at [%lld, %lld, %lld] is outside "
                              "0..%lld", ref_node_label(node), (int)r, (long long)i1,
                              (long long)i2, (long long)i3, (long long)(a->ne[1] - 1));
                    free(row);
                    return TSR_ERR_INVALID;
                }
                ref_row_load(a, r, i2, i3, row);
                ref_row_store(dst, i1, i2, i3, row);
            }
    free(row);
    return TSR_OK;
}

/* Elements of src0 in ne order (i0 fastest) go to dst's elements in its ne
 * order; either side may be a strided view. Quantized sides are converted a
 * row (ne[0] elements) at a time through a flat f32 copy. */
tsr_status ref_op_cpy(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    int64_t n = tsr_tensor_nelements(a);
    bool a_quant = tsr_dtype_block_size(a->dtype) > 1;
    bool d_quant = tsr_dtype_block_size(dst->dtype) > 1;

    if (!a_quant && !d_quant) {
        for (int64_t i = 0; i < n; i++)
            ref_store(dst->dtype, ref_flat_ptr(dst, i), ref_load(a->dtype, ref_flat_ptr(a, i)));
        return TSR_OK;
    }

    float *flat = malloc((size_t)n * sizeof *flat);
    if (!flat) {
        error_set("ref: CPY '%s': out of memory for %lld floats", ref_node_label(node), (long long)n);
        return TSR_ERR_NO_MEMORY;
    }
    if (a_quant) {
        int64_t r = 0;
        for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < a->ne[1]; i1++, r++) ref_row_load(a, i1, i2, i3, flat + r * a->ne[0]);
    } else {
        for (int64_t i = 0; i < n; i++) flat[i] = ref_load(a->dtype, ref_flat_ptr(a, i));
    }
    if (d_quant) {
        int64_t r = 0;
        for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < dst->ne[1]; i1++, r++)
                    ref_row_store(dst, i1, i2, i3, flat + r * dst->ne[0]);
    } else {
        for (int64_t i = 0; i < n; i++) ref_store(dst->dtype, ref_flat_ptr(dst, i), flat[i]);
    }
    free(flat);
    return TSR_OK;
}

/* dst = a followed by b along dimension dim; all other dims equal. */
tsr_status ref_op_concat(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *b = node->src[1], *dst = node->dst;
    const int dim = tsr_concat_params_of(node).dim;
    const uint8_t *pa = ref_tensor_base(a), *pb = ref_tensor_base(b);
    uint8_t *pd = ref_tensor_base(dst);
    int64_t i[TSR_MAX_DIMS];
    for (i[3] = 0; i[3] < dst->ne[3]; i[3]++)
        for (i[2] = 0; i[2] < dst->ne[2]; i[2]++)
            for (i[1] = 0; i[1] < dst->ne[1]; i[1]++)
                for (i[0] = 0; i[0] < dst->ne[0]; i[0]++) {
                    float v;
                    if (i[dim] < a->ne[dim]) {
                        v = ref_load(a->dtype, pa + ref_offset(a, i[0], i[1], i[2], i[3]));
                    } else {
                        int64_t j[TSR_MAX_DIMS] = {i[0], i[1], i[2], i[3]};
                        j[dim] -= a->ne[dim];
                        v = ref_load(b->dtype, pb + ref_offset(b, j[0], j[1], j[2], j[3]));
                    }
                    ref_store(dst->dtype, pd + ref_offset(dst, i[0], i[1], i[2], i[3]), v);
                }
    return TSR_OK;
}

/* dst[r] = index of the largest element of row r of a (the first one on ties;
 * NaNs never win; 0 for a row without a number larger than -inf). */
tsr_status ref_op_argmax(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a);
    int64_t r = 0;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++, r++) {
                float best = -INFINITY;
                int32_t best_i = 0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                    if (x > best) {
                        best = x;
                        best_i = (int32_t)i0;
                    }
                }
                memcpy(ref_flat_ptr(dst, r), &best_i, sizeof best_i);
            }
    return TSR_OK;
}

/* Whether element (x, i) ranks before (y, j) in TOP_K's order: larger
 * first, NaN after every number, equal values (and NaNs) by lower index. */
static bool top_k_before(float x, int64_t i, float y, int64_t j) {
    if (isnan(x) || isnan(y)) return isnan(x) == isnan(y) ? i < j : isnan(y);
    return x > y || (x == y && i < j);
}

/* a F32 [n, r, b2, b3] -> dst I32 [k, r, b2, b3]: the first k of each row
 * in that order, by selection (k passes over the row; n is an expert count,
 * not a vocabulary). llama.cpp sorts the whole row (argsort) and views its
 * first k; the order is the same except where it leaves ties unordered. */
tsr_status ref_op_top_k(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const int64_t n = a->ne[0], k = dst->ne[0];
    const uint8_t *pa = ref_tensor_base(a);
    uint8_t *pd = ref_tensor_base(dst);
    bool *taken = malloc((size_t)n * sizeof *taken);
    if (!taken) {
        error_set("ref: TOP_K '%s': out of memory for a row of %lld", ref_node_label(node), (long long)n);
        return TSR_ERR_NO_MEMORY;
    }
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                memset(taken, 0, (size_t)n * sizeof *taken);
                for (int64_t r = 0; r < k; r++) {
                    int64_t best = -1;
                    float best_x = 0.0f;
                    for (int64_t i0 = 0; i0 < n; i0++) {
                        if (taken[i0]) continue;
                        const float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                        if (best < 0 || top_k_before(x, i0, best_x, best)) {
                            best = i0;
                            best_x = x;
                        }
                    }
                    taken[best] = true;
                    const int32_t id = (int32_t)best;
                    memcpy(pd + ref_offset(dst, r, i1, i2, i3), &id, sizeof id);
                }
            }
    free(taken);
    return TSR_OK;
}

/* a [n, r, b2, b3] -> dst [1, r, b2, b3]: each row summed in double, in
 * index order, rounded once. */
tsr_status ref_op_sum_rows(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a);
    uint8_t *pd = ref_tensor_base(dst);
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                    sum += (double)ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                ref_store(dst->dtype, pd + ref_offset(dst, 0, i1, i2, i3), (float)sum);
            }
    return TSR_OK;
}
