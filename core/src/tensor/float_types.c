/*
 * float_types — F32, F16 and BF16: row conversions (the scalar ones are
 * plugin_util.h's, through dtype.h) and dot products with F32 activations.
 */
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

/* ------------------------------------------------------------ row forms */

void quant_f32_to_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f32_from_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

/* The row forms and the dot of a 16-bit float type, from its scalar
 * conversions: F16 and BF16 differ in nothing else. Dots accumulate in
 * double (as ggml's ggml_float) and round once. */
#define FLOAT16_TYPE(name, to_f32, from_f32)                                        \
    void quant_##name##_to_f32(const void *src, float *dst, int64_t n) {            \
        const uint16_t *h = src;                                                    \
        for (int64_t i = 0; i < n; i++) dst[i] = to_f32(h[i]);                      \
    }                                                                               \
    void quant_##name##_from_f32(const float *src, void *dst, int64_t n) {          \
        uint16_t *h = dst;                                                          \
        for (int64_t i = 0; i < n; i++) h[i] = from_f32(src[i]);                    \
    }                                                                               \
    void quant_##name##_dot(int64_t n, float *out, const void *x, const void *y) {  \
        const uint16_t *a = x;                                                      \
        const float *b = y;                                                         \
        double sum = 0.0;                                                           \
        for (int64_t i = 0; i < n; i++) sum += (double)to_f32(a[i]) * (double)b[i]; \
        *out = (float)sum;                                                          \
    }

FLOAT16_TYPE(f16, fp16_to_f32, f32_to_fp16)
FLOAT16_TYPE(bf16, bf16_to_f32, f32_to_bf16)

/* Dots accumulate in double (as ggml's ggml_float) and round once. */
void quant_f32_dot(int64_t n, float *out, const void *x, const void *y) {
    const float *a = x, *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)a[i] * (double)b[i];
    *out = (float)sum;
}
