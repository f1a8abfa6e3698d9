/*
 * quants — the plugin's own scalar quant code (the conversions shared with
 * the other CPU plugin are in ../cpu-common/cpu_quants.h): activation
 * formats per weight type, and plain C dot kernels (one weight row against
 * up to NEON_NC activation columns) that the SIMD tables use for types
 * without a vector kernel.
 */
#ifndef TESSERA_CPU_NEON_QUANTS_H
#define TESSERA_CPU_NEON_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_blocks.h"
#include "cpu_quants.h"

enum { NEON_NC = 4 }; /* activation columns one dot call handles at most */

/* out[c] = dot(weight row w, activation column act + c*act_stride bytes),
 * c < nc, over K elements. act is f32 for F32/F16/BF16 weights, act8 blocks
 * for the 32-element quant types, act8k blocks for the K-quants. */
typedef void (*neon_dot_fn)(int64_t K, const void *w, const void *act, size_t act_stride,
                           int nc, float *out);

/* Which activation format a weight dtype's dot reads. */
typedef enum { ACT_F32 = 0, ACT_Q8 = 1, ACT_Q8K = 2, ACT_NONE = -1 } act_kind;
act_kind quants_act_kind(int32_t dtype);

/* Bytes of one activation row of K elements in that format. */
size_t quants_act_row_bytes(act_kind kind, int64_t K);

/* K-quant blocks: the integer value of each of the 256 elements (Q2_K 0..3,
 * Q3_K -4..3, Q5_K 0..31; before scales and mins), for kernels that decode
 * once and then reuse the values for several activation columns. */
void quants_decode_q2k(const blk_q2_k *b, int8_t *q);
void quants_decode_q3k(const blk_q3_k *b, int8_t *q);
void quants_decode_q5k(const blk_q5_k *b, int8_t *q);
/* Q3_K: the 16 group scales (-32..31); Q4_K/Q5_K: 8 scales and 8 mins. */
void quants_q3k_scales(const uint8_t *packed, int *sc);
void quants_k4_scales(const uint8_t *packed, int *sc, int *mn);

/* Plain C dot kernel for dtype, or NULL if the plugin cannot multiply it. */
neon_dot_fn quants_scalar_dot(int32_t dtype);

#endif
