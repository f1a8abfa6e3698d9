/*
 * gemm_float_impl.h — the packed-panel GEMM (cpu_gemm.h) of F16 and BF16
 * weights, with f32 arithmetic. Included after kernels_impl.h by every
 * kernels_<level>.c: with KERNELS_AVX512 the vectors are zmm, else ymm
 * (AVX2 + FMA + F16C).
 *
 * Weight panel: pack() only records where the panel's GF_ROWS rows are
 * (the weights stay in place, valid until run() returns); run() converts
 * them block by block, just before use, into a GF_KC x GF_MR f32 block of
 * the pack buffer laid out [k][GF_MR] (GF_MR = 2 vectors of rows: one
 * k-step is two aligned vector loads; rows past nrows are zero), and
 * prefetches the next block's weights while the current one is multiplied,
 * so reading the weights from memory overlaps the arithmetic and the packed
 * block never leaves L1.
 * Activations: tiles of GF_NC columns; within a tile, groups of 16 k laid
 * out [k / 16][GF_NC][16] f32 (K rounded up to 16, zero padded), so a
 * column's conversion writes whole cache lines (threads converting
 * neighbouring columns never share one) and every activation the
 * microkernel broadcasts is at a constant offset from one pointer.
 * Microkernel: GF_MR rows x GF_NC columns in 2 x GF_NC accumulators (2 x 12
 * zmm, 2 x 6 ymm); per k one load per row vector, one broadcast per column
 * and two FMAs per column.
 * Blocking: run() walks K in blocks of GF_KC and the panel in micro-panels;
 * each (K block, micro-panel) is packed once and every column tile's block
 * streams past it; the first K block stores the partial sums into dst,
 * later ones add to them.
 *
 * Exactness: like the dot kernels (FLOAT_DOT in kernels_impl.h), only the
 * first K & ~31 elements are summed in f32; the rest (all of a short row,
 * e.g. attention over a head of 8) are added in double, product by product
 * in k order, to the f32 sum, so tiny models' logits stay on llama.cpp's.
 *
 * Straightforward version: dot_f16_v / dot_bf16_v (kernels_impl.h), one row
 * against a few columns at a time.
 */

#if KERNELS_AVX512
enum { GF_MR = 32, GF_NC = 12 };
#define GF_V __m512
#define GF_MASK __mmask16
#define gf_set1(x) _mm512_set1_ps(x)
#define gf_zero() _mm512_setzero_ps()
#define gf_fma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define gf_add(a, b) _mm512_add_ps(a, b)
#define gf_load(p) _mm512_load_ps(p)
#define gf_mload(m, p) _mm512_maskz_loadu_ps(m, p)
#define gf_mstore(p, m, v) _mm512_mask_storeu_ps(p, m, v)
/* lanes [0, n) of a vector of 16 (n clamped to 0..16) */
static inline GF_MASK gf_mask(int n) {
    return n >= 16 ? (GF_MASK)0xFFFF : n <= 0 ? (GF_MASK)0 : (GF_MASK)((1u << n) - 1);
}
#else
enum { GF_MR = 16, GF_NC = 6 };
#define GF_V __m256
#define GF_MASK __m256i
#define gf_set1(x) _mm256_set1_ps(x)
#define gf_zero() _mm256_setzero_ps()
#define gf_fma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define gf_add(a, b) _mm256_add_ps(a, b)
#define gf_load(p) _mm256_load_ps(p)
#define gf_mload(m, p) _mm256_maskload_ps(p, m)
#define gf_mstore(p, m, v) _mm256_maskstore_ps(p, m, v)
static inline GF_MASK gf_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

enum {
    GF_VW = GF_MR / 2,  /* floats per vector */
    GF_ROWS = 128,      /* rows per panel: GF_ROWS / GF_MR micro-panels */
    GF_KC = 256,        /* K block */
    GF_KG = 16,         /* k per activation group: one cache line per column */
};

static int64_t gf_kpad(int64_t K) { return (K + GF_KG - 1) & ~(int64_t)(GF_KG - 1); }

/* ------------------------------------------------------- activations */

