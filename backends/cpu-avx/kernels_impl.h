/*
 * kernels_impl.h — the vector kernels, compiled once per ISA level by
 * kernels_<level>.c, which define KERNELS_NAME, KERNELS_AVX512 (0/1) and
 * optionally KERNELS_VNNI (with KERNELS_AVX512 0: AVX-VNNI, the 256-bit
 * VEX-encoded vpdpbusd) before including this file, and whose public
 * init function calls kernels_fill() and then adds its GEMMs (cpu_gemm.h).
 *
 * Every dot kernel computes one weight row against nc <= CPU_NC activation
 * columns (out[c] = sum_k w[k] * a_c[k]) so a weight block is loaded and
 * unpacked once and reused for all columns: the GEMM driver (cpu_matmul.c) tiles
 * columns in fours for prompt processing, and calls with nc = 1 for decoding,
 * where the loop is bound by reading the weights. The straightforward version
 * of each is the plain C kernel of the same name in cpu_mm_quants.c.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

#ifndef KERNELS_VNNI
#define KERNELS_VNNI 0
#endif


/* ------------------------------------------------------- float vectors */

#if KERNELS_AVX512
#define VF __m512
#define VF_W 16
#define vf_zero() _mm512_setzero_ps()
#define vf_load(p) _mm512_loadu_ps(p)
#define vf_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vf_load_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define vf_load_bf16(p) \
    _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p))), 16))
#define vf_hsum(v) _mm512_reduce_add_ps(v)
#else
#define VF __m256
#define VF_W 8
#define vf_zero() _mm256_setzero_ps()
#define vf_load(p) _mm256_loadu_ps(p)
#define vf_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vf_load_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define vf_load_bf16(p) \
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))
#define vf_hsum(v) hsum256(v)
#endif

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum256_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static inline float f16s(uint16_t h) { return _cvtsh_ss(h); }

#define ACT(c) ((const void *)((const uint8_t *)act + (size_t)(c) * act_stride))

/* A dot kernel NAME calling its always-inline body with nc the constant 1
 * when decoding: the compiler then drops the column loop and keeps the
 * accumulator in a register. The same operations either way, so the same
 * bits. */
#define KERNEL_INLINE static inline __attribute__((always_inline))
#define NC1_SPECIALIZED(NAME, BODY)                                                                        \
    static void NAME(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) { \
        if (nc == 1)                                                                                       \
            BODY(K, w, act, act_stride, 1, out);                                                           \
        else                                                                                               \
            BODY(K, w, act, act_stride, nc, out);                                                          \
    }

/* F32/F16/BF16 weights x f32 activations: widen VF_W weights, one FMA per
 * column. Like ggml's vec_dot_f16/f32, only the first K & ~31 elements go
 * through the vector loop; the rest (all of a short row, e.g. attention over
 * few cells or a head of 8) are summed in double: tiny models are sensitive
 * enough to that order that llama.cpp's logits depend on it. */
/* Decoding streams each weight row once: prefetching this many bytes ahead
 * keeps more lines in flight than the hardware prefetcher alone. */
#ifndef FLOAT_DOT_PREFETCH
#define FLOAT_DOT_PREFETCH 2048
#endif
/* The quantized decode dots' form of it: the lines DECODE_PREFETCH bytes past
 * p, for a step of the loop that consumes `bytes` of the row (one prefetch
 * per started 64-byte line, so every line ahead is asked for at least once).
 * Measured on a 2-vCPU Zen 3 EPYC at avx2, 2 threads, TinyLlama shape,
 * tg128 alternated old/new: Q4_K_M 30.1 -> 34.4 t/s (Q4_K and Q6_K rows).
 * Until 2026-11-25 gcc deleted it from the AVX2 Q4_0 and Q8_0 dots (see
 * below); there, alternated rounds (6 and 5, medians): Q4_0 25.3 -> 27.3,
 * Q8_0 15.8 -> 17.4 t/s. 1 KiB and 4 KiB ahead were no better than 2 KiB.
 * tests/cpu-avx/prefetch_kept.py checks the built plugin keeps them. */
#ifndef DECODE_PREFETCH
#define DECODE_PREFETCH 2048
#endif
/* always_inline: a plain static inline wrapper of prefetches has no side
 * effects in gcc's eyes, so where it is not inlined early its calls are
 * deleted as dead code (that happened to the AVX2 Q4_0 and Q8_0 dots) */
KERNEL_INLINE void prefetch_row_ahead(const void *p, int bytes) {
    for (int o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + DECODE_PREFETCH + o, _MM_HINT_T0);
}
#define FLOAT_DOT(NAME, T, LOADW, SCALARW)                                                 \
    static void NAME(int64_t K, const void *w, const void *act, size_t act_stride, int nc, \
                     float *out) {                                                         \
        const T *x = w;                                                                    \
        const float *a0 = ACT(0), *a1 = ACT(nc > 1 ? 1 : 0), *a2 = ACT(nc > 2 ? 2 : 0),    \
                    *a3 = ACT(nc > 3 ? 3 : 0);                                             \
        const int64_t kv = K & ~(int64_t)31;                                               \
        int64_t k = 0;                                                                     \
        if (nc == 1) {                                                                     \
            VF s0 = vf_zero(), s1 = vf_zero();                                             \
            for (; k < kv; k += 2 * VF_W) {                                                \
                _mm_prefetch((const char *)(x + k) + FLOAT_DOT_PREFETCH, _MM_HINT_T0);     \
                s0 = vf_fma(LOADW(x + k), vf_load(a0 + k), s0);                            \
                s1 = vf_fma(LOADW(x + k + VF_W), vf_load(a0 + k + VF_W), s1);              \
            }                                                                              \
            double s = (double)(vf_hsum(s0) + vf_hsum(s1));                                \
            for (; k < K; k++) s += (double)(SCALARW(x[k]) * a0[k]);                       \
            out[0] = (float)s;                                                             \
            return;                                                                        \
        }                                                                                  \
        VF s0 = vf_zero(), s1 = vf_zero(), s2 = vf_zero(), s3 = vf_zero();                 \
        for (; k < kv; k += VF_W) {                                                        \
            VF wv = LOADW(x + k);                                                          \
            s0 = vf_fma(wv, vf_load(a0 + k), s0);                                          \
            s1 = vf_fma(wv, vf_load(a1 + k), s1);                                          \
            s2 = vf_fma(wv, vf_load(a2 + k), s2);                                          \
            s3 = vf_fma(wv, vf_load(a3 + k), s3);                                          \
        }                                                                                  \
        double r[4] = {vf_hsum(s0), vf_hsum(s1), vf_hsum(s2), vf_hsum(s3)};                \
        const float *ac[4] = {a0, a1, a2, a3};                                             \
        for (; k < K; k++) {                                                               \
            float wk = SCALARW(x[k]);                                                      \
            for (int c = 0; c < 4; c++) r[c] += (double)(wk * ac[c][k]);                   \
        }                                                                                  \
        for (int c = 0; c < nc; c++) out[c] = (float)r[c];                                 \
    }

/* Two rows x up to 4 columns of F16/BF16: each activation vector loaded once
 * feeds both rows, halving activation traffic in prompt processing. Same
 * per-(row, column) accumulation as FLOAT_DOT with nc > 1. */
