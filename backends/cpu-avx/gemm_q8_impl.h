/*
 * gemm_q8_impl.h — the packed-panel GEMM (gemm.h) of every quantized weight
 * type, on AVX-512 VNNI. Included by kernels_avx512vnni.c after
 * kernels_impl.h.
 *
 * Every quantized type is, per group of S = 32 (or 16) elements of a row,
 *     w_k = scale_g * q_k + minc_g        (q_k a small integer)
 * e.g. Q4_0: q = nibble - 8, scale = d, no min; Q4_K: q = nibble, scale =
 * d * sc_j, minc = -dmin * m_j. With 8-bit activations a_k = ad_g * qa_k
 * (the same Q8_0 / Q8_1 / Q8_K quantization as the dot kernels), a row's
 * dot with a column is
 *     sum_g  scale_g * ad_g * sum_k q_k qa_k  +  minc_g * ad_g * sum_k qa_k.
 *
 * Weight panel: 16 rows, one per 32-bit lane of a zmm register; for each
 * group g (gstride bytes, in order):
 *     int8  q[S/4][16][4]   q[i][r][j] = element 4i + j of the group, row r
 *     int32 bias[16]        -128 * (sum of the group's q) for row r
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
 *
 * Straightforward version: the plain C dot kernels of quants.c.
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

/* ------------------------------------------------------------- layout */

static size_t gq_group_bytes(const gq_type *t) { return (size_t)(GQ_ROWS * t->S + 64 * (2 + t->has_min)); }
static size_t gq_act_group_bytes(const gq_type *t) { return (size_t)(GQ_NC * t->S + 64); }

static size_t gq_act_bytes(const gq_type *t, int64_t K, int64_t N) {
    return (size_t)((N + GQ_NC - 1) / GQ_NC) * (size_t)(K / t->S) * gq_act_group_bytes(t);
}

static size_t gq_pack_bytes(const gq_type *t, int64_t K) { return (size_t)(K / t->S) * gq_group_bytes(t); }

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

/* Column n of the batch at act: quantize like the dot kernels' activations
 * and scatter into the tile layout. */
static void gq_act_from_f32(const gq_type *t, const avx_kernels *k, const float *x, int64_t K, void *act,
                            int64_t n) {
    const int S = t->S;
    const int64_t G = K / S;
    const size_t gbytes = gq_act_group_bytes(t);
    uint8_t *tile = (uint8_t *)act + (size_t)(n / GQ_NC) * (size_t)G * gbytes;
    const int c = (int)(n % GQ_NC);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
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
        gq_act8k_from_f32(x + 256 * sb, &a, 256);
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
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i q_idx = _mm512_mullo_epi32(lane, _mm512_set1_epi32(256)), s_idx = _mm512_slli_epi32(lane, 4);
    const __m512i u128 = _mm512_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nblocks; b++) {
        for (int r = 0; r < nrows; r++)
            t->decode((const uint8_t *)w + (size_t)r * w_stride + (size_t)b * t->block_bytes, q[r], sc[r], mn[r]);
        for (int gi = 0; gi < gpb; gi++) {
            uint8_t *grp = (uint8_t *)pack + (size_t)(b * gpb + gi) * gbytes;
            __m512i qsum = _mm512_setzero_si512();
            for (int i = 0; i < S / 4; i++) {
                __m512i v = _mm512_i32gather_epi32(q_idx, (const void *)&q[0][S * gi + 4 * i], 1);
                _mm512_store_si512(grp + 64 * i, v);
                qsum = _mm512_dpbusd_epi32(qsum, u128, v);
            }
            _mm512_store_si512(grp + GQ_ROWS * S, _mm512_sub_epi32(_mm512_setzero_si512(), qsum));
            _mm512_store_ps(grp + GQ_ROWS * S + 64, _mm512_i32gather_ps(s_idx, &sc[0][gi], 4));
            if (t->has_min) _mm512_store_ps(grp + GQ_ROWS * S + 128, _mm512_i32gather_ps(s_idx, &mn[0][gi], 4));
        }
    }
}

/* One panel x nc (<= 8) columns of one tile, over all G groups. Inlined with
 * constant S, has_min and nc so the loops unroll and every activation
 * address is the group pointer plus a constant. */