static size_t gf_act_bytes(int64_t K, int64_t N) {
    return (size_t)((N + GF_NC - 1) / GF_NC) * (size_t)gf_kpad(K) * GF_NC * sizeof(float);
}

static void gf_act_from_f32(const cpu_kernels *k, const float *x, int64_t K, void *act, int64_t n) {
    (void)k;
    float *tile = (float *)act + (size_t)(n / GF_NC) * (size_t)gf_kpad(K) * GF_NC;
    float *col = tile + (n % GF_NC) * GF_KG;
    int64_t i = 0;
    for (; i + GF_KG <= K; i += GF_KG) {
        /* the lines written are GF_NC lines apart, beyond the hardware
         * prefetcher: fetch them a few groups ahead (a third faster) */
        _mm_prefetch((const char *)(col + (i + 4 * GF_KG) * GF_NC), _MM_HINT_T0);
        _mm256_storeu_ps(col + i * GF_NC, _mm256_loadu_ps(x + i));
        _mm256_storeu_ps(col + i * GF_NC + 8, _mm256_loadu_ps(x + i + 8));
    }
    if (i < K) {
        float last[GF_KG] = {0};
        memcpy(last, x + i, (size_t)(K - i) * sizeof(float));
        memcpy(col + i * GF_NC, last, sizeof last);
    }
}

/* ------------------------------------------------------------- panel */

/* What pack() records: the panel's rows as stored. */
typedef struct gf_panel {
    const uint8_t *w;
    size_t w_stride;
    int nrows;
} gf_panel;

enum { GF_HEAD = 64 }; /* bytes before the f32 block, keeping it aligned */

static size_t gf_pack_bytes(int64_t K) {
    (void)K;
    return GF_HEAD + (size_t)GF_KC * GF_MR * sizeof(float);
}

static void gf_pack(const void *w, size_t w_stride, int nrows, int64_t K, void *pack) {
    (void)K;
    gf_panel pn = {(const uint8_t *)w, w_stride, nrows};
    memcpy(pack, &pn, sizeof pn);
}

/* 8 x 8 f32 transpose: r[i] holds row i on entry, column i on exit. */
static inline __attribute__((always_inline)) void gf_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

#if KERNELS_AVX512
/* 16 x 16 f32 transpose: r[i] holds row i on entry, column i on exit (64
 * shuffles, against 96 for four 8 x 8). */
static inline __attribute__((always_inline)) void gf_transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4i + j], 128-bit lane L: element 4L + j of rows 4i .. 4i + 3 */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
        __m512 w1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        __m512 w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
        r[j] = _mm512_shuffle_f32x4(v1, w1, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
        r[4 + j] = _mm512_shuffle_f32x4(v2, w2, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(v2, w2, 0xDD);
    }
}

static inline __m512 gf_load16_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __m512 gf_load16_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
#endif

static inline __m256 gf_load8_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 gf_load8_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* kc k-steps of one micro-panel: its first `live` rows, from w (row i at
 * w + i * w_stride, already offset to the block's first k; the others
 * zero) -> mp, [k][GF_MR]: for each group of 16 (zmm) or 8 rows, blocks
 * of 16 or 8 k are loaded, converted and transposed into 16 or 8 k-steps.
 * `full` (live == GF_MR) and bf16 are constants in each inlined copy. */
static inline __attribute__((always_inline)) void gf_pack_block(const uint8_t *w, size_t w_stride, int live,
                                                               int64_t kc, float *mp, const int bf16,
                                                               const int full) {
    int64_t k0 = 0;
#if KERNELS_AVX512
    /* groups of 16 rows, each over the whole block: 16 row pointers fit in
     * registers, and the block (L1-resident) takes the two half-line writes */
    for (int g = 0; g < GF_MR / 16; g++) {
        const uint8_t *wg = w + (size_t)(16 * g) * w_stride;
        for (int64_t k = 0; k + 16 <= kc; k += 16) {
            __m512 v[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) {
                const uint16_t *src = (const uint16_t *)(wg + (size_t)i * w_stride) + k;
                v[i] = full || 16 * g + i < live ? (bf16 ? gf_load16_bf16(src) : gf_load16_f16(src))
                                                 : _mm512_setzero_ps();
            }
            gf_transpose16(v);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++) _mm512_store_ps(mp + (k + j) * GF_MR + 16 * g, v[j]);
        }
    }
    k0 = kc & ~(int64_t)15;
