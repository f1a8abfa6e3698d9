/*
 * sched run — executes the plan of the last sched_alloc: per split, copy in
 * what the device cannot address, hand it the split's nodes as it must see
 * them, then read back outputs the host cannot see. And sched_explain.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"
#include "host/host_guard.h"
#include "sched/sched_internal.h"
#include "util/error.h"

void sched_present(const sched *s, graph_tensor *t, int32_t slot, int32_t split,
                   tsr_tensor *out) {
    *out = t->t;
    const sched_slot *sl = &s->slots[slot];
    const sched_split *sp = &s->splits[split];
    for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++) {
        if (s->copies[c].tensor != t->index) continue;
        out->buffer = sl->buf;
        out->offset = s->copies[c].dst_offset;
        out->data = sl->buf_host ? sl->buf_host + out->offset : NULL;
        return;
    }
    uint64_t off;
    graph_tensor *r = graph_tensor_storage(t, &off);
    const sched_loc *L = &s->loc[r->index];
    if (L->owner && L->owner == sl->hd) {
        out->buffer = L->buffer;
        out->offset = L->offset + off;
        out->data = L->host ? L->host + off : NULL;
    } else {
        /* Host memory (plain or a host-visible buffer): placement made sure
         * this device reads it. */
        out->buffer = NULL;
        out->offset = 0;
        out->data = L->host ? L->host + off : NULL;
    }
    /* model memory, constant while the model lives (TSR_TENSOR_WEIGHT) */
    if ((r->flags & GRAPH_WEIGHT) && r->op == TSR_OP_NONE) out->flags |= TSR_TENSOR_WEIGHT;
}

static int staging_reserve(sched *s, uint64_t size) {
    if (size <= s->staging_size) return 0;
    unsigned char *p = realloc(s->staging, size);
    if (!p) return error_set("sched: out of memory for a %llu-byte copy", (unsigned long long)size);
    s->staging = p;
    s->staging_size = size;
    return 0;
}

static int run_copy(sched *s, const sched_copy *c, int32_t slot) {
    sched_slot *sl = &s->slots[slot];
    const sched_loc *L = &s->loc[c->root];
    const unsigned char *src = L->host ? L->host + c->start : NULL;
    const graph_tensor *t = graph_tensor_at(s->g, c->tensor);
    if (!src) {
        /* In a buffer the host cannot see: read it through its device. */
        if (!L->owner || !L->buffer)
            return error_set("sched: tensor '%s' has no memory to copy from", t->name);
        tsr_queue *q = sched_device_queue(s, L->owner);
        if (!q || staging_reserve(s, c->size)) return -1;
        tsr_status st = q->api->synchronize(q);
        if (st == TSR_OK) st = q->api->read(q, L->buffer, L->offset + c->start, s->staging, c->size);
        if (st == TSR_OK) st = q->api->synchronize(q);
        s->counters.n_waits += 2;
        s->counters.n_reads++;
        s->counters.read_bytes += c->size;
        if (st != TSR_OK)
            return error_set("device %s: reading '%s' (%llu bytes) failed (status %d)",
                             L->owner->name, t->name, (unsigned long long)c->size, (int)st);
        src = s->staging;
    }
    s->counters.n_uploads++;
    s->counters.upload_bytes += c->size;
    if (sl->buf_host) {
        memcpy(sl->buf_host + c->dst_offset, src, c->size);
        return 0;
    }
    tsr_queue *q = sched_slot_queue(s, slot);
    if (!q) return -1;
    tsr_status st = q->api->write(q, sl->buf, c->dst_offset, src, c->size);
    /* The source may be the staging buffer, reused by the next copy. */
    if (st == TSR_OK && src == s->staging) {
        st = q->api->synchronize(q);
        s->counters.n_waits++;
    }
    if (st != TSR_OK)
        return error_set("device %s: writing '%s' (%llu bytes) failed (status %d)", sl->hd->name,
                         t->name, (unsigned long long)c->size, (int)st);
    return 0;
}

bool sched_is_bound_view(const graph_tensor *t) {
    if (!t || !t->view_src) return false;
    const graph_tensor *r = graph_tensor_storage((graph_tensor *)t, NULL);
    return r->op == TSR_OP_NONE && (r->flags & (GRAPH_WEIGHT | GRAPH_PERSISTENT | GRAPH_BOUND)) != 0;
}

