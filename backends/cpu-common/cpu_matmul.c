/*
 * cpu_matmul — the CPU plugins' MUL_MAT driver: dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3]
 * * src1[k, n, b2, b3].
 *
 * 1. Activations (src1 rows) are converted once, by all threads, to the
 *    format the weight type's dot kernel reads (act8 / act8k blocks for
 *    quantized weights, f32 otherwise; f32 rows with unit stride are read in
 *    place). Weights (src0) are read in place, but for decoding products
 *    of constant weights with an x16 copy (cpu_repack.h: matmul_run_x).
 * 2. The output is cut into chunks of (batch, column block, row block),
 *    handed out through an atomic counter so a thread slowed by another
 *    process does not hold the others up. Within a chunk, columns go in
 *    groups of CPU_NC and each weight row of the block is dotted with the
 *    whole group: the row block (~16 KiB of weights) stays in L1 across the
 *    column groups and the group's activations stay in L1 across the rows.
 *    With one column (decoding) a chunk is simply a run of weight rows and
 *    the loop streams the weights once: bandwidth-bound. Where the kernel
 *    table has a many-row kernel (dotr) the whole run is one call.
 *    Where the kernel table has them, two-row kernels (dot2) or 2x2 tiles
 *    (tile: two rows by two columns, e.g. cpu-neon's smmla) do the same
 *    sums with fewer loads per product.
 * With many columns and a gemm_ops for the weight type (cpu_gemm.h), steps 1
 * and 2 are the packed-panel GEMM's instead: see gemm_compute below.
 * The straightforward version: for each (m, n, b) one dot of weight row m
 * with activation column n.
 */
#include <string.h>

#include <tessera/plugin_check.h>

#include "cpu_kernels.h"

enum { COL_BLOCK = 128, ROW_BLOCK_BYTES = 16 * 1024 };

static int64_t batch_count(const tsr_node *node) { return node->src[1]->ne[2] * node->src[1]->ne[3]; }

int matmul_supports(const cpu_kernels *k, const tsr_node *node, char *why, size_t why_size) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *d = node->dst;
    if (node->n_src < 2 || !w || !x || !d) return tsr_node_decline(node, why, why_size, "needs src0, src1 and dst");
    if (w->dtype < 0 || w->dtype >= TSR_DTYPE_COUNT || !k->dot[w->dtype] || quants_act_kind(w->dtype) == ACT_NONE)
        return tsr_node_decline(node, why, why_size, "no %s dot kernel for %s weights", k->name,
                                tsr_dtype_name(w->dtype));
    if (x->dtype != TSR_DTYPE_F32 || d->dtype != TSR_DTYPE_F32)
        return tsr_node_decline(node, why, why_size, "activations (%s) and result (%s) must be F32",
                                tsr_dtype_name(x->dtype), tsr_dtype_name(d->dtype));
    int64_t bs = tsr_dtype_block_size(w->dtype);
    if (w->ne[0] % bs != 0 || w->nb[0] != tsr_dtype_block_bytes(w->dtype))
        return tsr_node_decline(node, why, why_size, "weight rows are not whole contiguous blocks");
    if (x->ne[0] != w->ne[0])
        return tsr_node_decline(node, why, why_size, "K differs: weight %lld, activations %lld", (long long)w->ne[0],
                                (long long)x->ne[0]);
    for (int i = 0; i < 4; i++)
        if (w->ne[i] <= 0 || x->ne[i] <= 0) return tsr_node_decline(node, why, why_size, "ne[%d] is not positive", i);
    if (x->ne[2] % w->ne[2] != 0 || x->ne[3] % w->ne[3] != 0)
        return tsr_node_decline(node, why, why_size, "the weight's batch dimensions do not broadcast");
    if (d->ne[0] != w->ne[1] || d->ne[1] != x->ne[1] || d->ne[2] != x->ne[2] || d->ne[3] != x->ne[3])
        return tsr_node_decline(node, why, why_size, "dst is not [M, N, B2, B3]");
    return 1;
}

