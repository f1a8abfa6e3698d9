/*
 * sched — placement, splits, copies and memory planning (sched_alloc).
 * Running the plan and explaining it live in run.c.
 */
#include "sched/sched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "sched/sched_internal.h"
#include "util/error.h"

/* ------------------------------------------------------------ lifetime */

static void slot_init(sched_slot *sl, host_device *hd, bool fallback) {
    memset(sl, 0, sizeof *sl);
    sl->hd = hd;
    sl->fallback = fallback;
    sl->reads_host = hd->info.reads_host_memory != 0;
    sl->host_visible = hd->info.host_visible != 0 && hd->dev->api->buffer_host_ptr != NULL;
}

/* The op offload threshold: params' value, else TESSERA_OP_OFFLOAD (a
 * column count). 0: off; -1 with an error naming a bad variable. */
static int32_t offload_threshold(const sched_params *params) {
    const int32_t given = params ? params->offload_min_batch : 0;
    if (given != 0) return given > 0 ? given : 0;
    const char *env = getenv("TESSERA_OP_OFFLOAD");
    if (!env || !*env) return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno || *end || v < 0 || v > INT32_MAX)
        return error_set("TESSERA_OP_OFFLOAD='%s' is not a number of tokens (0 or unset: off)", env);
    return (int32_t)v;
}

sched *sched_new(host_device *const *devices, int n_devices, const sched_params *params) {
    const int32_t offload = offload_threshold(params);
    if (offload < 0) return NULL;
    if (n_devices < 1 || n_devices > SCHED_MAX_DEVICES) {
        error_set("sched_new: %d devices given (1..%d allowed)", n_devices, SCHED_MAX_DEVICES);
        return NULL;
    }
    for (int i = 0; i < n_devices; i++) {
        if (!devices[i]) {
            error_set("sched_new: device %d is NULL", i);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (devices[j] == devices[i]) {
                error_set("sched_new: device %s given twice", devices[i]->name);
                return NULL;
            }
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) {
        error_set("sched_new: out of memory");
        return NULL;
    }
    if (params) s->params = *params;
    s->n_threads = s->params.n_threads;
    s->offload_batch = offload;
    for (int i = 0; i < n_devices; i++) {
        if (host_device_open(devices[i])) {
            free(s);
            return NULL;
        }
        if (host_device_alignment(devices[i]) > SCHED_ALIGN) {
            error_set("sched_new: device %s needs %llu-byte alignment, the scheduler plans %d",
                      devices[i]->name, (unsigned long long)host_device_alignment(devices[i]), SCHED_ALIGN);
            free(s);
            return NULL;
        }
        slot_init(&s->slots[i], devices[i], false);
    }
    s->n_slots = s->n_chosen = n_devices;
    return s;
}

void sched_set_n_threads(sched *s, int32_t n_threads) {
    if (s) s->n_threads = n_threads > 0 ? n_threads : 0;
}

tsr_queue *sched_slot_queue(sched *s, int32_t slot) {
    sched_slot *sl = &s->slots[slot];
    if (!sl->queue) {
        sl->queue = host_device_queue_new(sl->hd);
        if (sl->queue && s->profiling) sched_slot_profile(s, slot, true);
    }
    return sl->queue;
}

tsr_queue *sched_device_queue(sched *s, host_device *hd) {
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].hd == hd) return sched_slot_queue(s, i);
    return host_device_queue(hd);
}

void sched_free(sched *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n_slots; i++) {
        sched_slot *sl = &s->slots[i];
        if (sl->queue && sl->queue->api->destroy) sl->queue->api->destroy(sl->queue);
        if (sl->buf && sl->hd->dev->api->buffer_free) sl->hd->dev->api->buffer_free(sl->hd->dev, sl->buf);
        memplan_release(&sl->plan);
    }
    free(s->node_slot);
    free(s->node_pos);
    free(s->last_use);
    free(s->last_writer);
    free(s->is_output);
    free(s->in_place);
    free(s->released);
    free(s->plan_offset);
    free(s->host_offset);
    free(s->loc);
    free(s->splits);
    free(s->copies);
    free(s->fallbacks);
    free(s->host_arena);
    free(s->staging);
    free(s->run_nodes);
    free(s->run_tensors);
    free(s->moving_nodes);
    free(s->moving_tensors);
    free(s);
}

