/*
 * quant_blocks — the byte layout of every GGUF block format Tessera
 * implements, and the per-type reference conversions behind dtype.h.
 *
 * Layouts are GGUF's (llama.cpp's ggml-common.h): little-endian, packed, no
 * padding; fp16 fields are stored as raw IEEE half bits. The static asserts
 * pin each size to the number GGUF files use.
 *
 * Naming: quant_<type>_to_f32 (dequantize), quant_<type>_from_f32 (quantize,
 * byte-exact with llama.cpp's *_ref row quantizers), quant_<type>_dot
 * (x of <type> times y of its activation type; see dtype.h).
 */
#ifndef TESSERA_TENSOR_QUANT_BLOCKS_H
#define TESSERA_TENSOR_QUANT_BLOCKS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin_util.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

/* The block structs are plugin_util.h's (one definition for host and
 * plugins; its dtype table documents each layout byte by byte). */
typedef tsr_block_q4_0 block_q4_0;
typedef tsr_block_q4_1 block_q4_1;
typedef tsr_block_q5_0 block_q5_0;
typedef tsr_block_q5_1 block_q5_1;
typedef tsr_block_q8_0 block_q8_0;
typedef tsr_block_q8_1 block_q8_1;
typedef tsr_block_q2_K block_q2_K;
typedef tsr_block_q3_K block_q3_K;
typedef tsr_block_q4_K block_q4_K;
typedef tsr_block_q5_K block_q5_K;
typedef tsr_block_q6_K block_q6_K;
typedef tsr_block_q8_K block_q8_K;

typedef struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_NL / 2]; /* indices into the non-linear table     */
} block_iq4_nl;
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");

/* Round to nearest, ties to even, for |x| < 2^22 (llama.cpp's nearest_int:
 * adding 1.5*2^23 leaves the rounded integer in the low mantissa bits). */
static inline int quant_nearest_int(float x) {
    float v = x + 12582912.f;
    union { float f; int32_t i; } u = {v};
    return (u.i & 0x007fffff) - 0x00400000;
}

/* The element of x[0..n) of largest magnitude with its sign (the first on
 * ties; 0 when all are 0), and that magnitude in *amax: the quantizers'
 * starting scale. */
static inline float quant_signed_absmax(const float *x, int n, float *amax) {
    float a = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > a) {
            a = fabsf(x[i]);
            max = x[i];
        }
    }
    *amax = a;
    return max;
}

/* IQ4_NL's codebook search and 32-block scale fit (quant_legacy.c), which
 * IQ4_XS's quantizer (quant_iq.c) reuses per sub-block. */
int quant_iq4nl_best_index(float x);
/* weight: one per element, NULL for x^2 (the reference rule) */
float quant_iq4nl_scale(const float *x, const float *weight);

/* The scale fits the quantizers share (quant_kquants.c): make_qx_quants
 * (symmetric, weights qw or x^2 when NULL) and make_qkx2/3_quants
 * (asymmetric, a grid of nstep+1 scales from rmin in steps of rdelta). */
float quant_make_qx(int n, int nmax, const float *x, int8_t *L, const float *qw);
float quant_make_qkx(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                     uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);
/* make_qp_quants: levels 0..nmax of non-negative x, weighted by qw (the
 * first fit of Q2_K's scales and of IQ2_XXS's sub-blocks). */
float quant_make_qp(int n, int nmax, const float *x, uint8_t *L, const float *qw);
/* Importance weights qw[i] * sqrt(sigma2 + x[i]^2) into w, their sum into
 * *sumw unless NULL: how every weighted quantizer turns an importance
 * matrix's column means into per-element weights. */
void quant_imatrix_weights(const float *x, const float *qw, int n, float sigma2, float *w, float *sumw);

/* Quantizers that take an importance matrix: qw holds one weight per
 * element of the row x[0..n) (the matrix's mean squared activation of that
 * column), as llama.cpp's quantize_<type>(..., quant_weights). The types
 * not listed (Q8_0, TQ1_0, TQ2_0, F16, ...) ignore the matrix there too. */
#define QUANT_DECLARE_W(t) void quant_##t##_from_f32_w(const float *src, void *dst, int64_t n, const float *qw);
QUANT_DECLARE_W(q4_0)
QUANT_DECLARE_W(q4_1)
QUANT_DECLARE_W(q5_0)
QUANT_DECLARE_W(q5_1)
QUANT_DECLARE_W(q2_K)
QUANT_DECLARE_W(q3_K)
QUANT_DECLARE_W(q4_K)
QUANT_DECLARE_W(q5_K)
QUANT_DECLARE_W(q6_K)
QUANT_DECLARE_W(iq4_nl)
QUANT_DECLARE_W(iq4_xs)
QUANT_DECLARE_W(iq3_xxs)
QUANT_DECLARE_W(iq2_xxs) /* quant_iq2.c; these two need the matrix */
QUANT_DECLARE_W(iq2_xs)
#undef QUANT_DECLARE_W

#define QUANT_DECLARE(t)                                                     \
    void quant_##t##_to_f32(const void *src, float *dst, int64_t n);         \
    void quant_##t##_from_f32(const float *src, void *dst, int64_t n);      \
    void quant_##t##_dot(int64_t n, float *out, const void *x, const void *y);

QUANT_DECLARE(f32)
QUANT_DECLARE(f16)
QUANT_DECLARE(bf16)
QUANT_DECLARE(q4_0)
QUANT_DECLARE(q4_1)
QUANT_DECLARE(q5_0)
QUANT_DECLARE(q5_1)
QUANT_DECLARE(q8_0)
QUANT_DECLARE(q8_1)
QUANT_DECLARE(iq4_nl)
QUANT_DECLARE(q2_K)
QUANT_DECLARE(q3_K)
QUANT_DECLARE(q4_K)
QUANT_DECLARE(q5_K)
QUANT_DECLARE(q6_K)
QUANT_DECLARE(q8_K)
QUANT_DECLARE(iq4_xs)
QUANT_DECLARE(iq3_xxs) /* quant_iq_grid.c */
/* quant_iq1.c: IQ1_S in dtype.c; IQ1_M not yet (see docs/quantize.md) */
void quant_iq1_s_from_f32_w(const float *x, void *dst, int64_t n, const float *qw);
void quant_iq1_m_from_f32_w(const float *x, void *dst, int64_t n, const float *qw);
QUANT_DECLARE(tq1_0)
QUANT_DECLARE(tq2_0)
QUANT_DECLARE(mxfp4)

/* The other grid IQ formats: read and dotted, not produced (quant_iq.c). */
#define QUANT_DECLARE_READ(t)                                                \
    void quant_##t##_to_f32(const void *src, float *dst, int64_t n);         \
    void quant_##t##_dot(int64_t n, float *out, const void *x, const void *y);

QUANT_DECLARE_READ(iq2_xxs)
QUANT_DECLARE_READ(iq2_xs)
QUANT_DECLARE_READ(iq2_s)
QUANT_DECLARE_READ(iq3_s)
QUANT_DECLARE_READ(iq1_s)
QUANT_DECLARE_READ(iq1_m)

#undef QUANT_DECLARE_READ

/* IQ3_S and IQ2_S are also produced (quant_iq3s.c). */
void quant_iq3_s_from_f32(const float *src, void *dst, int64_t n);
void quant_iq3_s_from_f32_w(const float *src, void *dst, int64_t n, const float *qw);
void quant_iq2_s_from_f32(const float *src, void *dst, int64_t n);
void quant_iq2_s_from_f32_w(const float *src, void *dst, int64_t n, const float *qw);

#undef QUANT_DECLARE

#endif