/* Node pos of split k as the split's device sees it. */
static void node_present(sched *s, int32_t k, int32_t pos) {
    const sched_split *sp = &s->splits[k];
    graph_tensor *t = graph_node_at(s->g, pos);
    tsr_node *node = &s->run_nodes[pos];
    graph_node_to_tsr(t, node);
    tsr_tensor *mine = &s->run_tensors[(size_t)pos * (1 + TSR_MAX_SRC)];
    sched_present(s, t, sp->slot, k, &mine[0]);
    node->dst = &mine[0];
    for (int i = 0; i < t->n_src; i++) {
        if (!t->src[i]) continue;
        sched_present(s, t->src[i], sp->slot, k, &mine[1 + i]);
        node->src[i] = &mine[1 + i];
    }
}

static bool node_moves(const graph_tensor *t) {
    if (sched_is_bound_view(t)) return true;
    for (int i = 0; i < t->n_src; i++)
        if (sched_is_bound_view(t->src[i])) return true;
    return false;
}

void sched_nodes_build(sched *s) {
    s->n_moving_nodes = 0;
    for (int32_t k = 0; k < s->n_splits; k++) {
        for (int32_t pos = s->splits[k].first; pos <= s->splits[k].last; pos++) {
            node_present(s, k, pos);
            if (node_moves(graph_node_at(s->g, pos))) s->moving_nodes[s->n_moving_nodes++] = pos;
        }
    }
}

void sched_nodes_patch(sched *s) {
    int32_t k = 0;
    for (int32_t i = 0; i < s->n_moving_nodes; i++) {
        const int32_t pos = s->moving_nodes[i];
        while (s->splits[k].last < pos) k++; /* the list is in node order */
        node_present(s, k, pos);
    }
}

static int run_split(sched *s, int32_t k) {
    const sched_split *sp = &s->splits[k];
    sched_slot *sl = &s->slots[sp->slot];
    for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++)
        if (run_copy(s, &s->copies[c], sp->slot)) return -1;
    const int32_t n = sp->last - sp->first + 1;
    tsr_queue *q = sched_slot_queue(s, sp->slot);
    if (!q) return -1;
    /* ABI 1.1: this queue's own thread count (1.0 plugins read the host's). */
    const int32_t threads = s->n_threads > 0 ? s->n_threads : host_services()->n_threads;
    if (TSR_HAS_FIELD(tsr_queue_api, q->api->struct_size, set_n_threads) && q->api->set_n_threads &&
        sl->queue_threads != threads) {
        q->api->set_n_threads(q, threads);
        sl->queue_threads = threads;
    }
    const graph_tensor *first = graph_node_at(s->g, sp->first);
    host_guard_enter(sl->hd->plugin->name, sl->hd->plugin_path, "compute", sl->hd->name, first->name);
    tsr_status st = q->api->compute(q, &s->run_nodes[sp->first], n);
    host_guard_leave();
    s->counters.n_computes++;
    sl->n_computes++;
    if (s->profiling) sched_profile_split(s, k);
    if (st == TSR_ERR_ABORTED) return error_set("aborted");
    if (st != TSR_OK) {
        return error_set("device %s: compute failed (status %d) in split %d (%d nodes from '%s' %s)",
                         sl->hd->name, (int)st, k, n, first->name, graph_op_name(first->op));
    }
    return 0;
}

static int sync_all(sched *s) {
    for (int32_t i = 0; i < s->n_slots; i++) {
        tsr_queue *q = s->slots[i].queue;
        if (!q) continue;
        tsr_status st = q->api->synchronize(q);
        s->counters.n_waits++;
        if (st == TSR_ERR_ABORTED) return error_set("aborted");
        if (st != TSR_OK)
            return error_set("device %s: synchronize failed (status %d)", s->slots[i].hd->name,
                             (int)st);
    }
    return 0;
}

static int read_outputs(sched *s) {
    for (int32_t i = 0; i < s->n_tensors; i++) {
        graph_tensor *r = graph_tensor_at(s->g, i);
        if (r->op == TSR_OP_NONE || r->view_src || s->host_offset[i] == UINT64_MAX) continue;
        const sched_loc *L = &s->loc[i];
        tsr_queue *q = sched_device_queue(s, L->owner);
        if (!q) return -1;
        uint64_t size = graph_tensor_nbytes(r);
        tsr_status st = q->api->read(q, L->buffer, L->offset, s->host_arena + s->host_offset[i], size);
        if (st == TSR_OK) st = q->api->synchronize(q);
        s->counters.n_reads++;
        s->counters.read_bytes += size;
        s->counters.n_waits++;
        if (st != TSR_OK)
            return error_set("device %s: reading output '%s' failed (status %d)", L->owner->name,
                             r->name, (int)st);
    }
    return 0;
}