#endif
    for (int g = 0; g < GF_MR / 8; g++) {
        const uint8_t *wg = w + (size_t)(8 * g) * w_stride;
        for (int64_t k = k0; k + 8 <= kc; k += 8) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                const uint16_t *src = (const uint16_t *)(wg + (size_t)i * w_stride) + k;
                v[i] = full || 8 * g + i < live ? (bf16 ? gf_load8_bf16(src) : gf_load8_f16(src)) : _mm256_setzero_ps();
            }
            gf_transpose8(v);
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) _mm256_store_ps(mp + (k + j) * GF_MR + 8 * g, v[j]);
        }
    }
    for (int64_t k = kc & ~(int64_t)7; k < kc; k++)
        for (int i = 0; i < GF_MR; i++) {
            const uint16_t h = i < live ? ((const uint16_t *)(w + (size_t)i * w_stride))[k] : 0;
            mp[k * GF_MR + i] = i < live ? (bf16 ? cpu_bf16_to_f32(h) : f16s(h)) : 0.0f;
        }
}

static void gf_pack_block_n(const uint8_t *w, size_t w_stride, int live, int64_t kc, float *mp, const int bf16) {
    if (bf16) {
        if (live == GF_MR) gf_pack_block(w, w_stride, live, kc, mp, 1, 1);
        else gf_pack_block(w, w_stride, live, kc, mp, 1, 0);
    } else {
        if (live == GF_MR) gf_pack_block(w, w_stride, live, kc, mp, 0, 1);
        else gf_pack_block(w, w_stride, live, kc, mp, 0, 0);
    }
}

/* Prefetch part `part` of `parts` of a block's weights (live rows of
 * kc k-steps from w) into L2: the next block's, spread over the column
 * tiles of the current one, a few rows per tile. always_inline, as
 * prefetch_row_ahead (kernels_impl.h): gcc deletes calls of a wrapper of
 * prefetches that it has not inlined early. */
KERNEL_INLINE void gf_prefetch_part(const uint8_t *w, size_t w_stride, int live, int64_t kc, int64_t part,
                                    int64_t parts) {
    const int64_t r0 = part * live / parts, r1 = (part + 1) * live / parts;
    for (int64_t r = r0; r < r1; r++)
        for (int64_t b = 0; b < kc * 2; b += 64) _mm_prefetch((const char *)(w + (size_t)r * w_stride) + b, _MM_HINT_T1);
}

/* --------------------------------------------------------------- run */

/* dst (+)= micro-panel block (kc k-steps from wp, [k][GF_MR]) x nc columns
 * of the activation block at ap ([k / 16][GF_NC][16]). nc is a constant in
 * each inlined copy so the column loops unroll onto registers. */
static inline __attribute__((always_inline)) void gf_micro(const float *wp, const float *ap, int64_t kc, const int nc,
                                                          float *dst, size_t dst_stride, int add, GF_MASK m0,
                                                          GF_MASK m1) {
    GF_V c0[GF_NC], c1[GF_NC];
#pragma GCC unroll 12
    for (int c = 0; c < nc; c++) c0[c] = c1[c] = gf_zero();
    for (int64_t g = 0; g < kc; g += GF_KG, wp += GF_KG * GF_MR, ap += GF_KG * GF_NC) {
#pragma GCC unroll 16
        for (int j = 0; j < GF_KG; j++) {
            const GF_V w0 = gf_load(wp + j * GF_MR), w1 = gf_load(wp + j * GF_MR + GF_VW);
#pragma GCC unroll 12
            for (int c = 0; c < nc; c++) {
                const GF_V a = gf_set1(ap[c * GF_KG + j]);
                c0[c] = gf_fma(w0, a, c0[c]);
                c1[c] = gf_fma(w1, a, c1[c]);
            }
        }
    }
#pragma GCC unroll 12
    for (int c = 0; c < nc; c++) {
        float *d = dst + (size_t)c * dst_stride;
        if (add) {
            c0[c] = gf_add(c0[c], gf_mload(m0, d));
            c1[c] = gf_add(c1[c], gf_mload(m1, d + GF_VW));
        }
        gf_mstore(d, m0, c0[c]);
        gf_mstore(d + GF_VW, m1, c1[c]);
    }
}

