/*
 * tessera/plugin_util.h — tables and helpers a plugin needs next to
 * tessera/plugin.h (ABI 1.1): the op table (names, source counts), typed
 * readers of each op's parameters, the full dtype table (block size,
 * bytes per block, byte layout), the block structs of the formats plugins
 * most often compute, and fp16/bf16 conversions bit-exact with the host's.
 *
 * Header-only, C99, includes <math.h>, <stdint.h>, <string.h> and
 * tessera/plugin.h (link with -lm when you use the parameter accessors).
 * Everything here is static inline: include it from as many files as you
 * like; nothing is exported and unused helpers cost nothing.
 */
#ifndef TESSERA_PLUGIN_UTIL_H
#define TESSERA_PLUGIN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ op table */

/* One row of TSR_OPS (tessera/plugin.h). */
typedef struct tsr_op_traits {
    const char *name;  /* "MUL_MAT"                                           */
    const char *lower; /* "mul_mat": the host's node names and messages       */
    int32_t min_src;   /* sources the op needs                                */
    int32_t max_src;   /* sources it may read (the extra ones are optional)   */
    int32_t abi_minor; /* the ABI minor version that added it (1.abi_minor)  */
} tsr_op_traits;

/* The row of op, or NULL for numbers this ABI lacks. */
static inline const tsr_op_traits *tsr_op_traits_get(int32_t op) {
#define TSR_OP_ROW_(o, lower, number, min_src, max_src, minor) [TSR_OP_##o] = {#o, lower, min_src, max_src, minor},
    static const tsr_op_traits table[] = {TSR_OPS(TSR_OP_ROW_)};
#undef TSR_OP_ROW_
    (void)sizeof(char[sizeof table / sizeof table[0] == TSR_OP_COUNT ? 1 : -1]); /* one row per op */
    return op >= 0 && op < TSR_OP_COUNT ? &table[op] : NULL;
}

/* "MUL_MAT" for TSR_OP_MUL_MAT; "unknown" for numbers this ABI lacks. */
static inline const char *tsr_op_name(int32_t op) {
    const tsr_op_traits *t = tsr_op_traits_get(op);
    return t ? t->name : "unknown";
}

/* ------------------------------------------------------------- dtype table */

/*
 * One row per GGUF type number. A row of a tensor of this dtype holds
 * ne[0] / block_size blocks of block_bytes bytes each; nb[0] == block_bytes.
 * Layouts are GGUF's (little-endian, packed, no padding; "d" fields are
 * scales stored as IEEE half bits unless said otherwise). Quantized dtypes
 * dequantize as x = d * q (symmetric) or x = d * q + m (with a minimum).
 */
typedef struct tsr_dtype_traits {
    const char *name;    /* "Q4_K"; NULL: the number is not a dtype      */
    int32_t block_size;  /* elements per block (1 for plain types)        */
    int32_t block_bytes; /* bytes per block                               */
    int32_t quantized;   /* 1 for block formats                           */
    int32_t is_float;    /* 1 for F32, F16, BF16 (F64 is data only)       */
    const char *layout;  /* the bytes of one block, in order              */
} tsr_dtype_traits;

/*
 * Every dtype's geometry, once: X(SUFFIX, name, block_size, block_bytes,
 * quantized, is_float, layout) per GGUF type number TSR_DTYPE_<SUFFIX>.
 * tsr_dtype_traits_get below and the host's own dtype table both expand it,
 * so the two can never disagree.
 */
