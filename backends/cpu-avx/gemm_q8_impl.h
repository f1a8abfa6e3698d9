/*
 * gemm_q8_impl.h — the packed-panel GEMM (cpu_gemm.h) of every quantized weight
 * type, at every level: included by each kernels_<level>.c after
 * kernels_impl.h, its width (zmm or ymm) and product instruction (vpdpbusd,
 * or vpmaddubsw + vpmaddwd) picked by KERNELS_AVX512 and KERNELS_VNNI.
 *
 * Every quantized type is, per group of S = 32 (or 16) elements of a row,
 *     w_k = scale_g * q_k + minc_g        (q_k a small integer)
 * e.g. Q4_0: q = nibble - 8, scale = d, no min; Q4_K: q = nibble, scale =
 * d * sc_j, minc = -dmin * m_j. With 8-bit activations a_k = ad_g * qa_k
 * (the same Q8_0 / Q8_1 / Q8_K quantization as the dot kernels), a row's
 * dot with a column is
 *     sum_g  scale_g * ad_g * sum_k q_k qa_k  +  minc_g * ad_g * sum_k qa_k.
 *
 * Weight panel: 16 rows, one per 32-bit lane of a zmm register (of two ymm
 * registers, rows 0-7 and 8-15, on the AVX2 levels); for each group g
 * (gstride bytes, in order):
 *     int8  q[S/4][16][4]   q[i][r][j] = element 4i + j of the group, row r
 *     int32 bias[16]        -128 * (sum of the group's q) for row r
 *                           (0 for Q8_0 without VNNI, see GQ_SIGNED_Q8)
 *     f32   scale[16]
 *     f32   minc[16]        (types with a min only)
 * Activations, in tiles of GQ_NC = 8 columns; for each group g:
 *     uint8 qs[8][S]        qa + 128: vpdpbusd multiplies u8 by s8
 *     f32   ad[8]           the activation scale of the group's block
 *     f32   as[8]           ad * sum of the group's qa (for the min)
 * so one vpdpbusd of 4 broadcast activation bytes with q[i] adds 4 products
 * to each of the 16 rows, the sum starts from bias (undoing the +128), and
 * one convert and two FMAs per group and column apply the scales: about 12
 * instructions per 16 x 32 products, against 4 per 64 in the dot kernels.
 * Without VNNI each vpdpbusd is three instructions (gq_dp).
 *
 * Straightforward version: the plain C dot kernels of cpu_mm_quants.c.
 */
#include "cpu_quants_decode.h"

enum { GQ_ROWS = 16, GQ_NC = 8 };

/* The tile loops must unroll fully so p[] and acc[] live in registers. */
#define GQ_UNROLL _Pragma("GCC unroll 8")

/* One weight type: group size, whether it has a min, which activation
 * quantization it pairs with (llama.cpp's vec_dot_type), and the decoder
 * of one block into q, per-group scale and min. */
typedef struct gq_type {
    int S;
    int has_min;
    int act_k; /* 1: Q8_K activations (256-blocks), 0: Q8_0 / Q8_1 (32-blocks) */
    int sgn;   /* activations stay signed (no +128, no bias): GQ_SIGNED_Q8 */
    int block;
    size_t block_bytes;
    void (*decode)(const void *blk, int8_t *q, float *scale, float *minc);
} gq_type;

/* ------------------------------------------------------------ decoders */

/* The 32-block ones use kernels_impl.h's load_nibbles_q4 (the 32 nibble
 * values of a block) and q5_high_bits (its fifth bits as 0x10 bytes). */

static void gq_decode_q4_0(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q4_0 *b = blk;
    (void)mn;
    _mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(load_nibbles_q4(b->qs), _mm256_set1_epi8(8)));
    sc[0] = f16s(b->d);
}

static void gq_decode_q4_1(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q4_1 *b = blk;
    _mm256_storeu_si256((__m256i *)q, load_nibbles_q4(b->qs));
    sc[0] = f16s(b->d);
    mn[0] = f16s(b->m);
}

static void gq_decode_q5_0(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q5_0 *b = blk;
    (void)mn;
    __m256i v = _mm256_or_si256(load_nibbles_q4(b->qs), q5_high_bits(b->qh));
    _mm256_storeu_si256((__m256i *)q, _mm256_sub_epi8(v, _mm256_set1_epi8(16)));
    sc[0] = f16s(b->d);
}

