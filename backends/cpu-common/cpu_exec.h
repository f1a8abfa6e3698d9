/*
 * cpu_exec — what every op kernel of a CPU plugin (cpu-avx, cpu-neon) sees
 * while a node list runs: the plugin's kernel table, the thread pool, the
 * shared scratch area and the error slot. Ops run on all threads at once
 * (op(ex, node, ith, nth)); each takes its share of rows and may meet the
 * others at exec_barrier().
 */
#ifndef TESSERA_CPU_COMMON_CPU_EXEC_H
#define TESSERA_CPU_COMMON_CPU_EXEC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/plugin.h>

#include "cpu_pool.h"

typedef struct cpu_buffer {
    void *ptr;
    uint64_t size;
} cpu_buffer;

/* Each plugin's kernel table (its kernels.h); opaque to the common code. */
struct cpu_kernels;

typedef struct cpu_exec {
    const struct cpu_kernels *k;
    cpu_pool *pool;
    int nth;
    uint8_t *work; /* scratch shared by the threads of one node */
    size_t work_size;
    _Atomic int64_t next_chunk;     /* dynamic work distribution in matmul */
    _Atomic int error;              /* first error status raised by an op */
    /* softmax: x[i] = exp(x[i] - max) for n values, returning the sum in
     * double; a plugin's vector kernel, or NULL for cpu_rows.h's
     * row_exp_sub_sum (expf's results but in rare near-halfway cases). */
    double (*exp_sub_sum)(float *x, int64_t n, float max);
} cpu_exec;

static inline void exec_barrier(cpu_exec *ex) { cpu_pool_barrier(ex->pool, ex->nth); }

static inline void exec_fail(cpu_exec *ex, int status) {
    int expected = 0;
    atomic_compare_exchange_strong(&ex->error, &expected, status);
}

/* Host address of a tensor's first byte: data when the host set it (plain
 * memory, or a host-visible buffer), else our buffer plus offset. */
static inline uint8_t *tensor_ptr(const tsr_tensor *t) {
    if (t->data || !t->buffer) return (uint8_t *)t->data;
    return (uint8_t *)((cpu_buffer *)t->buffer)->ptr + t->offset;
}

/* Address of row (i1, i2, i3). */
static inline uint8_t *tensor_row(const tsr_tensor *t, int64_t i1, int64_t i2, int64_t i3) {
    return tensor_ptr(t) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static inline int64_t tensor_nrows(const tsr_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* Split [0, n) into nth near-equal parts; part ith is [*lo, *hi). */
static inline void split_range(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = (n + nth - 1) / nth;
    *lo = per * ith < n ? per * ith : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* cpu_ops.c: every op but MUL_MAT (k: the plugin's kernel table, for the
 * ops built on the products). */
/* 1 if the node runs here, else 0 with the reason in why[why_size] (may
 * be NULL): the checker's for a malformed node, else what is missing. */
/* Tables the ops read (GELU's), once at plugin init. */
void ops_init(void);
int ops_supports(const struct cpu_kernels *k, const tsr_node *node, char *why, size_t why_size);
size_t ops_work_size(const struct cpu_kernels *k, const tsr_node *node, int nth);
void ops_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);
/* Rough work of a node: multiply-adds for products, else elements (the
 * plugin's thread count follows it). */
double ops_cost(const tsr_node *node);

/* cpu_flash_attn.c: FLASH_ATTN (through ops_*; ops_supports checks it). */
size_t flash_attn_work_size(const tsr_node *node, int nth);
void flash_attn_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);

/* cpu_moe.c: MUL_MAT_ID (on the MUL_MAT driver), TOP_K, SUM_ROWS (through
 * ops_*). */
int mul_mat_id_supports(const struct cpu_kernels *k, const tsr_node *node, char *why, size_t why_size);
size_t mul_mat_id_work_size(const struct cpu_kernels *k, const tsr_node *node, int nth);
void mul_mat_id_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);
/* The same, the experts' weights read from their x16 copy xw (cpu_repack.h;
 * expert e's groups at e * ne[1] / 16 groups) where a token's expert has
 * one column; xw NULL: mul_mat_id_compute. */
void mul_mat_id_compute_xw(cpu_exec *ex, const tsr_node *node, const void *xw, int ith, int nth);
/* 1 if the node's experts may be read from an x16 copy: one token, and
 * an expert's product would pass matmul_x_eligible. */
int mul_mat_id_x_eligible(const struct cpu_kernels *k, const tsr_node *node);
void top_k_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);
void sum_rows_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);

#endif
