#include "mini_runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref.h"
#include "util/error.h"

static bool owns_memory(const graph_tensor *t) {
    return !t->view_src && !(t->flags & (GRAPH_WEIGHT | GRAPH_PERSISTENT));
}

int mini_alloc(graph *g) {
    int32_t n = graph_n_tensors(g);
    for (int32_t i = 0; i < n; i++) {
        graph_tensor *t = graph_tensor_at(g, i);
        if (!owns_memory(t)) continue;
        uint64_t size = graph_tensor_nbytes(t);
        t->t.data = calloc(1, size ? size : 1);
        t->t.buffer = NULL;
        if (!t->t.data) return error_set("mini runner: out of memory for '%s'", t->name);
    }
    for (int32_t i = 0; i < n; i++) {
        graph_tensor *t = graph_tensor_at(g, i);
        if (!t->view_src) continue;
        uint64_t off;
        graph_tensor *s = graph_tensor_storage(t, &off);
        t->t.data = (char *)s->t.data + off;
        t->t.buffer = NULL;
    }
    return 0;
}

int mini_compute(graph *g) {
    int32_t n = graph_n_nodes(g);
    tsr_node *nodes = calloc((size_t)n, sizeof *nodes);
    if (!nodes) return error_set("mini runner: out of memory");
    for (int32_t i = 0; i < n; i++) graph_node_to_tsr(graph_node_at(g, i), &nodes[i]);
    tsr_status st = ref_compute(nodes, n, NULL);
    free(nodes);
    return st == TSR_OK ? 0 : -1;
}

void mini_release(graph *g) {
    int32_t n = graph_n_tensors(g);
    for (int32_t i = 0; i < n; i++) {
        graph_tensor *t = graph_tensor_at(g, i);
        if (owns_memory(t)) {
            free(t->t.data);
            t->t.data = NULL;
        }
    }
}

int mini_forward(const model *m, kv_cache *kv, const int32_t *tokens, int32_t n, int32_t pos, bool all,
                 float *out) {
    model_batch_graph bg;
    const int32_t n_kv = pos + n, n_out = all ? n : 1;
    if (model_build_graph(m, kv, NULL, n, &pos, &n_kv, n_out, &bg) != 0) return -1;
    int rc = -1;
    int32_t *positions = malloc((size_t)n * sizeof *positions);
    if (!positions || mini_alloc(bg.g) != 0) goto done;
    for (int32_t i = 0; i < n; i++) {
        ((int32_t *)bg.tokens->t.data)[i] = tokens[i];
        ((int32_t *)bg.pos->t.data)[i] = positions[i] = pos + i;
    }
    float *mask = bg.mask->t.data;
    for (int32_t t = 0; t < n; t++)
        for (int32_t j = 0; j < n_kv; j++) mask[t * n_kv + j] = j <= pos + t ? 0.0f : -INFINITY;
    if (bg.out_ids) ((int32_t *)bg.out_ids->t.data)[0] = n - 1;
    if (bg.attn_temp) model_fill_attn_temp(&m->hp, n, positions, bg.attn_temp->t.data);
    if (mini_compute(bg.g) != 0) goto done;
    memcpy(out, bg.logits->t.data, (size_t)n_out * (size_t)m->hp.n_vocab * sizeof(float));
    rc = 0;
done:
    free(positions);
    mini_release(bg.g);
    graph_free(bg.g);
    return rc;
}