static void gq_decode_q5_1(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q5_1 *b = blk;
    _mm256_storeu_si256((__m256i *)q, _mm256_or_si256(load_nibbles_q4(b->qs), q5_high_bits(b->qh)));
    sc[0] = f16s(b->d);
    mn[0] = f16s(b->m);
}

static void gq_decode_q8_0(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q8_0 *b = blk;
    (void)mn;
    memcpy(q, b->qs, 32);
    sc[0] = f16s(b->d);
}

/* Q2_K / Q3_K: vector versions of decode_q2k / decode_q3k: element 128n +
 * 32j + l has bits 2j..2j+1 of qs[32n + l] (and, for Q3_K, bit 4n + j of
 * hmask[l], clear meaning -4). 16-bit shifts are safe: the mask after the
 * shift keeps only bits that came from the same byte. */
static void gq_decode_q2_k(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q2_k *b = blk;
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int n = 0; n < 2; n++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * n));
        for (int j = 0; j < 4; j++)
            _mm256_storeu_si256((__m256i *)(q + 128 * n + 32 * j), _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m2));
    }
    const float d = f16s(b->d), dmin = f16s(b->dmin);
    for (int g = 0; g < 16; g++) {
        sc[g] = d * (float)(b->scales[g] & 0xF);
        mn[g] = -dmin * (float)(b->scales[g] >> 4);
    }
}

static void gq_decode_q3_k(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q3_k *b = blk;
    (void)mn;
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    for (int n = 0; n < 2; n++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * n));
        for (int j = 0; j < 4; j++) {
            __m256i lo = _mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m2);
            __m256i h = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * n + j), one);
            __m256i val = _mm256_sub_epi8(_mm256_add_epi8(lo, _mm256_slli_epi16(h, 2)), four);
            _mm256_storeu_si256((__m256i *)(q + 128 * n + 32 * j), val);
        }
    }
    int s[16];
    q3k_scales(b->scales, s);
    const float d = f16s(b->d);
    for (int g = 0; g < 16; g++) sc[g] = d * (float)s[g];
}

/* Q4_K / Q5_K: per sub-block j, scale d * sc_j and min coefficient -dmin * m_j. */
static inline void gq_k4_scales(const uint8_t *packed, float d, float dmin, float *sc, float *mn) {
    for (int j = 0; j < 8; j++) {
        int s, m;
        k4_scale_min(j, packed, &s, &m);
        sc[j] = d * (float)s;
        mn[j] = -dmin * (float)m;
    }
}

/* The K-quant decoders below are vector versions of decode_q4k / q5k / q6k
 * (cpu_quants_decode.h): same element order, 32 values per store. */
static void gq_decode_q4_k(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q4_k *b = blk;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        _mm256_storeu_si256((__m256i *)(q + 64 * c), _mm256_and_si256(v, m4));
        _mm256_storeu_si256((__m256i *)(q + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    }
    gq_k4_scales(b->scales, f16s(b->d), f16s(b->dmin), sc, mn);
}

static void gq_decode_q5_k(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q5_k *b = blk;
    const __m256i m4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    const __m256i h = _mm256_loadu_si256((const __m256i *)b->qh);
    for (int c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        /* bit 2c of qh -> bit 4 of the low-nibble value, bit 2c+1 -> of the high */
        __m256i h0 = _mm256_and_si256(c < 2 ? _mm256_slli_epi16(h, 4 - 2 * c) : _mm256_srli_epi16(h, 2 * c - 4), bit4);
        __m256i h1 = _mm256_and_si256(c < 2 ? _mm256_slli_epi16(h, 3 - 2 * c) : _mm256_srli_epi16(h, 2 * c - 3), bit4);
        _mm256_storeu_si256((__m256i *)(q + 64 * c), _mm256_or_si256(_mm256_and_si256(v, m4), h0));
        _mm256_storeu_si256((__m256i *)(q + 64 * c + 32),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1));
    }
    gq_k4_scales(b->scales, f16s(b->d), f16s(b->dmin), sc, mn);
}

static void gq_decode_q6_k(const void *blk, int8_t *q, float *sc, float *mn) {
    const blk_q6_k *b = blk;
    (void)mn;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30), off = _mm256_set1_epi8(32);
    for (int n = 0; n < 2; n++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n + 32));
        __m256i h = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * n));
        /* quarter k: low nibble source and the 2 high bits (bits 2k, 2k+1 of qh) moved to bits 4-5 */
        __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                         _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        __m256i hi[4] = {_mm256_and_si256(_mm256_slli_epi16(h, 4), m2), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2),
                         _mm256_and_si256(h, m2), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2)};
        for (int k = 0; k < 4; k++)
            _mm256_storeu_si256((__m256i *)(q + 128 * n + 32 * k), _mm256_sub_epi8(_mm256_or_si256(lo[k], hi[k]), off));
    }
    const float d = f16s(b->d);
    for (int g = 0; g < 16; g++) sc[g] = d * (float)b->scales[g];
}