#define TSR_DTYPE_GEOMETRY(X) \
    X(F32, "F32", 1, 4, 0, 1, \
      "IEEE binary32") \
    X(F16, "F16", 1, 2, 0, 1, \
      "IEEE binary16") \
    X(BF16, "BF16", 1, 2, 0, 1, \
      "upper 16 bits of binary32") \
    X(Q4_0, "Q4_0", 32, 18, 1, 0, \
      "f16 d; u8 qs[16]: element j low nibble of qs[j], j+16 high; x = d*(q-8)") \
    X(Q4_1, "Q4_1", 32, 20, 1, 0, \
      "f16 d, m; u8 qs[16] as Q4_0; x = d*q + m") \
    X(Q5_0, "Q5_0", 32, 22, 1, 0, \
      "f16 d; u8 qh[4] (bit j: 5th bit of element j); u8 qs[16] as Q4_0; x = d*(q-16)") \
    X(Q5_1, "Q5_1", 32, 24, 1, 0, \
      "f16 d, m; u8 qh[4]; u8 qs[16]; x = d*q + m") \
    X(Q8_0, "Q8_0", 32, 34, 1, 0, \
      "f16 d; i8 qs[32]; x = d*q") \
    X(Q8_1, "Q8_1", 32, 36, 1, 0, \
      "f16 d; f16 s = d*sum(qs); i8 qs[32]; x = d*q") \
    X(Q2_K, "Q2_K", 256, 84, 1, 0, \
      "u8 scales[16] (low nibble scale, high min); u8 qs[64] (2 bits); f16 d, dmin") \
    X(Q3_K, "Q3_K", 256, 110, 1, 0, \
      "u8 hmask[32] (high bits); u8 qs[64] (low 2 bits); u8 scales[12] (16 x 6 bits); f16 d") \
    X(Q4_K, "Q4_K", 256, 144, 1, 0, \
      "f16 d, dmin; u8 scales[12] (8 scales + 8 mins, 6 bits); u8 qs[128]") \
    X(Q5_K, "Q5_K", 256, 176, 1, 0, \
      "f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]") \
    X(Q6_K, "Q6_K", 256, 210, 1, 0, \
      "u8 ql[128] (low 4 bits); u8 qh[64] (high 2 bits); i8 scales[16]; f16 d") \
    X(Q8_K, "Q8_K", 256, 292, 1, 0, \
      "f32 d; i8 qs[256]; i16 bsums[16] (sums of 16 qs)") \
    X(IQ2_XXS, "IQ2_XXS", 256, 66, 1, 0, \
      "f16 d; u16 qs[32] (grid indices, signs, scales)") \
    X(IQ2_XS, "IQ2_XS", 256, 74, 1, 0, \
      "f16 d; u16 qs[32]; u8 scales[8]") \
    X(IQ3_XXS, "IQ3_XXS", 256, 98, 1, 0, \
      "f16 d; u8 qs[96]") \
    X(IQ1_S, "IQ1_S", 256, 50, 1, 0, \
      "f16 d; u8 qs[32]; u16 qh[8]") \
    X(IQ4_NL, "IQ4_NL", 32, 18, 1, 0, \
      "f16 d; u8 qs[16] as Q4_0, nibbles index a 16-entry table") \
    X(IQ3_S, "IQ3_S", 256, 110, 1, 0, \
      "f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]") \
    X(IQ2_S, "IQ2_S", 256, 82, 1, 0, \
      "f16 d; u8 qs[64]; u8 qh[8]; u8 scales[8]") \
    X(IQ4_XS, "IQ4_XS", 256, 136, 1, 0, \
      "f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]") \
    X(I8, "I8", 1, 1, 0, 0, \
      "int8") \
    X(I16, "I16", 1, 2, 0, 0, \
      "int16") \
    X(I32, "I32", 1, 4, 0, 0, \
      "int32") \
    X(I64, "I64", 1, 8, 0, 0, \
      "int64") \
    X(F64, "F64", 1, 8, 0, 0, \
      "IEEE binary64") \
    X(IQ1_M, "IQ1_M", 256, 56, 1, 0, \
      "u8 qs[32]; u8 qh[16]; u8 scales[8] (scale bits inside)") \
    X(TQ1_0, "TQ1_0", 256, 54, 1, 0, \
      "u8 qs[48] (base-3); u8 qh[4]; f16 d") \
    X(TQ2_0, "TQ2_0", 256, 66, 1, 0, \
      "u8 qs[64] (2 bits); f16 d") \
    X(MXFP4, "MXFP4", 32, 17, 1, 0, \
      "u8 e (E8M0 scale); u8 qs[16] (E2M1 nibbles)")