/* dst = (float)((double)dst_f32_sum + sum over k in [kv, K) of the f32
 * products, in double): the tail of FLOAT_DOT, for nr rows x nc columns of
 * one micro-panel (wp: its k-step kv) and one tile. With kv == 0 there is
 * no f32 sum yet. */
static void gf_tail(const float *wp, const float *tile, int64_t kv, int64_t K, int nc, float *dst, size_t dst_stride,
                    int nr) {
    for (int c = 0; c < nc; c++) {
        float *d = dst + (size_t)c * dst_stride;
        float cur[GF_MR] = {0};
        if (kv > 0) memcpy(cur, d, (size_t)nr * sizeof(float));
        for (int q = 0; q < GF_MR; q += 4) {
            __m256d s = _mm256_cvtps_pd(_mm_loadu_ps(cur + q));
            for (int64_t k = kv; k < K; k++) {
                const float a = tile[(k / GF_KG) * GF_KG * GF_NC + c * GF_KG + k % GF_KG];
                __m128 p = _mm_mul_ps(_mm_loadu_ps(wp + (k - kv) * GF_MR + q), _mm_set1_ps(a));
                s = _mm256_add_pd(s, _mm256_cvtps_pd(p));
            }
            _mm_storeu_ps(cur + q, _mm256_cvtpd_ps(s));
        }
        memcpy(d, cur, (size_t)nr * sizeof(float));
    }
}

/* One micro-panel block against one tile block, nc given at run time. */
static void gf_micro_n(const float *wp, const float *ap, int64_t kc, int nc, float *dst, size_t dst_stride, int add,
                       GF_MASK m0, GF_MASK m1) {
    switch (nc) {
#if KERNELS_AVX512 /* GF_NC == 12 */
    case 12: gf_micro(wp, ap, kc, 12, dst, dst_stride, add, m0, m1); break;
    case 11: gf_micro(wp, ap, kc, 11, dst, dst_stride, add, m0, m1); break;
    case 10: gf_micro(wp, ap, kc, 10, dst, dst_stride, add, m0, m1); break;
    case 9: gf_micro(wp, ap, kc, 9, dst, dst_stride, add, m0, m1); break;
    case 8: gf_micro(wp, ap, kc, 8, dst, dst_stride, add, m0, m1); break;
    case 7: gf_micro(wp, ap, kc, 7, dst, dst_stride, add, m0, m1); break;
#endif
    case 6: gf_micro(wp, ap, kc, 6, dst, dst_stride, add, m0, m1); break;
    case 5: gf_micro(wp, ap, kc, 5, dst, dst_stride, add, m0, m1); break;
    case 4: gf_micro(wp, ap, kc, 4, dst, dst_stride, add, m0, m1); break;
    case 3: gf_micro(wp, ap, kc, 3, dst, dst_stride, add, m0, m1); break;
    case 2: gf_micro(wp, ap, kc, 2, dst, dst_stride, add, m0, m1); break;
    default: gf_micro(wp, ap, kc, 1, dst, dst_stride, add, m0, m1); break;
    }
}