/* Grow per-graph arrays to the graph's size (kept across calls). */
static int arrays_reserve(sched *s, int32_t n_nodes, int32_t n_tensors) {
    if (n_nodes > s->cap_nodes) {
        int32_t *ns = realloc(s->node_slot, (size_t)n_nodes * sizeof *ns);
        if (ns) s->node_slot = ns;
        tsr_node *rn = realloc(s->run_nodes, (size_t)n_nodes * sizeof *rn);
        if (rn) s->run_nodes = rn;
        tsr_tensor *rt = realloc(s->run_tensors, (size_t)n_nodes * (1 + TSR_MAX_SRC) * sizeof *rt);
        if (rt) s->run_tensors = rt;
        int32_t *mn = realloc(s->moving_nodes, (size_t)n_nodes * sizeof *mn);
        if (mn) s->moving_nodes = mn;
        if (!ns || !rn || !rt || !mn) return error_set("sched: out of memory for %d nodes", n_nodes);
        s->cap_nodes = n_nodes;
    }
    if (n_tensors > s->cap_tensors) {
        size_t n = (size_t)n_tensors;
#define GROW(field)                                                     \
    do {                                                                \
        void *p = realloc(s->field, n * sizeof *s->field);              \
        if (!p) return error_set("sched: out of memory for %d tensors", n_tensors); \
        s->field = p;                                                   \
    } while (0)
        GROW(node_pos);
        GROW(last_use);
        GROW(last_writer);
        GROW(is_output);
        GROW(in_place);
        GROW(released);
        GROW(plan_offset);
        GROW(host_offset);
        GROW(loc);
        GROW(moving_tensors);
#undef GROW
        s->cap_tensors = n_tensors;
    }
    return 0;
}

/* Append to a growable array; -1 on out of memory. */
static int push(void **items, int32_t *n, int32_t *cap, size_t item_size) {
    if (*n == *cap) {
        int32_t nc = *cap ? *cap * 2 : 16;
        void *p = realloc(*items, (size_t)nc * item_size);
        if (!p) return error_set("sched: out of memory");
        *items = p;
        *cap = nc;
    }
    (*n)++;
    return 0;
}

graph_tensor *sched_root(const sched *s, int32_t i, uint64_t *offset) {
    return graph_tensor_storage(graph_tensor_at(s->g, i), offset);
}

/* ----------------------------------------------------------- placement */

static bool device_supports(const sched_slot *sl, const graph_tensor *t, char *why, size_t why_size) {
    tsr_node node;
    graph_node_to_tsr(t, &node);
    return host_device_supports(sl->hd, &node, why, why_size);
}

/* Computed roots live in their producer's compute buffer; bound ones where
 * they were bound; inputs in the host arena. */
static bool root_is_computed(const graph_tensor *r) { return r->op != TSR_OP_NONE; }

/* Bound by the caller (weights, KV cache, or any graph_tensor_bind); other
 * leaves are inputs the scheduler places in its host arena. */
static bool root_is_bound(const graph_tensor *r) {
    return !root_is_computed(r) &&
           (r->flags & (GRAPH_WEIGHT | GRAPH_PERSISTENT | GRAPH_BOUND)) != 0;
}

/* Who owns root r's bytes and whether they have a host address, as known
 * before buffers exist. */
static void root_owner(const sched *s, const graph_tensor *r, host_device **owner, bool *has_host) {
    if (root_is_computed(r)) {
        const sched_slot *sl = &s->slots[s->node_slot[s->node_pos[r->index]]];
        *owner = sl->hd;
        *has_host = sl->host_visible;
    } else if (root_is_bound(r) && r->t.buffer) {
        *owner = host_device_get(r->home_device);
        *has_host = r->t.data != NULL;
    } else {
        *owner = NULL; /* plain host memory: bound there, or the input arena */
        *has_host = true;
    }
}

static bool slot_can_address(const sched *s, int32_t slot, const graph_tensor *r) {
    host_device *owner;
    bool has_host;
    root_owner(s, r, &owner, &has_host);
    if (owner && owner == s->slots[slot].hd) return true;
    return has_host && s->slots[slot].reads_host;
}

static int32_t slot_of(sched *s, host_device *hd) {
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].hd == hd) return i;
    return -1;
}

static int fallback_note(sched *s, int32_t node, int32_t slot, const char *fmt, ...)
    TSR_PRINTF(4, 5);
static int fallback_note(sched *s, int32_t node, int32_t slot, const char *fmt, ...) {
    if (push((void **)&s->fallbacks, &s->n_fallbacks, &s->cap_fallbacks, sizeof *s->fallbacks))
        return -1;
    sched_fallback *f = &s->fallbacks[s->n_fallbacks - 1];
    f->node = node;
    f->slot = slot;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->reason, sizeof f->reason, fmt, ap);
    va_end(ap);
    return 0;
}