#define FLOAT_DOT2(NAME, T, LOADW, SCALARW)                                                 \
    static void NAME(int64_t K, const void *w, size_t w_row_stride, const void *act,        \
                     size_t act_stride, int nc, float *out) {                               \
        const T *x0 = w, *x1 = (const T *)((const uint8_t *)w + w_row_stride);              \
        const float *ac[4] = {ACT(0), ACT(nc > 1 ? 1 : 0), ACT(nc > 2 ? 2 : 0), ACT(nc > 3 ? 3 : 0)}; \
        const int64_t kv = K & ~(int64_t)31;                                                \
        VF s[2][4];                                                                         \
        for (int c = 0; c < 4; c++) s[0][c] = s[1][c] = vf_zero();                          \
        for (int64_t k = 0; k < kv; k += VF_W) {                                            \
            VF w0 = LOADW(x0 + k), w1 = LOADW(x1 + k);                                      \
            for (int c = 0; c < 4; c++) {                                                   \
                VF a = vf_load(ac[c] + k);                                                  \
                s[0][c] = vf_fma(w0, a, s[0][c]);                                           \
                s[1][c] = vf_fma(w1, a, s[1][c]);                                           \
            }                                                                               \
        }                                                                                   \
        for (int c = 0; c < nc; c++) {                                                      \
            double r0 = vf_hsum(s[0][c]), r1 = vf_hsum(s[1][c]);                            \
            for (int64_t k = kv; k < K; k++) {                                              \
                r0 += (double)(SCALARW(x0[k]) * ac[c][k]);                                  \
                r1 += (double)(SCALARW(x1[k]) * ac[c][k]);                                  \
            }                                                                               \
            out[c] = (float)r0;                                                             \
            out[CPU_NC + c] = (float)r1;                                                    \
        }                                                                                   \
    }

static inline float w_f16(uint16_t v) { return f16s(v); }
static inline float w_bf16(uint16_t v) { return cpu_bf16_to_f32(v); }

/* F32 weights: products and sums in double, as the ref oracle does. F32
 * weights only occur in small models, whose logits are sensitive enough to
 * summation order to miss llama.cpp's by more than 1e-3 with f32 sums; the
 * cost (half the f32 rate) does not matter there. */
static void dot_f32_v(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const float *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = ACT(c);
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k)), _mm256_cvtps_pd(_mm_loadu_ps(a + k)), s0);
            s1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + k + 4)), _mm256_cvtps_pd(_mm_loadu_ps(a + k + 4)), s1);
        }
        __m256d s = _mm256_add_pd(s0, s1);
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
        double r = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        for (; k < K; k++) r += (double)x[k] * (double)a[k];
        out[c] = (float)r;
    }
}
/* Two F32 weight rows x up to 4 columns: dot_f32_v's sums for each (row,
 * column), bit for bit (the same lanes, order and tail), with each
 * weight and activation vector widened to double once for all the
 * products it takes part in rather than once per product: a vision
 * encoder's products over hundreds of patches spent most of their time
 * converting. */
static void dot2_f32_v(int64_t K, const void *w, size_t w_row_stride, const void *act, size_t act_stride, int nc,
                       float *out) {
    const float *x[2] = {w, (const float *)(const void *)((const uint8_t *)w + w_row_stride)};
    const float *ac[4] = {ACT(0), ACT(nc > 1 ? 1 : 0), ACT(nc > 2 ? 2 : 0), ACT(nc > 3 ? 3 : 0)};
    __m256d s[2][4][2];
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++) s[r][c][0] = s[r][c][1] = _mm256_setzero_pd();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256d w00 = _mm256_cvtps_pd(_mm_loadu_ps(x[0] + k)), w01 = _mm256_cvtps_pd(_mm_loadu_ps(x[0] + k + 4));
        const __m256d w10 = _mm256_cvtps_pd(_mm_loadu_ps(x[1] + k)), w11 = _mm256_cvtps_pd(_mm_loadu_ps(x[1] + k + 4));
        for (int c = 0; c < 4; c++) {
            const __m256d a0 = _mm256_cvtps_pd(_mm_loadu_ps(ac[c] + k)), a1 = _mm256_cvtps_pd(_mm_loadu_ps(ac[c] + k + 4));
            s[0][c][0] = _mm256_fmadd_pd(w00, a0, s[0][c][0]);
            s[0][c][1] = _mm256_fmadd_pd(w01, a1, s[0][c][1]);
            s[1][c][0] = _mm256_fmadd_pd(w10, a0, s[1][c][0]);
            s[1][c][1] = _mm256_fmadd_pd(w11, a1, s[1][c][1]);
        }
    }
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < nc; c++) {
            const __m256d t = _mm256_add_pd(s[r][c][0], s[r][c][1]);
            const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
            double v = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
            for (int64_t j = k; j < K; j++) v += (double)x[r][j] * (double)ac[c][j];
            out[r * CPU_NC + c] = (float)v;
        }
}
FLOAT_DOT(dot_f16_v, uint16_t, vf_load_f16, w_f16)
FLOAT_DOT(dot_bf16_v, uint16_t, vf_load_bf16, w_bf16)
FLOAT_DOT2(dot2_f16_v, uint16_t, vf_load_f16, w_f16)
FLOAT_DOT2(dot2_bf16_v, uint16_t, vf_load_bf16, w_bf16)

/* ------------------------------------------------ 8-bit integer products */

/* 32 u8 x s8 products summed in fours into 8 i32 lanes, added to acc. */
static inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if KERNELS_VNNI && KERNELS_AVX512
    return _mm256_dpbusd_epi32(acc, u, s);
#elif KERNELS_VNNI /* AVX-VNNI: the VEX encoding */
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
#endif
}

/* Same, each pair-sum of i16 products scaled by the i16 in `scale`: used by
 * the K-quants to apply sub-block scales for free. u*s pairs must fit i16. */
static inline __m256i dot_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i scale) {
    __m256i p16 = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, scale));
}

static inline __m256i load_nibbles_q4(const uint8_t *qs) {
    /* 16 bytes -> 32 values: low nibbles are elements 0..15, high 16..31 */
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m128i m = _mm_set1_epi8(0x0f);
    __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm256_set_m128i(hi, lo);
}

/* Q4_0 x act8: sum_b dw*da*(sum(nib*a) - 8*sum(a)). The -8 offset is applied
 * once per block through a->isum instead of per element. */
KERNEL_INLINE void dot_q4_0_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q4_0 *x = w;
    const int64_t nb = K / 32;
    if (nc == 1) {
        const act8 *a = act;
        __m256 acc = _mm256_setzero_ps();
        float corr = 0.0f;
        for (int64_t ib = 0; ib < nb; ib++) {
            __m256i q = load_nibbles_q4(x[ib].qs);
            __m256i p = dot_u8s8(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a[ib].qs));
            float dd = f16s(x[ib].d) * a[ib].d;
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dd), acc);
            corr += dd * (float)a[ib].isum;
        }
        out[0] = hsum256(acc) - 8.0f * corr;
        return;
    }
    __m256 acc[CPU_NC];
    float corr[CPU_NC] = {0};
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        __m256i q = load_nibbles_q4(x[ib].qs);
        float dw = f16s(x[ib].d);
        for (int c = 0; c < nc; c++) {
            const act8 *a = (const act8 *)ACT(c) + ib;
            __m256i p = dot_u8s8(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a->qs));
            float dd = dw * a->d;
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dd), acc[c]);
            corr[c] += dd * (float)a->isum;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]) - 8.0f * corr[c];
}
NC1_SPECIALIZED(dot_q4_0_v, dot_q4_0_v_body)

/* Q8_0 x act8: |w| as u8 times a with w's sign moved onto it. */
KERNEL_INLINE void dot_q8_0_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q8_0 *x = w;
    const int64_t nb = K / 32;
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        __m256i aq = _mm256_sign_epi8(q, q);
        float dw = f16s(x[ib].d);
        for (int c = 0; c < nc; c++) {
            const act8 *a = (const act8 *)ACT(c) + ib;
            __m256i sa = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)a->qs), q);
            __m256i p = dot_u8s8(_mm256_setzero_si256(), aq, sa);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a->d), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q8_0_v, dot_q8_0_v_body)


