/*
 * cpu_flash_attn — FLASH_ATTN on the CPU plugins (cpu-avx, cpu-neon):
 *
 *   q [D, n_q, H], k and v [D, n_kv, H_kv] (rows of any KV cache type),
 *   mask [>= n_kv, >= n_q] F32 or F16, optional -> dst [D, H, n_q]:
 *   out(h, i) = sum_j softmax_j(scale * q(h, i) . k_j + mask(j, i)) v_j
 *
 * with query head h reading kv head h / (H / H_kv) (grouped-query
 * attention). The straightforward version is core/src/ref/ref_attn.c.
 *
 * The rows that read the same K and V (the query heads sharing a kv head,
 * times a block of query tokens: at most FA_ROWS, FA_DENSE_MAX without a
 * mask) form a unit, which walks
 * its cells FA_TILE at a time:
 *   - each K row is read once for all the unit's rows: F32, F16 and BF16
 *     through the kernel table's dot (F16/BF16 widened in registers: F16C,
 *     NEON); the block types (Q8_0, Q4_0, ..., IQ4_NL) widened to f32 once
 *     per cell for row_dot with every row (the graph already rounded q
 *     through Q8_0 as llama.cpp's CPU backend quantizes it);
 *   - online softmax per row over the tile (the running max m, the sum l of
 *     exp(s - m), the accumulator rescaled by exp(m_old - m_new));
 *   - each V row is widened to f32 once and added into every row's
 *     accumulator with that row's weight.
 * Cells the mask sets to -inf for every token of the unit are never read
 * (a causal mask's future, a sliding window's past).
 *
 * Threads take units from an atomic counter (prompts with a causal mask
 * make them uneven; the longest go first). With fewer units than threads
 * can share (decoding one token over H_kv kv heads) the cells are also cut
 * into chunks: each chunk leaves (m, l, acc) per row, and after a barrier
 * the threads merge the chunks of their share of the rows.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "cpu_kernels.h"
#include "cpu_quants.h"
#include "cpu_rows.h"

enum {
    FA_ROWS = 16,       /* query rows per unit */
    FA_TILE = 32,       /* cells per tile */
    FA_CHUNK_MIN = 128, /* fewest cells worth a chunk of their own */
    FA_DENSE_ROWS = 4,  /* rows of an unmasked unit for fa_unit_dense */
    /* Rows per unit without a mask (an encoder's hundreds of query tokens
     * over the same keys): fa_unit_dense transposes each K tile once for
     * all of them, where with 16 rows that was a fifth of Whisper's
     * attention (1500 frames, heads of 16). */
    FA_DENSE_MAX = 64,
};

typedef struct fa_plan {
    int64_t D, n_q, H, n_kv, H_kv, group;
    int64_t rows;           /* most rows per unit: FA_ROWS, FA_DENSE_MAX unmasked */
    int64_t hb, n_hb;       /* query heads per unit, head blocks per kv head */
    int64_t tb, n_tb;       /* query tokens per unit, token blocks */
    int64_t chunk, n_chunk; /* cells per chunk, chunks */
    int64_t n_units;
    size_t thread_bytes;    /* each thread's scratch */
} fa_plan;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Cell chunks for `base` units over nth threads: one when there are
 * enough units to share; else a count that makes the units a multiple of
 * nth (and at least 2 per thread), each chunk FA_CHUNK_MIN cells or more. */
static int64_t fa_chunk_count(int64_t base, int64_t n_kv, int nth) {
    if (nth <= 1 || base >= 2 * (int64_t)nth) return 1;
    const int64_t step = nth / gcd64(base, nth);
    int64_t c = step;
    while (base * c < 2 * (int64_t)nth) c += step;
    const int64_t most = n_kv / FA_CHUNK_MIN;
    return c < most ? c : (most > 1 ? most : 1);
}