static inline const tsr_dtype_traits *tsr_dtype_traits_get(int32_t dtype) {
#define TSR_TRAITS_ROW_(e, n, bs, b, q, f, l) [TSR_DTYPE_##e] = {n, bs, b, q, f, l},
    static const tsr_dtype_traits table[TSR_DTYPE_COUNT] = {TSR_DTYPE_GEOMETRY(TSR_TRAITS_ROW_)};
#undef TSR_TRAITS_ROW_
    if (dtype < 0 || dtype >= TSR_DTYPE_COUNT || !table[dtype].name) return NULL;
    return &table[dtype];
}

/* "Q4_K"; "unknown" for numbers that are not dtypes. */
static inline const char *tsr_dtype_name(int32_t dtype) {
    const tsr_dtype_traits *t = tsr_dtype_traits_get(dtype);
    return t ? t->name : "unknown";
}

static inline int tsr_dtype_is_float(int32_t dtype) {
    return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_F16 || dtype == TSR_DTYPE_BF16;
}

static inline int tsr_dtype_is_quantized(int32_t dtype) {
    const tsr_dtype_traits *t = tsr_dtype_traits_get(dtype);
    return t && t->quantized;
}

/* Bytes of one contiguous row of n elements; 0 if n is not whole blocks. */
static inline uint64_t tsr_dtype_row_bytes(int32_t dtype, int64_t n) {
    const tsr_dtype_traits *t = tsr_dtype_traits_get(dtype);
    if (!t || n < 0 || n % t->block_size) return 0;
    return (uint64_t)(n / t->block_size) * (uint64_t)t->block_bytes;
}

/* ------------------------------------------------------------ block structs */

/* The formats CPU and GPU kernels most often read, as C structs (sizes pinned
 * below). Half fields hold raw binary16 bits: convert with tsr_fp16_to_f32. */
typedef struct tsr_block_q4_0 { uint16_t d; uint8_t qs[16]; } tsr_block_q4_0;
typedef struct tsr_block_q4_1 { uint16_t d, m; uint8_t qs[16]; } tsr_block_q4_1;
typedef struct tsr_block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } tsr_block_q5_0;
typedef struct tsr_block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; } tsr_block_q5_1;
typedef struct tsr_block_q8_0 { uint16_t d; int8_t qs[32]; } tsr_block_q8_0;
typedef struct tsr_block_q8_1 { uint16_t d, s; int8_t qs[32]; } tsr_block_q8_1;
typedef struct tsr_block_q2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } tsr_block_q2_K;
typedef struct tsr_block_q3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } tsr_block_q3_K;
typedef struct tsr_block_q4_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } tsr_block_q4_K;
typedef struct tsr_block_q5_K { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } tsr_block_q5_K;
typedef struct tsr_block_q6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } tsr_block_q6_K;
typedef struct tsr_block_q8_K { float d; int8_t qs[256]; int16_t bsums[16]; } tsr_block_q8_K;

/* C99 has no static_assert: a negative array size fails the build. */
#define TSR_SIZE_CHECK_(type, bytes) typedef char type##_size_check_[sizeof(type) == (bytes) ? 1 : -1]
TSR_SIZE_CHECK_(tsr_block_q4_0, 18);
TSR_SIZE_CHECK_(tsr_block_q4_1, 20);
TSR_SIZE_CHECK_(tsr_block_q5_0, 22);
TSR_SIZE_CHECK_(tsr_block_q5_1, 24);
TSR_SIZE_CHECK_(tsr_block_q8_0, 34);
TSR_SIZE_CHECK_(tsr_block_q8_1, 36);
TSR_SIZE_CHECK_(tsr_block_q2_K, 84);
TSR_SIZE_CHECK_(tsr_block_q3_K, 110);
TSR_SIZE_CHECK_(tsr_block_q4_K, 144);
TSR_SIZE_CHECK_(tsr_block_q5_K, 176);
TSR_SIZE_CHECK_(tsr_block_q6_K, 210);
TSR_SIZE_CHECK_(tsr_block_q8_K, 292);
#undef TSR_SIZE_CHECK_