static inline __attribute__((always_inline)) void gq_tile(const uint8_t *pk, const uint8_t *tile, int64_t G,
                                                           const int S, const int has_min, const int nc,
                                                           float *dst, size_t dst_stride, __mmask16 rmask) {
    const size_t gbytes = (size_t)(GQ_ROWS * S + 64 * (2 + has_min)), abytes = (size_t)(GQ_NC * S + 64);
    __m512 acc[GQ_NC];
    GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++, pk += gbytes, tile += abytes) {
        /* weight vector outer, columns inner: nc independent sums in flight */
        __m512i p[GQ_NC];
        const __m512i bias = _mm512_load_si512(pk + GQ_ROWS * S);
        GQ_UNROLL for (int c = 0; c < nc; c++) p[c] = bias;
        GQ_UNROLL for (int i = 0; i < S / 4; i++) {
            const __m512i wq = _mm512_load_si512(pk + 64 * i);
            GQ_UNROLL for (int c = 0; c < nc; c++) {
                int32_t v;
                memcpy(&v, tile + S * c + 4 * i, 4);
                p[c] = _mm512_dpbusd_epi32(p[c], _mm512_set1_epi32(v), wq);
            }
        }
        const __m512 sc = _mm512_load_ps(pk + GQ_ROWS * S + 64);
        const float *ad = (const float *)(tile + GQ_NC * S), *as = ad + 8;
        GQ_UNROLL for (int c = 0; c < nc; c++)
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[c]), _mm512_mul_ps(sc, _mm512_set1_ps(ad[c])), acc[c]);
        if (has_min) {
            const __m512 mn = _mm512_load_ps(pk + GQ_ROWS * S + 128);
            GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = _mm512_fmadd_ps(mn, _mm512_set1_ps(as[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) _mm512_mask_storeu_ps(dst + (size_t)c * dst_stride, rmask, acc[c]);
}

/* All tiles of N columns; the last may be partial. */
static inline __attribute__((always_inline)) void gq_run_s(const void *pack, int nrows, int64_t K, const void *act,
                                                            int64_t N, float *dst, size_t dst_stride,
                                                            const int S, const int has_min) {
    const int64_t G = K / S;
    const size_t tile_bytes = (size_t)G * (size_t)(GQ_NC * S + 64);
    const __mmask16 rmask = (__mmask16)((1u << nrows) - 1);
    for (int64_t n0 = 0; n0 < N; n0 += GQ_NC) {
        const uint8_t *tile = (const uint8_t *)act + (size_t)(n0 / GQ_NC) * tile_bytes;
        float *d = dst + (size_t)n0 * dst_stride;
        switch (N - n0 < GQ_NC ? (int)(N - n0) : GQ_NC) {
        case 8: gq_tile(pack, tile, G, S, has_min, 8, d, dst_stride, rmask); break;
        case 7: gq_tile(pack, tile, G, S, has_min, 7, d, dst_stride, rmask); break;
        case 6: gq_tile(pack, tile, G, S, has_min, 6, d, dst_stride, rmask); break;
        case 5: gq_tile(pack, tile, G, S, has_min, 5, d, dst_stride, rmask); break;
        case 4: gq_tile(pack, tile, G, S, has_min, 4, d, dst_stride, rmask); break;
        case 3: gq_tile(pack, tile, G, S, has_min, 3, d, dst_stride, rmask); break;
        case 2: gq_tile(pack, tile, G, S, has_min, 2, d, dst_stride, rmask); break;
        default: gq_tile(pack, tile, G, S, has_min, 1, d, dst_stride, rmask); break;
        }
    }
}

/* ------------------------------------------------------ per-type tables */

/* The gemm_ops entry points of one type: thin wrappers binding its gq_type
 * (and, for run, the constant S and has_min). */
#define GQ_OPS(NAME, S_, MIN_, ACTK_, BLOCK_, BLKT_, DECODE_)                                                  \
    static const gq_type gq_t_##NAME = {S_, MIN_, ACTK_, BLOCK_, sizeof(BLKT_), DECODE_};                     \
    static size_t gq_act_bytes_##NAME(int64_t K, int64_t N) { return gq_act_bytes(&gq_t_##NAME, K, N); }       \
    static void gq_act_##NAME(const avx_kernels *k, const float *x, int64_t K, void *act, int64_t n) {        \
        gq_act_from_f32(&gq_t_##NAME, k, x, K, act, n);                                                        \
    }                                                                                                          \
    static size_t gq_pack_bytes_##NAME(int64_t K) { return gq_pack_bytes(&gq_t_##NAME, K); }                  \
    static void gq_pack_##NAME(const void *w, size_t ws, int nrows, int64_t K, void *pack) {                  \
        gq_pack(&gq_t_##NAME, w, ws, nrows, K, pack);                                                          \
    }                                                                                                          \
    static void gq_run_##NAME(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst, \
                              size_t dst_stride) {                                                             \
        gq_run_s(pack, nrows, K, act, N, dst, dst_stride, S_, MIN_);                                           \
    }                                                                                                          \
    static const gemm_ops gq_ops_##NAME = {GQ_ROWS,          gq_act_bytes_##NAME, gq_act_##NAME,             \
                                           gq_pack_bytes_##NAME, gq_pack_##NAME,  gq_run_##NAME};

GQ_OPS(q4_0, 32, 0, 0, 32, blk_q4_0, gq_decode_q4_0)
GQ_OPS(q4_1, 32, 1, 0, 32, blk_q4_1, gq_decode_q4_1)
GQ_OPS(q5_0, 32, 0, 0, 32, blk_q5_0, gq_decode_q5_0)
GQ_OPS(q5_1, 32, 1, 0, 32, blk_q5_1, gq_decode_q5_1)
GQ_OPS(q8_0, 32, 0, 0, 32, blk_q8_0, gq_decode_q8_0)
GQ_OPS(q2_k, 16, 1, 1, 256, blk_q2_k, gq_decode_q2_k)
GQ_OPS(q3_k, 16, 0, 1, 256, blk_q3_k, gq_decode_q3_k)
GQ_OPS(q4_k, 32, 1, 1, 256, blk_q4_k, gq_decode_q4_k)
GQ_OPS(q5_k, 32, 1, 1, 256, blk_q5_k, gq_decode_q5_k)
GQ_OPS(q6_k, 16, 0, 1, 256, blk_q6_k, gq_decode_q6_k)

static void gemm_q8_register(avx_kernels *k) {
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
