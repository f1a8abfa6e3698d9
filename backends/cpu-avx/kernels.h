/*
 * kernels — cpu-avx's kernel levels. kernels_avx2.c, kernels_avxvnni.c,
 * kernels_avx512.c and kernels_avx512vnni.c compile the same kernel source
 * (kernels_impl.h, gemm_*_impl.h) with different target flags; each fills a
 * ../cpu-common/cpu_kernels.h table, and avx_isa.c lists them for the
 * plugin core to pick from.
 */
#ifndef TESSERA_CPU_AVX_KERNELS_H
#define TESSERA_CPU_AVX_KERNELS_H

#include "cpu_kernels.h"

void kernels_init_avx2(cpu_kernels *k);
void kernels_init_avxvnni(cpu_kernels *k);
void kernels_init_avx512(cpu_kernels *k);
void kernels_init_avx512vnni(cpu_kernels *k);

#endif