/* ------------------------------------------------------- vector width */

/* A weight vector holds GQ_VR rows (4 bytes each): the zmm levels take the
 * 16-row panel in one register, the ymm levels in two halves of 8. gq_dp
 * adds 4-byte u8 x s8 dot products into i32 lanes: one vpdpbusd with VNNI;
 * without it vpmaddubsw (pairs into saturating i16) then vpmaddwd by 1.
 * The pairs never saturate: u8 <= 255 times |s8| <= 32 (every type but
 * Q8_0) is at most 16320 per pair, and Q8_0 (|q| <= 128, GQ_SIGNED_Q8)
 * multiplies |q| <= 128 by activations |qa| <= 127 instead. */
#if KERNELS_AVX512
typedef __m512i gq_vi;
typedef __m512 gq_vf;
enum { GQ_VR = 16, GQ_TNC = 8 }; /* rows per vector; columns per tile call */
#define gq_load(p) _mm512_load_si512((const void *)(p))
#define gq_bcast(v) _mm512_set1_epi32(v)
#define gq_zero() _mm512_setzero_si512()
#define gq_set1_8(x) _mm512_set1_epi8(x)
#define gq_fzero() _mm512_setzero_ps()
#define gq_fload(p) _mm512_load_ps((const void *)(p))
#define gq_fset1(x) _mm512_set1_ps(x)
#define gq_cvt(v) _mm512_cvtepi32_ps(v)
#define gq_fmadd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define gq_fmul(a, b) _mm512_mul_ps(a, b)
#define gq_sub32(a, b) _mm512_sub_epi32(a, b)
#if KERNELS_VNNI
#define gq_dp(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)
#else
#define gq_dp(acc, u, s) _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)))
#endif
/* |w| and a with w's sign (AVX-512 has no vpsignb: negate under a mask;
 * a zero w has |w| = 0, so its sign does not matter) */
#define gq_mul16(u, s) _mm512_maddubs_epi16(u, s)
#define gq_add16(a, b) _mm512_add_epi16(a, b)
#define gq_sum16(acc, v) _mm512_add_epi32(acc, _mm512_madd_epi16(v, _mm512_set1_epi16(1)))
#define gq_abs8(w) _mm512_abs_epi8(w)
#define gq_sign8(a, w) _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), _mm512_setzero_si512(), a)
#else
typedef __m256i gq_vi;
typedef __m256 gq_vf;
enum { GQ_VR = 8, GQ_TNC = 4 };
#define gq_load(p) _mm256_load_si256((const __m256i *)(p))
#define gq_bcast(v) _mm256_set1_epi32(v)
#define gq_zero() _mm256_setzero_si256()
#define gq_set1_8(x) _mm256_set1_epi8(x)
#define gq_fzero() _mm256_setzero_ps()
#define gq_fload(p) _mm256_load_ps((const float *)(p))
#define gq_fset1(x) _mm256_set1_ps(x)
#define gq_cvt(v) _mm256_cvtepi32_ps(v)
#define gq_fmadd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define gq_fmul(a, b) _mm256_mul_ps(a, b)
#define gq_sub32(a, b) _mm256_sub_epi32(a, b)
#if KERNELS_VNNI /* AVX-VNNI: the VEX-encoded 256-bit vpdpbusd */
#define gq_dp(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#else
#define gq_dp(acc, u, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
#endif
#define gq_mul16(u, s) _mm256_maddubs_epi16(u, s)
#define gq_add16(a, b) gq_add16_in_order(a, b)
#define gq_sum16(acc, v) gq_add32_in_order(acc, _mm256_madd_epi16(v, _mm256_set1_epi16(1)))
#define gq_abs8(w) _mm256_abs_epi8(w)
#define gq_sign8(a, w) _mm256_sign_epi8(a, w)
#endif
enum { GQ_VB = GQ_VR * 4, GQ_HALVES = GQ_ROWS / GQ_VR }; /* bytes per vector; vectors per panel row */

