/*
 * observe — the matrix products' activations handed to a context's
 * observer (see observe.h).
 */
#include <stdlib.h>
#include <string.h>

#include "model/observe.h"
#include "util/error.h"

static bool observed(const graph_tensor *t) {
    if (t->op != TSR_OP_MUL_MAT && t->op != TSR_OP_MUL_MAT_ID) return false;
    const graph_tensor *w = t->src[0];
    return w && (w->flags & GRAPH_WEIGHT) && t->src[1] && t->src[1]->t.dtype == TSR_DTYPE_F32;
}

void observe_mark(graph *g) {
    for (int32_t i = 0; i < graph_n_nodes(g); i++) {
        graph_tensor *t = graph_node_at(g, i);
        if (!observed(t)) continue;
        graph_set_output(t->src[1]);
        if (t->op == TSR_OP_MUL_MAT_ID) graph_set_output(t->src[2]);
    }
}

/* Row (i1, i2, i3) of x, K floats, by its strides. */
static const float *row_at(const graph_tensor *x, int64_t i1, int64_t i2, int64_t i3) {
    const char *base = x->t.data;
    return (const float *)(const void *)(base + i1 * (int64_t)x->t.nb[1] + i2 * (int64_t)x->t.nb[2] +
                                         i3 * (int64_t)x->t.nb[3]);
}

static int scratch_reserve(tessera_context *ctx, int64_t floats, int64_t ids) {
    if (floats > ctx->observe_cap) {
        float *r = realloc(ctx->observe_rows, (size_t)floats * sizeof *r);
        if (!r) return error_set("matmul observer: out of memory");
        ctx->observe_rows = r;
        ctx->observe_cap = floats;
    }
    if (ids > ctx->observe_ids_cap) {
        int32_t *e = realloc(ctx->observe_ids, (size_t)ids * sizeof *e);
        if (!e) return error_set("matmul observer: out of memory");
        ctx->observe_ids = e;
        ctx->observe_ids_cap = ids;
    }
    return 0;
}

int observe_step(tessera_context *ctx, const graph *g) {
    for (int32_t i = 0; i < graph_n_nodes(g); i++) {
        const graph_tensor *t = graph_node_at(g, i);
        if (!observed(t)) continue;
        const graph_tensor *w = t->src[0], *x = t->src[1];
        const int64_t K = x->t.ne[0];
        tessera_matmul_input in = {.weight = w->name, .n_cols = K, .n_experts = 1};
        if (t->op == TSR_OP_MUL_MAT) {
            /* every row of x: [K, n, b2, b3] */
            const int64_t n = x->t.ne[1] * x->t.ne[2] * x->t.ne[3];
            if (scratch_reserve(ctx, n * K, 0) != 0) return -1;
            int64_t r = 0;
            for (int64_t i3 = 0; i3 < x->t.ne[3]; i3++)
                for (int64_t i2 = 0; i2 < x->t.ne[2]; i2++)
                    for (int64_t i1 = 0; i1 < x->t.ne[1]; i1++, r++)
                        memcpy(ctx->observe_rows + r * K, row_at(x, i1, i2, i3), (size_t)K * sizeof(float));
            in.n_rows = n;
        } else {
            /* slot s of token t used expert ids[s, t] on row x[:, s % n_b, t] */
            const graph_tensor *ids = t->src[2];
            const int64_t n_used = ids->t.ne[0], T = ids->t.ne[1], n_b = x->t.ne[1];
            in.n_experts = w->t.ne[2];
            if (scratch_reserve(ctx, n_used * T * K, n_used * T) != 0) return -1;
            const char *idb = ids->t.data;
            for (int64_t tk = 0; tk < T; tk++)
                for (int64_t s = 0; s < n_used; s++) {
                    const int64_t r = tk * n_used + s;
                    int32_t e;
                    memcpy(&e, idb + tk * (int64_t)ids->t.nb[1] + s * (int64_t)ids->t.nb[0], sizeof e);
                    ctx->observe_ids[r] = e;
                    memcpy(ctx->observe_rows + r * K, row_at(x, s % n_b, tk, 0), (size_t)K * sizeof(float));
                }
            in.n_rows = n_used * T;
            in.experts = ctx->observe_ids;
        }
        in.rows = ctx->observe_rows;
        ctx->observer(&in, ctx->observer_user);
    }
    return 0;
}
