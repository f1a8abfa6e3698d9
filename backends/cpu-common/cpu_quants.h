/*
 * cpu_quants — the scalar conversions both CPU plugins (cpu-avx, cpu-neon)
 * need outside the hot loops: dequantizing rows of any supported weight type
 * to f32 (GET_ROWS, CPY), f32 to F16/BF16 rows, and the activation
 * quantizers feeding the quantized matrix products.
 */
#ifndef TESSERA_CPU_COMMON_CPU_QUANTS_H
#define TESSERA_CPU_COMMON_CPU_QUANTS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_blocks.h"

/* 1 if rows of dtype can be converted to f32 by cpu_quants_row_to_f32. */
int cpu_quants_row_supported(int32_t dtype);

/* Dequantize (or widen) n elements, n a multiple of the block size. */
void cpu_quants_row_to_f32(int32_t dtype, const void *src, float *dst, int64_t n);

/* f32 -> F16 / BF16 rows (round to nearest even). */
void cpu_quants_row_f32_to_f16(const float *src, uint16_t *dst, int64_t n);
void cpu_quants_row_f32_to_bf16(const float *src, uint16_t *dst, int64_t n);

/* f32 -> the KV cache's block types Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (CPY into
 * the cache), the same bytes as llama.cpp's reference quantizers; n a
 * multiple of 32. */
int cpu_quants_from_f32_supported(int32_t dtype);
void cpu_quants_row_from_f32(int32_t dtype, const float *src, void *dst, int64_t n);

/* Activation quantizers; n a multiple of 32 (act8) or 256 (act8k). */
void cpu_quants_act8_from_f32(const float *x, act8 *y, int64_t n);
void cpu_quants_act8k_from_f32(const float *x, act8k *y, int64_t n);

#endif
