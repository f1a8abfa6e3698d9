/* ref_tensor — element and row access for the ref backend's ops. */
#include <string.h>

#include "ref/ref_internal.h"
#include "tensor/dtype.h"

uint8_t *ref_tensor_base(const tsr_tensor *t) {
    if (t->data) return (uint8_t *)t->data;
    if (t->buffer) {
        const ref_buffer *b = (const ref_buffer *)(void *)t->buffer;
        if (b->magic == REF_BUFFER_MAGIC && b->data && t->offset < b->size)
            return (uint8_t *)b->data + t->offset;
    }
    return NULL;
}

bool ref_dtype_is_float(int32_t dtype) {
    return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16;
}

static bool dtype_is_plain_int(int32_t dtype) {
    return dtype == TSR_DTYPE_I8 || dtype == TSR_DTYPE_I16 || dtype == TSR_DTYPE_I32 ||
           dtype == TSR_DTYPE_I64;
}

bool ref_dtype_is_quantized(int32_t dtype) {
    const dtype_traits *tr = dtype_traits_get(dtype);
    return tr && tr->quantized;
}

bool ref_dtype_is_readable(int32_t dtype) {
    if (ref_dtype_is_float(dtype) || dtype_is_plain_int(dtype) || dtype == TSR_DTYPE_F64)
        return true;
    const dtype_traits *tr = dtype_traits_get(dtype);
    /* The geometry must agree with the ABI header's, which ref_offset uses. */
    return tr && tr->quantized && tr->supported && tr->to_f32 &&
           tr->block_size == tsr_dtype_block_size(dtype) &&
           (int64_t)tr->block_bytes == tsr_dtype_block_bytes(dtype);
}

bool ref_dtype_can_quantize(int32_t dtype) {
    const dtype_traits *tr = dtype_traits_get(dtype);
    return ref_dtype_is_readable(dtype) && tr && tr->quantized && tr->from_f32;
}

float ref_load(int32_t dtype, const uint8_t *p) {
    switch (dtype) {
    case TSR_DTYPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case TSR_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); return fp16_to_f32(h); }
    case TSR_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return bf16_to_f32(h); }
    case TSR_DTYPE_F64: { double v; memcpy(&v, p, 8); return (float)v; }
    case TSR_DTYPE_I8: { int8_t v; memcpy(&v, p, 1); return (float)v; }
    case TSR_DTYPE_I16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
    case TSR_DTYPE_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
    case TSR_DTYPE_I64: { int64_t v; memcpy(&v, p, 8); return (float)v; }
    default: return 0.0f; /* unreachable: ref_node_check rejects the rest */
    }
}

void ref_store(int32_t dtype, uint8_t *p, float v) {
    switch (dtype) {
    case TSR_DTYPE_F32: memcpy(p, &v, 4); break;
    case TSR_DTYPE_F16: { uint16_t h = f32_to_fp16(v); memcpy(p, &h, 2); break; }
    case TSR_DTYPE_BF16: { uint16_t h = f32_to_bf16(v); memcpy(p, &h, 2); break; }
    default: break; /* unreachable: ref_node_check rejects the rest */
    }
}

void ref_row_load(const tsr_tensor *t, int64_t i1, int64_t i2, int64_t i3, float *out) {
    const uint8_t *row = ref_tensor_base(t) + ref_offset(t, 0, i1, i2, i3);
    if (tsr_dtype_block_size(t->dtype) > 1) {
        /* Blocks of a row are contiguous (checked): dequantize in one go. */
        dtype_traits_get(t->dtype)->to_f32(row, out, t->ne[0]);
        return;
    }
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) out[i0] = ref_load(t->dtype, row + i0 * t->nb[0]);
}

void ref_row_store(const tsr_tensor *t, int64_t i1, int64_t i2, int64_t i3, const float *in) {
    uint8_t *row = ref_tensor_base(t) + ref_offset(t, 0, i1, i2, i3);
    if (tsr_dtype_block_size(t->dtype) > 1) {
        dtype_traits_get(t->dtype)->from_f32(in, row, t->ne[0]);
        return;
    }
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) ref_store(t->dtype, row + i0 * t->nb[0], in[i0]);
}

uint8_t *ref_flat_ptr(const tsr_tensor *t, int64_t flat) {
    int64_t i0 = flat % t->ne[0];
    flat /= t->ne[0];
    int64_t i1 = flat % t->ne[1];
    flat /= t->ne[1];
    int64_t i2 = flat % t->ne[2];
    int64_t i3 = flat / t->ne[2];
    return ref_tensor_base(t) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

bool ref_same_shape(const tsr_tensor *a, const tsr_tensor *b) {
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d]) return false;
    return true;
}
