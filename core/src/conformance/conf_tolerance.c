/*
 * conf_tolerance — how far a backend may be from ref, per op.
 *
 * An element passes when |got - want| <= abs + rel*|want| + norm*max|want|,
 * where max|want| is the largest magnitude in ref's whole result. A backend
 * checked against ref itself gets no tolerance: its bytes must be identical.
 *
 *  op           dtype (key)        abs     rel     norm   why
 *  GET_ROWS     F32/F16/BF16       0       0       0      a copy
 *               quantized          1e-6    1e-6    0      d*q vs (d*q) ordering
 *  ADD MUL DIV  any                1e-6    1e-6    0      fused multiply-add
 *  SCALE        any                1e-6    1e-6    0
 *  SILU SWIGLU  any                1e-6    1e-5    0      exp implementations
 *  SWIGLU_OAI
 *  GELU         any                1e-3    2e-3    0      llama.cpp's CPU uses an fp16 table
 *  GELU_ERF     any                1e-6    1e-5    0      erf implementations (a few ulp)
 *  RMS_NORM     any                1e-5    1e-4    0      f32 vs double sums
 *  NORM
 *  SOFT_MAX     any                1e-6    1e-4    0      exp, f32 sums
 *  ROPE         any                5e-4    1e-3    0      sin/cos of angles up to ~300 rad,
 *                                                         pow vs repeated product
 *  MUL_MAT      F32 weights        0       0       1e-5   f32 accumulation order
 *               F16 weights        0       0       1e-3   activations rounded to F16
 *               BF16 weights       0       0       1e-2   activations rounded to BF16
 *               quantized          0       0       3e-2   activations quantized to 8 bits
 *  MUL_MAT_ID   as MUL_MAT                                each slot is one MUL_MAT row
 *  SUM_ROWS     F32                1e-5    1e-5    1e-6   f32 vs double sums (4096 terms)
 *  TOP_K        I32                exact
 *  FLASH_ATTN   F32 K/V            1e-4    1e-3    0
 *               F16/BF16 K/V       2e-3    2e-3    0      f16 accumulation on GPUs
 *               block-type K/V     1e-2    1e-2    0      q rounded to 8 bits for quantized
 *                                                         dot products (as llama.cpp's CPU)
 *  CPY          float -> float     0       0       0      round-to-nearest-even conversions
 *               quantized -> f32   1e-6    1e-6    0
 *               float -> quantized (judged against the f32 source: RMS error
 *                                   <= 1.05x ref's, max error <= 2x ref's)
 *  CONCAT       any                0       0       0
 *  SSM_CONV     F32                1e-6    1e-5    0      f32 sums of K products
  *  SSM_SCAN     F32                1e-5    1e-4    0      f32 state carried over T tokens,
 *                                                         expf/log1pf
 *  DELTA_NET    F32                1e-5    1e-4    0      the same, plus two L2 norms and
 *                                                         a sigmoid per token
 *  ARGMAX       I32                exact
 *  GRAPH        each node of a chain gets the loosest tolerance of the nodes
 *               up to it (errors propagate)
 */
#include "conformance/conf_internal.h"

conf_tol conf_tolerance(int32_t op, int32_t key_dtype) {
    const bool quant = conf_dtype_is_quantized(key_dtype);
    switch (op) {
    case TSR_OP_GET_ROWS: return quant ? (conf_tol){1e-6, 1e-6, 0} : (conf_tol){0, 0, 0};
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_DIV:
    case TSR_OP_SCALE: return (conf_tol){1e-6, 1e-6, 0};
    case TSR_OP_SUM_ROWS: return (conf_tol){1e-5, 1e-5, 1e-6};
    case TSR_OP_SILU:
    case TSR_OP_SWIGLU:
    case TSR_OP_SWIGLU_OAI:
    case TSR_OP_GELU_ERF: return (conf_tol){1e-6, 1e-5, 0};
    case TSR_OP_GELU: return (conf_tol){1e-3, 2e-3, 0};
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM: return (conf_tol){1e-5, 1e-4, 0};
    case TSR_OP_SOFT_MAX: return (conf_tol){1e-6, 1e-4, 0};
    case TSR_OP_ROPE: return (conf_tol){5e-4, 1e-3, 0};
    case TSR_OP_MUL_MAT:
    case TSR_OP_MUL_MAT_ID:
        if (key_dtype == TSR_DTYPE_F32) return (conf_tol){0, 0, 1e-5};
        if (key_dtype == TSR_DTYPE_F16) return (conf_tol){0, 0, 1e-3};
        if (key_dtype == TSR_DTYPE_BF16) return (conf_tol){0, 0, 1e-2};
        return (conf_tol){0, 0, 3e-2};
    case TSR_OP_FLASH_ATTN:
        if (key_dtype == TSR_DTYPE_F32) return (conf_tol){1e-4, 1e-3, 0};
        return quant ? (conf_tol){1e-2, 1e-2, 0} : (conf_tol){2e-3, 2e-3, 0};
    case TSR_OP_SSM_CONV: return (conf_tol){1e-6, 1e-5, 0};
    case TSR_OP_SSM_SCAN:
    case TSR_OP_DELTA_NET: return (conf_tol){1e-5, 1e-4, 0};
    case TSR_OP_CPY: return quant ? (conf_tol){1e-6, 1e-6, 0} : (conf_tol){0, 0, 0};
    default: return (conf_tol){0, 0, 0};
    }
}
