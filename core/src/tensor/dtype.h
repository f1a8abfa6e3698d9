/*
 * dtype — element types: block geometry, names, conversions.
 *
 * Type numbers are GGUF's (see tsr_dtype in tessera/plugin.h). For each type
 * the table says how many elements a block holds and how many bytes it takes,
 * and points at the reference conversions in this module:
 *   to_f32    dequantize n elements (n a multiple of block_size)
 *   from_f32  quantize n elements exactly as llama.cpp's reference quantizer
 *             does (same bytes), NULL where the type cannot be produced
 *   vec_dot   sum_i x[i]*y[i] over n elements, x of this type and y of
 *             vec_dot_type (the 8-bit activation type matching the weight
 *             type: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4, Q8_1 for
 *             Q4_1/Q5_1, Q8_K for the K-quants, IQ4_XS, the grid IQ
 *             formats and TQ1_0/TQ2_0; F32 for F32/F16/BF16)
 * The grid IQ formats (IQ2_*, IQ3_*, IQ1_*) are read and computed but have
 * no quantizer (from_f32 NULL); I8..F64 are data types with supported
 * == false.
 */
#ifndef TESSERA_TENSOR_DTYPE_H
#define TESSERA_TENSOR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/plugin.h>
#include <tessera/plugin_util.h>

typedef void (*dtype_to_f32_fn)(const void *src, float *dst, int64_t n);
typedef void (*dtype_from_f32_fn)(const float *src, void *dst, int64_t n);
/* n elements of one row with importance weights qw[0..n) */
typedef void (*dtype_from_f32_w_fn)(const float *src, void *dst, int64_t n, const float *qw);
typedef void (*dtype_vec_dot_fn)(int64_t n, float *out, const void *x, const void *y);

typedef struct dtype_traits {
    const char *name;       /* "F32", "Q4_K", ... as GGUF tools print them  */
    int64_t block_size;     /* elements per block (1 for plain types)       */
    size_t block_bytes;     /* bytes per block                              */
    bool quantized;         /* block-quantized type                         */
    bool supported;         /* Tessera can compute with it                  */
    dtype_to_f32_fn to_f32;
    dtype_from_f32_fn from_f32;
    /* from_f32 weighted by an importance matrix, byte-exact with llama.cpp's
     * quantize_<type>(..., quant_weights); NULL where llama.cpp ignores the
     * matrix for this type (Q8_0, TQ1_0, ...) */
    dtype_from_f32_w_fn from_f32_w;
    int32_t vec_dot_type;
    dtype_vec_dot_fn vec_dot;
} dtype_traits;

/* The traits of a type number, or NULL if the number is not a GGUF type. */
const dtype_traits *dtype_traits_get(int32_t dtype);

/* True if dtype is a known GGUF type number (supported or not). */
bool dtype_is_known(int32_t dtype);

/* "Q4_K", or "unknown" for an unknown number; never NULL. */
const char *dtype_name(int32_t dtype);

/* Type number for a name (case-insensitive, "q4_k" == "Q4_K"), or -1. */
int32_t dtype_from_name(const char *name);

/* Bytes of n elements of dtype; 0 if n is not a multiple of the block size or
 * the type is unknown. */
size_t dtype_row_bytes(int32_t dtype, int64_t n);

/* Scalar conversions, bit-exact with ggml's (round to nearest even; NaN kept
 * as NaN): plugin_util.h's, the one definition host and plugins share. */
static inline float fp16_to_f32(uint16_t h) { return tsr_fp16_to_f32(h); }
static inline uint16_t f32_to_fp16(float f) { return tsr_f32_to_fp16(f); }
static inline float bf16_to_f32(uint16_t h) { return tsr_bf16_to_f32(h); }
static inline uint16_t f32_to_bf16(float f) { return tsr_f32_to_bf16(f); }

/* Row conversions with checks: 0 on success; -1 with error_get() naming the
 * dtype when it is unknown, cannot be produced (from_f32 NULL) / read, or n is
 * not a multiple of its block size. */
int dtype_quantize_row(int32_t dtype, const float *src, void *dst, int64_t n);
int dtype_dequantize_row(int32_t dtype, const void *src, float *dst, int64_t n);
/* dtype_quantize_row of one row of n elements with importance weights qw
 * (n of them; NULL, or a type without from_f32_w: the unweighted rule). */
int dtype_quantize_row_w(int32_t dtype, const float *src, void *dst, int64_t n, const float *qw);

/* Set the scale of one block of dtype to d (rounded to the block's scale
 * format), for tests that fill blocks of the types Tessera cannot produce
 * with random bytes: a random scale could be inf or NaN. 0 on success, -1
 * if dtype is not a block type with one scale (the IQ, TQ and MXFP4
 * formats, IQ4_NL included, are). */
int dtype_block_set_scale(int32_t dtype, void *block, float d);

#endif
