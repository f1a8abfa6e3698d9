/*
 * cpu_kernels — the per-ISA kernel table of a CPU plugin, and the matrix
 * product driver (cpu_matmul.c) that calls through it.
 *
 * Each ISA folder (cpu-avx, cpu-neon) compiles its kernel source once per
 * feature level with that level's target flags and fills one table per
 * level (kernels_<level>.c); the plugin picks one table at init
 * (cpu_isa.h) and every product goes through it, so no instruction newer
 * than the chosen level ever runs. Types without a vector kernel get the
 * plain C ones (cpu_mm_quants.h). A slot an ISA has no kernel for stays
 * NULL and the driver takes the general path.
 */
#ifndef TESSERA_CPU_COMMON_CPU_KERNELS_H
#define TESSERA_CPU_COMMON_CPU_KERNELS_H

#include <stddef.h>

#include <tessera/plugin.h>

#include "cpu_exec.h"
#include "cpu_gemm.h"
#include "cpu_mm_quants.h"
#include "cpu_repack.h"

/* out[2*r + c] = dot(weight row w + r*w_stride bytes, activation column
 * act + c*act_stride bytes), r, c in {0, 1}: a 2x2 output tile (cpu-neon's
 * i8mm smmla computes one in one step per 8 elements). */
typedef void (*cpu_tile_fn)(int64_t K, const void *w, size_t w_stride, const void *act,
                            size_t act_stride, float *out);

/* Decoding's rows: out[r] = dot(weight row w + r*w_stride bytes, the one
 * activation column act), r < nr (any count), with the same sums in the
 * same order as the type's dot with nc = 1 (the same bits): one call for
 * a run of rows, so small rows do not pay a call, the kernel's set-up and
 * the activation loads once each. */
typedef void (*cpu_dotr_fn)(int64_t K, const void *w, size_t w_stride, const void *act, int64_t nr,
                            float *out);

/* struct cpu_kernels: cpu_exec.k points at this table. */
typedef struct cpu_kernels {
    const char *name;                 /* the level's name, e.g. "avx2", "i8mm" */
    cpu_dot_fn dot[TSR_DTYPE_COUNT];  /* per weight dtype; NULL: not supported */
    /* Faster kernels over act8p activations, used when K % 64 == 0; NULL
     * where there is none. pair_offset: the zero point act8p.corr uses. */
    cpu_dot_fn dot_pair[TSR_DTYPE_COUNT];
    int pair_offset[TSR_DTYPE_COUNT];
    /* Two-row kernels for prompt processing (same sums, in the same order,
     * as dot with nc > 1); NULL where there is none. */
    cpu_dot2_fn dot2[TSR_DTYPE_COUNT];
    /* Many rows by one column (decoding); NULL: dot row by row. */
    cpu_dotr_fn dotr[TSR_DTYPE_COUNT];
    /* Many rows by one column from the x16 layout (cpu_repack.h), for
     * weights the queue has repacked; NULL: none for this type. */
    cpu_dotx_fn dotx[TSR_DTYPE_COUNT];
    /* 2x2 tiles for prompts over the dot's activations; NULL where none. */
    cpu_tile_fn tile[TSR_DTYPE_COUNT];
    /* x[i] = exp(x[i] - max) for n values (exactly 0 where x is -inf);
     * returns the sum in double, as the softmax reference sums; NULL:
     * cpu_rows.h's row exp. */
    double (*exp_sub_sum)(float *x, int64_t n, float max);
    void (*act8_from_f32)(const float *x, act8 *y, int64_t n);
    void (*act8k_from_f32)(const float *x, act8k *y, int64_t n);
    /* Packed-panel products for prompt processing (cpu_gemm.h); NULL: none. */
    const gemm_ops *gemm[TSR_DTYPE_COUNT];
} cpu_kernels;

/* cpu_matmul.c: MUL_MAT through the table. */
/* 1 if the node runs here, else 0 with the reason in why[why_size] (may
 * be NULL), as tsr_node_decline writes it. */
int matmul_supports(const cpu_kernels *k, const tsr_node *node, char *why, size_t why_size);
size_t matmul_work_size(const cpu_kernels *k, const tsr_node *node, int nth);
void matmul_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);

/* The two phases of a product on the dot kernels, for a node loop that
 * places the threads' meetings itself (cpu_steps.h). A product is phased
 * when it does not take the packed GEMM (matmul_phased). matmul_prepare
 * converts its activations into ex->work (when matmul_has_prepare; f32
 * ones are read in place), matmul_run computes the output from them, its
 * chunks handed out through next_chunk (zero at the start), once every
 * thread's prepare is done. A product whose activations are the same
 * tensor in the same format as the previous one's (matmul_same_activations:
 * q, k and v of one input, gate and up) runs on what that one prepared. */
int matmul_phased(const cpu_kernels *k, const tsr_node *node);
int matmul_has_prepare(const tsr_node *node);
size_t matmul_prepare_elements(const tsr_node *node);
int matmul_same_activations(const cpu_kernels *k, const tsr_node *a, const tsr_node *b);
void matmul_prepare(cpu_exec *ex, const tsr_node *node, int ith, int nth);
/* Bytes of one prepared activation row (column) in work: column n of a
 * phased product is at work + n * this. */
size_t matmul_act_row_bytes(const cpu_kernels *k, const tsr_node *node);
void matmul_run(cpu_exec *ex, const tsr_node *node, _Atomic int64_t *next_chunk, int ith, int nth);
/* matmul_run, reading the weight from its x16 copy xw when not NULL
 * (made by cpu_x_repack for a node matmul_x_eligible accepts). */
void matmul_run_xw(cpu_exec *ex, const tsr_node *node, const void *xw, _Atomic int64_t *next_chunk, int ith,
                   int nth);
/* 1 if the node may read its weight from an x16 copy: a constant weight
 * (TSR_TENSOR_WEIGHT) of a type with a dotx kernel, rows a multiple of
 * 16, one activation column, contiguous dst. */
int matmul_x_eligible(const cpu_kernels *k, const tsr_node *node);

#endif