/* Which kernel and activation format a product uses. */
typedef struct mm_plan {
    act_kind kind;
    cpu_dot_fn dot;
    int offset; /* act8p zero point */
    cpu_tile_fn tile; /* 2x2 tiles, used when N >= 2; may be NULL */
} mm_plan;

static mm_plan plan_for(const cpu_kernels *k, const tsr_node *node) {
    int32_t t = node->src[0]->dtype;
    mm_plan p = {quants_act_kind(t), k->dot[t], 0, k->tile[t]};
    if (k->dot_pair[t] && node->src[0]->ne[0] % 64 == 0) {
        p.kind = ACT_Q8P;
        p.dot = k->dot_pair[t];
        p.offset = k->pair_offset[t];
        p.tile = NULL; /* tiles read the dot's activations */
    }
    return p;
}

/* f32 activations with unit stride are used where they are. */
static int act_in_place(const tsr_node *node) {
    return quants_act_kind(node->src[0]->dtype) == ACT_F32 && node->src[1]->nb[0] == 4;
}

/* The packed-panel GEMM for this node, or NULL for the dot kernels. */
static const gemm_ops *gemm_for(const cpu_kernels *k, const tsr_node *node) {
    const int32_t t = node->src[0]->dtype;
    const gemm_ops *g = k->gemm[t];
    if (!g || node->dst->nb[0] != 4) return NULL;
    /* few columns: the dot kernels, unless this type only has the plain C
     * one, which is slower than packing the rows even for one column */
    if (node->src[1]->ne[1] < GEMM_MIN_N && k->dot[t] != quants_scalar_dot(t)) return NULL;
    if (node->dst->nb[1] % 4 != 0) return NULL;
    return g;
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Work area of the GEMM path: [activation columns][pack buffer per thread]
 * [one gathered f32 row per thread]. */
static size_t gemm_act_bytes(const gemm_ops *g, const tsr_node *node) {
    const tsr_tensor *x = node->src[1];
    return (size_t)batch_count(node) * align64(g->act_bytes(x->ne[0], x->ne[1]));
}

size_t matmul_work_size(const cpu_kernels *k, const tsr_node *node, int nth) {
    const tsr_tensor *x = node->src[1];
    const gemm_ops *g = gemm_for(k, node);
    if (g)
        return gemm_act_bytes(g, node) + (size_t)nth * align64(g->pack_bytes(x->ne[0])) +
               (size_t)nth * align64((size_t)x->ne[0] * 4);
    if (act_in_place(node)) return 0;
    act_kind kind = plan_for(k, node).kind;
    size_t rows = (size_t)(x->ne[1] * batch_count(node));
    size_t act = rows * quants_act_row_bytes(kind, x->ne[0]);
    act = (act + 63) & ~(size_t)63;
    /* plus one gathered f32 row per thread for strided src1 */
    return act + (size_t)nth * ((size_t)x->ne[0] * 4 + 64);
}

/* Activation row r = n + N*(b2 + B2*b3) of src1 as contiguous f32: in
 * place, or gathered into tmp (K floats) when its elements are strided. */
static const float *activation_row(const tsr_tensor *x, int64_t r, float *tmp) {
    const int64_t K = x->ne[0], N = x->ne[1], B2 = x->ne[2];
    const uint8_t *src = tensor_row(x, r % N, (r / N) % B2, r / (N * B2));
    if (x->nb[0] == 4) return (const float *)src;
    for (int64_t k = 0; k < K; k++) memcpy(&tmp[k], src + k * x->nb[0], 4);
    return tmp;
}

/* The length of one f32 activation column without its trailing exact
 * zeros: their products add nothing (weights are finite: the cache's
 * cells hold zeros or old values), and leaving them out makes a decode
 * step's attention over cells padded with zero weights (model/step_graph.h)
 * the same sums as over its cells alone. */
static int64_t act_len_nonzero(const void *act, int64_t K) {
    const float *a = act;
    while (K > 0 && a[K - 1] == 0.0f) K--;
    return K;
}

/* Step 1: activation rows -> work, row r = n + N*(b2 + B2*b3). */
static void convert_activations(cpu_exec *ex, const tsr_node *node, const mm_plan *plan, int ith, int nth) {
    const tsr_tensor *x = node->src[1];
    const int64_t K = x->ne[0], N = x->ne[1];
    act_kind kind = plan->kind;
    size_t row_bytes = quants_act_row_bytes(kind, K);
    int64_t nrows = N * batch_count(node);
    size_t act_total = ((size_t)nrows * row_bytes + 63) & ~(size_t)63;
    float *tmp = (float *)(ex->work + act_total + (size_t)ith * ((size_t)K * 4 + 64));
    for (int64_t r = ith; r < nrows; r += nth) {
        const float *row = activation_row(x, r, tmp);
        uint8_t *dst = ex->work + (size_t)r * row_bytes;
        if (kind == ACT_Q8) ex->k->act8_from_f32(row, (act8 *)dst, K);
        else if (kind == ACT_Q8K) ex->k->act8k_from_f32(row, (act8k *)dst, K);
        else if (kind == ACT_Q8P) quants_act8p_from_f32(row, (act8p *)dst, K, plan->offset, ex->k->act8_from_f32);
        else memcpy(dst, row, (size_t)K * 4);
    }
}

/* The GEMM path: columns converted by all threads, then panels of rows
 * handed out through the atomic counter, one (panel, batch) per chunk. */
static void gemm_compute(cpu_exec *ex, const tsr_node *node, const gemm_ops *g, int ith, int nth) {
    const tsr_tensor *w = node->src[0], *x = node->src[1];
    tsr_tensor *d = node->dst;
    const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1], B2 = x->ne[2];
    const int64_t r2 = B2 / w->ne[2], r3 = x->ne[3] / w->ne[3];
    const size_t act_batch = align64(g->act_bytes(K, N));
    const size_t act_total = gemm_act_bytes(g, node), pack_size = align64(g->pack_bytes(K));
    uint8_t *pack = ex->work + act_total + (size_t)ith * pack_size;
    float *gather = (float *)(ex->work + act_total + (size_t)nth * pack_size + (size_t)ith * align64((size_t)K * 4));

    if (ith == 0) atomic_store(&ex->next_chunk, 0);
    const int64_t nrows = N * batch_count(node);
    for (int64_t r = ith; r < nrows; r += nth) {
        g->act_from_f32(ex->k, activation_row(x, r, gather), K, ex->work + (size_t)(r / N) * act_batch, r % N);
    }
    exec_barrier(ex);

    const int64_t n_panels = (M + g->rows - 1) / g->rows;
    /* columns in slices of whole column tiles when the panels are too few
     * to keep every thread busy (two chunks a thread) */
    int64_t slice = N, n_slices = 1;
    if (g->col_tile > 0 && nth > 1 && n_panels * batch_count(node) < 2 * (int64_t)nth) {
        const int64_t tiles = (N + g->col_tile - 1) / g->col_tile;
        int64_t want = (2 * (int64_t)nth + n_panels * batch_count(node) - 1) / (n_panels * batch_count(node));
        if (want > tiles) want = tiles;
        slice = (tiles + want - 1) / want * g->col_tile;
        n_slices = (N + slice - 1) / slice;
    }
    const int64_t n_chunks = n_panels * n_slices * batch_count(node);
    for (;;) {
        int64_t id = atomic_fetch_add_explicit(&ex->next_chunk, 1, memory_order_relaxed);
        if (id >= n_chunks) break;
        int64_t ip = id % n_panels, is = (id / n_panels) % n_slices, b = id / (n_panels * n_slices);
        int64_t b2 = b % B2, b3 = b / B2;
        int64_t m0 = ip * g->rows, n0 = is * slice;
        int rows = (int)(M - m0 < g->rows ? M - m0 : g->rows);
        const uint8_t *wrow = tensor_ptr(w) + m0 * w->nb[1] + (b2 / r2) * w->nb[2] + (b3 / r3) * w->nb[3];
        g->pack(wrow, (size_t)w->nb[1], rows, K, pack);
        const uint8_t *act = ex->work + (size_t)b * act_batch + (n0 ? g->act_bytes(K, n0) : 0);
        float *dst = (float *)(tensor_ptr(d) + m0 * 4 + n0 * d->nb[1] + b2 * d->nb[2] + b3 * d->nb[3]);
        g->run(pack, rows, K, act, N - n0 < slice ? N - n0 : slice, dst, (size_t)d->nb[1] / 4);
    }
}

