/*
 * dtype — the table of every GGUF type number: name, block geometry and the
 * reference conversions (quant_blocks.h) Tessera implements for it.
 */
#include <stdio.h>
#include <strings.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "util/error.h"

/* What Tessera computes for each type: its reference conversions and the
 * activation type of its dot product. The geometry (name, block size and
 * bytes) is plugin_util.h's TSR_DTYPE_GEOMETRY; every type it lists needs a
 * COMPUTE_<type> here, so a dtype added there fails to build until this
 * table says what Tessera does with it. */
#define COMPUTES(t, vdt) \
    .supported = true, .to_f32 = quant_##t##_to_f32, .from_f32 = quant_##t##_from_f32, \
    .vec_dot_type = vdt, .vec_dot = quant_##t##_dot
/* The quantizer also takes an importance matrix (quant_<t>_from_f32_w). */
#define WEIGHTED(t) .from_f32_w = quant_##t##_from_f32_w
/* Read and computed, but produced only by llama.cpp's importance-matrix
 * search (the grid IQ formats): no quantizer, or (with WEIGHTED) one that
 * needs an importance matrix, as llama.cpp's does (IQ2_XXS, IQ2_XS, IQ1_S). */
#define READS(t, vdt) \
    .supported = true, .to_f32 = quant_##t##_to_f32, .from_f32 = NULL, .vec_dot_type = vdt, \
    .vec_dot = quant_##t##_dot
/* Known to GGUF, sized, but not computed by Tessera. */
#define NOT_COMPUTED .supported = false, .vec_dot_type = -1

#define COMPUTE_F32 COMPUTES(f32, TSR_DTYPE_F32)
#define COMPUTE_F16 COMPUTES(f16, TSR_DTYPE_F32)
#define COMPUTE_BF16 COMPUTES(bf16, TSR_DTYPE_F32)
#define COMPUTE_Q4_0 COMPUTES(q4_0, TSR_DTYPE_Q8_0), WEIGHTED(q4_0)
#define COMPUTE_Q4_1 COMPUTES(q4_1, TSR_DTYPE_Q8_1), WEIGHTED(q4_1)
#define COMPUTE_Q5_0 COMPUTES(q5_0, TSR_DTYPE_Q8_0), WEIGHTED(q5_0)
#define COMPUTE_Q5_1 COMPUTES(q5_1, TSR_DTYPE_Q8_1), WEIGHTED(q5_1)
#define COMPUTE_Q8_0 COMPUTES(q8_0, TSR_DTYPE_Q8_0)
/* Q8_1 is an activation type: no weight dot product of its own */
#define COMPUTE_Q8_1 \
    .supported = true, .to_f32 = quant_q8_1_to_f32, .from_f32 = quant_q8_1_from_f32, .vec_dot_type = -1
#define COMPUTE_Q2_K COMPUTES(q2_K, TSR_DTYPE_Q8_K), WEIGHTED(q2_K)
#define COMPUTE_Q3_K COMPUTES(q3_K, TSR_DTYPE_Q8_K), WEIGHTED(q3_K)
#define COMPUTE_Q4_K COMPUTES(q4_K, TSR_DTYPE_Q8_K), WEIGHTED(q4_K)
#define COMPUTE_Q5_K COMPUTES(q5_K, TSR_DTYPE_Q8_K), WEIGHTED(q5_K)
#define COMPUTE_Q6_K COMPUTES(q6_K, TSR_DTYPE_Q8_K), WEIGHTED(q6_K)
#define COMPUTE_Q8_K COMPUTES(q8_K, TSR_DTYPE_Q8_K)
#define COMPUTE_IQ4_NL COMPUTES(iq4_nl, TSR_DTYPE_Q8_0), WEIGHTED(iq4_nl)
#define COMPUTE_IQ2_XXS READS(iq2_xxs, TSR_DTYPE_Q8_K), WEIGHTED(iq2_xxs)
#define COMPUTE_IQ2_XS READS(iq2_xs, TSR_DTYPE_Q8_K), WEIGHTED(iq2_xs)
#define COMPUTE_IQ3_XXS COMPUTES(iq3_xxs, TSR_DTYPE_Q8_K), WEIGHTED(iq3_xxs)
#define COMPUTE_IQ1_S READS(iq1_s, TSR_DTYPE_Q8_K), WEIGHTED(iq1_s)
#define COMPUTE_IQ3_S COMPUTES(iq3_s, TSR_DTYPE_Q8_K), WEIGHTED(iq3_s)
#define COMPUTE_IQ2_S COMPUTES(iq2_s, TSR_DTYPE_Q8_K), WEIGHTED(iq2_s)
#define COMPUTE_IQ4_XS COMPUTES(iq4_xs, TSR_DTYPE_Q8_K), WEIGHTED(iq4_xs)
#define COMPUTE_I8 NOT_COMPUTED
#define COMPUTE_I16 NOT_COMPUTED
#define COMPUTE_I32 NOT_COMPUTED
#define COMPUTE_I64 NOT_COMPUTED
#define COMPUTE_F64 NOT_COMPUTED
#define COMPUTE_IQ1_M READS(iq1_m, TSR_DTYPE_Q8_K)
#define COMPUTE_TQ1_0 COMPUTES(tq1_0, TSR_DTYPE_Q8_K)
#define COMPUTE_TQ2_0 COMPUTES(tq2_0, TSR_DTYPE_Q8_K)
#define COMPUTE_MXFP4 COMPUTES(mxfp4, TSR_DTYPE_Q8_0)

#define DTYPE_ROW(e, nm, bs, bytes, q, f, layout) \
    [TSR_DTYPE_##e] = {.name = nm, .block_size = bs, .block_bytes = bytes, .quantized = q, COMPUTE_##e},

/* Numbers 4, 5 (Q4_2, Q4_3) and 31-33, 36-38 (repacked Q4_0/IQ4_NL
 * variants) were removed from GGUF; they have no entry and are unknown. */
static const dtype_traits dtype_table[TSR_DTYPE_COUNT] = {TSR_DTYPE_GEOMETRY(DTYPE_ROW)};

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
    if (need_from ? !t->from_f32 && !t->from_f32_w : !t->to_f32) {
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
    return dtype_quantize_row_w(dtype, src, dst, n, NULL);
}

int dtype_quantize_row_w(int32_t dtype, const float *src, void *dst, int64_t n, const float *qw) {
    const dtype_traits *t = row_check(dtype, n, "quantize", true);
    if (!t) return -1;
    if (!qw && !t->from_f32)
        return error_set("quantize: %s needs an importance matrix (its grid search weighs every "
                         "element by it; llama.cpp refuses without one too)", t->name);
    if (qw && t->from_f32_w)
        t->from_f32_w(src, dst, n, qw);
    else
        t->from_f32(src, dst, n);
    return 0;
}

int dtype_dequantize_row(int32_t dtype, const void *src, float *dst, int64_t n) {
    const dtype_traits *t = row_check(dtype, n, "dequantize", false);
    if (!t) return -1;
    t->to_f32(src, dst, n);
    return 0;
}