static void fa_plan_make(const tsr_node *node, int nth, fa_plan *p) {
    const tsr_tensor *q = node->src[0], *k = node->src[1];
    p->D = q->ne[0], p->n_q = q->ne[1], p->H = q->ne[2];
    p->n_kv = k->ne[1], p->H_kv = k->ne[2], p->group = p->H / p->H_kv;
    p->rows = node->n_src > 3 && node->src[3] ? FA_ROWS : FA_DENSE_MAX;
    p->hb = p->group < p->rows ? p->group : p->rows;
    p->n_hb = (p->group + p->hb - 1) / p->hb;
    p->tb = p->rows / p->hb;
    if (p->tb > p->n_q) p->tb = p->n_q;
    p->n_tb = (p->n_q + p->tb - 1) / p->tb;
    const int64_t base = p->H_kv * p->n_hb * p->n_tb;
    int64_t c = fa_chunk_count(base, p->n_kv, nth);
    p->chunk = (p->n_kv + c - 1) / c;
    p->n_chunk = (p->n_kv + p->chunk - 1) / p->chunk;
    p->n_units = base * p->n_chunk;
    /* q rows, accumulators, two widened rows; a K tile transposed and a V
     * tile widened (fa_unit_dense) */
    const size_t rows = align64((size_t)p->rows * (size_t)p->D * 4);
    p->thread_bytes = 2 * rows + 2 * align64((size_t)p->D * 4) + 2 * align64((size_t)FA_TILE * (size_t)p->D * 4);
}

/* One row's partial result per chunk: m, l, then D accumulator values. */
static size_t fa_part_bytes(const fa_plan *p) {
    return p->n_chunk > 1 ? (size_t)(p->H * p->n_q * p->n_chunk * (p->D + 2)) * 4 : 0;
}

size_t flash_attn_work_size(const tsr_node *node, int nth) {
    /* the queue may run fewer threads than it sized for: room for any */
    size_t most = 0;
    for (int t = 1; t <= nth; t++) {
        fa_plan p;
        fa_plan_make(node, t, &p);
        size_t n = (size_t)t * p.thread_bytes + fa_part_bytes(&p);
        if (n > most) most = n;
    }
    return most + 64;
}

static inline float fa_mask_value(const tsr_tensor *m, const uint8_t *row, int64_t j) {
    if (m->dtype == TSR_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, row + j * m->nb[0], 2);
        return cpu_fp16_to_f32(h);
    }
    float v;
    memcpy(&v, row + j * m->nb[0], 4);
    return v;
}

/* Row j of kv head hk of k or v as f32: in place for contiguous F32, else
 * widened into buf. */
static const float *fa_row_f32(const tsr_tensor *t, int64_t j, int64_t hk, float *buf) {
    const uint8_t *row = tensor_row(t, j, hk, 0);
    if (t->dtype == TSR_DTYPE_F32) return (const float *)(const void *)row;
    if (t->dtype == TSR_DTYPE_F16) row_f16_to_f32((const uint16_t *)(const void *)row, buf, t->ne[0]);
    else cpu_quants_row_to_f32(t->dtype, row, buf, t->ne[0]);
    return buf;
}

/* The thread's scratch. */
typedef struct fa_scratch {
    uint8_t *q;  /* p->rows q rows, f32 */
    float *acc;  /* p->rows x D */
    float *row;  /* a widened V row */
    float *krow; /* a widened K row (no dot kernel for K's type) */
    float *kt;   /* D x FA_TILE: a tile of K, transposed (fa_unit_dense) */
    float *vt;   /* FA_TILE x D: a tile of V widened (fa_unit_dense) */
} fa_scratch;

static fa_scratch fa_scratch_at(const fa_plan *p, uint8_t *base) {
    const size_t rows = align64((size_t)p->rows * (size_t)p->D * 4), one = align64((size_t)p->D * 4);
    const size_t tile = align64((size_t)FA_TILE * (size_t)p->D * 4);
    uint8_t *t = base + 2 * rows + 2 * one;
    return (fa_scratch){base, (float *)(void *)(base + rows), (float *)(void *)(base + 2 * rows),
                        (float *)(void *)(base + 2 * rows + one), (float *)(void *)t,
                        (float *)(void *)(t + tile)};
}

