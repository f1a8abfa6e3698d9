/*
 * cpu_mm_quants — the quant side of the CPU plugins' matrix products:
 * activation formats per weight type, plain C dot kernels (one weight row
 * against up to CPU_NC activation columns) that every ISA's kernel table
 * uses for types without a vector kernel, and block decoders the kernels
 * share. (The conversions outside MUL_MAT are in cpu_quants.h.)
 */
#ifndef TESSERA_CPU_COMMON_CPU_MM_QUANTS_H
#define TESSERA_CPU_COMMON_CPU_MM_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_blocks.h"
#include "cpu_quants.h"

enum { CPU_NC = 4 }; /* activation columns one dot call handles at most */

/* out[c] = dot(weight row w, activation column act + c*act_stride bytes),
 * c < nc, over K elements. act is f32 for F32/F16/BF16 weights, act8 blocks
 * for the 32-element quant types, act8k blocks for the K-quants. */
typedef void (*cpu_dot_fn)(int64_t K, const void *w, const void *act, size_t act_stride,
                           int nc, float *out);

/* Two weight rows (w and w + w_row_stride bytes) against nc columns:
 * out[c] for the first row, out[CPU_NC + c] for the second. */
typedef void (*cpu_dot2_fn)(int64_t K, const void *w, size_t w_row_stride, const void *act,
                            size_t act_stride, int nc, float *out);

/* Which activation format a weight dtype's dot reads. */
typedef enum { ACT_F32 = 0, ACT_Q8 = 1, ACT_Q8K = 2, ACT_Q8P = 3, ACT_NONE = -1 } act_kind;
act_kind quants_act_kind(int32_t dtype);

/* Bytes of one activation row of K elements in that format. */
size_t quants_act_row_bytes(act_kind kind, int64_t K);

/* f32 -> ceil(n/128) act8p groups (cpu_blocks.h), n a multiple of 64; offset
 * is the weight type's zero point (see act8p);
 * q8 quantizes the 32-blocks (a vector act8 quantizer, or NULL for the
 * plain C one). */
typedef void (*act8_quantizer)(const float *x, act8 *y, int64_t n);
void quants_act8p_from_f32(const float *x, act8p *y, int64_t n, int offset, act8_quantizer q8);

/* K-quant blocks: the integer value of each of the 256 elements (Q2_K 0..3,
 * Q3_K -4..3, Q5_K 0..31; before scales and mins), for kernels that decode
 * once and then reuse the values for several activation columns. */
void quants_decode_q2k(const blk_q2_k *b, int8_t *q);
void quants_decode_q3k(const blk_q3_k *b, int8_t *q);
void quants_decode_q5k(const blk_q5_k *b, int8_t *q);
/* Q3_K: the 16 group scales (-32..31); Q4_K/Q5_K: 8 scales and 8 mins. */
void quants_q3k_scales(const uint8_t *packed, int *sc);
void quants_k4_scales(const uint8_t *packed, int *sc, int *mn);

/* The grid IQ kernels' sign table: entry i holds the 8 signs of 7-bit sign
 * index i (tsr_iq_signs: bit 7 is the parity) as bytes +1 / -1, byte j for
 * weight j. quants_iq_sign8_init fills it; each kernel table's init calls
 * it before any kernel runs. */
extern uint64_t quants_iq_sign8[128];
void quants_iq_sign8_init(void);

/* Plain C dot kernel for dtype, or NULL if the plugin cannot multiply it. */
cpu_dot_fn quants_scalar_dot(int32_t dtype);

#endif