/* -------------------------------------------------------------- fp16, bf16 */

static inline uint32_t tsr_f32_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

static inline float tsr_f32_from_bits(uint32_t x) {
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Exact: every half is a float. Inf and NaN keep sign and payload. */
static inline float tsr_fp16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return tsr_f32_from_bits(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) { /* zero or subnormal: mant * 2^-24 */
        const float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return tsr_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Round to nearest, ties to even (as F16C and ggml); values from 65520 up
 * become infinity; NaN becomes a quiet NaN with its sign. */
static inline uint16_t tsr_f32_to_fp16(float f) {
    uint32_t x = tsr_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) {
        /* below 2^-14: the half is round(|f| * 2^24); adding 2^23 rounds */
        const float v = tsr_f32_from_bits(x) * 0x1p24f;
        const float r = (v + 8388608.f) - 8388608.f;
        return (uint16_t)(sign | (uint16_t)r);
    }
    x += 0xfffu + ((x >> 13) & 1u); /* a carry into the exponent is right */
    return (uint16_t)(sign | (uint16_t)((x - (112u << 23)) >> 13));
}

static inline float tsr_bf16_to_f32(uint16_t h) { return tsr_f32_from_bits((uint32_t)h << 16); }

/* Round to nearest, ties to even; NaN stays a quiet NaN. */
static inline uint16_t tsr_f32_to_bf16(float f) {
    const uint32_t x = tsr_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* --------------------------------------------------------------- parameters */

/*
 * One struct per op that has parameters, read from the node's named slots
 * (tessera/plugin.h: TSR_<OP>_I_* / TSR_<OP>_F_*), and the matching _put
 * that the host uses to write them, so the two sides cannot disagree on a
 * slot. Values every backend derives from the parameters (ROPE's theta
 * scale and YaRN correction dims, SOFT_MAX's ALiBi bases) are computed here
 * once, with the float operations ref uses; a GPU plugin passes them to its
 * kernels instead of computing them again.
 */

typedef struct tsr_scale_params {
    float scale, bias; /* dst = src0 * scale + bias */
} tsr_scale_params;

static inline tsr_scale_params tsr_scale_params_of(const tsr_node *n) {
    tsr_scale_params p = {n->fparams[TSR_SCALE_F_SCALE], n->fparams[TSR_SCALE_F_BIAS]};
    return p;
}

static inline void tsr_scale_params_put(const tsr_scale_params *p, int32_t *iparams, float *fparams) {
    (void)iparams;
    fparams[TSR_SCALE_F_SCALE] = p->scale;
    fparams[TSR_SCALE_F_BIAS] = p->bias;
}

typedef struct tsr_swiglu_oai_params {
    float alpha, limit; /* g = min(gate, limit): g * sigmoid(alpha g) * (clamp(up, +-limit) + 1) */
} tsr_swiglu_oai_params;

static inline tsr_swiglu_oai_params tsr_swiglu_oai_params_of(const tsr_node *n) {
    tsr_swiglu_oai_params p = {n->fparams[TSR_SWIGLU_OAI_F_ALPHA], n->fparams[TSR_SWIGLU_OAI_F_LIMIT]};
    return p;
}

static inline void tsr_swiglu_oai_params_put(const tsr_swiglu_oai_params *p, int32_t *iparams, float *fparams) {
    (void)iparams;
    fparams[TSR_SWIGLU_OAI_F_ALPHA] = p->alpha;
    fparams[TSR_SWIGLU_OAI_F_LIMIT] = p->limit;
}

/* DELTA_NET (ABI 1.5): q and k divided by max(L2 norm, eps), q times
 * scale; v head h reads q/k head h % Hk (kv_tiled 1) or h / (H / Hk) (0). */
typedef struct tsr_delta_net_params {
    float eps, scale;
    int32_t kv_tiled;
} tsr_delta_net_params;

static inline tsr_delta_net_params tsr_delta_net_params_of(const tsr_node *n) {
    tsr_delta_net_params p = {n->fparams[TSR_DELTA_NET_F_EPS], n->fparams[TSR_DELTA_NET_F_SCALE],
                              n->iparams[TSR_DELTA_NET_I_KV_TILED]};
    return p;
}

static inline void tsr_delta_net_params_put(const tsr_delta_net_params *p, int32_t *iparams, float *fparams) {
    iparams[TSR_DELTA_NET_I_KV_TILED] = p->kv_tiled;
    fparams[TSR_DELTA_NET_F_EPS] = p->eps;
    fparams[TSR_DELTA_NET_F_SCALE] = p->scale;
}

typedef struct tsr_norm_params {
    float eps; /* RMS_NORM and NORM */
} tsr_norm_params;

static inline tsr_norm_params tsr_norm_params_of(const tsr_node *n) {
    tsr_norm_params p = {n->fparams[TSR_NORM_F_EPS]};
    return p;
}

static inline void tsr_norm_params_put(const tsr_norm_params *p, int32_t *iparams, float *fparams) {
    (void)iparams;
    fparams[TSR_NORM_F_EPS] = p->eps;
}

typedef struct tsr_rope_params {
    int32_t n_dims;     /* elements rotated at the start of each head    */
    int32_t mode;       /* TSR_ROPE_NORMAL or TSR_ROPE_NEOX              */
    int32_t n_ctx_orig; /* YaRN: the context the model was trained on    */
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    /* ---- derived by tsr_rope_params_of (not stored in the node) ---- */
    float theta_scale;  /* freq_base^(-2/n_dims): theta_{i+1} = theta_i * theta_scale */
    float corr_dims[2]; /* YaRN: ramp from 1 below corr_dims[0] to 0 above corr_dims[1] */
    float yarn_mscale;  /* YaRN: 1 + 0.1 ln(1/freq_scale), times attn_factor when ext_factor != 0 */
} tsr_rope_params;

/* The dimension where YaRN's correction for n_rot rotations falls: solve
 * n_rot = n_ctx_orig / (2 pi base^(2 d / n_dims)) for d (ggml's
 * ggml_rope_yarn_corr_dim). */
static inline float tsr_rope_yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * 3.14159265358979323846f)) /
           (2.0f * logf(base));
}