/* fa_unit for R rows and no mask (the encoders' attention: hundreds of
 * query tokens over the same keys): the products of a tile as small
 * matrix products in 8-float vectors (GCC's vector extension, so cpu-neon
 * builds it too), several rows at a time so the sums do not wait on one
 * another:
 *   - scores: two rows' FA_TILE sums run down D in registers against K
 *     transposed (each K tile row read once per pair);
 *   - the online softmax per row, as fa_unit's;
 *   - acc += weights x V: slices of 32, 16 or 8 columns of FA_PV_ROWS
 *     rows' accumulators kept in registers over the tile's V rows.
 * The same sums as fa_unit's in another order (the dot products run down
 * D one term at a time). */
enum { FA_PV_ROWS = 4 };

/* The dense kernels below let the compiler fuse each product and sum into
 * one multiply-add (the plugins build with -ffp-contract=off, which left
 * a multiply and an add per term here: half the arithmetic of the
 * encoders' attention). Their sums differ from fa_unit's by that rounding
 * too; both are within FLASH_ATTN's tolerance of ref. */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#endif

/* 8 floats, loaded and stored unaligned (memcpy); GCC keeps arrays of
 * these in vector registers where it spills a plain float array */
typedef float fa_v8 __attribute__((vector_size(32)));

static inline fa_v8 fa_ld(const float *p) {
    fa_v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* rows [r0, r0 + nr) of s (FA_TILE apart) = scale * q_r . K tile */
static inline __attribute__((always_inline)) void fa_scores(const float *qf, int64_t D, const float *kt, float scale,
                                                           int r0, const int nr, float *s) {
    enum { NV = FA_TILE / 8 };
    fa_v8 acc[2][NV];
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < NV; j++) acc[r][j] = (fa_v8){0};
    for (int64_t d = 0; d < D; d++) {
        const float *kd = kt + d * FA_TILE;
        fa_v8 kv[NV];
        for (int j = 0; j < NV; j++) kv[j] = fa_ld(kd + 8 * j);
        for (int r = 0; r < nr; r++) {
            const float qd = qf[(size_t)(r0 + r) * (size_t)D + (size_t)d];
            for (int j = 0; j < NV; j++) acc[r][j] += qd * kv[j];
        }
    }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < NV; j++) {
            const fa_v8 o = acc[r][j] * scale;
            memcpy(s + (r0 + r) * FA_TILE + 8 * j, &o, sizeof o);
        }
}

/* columns [d0, d0 + 8 NV) of rows [r0, r0 + nr): acc = acc * cf + sum_j p_j v_j
 * (V row j at vt + j * vs) */
static inline __attribute__((always_inline)) void fa_pv(float *acc, const float *cf, const float *s, const float *vt,
                                                       size_t vs, int n, int64_t D, int r0, const int nr, int64_t d0,
                                                       const int NV) {
    fa_v8 o[FA_PV_ROWS][4];
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < NV; i++)
            o[r][i] = fa_ld(acc + (size_t)(r0 + r) * (size_t)D + (size_t)d0 + 8 * (size_t)i) * cf[r0 + r];
    for (int j = 0; j < n; j++) {
        const float *vj = vt + (size_t)j * vs + (size_t)d0;
        fa_v8 vv[4];
        for (int i = 0; i < NV; i++) vv[i] = fa_ld(vj + 8 * i);
        for (int r = 0; r < nr; r++) {
            const float pw = s[(r0 + r) * FA_TILE + j];
            for (int i = 0; i < NV; i++) o[r][i] += pw * vv[i];
        }
    }
    for (int r = 0; r < nr; r++)
        for (int i = 0; i < NV; i++) memcpy(acc + (size_t)(r0 + r) * (size_t)D + (size_t)d0 + 8 * (size_t)i, &o[r][i], 32);
}

/* fa_pv for one block of rows, 32, 16 and 8 columns at a time (rows of
 * two for 32, so the accumulators stay in sixteen vector registers) */
