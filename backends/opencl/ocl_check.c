/*
 * ocl_check — supports_op: can this device compute the node?
 *
 * Whether the node is well-formed is the ABI's checker's question
 * (tessera/plugin_check.h; a 1.1 host asks it first, we ask again for a 1.0
 * host). What is left is what the kernels implement:
 *   - float tensors are F32, F16 or BF16; indices I32;
 *   - quantized weights (MUL_MAT, MUL_MAT_ID, GET_ROWS, CPY to float):
 *     Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4 and
 *     the grid IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 *     IQ1_M); the rest (TQ1_0, TQ2_0, Q8_1, Q8_K) is declined and falls
 *     back to the CPU;
 *   - CPY into a quantized type: the KV cache's block types (Q8_0, Q4_0,
 *     Q4_1, Q5_0, Q5_1, IQ4_NL) from F32/F16/BF16; the k-quants are left to
 *     the CPU;
 *   - MUL_MAT and MUL_MAT_ID activations and result F32 (the checker's rule
 *     for MUL_MAT_ID);
 *   - FLASH_ATTN head size <= 256, k and v F32/F16/BF16 or a KV block type;
 *   - at most 2^40 elements and strides below 2^40 bytes;
 *   - strides are multiples of the element size (kernels load whole
 *     elements; 2 bytes for blocks, whose scales are F16; any for MXFP4).
 * Addresses are never looked at.
 */
#include <stdio.h>

#include <tessera/plugin_check.h>

#include "ocl_internal.h"

#define OCL_MAX_ELEMENTS (INT64_C(1) << 40)
#define OCL_ATTN_MAX_D 256 /* ATTN_MAX_D in kernels/attn.cl */

bool ocl_dtype_is_kv_block(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0:
    case TSR_DTYPE_Q5_1: case TSR_DTYPE_IQ4_NL: return true;
    default: return false;
    }
}

bool ocl_dtype_is_quant(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_IQ4_XS:
    case TSR_DTYPE_MXFP4: case TSR_DTYPE_IQ2_XXS: case TSR_DTYPE_IQ2_XS: case TSR_DTYPE_IQ2_S:
    case TSR_DTYPE_IQ3_XXS: case TSR_DTYPE_IQ3_S: case TSR_DTYPE_IQ1_S: case TSR_DTYPE_IQ1_M: return true;
    default: return false;
    }
}

int64_t ocl_dtype_alignment(int32_t dtype) {
    if (dtype == TSR_DTYPE_MXFP4) return 1; /* 17-byte blocks, no 16-bit field: read a byte at a time */
    return tsr_dtype_block_size(dtype) > 1 ? 2 : tsr_dtype_block_bytes(dtype);
}

/* no(node, why, why_size, fmt, ...): "OP 'name': ..." into why, returns 0 */
#define no tsr_node_decline

/* A tensor the kernels can address: a dtype they load, sizes within
 * OCL_MAX_ELEMENTS, element-aligned strides. NULL if so, else the problem. */
static const char *tensor_problem(const tsr_tensor *t) {
    if (!tsr_dtype_is_float(t->dtype) && t->dtype != TSR_DTYPE_I32 && !ocl_dtype_is_quant(t->dtype))
        return "has a dtype the kernels do not read";
    if (tsr_tensor_nelements(t) > OCL_MAX_ELEMENTS) return "has more than 2^40 elements";
    const int64_t align = ocl_dtype_alignment(t->dtype);
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] > 1 && t->nb[d] > OCL_MAX_ELEMENTS) return "has a stride of 2^40 bytes or more";
        if (t->ne[d] > 1 && (d > 0 || align == tsr_dtype_block_bytes(t->dtype)) && t->nb[d] % align)
            return "has a stride that is not a multiple of its element size";
    }
    return NULL;
}

int ocl_node_supported(const ocl_device *d, const tsr_node *node, char *why, size_t why_size) {
    (void)d;
    if (!tsr_node_fits(node, tensor_problem, why, why_size)) return 0;
    /* The kernels cover the ops up to GELU_ERF; one appended later falls
     * back until it has its own (docs/ops.md). */
    if (node->op > TSR_OP_GELU_ERF) return no(node, why, why_size, "not implemented on this device");
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    switch (node->op) {
    case TSR_OP_GET_ROWS:
    case TSR_OP_MUL_MAT:
    case TSR_OP_MUL_MAT_ID:
    case TSR_OP_CPY:
        if (a->dtype == TSR_DTYPE_I32) return no(node, why, why_size, "src0 dtype I32 is not read here");
        if (node->op == TSR_OP_MUL_MAT && (node->src[1]->dtype != TSR_DTYPE_F32 || dst->dtype != TSR_DTYPE_F32))
            return no(node, why, why_size, "activations and result must be F32 on this device");
        if (node->op == TSR_OP_CPY && !tsr_dtype_is_float(dst->dtype) && !ocl_dtype_is_kv_block(dst->dtype))
            return no(node, why, why_size, "converting into %s is left to the CPU", tsr_dtype_name(dst->dtype));
        return 1;
    case TSR_OP_FLASH_ATTN:
        if (a->ne[0] > OCL_ATTN_MAX_D)
            return no(node, why, why_size, "head size %lld is over %d", (long long)a->ne[0], OCL_ATTN_MAX_D);
        for (int i = 1; i <= 2; i++) {
            const int32_t t = node->src[i]->dtype;
            if (!tsr_dtype_is_float(t) && !ocl_dtype_is_kv_block(t))
                return no(node, why, why_size, "%s dtype %s is not read here", i == 1 ? "k" : "v", tsr_dtype_name(t));
        }
        return 1;
    default:
        return 1;
    }
}