#if !KERNELS_AVX512
/* a + b, which gcc may not reassociate with the adds before it. A tile's
 * products summed as one chain per column keep nc sums live; as a tree
 * (gcc's reassociation of integer adds) all the products of a step, or of
 * a whole group for Q8_0 (R == 1: 8 widened steps), are live at once and
 * the 16 ymm registers spill to the stack. In-order i16 and i32 sums cut
 * the stack references of gq_run_q4_0 from 178 to 56, gq_run_q8_0 from 667
 * to 62. */
static inline __m256i gq_add16_in_order(__m256i a, __m256i b) {
    __m256i r = _mm256_add_epi16(a, b);
    __asm__("" : "+x"(r));
    return r;
}
static inline __m256i gq_add32_in_order(__m256i a, __m256i b) {
    __m256i r = _mm256_add_epi32(a, b);
    __asm__("" : "+x"(r));
    return r;
}
#endif

/* Without VNNI, the i16 pair sums of R consecutive vpmaddubsw are added
 * (vpaddw) before one vpmaddwd widens them: R steps add 2R products of at
 * most 255 * qmax per i16 lane, so R = 32767 / (510 * qmax) (Q4_0: 8, a
 * whole group; Q4_1/Q4_K: 4; Q5: 4 or 2; Q6_K: 2), capped at S/4 (every
 * R here divides it). Q8_0 (signed, below) takes R = 1: 2 * 128 * 127. */
#define GQ_R16_(QMAX) (32767 / (510 * (QMAX)) > 1 ? 32767 / (510 * (QMAX)) : 1)
#define GQ_R16(S, QMAX) (GQ_R16_(QMAX) < (S) / 4 ? GQ_R16_(QMAX) : (S) / 4)

/* Without VNNI Q8_0's full-range q would saturate vpmaddubsw against
 * offset activations: its activations stay signed, its panel stores q and
 * the product is |q| times qa with q's sign (no bias). */
#define GQ_SIGNED_Q8 (!KERNELS_VNNI)

/* ------------------------------------------------------------- layout */

static size_t gq_group_bytes(const gq_type *t) { return (size_t)(GQ_ROWS * t->S + 64 * (2 + t->has_min)); }
static size_t gq_act_group_bytes(const gq_type *t) { return (size_t)(GQ_NC * t->S + 64); }

static size_t gq_act_bytes(const gq_type *t, int64_t K, int64_t N) {
    return (size_t)((N + GQ_NC - 1) / GQ_NC) * (size_t)(K / t->S) * gq_act_group_bytes(t);
}

static size_t gq_pack_bytes(const gq_type *t, int64_t K) { return (size_t)(K / t->S) * gq_group_bytes(t); }

#if KERNELS_AVX512
/* f32 -> act8k, the vector version of cpu_quants_act8k_from_f32 (same
 * numbers: the scale comes from the first element of largest magnitude,
 * values round to nearest even). */
static void gq_act8k_from_f32(const float *x, act8k *y, int64_t n) {
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256) {
        __m512 amax = _mm512_setzero_ps();
        for (int j = 0; j < 256; j += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(x + j)));
        const float am = _mm512_reduce_max_ps(amax);
        memset(y[ib].pad, 0, sizeof y[ib].pad);
        if (am == 0.0f) {
            y[ib].d = 0.0f;
            memset(y[ib].qs, 0, 256);
            memset(y[ib].bsums, 0, sizeof y[ib].bsums);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 256; j += 16) { /* the first element with |x| == amax */
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), _mm512_set1_ps(am), _CMP_EQ_OQ);
            if (hit) {
                max = x[j + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        for (int g = 0; g < 16; g++) {
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(x + 16 * g)));
            v = _mm512_min_epi32(v, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[ib].qs + 16 * g), _mm512_cvtsepi32_epi8(v));
            y[ib].bsums[g] = (int16_t)_mm512_reduce_add_epi32(v);
        }
        y[ib].d = 1.0f / iscale;
    }
}
#else
/* The same at 256 bits: 32 values at a time packed to bytes as in
 * act8_from_f32_v, one bsum per 16 from the i32 values. */