/* The first weight among t's sources (through views), or NULL. */
static graph_tensor *weight_source(graph_tensor *t) {
    for (int i = 0; i < t->n_src; i++) {
        if (!t->src[i]) continue;
        graph_tensor *r = graph_tensor_storage(t->src[i], NULL);
        if ((r->flags & GRAPH_WEIGHT) || (t->src[i]->flags & GRAPH_WEIGHT)) return r;
    }
    return NULL;
}

static bool slot_fits(sched *s, int32_t slot, graph_tensor *t);

/* Op offload (sched_params.offload_min_batch): the chosen device a
 * product with host weight w and enough columns is uploaded to, or -1. */
static int32_t offload_slot(sched *s, const graph_tensor *t, const graph_tensor *w) {
    if (!s->offload_batch || t->op != TSR_OP_MUL_MAT || !t->src[1] || !root_is_bound(w) || w->t.buffer)
        return -1;
    if (t->src[1]->t.ne[1] < s->offload_batch) return -1;
    for (int32_t i = 0; i < s->n_chosen; i++)
        if (s->slots[i].hd->info.kind != TSR_DEVICE_CPU && !s->slots[i].reads_host) return i;
    return -1;
}

/* Bytes of the weight node pos computes with after copying it in for the
 * step (op offload); 0: none. */
static uint64_t node_upload_bytes(const sched *s, int32_t pos) {
    graph_tensor *w = weight_source(graph_node_at(s->g, pos));
    if (!w || !root_is_bound(w) || slot_can_address(s, s->node_slot[pos], w)) return 0;
    return graph_tensor_nbytes(w);
}

/* Where t would like to run, before asking whether the device can: the
 * device holding its weight (or, for a large batch, the device its host
 * weight is offloaded to), else its first computed source's device, else
 * the previous node's. -1: no preference. */
static int32_t preferred_slot(sched *s, graph_tensor *t, int32_t pos) {
    graph_tensor *w = weight_source(t);
    if (w) {
        if (root_is_bound(w) && w->t.buffer) return slot_of(s, host_device_get(w->home_device));
        const int32_t up = offload_slot(s, t, w);
        if (up >= 0 && slot_fits(s, up, t)) return up;
        for (int32_t i = 0; i < s->n_chosen; i++)
            if (s->slots[i].reads_host) return i;
        return -1;
    }
    for (int i = 0; i < t->n_src; i++) {
        if (!t->src[i]) continue;
        graph_tensor *r = graph_tensor_storage(t->src[i], NULL);
        if (root_is_computed(r)) return s->node_slot[s->node_pos[r->index]];
    }
    return pos > 0 ? s->node_slot[pos - 1] : 0;
}

/* A node whose storage is elsewhere (CPY into a KV cache view) must run
 * where that storage can be written. */
static bool slot_fits(sched *s, int32_t slot, graph_tensor *t) {
    if (t->view_src && !slot_can_address(s, slot, t->view_src)) return false;
    return device_supports(&s->slots[slot], t, NULL, 0);
}

/* Best CPU device, then ref: appended to the slots on first use. */
static int32_t fallback_slot(sched *s, graph_tensor *t) {
    int32_t n = host_device_count();
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < n; i++) {
            host_device *hd = host_device_get(i);
            bool is_ref = hd == host_device_ref();
            if (pass == 0 ? (is_ref || hd->info.kind != TSR_DEVICE_CPU) : !is_ref) continue;
            int32_t slot = slot_of(s, hd);
            if (slot < 0) {
                if (s->n_slots == SCHED_MAX_DEVICES) continue;
                slot = s->n_slots;
                slot_init(&s->slots[slot], hd, true);
            }
            if (!slot_fits(s, slot, t)) continue;
            if (slot == s->n_slots) s->n_slots++;
            return slot;
        }
    }
    return -1;
}

/* Why slot cannot run t, for explain. */
static void why_not(sched *s, int32_t slot, graph_tensor *t, char *buf, size_t size) {
    if (t->view_src && !slot_can_address(s, slot, t->view_src))
        snprintf(buf, size, "%s cannot write its destination '%s'", s->slots[slot].hd->name,
                 t->view_src->name);
    else if (device_supports(&s->slots[slot], t, buf, size))
        snprintf(buf, size, "%s does not support it", s->slots[slot].hd->name); /* not reached */
}

