/*
 * cpu_moe — the CPU plugins' mixture-of-experts ops (ABI 1.4):
 * MUL_MAT_ID on the MUL_MAT driver (cpu_matmul.c), TOP_K and SUM_ROWS.
 *
 * MUL_MAT_ID  experts w [K, N, E], x F32 [K, n_b, T], ids I32 [n_used, T]
 *             -> dst F32 [N, n_used, T]; dst[:, s, t] = w[:, :, ids[s, t]] . x[:, s % n_b, t]
 * The straightforward version is one MUL_MAT of one row per (slot, token).
 * Here the slots are grouped by expert instead (llama.cpp's CPU backend
 * does the same), so each expert's weights are streamed once per node
 * however many tokens of a prompt chose it:
 *   1. thread 0 reads every id (one out of range fails the node with
 *      TSR_ERR_INVALID before anything is read through it) and sorts the
 *      slots by expert (a counting sort: start[e] .. start[e+1]);
 *   2. all threads gather each slot's activation row into that order
 *      (xg: [K, n_slots] contiguous F32);
 *   3. for each expert with rows, all threads run MUL_MAT of its matrix
 *      by its columns of xg into dg ([N, n_slots]) with matmul_compute:
 *      the same kernels, activation rounding and thread split as MUL_MAT
 *      (decoding: chunks of weight rows; prompts: the packed GEMM);
 *   4. all threads scatter dg's columns to dst.
 * Decoding (fewer slots than GEMM_MIN_N: the products take the dot
 * kernels) needs no meeting per expert: the gathered rows are converted
 * once, as one product's activations (matmul_prepare), and each expert's
 * rows are handed out through a chunk counter of its own (matmul_run), so
 * a thread done with one expert's chunks goes on to the next. Nor a
 * meeting per stage: every thread sorts the few ids itself, into a copy
 * of its own, and gathers the rows it then converts (matmul_prepare's
 * split: rows ith, ith + nth, ...), so the threads meet once, before the
 * products; and an expert with one slot (each of them, decoding a token)
 * writes its column into dst where it belongs, so no scatter follows
 * unless some expert has several. One barrier per node instead of four:
 * a meeting is cheap on idle cores, but a step of a 48-layer MoE model
 * has ~150 of these nodes, and on a loaded machine each meeting can wait
 * for a preempted thread's next time slice.
 * Work area: [MUL_MAT's own][start, cursor, order per thread][xg][dg]
 * [counters].
 */
#include <math.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "cpu_kernels.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* The MUL_MAT of expert e by cols columns of xg into dg, as tensors over
 * the given addresses (shapes only when they are NULL: supports_op and the
 * work size ask before anything has an address). */
typedef struct expert_mm {
    tsr_tensor w, x, d;
    tsr_node node;
} expert_mm;

static void expert_mm_init(expert_mm *m, const tsr_node *node, int64_t e, int64_t cols, float *x, float *d) {
    const tsr_tensor *w = node->src[0];
    const int64_t K = w->ne[0], N = w->ne[1];
    m->w = *w;
    m->w.ne[2] = m->w.ne[3] = 1;
    m->w.buffer = NULL;
    m->w.offset = 0;
    m->w.data = tensor_ptr(w) ? tensor_ptr(w) + e * w->nb[2] : NULL;
    m->x = (tsr_tensor){.dtype = TSR_DTYPE_F32, .ne = {K, cols, 1, 1}, .nb = {4, 4 * K, 4 * K * cols, 4 * K * cols},
                        .data = x, .name = node->src[1]->name};
    m->d = (tsr_tensor){.dtype = TSR_DTYPE_F32, .ne = {N, cols, 1, 1}, .nb = {4, 4 * N, 4 * N * cols, 4 * N * cols},
                        .data = d, .name = node->dst->name};
    m->node = (tsr_node){.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &m->d, .src = {&m->w, &m->x}};
}

int mul_mat_id_supports(const cpu_kernels *k, const tsr_node *node, char *why, size_t why_size) {
    expert_mm m;
    expert_mm_init(&m, node, 0, 1, NULL, NULL);
    char inner[256] = "";
    if (matmul_supports(k, &m.node, inner, sizeof inner)) return 1;
    /* the product's reason without its "MUL_MAT 'name': " prefix */
    const char *reason = strstr(inner, "': ");
    return tsr_node_decline(node, why, why_size, "experts: %s", reason ? reason + 3 : inner);
}