static void gq_act8k_from_f32(const float *x, act8k *y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t ib = 0; ib < n / 256; ib++, x += 256) {
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 256; j += 8) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        memset(y[ib].pad, 0, sizeof y[ib].pad);
        if (am == 0.0f) {
            y[ib].d = 0.0f;
            memset(y[ib].qs, 0, 256);
            memset(y[ib].bsums, 0, sizeof y[ib].bsums);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < 256; j += 8) { /* the first element with |x| == amax */
            __m256 ax = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j));
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(am), _CMP_EQ_OQ));
            if (hit) {
                max = x[j + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        for (int j = 0; j < 256; j += 32) {
            __m256i q32[4];
            for (int i = 0; i < 4; i++)
                q32[i] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + j + 8 * i))), top);
            __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(q32[0], q32[1]), _mm256_packs_epi32(q32[2], q32[3]));
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[ib].qs + j), p8);
            y[ib].bsums[j / 16] = (int16_t)hsum256_i32(_mm256_add_epi32(q32[0], q32[1]));
            y[ib].bsums[j / 16 + 1] = (int16_t)hsum256_i32(_mm256_add_epi32(q32[2], q32[3]));
        }
        y[ib].d = 1.0f / iscale;
    }
}
#endif

/* Column n of the batch at act: quantize like the dot kernels' activations
 * and scatter into the tile layout (+128 but for signed types). */
static void gq_act_from_f32(const gq_type *t, const cpu_kernels *k, const float *x, int64_t K, void *act,
                            int64_t n) {
    const int S = t->S;
    const int64_t G = K / S;
    const size_t gbytes = gq_act_group_bytes(t);
    uint8_t *tile = (uint8_t *)act + (size_t)(n / GQ_NC) * (size_t)G * gbytes;
    const int c = (int)(n % GQ_NC);
    const __m256i flip = _mm256_set1_epi8(t->sgn ? 0 : (char)0x80);
    if (!t->act_k) { /* S == 32: one Q8_0/Q8_1 block per group */
        for (int64_t g = 0; g < G; g++) {
            act8 a;
            k->act8_from_f32(x + 32 * g, &a, 32);
            uint8_t *grp = tile + (size_t)g * gbytes;
            __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)a.qs), flip);
            _mm256_storeu_si256((__m256i *)(grp + 32 * c), v);
            ((float *)(grp + GQ_NC * 32))[c] = a.d;
            ((float *)(grp + GQ_NC * 32 + 32))[c] = a.s;
        }
        return;
    }
    const int per_block = 256 / S;
    for (int64_t sb = 0; sb < K / 256; sb++) {
        act8k a;
        k->act8k_from_f32(x + 256 * sb, &a, 256);
        for (int gi = 0; gi < per_block; gi++) {
            uint8_t *grp = tile + (size_t)(sb * per_block + gi) * gbytes;
            const uint8_t *src = (const uint8_t *)a.qs + S * gi;
            if (S == 32) {
                __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)src), flip);
                _mm256_storeu_si256((__m256i *)(grp + 32 * c), v);
            } else {
                __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)src), _mm256_castsi256_si128(flip));
                _mm_storeu_si128((__m128i *)(grp + 16 * c), v);
            }
            int bsum = S == 32 ? a.bsums[2 * gi] + a.bsums[2 * gi + 1] : a.bsums[gi];
            ((float *)(grp + GQ_NC * S))[c] = a.d;
            ((float *)(grp + GQ_NC * S + 32))[c] = a.d * (float)bsum;
        }
    }
}

#if !KERNELS_AVX512
/* 8 x 8 transpose of i32: r[i] lane j -> r[j] lane i. */
static inline void transpose8_epi32(__m256i *r) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}
#endif

/* Rows -> panel, one block column at a time: decode the block of each of
 * the 16 rows into tmp (row-major), then gather its 4-byte runs, scales and
 * mins into the rows' lanes and sum the q for the bias. Missing rows
 * (nrows < 16) stay zero in tmp, so they compute zeros that run() does not
 * store. */
