/*
 * sched profile — what the devices did: submissions and replays from the
 * queues' ABI 1.3 stats, and with profiling on, per op type the device
 * time (timestamp queries in the plugin) next to the bytes each node reads
 * and writes and its arithmetic, counted here from the node shapes.
 */
#include <string.h>

#include "sched/sched_internal.h"

bool sched_queue_stats(tsr_queue *q, tsr_queue_stats *out) {
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (!q || !TSR_HAS_FIELD(tsr_queue_api, q->api->struct_size, get_stats) || !q->api->get_stats) return false;
    q->api->get_stats(q, out);
    return true;
}

bool sched_slot_profile(sched *s, int32_t slot, bool on) {
    sched_slot *sl = &s->slots[slot];
    tsr_queue *q = sl->queue;
    sl->profiled = false;
    if (!q || !TSR_HAS_FIELD(tsr_queue_api, q->api->struct_size, set_profiling) || !q->api->set_profiling)
        return false;
    if (q->api->set_profiling(q, on ? 1 : 0) != TSR_OK || !on) return false;
    sl->profiled = sched_queue_stats(q, &sl->prof_base);
    return sl->profiled;
}

int sched_set_profiling(sched *s, bool on) {
    s->profiling = on;
    memset(&s->profile, 0, sizeof s->profile);
    int untimed = 0;
    for (int32_t i = 0; i < s->n_slots; i++) {
        /* a new queue starts profiling in sched_slot_queue */
        const bool timed = s->slots[i].queue ? sched_slot_profile(s, i, on)
                                             : (sched_slot_queue(s, i) && s->slots[i].profiled);
        if (on && !timed) untimed++;
    }
    return untimed;
}

static uint64_t tensor_bytes(const tsr_tensor *t) {
    const int64_t bs = tsr_dtype_block_size(t->dtype);
    if (bs <= 0) return 0;
    return (uint64_t)(tsr_tensor_nelements(t) / bs * tsr_dtype_block_bytes(t->dtype));
}

/* Floating-point operations of one node: 2 per multiply-add of the
 * products, about one per element elsewhere (a few for norms, softmax). */
static double node_flops(const tsr_node *n) {
    const tsr_tensor *d = n->dst;
    const double out = (double)tsr_tensor_nelements(d);
    switch (n->op) {
    case TSR_OP_MUL_MAT:
    case TSR_OP_MUL_MAT_ID: return 2.0 * out * (double)n->src[0]->ne[0];
    case TSR_OP_FLASH_ATTN: /* q.k and p.v over every key, per query head */
        return 4.0 * (double)n->src[0]->ne[0] * (double)n->src[1]->ne[1] * (double)n->src[0]->ne[1] *
               (double)n->src[0]->ne[2];
    case TSR_OP_DELTA_NET: /* decay, S^T k, S += k u^T, S^T q: 7 per state element and token */
        return 7.0 * (double)n->src[0]->ne[0] * (double)n->src[0]->ne[1] * (double)n->src[0]->ne[2] *
               (double)n->src[1]->ne[1] * (double)n->src[1]->ne[2];
    case TSR_OP_RMS_NORM: case TSR_OP_NORM: case TSR_OP_SOFT_MAX: return 4.0 * out;
    case TSR_OP_ROPE: return 6.0 * out;
    case TSR_OP_GET_ROWS: case TSR_OP_CPY: case TSR_OP_CONCAT: case TSR_OP_NONE: return 0.0;
    default: return out;
    }
}

/* Bytes a node moves: its sources once each (a product's activations may
 * be read more than once; this is the floor a kernel can reach) and dst. */
static uint64_t node_bytes(const tsr_node *n) {
    uint64_t b = tensor_bytes(n->dst);
    for (int i = 0; i < n->n_src && i < TSR_MAX_SRC; i++) {
        if (!n->src[i]) continue;
        if (n->op == TSR_OP_GET_ROWS && i == 0) { /* only the rows looked up */
            const int64_t rows = n->src[0]->ne[1] * n->src[0]->ne[2] * n->src[0]->ne[3];
            b += rows > 0 ? tensor_bytes(n->src[0]) / (uint64_t)rows * (uint64_t)tsr_tensor_nelements(n->src[1]) : 0;
        } else if (n->op == TSR_OP_MUL_MAT_ID && i == 0) { /* at most one expert per slot */
            const int64_t E = n->src[0]->ne[2], slots = tsr_tensor_nelements(n->src[2]);
            b += tensor_bytes(n->src[0]) / (uint64_t)E * (uint64_t)(slots < E ? slots : E);
        } else {
            b += tensor_bytes(n->src[i]);
        }
    }
    return b;
}

void sched_profile_split(sched *s, int32_t k) {
    const sched_split *sp = &s->splits[k];
    const bool timed = s->slots[sp->slot].profiled;
    for (int32_t pos = sp->first; pos <= sp->last; pos++) {
        const tsr_node *n = &s->run_nodes[pos];
        if (n->op < 0 || n->op >= TSR_STATS_OPS) continue;
        s->profile.nodes[n->op]++;
        s->profile.bytes[n->op] += node_bytes(n);
        s->profile.flops[n->op] += node_flops(n);
        if (!timed) s->profile.untimed[n->op]++;
    }
}

void sched_get_profile(const sched *s, sched_profile *out) {
    *out = s->profile;
    for (int32_t i = 0; i < s->n_slots; i++) {
        const sched_slot *sl = &s->slots[i];
        tsr_queue_stats now;
        if (!sl->profiled || !sched_queue_stats(sl->queue, &now)) continue;
        for (int op = 0; op < TSR_STATS_OPS; op++) out->ns[op] += now.op_ns[op] - sl->prof_base.op_ns[op];
    }
}

void sched_get_counters(const sched *s, sched_counters *out) {
    *out = s->counters;
    out->n_submits = out->n_replayed = 0;
    for (int32_t i = 0; i < s->n_slots; i++) {
        tsr_queue_stats st;
        if (sched_queue_stats(s->slots[i].queue, &st)) {
            out->n_submits += st.n_submits;
            out->n_replayed += st.n_replayed;
        } else {
            out->n_submits += s->slots[i].n_computes;
        }
    }
}