static inline __attribute__((always_inline)) void fa_pv_rows(float *acc, const float *cf, const float *s,
                                                            const float *vt, size_t vs, int n, int64_t D, int r0,
                                                            const int nr) {
    int64_t d0 = 0;
    for (; d0 + 32 <= D; d0 += 32)
        for (int r = r0; r < r0 + nr; r += 2) {
            if (r + 2 <= r0 + nr) fa_pv(acc, cf, s, vt, vs, n, D, r, 2, d0, 4);
            else fa_pv(acc, cf, s, vt, vs, n, D, r, 1, d0, 4);
        }
    if (d0 + 16 <= D) fa_pv(acc, cf, s, vt, vs, n, D, r0, nr, d0, 2), d0 += 16;
    if (d0 + 8 <= D) fa_pv(acc, cf, s, vt, vs, n, D, r0, nr, d0, 1), d0 += 8;
    for (int r = r0; r < r0 + nr && d0 < D; r++) {
        float *a = acc + (size_t)r * (size_t)D;
        for (int64_t i = d0; i < D; i++) a[i] *= cf[r];
        for (int j = 0; j < n; j++) row_add_scaled(a + d0, s[r * FA_TILE + j], vt + (size_t)j * vs + d0, D - d0);
    }
}

typedef int32_t fa_i8 __attribute__((vector_size(32)));

/* where m (a comparison's all-ones lanes) take b, else a */
static inline fa_v8 fa_select(fa_v8 a, fa_v8 b, fa_i8 m) {
    return (fa_v8)(((fa_i8)a & ~m) | ((fa_i8)b & m));
}

/* e^x for 8 lanes of x <= 0 (a score minus its row's max), as the CPU
 * kernels' exp8 (kernels_impl.h) computes it: n = round(x / ln 2) by the
 * 1.5 * 2^23 trick, r = x - n ln 2 in two steps, Cephes' degree-6
 * polynomial, 2^n through the exponent bits; below -86 exactly 0. */
static inline fa_v8 fa_exp8(fa_v8 x) {
    const fa_v8 lo = (fa_v8){0} - 86.0f;
    const fa_i8 under = x < lo;
    x = fa_select(x, lo, under);
    const fa_v8 magic = (fa_v8){0} + 12582912.0f;
    const fa_v8 t = x * 1.44269504088896341f + magic, n = t - magic;
    fa_v8 r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    fa_v8 p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = (p * r) * r + (r + 1.0f);
    const fa_i8 e = ((fa_i8)t - 0x4B400000 + 127) << 23;
    return (fa_v8)((fa_i8)(p * (fa_v8)e) & ~under);
}

/* A full tile's online softmax step for one row: sr (FA_TILE scores)
 * becomes exp(s - m'), m' = max(*m, max s); returns their sum, in float,
 * lanes then across (fa_unit's sums run in double: the same terms within
 * FLASH_ATTN's tolerance). */
static inline float fa_softmax_tile(float *sr, float *m, float *cf) {
    enum { NV = FA_TILE / 8 };
    fa_v8 v[NV];
    for (int j = 0; j < NV; j++) v[j] = fa_ld(sr + 8 * j);
    fa_v8 mx = v[0];
    for (int j = 1; j < NV; j++) mx = fa_select(mx, v[j], v[j] > mx);
    float tm = mx[0];
    for (int i = 1; i < 8; i++) tm = mx[i] > tm ? mx[i] : tm;
    const float mn = tm > *m ? tm : *m;
    *cf = *m == -INFINITY ? 0.0f : mn == *m ? 1.0f : exp_row_elem(*m - mn);
    *m = mn;
    fa_v8 sum = {0};
    for (int j = 0; j < NV; j++) {
        const fa_v8 e = fa_exp8(v[j] - mn);
        memcpy(sr + 8 * j, &e, sizeof e);
        sum += e;
    }
    float total = 0.0f;
    for (int i = 0; i < 8; i++) total += sum[i];
    return total;
}