/* ------------------------------------- Q4_0 / Q8_0 over act8p groups */

/* Four 32-blocks at a time against act8p (cpu_blocks.h), whose order is that of
 * a register of Q4_0 nibbles: the low nibbles of 4 blocks' 16 bytes are
 * elements 0..15 of each, the high nibbles 16..31, and both halves sum
 * into one i32 accumulator whose lane l belongs to block l/4. The corr
 * lanes pre-load the -8 * sum(a) of Q4_0. Straightforward version:
 * dot_q4_0 / dot_q8_0 in cpu_mm_quants.c. A row's last group may hold 2 blocks
 * (K % 128 == 64): the missing blocks' weights are zeros, never read. */
#define GROUP_NBLK(K, g) ((K) - 128 * (g) >= 128 ? 4 : 2)

#if KERNELS_AVX512
static inline __m512i dot_u8s8_512(__m512i acc, __m512i u, __m512i s) {
#if KERNELS_VNNI
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

static inline __m512i join256(__m256i a, __m256i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
}

/* The 16 bytes of qs of nblk (4 or 2) blocks of `size` bytes, one per
 * 128-bit lane (zeros for missing blocks). */
static inline __m512i group_lanes(const uint8_t *qs, size_t size, int nblk) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)qs));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(qs + size)), 1);
    if (nblk == 4) {
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(qs + 2 * size)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(qs + 3 * size)), 3);
    } else {
        v = _mm512_maskz_mov_epi64(0x0f, v);
    }
    return v;
}

/* The fp16 scales of nblk blocks of 2*s bytes starting at b (scale first)
 * as act8p lanes [d0 x4 | d1 x4 | d2 x4 | d3 x4]. Four blocks of at least
 * 64 (128) bytes together: one (two) 64-byte loads and one word permute. */
static inline __m512 group_scales(const uint8_t *b, int s, int nblk) {
    if (nblk == 4 && 8 * s >= 64) {
        const __m512i idx = _mm512_castsi256_si512(_mm256_setr_epi16(
            0, 0, 0, 0, (short)s, (short)s, (short)s, (short)s, (short)(2 * s), (short)(2 * s), (short)(2 * s),
            (short)(2 * s), (short)(3 * s), (short)(3 * s), (short)(3 * s), (short)(3 * s)));
        __m512i d = 8 * s >= 128 ? _mm512_permutex2var_epi16(_mm512_loadu_si512(b), idx, _mm512_loadu_si512(b + 64))
                                 : _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(b));
        return _mm512_cvtph_ps(_mm512_castsi512_si256(d));
    }
    uint16_t h[4] = {0, 0, 0, 0};
    for (int i = 0; i < nblk; i++) memcpy(&h[i], b + 2 * (size_t)s * (size_t)i, 2);
    __m128i d4 = _mm_cvtsi64_si128((long long)((uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 |
                                               (uint64_t)h[3] << 48));
    /* words 0..3 -> each repeated 4 times */
    __m256i r = _mm256_cvtepu32_epi64(_mm_unpacklo_epi16(d4, d4));
    r = _mm256_or_si256(r, _mm256_slli_epi64(r, 32));
    return _mm512_cvtph_ps(r);
}

/* Q4_0 nibbles of a group: lo = elements 0..15 of each block, hi = 16..31. */
static inline void q4_0_group(const blk_q4_0 *b, int nblk, __m512i *lo, __m512i *hi) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i v = group_lanes(b->qs, sizeof(blk_q4_0), nblk);
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

static void dot_q4_0_pair(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q4_0 *x = w;
    const int64_t ng = (K + 127) / 128;
    if (nc == 1) { /* decoding: two groups a step, two independent chains */
        const act8p *a = act;
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        int64_t g = 0;
        for (; g + 2 <= ng && GROUP_NBLK(K, g + 1) == 4; g += 2) {
            const blk_q4_0 *b = x + 4 * g;
            _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
            _mm_prefetch((const char *)b + 3136, _MM_HINT_T0);
            __m512i lo0, hi0, lo1, hi1;
            q4_0_group(b, 4, &lo0, &hi0);
            q4_0_group(b + 4, 4, &lo1, &hi1);
            __m512i p0 = dot_u8s8_512(_mm512_loadu_si512(a[g].corr), lo0, _mm512_loadu_si512(a[g].qs));
            __m512i p1 = dot_u8s8_512(_mm512_loadu_si512(a[g + 1].corr), lo1, _mm512_loadu_si512(a[g + 1].qs));
            p0 = dot_u8s8_512(p0, hi0, _mm512_loadu_si512(a[g].qs + 64));
            p1 = dot_u8s8_512(p1, hi1, _mm512_loadu_si512(a[g + 1].qs + 64));
            __m512 d0 = _mm512_mul_ps(group_scales((const uint8_t *)b, 9, 4), _mm512_loadu_ps(a[g].d));
            __m512 d1 = _mm512_mul_ps(group_scales((const uint8_t *)(b + 4), 9, 4), _mm512_loadu_ps(a[g + 1].d));
            s0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), d0, s0);
            s1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), d1, s1);
        }
        for (; g < ng; g++) {
            const blk_q4_0 *b = x + 4 * g;
            int nblk = GROUP_NBLK(K, g);
            __m512i lo, hi;
            q4_0_group(b, nblk, &lo, &hi);
            __m512i p = dot_u8s8_512(_mm512_loadu_si512(a[g].corr), lo, _mm512_loadu_si512(a[g].qs));
            p = dot_u8s8_512(p, hi, _mm512_loadu_si512(a[g].qs + 64));
            __m512 d = _mm512_mul_ps(group_scales((const uint8_t *)b, 9, nblk), _mm512_loadu_ps(a[g].d));
            s0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), d, s0);
        }
        out[0] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
        return;
    }
    __m512 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const blk_q4_0 *b = x + 4 * g;
        int nblk = GROUP_NBLK(K, g);
        __m512i lo, hi;
        q4_0_group(b, nblk, &lo, &hi);
        __m512 dw = group_scales((const uint8_t *)b, 9, nblk);
        for (int c = 0; c < nc; c++) {
            const act8p *a = (const act8p *)ACT(c) + g;
            __m512i p = dot_u8s8_512(_mm512_loadu_si512(a->corr), lo, _mm512_loadu_si512(a->qs));
            p = dot_u8s8_512(p, hi, _mm512_loadu_si512(a->qs + 64));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_loadu_ps(a->d)), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = _mm512_reduce_add_ps(acc[c]);
}

/* Q8_0: the four blocks' 32 bytes regrouped by 128-bit lane shuffles into
 * act8p order; |w| as u8, w's sign moved onto a (AVX-512 has no vpsignb: a
 * masked subtract from zero where w < 0). */
static inline void q8_0_group(const blk_q8_0 *b, int nblk, __m512i *lo, __m512i *hi) {
    __m512i z01 = join256(_mm256_loadu_si256((const __m256i *)b[0].qs), _mm256_loadu_si256((const __m256i *)b[1].qs));
    __m512i z23 = _mm512_setzero_si512();
    if (nblk == 4)
        z23 = join256(_mm256_loadu_si256((const __m256i *)b[2].qs), _mm256_loadu_si256((const __m256i *)b[3].qs));
    *lo = _mm512_shuffle_i32x4(z01, z23, _MM_SHUFFLE(2, 0, 2, 0));
    *hi = _mm512_shuffle_i32x4(z01, z23, _MM_SHUFFLE(3, 1, 3, 1));
}

static inline __m512i dot_s8s8_512(__m512i acc, __m512i w, __m512i a) {
    __m512i sa = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), _mm512_setzero_si512(), a);
    return dot_u8s8_512(acc, _mm512_abs_epi8(w), sa);
}