/* Byte offsets of the parts of the work area. */
typedef struct moe_layout {
    size_t sort, sort_bytes; /* thread i's start, cursor and order at sort + i * sort_bytes */
    size_t xg, dg, counters, total;
} moe_layout;

enum { COUNTER_BYTES = 64 }; /* one chunk counter per cache line */

static moe_layout moe_layout_of(const cpu_kernels *k, const tsr_node *node, int nth) {
    const tsr_tensor *w = node->src[0], *ids = node->src[2];
    const int64_t K = w->ne[0], N = w->ne[1], E = w->ne[2], n_slots = ids->ne[0] * ids->ne[1];
    /* MUL_MAT's area for any column count up to n_slots: each of its two
     * paths (dot kernels below GEMM_MIN_N columns, GEMM above) needs more
     * with more columns */
    size_t mm = 0;
    const int64_t cols[3] = {1, n_slots < GEMM_MIN_N - 1 ? n_slots : GEMM_MIN_N - 1, n_slots};
    for (int i = 0; i < 3; i++) {
        expert_mm m;
        expert_mm_init(&m, node, 0, cols[i], NULL, NULL);
        const size_t s = matmul_work_size(k, &m.node, nth);
        if (s > mm) mm = s;
    }
    moe_layout l;
    l.sort = align64(mm);
    l.sort_bytes = align64((size_t)(2 * E + 1) * sizeof(int32_t)) + align64((size_t)n_slots * sizeof(int32_t));
    l.xg = l.sort + (size_t)nth * l.sort_bytes;
    l.dg = l.xg + align64((size_t)(n_slots * K) * sizeof(float));
    l.counters = l.dg + align64((size_t)(n_slots * N) * sizeof(float));
    l.total = l.counters + (size_t)E * COUNTER_BYTES;
    return l;
}

size_t mul_mat_id_work_size(const cpu_kernels *k, const tsr_node *node, int nth) {
    return moe_layout_of(k, node, nth).total;
}

static int32_t id_at(const tsr_tensor *ids, int64_t s, int64_t t) {
    int32_t e;
    memcpy(&e, tensor_ptr(ids) + s * ids->nb[0] + t * ids->nb[1], sizeof e);
    return e;
}

/* Step 1 (thread 0): start[e] = first sorted position of expert e's slots
 * (start[E] = n_slots), order[j] = slot s + n_used * t. 0, or -1 for an id
 * out of range. */
static int sort_slots(const tsr_node *node, int32_t *start, int32_t *order) {
    const tsr_tensor *ids = node->src[2];
    const int64_t E = node->src[0]->ne[2], n_used = ids->ne[0], T = ids->ne[1];
    int32_t *cursor = start + E + 1;
    memset(start, 0, (size_t)(E + 1) * sizeof *start);
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < n_used; s++) {
            const int32_t e = id_at(ids, s, t);
            if (e < 0 || e >= E) return -1;
            start[e + 1]++;
        }
    for (int64_t e = 0; e < E; e++) start[e + 1] += start[e];
    memcpy(cursor, start, (size_t)E * sizeof *cursor);
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < n_used; s++) order[cursor[id_at(ids, s, t)]++] = (int32_t)(s + n_used * t);
    return 0;
}

/* Slot j's activation row into xg (contiguous F32). */
static void gather_row(const tsr_tensor *x, const int32_t *order, int64_t n_used, int64_t j, float *xg) {
    const int64_t K = x->ne[0], s = order[j] % n_used, t = order[j] / n_used;
    const uint8_t *row = tensor_row(x, s % x->ne[1], t, 0);
    float *out = xg + j * K;
    if (x->nb[0] == 4) memcpy(out, row, (size_t)K * 4);
    else
        for (int64_t i = 0; i < K; i++) memcpy(&out[i], row + i * x->nb[0], 4);
}

/* dg's column j to its place in dst. */
static void scatter_row(tsr_tensor *d, const int32_t *order, int64_t n_used, int64_t j, const float *dg) {
    const int64_t N = d->ne[0], s = order[j] % n_used, t = order[j] / n_used;
    uint8_t *row = tensor_row(d, s, t, 0);
    const float *in = dg + j * N;
    if (d->nb[0] == 4) memcpy(row, in, (size_t)N * 4);
    else
        for (int64_t i = 0; i < N; i++) memcpy(row + i * d->nb[0], &in[i], 4);
}

/* The products of the experts on the dot kernels, without a barrier
 * between them (see the top of the file). xg's rows were converted into
 * ex->work by matmul_prepare of the product over all of them; with
 * direct, each expert has one slot and its product goes straight into
 * that slot's column of dst. */