static void fa_unit_dense(cpu_exec *ex, const tsr_tensor *k, const tsr_tensor *v, float scale, int64_t D, int64_t hk,
                          int64_t j0, int64_t j1, int R, const float *qf, fa_scratch *w, float *m, float *l) {
    float s[FA_DENSE_MAX * FA_TILE], cf[FA_DENSE_MAX];
    float *kt = w->kt;
    /* F32 V rows are read where they are (vs floats apart), others widened */
    const bool v_in_place = v->dtype == TSR_DTYPE_F32 && v->nb[0] == 4 && v->nb[1] % 4 == 0;
    const size_t vs = v_in_place ? (size_t)(v->nb[1] / 4) : (size_t)D;
    for (int64_t jt = j0; jt < j1; jt += FA_TILE) {
        const int n = (int)(j1 - jt < FA_TILE ? j1 - jt : FA_TILE);
        for (int j = 0; j < n; j++) {
            const float *kf = fa_row_f32(k, jt + j, hk, w->krow);
            for (int64_t d = 0; d < D; d++) kt[d * FA_TILE + j] = kf[d];
            if (v_in_place) continue;
            const float *vf = fa_row_f32(v, jt + j, hk, w->vt + (size_t)j * (size_t)D);
            if (vf != w->vt + (size_t)j * (size_t)D) memcpy(w->vt + (size_t)j * (size_t)D, vf, (size_t)D * 4);
        }
        const float *vt = v_in_place ? (const float *)(const void *)tensor_row(v, jt, hk, 0) : w->vt;
        for (int j = n; j < FA_TILE; j++)
            for (int64_t d = 0; d < D; d++) kt[d * FA_TILE + j] = 0.0f;

        int r = 0;
        for (; r + 2 <= R; r += 2) fa_scores(qf, D, kt, scale, r, 2, s);
        if (r < R) fa_scores(qf, D, kt, scale, r, 1, s);

        /* online softmax: s becomes the weights exp(s - m) */
        for (r = 0; r < R && n == FA_TILE; r++) {
            const float sum = fa_softmax_tile(s + r * FA_TILE, &m[r], &cf[r]);
            l[r] = l[r] * cf[r] + sum;
        }
        for (r = 0; r < R && n < FA_TILE; r++) { /* the last, short tile */
            float *sr = s + r * FA_TILE;
            const float tm = row_max(sr, n);
            const float mn = tm > m[r] ? tm : m[r];
            cf[r] = m[r] == -INFINITY ? 0.0f : mn == m[r] ? 1.0f : exp_row_elem(m[r] - mn);
            const double sum = ex->exp_sub_sum ? ex->exp_sub_sum(sr, n, mn) : row_exp_sub_sum(sr, n, mn);
            l[r] = l[r] * cf[r] + (float)sum;
            m[r] = mn;
        }

        for (r = 0; r + FA_PV_ROWS <= R; r += FA_PV_ROWS) fa_pv_rows(w->acc, cf, s, vt, vs, n, D, r, FA_PV_ROWS);
        for (; r < R; r++) fa_pv_rows(w->acc, cf, s, vt, vs, n, D, r, 1);
    }
}

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

/* One unit: rows r = it * nh + hh (token t0 + it, head h0 + hh) over cells
 * [j0, j1). Writes dst rows, or the chunk's partials at part. */