/* t's sources all reachable from slot without a copy. */
static bool sources_reachable(const sched *s, int32_t slot, const graph_tensor *t) {
    for (int i = 0; i < t->n_src; i++)
        if (t->src[i] && !slot_can_address(s, slot, graph_tensor_storage(t->src[i], NULL)))
            return false;
    return true;
}

static int place_node(sched *s, int32_t pos) {
    graph_tensor *t = graph_node_at(s->g, pos);
    int32_t pref = preferred_slot(s, t, pos);
    /* Following a neighbour must not strand the graph on a fallback or a
     * less preferred device: return to an earlier chosen device as soon as
     * it can run the node without any copy. */
    if (pref > 0 && !weight_source(t)) {
        for (int32_t i = 0; i < pref && i < s->n_chosen; i++) {
            if (sources_reachable(s, i, t) && slot_fits(s, i, t)) {
                s->node_slot[pos] = i;
                return 0;
            }
        }
    }
    if (pref >= 0 && slot_fits(s, pref, t)) {
        s->node_slot[pos] = pref;
        return 0;
    }
    char why[SCHED_REASON_MAX] = "";
    if (pref >= 0) why_not(s, pref, t, why, sizeof why);
    for (int32_t i = 0; i < s->n_chosen; i++) {
        if (i == pref || !slot_fits(s, i, t)) continue;
        s->node_slot[pos] = i;
        return pref >= 0 ? fallback_note(s, pos, i, "%s", why) : 0;
    }
    if (s->params.no_fallback) {
        char tried[256] = "";
        size_t len = 0;
        for (int32_t i = 0; i < s->n_chosen && len + 1 < sizeof tried; i++) {
            int w = snprintf(tried + len, sizeof tried - len, "%s%s", i ? ", " : "",
                             s->slots[i].hd->name);
            if (w > 0) len += (size_t)w;
        }
        return error_set("sched: node '%s' (%s): no device supports it (tried %s)", t->name,
                         graph_op_name(t->op), tried);
    }
    int32_t fb = fallback_slot(s, t);
    if (fb < 0)
        return error_set("sched: node '%s' (%s): no device can run it, not even ref%s", t->name,
                         graph_op_name(t->op),
                         t->view_src ? " (its destination storage is not reachable)" : "");
    s->node_slot[pos] = fb;
    if (!why[0]) snprintf(why, sizeof why, "no chosen device supports it");
    return fallback_note(s, pos, fb, "%s", why);
}

/* Offer the nodes from pos on to each chosen device that claims runs
 * (whole-subgraph offload). Returns how many nodes were placed, 0 if no
 * device claimed, -1 on error. */
static int32_t claim_run(sched *s, int32_t pos) {
    int32_t window = s->n_nodes - pos < SCHED_CLAIM_WINDOW ? s->n_nodes - pos : SCHED_CLAIM_WINDOW;
    for (int32_t i = 0; i < s->n_chosen; i++) {
        const tsr_device_api *api = s->slots[i].hd->dev->api;
        if (!TSR_HAS_FIELD(tsr_device_api, api->struct_size, claim_nodes) || !api->claim_nodes) continue;
        /* Only well-formed nodes are offered: stop at the first that is not. */
        int32_t n = 0;
        for (; n < window; n++) {
            graph_node_to_tsr(graph_node_at(s->g, pos + n), &s->run_nodes[n]);
            if (tsr_node_check(&s->run_nodes[n], NULL, 0)) break;
        }
        if (n == 0) return 0;
        int32_t k = api->claim_nodes(s->slots[i].hd->dev, s->run_nodes, n);
        if (k <= 0) continue;
        if (k > n)
            return error_set("device %s: claim_nodes claimed %d of the %d nodes offered", s->slots[i].hd->name,
                             (int)k, (int)n);
        bool writable = true; /* a CPY into storage the device cannot reach stays out */
        for (int32_t j = 0; j < k; j++) {
            graph_tensor *t = graph_node_at(s->g, pos + j);
            if (t->view_src && !slot_can_address(s, i, t->view_src)) writable = false;
        }
        if (!writable) continue;
        for (int32_t j = 0; j < k; j++) s->node_slot[pos + j] = i;
        s->n_claimed += k;
        return k;
    }
    return 0;
}

/* -------------------------------------------------------- splits, copies */

/* Weights uploaded by op offload live in the compute buffer for their
 * whole split: a split takes more of them only while they total at most
 * SCHED_UPLOAD_BUDGET (a larger one gets a split of its own), so the
 * buffer grows by that much, not by every host weight of the graph. */