/* Wait for the slots in mask (the devices split k depends on). */
static int sync_some(sched *s, uint32_t mask) {
    for (int32_t i = 0; i < s->n_slots; i++) {
        if (!(mask & (1u << i)) || !s->slots[i].queue) continue;
        tsr_queue *q = s->slots[i].queue;
        tsr_status st = q->api->synchronize(q);
        s->counters.n_waits++;
        if (st == TSR_ERR_ABORTED) return error_set("aborted");
        if (st != TSR_OK)
            return error_set("device %s: synchronize failed (status %d)", s->slots[i].hd->name, (int)st);
    }
    return 0;
}

int sched_compute(sched *s, graph *g) {
    if (!s || !g) return error_set("sched_compute: %s is NULL", s ? "graph" : "scheduler");
    if (s->g != g) return error_set("sched_compute: graph was not allocated by sched_alloc");
    s->counters.n_runs++;
    for (int32_t k = 0; k < s->n_splits; k++) {
        if (host_abort_requested()) return error_set("aborted");
        /* Wait only for the devices this split reads from (or that read its
         * memory); the others keep working. */
        if (sync_some(s, s->splits[k].wait_mask)) return -1;
        if (run_split(s, k)) return -1;
    }
    if (sync_all(s)) return -1;
    return read_outputs(s);
}

/* ------------------------------------------------------------- explain */

static void print_bytes(FILE *out, uint64_t n) {
    if (n >= (1u << 20))
        fprintf(out, "%.2f MiB", (double)n / (1 << 20));
    else if (n >= 1024)
        fprintf(out, "%.2f KiB", (double)n / 1024);
    else
        fprintf(out, "%llu B", (unsigned long long)n);
}

static const char *where_name(const sched *s, int32_t root) {
    const sched_loc *L = &s->loc[root];
    return L->owner ? L->owner->name : "host";
}

void sched_explain(const sched *s, FILE *out) {
    if (!s->g) {
        fprintf(out, "scheduler: no graph allocated\n");
        return;
    }
    fprintf(out, "devices:");
    for (int32_t i = 0; i < s->n_slots; i++)
        fprintf(out, " %s%s", s->slots[i].hd->name, s->slots[i].fallback ? " (fallback)" : "");
    fprintf(out, "\n%d nodes, %d splits, %d copies, %d fallbacks", s->n_nodes, s->n_splits,
            s->n_copies, s->n_fallbacks);
    if (s->n_claimed) fprintf(out, ", %d nodes claimed as runs (whole-subgraph offload)", s->n_claimed);
    fputc('\n', out);
    for (int32_t k = 0; k < s->n_splits; k++) {
        const sched_split *sp = &s->splits[k];
        fprintf(out, "split %d: %s, nodes %d..%d (%d: '%s' .. '%s')", k,
                s->slots[sp->slot].hd->name, sp->first, sp->last, sp->last - sp->first + 1,
                graph_node_at(s->g, sp->first)->name, graph_node_at(s->g, sp->last)->name);
        if (sp->wait_mask) {
            fprintf(out, ", waits for");
            for (int32_t i = 0; i < s->n_slots; i++)
                if (sp->wait_mask & (1u << i)) fprintf(out, " %s", s->slots[i].hd->name);
        }
        fputc('\n', out);
        for (int32_t c = sp->copy_begin; c < sp->copy_begin + sp->n_copies; c++) {
            const sched_copy *cp = &s->copies[c];
            fprintf(out, "  copy '%s' %s -> %s, ", graph_tensor_at(s->g, cp->tensor)->name,
                    where_name(s, cp->root), s->slots[sp->slot].hd->name);
            print_bytes(out, cp->size);
            fputc('\n', out);
        }
    }
    for (int32_t f = 0; f < s->n_fallbacks; f++) {
        const sched_fallback *fb = &s->fallbacks[f];
        const graph_tensor *t = graph_node_at(s->g, fb->node);
        fprintf(out, "fallback: %s '%s' -> %s: %s\n", graph_op_name(t->op), t->name,
                s->slots[fb->slot].hd->name, fb->reason);
    }
    uint64_t total = 0;
    fprintf(out, "compute buffers:");
    for (int32_t i = 0; i < s->n_slots; i++) {
        fprintf(out, " %s ", s->slots[i].hd->name);
        print_bytes(out, s->slots[i].plan.peak);
        total += s->slots[i].plan.peak;
    }
    fprintf(out, "; peak ");
    print_bytes(out, total);
    fprintf(out, " (");
    print_bytes(out, s->intermediate_bytes);
    fprintf(out, " without reuse)\n");
}

uint64_t sched_buffer_bytes(const sched *s, const host_device *hd) {
    for (int32_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].hd == hd) return s->slots[i].buf ? s->slots[i].buf_size : 0;
    return 0;
}

uint64_t sched_host_bytes(const sched *s) { return s->host_arena_size + s->staging_size; }