int matmul_phased(const cpu_kernels *k, const tsr_node *node) { return gemm_for(k, node) == NULL; }

int matmul_has_prepare(const tsr_node *node) { return !act_in_place(node); }

size_t matmul_prepare_elements(const tsr_node *node) {
    return (size_t)(node->src[1]->ne[0] * node->src[1]->ne[1] * batch_count(node));
}

int matmul_same_activations(const cpu_kernels *k, const tsr_node *a, const tsr_node *b) {
    if (!matmul_phased(k, a) || !matmul_phased(k, b) || !matmul_has_prepare(a) || !matmul_has_prepare(b))
        return 0;
    const tsr_tensor *x = a->src[1], *y = b->src[1];
    if (tensor_ptr(x) != tensor_ptr(y) || x->dtype != y->dtype) return 0;
    for (int i = 0; i < 4; i++)
        if (x->ne[i] != y->ne[i] || x->nb[i] != y->nb[i]) return 0;
    const mm_plan pa = plan_for(k, a), pb = plan_for(k, b);
    return pa.kind == pb.kind && pa.offset == pb.offset;
}

size_t matmul_act_row_bytes(const cpu_kernels *k, const tsr_node *node) {
    return quants_act_row_bytes(plan_for(k, node).kind, node->src[0]->ne[0]);
}