static int build_splits(sched *s) {
    uint64_t uploaded = 0; /* weight bytes the last split copies in */
    for (int32_t pos = 0; pos < s->n_nodes; pos++) {
        const uint64_t up = s->offload_batch ? node_upload_bytes(s, pos) : 0;
        const bool over = up && uploaded && uploaded + up > SCHED_UPLOAD_BUDGET;
        if (s->n_splits > 0 && s->splits[s->n_splits - 1].slot == s->node_slot[pos] && !over) {
            uploaded += up;
            s->splits[s->n_splits - 1].last = pos;
            continue;
        }
        if (push((void **)&s->splits, &s->n_splits, &s->cap_splits, sizeof *s->splits)) return -1;
        s->splits[s->n_splits - 1] =
            (sched_split){.slot = s->node_slot[pos], .first = pos, .last = pos};
        uploaded = up;
    }
    return 0;
}

static int add_copies(sched *s, int32_t k) {
    sched_split *sp = &s->splits[k];
    sp->copy_begin = s->n_copies;
    for (int32_t pos = sp->first; pos <= sp->last; pos++) {
        graph_tensor *t = graph_node_at(s->g, pos);
        for (int i = 0; i < t->n_src; i++) {
            graph_tensor *src = t->src[i];
            if (!src) continue;
            uint64_t start;
            graph_tensor *r = graph_tensor_storage(src, &start);
            if (slot_can_address(s, sp->slot, r)) continue;
            bool dup = false;
            for (int32_t c = sp->copy_begin; c < s->n_copies; c++)
                if (s->copies[c].tensor == src->index) dup = true;
            if (dup) continue;
            if (push((void **)&s->copies, &s->n_copies, &s->cap_copies, sizeof *s->copies))
                return -1;
            s->copies[s->n_copies - 1] = (sched_copy){.split = k, .tensor = src->index,
                                                      .root = r->index, .start = start,
                                                      .size = graph_tensor_nbytes(src)};
        }
    }
    sp->n_copies = s->n_copies - sp->copy_begin;
    return 0;
}

/* Which slots each split waits for (sched_split.wait_mask). Walks the nodes
 * in order keeping, per storage root, the slot that last wrote it; a split
 * waits for the writers of what it reads (through copies or in place), and
 * for the other slots that read its slot's memory in place since its last
 * split (their reads must end before it reuses that memory). */
static void plan_waits(sched *s) {
    uint32_t readers_of[SCHED_MAX_DEVICES] = {0};
    for (int32_t i = 0; i < s->n_tensors; i++) s->last_writer[i] = -1;
    for (int32_t k = 0; k < s->n_splits; k++) {
        sched_split *sp = &s->splits[k];
        const int32_t me = sp->slot;
        uint32_t wait = readers_of[me];
        readers_of[me] = 0;
        for (int32_t pos = sp->first; pos <= sp->last; pos++) {
            graph_tensor *t = graph_node_at(s->g, pos);
            for (int i = 0; i < t->n_src; i++) {
                if (!t->src[i]) continue;
                graph_tensor *r = graph_tensor_storage(t->src[i], NULL);
                const int32_t w = s->last_writer[r->index];
                if (w >= 0 && w != me) {
                    wait |= 1u << w;
                    /* read in place (no copy): w's memory is busy until we finish */
                    if (slot_can_address(s, me, r)) readers_of[w] |= 1u << me;
                }
            }
            s->last_writer[graph_tensor_storage(t, NULL)->index] = me;
        }
        sp->wait_mask = wait & ~(1u << me);
    }
}

/* ------------------------------------------------------ memory planning */

static void liveness(sched *s) {
    for (int32_t i = 0; i < s->n_tensors; i++) {
        s->last_use[i] = -1;
        s->is_output[i] = false;
        s->in_place[i] = false;
        s->released[i] = false;
        s->plan_offset[i] = UINT64_MAX;
        s->host_offset[i] = UINT64_MAX;
    }
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *t = graph_tensor_at(s->g, i);
        if (t->flags & GRAPH_OUTPUT) s->is_output[graph_tensor_storage(t, NULL)->index] = true;
    }
    for (int32_t pos = 0; pos < s->n_nodes; pos++) {
        graph_tensor *t = graph_node_at(s->g, pos);
        graph_tensor *own = graph_tensor_storage(t, NULL);
        if (s->last_use[own->index] < pos) s->last_use[own->index] = pos;
        for (int i = 0; i < t->n_src; i++)
            if (t->src[i]) s->last_use[graph_tensor_storage(t->src[i], NULL)->index] = pos;
    }
    /* A copy reads its source when its split starts. */
    for (int32_t c = 0; c < s->n_copies; c++) {
        int32_t first = s->splits[s->copies[c].split].first;
        if (s->last_use[s->copies[c].root] < first) s->last_use[s->copies[c].root] = first;
    }
    for (int32_t i = 0; i < s->n_tensors; i++)
        if (s->is_output[i]) s->last_use[i] = s->n_nodes;
}