static void dot_q8_0_pair(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q8_0 *x = w;
    const int64_t ng = (K + 127) / 128;
    __m512 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        const blk_q8_0 *b = x + 4 * g;
        int nblk = GROUP_NBLK(K, g);
        if (nc == 1) {
            _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
            _mm_prefetch((const char *)b + 3136, _MM_HINT_T0);
        }
        __m512i lo, hi;
        q8_0_group(b, nblk, &lo, &hi);
        __m512 dw = group_scales((const uint8_t *)b, 17, nblk);
        for (int c = 0; c < nc; c++) {
            const act8p *a = (const act8p *)ACT(c) + g;
            __m512i p = dot_s8s8_512(_mm512_setzero_si512(), lo, _mm512_loadu_si512(a->qs));
            p = dot_s8s8_512(p, hi, _mm512_loadu_si512(a->qs + 64));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_loadu_ps(a->d)), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = _mm512_reduce_add_ps(acc[c]);
}
#else
/* AVX2: a group as two 256-bit halves, blocks 0-1 (i32 lanes 0..7 of the
 * act8p group) and blocks 2-3 (lanes 8..15). */
static inline __m256 scales_2blocks_256(uint16_t d0, uint16_t d1) {
    /* [d0 x4 | d1 x4] as fp16, then one conversion: vpbroadcastw x2 (from
     * memory), vpunpcklqdq, vcvtph2ps, where two scalar conversions and
     * their broadcasts took 7 instructions. Alternated tg64 at 1 thread,
     * TinyLlama shape, 2026-11-25: Q4_0 better in 13 of 18 rounds (median
     * ratio ~1.05: alone on a core the dot's instructions count); Q8_0 and
     * 2 threads the same (memory-bound). */
    __m128i h = _mm_unpacklo_epi64(_mm_set1_epi16((short)d0), _mm_set1_epi16((short)d1));
    return _mm256_cvtph_ps(h);
}

KERNEL_INLINE void dot_q4_0_pair_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q4_0 *x = w;
    const int64_t ng = (K + 127) / 128;
    const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        int nh = GROUP_NBLK(K, g) / 2;
        if (nc == 1) prefetch_row_ahead(x + 4 * g, 4 * sizeof(blk_q4_0));
        for (int h = 0; h < nh; h++) {
            const blk_q4_0 *b = x + 4 * g + 2 * h;
            __m256i v = _mm256_loadu2_m128i((const __m128i *)b[1].qs, (const __m128i *)b[0].qs);
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            __m256 dw = scales_2blocks_256(b[0].d, b[1].d);
            for (int c = 0; c < nc; c++) {
                const act8p *a = (const act8p *)ACT(c) + g;
                __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a->qs + 32 * h)));
                __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a->qs + 64 + 32 * h)));
                __m256i p = _mm256_madd_epi16(_mm256_add_epi16(pl, ph), ones);
                p = _mm256_add_epi32(p, _mm256_loadu_si256((const __m256i *)(a->corr + 8 * h)));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(a->d + 8 * h)), acc[c]);
            }
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q4_0_pair, dot_q4_0_pair_body)

KERNEL_INLINE void dot_q8_0_pair_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q8_0 *x = w;
    const int64_t ng = (K + 127) / 128;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        int nh = GROUP_NBLK(K, g) / 2;
        if (nc == 1) prefetch_row_ahead(x + 4 * g, 4 * sizeof(blk_q8_0));
        for (int h = 0; h < nh; h++) {
            const blk_q8_0 *b = x + 4 * g + 2 * h;
            __m256i y0 = _mm256_loadu_si256((const __m256i *)b[0].qs), y1 = _mm256_loadu_si256((const __m256i *)b[1].qs);
            /* [block 0 | block 1] elements 0..15, then 16..31 */
            __m256i lo = _mm256_permute2x128_si256(y0, y1, 0x20), hi = _mm256_permute2x128_si256(y0, y1, 0x31);
            __m256i ulo = _mm256_sign_epi8(lo, lo), uhi = _mm256_sign_epi8(hi, hi);
            __m256 dw = scales_2blocks_256(b[0].d, b[1].d);
            for (int c = 0; c < nc; c++) {
                const act8p *a = (const act8p *)ACT(c) + g;
                __m256i sl = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a->qs + 32 * h)), lo);
                __m256i sh = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a->qs + 64 + 32 * h)), hi);
                /* |w| * a pairs reach 2 * 128 * 127: the i16 sums stay apart */
                __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(ulo, sl), ones),
                                             _mm256_madd_epi16(_mm256_maddubs_epi16(uhi, sh), ones));
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, _mm256_loadu_ps(a->d + 8 * h)), acc[c]);
            }
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q8_0_pair, dot_q8_0_pair_body)
#endif

/* Q4_K / Q5_K scales: 8 six-bit scales and mins packed in 12 bytes. */
static inline void k4_unpack(const uint8_t *s, uint8_t *sc, uint8_t *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xF) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

/* Q4_K x act8k: per 64-element chunk c, low nibbles of qs[32c..] are
 * sub-block 2c, high nibbles 2c+1. isum = sum_j sc_j*dot_j (scales applied
 * in madd), min term = sum_j mn_j * (bsums[2j] + bsums[2j+1]). */
KERNEL_INLINE void dot_q4_k_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q4_k *x = w;
    const int64_t nb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q4_k *b = x + ib;
        uint8_t sc[8], mn[8];
        k4_unpack(b->scales, sc, mn);
        float d = f16s(b->d), dmin = f16s(b->dmin);
        /* mins repeated per 16-element bsum: lanes 2j, 2j+1 get mn[j] */
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_set_epi8(
            (char)mn[7], (char)mn[7], (char)mn[6], (char)mn[6], (char)mn[5], (char)mn[5], (char)mn[4], (char)mn[4],
            (char)mn[3], (char)mn[3], (char)mn[2], (char)mn[2], (char)mn[1], (char)mn[1], (char)mn[0], (char)mn[0]));
        __m256i q[8];
        for (int c4 = 0; c4 < 4; c4++) {
            __m256i bytes = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c4));
            q[2 * c4] = _mm256_and_si256(bytes, m4);
            q[2 * c4 + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4);
        }
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
                sumi = dot_u8s8_scaled(sumi, q[j], av, _mm256_set1_epi16(sc[j]));
            }
            __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
            __m256i mins = _mm256_madd_epi16(bs, mins16);
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * a->d));
            v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin * a->d), v);
            acc[c] = _mm256_add_ps(acc[c], v);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q4_k_v, dot_q4_k_v_body)

/* Q5_K x act8k: Q4_K plus a fifth bit: for chunk c, bit 2c of qh[l] joins
 * the low nibble of qs[32c + l], bit 2c+1 the high nibble. */
KERNEL_INLINE void dot_q5_k_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q5_k *x = w;
    const int64_t nb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q5_k *b = x + ib;
        uint8_t sc[8], mn[8];
        k4_unpack(b->scales, sc, mn);
        float d = f16s(b->d), dmin = f16s(b->dmin);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_set_epi8(
            (char)mn[7], (char)mn[7], (char)mn[6], (char)mn[6], (char)mn[5], (char)mn[5], (char)mn[4], (char)mn[4],
            (char)mn[3], (char)mn[3], (char)mn[2], (char)mn[2], (char)mn[1], (char)mn[1], (char)mn[0], (char)mn[0]));
        const __m256i hbits = _mm256_loadu_si256((const __m256i *)b->qh);
        __m256i q[8];
        for (int c4 = 0; c4 < 4; c4++) {
            __m256i bytes = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c4));
            __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c4), one);
            __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c4 + 1), one);
            q[2 * c4] = _mm256_or_si256(_mm256_and_si256(bytes, m4), _mm256_slli_epi16(h0, 4));
            q[2 * c4 + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4), _mm256_slli_epi16(h1, 4));
        }
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
                sumi = dot_u8s8_scaled(sumi, q[j], av, _mm256_set1_epi16(sc[j]));
            }
            __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), mins16);
            __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * a->d));
            v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(dmin * a->d), v);
            acc[c] = _mm256_add_ps(acc[c], v);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q5_k_v, dot_q5_k_v_body)

