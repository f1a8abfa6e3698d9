/*
 * ref_ops_elementwise — ADD, MUL, DIV, SCALE, SILU, GELU, GELU_ERF, SWIGLU,
 * SWIGLU_OAI.
 *
 * Each walks dst element by element in (i0, i1, i2, i3) order, reading the
 * sources through their own strides; reading an element happens before
 * writing it, so dst may alias src0 (in-place) when their layouts match.
 */
#include <math.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "tensor/dtype.h"

/* One element: x from src0, y from src1 (0 for the one-source ops). */
typedef float (*element_fn)(float x, float y, const tsr_node *node);

/* dst = f(src0, src1) element by element; src1 (NULL for the one-source
 * ops) is broadcast: element (i0..i3) of src0 meets (i0 % ne10, i1 % ne11,
 * i2 % ne12, i3 % ne13) of src1, the same element when the shapes match. */
static tsr_status elementwise(const tsr_node *node, const tsr_tensor *b, element_fn f) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint8_t *pa = ref_tensor_base(a), *pb = b ? ref_tensor_base(b) : NULL;
    uint8_t *pd = ref_tensor_base(dst);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < dst->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
                    float x = ref_load(a->dtype, pa + ref_offset(a, i0, i1, i2, i3));
                    float y = b ? ref_load(b->dtype, pb + ref_offset(b, i0 % b->ne[0], i1 % b->ne[1],
                                                                      i2 % b->ne[2], i3 % b->ne[3]))
                                : 0.0f;
                    ref_store(dst->dtype, pd + ref_offset(dst, i0, i1, i2, i3), f(x, y, node));
                }
    return TSR_OK;
}

/* x * scale + bias */
static float scale_one(float x, float y, const tsr_node *node) {
    (void)y;
    const tsr_scale_params p = tsr_scale_params_of(node);
    return x * p.scale + p.bias;
}

/* x * sigmoid(x), written as ggml does: x / (1 + e^-x) */
static float silu_one(float x, float y, const tsr_node *node) {
    (void)y, (void)node;
    return x / (1.0f + expf(-x));
}

/* tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
/* The tanh approximation of GELU as llama.cpp's CPU backend evaluates it:
 * through a table over every fp16 input, so x is rounded to fp16 first and
 * the result is an fp16 value; beyond +-10 it is x or 0. (The 270M Gemma 3
 * model moves its logits by up to ~0.5 between this and the exact form.) */
static float gelu_one(float x, float y, const tsr_node *node) {
    (void)y, (void)node;
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    const float coef_a = 0.044715f;
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = fp16_to_f32(f32_to_fp16(x));
    return fp16_to_f32(f32_to_fp16(0.5f * h * (1.0f + tanhf(sqrt_2_over_pi * h * (1.0f + coef_a * h * h)))));
}

/* The exact GELU, 0.5 x (1 + erf(x / sqrt 2)), in float as written: the
 * bits of llama.cpp's CPU ggml_gelu_erf on every f32 input tried (every
 * fp16 value and 4M random ones in [-12, 12], glibc's erff), unlike GELU
 * with no fp16 rounding. */
static float gelu_erf_one(float x, float y, const tsr_node *node) {
    (void)y, (void)node;
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
}

tsr_status ref_op_scale(const tsr_node *node) { return elementwise(node, NULL, scale_one); }
tsr_status ref_op_silu(const tsr_node *node) { return elementwise(node, NULL, silu_one); }
tsr_status ref_op_gelu(const tsr_node *node) { return elementwise(node, NULL, gelu_one); }
tsr_status ref_op_gelu_erf(const tsr_node *node) { return elementwise(node, NULL, gelu_erf_one); }

static float add_two(float x, float y, const tsr_node *node) {
    (void)node;
    return x + y;
}

static float mul_two(float x, float y, const tsr_node *node) {
    (void)node;
    return x * y;
}

/* IEEE division, as ggml's: x / 0 is +-inf or NaN */
static float div_two(float x, float y, const tsr_node *node) {
    (void)node;
    return x / y;
}

/* silu(src0) * src1, all three the same shape */
static float swiglu_two(float x, float y, const tsr_node *node) { return silu_one(x, 0.0f, node) * y; }

tsr_status ref_op_add(const tsr_node *node) { return elementwise(node, node->src[1], add_two); }
tsr_status ref_op_mul(const tsr_node *node) { return elementwise(node, node->src[1], mul_two); }
tsr_status ref_op_div(const tsr_node *node) { return elementwise(node, node->src[1], div_two); }
tsr_status ref_op_swiglu(const tsr_node *node) { return elementwise(node, node->src[1], swiglu_two); }

/* gpt-oss's clamped SwiGLU (Hugging Face's GptOssExperts): g = min(gate,
 * limit), u = clamp(up, -limit, limit), g * sigmoid(alpha g) * (u + 1),
 * the sigmoid written as silu's g / (1 + e^(-alpha g)). */
static float swiglu_oai_two(float gate, float up, const tsr_node *node) {
    const tsr_swiglu_oai_params p = tsr_swiglu_oai_params_of(node);
    const float g = gate < p.limit ? gate : p.limit;
    const float u = up < -p.limit ? -p.limit : up > p.limit ? p.limit : up;
    return g / (1.0f + expf(-p.alpha * g)) * (u + 1.0f);
}

tsr_status ref_op_swiglu_oai(const tsr_node *node) { return elementwise(node, node->src[1], swiglu_oai_two); }
