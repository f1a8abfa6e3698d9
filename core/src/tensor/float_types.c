/*
 * float_types — F32, F16 and BF16: scalar conversions bit-exact with ggml's,
 * row conversions, and dot products with F32 activations.
 */
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) /* inf / NaN: keep the payload, widened */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Round to nearest even, like F16C's vcvtps2ph and ggml's portable path:
 * overflow goes to infinity, NaN becomes a quiet NaN with the sign kept. */
uint16_t f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return sign | 0x7e00;
    if (x >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {
        /* Below the smallest normal half (2^-14): the half is the integer
         * round(|f| * 2^24); scaling by a power of two is exact and adding
         * 2^23 rounds to the nearest even integer. 1024 is 2^-14 itself. */
        float v = f32_from_bits(x) * 0x1p24f;
        float r = (v + 8388608.f) - 8388608.f;
        return sign | (uint16_t)r;
    }
    /* Normal: round the 23-bit mantissa to 10 bits (ties to even); a carry
     * into the exponent is the correct result. */
    x += 0xfffu + ((x >> 13) & 1u);
    return sign | (uint16_t)((x - (112u << 23)) >> 13);
}

float bf16_to_f32(uint16_t h) {
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* ------------------------------------------------------------ row forms */

void quant_f32_to_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f32_from_f32(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void quant_f16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(h[i]);
}

void quant_f16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_fp16(src[i]);
}

void quant_bf16_to_f32(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(h[i]);
}

void quant_bf16_from_f32(const float *src, void *dst, int64_t n) {
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(src[i]);
}

/* Dots accumulate in double (as ggml's ggml_float) and round once. */
void quant_f32_dot(int64_t n, float *out, const void *x, const void *y) {
    const float *a = x, *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)a[i] * (double)b[i];
    *out = (float)sum;
}

void quant_f16_dot(int64_t n, float *out, const void *x, const void *y) {
    const uint16_t *a = x;
    const float *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)fp16_to_f32(a[i]) * (double)b[i];
    *out = (float)sum;
}

void quant_bf16_dot(int64_t n, float *out, const void *x, const void *y) {
    const uint16_t *a = x;
    const float *b = y;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)bf16_to_f32(a[i]) * (double)b[i];
    *out = (float)sum;
}