/* Ops whose element i depends only on element i of src0 (and of a
 * broadcast src1), so dst may take src0's block. */
static bool op_is_elementwise(int32_t op) {
    return op == TSR_OP_ADD || op == TSR_OP_MUL || op == TSR_OP_SCALE || op == TSR_OP_SILU ||
           op == TSR_OP_GELU || op == TSR_OP_GELU_ERF || op == TSR_OP_SWIGLU || op == TSR_OP_SWIGLU_OAI;
}

/* The dying source whose block t can take over, or NULL. */
static graph_tensor *in_place_donor(const sched *s, graph_tensor *t, int32_t pos) {
    if (!op_is_elementwise(t->op) || !t->src[0] || !graph_tensor_is_contiguous(t)) return NULL;
    graph_tensor *a = t->src[0];
    if (a->view_src || !root_is_computed(a) || s->is_output[a->index] || s->in_place[a->index])
        return NULL;
    if (s->last_use[a->index] != pos || s->node_slot[s->node_pos[a->index]] != s->node_slot[pos])
        return NULL;
    if (!graph_tensor_is_contiguous(a) || a->t.dtype != t->t.dtype ||
        graph_tensor_nbytes(a) != graph_tensor_nbytes(t))
        return NULL;
    /* Another source viewing a's bytes at other indices would read what
     * this node already overwrote. */
    for (int i = 1; i < t->n_src; i++)
        if (t->src[i] && t->src[i] != a && graph_tensor_storage(t->src[i], NULL) == a) return NULL;
    return a;
}

static int free_root(sched *s, int32_t idx) {
    graph_tensor *r = graph_tensor_at(s->g, idx);
    if (s->in_place[idx] || s->released[idx] || s->plan_offset[idx] == UINT64_MAX) return 0;
    s->released[idx] = true;
    sched_slot *sl = &s->slots[s->node_slot[s->node_pos[idx]]];
    if (memplan_free(&sl->plan, s->plan_offset[idx], graph_tensor_nbytes(r)))
        return error_set("sched: out of memory planning buffers");
    return 0;
}

static int plan_memory(sched *s) {
    for (int32_t i = 0; i < s->n_slots; i++) memplan_reset(&s->slots[i].plan);
    s->intermediate_bytes = 0;
    /* Roots dying at each position, found by one pass over last_use. */
    for (int32_t k = 0; k < s->n_splits; k++) {
        sched_split *sp = &s->splits[k];
        sched_slot *sl = &s->slots[sp->slot];
        for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++) {
            s->copies[c].dst_offset = memplan_alloc(&sl->plan, s->copies[c].size);
            s->intermediate_bytes += memplan_aligned(s->copies[c].size);
        }
        for (int32_t pos = sp->first; pos <= sp->last; pos++) {
            graph_tensor *t = graph_node_at(s->g, pos);
            if (!t->view_src) {
                graph_tensor *donor = in_place_donor(s, t, pos);
                if (donor) {
                    s->plan_offset[t->index] = s->plan_offset[donor->index];
                    s->in_place[donor->index] = true;
                } else {
                    s->plan_offset[t->index] = memplan_alloc(&sl->plan, graph_tensor_nbytes(t));
                }
                s->intermediate_bytes += memplan_aligned(graph_tensor_nbytes(t));
            }
            /* Free what dies here: t's sources, and t itself if unread. */
            for (int i = 0; i <= t->n_src; i++) {
                graph_tensor *x = i < t->n_src ? t->src[i] : t;
                if (!x) continue;
                graph_tensor *r = graph_tensor_storage(x, NULL);
                if (!root_is_computed(r) || s->last_use[r->index] != pos) continue;
                bool seen = false; /* the same root twice among the sources */
                for (int j = 0; j < i; j++)
                    if (t->src[j] && graph_tensor_storage(t->src[j], NULL) == r) seen = true;
                if (!seen && free_root(s, r->index)) return -1;
            }
        }
        for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++)
            if (memplan_free(&sl->plan, s->copies[c].dst_offset, s->copies[c].size))
                return error_set("sched: out of memory planning buffers");
        /* Roots whose last reader was a copy at this split's start. */
        for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++) {
            graph_tensor *r = graph_tensor_at(s->g, s->copies[c].root);
            if (root_is_computed(r) && s->last_use[r->index] == sp->first &&
                s->node_slot[s->node_pos[r->index]] != sp->slot && free_root(s, r->index))
                return -1;
        }
    }
    return 0;
}

