/*
 * ref_ops_norm — row-wise reductions: RMS_NORM, NORM, SOFT_MAX.
 *
 * Each row is loaded into an f32 scratch row first, so dst may alias src0.
 * Sums accumulate in double in index order, as ggml's CPU backend does
 * (ggml_float), and are rounded to f32 where ggml rounds them.
 */
#include <math.h>
#include <stdlib.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "util/error.h"

static float *alloc_row(const tsr_node *node, int64_t n) {
    float *row = malloc((size_t)n * sizeof *row);
    if (!row)
        error_set("ref: %s: out of memory for a row of %lld", ref_node_label(node), (long long)n);
    return row;
}

/* each row: x * 1/sqrt(mean(x^2) + eps) */
static void rms_norm_row(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

/* each row: (x - mean) * 1/sqrt(var + eps) */
static void norm_row(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] -= mean;
        sum2 += (double)(x[i] * x[i]);
    }
    const float variance = (float)(sum2 / (double)n);
    const float scale = 1.0f / sqrtf(variance + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

static tsr_status normalize_rows(const tsr_node *node, void (*f)(float *, int64_t, float)) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    float *row = alloc_row(node, a->ne[0]);
    if (!row) return TSR_ERR_NO_MEMORY;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                ref_row_load(a, i1, i2, i3, row);
                f(row, a->ne[0], tsr_norm_params_of(node).eps);
                ref_row_store(dst, i1, i2, i3, row);
            }
    free(row);
    return TSR_OK;
}

tsr_status ref_op_rms_norm(const tsr_node *node) { return normalize_rows(node, rms_norm_row); }
tsr_status ref_op_norm(const tsr_node *node) { return normalize_rows(node, norm_row); }

/* a [n, rows, ne2, ne3], mask [n, >= rows, ne2', ne3'] (broadcast over 2, 3)
 * each row: softmax(x * scale + slope * mask). A row whose every entry is
 * -inf has no defined softmax; ref writes zeros there. */
tsr_status ref_op_soft_max(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const tsr_tensor *mask = node->n_src > 1 ? node->src[1] : NULL;
    /* scale, and ALiBi's slope per head (ggml's definition; 1 when max_bias is 0) */
    const tsr_soft_max_params p = tsr_soft_max_params_of(node);
    const int64_t n = a->ne[0];
    float *row = alloc_row(node, n);
    if (!row) return TSR_ERR_NO_MEMORY;
    const uint8_t *pm = mask ? ref_tensor_base(mask) : NULL;
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < a->ne[2]; i2++) {
            const float slope = tsr_soft_max_slope(&p, i2);
            for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
                ref_row_load(a, i1, i2, i3, row);
                float max = -INFINITY;
                for (int64_t i = 0; i < n; i++) {
                    row[i] *= p.scale;
                    if (mask) {
                        int64_t off = ref_offset(mask, i, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                        row[i] += slope * ref_load(mask->dtype, pm + off);
                    }
                    if (row[i] > max) max = row[i];
                }
                if (max == -INFINITY) {
                    for (int64_t i = 0; i < n; i++) row[i] = 0.0f;
                } else {
                    double sum = 0.0;
                    for (int64_t i = 0; i < n; i++) {
                        row[i] = expf(row[i] - max);
                        sum += (double)row[i];
                    }
                    const float inv_sum = (float)(1.0 / sum);
                    for (int64_t i = 0; i < n; i++) row[i] *= inv_sum;
                }
                ref_row_store(dst, i1, i2, i3, row);
            }
        }
    free(row);
    return TSR_OK;
}
