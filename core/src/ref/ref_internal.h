/*
 * ref_internal — what the ref backend's files share: element access that
 * honours strides, row conversion to/from f32, and one function per op.
 *
 * Every op function takes a node that ref_node_check() accepted and whose
 * tensors all have host addresses (ref_compute checks both), and returns
 * TSR_OK, TSR_ERR_NO_MEMORY for scratch allocation failures, or
 * TSR_ERR_INVALID for bad data (e.g. a row index out of range), after
 * error_set() naming the node.
 */
#ifndef TESSERA_REF_INTERNAL_H
#define TESSERA_REF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

/* A ref buffer: what a tsr_buffer * handed out by the ref device points at. */
typedef struct ref_buffer {
    uint64_t magic; /* REF_BUFFER_MAGIC while alive */
    uint64_t size;
    void *data; /* 64-byte aligned */
} ref_buffer;

#define REF_BUFFER_MAGIC 0x7265666275660001ull /* "refbuf" */

/* Host address of the tensor's element (0,0,0,0), or NULL if it has none. */
uint8_t *ref_tensor_base(const tsr_tensor *t);

/* Byte offset of element (i0, i1, i2, i3); for block types i0 is an element
 * index that must be a multiple of the block size. */
static inline int64_t ref_offset(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                 int64_t i3) {
    int64_t bs = tsr_dtype_block_size(t->dtype);
    return (i0 / bs) * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* Dtype classes. */
bool ref_dtype_is_float(int32_t dtype);    /* F32, F16, BF16 */
bool ref_dtype_is_readable(int32_t dtype); /* has a conversion to f32 */
bool ref_dtype_is_quantized(int32_t dtype);
bool ref_dtype_can_quantize(int32_t dtype); /* quantized with a from_f32 */

/* One element of a plain (block size 1) dtype at p, as f32. */
float ref_load(int32_t dtype, const uint8_t *p);
/* Store v at p as F32, F16 or BF16. */
void ref_store(int32_t dtype, uint8_t *p, float v);

/* Row (i1, i2, i3) of t, its ne[0] elements converted to f32 into out. */
void ref_row_load(const tsr_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *out);
/* Write ne[0] f32 values into row (i1, i2, i3) of t (float or quantized). */
void ref_row_store(const tsr_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *in);

/* Pointer to element number `flat` of t counted in ne order (i0 fastest);
 * plain dtypes only. */
uint8_t *ref_flat_ptr(const tsr_tensor *t, int64_t flat);

/* Shapes equal in all four dimensions. */
bool ref_same_shape(const tsr_tensor *a, const tsr_tensor *b);

/* The node's display name for messages: dst's name or the op's name. */
const char *ref_node_label(const tsr_node *node);

/* ------------------------------------------------------------- the ops */

tsr_status ref_op_get_rows(const tsr_node *node);
tsr_status ref_op_add(const tsr_node *node);
tsr_status ref_op_mul(const tsr_node *node);
tsr_status ref_op_scale(const tsr_node *node);
tsr_status ref_op_mul_mat(const tsr_node *node);
tsr_status ref_op_rms_norm(const tsr_node *node);
tsr_status ref_op_norm(const tsr_node *node);
tsr_status ref_op_rope(const tsr_node *node);
tsr_status ref_op_soft_max(const tsr_node *node);
tsr_status ref_op_silu(const tsr_node *node);
tsr_status ref_op_gelu(const tsr_node *node);
tsr_status ref_op_gelu_erf(const tsr_node *node);
tsr_status ref_op_swiglu(const tsr_node *node);
tsr_status ref_op_swiglu_oai(const tsr_node *node);
tsr_status ref_op_cpy(const tsr_node *node);
tsr_status ref_op_concat(const tsr_node *node);
tsr_status ref_op_argmax(const tsr_node *node);
tsr_status ref_op_flash_attn(const tsr_node *node);
tsr_status ref_op_mul_mat_id(const tsr_node *node);
tsr_status ref_op_top_k(const tsr_node *node);
tsr_status ref_op_sum_rows(const tsr_node *node);
tsr_status ref_op_div(const tsr_node *node);
tsr_status ref_op_ssm_conv(const tsr_node *node);
tsr_status ref_op_ssm_scan(const tsr_node *node);
tsr_status ref_op_delta_net(const tsr_node *node);

#endif
