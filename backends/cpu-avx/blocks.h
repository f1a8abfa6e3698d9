/*
 * blocks.h — the block layouts only cpu-avx uses, on top of the ones shared
 * with cpu-neon (../cpu-common/cpu_blocks.h): act8p, the paired activation
 * blocks of its vector Q4_0/Q8_0 kernels.
 */
#ifndef TESSERA_CPU_AVX_BLOCKS_H
#define TESSERA_CPU_AVX_BLOCKS_H

#include <stdint.h>

#include "cpu_blocks.h"

/*   act8p: two 32-blocks side by side for the vector Q4_0/Q8_0 kernels:
 *          d[0..7] = d of the first block, d[8..15] of the second (fp16-
 *          rounded, repeated per 32-bit lane), corr[i] = -offset * (sum of
 *          qs[4i..4i+3]) where offset is the weight type's zero point (8 for
 *          Q4_0, 0 for Q8_0): the integer accumulator starts from corr, so
 *          sum((w - offset) * a) costs no extra instruction. */
typedef struct {
    int8_t qs[64];
    float d[16];
    int32_t corr[16];
} act8p;

_Static_assert(sizeof(act8p) == 192, "act8p keeps 64-byte alignment");

#endif
