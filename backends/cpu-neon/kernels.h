/*
 * kernels — cpu-neon's kernel levels. kernels_neon.c, kernels_dotprod.c and
 * kernels_i8mm.c compile the same kernel source (kernels_impl.h) with
 * different -march flags; each fills a ../cpu-common/cpu_kernels.h table,
 * and neon_isa.c lists them for the plugin core to pick from.
 *
 * FP16 arithmetic (asimdhp) is detected and reported but not used: F16
 * weights are widened to f32 (fcvtl, ARMv8.0) and summed in f32 like the
 * reference goldens (llama.cpp's x86 CPU path) and ref; sums kept in fp16
 * would round at every step (11-bit mantissa) and were not tried.
 */
#ifndef TESSERA_CPU_NEON_KERNELS_H
#define TESSERA_CPU_NEON_KERNELS_H

#include "cpu_kernels.h"

void kernels_init_neon(cpu_kernels *k);
void kernels_init_dotprod(cpu_kernels *k);
void kernels_init_i8mm(cpu_kernels *k);

#endif