void matmul_prepare(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const mm_plan plan = plan_for(ex->k, node);
    convert_activations(ex, node, &plan, ith, nth);
}

/* Decoding from the weight's x16 copy (cpu_repack.h): chunks of whole
 * groups of 16 rows, about as many bytes as the row-by-row chunks below. */
static void matmul_run_x(cpu_exec *ex, const tsr_node *node, const uint8_t *xw, _Atomic int64_t *next_chunk,
                         int nth) {
    const tsr_tensor *w = node->src[0];
    const int64_t K = w->ne[0], n_groups = w->ne[1] / CPU_XROWS;
    const size_t group_bytes = cpu_x_group_bytes(w->dtype, K);
    const cpu_dotx_fn dotx = ex->k->dotx[w->dtype];
    int64_t gc = (int64_t)(128 * 1024 / group_bytes);
    if (gc > n_groups / (4 * (int64_t)nth)) gc = n_groups / (4 * (int64_t)nth);
    if (gc < 1) gc = 1;
    const int64_t n_chunks = (n_groups + gc - 1) / gc;
    const uint8_t *a = ex->work;
    float *dst = (float *)(void *)tensor_ptr(node->dst);
    for (;;) {
        const int64_t id = atomic_fetch_add_explicit(next_chunk, 1, memory_order_relaxed);
        if (id >= n_chunks) break;
        const int64_t g0 = id * gc, g1 = g0 + gc < n_groups ? g0 + gc : n_groups;
        dotx(K, xw + (size_t)g0 * group_bytes, a, g1 - g0, dst + CPU_XROWS * g0);
    }
}

