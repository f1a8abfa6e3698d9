/*
 * exec — the cpu-avx side of ../cpu-common/cpu_exec.h: the plugin's kernel
 * table (struct cpu_kernels, alias avx_kernels) and its matrix products.
 */
#ifndef TESSERA_CPU_AVX_EXEC_H
#define TESSERA_CPU_AVX_EXEC_H

#include <stddef.h>

#include <tessera/plugin.h>

#include "cpu_exec.h"
#include "kernels.h"

/* matmul.c */
int matmul_supports(const avx_kernels *k, const tsr_node *node);
size_t matmul_work_size(const avx_kernels *k, const tsr_node *node, int nth);
void matmul_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth);

#endif