static inline __attribute__((always_inline)) void gq_pack(const gq_type *t, const void *w, size_t w_stride, int nrows, int64_t K, void *pack) {
    const int S = t->S, B = t->block, gpb = B / S; /* groups per block */
    const int64_t nblocks = K / B;
    const size_t gbytes = gq_group_bytes(t);
    _Alignas(64) int8_t q[GQ_ROWS][256];
    _Alignas(64) float sc[GQ_ROWS][16], mn[GQ_ROWS][16];
    for (int r = nrows; r < GQ_ROWS; r++) /* the rows decode() never writes */
        memset(q[r], 0, sizeof q[r]), memset(sc[r], 0, sizeof sc[r]), memset(mn[r], 0, sizeof mn[r]);
#if KERNELS_AVX512
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i q_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(256)), s_idx = _mm512_slli_epi32(lane, 4);
#define GQ_GATHER_Q(h, p) _mm512_i32gather_epi32(q_idx, (const void *)(p), 1)
#define GQ_GATHER_F(h, p) _mm512_i32gather_ps(s_idx, (const void *)(p), 4)
#define GQ_STORE_F(p, v) _mm512_store_ps((void *)(p), v)
#else
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i s_idx = _mm256_slli_epi32(lane, 4);
#define GQ_GATHER_F(h, p) _mm256_i32gather_ps((const float *)(p) + 16 * GQ_VR * (h), s_idx, 4)
#define GQ_STORE_F(p, v) _mm256_store_ps((float *)(p), v)
#endif
    const gq_vi u128 = gq_set1_8((char)0x80);
    for (int64_t b = 0; b < nblocks; b++) {
        for (int r = 0; r < nrows; r++)
            t->decode((const uint8_t *)w + (size_t)r * w_stride + (size_t)b * t->block_bytes, q[r], sc[r], mn[r]);
#if !KERNELS_AVX512
        /* the 4-byte runs into the rows' lanes by 8x8 transposes (vpgatherdd
         * is slow on the AVX2-only CPUs): element e of the block is step
         * (e % S) / 4 of group e / S */
        for (int h = 0; h < GQ_HALVES; h++)
            for (int k = 0; k < B / 32; k++) {
                __m256i r8[8];
                for (int r = 0; r < 8; r++) r8[r] = _mm256_load_si256((const __m256i *)&q[8 * h + r][32 * k]);
                transpose8_epi32(r8);
                for (int i = 0; i < 8; i++) {
                    const int e = 32 * k + 4 * i;
                    uint8_t *grp = (uint8_t *)pack + (size_t)(b * gpb + e / S) * gbytes;
                    _mm256_storeu_si256((__m256i *)(grp + GQ_ROWS * (e % S) + GQ_VB * h), r8[i]);
                }
            }
#endif
        for (int gi = 0; gi < gpb; gi++) {
            uint8_t *grp = (uint8_t *)pack + (size_t)(b * gpb + gi) * gbytes;
            for (int h = 0; h < GQ_HALVES; h++) {
                gq_vi qsum = gq_zero();
                for (int i = 0; i < S / 4; i++) {
#if KERNELS_AVX512
                    gq_vi v = GQ_GATHER_Q(h, &q[0][S * gi + 4 * i]);
                    memcpy(grp + GQ_ROWS * 4 * i + GQ_VB * h, &v, sizeof v);
#else
                    gq_vi v;
                    memcpy(&v, grp + GQ_ROWS * 4 * i + GQ_VB * h, sizeof v);
#endif
                    qsum = gq_dp(qsum, u128, v);
                }
                /* the bias undoes the activations' +128 (none when signed) */
                gq_vi bias = t->sgn ? gq_zero() : gq_sub32(gq_zero(), qsum);
                memcpy(grp + GQ_ROWS * S + GQ_VB * h, &bias, sizeof bias);
                GQ_STORE_F(grp + GQ_ROWS * S + 64 + GQ_VB * h, GQ_GATHER_F(h, &sc[0][gi]));
                if (t->has_min) GQ_STORE_F(grp + GQ_ROWS * S + 128 + GQ_VB * h, GQ_GATHER_F(h, &mn[0][gi]));
            }
        }
    }
#undef GQ_GATHER_Q
#undef GQ_GATHER_F
#undef GQ_STORE_F
}

/* Rows `rows` (<= GQ_VR) of half a panel (or all of it, on the zmm levels)
 * at dst. */
static inline __attribute__((always_inline)) void gq_store(float *dst, gq_vf v, int rows) {
#if KERNELS_AVX512
    _mm512_mask_storeu_ps(dst, (__mmask16)((1u << rows) - 1), v);
#else
    if (rows == GQ_VR) {
        _mm256_storeu_ps(dst, v);
        return;
    }
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(dst, m, v);
#endif
}

/* One weight vector of the panel (pk: its first group) x columns c0 ..
 * c0 + nc - 1 (nc <= GQ_TNC) of one tile, over all G groups. Inlined with
 * constant S, has_min, sgn and nc so the loops unroll and every activation
 * address is the group pointer plus a constant. */
