#include "mini_runner.h"

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
