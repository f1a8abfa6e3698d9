/*
 * dtype — the table of every GGUF type number: name, block geometry and the
 * reference conversions (quant_blocks.h) Tessera implements for it.
 */
#include <stdio.h>
#include <strings.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "util/error.h"

#define PLAIN(nm, bytes, t)                                                                 \
    {.name = nm, .block_size = 1, .block_bytes = bytes, .quantized = false, .supported = true, \
     .to_f32 = quant_##t##_to_f32, .from_f32 = quant_##t##_from_f32,                         \
     .vec_dot_type = TSR_DTYPE_F32, .vec_dot = quant_##t##_dot}
#define QUANT(nm, bs, bytes, t, vdt)                                                         \
    {.name = nm, .block_size = bs, .block_bytes = bytes, .quantized = true, .supported = true,  \
     .to_f32 = quant_##t##_to_f32, .from_f32 = quant_##t##_from_f32, .vec_dot_type = vdt,     \
     .vec_dot = quant_##t##_dot}
/* Known to GGUF, sized, but not computed by Tessera. */
#define KNOWN(nm, bs, bytes, q) \
    {.name = nm, .block_size = bs, .block_bytes = bytes, .quantized = q, .supported = false, .vec_dot_type = -1}

/* Numbers 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 (repacked Q4_0/IQ4_NL
 * variants) were removed from GGUF; they have no entry and are unknown. */
static const dtype_traits dtype_table[TSR_DTYPE_COUNT] = {
    [TSR_DTYPE_F32] = PLAIN("F32", 4, f32),
    [TSR_DTYPE_F16] = PLAIN("F16", 2, f16),
    [TSR_DTYPE_BF16] = PLAIN("BF16", 2, bf16),
    [TSR_DTYPE_Q4_0] = QUANT("Q4_0", 32, 18, q4_0, TSR_DTYPE_Q8_0),
    [TSR_DTYPE_Q4_1] = QUANT("Q4_1", 32, 20, q4_1, TSR_DTYPE_Q8_1),
    [TSR_DTYPE_Q5_0] = QUANT("Q5_0", 32, 22, q5_0, TSR_DTYPE_Q8_0),
    [TSR_DTYPE_Q5_1] = QUANT("Q5_1", 32, 24, q5_1, TSR_DTYPE_Q8_1),
    [TSR_DTYPE_Q8_0] = QUANT("Q8_0", 32, 34, q8_0, TSR_DTYPE_Q8_0),
    /* Q8_1 is an activation type: no weight dot product of its own */
    [TSR_DTYPE_Q8_1] = {.name = "Q8_1", .block_size = 32, .block_bytes = 36, .quantized = true,
                        .supported = true, .to_f32 = quant_q8_1_to_f32,
                        .from_f32 = quant_q8_1_from_f32, .vec_dot_type = -1},
    [TSR_DTYPE_Q2_K] = QUANT("Q2_K", 256, 84, q2_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_Q3_K] = QUANT("Q3_K", 256, 110, q3_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_Q4_K] = QUANT("Q4_K", 256, 144, q4_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_Q5_K] = QUANT("Q5_K", 256, 176, q5_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_Q6_K] = QUANT("Q6_K", 256, 210, q6_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_Q8_K] = QUANT("Q8_K", 256, 292, q8_K, TSR_DTYPE_Q8_K),
    [TSR_DTYPE_IQ4_NL] = QUANT("IQ4_NL", 32, 18, iq4_nl, TSR_DTYPE_Q8_0),
    [TSR_DTYPE_IQ2_XXS] = KNOWN("IQ2_XXS", 256, 66, true),
    [TSR_DTYPE_IQ2_XS] = KNOWN("IQ2_XS", 256, 74, true),
    [TSR_DTYPE_IQ3_XXS] = KNOWN("IQ3_XXS", 256, 98, true),
    [TSR_DTYPE_IQ1_S] = KNOWN("IQ1_S", 256, 50, true),
    [TSR_DTYPE_IQ3_S] = KNOWN("IQ3_S", 256, 110, true),
    [TSR_DTYPE_IQ2_S] = KNOWN("IQ2_S", 256, 82, true),
    [TSR_DTYPE_IQ4_XS] = KNOWN("IQ4_XS", 256, 136, true),
    [TSR_DTYPE_I8] = KNOWN("I8", 1, 1, false),
    [TSR_DTYPE_I16] = KNOWN("I16", 1, 2, false),
    [TSR_DTYPE_I32] = KNOWN("I32", 1, 4, false),
    [TSR_DTYPE_I64] = KNOWN("I64", 1, 8, false),
    [TSR_DTYPE_F64] = KNOWN("F64", 1, 8, false),
    [TSR_DTYPE_IQ1_M] = KNOWN("IQ1_M", 256, 56, true),
    [TSR_DTYPE_TQ1_0] = KNOWN("TQ1_0", 256, 54, true),
    [TSR_DTYPE_TQ2_0] = KNOWN("TQ2_0", 256, 66, true),
    [TSR_DTYPE_MXFP4] = KNOWN("MXFP4", 32, 17, true),
};

const dtype_traits *dtype_traits_get(int32_t dtype) {
    if (dtype < 0 || dtype >= TSR_DTYPE_COUNT) return NULL;
    const dtype_traits *t = &dtype_table[dtype];
    return t->name ? t : NULL;
}

bool dtype_is_known(int32_t dtype) {
    return dtype_traits_get(dtype) != NULL;
}

const char *dtype_name(int32_t dtype) {
    const dtype_traits *t = dtype_traits_get(dtype);
    return t ? t->name : "unknown";
}

int32_t dtype_from_name(const char *name) {
    if (!name) return -1;
    for (int32_t i = 0; i < TSR_DTYPE_COUNT; i++)
        if (dtype_table[i].name && !strcasecmp(dtype_table[i].name, name)) return i;
    return -1;
}

size_t dtype_row_bytes(int32_t dtype, int64_t n) {
    const dtype_traits *t = dtype_traits_get(dtype);
    if (!t || n < 0 || n % t->block_size != 0) return 0;
    return (size_t)(n / t->block_size) * t->block_bytes;
}

static const dtype_traits *row_check(int32_t dtype, int64_t n, const char *what, bool need_from) {
    const dtype_traits *t = dtype_traits_get(dtype);
    if (!t) {
        error_set("%s: unknown dtype number %d", what, (int)dtype);
        return NULL;
    }
    if (need_from ? !t->from_f32 : !t->to_f32) {
        error_set("%s: dtype %s cannot be %s by Tessera", what, t->name,
                  need_from ? "produced" : "converted to F32");
        return NULL;
    }
    if (n < 0 || n % t->block_size != 0) {
        error_set("%s: row of %lld elements is not a multiple of the %s block size %lld", what,
                  (long long)n, t->name, (long long)t->block_size);
        return NULL;
    }
    return t;
}

int dtype_quantize_row(int32_t dtype, const float *src, void *dst, int64_t n) {
    const dtype_traits *t = row_check(dtype, n, "quantize", true);
    if (!t) return -1;
    t->from_f32(src, dst, n);
    return 0;
}

int dtype_dequantize_row(int32_t dtype, const void *src, float *dst, int64_t n) {
    const dtype_traits *t = row_check(dtype, n, "dequantize", false);
    if (!t) return -1;
    t->to_f32(src, dst, n);
    return 0;
}