/* The 32 fifth bits of a Q5_0/Q5_1 block (u32 LE, bit j for element j) as
 * bytes 0x10 / 0x00: byte j takes qh byte j/8 and tests bit j%8. */
static inline __m256i q5_high_bits(const uint8_t *qh4) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), pick);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Q5_0 x act8: as Q4_0 with the fifth bit, zero point 16. */
KERNEL_INLINE void dot_q5_0_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q5_0 *x = w;
    const int64_t nb = K / 32;
    __m256 acc[CPU_NC];
    float corr[CPU_NC] = {0};
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        __m256i q = _mm256_or_si256(load_nibbles_q4(x[ib].qs), q5_high_bits(x[ib].qh));
        float dw = f16s(x[ib].d);
        for (int c = 0; c < nc; c++) {
            const act8 *a = (const act8 *)ACT(c) + ib;
            __m256i p = dot_u8s8(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a->qs));
            float dd = dw * a->d;
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dd), acc[c]);
            corr[c] += dd * (float)a->isum;
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]) - 16.0f * corr[c];
}
NC1_SPECIALIZED(dot_q5_0_v, dot_q5_0_v_body)

/* Q4_1 / Q5_1 x act8: per block d * sum(q * a) + m * s, q unsigned (0..15
 * or 0..31, so vpmaddubsw takes it as the u8 side). The straightforward
 * version: dot_q4_1 / dot_q5_1 in cpu_mm_quants.c (same sums per block). */
static inline __m256i q4_1_values(const blk_q4_1 *b) { return load_nibbles_q4(b->qs); }
static inline __m256i q5_1_values(const blk_q5_1 *b) {
    return _mm256_or_si256(load_nibbles_q4(b->qs), q5_high_bits(b->qh));
}

/* The block's fp16 d and m (its first 4 bytes) times the act8's d and s
 * (adjacent floats): lanes [d * ad, m * as]. */
static inline __m128 dm_times_ds(const void *blk, const act8 *a) {
    uint32_t dm;
    memcpy(&dm, blk, 4);
    __m128 w = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm));
    return _mm_mul_ps(w, _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(const void *)&a->d)));
}

#define DOT_MIN32(NAME, BLK, VALUES)                                                                          \
    KERNEL_INLINE void NAME##_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,     \
                                   float *out) {                                                              \
        const BLK *x = w;                                                                                     \
        const int64_t nb = K / 32;                                                                            \
        __m256 acc[CPU_NC];                                                                                   \
        __m128 mins[CPU_NC]; /* lane 1: sum of m * s */                                                      \
        for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps(), mins[c] = _mm_setzero_ps();           \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                 \
            _mm_prefetch((const char *)(x + ib) + 3072, _MM_HINT_T0);                                         \
            const __m256i q = VALUES(&x[ib]);                                                                 \
            for (int c = 0; c < nc; c++) {                                                                    \
                const act8 *a = (const act8 *)ACT(c) + ib;                                                    \
                __m256i p = dot_u8s8(_mm256_setzero_si256(), q, _mm256_loadu_si256((const __m256i *)a->qs)); \
                const __m128 t = dm_times_ds(&x[ib], a);                                                      \
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcastss_ps(t), acc[c]);            \
                mins[c] = _mm_add_ps(mins[c], t);                                                             \
            }                                                                                                 \
        }                                                                                                     \
        for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]) + _mm_cvtss_f32(_mm_movehdup_ps(mins[c]));     \
    }                                                                                                         \
    NC1_SPECIALIZED(NAME, NAME##_body)

DOT_MIN32(dot_q4_1_v, blk_q4_1, q4_1_values)
DOT_MIN32(dot_q5_1_v, blk_q5_1, q5_1_values)

/* Q4_1 against one activation column (decoding), two blocks per step. The
 * one-block loop above is compute-bound on a small model's short rows (about
 * 20 instructions per 20-byte block: SmolLM2's Q4_1 rows stream at ~17 GB/s
 * of 25.8 on a Zen 2 EPYC), so here one register holds the low nibbles of
 * both blocks ([b0 elements 0..15 | b1 elements 0..15]) and one the high
 * nibbles, against the two act8 halves loaded to match: the u8 x s8 pair
 * sums of low and high add in i16 (|4 * 15 * 127| fits) before one widening
 * to i32 lanes 0..3 (block 0) and 4..7 (block 1), and one FMA scales both
 * blocks. The min terms are added per block in the same order as
 * DOT_MIN32's; only the float rounding of the scaled lanes differs. */
static void dot_q4_1_1(int64_t K, const void *w, const void *act, float *out) {
    const blk_q4_1 *x = w;
    const act8 *a = act;
    const int64_t nb = K / 32;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps(); /* lane 1: sum of m * s */
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        prefetch_row_ahead(x + ib, 2 * sizeof(blk_q4_1));
        const __m256i v = _mm256_loadu2_m128i((const __m128i *)x[ib + 1].qs, (const __m128i *)x[ib].qs);
        const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        const __m256i alo = _mm256_loadu2_m128i((const __m128i *)a[ib + 1].qs, (const __m128i *)a[ib].qs);
        const __m256i ahi =
            _mm256_loadu2_m128i((const __m128i *)(a[ib + 1].qs + 16), (const __m128i *)(a[ib].qs + 16));
#if KERNELS_VNNI
        const __m256i p = dot_u8s8(dot_u8s8(_mm256_setzero_si256(), lo, alo), hi, ahi);
#else
        const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
        const __m256i p = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
#endif
        const __m128 t0 = dm_times_ds(&x[ib], &a[ib]), t1 = dm_times_ds(&x[ib + 1], &a[ib + 1]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set_m128(_mm_broadcastss_ps(t1), _mm_broadcastss_ps(t0)),
                              acc);
        mins = _mm_add_ps(_mm_add_ps(mins, t0), t1);
    }
    for (; ib < nb; ib++) { /* an odd last block, as DOT_MIN32 */
        const __m256i p =
            dot_u8s8(_mm256_setzero_si256(), q4_1_values(&x[ib]), _mm256_loadu_si256((const __m256i *)a[ib].qs));
        const __m128 t = dm_times_ds(&x[ib], &a[ib]);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcastss_ps(t), acc);
        mins = _mm_add_ps(mins, t);
    }
    out[0] = hsum256(acc) + _mm_cvtss_f32(_mm_movehdup_ps(mins));
}

static void dot_q4_1_y(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    if (nc == 1) dot_q4_1_1(K, w, act, out);
    else dot_q4_1_v(K, w, act, act_stride, nc, out);
}

/* Q6_K x act8k: for half n (128 elements) and quarter k, the 32 values are
 * ql[64n + 32(k&1) + l] nibble (k>>1) | ((qh[32n + l] >> 2k) & 3) << 4, and
 * their two groups of 16 use scales[8n + 2k] and [8n + 2k + 1]. The -32
 * offset: isum -= 32 * sum_g scales[g] * bsums[g]. */
