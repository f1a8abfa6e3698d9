/* Pooling, normalisation and the reranker's classification head (pooling.h). */
#include "model/pooling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "tensor/dtype.h"
#include "util/error.h"

void pool_rows(int32_t pooling, const float *rows, int32_t n_rows, int32_t dim, float *out) {
    if (pooling != TESSERA_POOLING_MEAN || n_rows <= 1) {
        memcpy(out, rows, (size_t)dim * sizeof *out);
        return;
    }
    for (int32_t j = 0; j < dim; j++) {
        double s = 0.0;
        for (int32_t r = 0; r < n_rows; r++) s += rows[(size_t)r * (size_t)dim + (size_t)j];
        out[j] = (float)(s / n_rows);
    }
}

void pool_normalize(float *x, int32_t n, int32_t embd_norm) {
    double sum = 0.0;
    if (embd_norm < 0) return;
    if (embd_norm == 0) { /* the largest magnitude becomes int16's 32760 */
        for (int32_t i = 0; i < n; i++) sum = fmax(sum, fabs((double)x[i]));
        sum /= 32760.0;
    } else if (embd_norm == 1) {
        for (int32_t i = 0; i < n; i++) sum += fabs((double)x[i]);
    } else if (embd_norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += (double)x[i] * x[i];
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabs((double)x[i]), embd_norm);
        sum = pow(sum, 1.0 / embd_norm);
    }
    const double scale = sum > 0.0 ? 1.0 / sum : 0.0;
    for (int32_t i = 0; i < n; i++) x[i] = (float)(x[i] * scale);
}

int32_t pool_n_cls_out(const model *m) { return m->cls_out ? (int32_t)m->cls_out->ne[1] : 0; }

/* w . x (+ b): w [k, rows] of any dtype, dequantized a row at a time. */
static int head_linear(const model_weight *w, const model_weight *b, const float *x, float *y, float *row) {
    const int64_t k = w->ne[0], rows = w->ne[1];
    if (!w->data || (b && !b->data))
        return error_set("rerank: classification head tensor '%s' is not in host memory", w->name);
    const size_t row_bytes = dtype_row_bytes(w->dtype, k);
    float bias[1];
    for (int64_t r = 0; r < rows; r++) {
        if (dtype_dequantize_row(w->dtype, (const char *)w->data + (size_t)r * row_bytes, row, k) != 0)
            return error_wrap("rerank: tensor '%s'", w->name);
        double s = 0.0;
        for (int64_t i = 0; i < k; i++) s += (double)row[i] * x[i];
        if (b) {
            if (dtype_dequantize_row(b->dtype, (const char *)b->data + dtype_row_bytes(b->dtype, r),
                                     bias, 1) != 0)
                return error_wrap("rerank: tensor '%s'", b->name);
            s += bias[0];
        }
        y[r] = (float)s;
    }
    return 0;
}

int pool_cls_head(const model *m, const float *x, float *scores) {
    if (!m->cls_out) return error_set("rerank: the model has no classification head (cls.output.weight)");
    const int64_t E = m->hp.n_embd;
    float *row = malloc((size_t)E * sizeof *row), *h = malloc((size_t)E * sizeof *h);
    int rc = -1;
    if (!row || !h) {
        error_set("rerank: out of memory");
        goto done;
    }
    if (m->cls) {
        if (head_linear(m->cls, m->cls_b, x, h, row) != 0) goto done;
        for (int64_t i = 0; i < E; i++) h[i] = tanhf(h[i]);
    } else {
        memcpy(h, x, (size_t)E * sizeof *h);
    }
    rc = head_linear(m->cls_out, m->cls_out_b, h, scores, row);
done:
    free(row);
    free(h);
    return rc;
}