/* Make sure each slot's buffer holds its plan; grow when needed. */
static int buffers_grow(sched *s) {
    for (int32_t i = 0; i < s->n_slots; i++) {
        sched_slot *sl = &s->slots[i];
        if (sl->plan.peak == 0 || sl->plan.peak <= sl->buf_size) continue;
        const tsr_device_api *api = sl->hd->dev->api;
        const uint64_t limit = host_device_max_alloc(sl->hd);
        if (limit && sl->plan.peak > limit)
            return error_set("device %s: the graph needs a %llu-byte compute buffer, above the device's "
                             "largest allocation (%llu bytes); use a smaller batch (-b)",
                             sl->hd->name, (unsigned long long)sl->plan.peak, (unsigned long long)limit);
        if (sl->buf && api->buffer_free) api->buffer_free(sl->hd->dev, sl->buf);
        sl->buf = NULL;
        sl->buf_size = 0;
        sl->buf_host = NULL;
        tsr_status st = api->buffer_alloc(sl->hd->dev, sl->plan.peak, &sl->buf);
        if (st != TSR_OK || !sl->buf) {
            sl->buf = NULL;
            return error_set("device %s: cannot allocate a %llu-byte compute buffer (status %d)",
                             sl->hd->name, (unsigned long long)sl->plan.peak, (int)st);
        }
        sl->buf_size = sl->plan.peak;
        if (sl->host_visible) {
            sl->buf_host = api->buffer_host_ptr(sl->hd->dev, sl->buf);
            if (!sl->buf_host) sl->host_visible = false;
        }
    }
    return 0;
}

/* Host arena: unbound leaves (inputs) and outputs computed where the host
 * cannot see them. */
static bool needs_host_arena(const sched *s, const graph_tensor *r) {
    if (r->view_src) return false;
    if (!root_is_computed(r)) return !root_is_bound(r);
    return s->is_output[r->index] && !s->slots[s->node_slot[s->node_pos[r->index]]].host_visible;
}

static int host_arena_plan(sched *s) {
    uint64_t used = 0;
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *r = graph_tensor_at(s->g, i);
        if (!needs_host_arena(s, r)) continue;
        s->host_offset[i] = used;
        used += (graph_tensor_nbytes(r) + SCHED_HOST_ALIGN - 1) / SCHED_HOST_ALIGN * SCHED_HOST_ALIGN;
    }
    if (used > s->host_arena_size) {
        free(s->host_arena);
        s->host_arena_size = 0;
        s->host_arena = aligned_alloc(SCHED_HOST_ALIGN, used);
        if (!s->host_arena)
            return error_set("sched: out of memory for %llu bytes of inputs and outputs",
                             (unsigned long long)used);
        s->host_arena_size = used;
    }
    s->host_arena_used = used;
    return 0;
}

/* Set t's model-facing location from its root's (loc[] filled). */
static void tensor_locate(sched *s, graph_tensor *t) {
    uint64_t off;
    graph_tensor *r = graph_tensor_storage(t, &off);
    if (!r->view_src && root_is_bound(r) && t == r) return; /* the caller's binding */
    const sched_loc *L = &s->loc[r->index];
    if (root_is_computed(r) && s->host_offset[r->index] != UINT64_MAX) {
        /* An output the host cannot see: read back after compute. */
        t->t.buffer = NULL;
        t->t.offset = 0;
        t->t.data = s->host_arena + s->host_offset[r->index] + off;
    } else {
        t->t.buffer = L->buffer;
        t->t.offset = L->buffer ? L->offset + off : 0;
        t->t.data = L->host ? L->host + off : NULL;
    }
    t->device = root_is_computed(r) ? s->slots[s->node_slot[s->node_pos[r->index]]].hd->index : t->home_device;
}