KERNEL_INLINE void dot_q6_k_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                   float *out) {
    const blk_q6_k *x = w;
    const int64_t nb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q6_k *b = x + ib;
        __m256i q[8], scl[8];
        for (int n = 0; n < 2; n++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * n + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * n));
            __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int k = 0; k < 4; k++) {
                __m256i hk = _mm256_and_si256(_mm256_srli_epi16(h, 2 * k), m2);
                q[4 * n + k] = _mm256_or_si256(lows[k], _mm256_slli_epi16(hk, 4));
                int g = 8 * n + 2 * k;
                scl[4 * n + k] = _mm256_set_m128i(_mm_set1_epi16(b->scales[g + 1]), _mm_set1_epi16(b->scales[g]));
            }
        }
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m256i sumi = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(a->qs + 32 * j));
                sumi = dot_u8s8_scaled(sumi, q[j], av, scl[j]);
            }
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), sc16);
            sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(d * a->d), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_q6_k_v, dot_q6_k_v_body)


#if KERNELS_AVX512
/* 512-bit Q4_K / Q6_K: a register holds 64 contiguous elements (two Q4_K
 * sub-blocks, four Q6_K groups), matching 64 contiguous activation bytes;
 * the u8 x s8 pair sums (maddubs) are multiplied by the i16 scale of their
 * group and summed into i32 lanes (vpdpwssd with VNNI, madd + add without).
 * The scales are unpacked with vector word permutes, not scalar inserts.
 * Same sums as the 256-bit versions above. */
static inline __m512i dot_scaled_512(__m512i acc, __m512i u, __m512i s, __m512i scale) {
#if KERNELS_VNNI
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, s), scale);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), scale));
#endif
}

/* 32 bytes as 64 nibbles: [low nibbles | high nibbles]. */
static inline __m512i nibbles_512(const uint8_t *p) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    v = _mm512_mask_srli_epi16(v, (__mmask32)0xffff0000u, v, 4);
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* The i16 word permute placing words w0, w1 (w2, w3) in the 8- or
 * 16-word runs of a scale vector. */
static inline __m512i words_idx2(int w0, int w1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)w0)), _mm256_set1_epi16((short)w1), 1);
}

static inline __m512i words_idx4(int w0) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16((short)(w0 + 1)), _mm_set1_epi16((short)w0))),
        _mm256_set_m128i(_mm_set1_epi16((short)(w0 + 3)), _mm_set1_epi16((short)(w0 + 2))), 1);
}

/* Q4_K / Q5_K scales: the 8 six-bit scales and 8 mins of 12 packed bytes
 * (k4_unpack's bit moves on all 16 at once) as u16 words in the order
 * [sc0..sc3, mn0..mn3, sc4..sc7, mn4..mn7]. s + 16 must be readable (the
 * block goes on with qs). */
static inline __m256i k4_scales_words(const uint8_t *s) {
    const __m128i x = _mm_loadu_si128((const __m128i *)s);
    /* a: [s0..s3, s4..s7, s8..s11, s8..s11]; b: [0 x8, s0..s3, s4..s7] */
    __m128i a = _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 9, 10, 11));
    __m128i b = _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2, 3, 4, 5, 6, 7));
    a = _mm_mask_srli_epi16(a, 0xc0, a, 4); /* bytes 12..15: s8..s11 >> 4 */
    /* low bits: & 63 for sc0..3/mn0..3, & 15 for the rest; high bits:
     * (s >> 6) << 4 of s0..s7 into bytes 8..15 */
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
    __m128i m = _mm_setr_epi8(63, 63, 63, 63, 63, 63, 63, 63, 15, 15, 15, 15, 15, 15, 15, 15);
    return _mm256_cvtepu8_epi16(_mm_ternarylogic_epi32(a, m, hi, 0xEA)); /* (a & m) | hi */
}

/* A Q4_K block unpacked for the 512-bit dots: its 256 values as four
 * registers of 64 nibbles, their scales as i16 words beside them, the
 * mins per pair of 16-element bsums, and [d, dmin]. */
typedef struct q4k_512 {
    __m512i q[4], scl[4];
    __m256i mins16;
    __m128 dd;
} q4k_512;

KERNEL_INLINE void q4k_512_unpack(const blk_q4_k *b, q4k_512 *u) {
    /* the mins, one per pair of 16-element bsums (k4_scales_words order) */
    const __m256i min_idx = _mm256_setr_epi16(4, 4, 5, 5, 6, 6, 7, 7, 12, 12, 13, 13, 14, 14, 15, 15);
    __m256i sw = k4_scales_words(b->scales);
    __m512i sw512 = _mm512_castsi256_si512(sw);
    u->mins16 = _mm256_permutexvar_epi16(min_idx, sw);
    /* [d, dmin] * a->d later: both converted at once */
    u->dd = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)b->d | (uint32_t)b->dmin << 16)));
    for (int j = 0; j < 4; j++) {
        u->q[j] = nibbles_512(b->qs + 32 * j);
        u->scl[j] = _mm512_permutexvar_epi16(words_idx2(2 * j + 4 * (j >= 2), 2 * j + 1 + 4 * (j >= 2)), sw512);
    }
}

/* One unpacked block against one act8k block (its 256 bytes in av, its
 * bsums, its d): the scaled sum into acc, the mins term into accm. */
KERNEL_INLINE void q4k_512_acc(const q4k_512 *u, const __m512i av[4], __m256i bsums, float ad, __m512 *acc,
                               __m256 *accm) {
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) sumi = dot_scaled_512(sumi, u->q[j], av[j], u->scl[j]);
    __m256i mins = _mm256_madd_epi16(bsums, u->mins16);
    __m128 f = _mm_mul_ps(u->dd, _mm_set1_ps(ad));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_broadcastss_ps(f), *acc);
    *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_broadcastss_ps(_mm_movehdup_ps(f)), *accm);
}

KERNEL_INLINE void act8k_512_load(const act8k *a, __m512i av[4], __m256i *bsums) {
    for (int j = 0; j < 4; j++) av[j] = _mm512_loadu_si512(a->qs + 64 * j);
    *bsums = _mm256_loadu_si256((const __m256i *)a->bsums);
}