static inline __attribute__((always_inline)) void gf_run(const void *pack, int nrows, int64_t K, const void *act,
                                                        int64_t N, float *dst, size_t dst_stride, const int bf16) {
    gf_panel pn;
    memcpy(&pn, pack, sizeof pn);
    float *blk = (float *)((uint8_t *)(uintptr_t)pack + GF_HEAD);
    const float *acts = act;
    if (nrows > pn.nrows) nrows = pn.nrows;
    const int64_t kv = K & ~(int64_t)31, n_tiles = (N + GF_NC - 1) / GF_NC;
    const size_t tile_floats = (size_t)gf_kpad(K) * GF_NC;
    const int n_mp = (nrows + GF_MR - 1) / GF_MR;
    for (int64_t k0 = 0; k0 < kv; k0 += GF_KC) {
        const int64_t kc = kv - k0 < GF_KC ? kv - k0 : GF_KC;
        for (int p = 0; p < n_mp; p++) {
            const int nr = nrows - p * GF_MR, live = nr < GF_MR ? nr : GF_MR;
            const GF_MASK m0 = gf_mask(nr), m1 = gf_mask(nr - GF_VW);
            gf_pack_block_n(pn.w + (size_t)(p * GF_MR) * pn.w_stride + (size_t)k0 * 2, pn.w_stride, live, kc, blk,
                            bf16);
            /* the block after this one: next micro-panel, else next K block */
            int np = p + 1;
            int64_t nk0 = k0;
            if (np == n_mp) np = 0, nk0 = k0 + GF_KC;
            const int nlive = nrows - np * GF_MR < GF_MR ? nrows - np * GF_MR : GF_MR;
            const int64_t nkc = nk0 < kv ? (kv - nk0 < GF_KC ? kv - nk0 : GF_KC) : 0;
            const uint8_t *nw = pn.w + (size_t)(np * GF_MR) * pn.w_stride + (size_t)nk0 * 2;
            for (int64_t t = 0; t < n_tiles; t++) {
                if (nkc) gf_prefetch_part(nw, pn.w_stride, nlive, nkc, t, n_tiles);
                const int nc = N - t * GF_NC < GF_NC ? (int)(N - t * GF_NC) : GF_NC;
                const float *ap = acts + (size_t)t * tile_floats + (size_t)k0 * GF_NC;
                float *d = dst + (size_t)(t * GF_NC) * dst_stride + (size_t)p * GF_MR;
                if (nc == GF_NC) gf_micro(blk, ap, kc, GF_NC, d, dst_stride, k0 > 0, m0, m1);
                else gf_micro_n(blk, ap, kc, nc, d, dst_stride, k0 > 0, m0, m1);
            }
        }
    }
    if (kv == K) return;
    for (int p = 0; p < n_mp; p++) {
        const int nr = nrows - p * GF_MR < GF_MR ? nrows - p * GF_MR : GF_MR;
        gf_pack_block_n(pn.w + (size_t)(p * GF_MR) * pn.w_stride + (size_t)kv * 2, pn.w_stride, nr, K - kv, blk,
                        bf16);
        for (int64_t t = 0; t < n_tiles; t++) {
            const int nc = N - t * GF_NC < GF_NC ? (int)(N - t * GF_NC) : GF_NC;
            gf_tail(blk, acts + (size_t)t * tile_floats, kv, K, nc,
                    dst + (size_t)(t * GF_NC) * dst_stride + (size_t)p * GF_MR, dst_stride, nr);
        }
    }
}

/* ------------------------------------------------------ per-type tables */

static void gf_run_f16(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst,
                       size_t dst_stride) {
    gf_run(pack, nrows, K, act, N, dst, dst_stride, 0);
}

static void gf_run_bf16(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst,
                        size_t dst_stride) {
    gf_run(pack, nrows, K, act, N, dst, dst_stride, 1);
}

/* a column tile's activations start gf_act_bytes(K, n0) into the area */
static const gemm_ops gf_ops_f16 = {GF_ROWS, gf_act_bytes, gf_act_from_f32, gf_pack_bytes, gf_pack, gf_run_f16,
                                    GF_NC};
static const gemm_ops gf_ops_bf16 = {GF_ROWS, gf_act_bytes, gf_act_from_f32, gf_pack_bytes, gf_pack, gf_run_bf16,
                                     GF_NC};

static void gemm_float_register(cpu_kernels *k) {
    k->gemm[TSR_DTYPE_F16] = &gf_ops_f16;
    k->gemm[TSR_DTYPE_BF16] = &gf_ops_bf16;
}
