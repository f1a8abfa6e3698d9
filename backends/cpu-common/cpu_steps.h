/*
 * cpu_steps — how the CPU plugins' threads go through a node list: which
 * nodes they share, which ones thread 0 runs alone, and where they meet.
 *
 * Decoding a token is a few hundred small nodes (a norm of n_embd values, a
 * rope, a softmax over the cells, the casts) between the products. Run on
 * every thread, each costs a meeting of the threads (a barrier) that takes
 * longer than its work. So:
 *  - a node with little work (cpu_steps.c: step_cost) runs on thread 0
 *    alone ("solo"), and a run of such nodes needs no barrier inside it
 *    (one thread, program order);
 *  - a product on the dot kernels is two steps: the conversion of its
 *    activations (solo when small, as one token's vector is) and the
 *    output rows (shared); a product whose activations are the previous
 *    product's (q, k and v of one input; gate and up) skips the conversion
 *    and the barrier before it, as long as it neither reads nor writes what
 *    the products since the last barrier write;
 *  - otherwise the threads meet before a shared step and before any step
 *    that follows a shared one.
 * The straightforward plan, every node on every thread and a barrier after
 * each, gives the same bits: every output element is computed by one
 * thread with the same kernel and the same sums either way.
 */
#ifndef TESSERA_CPU_COMMON_CPU_STEPS_H
#define TESSERA_CPU_COMMON_CPU_STEPS_H

#include <stdatomic.h>
#include <stdint.h>

#include <tessera/plugin.h>

#include "cpu_kernels.h"

typedef enum cpu_step_kind {
    STEP_OP,         /* the whole node: ops_compute, or matmul_compute (GEMM) */
    STEP_MM_PREPARE, /* matmul_prepare */
    STEP_MM_RUN,     /* matmul_run on the step's own chunk counter */
} cpu_step_kind;

typedef struct cpu_step {
    const tsr_node *node;
    uint8_t kind;    /* cpu_step_kind */
    uint8_t solo;    /* thread 0 alone */
    uint8_t barrier; /* the threads meet before it */
    const void *xw;  /* STEP_MM_RUN: the weight's x16 copy (cpu_repack.h), or NULL */
} cpu_step;

/* A chunk counter on its own cache line. */
typedef struct cpu_step_counter {
    _Atomic int64_t next;
    char pad[64 - sizeof(int64_t)];
} cpu_step_counter;

typedef struct cpu_plan {
    cpu_step *steps;
    cpu_step_counter *counters; /* [n_steps], zero when the plan is built */
    int32_t n_steps, cap;
    int32_t n_barriers, n_solo; /* statistics */
} cpu_plan;

/* Plan nodes[0..n) for nth threads; plain: the straightforward plan (every
 * step shared, a barrier between any two). 0, or -1 out of memory. */
int cpu_plan_build(cpu_plan *p, const cpu_kernels *k, const tsr_node *nodes, int32_t n, int nth, int plain);
void cpu_plan_free(cpu_plan *p);

#endif
