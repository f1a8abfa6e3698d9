/*
 * kernels — the per-ISA kernel table. kernels_avx2.c and kernels_avx512.c
 * compile the same kernel source (kernels_impl.h) with different target
 * flags; the plugin picks one table at init from the detected CPU (or
 * TESSERA_AVX_LEVEL) and calls through it. Types without a vector kernel use
 * the plain C ones from quants.c.
 */
#ifndef TESSERA_CPU_AVX_KERNELS_H
#define TESSERA_CPU_AVX_KERNELS_H

#include <tessera/plugin.h>

#include "gemm.h"
#include "quants.h"

/* struct cpu_kernels: cpu_exec.k points at this table. */
typedef struct cpu_kernels {
    const char *name;                 /* "avx2", "avxvnni", "avx512" or "avx512vnni" */
    avx_dot_fn dot[TSR_DTYPE_COUNT];  /* per weight dtype; NULL: not supported */
    /* Faster kernels over act8p activations, used when K % 64 == 0; NULL
     * where there is none. pair_offset: the zero point act8p.corr uses. */
    avx_dot_fn dot_pair[TSR_DTYPE_COUNT];
    /* Two-row tiles for prompt processing (same sums, in the same order, as
     * dot with nc > 1); NULL where there is none. */
    avx_dot2_fn dot2[TSR_DTYPE_COUNT];
    int pair_offset[TSR_DTYPE_COUNT];
    /* x[i] = exp(x[i] - max) for n values (exactly 0 where x is -inf);
     * returns the sum in double, as the softmax reference sums. */
    double (*exp_sub_sum)(float *x, int64_t n, float max);
    void (*act8_from_f32)(const float *x, act8 *y, int64_t n);
    void (*act8k_from_f32)(const float *x, act8k *y, int64_t n);
    /* Packed-panel products for prompt processing (gemm.h); NULL: none. */
    const gemm_ops *gemm[TSR_DTYPE_COUNT];
} avx_kernels;

void kernels_init_avx2(avx_kernels *k);
void kernels_init_avxvnni(avx_kernels *k);
void kernels_init_avx512(avx_kernels *k);
void kernels_init_avx512vnni(avx_kernels *k);

#endif
