/* The importance-matrix half of tessera_tools.h: the matmul observer of a
 * context (model/observe.c does the work) and tessera_imatrix on
 * quant/imatrix.c. */
#include <tessera/tessera_tools.h>

#include <stdlib.h>

#include "model/observe.h"
#include "model/public.h"
#include "quant/imatrix.h"
#include "util/error.h"

int tessera_context_set_matmul_observer(tessera_context *ctx, tessera_matmul_observer fn, void *user) {
    if (!ctx) return error_set("tessera_context_set_matmul_observer: no context");
    ctx->observer = fn;
    ctx->observer_user = user;
    if (ctx->step.observe != (fn != NULL)) {
        ctx->step.observe = fn != NULL;
        step_graph_drop(&ctx->step); /* its outputs were marked for the other case */
    }
    return 0;
}

struct tessera_imatrix {
    imatrix *im;
};

tessera_imatrix *tessera_imatrix_new(void) {
    tessera_imatrix *t = calloc(1, sizeof *t);
    if (!t || !(t->im = imatrix_new())) {
        free(t);
        error_set("tessera_imatrix_new: out of memory");
        return NULL;
    }
    return t;
}

void tessera_imatrix_free(tessera_imatrix *im) {
    if (!im) return;
    imatrix_free(im->im);
    free(im);
}

int tessera_imatrix_add(tessera_imatrix *im, const tessera_matmul_input *in) {
    if (!im || !in || !in->weight || !in->rows || in->n_cols < 1 || in->n_experts < 1 || in->n_rows < 0)
        return error_set("tessera_imatrix_add: bad arguments");
    imatrix_entry *e = imatrix_entry_get(im->im, in->weight, in->n_cols, in->n_experts);
    if (!e) return -1;
    for (int64_t r = 0; r < in->n_rows; r++) {
        const int64_t mat = in->experts ? in->experts[r] : 0;
        if (mat < 0 || mat >= e->n_mat) continue; /* a bad id computed nothing */
        const float *x = in->rows + r * in->n_cols;
        double *sums = e->sums + mat * e->ne0;
        for (int64_t i = 0; i < e->ne0; i++) sums[i] += (double)x[i] * (double)x[i];
        e->counts[mat] += 1;
    }
    return 0;
}

int tessera_imatrix_load(tessera_imatrix *im, const char *path) {
    if (!im || !path) return error_set("tessera_imatrix_load: bad arguments");
    return imatrix_load(im->im, path);
}

int tessera_imatrix_note(tessera_imatrix *im, const char *dataset, int64_t chunks, int64_t chunk_size) {
    if (!im) return error_set("tessera_imatrix_note: no matrix");
    if (dataset && imatrix_add_dataset(im->im, dataset) != 0) return -1;
    im->im->chunk_count += chunks;
    if (chunk_size > 0) im->im->chunk_size = chunk_size;
    return 0;
}

int64_t tessera_imatrix_n_entries(const tessera_imatrix *im) { return im ? im->im->n_entries : 0; }

int64_t tessera_imatrix_n_chunks(const tessera_imatrix *im) { return im ? im->im->chunk_count : 0; }

int tessera_imatrix_save(const tessera_imatrix *im, const char *path, bool legacy) {
    if (!im || !path) return error_set("tessera_imatrix_save: bad arguments");
    return imatrix_save(im->im, path, legacy);
}
