/* cpu_ssm — SSM_CONV, SSM_SCAN and DELTA_NET kernels (cpu_ssm.c). */
#ifndef TESSERA_CPU_SSM_H
#define TESSERA_CPU_SSM_H

#include <tessera/plugin.h>

void cpu_ssm_conv(const tsr_node *node, int ith, int nth);
void cpu_ssm_scan(const tsr_node *node, int ith, int nth);
void cpu_delta_net(const tsr_node *node, int ith, int nth);

#endif