static inline __attribute__((always_inline)) void gq_tile(const uint8_t *pk, const uint8_t *tile, int64_t G,
                                                           const int S, const int has_min, const int sgn,
                                                           const int R, const int c0, const int nc, float *dst,
                                                           size_t dst_stride, int rows) {
    const size_t gbytes = (size_t)(GQ_ROWS * S + 64 * (2 + has_min)), abytes = (size_t)(GQ_NC * S + 64);
    gq_vf acc[GQ_TNC];
    GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = gq_fzero();
    for (int64_t g = 0; g < G; g++, pk += gbytes, tile += abytes) {
        /* weight vector outer, columns inner: nc independent sums in flight */
        gq_vi p[GQ_TNC];
        const gq_vi bias = gq_load(pk + GQ_ROWS * S);
        GQ_UNROLL for (int c = 0; c < nc; c++) p[c] = bias;
#if KERNELS_VNNI
        (void)R, (void)sgn; /* Q8_0 is not signed with VNNI */
        GQ_UNROLL for (int i = 0; i < S / 4; i++) {
            const gq_vi wq = gq_load(pk + GQ_ROWS * 4 * i);
            GQ_UNROLL for (int c = 0; c < nc; c++) {
                int32_t v;
                memcpy(&v, tile + S * (c0 + c) + 4 * i, 4);
                p[c] = gq_dp(p[c], gq_bcast(v), wq);
            }
        }
#else
        GQ_UNROLL for (int i0 = 0; i0 < S / 4; i0 += R) {
            gq_vi s16[GQ_TNC];
            GQ_UNROLL for (int i = i0; i < i0 + R; i++) {
                const gq_vi wq = gq_load(pk + GQ_ROWS * 4 * i);
                const gq_vi wa = sgn ? gq_abs8(wq) : wq;
                GQ_UNROLL for (int c = 0; c < nc; c++) {
                    int32_t v;
                    memcpy(&v, tile + S * (c0 + c) + 4 * i, 4);
                    gq_vi m = sgn ? gq_mul16(wa, gq_sign8(gq_bcast(v), wq)) : gq_mul16(gq_bcast(v), wq);
                    s16[c] = i == i0 ? m : gq_add16(s16[c], m);
                }
            }
            GQ_UNROLL for (int c = 0; c < nc; c++) p[c] = gq_sum16(p[c], s16[c]);
        }
#endif
        const gq_vf sc = gq_fload(pk + GQ_ROWS * S + 64);
        const float *ad = (const float *)(tile + GQ_NC * S) + c0, *as = ad + GQ_NC;
        GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = gq_fmadd(gq_cvt(p[c]), gq_fmul(sc, gq_fset1(ad[c])), acc[c]);
        if (has_min) {
            const gq_vf mn = gq_fload(pk + GQ_ROWS * S + 128);
            GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = gq_fmadd(mn, gq_fset1(as[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) gq_store(dst + (size_t)c * dst_stride, acc[c], rows);
}

/* All tiles of N columns; the last may be partial. */
static inline __attribute__((always_inline)) void gq_run_s(const void *pack, int nrows, int64_t K, const void *act,
                                                            int64_t N, float *dst, size_t dst_stride,
                                                            const int S, const int has_min, const int sgn,
                                                            const int R) {
    const int64_t G = K / S;
    const size_t tile_bytes = (size_t)G * (size_t)(GQ_NC * S + 64);
    for (int64_t n0 = 0; n0 < N; n0 += GQ_NC) {
        const uint8_t *tile = (const uint8_t *)act + (size_t)(n0 / GQ_NC) * tile_bytes;
        const int ncols = N - n0 < GQ_NC ? (int)(N - n0) : GQ_NC;
        for (int h = 0; h < GQ_HALVES && h * GQ_VR < nrows; h++) {
            const uint8_t *pk = (const uint8_t *)pack + GQ_VB * h;
            const int rows = nrows - h * GQ_VR < GQ_VR ? nrows - h * GQ_VR : GQ_VR;
            for (int c0 = 0; c0 < ncols; c0 += GQ_TNC) {
                float *d = dst + (size_t)(n0 + c0) * dst_stride + GQ_VR * h;
#define GQ_TILE(NC) gq_tile(pk, tile, G, S, has_min, sgn, R, c0, NC, d, dst_stride, rows)
                switch (ncols - c0 < GQ_TNC ? ncols - c0 : GQ_TNC) {
#if KERNELS_AVX512
                case 8: GQ_TILE(8); break;
                case 7: GQ_TILE(7); break;
                case 6: GQ_TILE(6); break;
                case 5: GQ_TILE(5); break;
#endif
                case 4: GQ_TILE(4); break;
                case 3: GQ_TILE(3); break;
                case 2: GQ_TILE(2); break;
                default: GQ_TILE(1); break;
                }
#undef GQ_TILE
            }
        }
    }
}

/* ------------------------------------------------------ per-type tables */

/* The gemm_ops entry points of one type: thin wrappers binding its gq_type
 * (and, for run, the constant S and has_min). */
#define GQ_OPS(NAME, S_, MIN_, ACTK_, SGN_, QMAX_, BLOCK_, BLKT_, DECODE_)                                          \
    static const gq_type gq_t_##NAME = {S_, MIN_, ACTK_, SGN_, BLOCK_, sizeof(BLKT_), DECODE_};               \
    static size_t gq_act_bytes_##NAME(int64_t K, int64_t N) { return gq_act_bytes(&gq_t_##NAME, K, N); }       \
    static void gq_act_##NAME(const cpu_kernels *k, const float *x, int64_t K, void *act, int64_t n) {        \
        gq_act_from_f32(&gq_t_##NAME, k, x, K, act, n);                                                        \
    }                                                                                                          \
    static size_t gq_pack_bytes_##NAME(int64_t K) { return gq_pack_bytes(&gq_t_##NAME, K); }                  \
    static void gq_pack_##NAME(const void *w, size_t ws, int nrows, int64_t K, void *pack) {                  \
        gq_pack(&gq_t_##NAME, w, ws, nrows, K, pack);                                                          \
    }                                                                                                          \
    static void gq_run_##NAME(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst, \
                              size_t dst_stride) {                                                             \
        gq_run_s(pack, nrows, K, act, N, dst, dst_stride, S_, MIN_, SGN_, GQ_R16(S_, QMAX_));                                  \
    }                                                                                                          \
    static const gemm_ops gq_ops_##NAME = {GQ_ROWS,          gq_act_bytes_##NAME, gq_act_##NAME,             \
                                           gq_pack_bytes_##NAME, gq_pack_##NAME,  gq_run_##NAME, 0};

GQ_OPS(q4_0, 32, 0, 0, 0, 8, 32, blk_q4_0, gq_decode_q4_0)
GQ_OPS(q4_1, 32, 1, 0, 0, 15, 32, blk_q4_1, gq_decode_q4_1)
GQ_OPS(q5_0, 32, 0, 0, 0, 16, 32, blk_q5_0, gq_decode_q5_0)
GQ_OPS(q5_1, 32, 1, 0, 0, 31, 32, blk_q5_1, gq_decode_q5_1)
GQ_OPS(q8_0, 32, 0, 0, GQ_SIGNED_Q8, 128, 32, blk_q8_0, gq_decode_q8_0)
GQ_OPS(q2_k, 16, 1, 1, 0, 3, 256, blk_q2_k, gq_decode_q2_k)
GQ_OPS(q3_k, 16, 0, 1, 0, 4, 256, blk_q3_k, gq_decode_q3_k)
GQ_OPS(q4_k, 32, 1, 1, 0, 15, 256, blk_q4_k, gq_decode_q4_k)
GQ_OPS(q5_k, 32, 1, 1, 0, 31, 256, blk_q5_k, gq_decode_q5_k)
GQ_OPS(q6_k, 16, 0, 1, 0, 32, 256, blk_q6_k, gq_decode_q6_k)

static void gemm_q8_register(cpu_kernels *k) {
    k->act8k_from_f32 = gq_act8k_from_f32; /* the dot kernels' too */
    k->gemm[TSR_DTYPE_Q4_0] = &gq_ops_q4_0;
    k->gemm[TSR_DTYPE_Q4_1] = &gq_ops_q4_1;
    k->gemm[TSR_DTYPE_Q5_0] = &gq_ops_q5_0;
    k->gemm[TSR_DTYPE_Q5_1] = &gq_ops_q5_1;
    k->gemm[TSR_DTYPE_Q8_0] = &gq_ops_q8_0;
    k->gemm[TSR_DTYPE_Q2_K] = &gq_ops_q2_k;
    k->gemm[TSR_DTYPE_Q3_K] = &gq_ops_q3_k;
    k->gemm[TSR_DTYPE_Q4_K] = &gq_ops_q4_k;
    k->gemm[TSR_DTYPE_Q5_K] = &gq_ops_q5_k;
    k->gemm[TSR_DTYPE_Q6_K] = &gq_ops_q6_k;
}