int matmul_x_eligible(const cpu_kernels *k, const tsr_node *node) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *d = node->dst;
    if (node->op != TSR_OP_MUL_MAT || !(w->flags & TSR_TENSOR_WEIGHT) || w->dtype < 0 || w->dtype >= TSR_DTYPE_COUNT)
        return 0;
    if (!k->dotx[w->dtype] || !cpu_x_group_bytes(w->dtype, w->ne[0]) || plan_for(k, node).dot != k->dot[w->dtype])
        return 0;
    if (w->ne[1] % CPU_XROWS != 0 || w->ne[2] != 1 || w->ne[3] != 1) return 0;
    if (x->ne[1] != 1 || x->ne[2] != 1 || x->ne[3] != 1 || act_in_place(node)) return 0;
    return d->nb[0] == 4 && d->nb[1] == 4 * d->ne[0] && gemm_for(k, node) == NULL;
}

void matmul_run(cpu_exec *ex, const tsr_node *node, _Atomic int64_t *next_chunk, int ith, int nth) {
    matmul_run_xw(ex, node, NULL, next_chunk, ith, nth);
}

void matmul_run_xw(cpu_exec *ex, const tsr_node *node, const void *xw, _Atomic int64_t *next_chunk, int ith,
                   int nth) {
    (void)ith; /* chunks go to whichever thread asks first */
    if (xw) {
        matmul_run_x(ex, node, xw, next_chunk, nth);
        return;
    }
    const tsr_tensor *w = node->src[0], *x = node->src[1];
    tsr_tensor *d = node->dst;
    const int64_t K = w->ne[0], M = w->ne[1], N = x->ne[1], B2 = x->ne[2], B3 = x->ne[3];
    const int64_t r2 = B2 / w->ne[2], r3 = B3 / w->ne[3];
    const mm_plan plan = plan_for(ex->k, node);
    const cpu_dot_fn dot = plan.dot;
    const cpu_dot2_fn dot2 = plan.kind == ACT_F32 ? ex->k->dot2[w->dtype] : NULL;
    const cpu_dotr_fn dotr = plan.dot == ex->k->dot[w->dtype] ? ex->k->dotr[w->dtype] : NULL;
    const size_t w_row_bytes = (size_t)(K / tsr_dtype_block_size(w->dtype)) * (size_t)w->nb[0];
    const int in_place = act_in_place(node);
    size_t act_row = quants_act_row_bytes(plan.kind, K);

    int64_t rb, cb;
    if (N == 1) {
        /* decoding: chunks of about 128 KiB of weights (>= 8 rows, >= 4
         * per thread), so a thread slowed by another process costs the
         * others at most one short chunk's wait at the barrier; not much
         * smaller, as each chunk's atomic increment moves a cache line
         * between cores (~80 ns here: ~3% of a token with 32 KiB chunks) */
        const size_t chunk_bytes = 128 * 1024, min_chunk_bytes = 16 * 1024;
        const size_t row_bytes = w_row_bytes ? w_row_bytes : 1;
        rb = (int64_t)(chunk_bytes / row_bytes);
        if (rb > M / (4 * (int64_t)nth)) rb = M / (4 * (int64_t)nth);
        /* and not below 16 KiB: attention's heads (B2) are chunks already,
         * and cutting a head's few KiB of cache into 8-row runs cost more in
         * increments than in products (SmolLM2 decoding at depth < 128:
         * ~6,200 increments per token before, ~2,300 now; +2.5% t/s) */
        if (rb < (int64_t)(min_chunk_bytes / row_bytes)) rb = (int64_t)(min_chunk_bytes / row_bytes);
        if (rb < 8) rb = 8;
        cb = 1;
    } else {
        rb = (int64_t)(ROW_BLOCK_BYTES / (w_row_bytes ? w_row_bytes : 1));
        if (rb < 4) rb = 4;
        if (rb > 64) rb = 64;
        cb = COL_BLOCK;
    }
    const int64_t n_rb = (M + rb - 1) / rb, n_cb = (N + cb - 1) / cb;
    const int64_t n_chunks = n_rb * n_cb * B2 * B3;

    for (;;) {
        int64_t id = atomic_fetch_add_explicit(next_chunk, 1, memory_order_relaxed);
        if (id >= n_chunks) break;
        int64_t irb = id % n_rb, icb = (id / n_rb) % n_cb, b = id / (n_rb * n_cb);
        int64_t b2 = b % B2, b3 = b / B2;
        int64_t m0 = irb * rb, m1 = m0 + rb < M ? m0 + rb : M;
        int64_t n0 = icb * cb, n1 = n0 + cb < N ? n0 + cb : N;
        const uint8_t *wbase = tensor_ptr(w) + (b2 / r2) * w->nb[2] + (b3 / r3) * w->nb[3];

        int64_t n = n0;
        if (plan.tile && !in_place) {
            /* column pairs x row pairs with the 2x2 tile; an odd last row
             * takes the dot kernel with the pair */
            for (; n + 2 <= n1; n += 2) {
                const uint8_t *a = ex->work + (size_t)(n + N * (b2 + B2 * b3)) * act_row;
                uint8_t *dcol = tensor_ptr(d) + n * d->nb[1] + b2 * d->nb[2] + b3 * d->nb[3];
                int64_t m = m0;
                for (; m + 2 <= m1; m += 2) {
                    float out[4];
                    plan.tile(K, wbase + m * w->nb[1], (size_t)w->nb[1], a, act_row, out);
                    for (int r = 0; r < 2; r++)
                        for (int c = 0; c < 2; c++)
                            memcpy(dcol + c * d->nb[1] + (m + r) * d->nb[0], &out[2 * r + c], 4);
                }
                for (; m < m1; m++) {
                    float out[2];
                    dot(K, wbase + m * w->nb[1], a, act_row, 2, out);
                    for (int c = 0; c < 2; c++) memcpy(dcol + c * d->nb[1] + m * d->nb[0], &out[c], 4);
                }
            }
        }
        for (; n < n1; n += CPU_NC) {
            int nc = (int)(n1 - n < CPU_NC ? n1 - n : CPU_NC);
            const void *a;
            size_t a_stride;
            if (in_place) {
                a = tensor_row(x, n, b2, b3);
                a_stride = (size_t)x->nb[1];
            } else {
                a = ex->work + (size_t)(n + N * (b2 + B2 * b3)) * act_row;
                a_stride = act_row;
            }
            uint8_t *dcol = tensor_ptr(d) + n * d->nb[1] + b2 * d->nb[2] + b3 * d->nb[3];
            const int64_t Kd = N == 1 && plan.kind == ACT_F32 ? act_len_nonzero(a, K) : K;
            int64_t m = m0;
            if (dotr && nc == 1 && d->nb[0] == 4) { /* decoding: the chunk's rows in one call */
                dotr(K, wbase + m * w->nb[1], (size_t)w->nb[1], a, m1 - m, (float *)(void *)dcol + m);
                m = m1;
            }
            if (dot2 && nc > 1) /* two weight rows per activation load */
                for (; m + 1 < m1; m += 2) {
                    float out[2 * CPU_NC];
                    dot2(K, wbase + m * w->nb[1], (size_t)w->nb[1], a, a_stride, nc, out);
                    for (int c = 0; c < nc; c++) {
                        memcpy(dcol + c * d->nb[1] + m * d->nb[0], &out[c], 4);
                        memcpy(dcol + c * d->nb[1] + (m + 1) * d->nb[0], &out[CPU_NC + c], 4);
                    }
                }
            for (; m < m1; m++) {
                float out[CPU_NC];
                dot(Kd, wbase + m * w->nb[1], a, a_stride, nc, out);
                for (int c = 0; c < nc; c++)
                    memcpy(dcol + c * d->nb[1] + m * d->nb[0], &out[c], 4);
            }
        }
    }
}

void matmul_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const gemm_ops *g = gemm_for(ex->k, node);
    if (g) {
        gemm_compute(ex, node, g, ith, nth);
        return;
    }
    if (ith == 0) atomic_store(&ex->next_chunk, 0);
    if (matmul_has_prepare(node)) matmul_prepare(ex, node, ith, nth);
    exec_barrier(ex);
    matmul_run(ex, node, &ex->next_chunk, ith, nth);
}
