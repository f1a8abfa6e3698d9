/*
 * blocks.h — the block layouts only cpu-avx uses, on top of the ones shared
 * with cpu-neon (../cpu-common/cpu_blocks.h): act8p, the packed activation
 * blocks of its vector Q4_0/Q8_0 kernels.
 */
#ifndef TESSERA_CPU_AVX_BLOCKS_H
#define TESSERA_CPU_AVX_BLOCKS_H

#include <stdint.h>

#include "cpu_blocks.h"

/*   act8p: four 32-blocks (128 activations) packed for the vector Q4_0 /
 *          Q8_0 kernels, in the order a register of Q4_0 nibbles comes
 *          in: qs[0..63] = elements 0..15 of blocks 0, 1, 2, 3 (16 each),
 *          qs[64..127] = elements 16..31 of blocks 0..3. So every 4-byte
 *          lane l of either half belongs to block l/4 and both halves sum
 *          into one accumulator (lane l: block l/4). d[l] = d of block l/4
 *          (fp16-rounded); corr[l] = -offset * (sum of qs[4l..4l+3] and
 *          qs[64+4l..64+4l+3]) where offset is the weight type's zero point
 *          (8 for Q4_0, 0 for Q8_0): the integer accumulator starts from
 *          corr, so sum((w - offset) * a) costs no extra instruction.
 *          A row of K activations is ceil(K/128) of them; where K % 128 is
 *          64 the last one holds blocks 0, 1 and zeros (qs, d, corr) for
 *          blocks 2, 3. */
typedef struct {
    int8_t qs[128];
    float d[16];
    int32_t corr[16];
} act8p;

_Static_assert(sizeof(act8p) == 256, "act8p keeps 64-byte alignment");

#endif