static void dot_q4_k_512(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q4_k *x = w;
    const int64_t nb = K / 256;
    __m512 acc[CPU_NC];
    __m256 accm[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm512_setzero_ps(), accm[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q4_k *b = x + ib;
        _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
        _mm_prefetch((const char *)b + 3072 + 64, _MM_HINT_T0);
        q4k_512 u;
        q4k_512_unpack(b, &u);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m512i av[4];
            __m256i bsums;
            act8k_512_load(a, av, &bsums);
            q4k_512_acc(&u, av, bsums, a->d, &acc[c], &accm[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = _mm512_reduce_add_ps(acc[c]) - hsum256(accm[c]);
}

/* Decoding's many rows against one column (cpu_dotr_fn): row after row
 * in one call, so the kernel's set-up (its constants, the call, the
 * reductions' registers) is paid once per run of rows instead of once per
 * row; the matrices of a small model have rows of 2-4 blocks, where that
 * cost was a third of the time. The weights stream in address order, as
 * the hardware prefetcher likes them (four rows interleaved block by
 * block, sharing the activation loads, was 25% slower: the prefetcher
 * lost the stream). Each row's sums are dot_q4_k_512's with nc 1, in the
 * same order: the same bits. The straightforward version: dot_q4_k_512
 * per row. */
static void dotr_q4_k_512(int64_t K, const void *w, size_t w_stride, const void *act, int64_t nr, float *out) {
    const act8k *a0 = act;
    const int64_t nb = K / 256;
    for (int64_t r = 0; r < nr; r++) {
        const blk_q4_k *x = (const blk_q4_k *)((const uint8_t *)w + (size_t)r * w_stride);
        __m512 acc = _mm512_setzero_ps();
        __m256 accm = _mm256_setzero_ps();
        for (int64_t ib = 0; ib < nb; ib++) {
            const blk_q4_k *b = x + ib;
            _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
            _mm_prefetch((const char *)b + 3072 + 64, _MM_HINT_T0);
            q4k_512 u;
            q4k_512_unpack(b, &u);
            __m512i av[4];
            __m256i bsums;
            act8k_512_load(a0 + ib, av, &bsums);
            q4k_512_acc(&u, av, bsums, a0[ib].d, &acc, &accm);
        }
        out[r] = _mm512_reduce_add_ps(acc) - hsum256(accm);
    }
}

/* Q6_K, per half n: ql[64n..64n+63] is one register whose low nibbles are
 * elements 128n + 0..63 and high nibbles 128n + 64..127; qh[32n + l] holds
 * the two high bits of element 128n + l + 32k in bits 2k, 2k+1 (k < 4). */
typedef struct q6k_512 {
    __m512i q[4], scl[4];
    __m256i sc16;
    float d;
} q6k_512;

KERNEL_INLINE void q6k_512_unpack(const blk_q6_k *b, q6k_512 *u) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    u->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    const __m512i sc512 = _mm512_castsi256_si512(u->sc16);
    for (int n = 0; n < 2; n++) {
        __m512i l = _mm512_loadu_si512(b->ql + 64 * n);
        /* h2: qh in the low half, qh >> 2 in the high half; bits 4-5 of
         * each byte of h2 << 4 are then the high bits of quarters 0, 1,
         * and bits 4-5 of h2 those of quarters 2, 3 */
        __m512i h2 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * n)));
        h2 = _mm512_mask_srli_epi16(h2, (__mmask32)0xffff0000u, h2, 2);
        __m512i hi01 = _mm512_and_si512(_mm512_slli_epi16(h2, 4), m30);
        __m512i hi23 = _mm512_and_si512(h2, m30);
        /* (a & m4) | b */
        u->q[2 * n] = _mm512_ternarylogic_epi32(l, hi01, m4, 0xEC);
        u->q[2 * n + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(l, 4), hi23, m4, 0xEC);
        u->scl[2 * n] = _mm512_permutexvar_epi16(words_idx4(8 * n), sc512);
        u->scl[2 * n + 1] = _mm512_permutexvar_epi16(words_idx4(8 * n + 4), sc512);
    }
    u->d = f16s(b->d);
}

KERNEL_INLINE void q6k_512_acc(const q6k_512 *u, const __m512i av[4], __m256i bsums, float ad, __m512 *acc) {
    __m512i sumi = _mm512_setzero_si512();
    for (int j = 0; j < 4; j++) sumi = dot_scaled_512(sumi, u->q[j], av[j], u->scl[j]);
    /* the -32 offset: 32 * sum_g sc_g * bsums_g, folded into the low half */
    __m256i off = _mm256_madd_epi16(bsums, u->sc16);
    sumi = _mm512_mask_sub_epi32(sumi, 0x00ff, sumi, _mm512_castsi256_si512(_mm256_slli_epi32(off, 5)));
    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), _mm512_set1_ps(u->d * ad), *acc);
}

static void dot_q6_k_512(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    const blk_q6_k *x = w;
    const int64_t nb = K / 256;
    __m512 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q6_k *b = x + ib;
        _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
        _mm_prefetch((const char *)b + 3072 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + 3072 + 128, _MM_HINT_T0);
        q6k_512 u;
        q6k_512_unpack(b, &u);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m512i av[4];
            __m256i bsums;
            act8k_512_load(a, av, &bsums);
            q6k_512_acc(&u, av, bsums, a->d, &acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = _mm512_reduce_add_ps(acc[c]);
}

/* As dotr_q4_k_512, for Q6_K (dot_q6_k_512's sums per row: the same bits). */
static void dotr_q6_k_512(int64_t K, const void *w, size_t w_stride, const void *act, int64_t nr, float *out) {
    const act8k *a0 = act;
    const int64_t nb = K / 256;
    for (int64_t r = 0; r < nr; r++) {
        const blk_q6_k *x = (const blk_q6_k *)((const uint8_t *)w + (size_t)r * w_stride);
        __m512 acc = _mm512_setzero_ps();
        for (int64_t ib = 0; ib < nb; ib++) {
            const blk_q6_k *b = x + ib;
            _mm_prefetch((const char *)b + 3072, _MM_HINT_T0);
            _mm_prefetch((const char *)b + 3072 + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)b + 3072 + 128, _MM_HINT_T0);
            q6k_512 u;
            q6k_512_unpack(b, &u);
            __m512i av[4];
            __m256i bsums;
            act8k_512_load(a0 + ib, av, &bsums);
            q6k_512_acc(&u, av, bsums, a0[ib].d, &acc);
        }
        out[r] = _mm512_reduce_add_ps(acc);
    }
}
#endif


/* ------------------------------------------- decoding from x16 groups */

/* Q4_K from the x16 layout (cpu_repack.h): one lane per row, each 4-byte
 * group of activations broadcast to all rows at once; per block the
 * sub-blocks' exact integer sums times their scales, less the mins against
 * the activations' bsums, then one float step per block and row. */