static void run_phased(cpu_exec *ex, const tsr_node *node, const moe_layout *l, const int32_t *start,
                       const int32_t *order, int direct, float *xg, float *dg, size_t act_row, const uint8_t *xw,
                       int ith, int nth) {
    const tsr_tensor *ids = node->src[2];
    tsr_tensor *d = node->dst;
    const int64_t K = node->src[0]->ne[0], N = node->src[0]->ne[1], E = node->src[0]->ne[2], n_used = ids->ne[0];
    for (int64_t e = 0; e < E; e++) {
        const int64_t cols = start[e + 1] - start[e];
        if (cols == 0) continue;
        expert_mm m;
        expert_mm_init(&m, node, e, cols, xg + start[e] * K, dg + start[e] * N);
        if (direct) {
            const int64_t slot = order[start[e]];
            m.d.data = tensor_row(d, slot % n_used, slot / n_used, 0);
            m.d.nb[0] = d->nb[0];
        }
        /* matmul_run reads its activations from work: this expert's start there */
        cpu_exec at = {.k = ex->k, .pool = ex->pool, .nth = ex->nth, .exp_sub_sum = ex->exp_sub_sum,
                       .work = ex->work + (size_t)start[e] * act_row, .work_size = ex->work_size};
        _Atomic int64_t *counter = (_Atomic int64_t *)(void *)(ex->work + l->counters + (size_t)e * COUNTER_BYTES);
        const void *xe = NULL; /* this expert's x16 copy, for one column */
        if (xw && cols == 1 && m.d.nb[0] == 4)
            xe = xw + (size_t)e * (size_t)(N / CPU_XROWS) * cpu_x_group_bytes(node->src[0]->dtype, K);
        matmul_run_xw(&at, &m.node, xe, counter, ith, nth);
    }
}

int mul_mat_id_x_eligible(const cpu_kernels *k, const tsr_node *node) {
    /* one token (decoding): a prompt's products never read the copy, so
     * a prompt alone (perplexity, embeddings) makes none */
    if (node->op != TSR_OP_MUL_MAT_ID || node->src[0]->ne[3] != 1 || node->src[2]->ne[1] != 1) return 0;
    expert_mm m;
    expert_mm_init(&m, node, 0, 1, NULL, NULL);
    return matmul_x_eligible(k, &m.node);
}

void mul_mat_id_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    mul_mat_id_compute_xw(ex, node, NULL, ith, nth);
}

void mul_mat_id_compute_xw(cpu_exec *ex, const tsr_node *node, const void *xw, int ith, int nth) {
    const tsr_tensor *w = node->src[0], *x = node->src[1], *ids = node->src[2];
    tsr_tensor *d = node->dst;
    const int64_t K = w->ne[0], N = w->ne[1], E = w->ne[2], n_used = ids->ne[0];
    const int64_t n_slots = n_used * ids->ne[1];
    const moe_layout l = moe_layout_of(ex->k, node, nth);
    float *xg = (float *)(void *)(ex->work + l.xg), *dg = (float *)(void *)(ex->work + l.dg);

    expert_mm all; /* one product over every gathered row: its plan and activation rows */
    expert_mm_init(&all, node, 0, n_slots, xg, dg);
    const int phased = n_slots < GEMM_MIN_N && matmul_phased(ex->k, &all.node);

    if (phased) {
        /* this thread's own sort: every thread finds a bad id itself */
        uint8_t *mine = ex->work + l.sort + (size_t)ith * l.sort_bytes;
        int32_t *start = (int32_t *)(void *)mine;
        int32_t *order = (int32_t *)(void *)(mine + align64((size_t)(2 * E + 1) * sizeof(int32_t)));
        if (sort_slots(node, start, order)) {
            exec_fail(ex, TSR_ERR_INVALID);
            return;
        }
        if (ith == 0)
            for (int64_t e = 0; e < E; e++)
                atomic_store((_Atomic int64_t *)(void *)(ex->work + l.counters + (size_t)e * COUNTER_BYTES), 0);
        int direct = 1;
        for (int64_t e = 0; e < E && direct; e++) direct = start[e + 1] - start[e] <= 1;
        /* the rows this thread gathers are the rows it converts */
        for (int64_t j = ith; j < n_slots; j += nth) gather_row(x, order, n_used, j, xg);
        size_t act_row = 0;
        if (matmul_has_prepare(&all.node)) {
            matmul_prepare(ex, &all.node, ith, nth);
            act_row = matmul_act_row_bytes(ex->k, &all.node);
        }
        exec_barrier(ex);
        run_phased(ex, node, &l, start, order, direct, xg, dg, act_row, xw, ith, nth);
        if (direct) return; /* the step after this one meets the threads (cpu_steps.h) */
        exec_barrier(ex);
        for (int64_t j = ith; j < n_slots; j += nth) scatter_row(d, order, n_used, j, dg);
        return;
    }

    /* Prompts: thread 0 sorts, all gather, then one product per expert. */
    int32_t *start = (int32_t *)(void *)(ex->work + l.sort);
    int32_t *order = (int32_t *)(void *)(ex->work + l.sort + align64((size_t)(2 * E + 1) * sizeof(int32_t)));
    if (ith == 0 && sort_slots(node, start, order)) exec_fail(ex, TSR_ERR_INVALID);
    exec_barrier(ex);
    /* every thread sees thread 0's verdict after the barrier */
    if (atomic_load_explicit(&ex->error, memory_order_relaxed)) return;
    for (int64_t j = ith; j < n_slots; j += nth) gather_row(x, order, n_used, j, xg);
    exec_barrier(ex);
    for (int64_t e = 0; e < E; e++) {
        const int64_t cols = start[e + 1] - start[e];
        if (cols == 0) continue;
        expert_mm m;
        expert_mm_init(&m, node, e, cols, xg + start[e] * K, dg + start[e] * N);
        matmul_compute(ex, &m.node, ith, nth);
        exec_barrier(ex); /* the next product resets the chunk counter */
    }
    for (int64_t j = ith; j < n_slots; j += nth) scatter_row(d, order, n_used, j, dg);
}

