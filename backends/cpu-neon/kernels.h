/*
 * kernels — the per-level kernel table. kernels_neon.c, kernels_dotprod.c and
 * kernels_i8mm.c compile the same kernel source (kernels_impl.h) with
 * different -march flags; the plugin picks one table at init from the
 * detected CPU (or TESSERA_NEON_LEVEL) and calls through it, so no
 * instruction newer than the chosen level ever runs. Types without a vector
 * kernel use the plain C ones from quants.c.
 *
 * FP16 arithmetic (asimdhp) is detected and reported but not used: F16
 * weights are widened to f32 (fcvtl, ARMv8.0) and summed in f32 like the
 * reference goldens (llama.cpp's x86 CPU path) and ref; sums kept in fp16
 * would round at every step (11-bit mantissa) and were not tried.
 */
#ifndef TESSERA_CPU_NEON_KERNELS_H
#define TESSERA_CPU_NEON_KERNELS_H

#include <tessera/plugin.h>

#include "quants.h"

/* out[2*r + c] = dot(weight row w + r*w_stride bytes, activation column
 * act + c*act_stride bytes), r, c in {0, 1}: a 2x2 output tile, which the
 * i8mm smmla instruction computes in one step per 8 elements. */
typedef void (*neon_tile_fn)(int64_t K, const void *w, size_t w_stride, const void *act,
                             size_t act_stride, float *out);

/* struct cpu_kernels: cpu_exec.k points at this table. */
typedef struct cpu_kernels {
    const char *name;                  /* "neon", "dotprod" or "i8mm" */
    neon_dot_fn dot[TSR_DTYPE_COUNT];  /* per weight dtype; NULL: not supported */
    neon_tile_fn tile[TSR_DTYPE_COUNT]; /* 2x2 tiles for prompts; NULL where none */
    void (*act8_from_f32)(const float *x, act8 *y, int64_t n);
    void (*act8k_from_f32)(const float *x, act8k *y, int64_t n);
} neon_kernels;

void kernels_init_neon(neon_kernels *k);
void kernels_init_dotprod(neon_kernels *k);
void kernels_init_i8mm(neon_kernels *k);

#endif