#if KERNELS_AVX512
static inline __m512i dpbusd_512(__m512i acc, __m512i u, __m512i s) {
#if KERNELS_VNNI
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

static void dotx_q4_k(int64_t K, const void *wx, const void *act, int64_t n_groups, float *out) {
    const cpu_q4kx16 *x = wx;
    const act8k *a = act;
    const int64_t nb = K / 256;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int64_t gi = 0; gi < n_groups; gi++) {
        __m512 accd = _mm512_setzero_ps(), accm = _mm512_setzero_ps();
        for (int64_t ib = 0; ib < nb; ib++, x++) {
            const act8k *A = a + ib;
            /* one line 8 KiB ahead: the hardware streams within a page,
             * this starts the pages ahead of it (a line of each of the
             * block's 37 lines 3 blocks ahead was 1.5-2x slower from L3) */
            _mm_prefetch((const char *)x + 8192, _MM_HINT_T0);
            __m512i sumi = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) {
                __m512i slo = _mm512_setzero_si512(), shi = _mm512_setzero_si512();
                for (int g = 0; g < 8; g++) {
                    const __m512i ch = _mm512_loadu_si512(x->qs[c][g]);
                    int32_t alo, ahi;
                    memcpy(&alo, A->qs + 64 * c + 4 * g, 4);
                    memcpy(&ahi, A->qs + 64 * c + 32 + 4 * g, 4);
                    slo = dpbusd_512(slo, _mm512_and_si512(ch, m4), _mm512_set1_epi32(alo));
                    shi = dpbusd_512(shi, _mm512_and_si512(_mm512_srli_epi16(ch, 4), m4), _mm512_set1_epi32(ahi));
                }
                const __m512i sc0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->sc[2 * c]));
                const __m512i sc1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->sc[2 * c + 1]));
                sumi = _mm512_add_epi32(sumi, _mm512_add_epi32(_mm512_mullo_epi32(slo, sc0), _mm512_mullo_epi32(shi, sc1)));
            }
            __m512i mins = _mm512_setzero_si512();
            for (int sb = 0; sb < 8; sb++) {
                const __m512i mn = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)x->mn[sb]));
                mins = _mm512_add_epi32(mins, _mm512_mullo_epi32(mn, _mm512_set1_epi32(A->bsums[2 * sb] + A->bsums[2 * sb + 1])));
            }
            const __m512 ad = _mm512_set1_ps(A->d);
            const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x->d)), ad);
            const __m512 dm = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)x->dmin)), ad);
            accd = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi), d, accd);
            accm = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mins), dm, accm);
        }
        _mm512_storeu_ps(out + CPU_XROWS * gi, _mm512_sub_ps(accd, accm));
    }
}
#else
static inline __m256i dpbusd_256(__m256i acc, __m256i u, __m256i s) {
#if KERNELS_VNNI
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* As the AVX-512 one, the 16 rows as two halves of 8 lanes. */
static void dotx_q4_k(int64_t K, const void *wx, const void *act, int64_t n_groups, float *out) {
    const cpu_q4kx16 *x = wx;
    const act8k *a = act;
    const int64_t nb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t gi = 0; gi < n_groups; gi++) {
        __m256 accd[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        __m256 accm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t ib = 0; ib < nb; ib++, x++) {
            const act8k *A = a + ib;
            /* one line 8 KiB ahead: the hardware streams within a page,
             * this starts the pages ahead of it (a line of each of the
             * block's 37 lines 3 blocks ahead was 1.5-2x slower from L3) */
            _mm_prefetch((const char *)x + 8192, _MM_HINT_T0);
            for (int h = 0; h < 2; h++) {
                __m256i sumi = _mm256_setzero_si256();
                for (int c = 0; c < 4; c++) {
                    __m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
                    for (int g = 0; g < 8; g++) {
                        const __m256i ch = _mm256_loadu_si256((const __m256i *)(x->qs[c][g][8 * h]));
                        int32_t alo, ahi;
                        memcpy(&alo, A->qs + 64 * c + 4 * g, 4);
                        memcpy(&ahi, A->qs + 64 * c + 32 + 4 * g, 4);
                        slo = dpbusd_256(slo, _mm256_and_si256(ch, m4), _mm256_set1_epi32(alo));
                        shi = dpbusd_256(shi, _mm256_and_si256(_mm256_srli_epi16(ch, 4), m4), _mm256_set1_epi32(ahi));
                    }
                    const __m256i sc0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->sc[2 * c] + 8 * h)));
                    const __m256i sc1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->sc[2 * c + 1] + 8 * h)));
                    sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_mullo_epi32(slo, sc0), _mm256_mullo_epi32(shi, sc1)));
                }
                __m256i mins = _mm256_setzero_si256();
                for (int sb = 0; sb < 8; sb++) {
                    const __m256i mn = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(x->mn[sb] + 8 * h)));
                    mins = _mm256_add_epi32(mins, _mm256_mullo_epi32(mn, _mm256_set1_epi32(A->bsums[2 * sb] + A->bsums[2 * sb + 1])));
                }
                const __m256 ad = _mm256_set1_ps(A->d);
                const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x->d + 8 * h))), ad);
                const __m256 dm = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x->dmin + 8 * h))), ad);
                accd[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), d, accd[h]);
                accm[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), dm, accm[h]);
            }
        }
        for (int h = 0; h < 2; h++) _mm256_storeu_ps(out + CPU_XROWS * gi + 8 * h, _mm256_sub_ps(accd[h], accm[h]));
    }
}
#endif

/* ------------------------------------------------------------ exp */

/* expf for 8 lanes, Cephes' method: n = round(x / ln 2), r = x - n ln 2 in
 * two steps, exp(r) by a degree-6 polynomial, times 2^n through the exponent
 * bits; about 1 ulp. Inputs below -86 (including -inf) give exactly 0. */
static inline __m256 exp8(__m256 x) {
    /* Below -86 the result is flushed to 0 (exp(-86) = 4.4e-38): clamping
     * there keeps p * 2^n normal. At -87.3 it would go subnormal, and every
     * masked (-inf) softmax entry would cost a microcode assist. */
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-86.0f);
    __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(underflow, y);
}

static double exp_sub_sum_v(float *x, int64_t n, float max) {
    const __m256 mv = _mm256_set1_ps(max);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 y = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
        _mm256_storeu_ps(x + i, y);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
    }
    __m256d s = _mm256_add_pd(s0, s1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    if (i < n) { /* tail through a padded vector */
        float buf[8];
        int m = (int)(n - i);
        for (int j = 0; j < 8; j++) buf[j] = j < m ? x[i + j] - max : -INFINITY;
        _mm256_storeu_ps(buf, exp8(_mm256_loadu_ps(buf)));
        for (int j = 0; j < m; j++) {
            x[i + j] = buf[j];
            sum += buf[j];
        }
    }
    return sum;
}

/* ------------------------------------------------ activation quantizers */

/* f32 -> act8 (as cpu_quants_act8_from_f32): amax by vector max, round to
 * nearest even with cvtps. */
static void act8_from_f32_v(const float *x, act8 *y, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t ib = 0; ib < n / 32; ib++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float amax = _mm_cvtss_f32(m);
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 idv = _mm256_set1_ps(id);
        __m256i q32[4];
        for (int i = 0; i < 4; i++) q32[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], idv));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q32[0], q32[1]), _mm256_add_epi32(q32[2], q32[3]));
        /* pack 32 i32 -> 32 i8 and undo the lane interleaving of packs */
        __m256i p16a = _mm256_packs_epi32(q32[0], q32[1]);
        __m256i p16b = _mm256_packs_epi32(q32[2], q32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[ib].qs, p8);
        int isum = hsum256_i32(sum);
        y[ib].d = _cvtsh_ss(_cvtss_sh(d, 0));
        y[ib].isum = isum;
        y[ib].s = _cvtsh_ss(_cvtss_sh(d * (float)isum, 0));
        y[ib].pad = 0;
    }
}

/* ------------------------------------------------------------- table */

static void kernels_fill(cpu_kernels *k) {
    memset(k, 0, sizeof *k);
    k->name = KERNELS_NAME;
    for (int t = 0; t < TSR_DTYPE_COUNT; t++) k->dot[t] = quants_scalar_dot(t);
    k->dot[TSR_DTYPE_F32] = dot_f32_v;
    k->dot[TSR_DTYPE_F16] = dot_f16_v;
    k->dot[TSR_DTYPE_BF16] = dot_bf16_v;
    k->dot2[TSR_DTYPE_F32] = dot2_f32_v;
    k->dot2[TSR_DTYPE_F16] = dot2_f16_v;
    k->dot2[TSR_DTYPE_BF16] = dot2_bf16_v;
    k->dot[TSR_DTYPE_Q4_0] = dot_q4_0_v;
    k->dot[TSR_DTYPE_Q8_0] = dot_q8_0_v;
    k->dot[TSR_DTYPE_Q4_K] = dot_q4_k_v;
    k->dot[TSR_DTYPE_Q6_K] = dot_q6_k_v;
    k->dot[TSR_DTYPE_Q5_K] = dot_q5_k_v;
    k->dot[TSR_DTYPE_Q5_0] = dot_q5_0_v;
    k->dot[TSR_DTYPE_Q4_1] = dot_q4_1_y;
    k->dot[TSR_DTYPE_Q5_1] = dot_q5_1_v;
#if KERNELS_AVX512
    k->dot[TSR_DTYPE_Q4_K] = dot_q4_k_512;
    k->dot[TSR_DTYPE_Q6_K] = dot_q6_k_512;
    k->dotr[TSR_DTYPE_Q4_K] = dotr_q4_k_512;
    k->dotr[TSR_DTYPE_Q6_K] = dotr_q6_k_512;
#endif
    k->dotx[TSR_DTYPE_Q4_K] = dotx_q4_k;
    k->dot_pair[TSR_DTYPE_Q4_0] = dot_q4_0_pair;
    k->pair_offset[TSR_DTYPE_Q4_0] = 8;
    k->dot_pair[TSR_DTYPE_Q8_0] = dot_q8_0_pair;
    k->pair_offset[TSR_DTYPE_Q8_0] = 0;
    k->exp_sub_sum = exp_sub_sum_v;
    k->act8_from_f32 = act8_from_f32_v;
    k->act8k_from_f32 = cpu_quants_act8k_from_f32;
}