static void fa_unit(cpu_exec *ex, const tsr_node *node, const fa_plan *p, int64_t u, fa_scratch *w, float *part) {
    const tsr_tensor *q = node->src[0], *k = node->src[1], *v = node->src[2];
    const tsr_tensor *mask = node->n_src > 3 ? node->src[3] : NULL;
    tsr_tensor *d = node->dst;
    const float scale = tsr_flash_attn_params_of(node).scale;
    const int64_t D = p->D;

    const int64_t c = u % p->n_chunk, rest = u / p->n_chunk, per_tb = p->H_kv * p->n_hb;
    const int64_t hk = (rest % per_tb) / p->n_hb, hbi = rest % p->n_hb;
    const int64_t tbi = p->n_tb - 1 - rest / per_tb; /* later tokens see more cells: first */
    const int64_t h0 = hk * p->group + hbi * p->hb;
    const int64_t nh = p->hb < (hk + 1) * p->group - h0 ? p->hb : (hk + 1) * p->group - h0;
    const int64_t t0 = tbi * p->tb, nt = p->tb < p->n_q - t0 ? p->tb : p->n_q - t0;
    const int64_t j0 = c * p->chunk, j1 = j0 + p->chunk < p->n_kv ? j0 + p->chunk : p->n_kv;
    const int R = (int)(nh * nt);

    /* K's dot kernel for the float types; block types are widened to f32
     * once per cell for all rows instead of meeting q as 8-bit act8 blocks:
     * those kernels round Q4_1/Q5_1's sum term to fp16 as llama.cpp's Q8_1
     * does, which ref and the GPU plugins do not (test_ocl_kv's 1e-3) */
    const cpu_dot_fn dot = quants_act_kind(k->dtype) == ACT_F32 ? ex->k->dot[k->dtype] : NULL;
    const size_t q_row = (size_t)D * 4; /* q rows as f32 */
    for (int r = 0; r < R; r++) {
        const uint8_t *rq = tensor_row(q, t0 + r / nh, h0 + r % nh, 0);
        float *qf = (float *)(void *)(w->q + (size_t)r * q_row);
        for (int64_t i = 0; i < D; i++) memcpy(&qf[i], rq + i * q->nb[0], 4);
    }
    float m[FA_DENSE_MAX], l[FA_DENSE_MAX];
    for (int r = 0; r < R; r++) m[r] = -INFINITY, l[r] = 0.0f;
    memset(w->acc, 0, (size_t)R * (size_t)D * 4);

    float s[FA_ROWS * FA_TILE], mv[FA_ROWS * FA_TILE];
    int live[FA_TILE];
    const bool dense = !mask && R >= FA_DENSE_ROWS;
    if (dense) fa_unit_dense(ex, k, v, scale, D, hk, j0, j1, R, (const float *)(const void *)w->q, w, m, l);
    for (int64_t jt = j0; !dense && jt < j1; jt += FA_TILE) {
        const int n = (int)(j1 - jt < FA_TILE ? j1 - jt : FA_TILE);
        int any = 0;
        for (int j = 0; j < n; j++) live[j] = !mask;
        if (mask)
            for (int64_t it = 0; it < nt; it++) {
                const uint8_t *rm = tensor_row(mask, t0 + it, 0, 0);
                for (int j = 0; j < n; j++) {
                    float x = fa_mask_value(mask, rm, jt + j);
                    mv[it * FA_TILE + j] = x;
                    live[j] |= x != -INFINITY;
                }
            }
        for (int j = 0; j < n; j++) any |= live[j];
        if (!any) continue;

        /* scores s[r][j] = scale * q_r . k_j + mask */
        for (int j = 0; j < n; j++) {
            if (!live[j]) {
                for (int r = 0; r < R; r++) s[r * FA_TILE + j] = -INFINITY;
                continue;
            }
            float dots[FA_DENSE_MAX]; /* (R < FA_DENSE_ROWS here without a mask) */
            if (dot) {
                const uint8_t *kr = tensor_row(k, jt + j, hk, 0);
                for (int r0 = 0; r0 < R; r0 += CPU_NC) {
                    int nc = R - r0 < CPU_NC ? R - r0 : CPU_NC;
                    dot(D, kr, w->q + (size_t)r0 * q_row, q_row, nc, dots + r0);
                }
            } else {
                const float *kf = fa_row_f32(k, jt + j, hk, w->krow);
                for (int r = 0; r < R; r++) dots[r] = row_dot((const float *)(void *)(w->q + (size_t)r * q_row), kf, D);
            }
            for (int r = 0; r < R; r++)
                s[r * FA_TILE + j] = dots[r] * scale + (mask ? mv[(r / nh) * FA_TILE + j] : 0.0f);
        }

        /* online softmax: s becomes the weights exp(s - m) */
        for (int r = 0; r < R; r++) {
            float *sr = s + r * FA_TILE;
            const float tm = row_max(sr, n);
            if (tm == -INFINITY) {
                for (int j = 0; j < n; j++) sr[j] = 0.0f;
                continue;
            }
            const float mn = tm > m[r] ? tm : m[r];
            const float cf = m[r] == -INFINITY ? 0.0f : exp_row_elem(m[r] - mn);
            float sum = 0.0f;
            for (int j = 0; j < n; j++) {
                sr[j] = exp_row_elem(sr[j] - mn);
                sum += sr[j];
            }
            l[r] = l[r] * cf + sum;
            m[r] = mn;
            if (cf != 1.0f) {
                float *a = w->acc + (size_t)r * (size_t)D;
                for (int64_t i = 0; i < D; i++) a[i] *= cf;
            }
        }

        /* acc_r += weight * v_j, each V row widened once */
        for (int j = 0; j < n; j++) {
            if (!live[j]) continue;
            const float *vf = fa_row_f32(v, jt + j, hk, w->row);
            for (int r = 0; r < R; r++) {
                const float pw = s[r * FA_TILE + j];
                if (pw != 0.0f) row_add_scaled(w->acc + (size_t)r * (size_t)D, pw, vf, D);
            }
        }
    }

    for (int r = 0; r < R; r++) {
        const int64_t it = t0 + r / nh, h = h0 + r % nh;
        const float *a = w->acc + (size_t)r * (size_t)D;
        if (part) { /* this chunk's (m, l, acc) of row (h, it) */
            float *pr = part + ((h * p->n_q + it) * p->n_chunk + c) * (D + 2);
            pr[0] = m[r], pr[1] = l[r];
            memcpy(pr + 2, a, (size_t)D * 4);
            continue;
        }
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        uint8_t *rd = tensor_row(d, h, it, 0);
        for (int64_t i = 0; i < D; i++) {
            float o = a[i] * inv;
            memcpy(rd + i * d->nb[0], &o, 4);
        }
    }
}

