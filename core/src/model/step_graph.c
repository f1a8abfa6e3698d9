/* The decode step's graph, kept between steps: see step_graph.h. */
#include "model/observe.h"
#include "model/step_graph.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

int32_t step_kv_padded(int32_t n_kv, int32_t size, int32_t n_tokens) {
    if (n_tokens > STEP_PAD_TOKENS) return n_kv;
    const int64_t p = ((int64_t)n_kv + STEP_KV_PAD - 1) / STEP_KV_PAD * STEP_KV_PAD;
    return p > size ? size : (int32_t)p;
}

void step_graph_drop(step_graph *sg) {
    graph_free(sg->bg.g);
    memset(&sg->bg, 0, sizeof sg->bg);
    sg->n_writes = 0;
    sg->reusable = false;
}

void step_graph_free(step_graph *sg) {
    step_graph_drop(sg);
    free(sg->writes);
    sg->writes = NULL;
    sg->cap_writes = 0;
}

/* Whether root r is layer L's K (is_k) or V cache. */
static bool kv_root_is(const kv_layer *L, const graph_tensor *r, bool is_k) {
    return r->t.buffer == L->buffer && r->t.data == (is_k ? L->k_data : L->v_data) &&
           r->t.offset == (is_k ? L->k_offset : L->v_offset);
}

/* The cell set of the cache r is and the bytes between its cells; false
 * when r is no layer's K or V. */
static bool kv_root_find(const kv_cache *kv, const graph_tensor *r, int32_t *set, uint64_t *cell_bytes) {
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const kv_layer *L = &kv->layers[il];
        if (!kv_cache_layer_has_kv(kv, il)) continue; /* a recurrent layer: no K/V */
        for (int is_k = 0; is_k < 2; is_k++) {
            if (!kv_root_is(L, r, is_k)) continue;
            *set = L->set;
            *cell_bytes = is_k             ? kv_row_bytes(kv->dtype_k, kv->n_embd_k)
                          : kv->flash_attn ? kv_row_bytes(kv->dtype_v, kv->n_embd_v)
                                           : kv_row_bytes(kv->dtype_v, 1); /* transposed: a cell per element */
            return true;
        }
    }
    return false;
}

static bool is_persistent_view(const graph_tensor *t) {
    return t->view_src && (t->view_src->flags & GRAPH_PERSISTENT);
}

static int add_write(step_graph *sg, graph_tensor *node, int32_t set, uint64_t cell_bytes) {
    if (sg->n_writes == sg->cap_writes) {
        int32_t cap = sg->cap_writes ? 2 * sg->cap_writes : 64;
        step_kv_write *p = realloc(sg->writes, (size_t)cap * sizeof *p);
        if (!p) return error_set("decode: out of memory");
        sg->writes = p;
        sg->cap_writes = cap;
    }
    sg->writes[sg->n_writes++] = (step_kv_write){.node = node, .set = set, .cell_bytes = cell_bytes};
    return 0;
}

/* The cache writes of a new step graph: CPY nodes into a cache at
 * kv_head[set] cells. It is reusable when those are the only nodes writing
 * persistent memory and every other node reads the caches from their first
 * cell, so that moving kv_head moves nothing else. */
static int find_writes(step_graph *sg, const kv_cache *kv, const int32_t *kv_head) {
    graph *g = sg->bg.g;
    sg->n_writes = 0;
    sg->reusable = false;
    for (int32_t i = 0; i < graph_n_nodes(g); i++) {
        graph_tensor *t = graph_node_at(g, i);
        if (is_persistent_view(t) && kv_cache_rs_root(kv, t->view_src)) continue; /* a state: kept per slot */
        if (is_persistent_view(t)) {
            int32_t set;
            uint64_t cell_bytes;
            if (t->op != TSR_OP_CPY || !kv_root_find(kv, t->view_src, &set, &cell_bytes) ||
                t->view_offset != (uint64_t)kv_head[set] * cell_bytes)
                return 0;
            if (add_write(sg, t, set, cell_bytes)) return -1;
        }
        for (int k = 0; k < t->n_src; k++) {
            const graph_tensor *src = t->src[k];
            if (src && is_persistent_view(src) && src->op != TSR_OP_CPY && src->view_offset != 0 &&
                !kv_cache_rs_root(kv, src->view_src))
                return 0;
        }
    }
    sg->reusable = true;
    return 0;
}

/* Whether the kept graph is the one for this step. */
static bool kept_fits(const step_graph *sg, const kv_cache *kv, sched *s, int32_t n, const int32_t *kv_head,
                      const int32_t *n_kv, int32_t n_out) {
    const model_batch_graph *bg = &sg->bg;
    if (!bg->g || !sg->reusable || bg->n_tokens != n || bg->n_out != n_out || !sched_holds(s, bg->g)) return false;
    if (bg->rs_slot != kv_cache_rs_slot(kv)) return false; /* its state views are another sequence's */
    if ((bg->embd != NULL) != sg->embd_in) return false;
    for (int32_t k = 0; k < kv->n_sets; k++) {
        if (bg->n_kv[k] != n_kv[k]) return false;
        /* (what model_build_graph checks of a new graph) */
        if (kv_head[k] < 0 || kv_head[k] + n > n_kv[k]) return false;
    }
    return true;
}

int step_graph_get(step_graph *sg, const model *m, kv_cache *kv, const model_lora_set *lora, sched *s, int32_t n,
                   const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, bool reuse, model_batch_graph **out) {
    model_batch_graph *bg = &sg->bg;
    if (reuse && kept_fits(sg, kv, s, n, kv_head, n_kv, n_out)) {
        for (int32_t i = 0; i < sg->n_writes; i++) {
            const step_kv_write *w = &sg->writes[i];
            w->node->view_offset = (uint64_t)kv_head[w->set] * w->cell_bytes;
        }
        for (int32_t k = 0; k < kv->n_sets; k++) bg->kv_head[k] = kv_head[k];
        sched_views_moved(s);
        sg->n_reused++;
        *out = bg;
        return 0;
    }
    step_graph_drop(sg);
    if (model_build_graph_ex(m, kv, lora, n, kv_head, n_kv, n_out, sg->embd_in, bg) != 0) return -1;
    if (sg->observe) observe_mark(bg->g);
    if (sched_alloc(s, bg->g) != 0 || find_writes(sg, kv, kv_head) != 0) {
        step_graph_drop(sg);
        return -1;
    }
    sg->n_built++;
    *out = bg;
    return 0;
}