static inline tsr_rope_params tsr_rope_params_of(const tsr_node *n) {
    tsr_rope_params p;
    p.n_dims = n->iparams[TSR_ROPE_I_N_DIMS];
    p.mode = n->iparams[TSR_ROPE_I_MODE];
    p.n_ctx_orig = n->iparams[TSR_ROPE_I_N_CTX_ORIG];
    p.freq_base = n->fparams[TSR_ROPE_F_FREQ_BASE];
    p.freq_scale = n->fparams[TSR_ROPE_F_FREQ_SCALE];
    p.ext_factor = n->fparams[TSR_ROPE_F_EXT_FACTOR];
    p.attn_factor = n->fparams[TSR_ROPE_F_ATTN_FACTOR];
    p.beta_fast = n->fparams[TSR_ROPE_F_BETA_FAST];
    p.beta_slow = n->fparams[TSR_ROPE_F_BETA_SLOW];
    p.theta_scale = powf(p.freq_base, -2.0f / (float)p.n_dims);
    const float start = floorf(tsr_rope_yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float end = ceilf(tsr_rope_yarn_corr_dim(p.n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
    p.corr_dims[0] = fmaxf(0.0f, start);
    p.corr_dims[1] = fminf((float)(p.n_dims - 1), end);
    p.yarn_mscale = 1.0f + 0.1f * logf(1.0f / p.freq_scale);
    return p;
}

static inline void tsr_rope_params_put(const tsr_rope_params *p, int32_t *iparams, float *fparams) {
    iparams[TSR_ROPE_I_N_DIMS] = p->n_dims;
    iparams[TSR_ROPE_I_MODE] = p->mode;
    iparams[TSR_ROPE_I_N_CTX_ORIG] = p->n_ctx_orig;
    fparams[TSR_ROPE_F_FREQ_BASE] = p->freq_base;
    fparams[TSR_ROPE_F_FREQ_SCALE] = p->freq_scale;
    fparams[TSR_ROPE_F_EXT_FACTOR] = p->ext_factor;
    fparams[TSR_ROPE_F_ATTN_FACTOR] = p->attn_factor;
    fparams[TSR_ROPE_F_BETA_FAST] = p->beta_fast;
    fparams[TSR_ROPE_F_BETA_SLOW] = p->beta_slow;
}

typedef struct tsr_soft_max_params {
    float scale, max_bias; /* softmax(x * scale + slope_h * mask); max_bias 0: slope 1 */
    /* ---- derived by tsr_soft_max_params_of: ALiBi as ggml defines it ---- */
    int64_t n_head_log2; /* largest power of two <= the heads (src0 ne[2]) */
    float m0, m1;        /* slope of head h: m0^(h+1) below n_head_log2, else m1^(2(h-n_head_log2)+1) */
} tsr_soft_max_params;

static inline tsr_soft_max_params tsr_soft_max_params_of(const tsr_node *n) {
    tsr_soft_max_params p;
    p.scale = n->fparams[TSR_SOFT_MAX_F_SCALE];
    p.max_bias = n->fparams[TSR_SOFT_MAX_F_MAX_BIAS];
    p.n_head_log2 = 1;
    while (p.n_head_log2 * 2 <= n->src[0]->ne[2]) p.n_head_log2 *= 2;
    p.m0 = powf(2.0f, -p.max_bias / (float)p.n_head_log2);
    p.m1 = powf(2.0f, -(p.max_bias / 2.0f) / (float)p.n_head_log2);
    return p;
}

/* ALiBi slope of head h; 1 when max_bias is 0. */
static inline float tsr_soft_max_slope(const tsr_soft_max_params *p, int64_t h) {
    if (p->max_bias <= 0.0f) return 1.0f;
    return h < p->n_head_log2 ? powf(p->m0, (float)(h + 1)) : powf(p->m1, (float)(2 * (h - p->n_head_log2) + 1));
}

static inline void tsr_soft_max_params_put(const tsr_soft_max_params *p, int32_t *iparams, float *fparams) {
    (void)iparams;
    fparams[TSR_SOFT_MAX_F_SCALE] = p->scale;
    fparams[TSR_SOFT_MAX_F_MAX_BIAS] = p->max_bias;
}

typedef struct tsr_concat_params {
    int32_t dim; /* 0..3 */
} tsr_concat_params;

static inline tsr_concat_params tsr_concat_params_of(const tsr_node *n) {
    tsr_concat_params p = {n->iparams[TSR_CONCAT_I_DIM]};
    return p;
}

static inline void tsr_concat_params_put(const tsr_concat_params *p, int32_t *iparams, float *fparams) {
    (void)fparams;
    iparams[TSR_CONCAT_I_DIM] = p->dim;
}

typedef struct tsr_flash_attn_params {
    float scale;    /* applied to q.k before the mask */
    float max_bias; /* reserved: 0 in this ABI */
    float softcap;  /* reserved: 0 in this ABI */
} tsr_flash_attn_params;

static inline tsr_flash_attn_params tsr_flash_attn_params_of(const tsr_node *n) {
    tsr_flash_attn_params p = {n->fparams[TSR_FLASH_ATTN_F_SCALE], n->fparams[TSR_FLASH_ATTN_F_MAX_BIAS],
                               n->fparams[TSR_FLASH_ATTN_F_SOFTCAP]};
    return p;
}

static inline void tsr_flash_attn_params_put(const tsr_flash_attn_params *p, int32_t *iparams, float *fparams) {
    (void)iparams;
    fparams[TSR_FLASH_ATTN_F_SCALE] = p->scale;
    fparams[TSR_FLASH_ATTN_F_MAX_BIAS] = p->max_bias;
    fparams[TSR_FLASH_ATTN_F_SOFTCAP] = p->softcap;
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_UTIL_H */
