/* cpu_steps — the plan of a node list for the thread pool; see cpu_steps.h. */
#include "cpu_steps.h"

#include <stdlib.h>
#include <string.h>

/* Below this estimated work (about CPU cycles) a node runs on thread 0
 * alone: waking the other threads and meeting them costs about that much. */
enum { SOLO_CYCLES = 6000 };
/* A product's activation conversion is solo up to this many values (one
 * token's vector; a prompt's are shared). */
enum { SOLO_PREPARE_VALUES = 16384 };
/* A whole product is solo up to this many multiply-adds (attention over a
 * few cells). */
enum { SOLO_MM_MACS = 24576 };

/* Rough cycles of an op per element, vectorized. */
static int op_weight(int32_t op) {
    switch (op) {
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM: return 2;
    case TSR_OP_ROPE: return 4;
    case TSR_OP_SOFT_MAX:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF:
    case TSR_OP_SWIGLU:
    case TSR_OP_SWIGLU_OAI: return 6;
    default: return 1;
    }
}

/* Whether thread 0 may run the node alone (the others go on to the next
 * barrier): small ops whose kernels never wait for the other threads.
 * FLASH_ATTN stays shared (the default below): its work is large, and its
 * kernel meets the pool at exec_barrier, which waits for all ex->nth
 * threads; only its one-thread path (nth 1: no cell chunks) skips those
 * barriers, and a barrier that thread 0 reaches alone would hang. */
static int op_solo(const tsr_node *node) {
    switch (node->op) {
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF:
    case TSR_OP_SWIGLU:
    case TSR_OP_SWIGLU_OAI:
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
    case TSR_OP_ROPE:
    case TSR_OP_SOFT_MAX:
    case TSR_OP_GET_ROWS:
    case TSR_OP_CPY:
    case TSR_OP_CONCAT:
    case TSR_OP_ARGMAX:
    case TSR_OP_DIV:
    case TSR_OP_TOP_K:
    case TSR_OP_SUM_ROWS: break;
    default: return 0;
    }
    const tsr_tensor *a = node->src[0];
    int64_t n = tsr_tensor_nelements(node->dst);
    if (a && tsr_tensor_nelements(a) > n) n = tsr_tensor_nelements(a);
    return n * op_weight(node->op) < SOLO_CYCLES;
}

static int64_t mm_macs(const tsr_node *node) { return node->src[0]->ne[0] * tsr_tensor_nelements(node->dst); }

/* [lo, hi): the bytes a tensor spans. */
typedef struct span {
    const uint8_t *lo, *hi;
} span;

static span span_of(const tsr_tensor *t) {
    const uint8_t *p = tensor_ptr(t);
    const int64_t bs = tsr_dtype_block_size(t->dtype);
    uint64_t n = (uint64_t)((t->ne[0] + (bs > 0 ? bs : 1) - 1) / (bs > 0 ? bs : 1)) * t->nb[0];
    for (int i = 1; i < TSR_MAX_DIMS; i++) n += (uint64_t)(t->ne[i] - 1) * t->nb[i];
    return (span){p, p + n};
}

static int spans_meet(span a, span b) { return a.lo < b.hi && b.lo < a.hi; }

/* Whether product b may run right after the products a[0..n) that ran since
 * the last barrier, without one: what b writes, none of them reads or
 * writes; what b reads, none of them writes. (Their activations are b's:
 * that memory is only read.) */
static int mm_independent(const tsr_node *b, const cpu_step *since, int32_t n) {
    const span bd = span_of(b->dst), bw = span_of(b->src[0]);
    for (int32_t i = 0; i < n; i++) {
        const tsr_node *a = since[i].node;
        const span ad = span_of(a->dst), aw = span_of(a->src[0]);
        if (spans_meet(bd, ad) || spans_meet(bd, aw) || spans_meet(bw, ad)) return 0;
    }
    return 1;
}

static int plan_push(cpu_plan *p, const tsr_node *node, cpu_step_kind kind, int solo) {
    if (p->n_steps == p->cap) {
        int32_t cap = p->cap ? 2 * p->cap : 256;
        cpu_step *s = realloc(p->steps, (size_t)cap * sizeof *s);
        if (!s) return -1;
        p->steps = s;
        cpu_step_counter *c = aligned_alloc(64, (size_t)cap * sizeof *c);
        if (!c) return -1;
        free(p->counters);
        p->counters = c;
        p->cap = cap;
    }
    cpu_step *st = &p->steps[p->n_steps];
    const cpu_step *prev = p->n_steps > 0 ? st - 1 : NULL;
    st->node = node;
    st->kind = (uint8_t)kind;
    st->solo = (uint8_t)(solo != 0);
    st->xw = NULL;
    /* meet before a shared step and after one; solo runs go on alone */
    st->barrier = prev && !(prev->solo && st->solo);
    p->n_steps++;
    return 0;
}

int cpu_plan_build(cpu_plan *p, const cpu_kernels *k, const tsr_node *nodes, int32_t n, int nth, int plain) {
    if (plain) nth = 1; /* as one thread would: nothing solo, nothing shared */
    p->n_steps = p->n_barriers = p->n_solo = 0;
    int32_t since_barrier = 0; /* first step after the last barrier */
    for (int32_t i = 0; i < n; i++) {
        const tsr_node *node = &nodes[i];
        if (node->op == TSR_OP_NONE) continue;
        const int32_t before = p->n_steps;
        if (node->op != TSR_OP_MUL_MAT || !matmul_phased(k, node)) {
            if (plan_push(p, node, STEP_OP, nth > 1 && op_solo(node))) return -1;
        } else if (nth > 1 && mm_macs(node) <= SOLO_MM_MACS) {
            if (matmul_has_prepare(node) && plan_push(p, node, STEP_MM_PREPARE, 1)) return -1;
            if (plan_push(p, node, STEP_MM_RUN, 1)) return -1;
        } else {
            const cpu_step *prev = p->n_steps > 0 ? &p->steps[p->n_steps - 1] : NULL;
            const int share = nth > 1 && prev && prev->kind == STEP_MM_RUN && !prev->solo &&
                              matmul_same_activations(k, prev->node, node) &&
                              mm_independent(node, &p->steps[since_barrier], p->n_steps - since_barrier);
            if (share) {
                if (plan_push(p, node, STEP_MM_RUN, 0)) return -1;
                p->steps[p->n_steps - 1].barrier = 0;
            } else {
                if (matmul_has_prepare(node) &&
                    plan_push(p, node, STEP_MM_PREPARE, nth > 1 && matmul_prepare_elements(node) <= SOLO_PREPARE_VALUES))
                    return -1;
                if (plan_push(p, node, STEP_MM_RUN, 0)) return -1;
            }
        }
        for (int32_t s = before; s < p->n_steps; s++) {
            if (p->steps[s].barrier) {
                since_barrier = s;
                p->n_barriers++;
            }
            p->n_solo += p->steps[s].solo;
        }
    }
    if (p->n_steps > 0) memset(p->counters, 0, (size_t)p->n_steps * sizeof *p->counters);
    return 0;
}

void cpu_plan_free(cpu_plan *p) {
    free(p->steps);
    free(p->counters);
    memset(p, 0, sizeof *p);
}