/* Fill loc[] for every root and the model-facing location of every tensor. */
static void set_locations(sched *s) {
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *r = graph_tensor_at(s->g, i);
        sched_loc *L = &s->loc[i];
        memset(L, 0, sizeof *L);
        if (r->view_src) continue;
        if (root_is_computed(r)) {
            sched_slot *sl = &s->slots[s->node_slot[s->node_pos[i]]];
            L->owner = sl->hd;
            L->buffer = sl->buf;
            L->offset = s->plan_offset[i];
            L->host = sl->buf_host ? sl->buf_host + L->offset : NULL;
        } else if (s->host_offset[i] != UINT64_MAX) {
            L->host = s->host_arena + s->host_offset[i];
        } else {
            L->owner = r->t.buffer ? host_device_get(r->home_device) : NULL;
            L->buffer = r->t.buffer;
            L->offset = r->t.offset;
            L->host = r->t.data;
        }
    }
    s->n_moving_tensors = 0;
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *t = graph_tensor_at(s->g, i);
        tensor_locate(s, t);
        if (sched_is_bound_view(t)) s->moving_tensors[s->n_moving_tensors++] = i;
    }
    for (int32_t pos = 0; pos < s->n_nodes; pos++)
        graph_node_at(s->g, pos)->device = s->slots[s->node_slot[pos]].hd->index;
}

static int check_leaves(sched *s) {
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *t = graph_tensor_at(s->g, i);
        if (t->view_src || !root_is_bound(t)) continue;
        if (!t->t.buffer && !t->t.data)
            return error_set("sched: %s '%s' is not bound to memory (graph_tensor_bind)",
                             (t->flags & GRAPH_WEIGHT) ? "weight"
                             : (t->flags & GRAPH_PERSISTENT) ? "persistent tensor" : "tensor",
                             t->name);
        if (!t->t.buffer) continue;
        host_device *owner = host_device_get(t->home_device);
        if (!owner)
            return error_set("sched: tensor '%s' is bound to a buffer of device index %d, which "
                             "does not exist",
                             t->name, t->home_device);
    }
    return 0;
}

int sched_alloc(sched *s, graph *g) {
    if (!s || !g) return error_set("sched_alloc: %s is NULL", s ? "graph" : "scheduler");
    if (graph_check(g)) return error_wrap("sched_alloc");
    s->g = NULL;
    s->n_splits = s->n_copies = s->n_fallbacks = s->n_claimed = 0;
    s->n_nodes = graph_n_nodes(g);
    s->n_tensors = graph_n_tensors(g);
    if (arrays_reserve(s, s->n_nodes > 0 ? s->n_nodes : 1, s->n_tensors > 0 ? s->n_tensors : 1))
        return -1;
    s->g = g;
    for (int32_t i = 0; i < s->n_tensors; i++) s->node_pos[i] = -1;
    for (int32_t pos = 0; pos < s->n_nodes; pos++) s->node_pos[graph_node_at(g, pos)->index] = pos;
    if (check_leaves(s)) goto fail;
    for (int32_t pos = 0; pos < s->n_nodes;) {
        int32_t k = claim_run(s, pos);
        if (k < 0) goto fail;
        if (k > 0) {
            pos += k;
            continue;
        }
        if (place_node(s, pos)) goto fail;
        pos++;
    }
    if (build_splits(s)) goto fail;
    for (int32_t k = 0; k < s->n_splits; k++)
        if (add_copies(s, k)) goto fail;
    plan_waits(s);
    liveness(s);
    if (plan_memory(s) || buffers_grow(s) || host_arena_plan(s)) goto fail;
    set_locations(s);
    sched_nodes_build(s);
    return 0;
fail:
    s->g = NULL;
    return -1;
}

bool sched_holds(const sched *s, const graph *g) { return s && g && s->g == g; }

void sched_views_moved(sched *s) {
    if (!s->g) return;
    for (int32_t c = 0; c < s->n_copies; c++)
        graph_tensor_storage(graph_tensor_at(s->g, s->copies[c].tensor), &s->copies[c].start);
    /* Only views into bound storage moved: roots, plan and placement hold. */
    for (int32_t i = 0; i < s->n_moving_tensors; i++) tensor_locate(s, graph_tensor_at(s->g, s->moving_tensors[i]));
    sched_nodes_patch(s);
}

void sched_get_stats(const sched *s, sched_stats *out) {
    memset(out, 0, sizeof *out);
    if (!s->g) return;
    out->n_splits = s->n_splits;
    out->n_copies = s->n_copies;
    out->n_fallbacks = s->n_fallbacks;
    for (int32_t i = 0; i < s->n_slots; i++) out->peak_bytes += s->slots[i].plan.peak;
    out->intermediate_bytes = s->intermediate_bytes;
    out->n_claimed = s->n_claimed;
}

host_device *sched_node_device(const sched *s, int32_t node_index) {
    if (!s->g || node_index < 0 || node_index >= s->n_nodes) return NULL;
    return s->slots[s->node_slot[node_index]].hd;
}