/* Rows [lo, hi) of the H x n_q output from their chunks' partials:
 * out = sum_c e^(m_c - M) acc_c / sum_c e^(m_c - M) l_c, M = max_c m_c. */
static void fa_merge(const tsr_node *node, const fa_plan *p, const float *part, float *out, int64_t lo, int64_t hi) {
    tsr_tensor *d = node->dst;
    const int64_t D = p->D;
    for (int64_t row = lo; row < hi; row++) {
        const int64_t h = row / p->n_q, it = row % p->n_q;
        const float *pr = part + row * p->n_chunk * (D + 2);
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t c = 0; c < p->n_chunk; c++) mx = pr[c * (D + 2)] > mx ? pr[c * (D + 2)] : mx;
        memset(out, 0, (size_t)D * 4);
        if (mx != -INFINITY)
            for (int64_t c = 0; c < p->n_chunk; c++) {
                const float *pc = pr + c * (D + 2);
                if (pc[0] == -INFINITY) continue;
                const float f = exp_row_elem(pc[0] - mx);
                sum += pc[1] * f;
                row_add_scaled(out, f, pc + 2, D);
            }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        uint8_t *rd = tensor_row(d, h, it, 0);
        for (int64_t i = 0; i < D; i++) {
            float o = out[i] * inv;
            memcpy(rd + i * d->nb[0], &o, 4);
        }
    }
}

void flash_attn_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    fa_plan p;
    fa_plan_make(node, nth, &p);
    uint8_t *base = (uint8_t *)(((uintptr_t)ex->work + 63) & ~(uintptr_t)63);
    fa_scratch w = fa_scratch_at(&p, base + (size_t)ith * p.thread_bytes);
    float *part = p.n_chunk > 1 ? (float *)(void *)(base + (size_t)nth * p.thread_bytes) : NULL;

    if (ith == 0) atomic_store(&ex->next_chunk, 0);
    if (nth > 1) exec_barrier(ex); /* (a thread run alone meets no one) */
    for (;;) {
        int64_t u = atomic_fetch_add_explicit(&ex->next_chunk, 1, memory_order_relaxed);
        if (u >= p.n_units) break;
        fa_unit(ex, node, &p, u, &w, part);
    }
    if (!part) return; /* (one thread never cuts cells into chunks) */
    exec_barrier(ex);
    int64_t lo, hi;
    split_range(p.H * p.n_q, ith, nth, &lo, &hi);
    fa_merge(node, &p, part, w.acc, lo, hi);
}
