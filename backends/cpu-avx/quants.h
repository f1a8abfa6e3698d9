/*
 * quants — the plugin's own scalar quant code (the conversions shared with
 * the other CPU plugin are in ../cpu-common/cpu_quants.h): activation
 * formats per weight type, and plain C dot kernels (one weight row against
 * up to AVX_NC activation columns) that the SIMD tables use for types
 * without a vector kernel.
 */
#ifndef TESSERA_CPU_AVX_QUANTS_H
#define TESSERA_CPU_AVX_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "blocks.h"
#include "cpu_quants.h"

enum { AVX_NC = 4 }; /* activation columns one dot call handles at most */

/* out[c] = dot(weight row w, activation column act + c*act_stride bytes),
 * c < nc, over K elements. act is f32 for F32/F16/BF16 weights, act8 blocks
 * for the 32-element quant types, act8k blocks for the K-quants. */
typedef void (*avx_dot_fn)(int64_t K, const void *w, const void *act, size_t act_stride,
                           int nc, float *out);

/* Two weight rows (w and w + w_row_stride bytes) against nc columns:
 * out[c] for the first row, out[AVX_NC + c] for the second. */
typedef void (*avx_dot2_fn)(int64_t K, const void *w, size_t w_row_stride, const void *act,
                            size_t act_stride, int nc, float *out);

/* Which activation format a weight dtype's dot reads. */
typedef enum { ACT_F32 = 0, ACT_Q8 = 1, ACT_Q8K = 2, ACT_Q8P = 3, ACT_NONE = -1 } act_kind;
act_kind quants_act_kind(int32_t dtype);

/* Bytes of one activation row of K elements in that format. */
size_t quants_act_row_bytes(act_kind kind, int64_t K);

/* f32 -> ceil(n/128) act8p groups (blocks.h), n a multiple of 64; offset
 * is the weight type's zero point (see act8p);
 * q8 quantizes the 32-blocks (a vector act8 quantizer, or NULL for the
 * plain C one). */
typedef void (*act8_quantizer)(const float *x, act8 *y, int64_t n);
void quants_act8p_from_f32(const float *x, act8p *y, int64_t n, int offset, act8_quantizer q8);

/* Plain C dot kernel for dtype, or NULL if the plugin cannot multiply it. */
avx_dot_fn quants_scalar_dot(int32_t dtype);

#endif