/* ---------------------------------------------------------------- TOP_K */

/* TOP_K's order, as ref's: larger first, NaN after every number, equal
 * values (and NaNs) by lower index. */
static int before(float x, int64_t i, float y, int64_t j) {
    if (isnan(x) || isnan(y)) return isnan(x) == isnan(y) ? i < j : isnan(y);
    return x > y || (x == y && i < j);
}

/* Each row by insertion into the k best so far (n is an expert count);
 * the straightforward version selects the best k times. */
void top_k_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    (void)ex;
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    const int64_t n = a->ne[0], k = d->ne[0], rows = tensor_nrows(a);
    int64_t lo, hi;
    split_range(rows, ith, nth, &lo, &hi);
    enum { KMAX = 64 };
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        if (k > KMAX) { /* large k: k passes of selection */
            for (int64_t p = 0; p < k; p++) {
                int64_t best = -1;
                float bv = 0.0f;
                for (int64_t i = 0; i < n; i++) {
                    float v;
                    memcpy(&v, ra + i * a->nb[0], 4);
                    /* skip what earlier passes took: those rank before the last taken */
                    if (p > 0) {
                        int32_t last;
                        memcpy(&last, rd + (p - 1) * d->nb[0], 4);
                        float lv;
                        memcpy(&lv, ra + last * a->nb[0], 4);
                        if (!before(lv, last, v, i)) continue;
                    }
                    if (best < 0 || before(v, i, bv, best)) best = i, bv = v;
                }
                const int32_t id = (int32_t)best;
                memcpy(rd + p * d->nb[0], &id, 4);
            }
            continue;
        }
        float bv[KMAX];
        int32_t bi[KMAX];
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            float v;
            memcpy(&v, ra + i * a->nb[0], 4);
            if (m == k && !before(v, i, bv[k - 1], bi[k - 1])) continue;
            int64_t p = m < k ? m++ : k - 1;
            for (; p > 0 && before(v, i, bv[p - 1], bi[p - 1]); p--) bv[p] = bv[p - 1], bi[p] = bi[p - 1];
            bv[p] = v;
            bi[p] = (int32_t)i;
        }
        for (int64_t p = 0; p < k; p++) memcpy(rd + p * d->nb[0], &bi[p], 4);
    }
}

/* ------------------------------------------------------------- SUM_ROWS */

/* Each row summed in double in index order, as ref: the same bits. */
void sum_rows_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    (void)ex;
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    int64_t lo, hi;
    split_range(tensor_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        const int64_t i1 = r % a->ne[1], i2 = (r / a->ne[1]) % a->ne[2], i3 = r / (a->ne[1] * a->ne[2]);
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < a->ne[0]; i++) {
            float v;
            memcpy(&v, ra + i * a->nb[0], 4);
            sum += (double)v;
        }
        const float out = (float)sum;
        memcpy(tensor_row(d, i1, i2, i3), &out, 4);
    }
}
