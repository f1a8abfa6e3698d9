/*
 * ref_ops_elementwise — ADD, MUL, SCALE, SILU, GELU, SWIGLU.
 *
 * Each walks dst element by element in (i0, i1, i2, i3) order, reading the
 * sources through their own strides; reading an element happens before
 * writing it, so dst may alias src0 (in-place) when their layouts match.
 */
#include <math.h>

#include "ref/ref_internal.h"
#include "tensor/dtype.h"

/* dst = src0 (+|*) src1, src1 broadcast: element (i0..i3) of src0 meets
 * (i0 % ne10, i1 % ne11, i2 % ne12, i3 % ne13) of src1. */
static tsr_status binary_broadcast(const tsr_node *node, int is_mul) {
    const tsr_tensor *a = node->src[0], *b = node->src[1], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a), *pb = ref_tensor_base(b);
    uint8_t *pd = ref_tensor_base(dst);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                    float y = ref_load(b->dtype, pb + ref_offset(b, i0 % b->ne[0], i1 % b->ne[1],
                                                                 i2 % b->ne[2], i3 % b->ne[3]));
                    ref_store(dst->dtype, pd + ref_offset(dst, i0, i1, i2, i3), is_mul ? x * y : x + y);
                }
    return TSR_OK;
}

tsr_status ref_op_add(const tsr_node *node) { return binary_broadcast(node, 0); }
tsr_status ref_op_mul(const tsr_node *node) { return binary_broadcast(node, 1); }

typedef float (*unary_fn)(float x, const tsr_node *node);

static tsr_status unary(const tsr_node *node, unary_fn f) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a);
    uint8_t *pd = ref_tensor_base(dst);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                    ref_store(dst->dtype, pd + ref_offset(dst, i0, i1, i2, i3), f(x, node));
                }
    return TSR_OK;
}

/* x * fparams[0] + fparams[1] */
static float scale_one(float x, const tsr_node *node) {
    return x * node->fparams[0] + node->fparams[1];
}

/* x * sigmoid(x), written as ggml does: x / (1 + e^-x) */
static float silu_one(float x, const tsr_node *node) {
    (void)node;
    return x / (1.0f + expf(-x));
}

/* tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
/* The tanh approximation of GELU as llama.cpp's CPU backend evaluates it:
 * through a table over every fp16 input, so x is rounded to fp16 first and
 * the result is an fp16 value; beyond +-10 it is x or 0. (The 270M Gemma 3
 * model moves its logits by up to ~0.5 between this and the exact form.) */
static float gelu_one(float x, const tsr_node *node) {
    (void)node;
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    const float coef_a = 0.044715f;
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = fp16_to_f32(f32_to_fp16(x));
    return fp16_to_f32(f32_to_fp16(0.5f * h * (1.0f + tanhf(sqrt_2_over_pi * h * (1.0f + coef_a * h * h)))));
}

tsr_status ref_op_scale(const tsr_node *node) { return unary(node, scale_one); }
tsr_status ref_op_silu(const tsr_node *node) { return unary(node, silu_one); }
tsr_status ref_op_gelu(const tsr_node *node) { return unary(node, gelu_one); }

/* silu(src0) * src1, all three the same shape */
tsr_status ref_op_swiglu(const tsr_node *node) {
    const tsr_tensor *a = node->src[0], *g = node->src[1], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a), *pg = ref_tensor_base(g);
    uint8_t *pd = ref_tensor_base(dst);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                    float y = ref_load(g->dtype, pg + ref_offset(g, i0, i1, i2, i3));
                    ref_store(dst->dtype, pd + ref_offset(dst, i0, i1, i2, i3), silu_one(x, node) * y);
                }
    return TSR_OK;
}
