/*
 * test_cpu_ops — a CPU plugin (cpu-avx or cpu-neon: both are the
 * ../../backends/cpu-common core with one ISA's kernels), op by op, against
 * the ref backend.
 *
 * Usage: test_cpu_ops PLUGIN [LEVEL]. Loads libtessera-backend-PLUGIN.so from
 * TESSERA_BUILD_ROOT; meson runs it once per kernel level, with the level in
 * the plugin's variable (TESSERA_AVX_LEVEL, TESSERA_NEON_LEVEL) and as LEVEL.
 * The test checks that level is the one that runs, or says skipped where
 * this CPU lacks it (qemu -cpu max has every NEON level). It builds nodes
 * over random host-memory tensors, computes them with the plugin's queue and
 * with ref_compute(), and compares.
 *
 * Tolerances (error = max |cpu - ref| / max |ref| over the output; for
 * MUL_MAT the divisor is at least sqrt(K) rms(W) rms(X), the size of a
 * typical output, so outputs that cancel to ~0 do not inflate it):
 *   float ops, F32-weight MUL_MAT              1e-4  (f32 vs ref's double sums)
 *   F16 / BF16-weight MUL_MAT                  1e-3 / 1e-2  (ref rounds the
 *     activations to F16 / BF16 as llama.cpp does; the plugin keeps f32)
 *   quantized MUL_MAT vs ref fed the same 8-bit activations
 *     (src1 round-tripped through Q8_0 / Q8_1 / Q8_K)  2e-3
 *   the same at Gemma 3's K-quant shapes, model-like activations  1e-4
 *   quantized MUL_MAT vs ref's exact product   5e-2  (8-bit activations)
 *   GET_ROWS, CPY                              1e-6  (same dequantization)
 *   ROPE                                       1e-4 absolute
 * Also checks supports_op declines malformed nodes and that a bad GET_ROWS
 * index is an error, not a crash, and that every decline gives its reason
 * through tsr_host.decline (ABI 1.1).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>
#include <tessera/plugin_util.h>

#include "harness.h"
#include "ref/ref.h"
#include "tensor/dtype.h"

static const tsr_plugin *plugin;
static tsr_device *device;
static tsr_queue *queue;
/* The reason the plugin gave through tsr_host.decline (ABI 1.1). */
static char declined[256];
static void on_decline(const tsr_node *node, const char *reason) {
    (void)node;
    snprintf(declined, sizeof declined, "%s", reason ? reason : "(null)");
}
static tsr_host host = {.struct_size = sizeof(tsr_host), .abi_version = TSR_ABI_VERSION, .n_threads = 2,
                        .decline = on_decline};

/* ----------------------------------------------------------- tensors */

typedef struct tensor {
    tsr_tensor t;
    void *mem;
} tensor;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static void set_strides(tsr_tensor *t) {
    t->nb[0] = tsr_dtype_block_bytes(t->dtype);
    t->nb[1] = t->nb[0] * (t->ne[0] / tsr_dtype_block_size(t->dtype));
    for (int i = 2; i < 4; i++) t->nb[i] = t->nb[i - 1] * t->ne[i - 1];
}

static size_t tensor_bytes(const tsr_tensor *t) { return (size_t)(t->nb[3] * t->ne[3]); }

/* Contiguous tensor of dtype filled from random f32 values (quantized with
 * the reference quantizer). */
static tensor *tensor_new(int32_t dtype, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
    tensor *x = calloc(1, sizeof *x);
    x->t.dtype = dtype;
    x->t.ne[0] = n0, x->t.ne[1] = n1, x->t.ne[2] = n2, x->t.ne[3] = n3;
    set_strides(&x->t);
    x->mem = calloc(1, tensor_bytes(&x->t) + 64);
    x->t.data = x->mem;
    x->t.name = "t";
    int64_t n = tsr_tensor_nelements(&x->t);
    if (dtype == TSR_DTYPE_I32) return x;
    float *f = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) f[i] = frand();
    if (dtype == TSR_DTYPE_F32) memcpy(x->mem, f, (size_t)n * 4);
    else dtype_traits_get(dtype)->from_f32(f, x->mem, n);
    free(f);
    return x;
}

static void tensor_free(tensor *x) {
    if (!x) return;
    free(x->mem);
    free(x);
}

/* A permuted view (swap dims a and b) sharing x's memory. */
static tsr_tensor view_swap(const tensor *x, int a, int b) {
    tsr_tensor v = x->t;
    int64_t ne = v.ne[a], nb = v.nb[a];
    v.ne[a] = v.ne[b], v.nb[a] = v.nb[b];
    v.ne[b] = ne, v.nb[b] = nb;
    return v;
}

static float get_f32(const tsr_tensor *t, int64_t e) {
    int64_t i0 = e % t->ne[0], i1 = (e / t->ne[0]) % t->ne[1];
    int64_t i2 = (e / (t->ne[0] * t->ne[1])) % t->ne[2], i3 = e / (t->ne[0] * t->ne[1] * t->ne[2]);
    const uint8_t *p = (const uint8_t *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    float v;
    uint16_t h;
    switch (t->dtype) {
    case TSR_DTYPE_F16: memcpy(&h, p, 2); return fp16_to_f32(h);
    case TSR_DTYPE_BF16: memcpy(&h, p, 2); return bf16_to_f32(h);
    case TSR_DTYPE_I32: { int32_t i; memcpy(&i, p, 4); return (float)i; }
    default: memcpy(&v, p, 4); return v;
    }
}

/* ---------------------------------------------------------- running */

/* Relative errors divide by max |ref|, but at least by scale_floor: a
 * matrix product whose outputs cancel to near zero is judged against the
 * size of its terms (see mm_scale). */
static double scale_floor = 1e-6;

static double max_err(const tsr_tensor *a, const tsr_tensor *b, int relative) {
    int64_t n = tsr_tensor_nelements(a);
    double err = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = get_f32(a, i), y = get_f32(b, i);
        if (isnan(x) != isnan(y)) return INFINITY;
        if (isinf(y) || isinf(x)) {
            if (x != y) return INFINITY;
            continue;
        }
        if (fabs(x - y) > err) err = fabs(x - y);
        if (fabs(y) > scale) scale = fabs(y);
    }
    return relative ? err / (scale > scale_floor ? scale : scale_floor) : err;
}

/* Run node on the plugin (dst = out_cpu) and on ref (dst = out_ref); compare. */
static void check_node(const char *what, tsr_node node, tensor *out_cpu, tensor *out_ref, double tol,
                       int relative) {
    node.dst = &out_cpu->t;
    if (!device->api->supports_op(device, &node)) {
        ADD_FAILURE("%-44s supports_op declined a well-formed node", what);
        return;
    }
    tsr_status st = queue->api->compute(queue, &node, 1);
    if (st != TSR_OK) {
        ADD_FAILURE("%-44s compute returned %d", what, st);
        return;
    }
    node.dst = &out_ref->t;
    st = ref_compute(&node, 1, NULL);
    if (st != TSR_OK) {
        ADD_FAILURE("%-44s ref_compute returned %d", what, st);
        return;
    }
    double err = max_err(&out_cpu->t, &out_ref->t, relative);
    int ok = err <= tol;
    printf("%s %-44s err %.3g (tol %.0e)\n", ok ? "ok  " : "FAIL", what, err, tol);
    EXPECT(ok, "%s (line above)", what);
}

static tsr_node make_node(int op, int n_src, const tsr_tensor *a, const tsr_tensor *b, const tsr_tensor *c,
                          const tsr_tensor *d) {
    tsr_node n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.n_src = n_src;
    n.src[0] = a, n.src[1] = b, n.src[2] = c, n.src[3] = d;
    return n;
}

static double rms_of(const tsr_tensor *t) {
    int64_t n = tsr_tensor_nelements(t);
    float *f = malloc((size_t)n * 4);
    dtype_traits_get(t->dtype)->to_f32(t->data, f, n);
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)f[i] * f[i];
    free(f);
    return sqrt(s / (double)n);
}

/* The typical size of one output of W x X: sqrt(K) rms(W) rms(X). */
static double mm_scale(const tsr_tensor *w, const tsr_tensor *x) {
    return sqrt((double)w->ne[0]) * rms_of(w) * rms_of(x);
}

/* src1 as the 8-bit activation type would see it: quantize, dequantize. */
static tensor *roundtrip_activations(const tensor *x, int32_t act_type) {
    tensor *y = tensor_new(TSR_DTYPE_F32, x->t.ne[0], x->t.ne[1], x->t.ne[2], x->t.ne[3]);
    const dtype_traits *tr = dtype_traits_get(act_type);
    int64_t K = x->t.ne[0], rows = tsr_tensor_nelements(&x->t) / K;
    void *q = malloc((size_t)(K / tr->block_size) * tr->block_bytes);
    for (int64_t r = 0; r < rows; r++) {
        tr->from_f32((const float *)x->mem + r * K, q, K);
        tr->to_f32(q, (float *)y->mem + r * K, K);
    }
    free(q);
    return y;
}

/* A quantized MUL_MAT node (src1 = x, F32) on the plugin against ref fed
 * the same 8-bit activations (x round-tripped through the weight type's
 * activation type): the integer sums are the same on both sides, so this
 * checks the kernels alone. */
static void check_mul_mat_8bit(const char *what, tsr_node n, const tensor *x, tensor *oa, tensor *or_, double tol) {
    tensor *xq = roundtrip_activations(x, dtype_traits_get(n.src[0]->dtype)->vec_dot_type);
    tsr_node nq = n;
    nq.src[1] = &xq->t;
    n.dst = &oa->t;
    tsr_status st = queue->api->compute(queue, &n, 1);
    nq.dst = &or_->t;
    tsr_status st2 = ref_compute(&nq, 1, NULL);
    double err = st || st2 ? INFINITY : max_err(&oa->t, &or_->t, 1);
    int ok = err <= tol;
    printf("%s %-44s err %.3g vs ref on 8-bit activations (tol %.0e)\n", ok ? "ok  " : "FAIL", what, err, tol);
    EXPECT(ok, "%s (line above)", what);
    tensor_free(xq);
}

/* ------------------------------------------------------------ cases */

static const int32_t weight_types[] = {
    TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_1, TSR_DTYPE_Q5_0,
    TSR_DTYPE_Q5_1, TSR_DTYPE_Q8_0, TSR_DTYPE_Q2_K, TSR_DTYPE_Q3_K, TSR_DTYPE_Q4_K, TSR_DTYPE_Q5_K,
    TSR_DTYPE_Q6_K,
};
enum { N_WEIGHT_TYPES = sizeof weight_types / sizeof weight_types[0] };

static void test_mul_mat(void) {
    static const int64_t shapes[][5] = {
        /* K, M, N, B2 (src1), B2 (src0) */
        {512, 1, 1, 1, 1}, {512, 7, 1, 1, 1}, {256, 33, 3, 1, 1}, {512, 16, 4, 1, 1},
        {256, 70, 9, 1, 1}, {256, 5, 130, 1, 1}, {256, 9, 2, 4, 2},
        {96, 6, 5, 1, 1}, /* K % 64 != 0: act8 path; odd 32-blocks, odd N (tile tail) */
        {8, 27, 27, 8, 4}, {27, 8, 27, 8, 4}, /* attention: K.q and V.kq, GQA */
        {512, 40, 67, 1, 1}, {256, 16, 16, 3, 1}, /* packed-panel GEMM: partial panels and tiles */
        {192, 5, 1, 1, 1}, {448, 3, 2, 1, 1}, /* K % 128 == 64: the decoding kernels' half group */
        {160, 9, 1, 1, 1}, /* one column, odd 32-block count: the two-block decode kernels' last block */
        {300, 150, 20, 2, 1}, /* float GEMM: K % 32 tail after the f32 part, two panels */
    };
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        int32_t wt = weight_types[t];
        const dtype_traits *tr = dtype_traits_get(wt);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t K = shapes[s][0], M = shapes[s][1], N = shapes[s][2], B = shapes[s][3], Bw = shapes[s][4];
            if (K % tr->block_size != 0) continue;
            tensor *w = tensor_new(wt, K, M, Bw, 1);
            tensor *x = tensor_new(TSR_DTYPE_F32, K, N, B, 1);
            tensor *oa = tensor_new(TSR_DTYPE_F32, M, N, B, 1), *or_ = tensor_new(TSR_DTYPE_F32, M, N, B, 1);
            char what[96];
            tsr_node n = make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL);
            scale_floor = mm_scale(&w->t, &x->t);
            if (!tr->quantized) {
                snprintf(what, sizeof what, "MUL_MAT %s K%lld M%lld N%lld B%lld/%lld", tr->name, (long long)K,
                         (long long)M, (long long)N, (long long)B, (long long)Bw);
                check_node(what, n, oa, or_, wt == TSR_DTYPE_F32 ? 1e-4 : wt == TSR_DTYPE_F16 ? 1e-3 : 1e-2, 1);
            } else {
                snprintf(what, sizeof what, "MUL_MAT %s K%lld M%lld N%lld B%lld/%lld", tr->name, (long long)K,
                         (long long)M, (long long)N, (long long)B, (long long)Bw);
                check_mul_mat_8bit(what, n, x, oa, or_, 2e-3);
                /* and the honest distance to the exact product */
                snprintf(what, sizeof what, "  %s vs exact f32 product", tr->name);
                check_node(what, n, oa, or_, 5e-2, 1);
            }
            tensor_free(w), tensor_free(x), tensor_free(oa), tensor_free(or_);
            scale_floor = 1e-6;
        }
    }
    /* strided activations: src1 a permuted view (dims 1 and 2 swapped) */
    int32_t types[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_Q8_0};
    for (int t = 0; t < 3; t++) {
        tensor *w = tensor_new(types[t], 64, 12, 4, 1);
        tensor *x = tensor_new(TSR_DTYPE_F32, 64, 4, 5, 1); /* view as [64, 5, 4] */
        tsr_tensor xv = view_swap(x, 1, 2);
        tensor *oa = tensor_new(TSR_DTYPE_F32, 12, 5, 4, 1), *or_ = tensor_new(TSR_DTYPE_F32, 12, 5, 4, 1);
        char what[96];
        snprintf(what, sizeof what, "MUL_MAT %s permuted src1", dtype_name(types[t]));
        check_node(what, make_node(TSR_OP_MUL_MAT, 2, &w->t, &xv, NULL, NULL), oa, or_,
                   types[t] == TSR_DTYPE_Q8_0 ? 2e-2 : types[t] == TSR_DTYPE_F16 ? 1e-3 : 1e-4, 1);
        tensor_free(w), tensor_free(x), tensor_free(oa), tensor_free(or_);
    }
}

/* Activations as a real model's (Gemma 3's ffn_down and attn_output
 * inputs): mostly small, a few outliers hundreds of times larger, columns
 * whose largest value is negative, an all-zero column, a zero superblock,
 * and a column of large values of one sign (large bsums: the mins term). */
static void fill_model_like(tensor *x) {
    const int64_t K = x->t.ne[0], N = x->t.ne[1];
    float *f = x->mem;
    for (int64_t n = 0; n < N; n++) {
        float *c = f + n * K;
        for (int64_t k = 0; k < K; k++) c[k] = 0.5f * frand();
        switch (n % 6) {
        case 1: /* outliers of both signs */
            for (int64_t k = 17; k < K; k += 97) c[k] *= 600.0f;
            break;
        case 2: /* the extreme is negative */
            c[(n * 37) % K] = -300.0f;
            break;
        case 3:
            if (n % 12 == 3) memset(c, 0, (size_t)K * 4);
            else memset(c + 256, 0, 256 * 4); /* the second superblock */
            break;
        case 5: /* one sign, every block at full scale */
            for (int64_t k = 0; k < K; k++) c[k] = -40.0f - 8.0f * frand();
            break;
        default: break;
        }
    }
}

/* The K-quant products of Gemma 3 270M Q4_K_M's shapes (attn_output Q4_K
 * [1024 -> 640], ffn_down Q4_K / Q6_K [2048 -> 640]; fewer rows here, one
 * panel partial) over many N: the dot kernels below GEMM_MIN_N, the packed
 * GEMM from it, every tile and column tail, and a whole prompt batch. */
static void test_mul_mat_model_shapes(void) {
    static const int64_t n_small[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 40, 64};
    static const int32_t types[] = {TSR_DTYPE_Q4_K, TSR_DTYPE_Q6_K};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < (int)(sizeof n_small / sizeof n_small[0]) + 2; s++) {
            /* K 1024 at every N; K 2048 at a tail and a 512-token batch */
            const int64_t K = s < 16 ? 1024 : 2048, N = s < 16 ? n_small[s] : s == 16 ? 19 : 512, M = 40;
            tensor *w = tensor_new(types[t], K, M, 1, 1), *x = tensor_new(TSR_DTYPE_F32, K, N, 1, 1);
            fill_model_like(x);
            tensor *oa = tensor_new(TSR_DTYPE_F32, M, N, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, M, N, 1, 1);
            char what[96];
            snprintf(what, sizeof what, "MUL_MAT %s model-like K%lld M%lld N%lld", dtype_name(types[t]),
                     (long long)K, (long long)M, (long long)N);
            scale_floor = mm_scale(&w->t, &x->t);
            /* integer sums equal, only float steps differ (~2e-6 seen) */
            check_mul_mat_8bit(what, make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL), x, oa, or_, 1e-4);
            scale_floor = 1e-6;
            tensor_free(w), tensor_free(x), tensor_free(oa), tensor_free(or_);
        }
}

/* Decoding (N 1) goes through the many-row kernels where a level has
 * them (cpu_kernels.h: dotr), a run of a chunk's rows per call; their
 * sums are the one-row dot's with nc 1, the same as each column's of a
 * product of several columns. So column 0 of an N 3 product equals the
 * N 1 product of that column bit for bit, at row counts that leave every
 * remainder of the kernels' row runs and the threads' chunks, K of 2 to
 * 18 blocks. */
static void test_mul_mat_decode_bits(void) {
    /* the types with many-row kernels (not every one-row kernel keeps its
     * nc 1 sums in the nc > 1 order: AVX-512's Q4_0 pair kernel does not) */
    static const int32_t types[] = {TSR_DTYPE_Q4_K, TSR_DTYPE_Q6_K};
    static const int64_t shapes[][2] = {{512, 1}, {768, 7}, {1024, 13}, {4608, 40}, {1024, 517}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t K = shapes[s][0], M = shapes[s][1];
            tensor *w = tensor_new(types[t], K, M, 1, 1), *x3 = tensor_new(TSR_DTYPE_F32, K, 3, 1, 1);
            fill_model_like(x3);
            tensor *x1 = tensor_new(TSR_DTYPE_F32, K, 1, 1, 1);
            memcpy(x1->mem, x3->mem, (size_t)K * 4);
            tensor *o3 = tensor_new(TSR_DTYPE_F32, M, 3, 1, 1), *o1 = tensor_new(TSR_DTYPE_F32, M, 1, 1, 1);
            tsr_node n3 = make_node(TSR_OP_MUL_MAT, 2, &w->t, &x3->t, NULL, NULL), n1 = n3;
            n3.dst = &o3->t;
            n1.src[1] = &x1->t, n1.dst = &o1->t;
            const tsr_status st3 = queue->api->compute(queue, &n3, 1), st1 = queue->api->compute(queue, &n1, 1);
            int64_t bad = -1;
            for (int64_t m = 0; m < M && bad < 0; m++)
                if (memcmp((float *)o3->mem + m, (float *)o1->mem + m, 4) != 0) bad = m;
            const int ok = st3 == TSR_OK && st1 == TSR_OK && bad < 0;
            printf("%s MUL_MAT %s K%lld M%lld: N 1 is column 0 of N 3, bit for bit%s\n", ok ? "ok  " : "FAIL",
                   dtype_name(types[t]), (long long)K, (long long)M, bad >= 0 ? " (a row differs)" : "");
            EXPECT(ok, "MUL_MAT %s K%lld M%lld: N 1 vs N 3 column 0 (status %d %d, first different row %lld)",
                   dtype_name(types[t]), (long long)K, (long long)M, st1, st3, (long long)bad);
            tensor_free(w), tensor_free(x3), tensor_free(x1), tensor_free(o3), tensor_free(o1);
        }
}

/* Decoding products of constant weights (TSR_TENSOR_WEIGHT) whose rows
 * come in sixteens read the plugin's x16 copy of the weight where the
 * level has a kernel for it (cpu_repack.h): against ref on the same 8-bit
 * activations, the integer sums are the same, only the float steps differ.
 * Shapes: one block and LFM2's (K 1024, 4608), one group and several, a
 * run of groups per thread's chunk and a tail chunk. The weights are made
 * constant for the queue's life as a model's are: the queue is this
 * test's own and goes before them. A weight flagged constant whose rows
 * do not come in sixteens (M 40) or that is computed with N 2 reads in
 * place. And the copy is really read: after the first product the
 * caller's bytes are changed (breaking the promise, as only a test may),
 * and the second product still gives the first's result. */
static void test_mul_mat_repacked(void) {
    static const int64_t shapes[][3] = {
        /* K, M, N */
        {256, 16, 1}, {1024, 48, 1}, {4608, 1024, 1}, {1024, 3072, 1}, {512, 40, 1}, {1024, 32, 2},
    };
    enum { N_SHAPES = sizeof shapes / sizeof shapes[0] };
    static const int32_t types[] = {TSR_DTYPE_Q4_K, TSR_DTYPE_Q6_K};
    tsr_queue *own = NULL;
    if (device->api->queue_create(device, &own) != TSR_OK || !own) {
        EXPECT(0, "queue_create for the repacked products");
        return;
    }
    if (own->api->set_n_threads) own->api->set_n_threads(own, host.n_threads);
    tensor *ws[2][N_SHAPES] = {{0}};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < N_SHAPES; s++) {
            const int64_t K = shapes[s][0], M = shapes[s][1], N = shapes[s][2];
            tensor *w = ws[t][s] = tensor_new(types[t], K, M, 1, 1), *x = tensor_new(TSR_DTYPE_F32, K, N, 1, 1);
            w->t.flags |= TSR_TENSOR_WEIGHT;
            fill_model_like(x);
            tensor *oa = tensor_new(TSR_DTYPE_F32, M, N, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, M, N, 1, 1);
            char what[96];
            snprintf(what, sizeof what, "MUL_MAT %s constant K%lld M%lld N%lld", dtype_name(types[t]), (long long)K,
                     (long long)M, (long long)N);
            scale_floor = mm_scale(&w->t, &x->t);
            tsr_queue *shared = queue;
            queue = own;
            check_mul_mat_8bit(what, make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL), x, oa, or_, 1e-4);
            /* a second product after the bytes changed: the copy's result */
            tensor *o2 = tensor_new(TSR_DTYPE_F32, M, N, 1, 1);
            tsr_node n = make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL);
            n.dst = &o2->t;
            const size_t wbytes = tensor_bytes(&w->t);
            uint8_t *saved = malloc(wbytes);
            memcpy(saved, w->mem, wbytes);
            for (size_t i = 0; i < wbytes; i += 144) ((uint8_t *)w->mem)[i] ^= 0x55; /* d of every Q4_K block */
            const tsr_status st = own->api->compute(own, &n, 1);
            memcpy(w->mem, saved, wbytes);
            free(saved);
            queue = shared;
            scale_floor = 1e-6;
            const int same = st == TSR_OK && memcmp(o2->mem, oa->mem, (size_t)(M * N) * 4) == 0;
            /* where the plugin has the copy (cpu-avx's Q4_K, one column, rows
             * in sixteens) the result must not move; elsewhere it must */
            const int copied = !strcmp(plugin->name, "cpu-avx") && types[t] == TSR_DTYPE_Q4_K && M % 16 == 0 && N == 1 &&
                               !(getenv("TESSERA_CPU_REPACK") && !strcmp(getenv("TESSERA_CPU_REPACK"), "0"));
            printf("%s %-44s %s after the weight's bytes changed\n", same == copied ? "ok  " : "FAIL", what,
                   same ? "the same result" : "a new result");
            EXPECT(same == copied, "%s: %s (status %d)", what,
                   copied ? "the x16 copy was not read" : "read a stale copy", (int)st);
            tensor_free(x), tensor_free(oa), tensor_free(or_), tensor_free(o2);
        }
    /* MUL_MAT_ID of constant Q4_K experts, decoding: each chosen expert
     * has one column and reads its part of the copy (T 1); with T 3 and
     * repeated ids some experts have several columns and read in place */
    static const int64_t moe[][5] = {/* K, N, E, n_used, T */ {256, 32, 4, 2, 1}, {768, 512, 8, 3, 1}, {512, 48, 4, 2, 3}};
    tensor *we[3] = {0};
    for (int s = 0; s < 3; s++) {
        const int64_t K = moe[s][0], N = moe[s][1], E = moe[s][2], n_used = moe[s][3], T = moe[s][4];
        tensor *w = we[s] = tensor_new(TSR_DTYPE_Q4_K, K, N, E, 1), *x = tensor_new(TSR_DTYPE_F32, K, 1, T, 1);
        w->t.flags |= TSR_TENSOR_WEIGHT;
        fill_model_like(x);
        tensor *ids = tensor_new(TSR_DTYPE_I32, n_used, T, 1, 1);
        int32_t *id = (int32_t *)(void *)ids->mem;
        for (int64_t i = 0; i < n_used * T; i++) id[i] = (int32_t)((i * 5 + 1) % E);
        tensor *oa = tensor_new(TSR_DTYPE_F32, N, n_used, T, 1), *or_ = tensor_new(TSR_DTYPE_F32, N, n_used, T, 1);
        tensor *o2 = tensor_new(TSR_DTYPE_F32, N, n_used, T, 1);
        char what[96];
        snprintf(what, sizeof what, "MUL_MAT_ID Q4_K constant K%lld N%lld E%lld %lld/tok T%lld", (long long)K,
                 (long long)N, (long long)E, (long long)n_used, (long long)T);
        scale_floor = mm_scale(&w->t, &x->t);
        tsr_queue *shared = queue;
        queue = own;
        check_node(what, make_node(TSR_OP_MUL_MAT_ID, 3, &w->t, &x->t, &ids->t, NULL), oa, or_, 2e-3, 1);
        tsr_node n = make_node(TSR_OP_MUL_MAT_ID, 3, &w->t, &x->t, &ids->t, NULL);
        n.dst = &o2->t;
        const size_t wbytes = tensor_bytes(&w->t);
        uint8_t *saved = malloc(wbytes);
        memcpy(saved, w->mem, wbytes);
        for (size_t i = 0; i < wbytes; i += 144) ((uint8_t *)w->mem)[i] ^= 0x55;
        const tsr_status st = own->api->compute(own, &n, 1);
        memcpy(w->mem, saved, wbytes);
        free(saved);
        queue = shared;
        scale_floor = 1e-6;
        const int same = st == TSR_OK && memcmp(o2->mem, oa->mem, tensor_bytes(&oa->t)) == 0;
        const int copied = !strcmp(plugin->name, "cpu-avx") && T == 1 &&
                           !(getenv("TESSERA_CPU_REPACK") && !strcmp(getenv("TESSERA_CPU_REPACK"), "0"));
        printf("%s %-44s %s after the weight's bytes changed\n", same == copied ? "ok  " : "FAIL", what,
               same ? "the same result" : "a new result");
        EXPECT(same == copied, "%s: %s (status %d)", what, copied ? "the x16 copy was not read" : "read a stale copy",
               (int)st);
        tensor_free(x), tensor_free(ids), tensor_free(oa), tensor_free(or_), tensor_free(o2);
    }
    own->api->destroy(own);
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < N_SHAPES; s++) tensor_free(ws[t][s]);
    for (int s = 0; s < 3; s++) tensor_free(we[s]);
}

/* The IQ, TQ and MXFP4 types (plugin_quants.h) from random blocks, every
 * bit pattern of grid indices, signs and scales (dtype_block_set_scale
 * keeps d finite), against ref on the same 8-bit activations: decoding
 * (N 1) and the nc = 2..4 column groups with a tail, odd row counts, one
 * and several super-blocks. The kernels' integer sums equal ref's, so the
 * bound is MUL_MAT's float-steps one (see test_mul_mat_model_shapes);
 * K 2048 takes model-like activations (outliers, zero super-blocks). */
static void test_mul_mat_iq(void) {
    static const int32_t types[] = {
        TSR_DTYPE_IQ4_NL, TSR_DTYPE_MXFP4, TSR_DTYPE_IQ4_XS, TSR_DTYPE_TQ1_0, TSR_DTYPE_TQ2_0, TSR_DTYPE_IQ2_XXS,
        TSR_DTYPE_IQ2_XS, TSR_DTYPE_IQ2_S, TSR_DTYPE_IQ3_XXS, TSR_DTYPE_IQ3_S, TSR_DTYPE_IQ1_S, TSR_DTYPE_IQ1_M,
    };
    static const int64_t shapes[][3] = {
        /* K, M, N */
        {256, 33, 1}, {512, 7, 1}, {2048, 5, 1}, {256, 9, 2}, {768, 17, 3}, {512, 3, 4}, {2048, 7, 9},
    };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int32_t wt = types[t];
            const int64_t K = shapes[s][0], M = shapes[s][1], N = shapes[s][2];
            const int64_t bs = tsr_dtype_block_size(wt), bb = tsr_dtype_block_bytes(wt);
            tensor *w = calloc(1, sizeof *w);
            w->t.dtype = wt;
            w->t.ne[0] = K, w->t.ne[1] = M, w->t.ne[2] = w->t.ne[3] = 1;
            w->t.name = "t";
            set_strides(&w->t);
            w->t.data = w->mem = calloc(1, tensor_bytes(&w->t) + 64);
            for (int64_t i = 0; i < M * (K / bs); i++) {
                uint8_t *b = (uint8_t *)w->mem + i * bb;
                for (int64_t k = 0; k < bb; k++) b[k] = (uint8_t)((frand() + 1.0f) * 128.0f);
                REQUIRE(dtype_block_set_scale(wt, b, 0.002f + 0.01f * (frand() + 1.0f)) == 0, "%s scale", dtype_name(wt));
            }
            tensor *x = tensor_new(TSR_DTYPE_F32, K, N, 1, 1);
            if (K >= 2048) fill_model_like(x);
            tensor *oa = tensor_new(TSR_DTYPE_F32, M, N, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, M, N, 1, 1);
            char what[96];
            snprintf(what, sizeof what, "MUL_MAT %s K%lld M%lld N%lld", dtype_name(wt), (long long)K, (long long)M,
                     (long long)N);
            scale_floor = mm_scale(&w->t, &x->t);
            check_mul_mat_8bit(what, make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL), x, oa, or_, 1e-4);
            scale_floor = 1e-6;
            tensor_free(w), tensor_free(x), tensor_free(oa), tensor_free(or_);
        }
}

/* MUL_MAT_ID (ABI 1.4) on expert shapes: decoding (one token) and prompts
 * (the slots grouped by expert, several tokens per expert), n_b 1 and
 * n_used, against ref; the result of each slot is that of MUL_MAT, so the
 * bound is MUL_MAT's. Ids drawn with repeats across tokens (every expert
 * gets several tokens of a prompt, some none). */
static void test_mul_mat_id(void) {
    static const int32_t types[] = {TSR_DTYPE_Q4_0, TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_K, TSR_DTYPE_Q6_K, TSR_DTYPE_F16};
    static const int64_t shapes[][5] = {
        /* K, N, E, n_used, T */
        {512, 48, 8, 2, 1}, {512, 33, 8, 4, 7}, {256, 40, 16, 4, 40}, {1024, 24, 6, 2, 65},
    };
    for (int t = 0; t < 5; t++)
        for (int sh = 0; sh < 4; sh++)
            for (int nb = 0; nb < 2; nb++) {
                const int64_t K = shapes[sh][0], N = shapes[sh][1], E = shapes[sh][2], n_used = shapes[sh][3];
                const int64_t T = shapes[sh][4], n_b = nb ? n_used : 1;
                tensor *w = tensor_new(types[t], K, N, E, 1), *x = tensor_new(TSR_DTYPE_F32, K, n_b, T, 1);
                tensor *ids = tensor_new(TSR_DTYPE_I32, n_used, T, 1, 1);
                int32_t *id = (int32_t *)(void *)ids->mem;
                for (int64_t i = 0; i < n_used * T; i++) id[i] = (int32_t)((i * 7 + i / n_used * 3) % E);
                fill_model_like(x);
                tensor *oa = tensor_new(TSR_DTYPE_F32, N, n_used, T, 1), *or_ = tensor_new(TSR_DTYPE_F32, N, n_used, T, 1);
                char what[96];
                snprintf(what, sizeof what, "MUL_MAT_ID %s K%lld N%lld E%lld %lld/tok T%lld n_b %lld",
                         dtype_name(types[t]), (long long)K, (long long)N, (long long)E, (long long)n_used,
                         (long long)T, (long long)n_b);
                scale_floor = mm_scale(&w->t, &x->t);
                check_node(what, make_node(TSR_OP_MUL_MAT_ID, 3, &w->t, &x->t, &ids->t, NULL), oa, or_,
                           types[t] == TSR_DTYPE_F16 ? 1e-3 : 2e-3, 1);
                scale_floor = 1e-6;
                tensor_free(w), tensor_free(x), tensor_free(ids), tensor_free(oa), tensor_free(or_);
            }
    /* an id out of range: compute fails, nothing is read through it */
    tensor *w = tensor_new(TSR_DTYPE_Q8_0, 64, 4, 3, 1), *x = tensor_new(TSR_DTYPE_F32, 64, 1, 2, 1);
    tensor *ids = tensor_new(TSR_DTYPE_I32, 2, 2, 1, 1), *o = tensor_new(TSR_DTYPE_F32, 4, 2, 2, 1);
    const int32_t bad[4] = {0, 2, 1, 3};
    memcpy(ids->mem, bad, sizeof bad);
    tsr_node n = make_node(TSR_OP_MUL_MAT_ID, 3, &w->t, &x->t, &ids->t, NULL);
    n.dst = &o->t;
    if (queue->api->compute(queue, &n, 1) != TSR_ERR_INVALID) ADD_FAILURE("MUL_MAT_ID with expert 3 of 3 was not refused");
    else printf("ok   MUL_MAT_ID expert id out of range is an error\n");
    tensor_free(w), tensor_free(x), tensor_free(ids), tensor_free(o);
}

static void test_get_rows(void) {
    for (int t = 0; t < N_WEIGHT_TYPES; t++) {
        int32_t wt = weight_types[t];
        int64_t K = tsr_dtype_block_size(wt) == 256 ? 512 : 96;
        tensor *w = tensor_new(wt, K, 11, 1, 1);
        tensor *idx = tensor_new(TSR_DTYPE_I32, 5, 1, 1, 1);
        int32_t rows[5] = {3, 0, 10, 3, 7};
        memcpy(idx->mem, rows, sizeof rows);
        tensor *oa = tensor_new(TSR_DTYPE_F32, K, 5, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, K, 5, 1, 1);
        char what[96];
        snprintf(what, sizeof what, "GET_ROWS %s", dtype_name(wt));
        check_node(what, make_node(TSR_OP_GET_ROWS, 2, &w->t, &idx->t, NULL, NULL), oa, or_, 1e-6, 1);
        tensor_free(w), tensor_free(idx), tensor_free(oa), tensor_free(or_);
    }
}

static void test_elementwise(void) {
    static const int64_t shapes[][4] = {{17, 3, 2, 1}, {256, 33, 1, 1}, {1, 5, 3, 2}};
    for (size_t s = 0; s < 3; s++) {
        const int64_t *sh = shapes[s];
        tensor *a = tensor_new(TSR_DTYPE_F32, sh[0], sh[1], sh[2], sh[3]);
        tensor *b = tensor_new(TSR_DTYPE_F32, sh[0], sh[1], sh[2], sh[3]);
        tensor *bb = tensor_new(TSR_DTYPE_F32, sh[0], 1, sh[2], 1); /* broadcast */
        tensor *oa = tensor_new(TSR_DTYPE_F32, sh[0], sh[1], sh[2], sh[3]);
        tensor *or_ = tensor_new(TSR_DTYPE_F32, sh[0], sh[1], sh[2], sh[3]);
        char what[96];
        int ops[] = {TSR_OP_ADD, TSR_OP_MUL};
        const char *names[] = {"ADD", "MUL"};
        for (int o = 0; o < 2; o++) {
            snprintf(what, sizeof what, "%s [%lld,%lld,%lld,%lld]", names[o], (long long)sh[0], (long long)sh[1],
                     (long long)sh[2], (long long)sh[3]);
            check_node(what, make_node(ops[o], 2, &a->t, &b->t, NULL, NULL), oa, or_, 1e-6, 1);
            snprintf(what, sizeof what, "%s broadcast src1 [%lld,1,%lld,1]", names[o], (long long)sh[0],
                     (long long)sh[2]);
            check_node(what, make_node(ops[o], 2, &a->t, &bb->t, NULL, NULL), oa, or_, 1e-6, 1);
        }
        tsr_node n = make_node(TSR_OP_SCALE, 1, &a->t, NULL, NULL, NULL);
        n.fparams[TSR_SCALE_F_SCALE] = 0.125f;
        n.fparams[TSR_SCALE_F_BIAS] = 0.5f;
        check_node("SCALE", n, oa, or_, 1e-6, 1);
        check_node("SILU", make_node(TSR_OP_SILU, 1, &a->t, NULL, NULL, NULL), oa, or_, 1e-5, 1);
        check_node("GELU", make_node(TSR_OP_GELU, 1, &a->t, NULL, NULL, NULL), oa, or_, 1e-5, 1);
        check_node("GELU_ERF", make_node(TSR_OP_GELU_ERF, 1, &a->t, NULL, NULL, NULL), oa, or_, 1e-6, 1);
        check_node("SWIGLU", make_node(TSR_OP_SWIGLU, 2, &a->t, &b->t, NULL, NULL), oa, or_, 1e-5, 1);
        /* gpt-oss's alpha and limit, and a limit of 0.5 that both clamps meet
         * (gate and up are in [-1, 1)) */
        for (int lim = 0; lim < 2; lim++) {
            n = make_node(TSR_OP_SWIGLU_OAI, 2, &a->t, &b->t, NULL, NULL);
            tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = 1.702f, .limit = lim ? 0.5f : 7.0f},
                                      n.iparams, n.fparams);
            check_node(lim ? "SWIGLU_OAI limit 0.5" : "SWIGLU_OAI", n, oa, or_, 1e-5, 1);
        }
        n = make_node(TSR_OP_RMS_NORM, 1, &a->t, NULL, NULL, NULL);
        n.fparams[TSR_NORM_F_EPS] = 1e-5f;
        check_node("RMS_NORM", n, oa, or_, 1e-5, 1);
        n.op = TSR_OP_NORM;
        check_node("NORM", n, oa, or_, 1e-4, 1);
        tensor_free(a), tensor_free(b), tensor_free(bb), tensor_free(oa), tensor_free(or_);
    }
    /* a permuted (non-contiguous) source */
    tensor *a = tensor_new(TSR_DTYPE_F32, 8, 6, 1, 1);
    tsr_tensor av = view_swap(a, 0, 1);
    tensor *oa = tensor_new(TSR_DTYPE_F32, 6, 8, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, 6, 8, 1, 1);
    tsr_node n = make_node(TSR_OP_RMS_NORM, 1, &av, NULL, NULL, NULL);
    n.fparams[TSR_NORM_F_EPS] = 1e-6f;
    check_node("RMS_NORM transposed src", n, oa, or_, 1e-5, 1);
    check_node("SILU transposed src", make_node(TSR_OP_SILU, 1, &av, NULL, NULL, NULL), oa, or_, 1e-5, 1);
    check_node("GELU_ERF transposed src", make_node(TSR_OP_GELU_ERF, 1, &av, NULL, NULL, NULL), oa, or_, 1e-6, 1);
    tensor_free(a), tensor_free(oa), tensor_free(or_);
}

/* GELU_ERF's erf (cpu_rows.h) on both of its halves (|x / sqrt 2| below
 * and above 1), its clamp past 4 and the special values, row (contiguous)
 * and element (transposed) paths alike: within 1e-6 of ref's erff. */
static void test_gelu_erf_range(void) {
    enum { N = 4096 };
    tensor *a = tensor_new(TSR_DTYPE_F32, N, 2, 1, 1);
    tensor *oa = tensor_new(TSR_DTYPE_F32, N, 2, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, N, 2, 1, 1);
    float *x = a->t.data;
    for (int i = 0; i < 2 * N; i++) x[i] = -9.0f + 18.0f * (float)i / (2 * N - 1);
    const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1.41421354f, -1.41421354f, 5.6568542f, -5.6568542f,
                             INFINITY, -INFINITY, NAN, 3e38f, -3e38f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[i * 97] = special[i];
    check_node("GELU_ERF over [-9, 9] and specials", make_node(TSR_OP_GELU_ERF, 1, &a->t, NULL, NULL, NULL), oa,
               or_, 1e-6, 0);
    tsr_tensor av = view_swap(a, 0, 1);
    tensor *ta = tensor_new(TSR_DTYPE_F32, 2, N, 1, 1), *tr = tensor_new(TSR_DTYPE_F32, 2, N, 1, 1);
    check_node("GELU_ERF over [-9, 9] transposed", make_node(TSR_OP_GELU_ERF, 1, &av, NULL, NULL, NULL), ta, tr,
               1e-6, 0);
    tensor_free(a), tensor_free(oa), tensor_free(or_), tensor_free(ta), tensor_free(tr);
}

/* DELTA_NET (ABI 1.5): threads split the heads of all sequences; a
 * prompt (T 7) and a token (T 1), two sequences, 8 v heads over 2 q/k
 * heads both ways, Dv 80 (past the kernel's blocks of 64). A is made
 * negative (a decay below 1, as models have it). */
static void test_delta_net(void) {
    static const int64_t shapes[][6] = {{16, 16, 8, 2, 7, 2}, {8, 80, 4, 2, 1, 1}, {32, 24, 6, 3, 5, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int tiled = 0; tiled < 2; tiled++) {
            const int64_t Dk = shapes[i][0], Dv = shapes[i][1], H = shapes[i][2], Hk = shapes[i][3];
            const int64_t T = shapes[i][4], S = shapes[i][5], n_out = Dv * H * T * S + Dv * Dk * H * S;
            tensor *st = tensor_new(TSR_DTYPE_F32, Dv, Dk, H, S);
            tensor *x = tensor_new(TSR_DTYPE_F32, 2 * Hk * Dk + H * Dv, T, S, 1);
            tensor *gt = tensor_new(TSR_DTYPE_F32, H, 2, T, S), *a = tensor_new(TSR_DTYPE_F32, H, 1, 1, 1);
            for (int64_t h = 0; h < H; h++) ((float *)a->mem)[h] = -fabsf(((float *)a->mem)[h]) - 0.1f;
            tensor *oa = tensor_new(TSR_DTYPE_F32, n_out, 1, 1, 1), *or_ = tensor_new(TSR_DTYPE_F32, n_out, 1, 1, 1);
            tsr_node n = make_node(TSR_OP_DELTA_NET, 4, &st->t, &x->t, &gt->t, &a->t);
            tsr_delta_net_params_put(&(tsr_delta_net_params){.eps = 1e-6f, .scale = 1.0f / sqrtf((float)Dk),
                                                             .kv_tiled = tiled},
                                     n.iparams, n.fparams);
            char what[96];
            snprintf(what, sizeof what, "DELTA_NET Dk%lld Dv%lld H%lld/%lld T%lld S%lld%s", (long long)Dk,
                     (long long)Dv, (long long)H, (long long)Hk, (long long)T, (long long)S, tiled ? " tiled" : "");
            check_node(what, n, oa, or_, 1e-5, 1);
            tensor_free(st), tensor_free(x), tensor_free(gt), tensor_free(a), tensor_free(oa), tensor_free(or_);
        }
}

static void test_rope(void) {
    for (int mode = 0; mode <= 2; mode += 2) {
        for (int with_ff = 0; with_ff < 2; with_ff++) {
            const int64_t hd = 64, nh = 3, nt = 5;
            tensor *x = tensor_new(TSR_DTYPE_F32, hd, nh, nt, 1);
            tensor *pos = tensor_new(TSR_DTYPE_I32, nt, 1, 1, 1);
            int32_t p[5] = {0, 1, 17, 300, 2047};
            memcpy(pos->mem, p, sizeof p);
            tensor *ff = tensor_new(TSR_DTYPE_F32, 24, 1, 1, 1);
            for (int i = 0; i < 24; i++) ((float *)ff->mem)[i] = 1.0f + (float)i * 0.25f;
            tensor *oa = tensor_new(TSR_DTYPE_F32, hd, nh, nt, 1), *or_ = tensor_new(TSR_DTYPE_F32, hd, nh, nt, 1);
            tsr_node n = make_node(TSR_OP_ROPE, with_ff ? 3 : 2, &x->t, &pos->t, with_ff ? &ff->t : NULL, NULL);
            const tsr_rope_params rp = {.n_dims = with_ff ? 48 : 64, /* n_dims < head_dim with factors */
                                        .mode = mode, .n_ctx_orig = 4096, .freq_base = 10000.0f,
                                        .freq_scale = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f,
                                        .beta_slow = 1.0f};
            tsr_rope_params_put(&rp, n.iparams, n.fparams);
            char what[96];
            snprintf(what, sizeof what, "ROPE %s%s", mode ? "neox" : "normal", with_ff ? " freq factors, 48/64 dims" : "");
            check_node(what, n, oa, or_, 1e-4, 0);
            tensor_free(x), tensor_free(pos), tensor_free(ff), tensor_free(oa), tensor_free(or_);
        }
    }
}

static void test_soft_max(void) {
    const int64_t nkv = 37, nq = 5, nh = 4;
    tensor *a = tensor_new(TSR_DTYPE_F32, nkv, nq, nh, 1);
    int32_t mts[] = {TSR_DTYPE_F32, TSR_DTYPE_F16};
    for (int m = -1; m < 2; m++) {
        tensor *mask = NULL;
        if (m >= 0) {
            float *mf = malloc(nkv * 8 * 4);
            for (int64_t i = 0; i < 8; i++) /* causal-ish: -inf beyond position 30 + row */
                for (int64_t j = 0; j < nkv; j++) mf[i * nkv + j] = j > 30 + i ? -INFINITY : 0.1f * frand();
            mask = tensor_new(mts[m], nkv, 8, 1, 1);
            if (mts[m] == TSR_DTYPE_F32) memcpy(mask->mem, mf, nkv * 8 * 4);
            else dtype_traits_get(TSR_DTYPE_F16)->from_f32(mf, mask->mem, nkv * 8);
            free(mf);
        }
        tensor *oa = tensor_new(TSR_DTYPE_F32, nkv, nq, nh, 1), *or_ = tensor_new(TSR_DTYPE_F32, nkv, nq, nh, 1);
        tsr_node n = make_node(TSR_OP_SOFT_MAX, mask ? 2 : 1, &a->t, mask ? &mask->t : NULL, NULL, NULL);
        n.fparams[TSR_SOFT_MAX_F_SCALE] = 0.125f;
        char what[64];
        snprintf(what, sizeof what, "SOFT_MAX mask %s", m < 0 ? "none" : dtype_name(mts[m]));
        check_node(what, n, oa, or_, 1e-5, 1);
        tensor_free(mask), tensor_free(oa), tensor_free(or_);
    }
    tensor_free(a);
}

static void test_cpy(void) {
    int32_t ft[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16};
    for (int s = 0; s < 3; s++)
        for (int d = 0; d < 3; d++) {
            tensor *a = tensor_new(ft[s], 33, 4, 2, 1);
            tensor *oa = tensor_new(ft[d], 33, 4, 2, 1), *or_ = tensor_new(ft[d], 33, 4, 2, 1);
            char what[64];
            snprintf(what, sizeof what, "CPY %s -> %s", dtype_name(ft[s]), dtype_name(ft[d]));
            check_node(what, make_node(TSR_OP_CPY, 1, &a->t, NULL, NULL, NULL), oa, or_, 1e-6, 1);
            tensor_free(a), tensor_free(oa), tensor_free(or_);
        }
    /* transposed source into a reshaped destination */
    tensor *a = tensor_new(TSR_DTYPE_F32, 6, 10, 1, 1);
    tsr_tensor av = view_swap(a, 0, 1);
    tensor *oa = tensor_new(TSR_DTYPE_F16, 60, 1, 1, 1), *or_ = tensor_new(TSR_DTYPE_F16, 60, 1, 1, 1);
    check_node("CPY F32 transposed -> F16 flat", make_node(TSR_OP_CPY, 1, &av, NULL, NULL, NULL), oa, or_, 1e-6, 1);
    tensor_free(a), tensor_free(oa), tensor_free(or_);
    for (int t = 3; t < N_WEIGHT_TYPES; t++) {
        int64_t K = tsr_dtype_block_size(weight_types[t]) == 256 ? 256 : 64;
        tensor *q = tensor_new(weight_types[t], K, 3, 1, 1);
        tensor *o1 = tensor_new(TSR_DTYPE_F32, K, 3, 1, 1), *o2 = tensor_new(TSR_DTYPE_F32, K, 3, 1, 1);
        char what[64];
        snprintf(what, sizeof what, "CPY %s -> F32", dtype_name(weight_types[t]));
        check_node(what, make_node(TSR_OP_CPY, 1, &q->t, NULL, NULL, NULL), o1, o2, 1e-6, 1);
        tensor_free(q), tensor_free(o1), tensor_free(o2);
    }
}

static void test_concat_argmax(void) {
    for (int dim = 0; dim < 3; dim++) {
        int64_t sa[4] = {5, 3, 2, 1}, sb[4] = {5, 3, 2, 1}, sd[4] = {5, 3, 2, 1};
        sb[dim] = 4;
        sd[dim] = sa[dim] + sb[dim];
        tensor *a = tensor_new(TSR_DTYPE_F32, sa[0], sa[1], sa[2], sa[3]);
        tensor *b = tensor_new(TSR_DTYPE_F32, sb[0], sb[1], sb[2], sb[3]);
        tensor *oa = tensor_new(TSR_DTYPE_F32, sd[0], sd[1], sd[2], sd[3]);
        tensor *or_ = tensor_new(TSR_DTYPE_F32, sd[0], sd[1], sd[2], sd[3]);
        tsr_node n = make_node(TSR_OP_CONCAT, 2, &a->t, &b->t, NULL, NULL);
        n.iparams[TSR_CONCAT_I_DIM] = dim;
        char what[64];
        snprintf(what, sizeof what, "CONCAT dim %d", dim);
        check_node(what, n, oa, or_, 0.0, 1);
        tensor_free(a), tensor_free(b), tensor_free(oa), tensor_free(or_);
    }
    tensor *a = tensor_new(TSR_DTYPE_F32, 300, 7, 1, 1);
    tensor *oa = tensor_new(TSR_DTYPE_I32, 7, 1, 1, 1), *or_ = tensor_new(TSR_DTYPE_I32, 7, 1, 1, 1);
    check_node("ARGMAX", make_node(TSR_OP_ARGMAX, 1, &a->t, NULL, NULL, NULL), oa, or_, 0.0, 0);
    tensor_free(a), tensor_free(oa), tensor_free(or_);
}

#include "kv_ops_tests.h"

/* Malformed nodes are declined; a bad index is an error status. */
static void test_bad_input(void) {
    tensor *w = tensor_new(TSR_DTYPE_Q4_0, 64, 4, 1, 1), *x = tensor_new(TSR_DTYPE_F32, 32, 2, 1, 1);
    tensor *o = tensor_new(TSR_DTYPE_F32, 4, 2, 1, 1);
    tsr_node n = make_node(TSR_OP_MUL_MAT, 2, &w->t, &x->t, NULL, NULL);
    n.dst = &o->t;
    if (device->api->supports_op(device, &n)) {
        ADD_FAILURE("supports_op accepted MUL_MAT with K 64 vs 32");
    }
    n.op = TSR_OP_COUNT + 3;
    if (device->api->supports_op(device, &n)) {
        ADD_FAILURE("supports_op accepted an unknown op");
    }
    tensor *tab = tensor_new(TSR_DTYPE_F32, 8, 4, 1, 1), *idx = tensor_new(TSR_DTYPE_I32, 2, 1, 1, 1);
    tensor *out = tensor_new(TSR_DTYPE_F32, 8, 2, 1, 1);
    int32_t bad[2] = {1, 99};
    memcpy(idx->mem, bad, sizeof bad);
    tsr_node g = make_node(TSR_OP_GET_ROWS, 2, &tab->t, &idx->t, NULL, NULL);
    g.dst = &out->t;
    if (queue->api->compute(queue, &g, 1) == TSR_OK) {
        ADD_FAILURE("GET_ROWS with row 99 of 4 returned OK");
    } else {
        printf("ok   GET_ROWS out-of-range index is an error\n");
    }
    /* the host's abort flag stops a node list */
    static volatile int abort_now = 1;
    bad[1] = 2;
    memcpy(idx->mem, bad, sizeof bad);
    host.abort_flag = &abort_now;
    tsr_status st = queue->api->compute(queue, &g, 1);
    host.abort_flag = NULL;
    if (st != TSR_ERR_ABORTED) {
        ADD_FAILURE("compute with the abort flag raised returned %d, not TSR_ERR_ABORTED", st);
    } else {
        printf("ok   abort flag -> TSR_ERR_ABORTED\n");
    }
    tensor_free(w), tensor_free(x), tensor_free(o), tensor_free(tab), tensor_free(idx), tensor_free(out);
}

/* A tensor description without memory: supports_op never reads data. */
static tsr_tensor shape_only(int32_t dtype, int64_t n0, int64_t n1, int64_t n2) {
    tsr_tensor t = {.dtype = dtype, .ne = {n0, n1, n2, 1}, .name = "t"};
    set_strides(&t);
    return t;
}

/* supports_op declines node and says why through tsr_host.decline, with
 * want in the reason. */
static void expect_declined(const char *what, const tsr_node *node, const char *want) {
    declined[0] = 0;
    int32_t yes = device->api->supports_op(device, node);
    int ok = !yes && strstr(declined, want) != NULL;
    printf("%s decline %-36s '%s'\n", ok ? "ok  " : "FAIL", what, declined);
    EXPECT(ok, "%s (line above)", what);
}

/* Every refusal of a well-formed node comes with its reason (shown by
 * tessera run --explain), and so does a malformed node's. */
static void test_decline_reasons(void) {
    tsr_tensor x = shape_only(TSR_DTYPE_F32, 64, 3, 2), o = shape_only(TSR_DTYPE_F32, 64, 3, 2);
    tsr_tensor pos = shape_only(TSR_DTYPE_I32, 2, 1, 1);
    tsr_node n = make_node(TSR_OP_ROPE, 2, &x, &pos, NULL, NULL);
    n.dst = &o;
    const tsr_rope_params yarn = {.n_dims = 64, .freq_base = 10000.0f, .freq_scale = 1.0f, .ext_factor = 1.0f,
                                  .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    tsr_rope_params_put(&yarn, n.iparams, n.fparams);
    expect_declined("ROPE with YaRN", &n, "YaRN (ext_factor 1)");
    n = make_node(TSR_OP_SOFT_MAX, 1, &x, NULL, NULL, NULL);
    n.dst = &o;
    n.fparams[TSR_SOFT_MAX_F_SCALE] = 1.0f;
    n.fparams[TSR_SOFT_MAX_F_MAX_BIAS] = 8.0f;
    expect_declined("SOFT_MAX with ALiBi", &n, "ALiBi (max_bias 8)");
    tsr_tensor w = shape_only(TSR_DTYPE_Q8_1, 64, 4, 1), mo = shape_only(TSR_DTYPE_F32, 4, 3, 2);
    n = make_node(TSR_OP_MUL_MAT, 2, &w, &x, NULL, NULL);
    n.dst = &mo;
    expect_declined("MUL_MAT of Q8_1 weights", &n, "dot kernel for Q8_1 weights");
    tsr_tensor h = shape_only(TSR_DTYPE_F16, 64, 3, 2), q8 = shape_only(TSR_DTYPE_Q8_0, 64, 3, 2);
    n = make_node(TSR_OP_CPY, 1, &h, NULL, NULL, NULL);
    n.dst = &q8;
    expect_declined("CPY F16 into Q8_0", &n, "only packed F32 is converted into Q8_0 (src0 F16)");
    tsr_tensor w4 = shape_only(TSR_DTYPE_Q4_0, 64, 4, 1), xs = shape_only(TSR_DTYPE_F32, 32, 3, 2);
    n = make_node(TSR_OP_MUL_MAT, 2, &w4, &xs, NULL, NULL);
    n.dst = &mo;
    expect_declined("malformed MUL_MAT (K 64 vs 32)", &n, "MUL_MAT 't': K differs: weight 64, activations 32");
    n.op = TSR_OP_COUNT + 3;
    expect_declined("unknown op", &n, "is not a computable op");
}

/* What each level needs from the CPU (space-separated feature names as the
 * device lists them) and the kernels it must run. */
static const struct {
    const char *level, *needs, *kernels;
} levels[] = {
    {"avx2", "", "(avx2 kernels)"},
    {"avxvnni", "avxvnni", "(avxvnni kernels)"},
    {"avx512", "avx512f avx512bw avx512vl", "(avx512"}, /* with VNNI where present */
    {"avx512-novnni", "avx512f avx512bw avx512vl", "(avx512 kernels)"},
    {"neon", "", "(neon kernels)"},
    {"dotprod", "asimddp", "(dotprod kernels)"},
    {"i8mm", "asimddp i8mm", "(i8mm kernels)"},
};

/* 1 if every name in the space-separated list needs is a word of have. */
static int has_features(const char *have, const char *needs) {
    char list[128];
    snprintf(list, sizeof list, "%s", needs);
    for (char *save = NULL, *w = strtok_r(list, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        size_t n = strlen(w);
        const char *p = have;
        int found = 0;
        while (!found && (p = strstr(p, w)) != NULL) {
            found = (p == have || p[-1] == ' ') && (p[n] == 0 || p[n] == ' ');
            p += n;
        }
        if (!found) return 0;
    }
    return 1;
}

/* Usage: test_cpu_ops PLUGIN [LEVEL] (PLUGIN: cpu-avx or cpu-neon): the plugin of
 * $TESSERA_BUILD_ROOT started, at LEVEL (a level this CPU lacks skips). */
static void *plugin_so;

FIXTURE(setup) {
    REQUIRE(harness_argc() == 2 || harness_argc() == 3,
            "usage: test_cpu_ops PLUGIN [LEVEL]   (PLUGIN: cpu-avx or cpu-neon)");
    const char *name = harness_arg(1), *level = harness_arg(2);
    const char *root = getenv("TESSERA_BUILD_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/libtessera-backend-%s.so", root ? root : ".", name);
    plugin_so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(plugin_so != NULL, "cannot load %s: %s", path, dlerror());
    tsr_plugin_entry_fn entry = (tsr_plugin_entry_fn)dlsym(plugin_so, TSR_PLUGIN_ENTRY_SYMBOL);
    plugin = entry ? entry(TSR_ABI_VERSION) : NULL;
    REQUIRE(plugin != NULL, "%s: no tsr_plugin_entry or it refused ABI %u", path, TSR_ABI_VERSION);
    REQUIRE(strcmp(plugin->name, name) == 0, "%s calls itself '%s'", path, plugin->name);
    REQUIRE(entry(TSR_ABI_VERSION + (1u << 16)) == NULL, "the plugin accepted a host of another major ABI");
    char reason[256] = "";
    tsr_status st = plugin->init(&host, reason, sizeof reason);
    if (st != TSR_OK || plugin->device_count() < 1) harness_skip("%s offers no device here: %s", name, reason);
    device = plugin->device_get(0);
    tsr_device_info info = {.struct_size = sizeof info};
    device->api->get_info(device, &info);
    printf("device: %s; features: %s; level %s\n", info.description, info.features, level ? level : "(best)");
    for (size_t i = 0; level && i < sizeof levels / sizeof levels[0]; i++) {
        if (strcmp(levels[i].level, level) != 0) continue;
        if (!has_features(info.features, levels[i].needs))
            harness_skip("level %s needs '%s'; this CPU has '%s'", level, levels[i].needs, info.features);
        REQUIRE(strstr(info.description, levels[i].kernels) != NULL, "level %s should run %s but the device says '%s'",
                level, levels[i].kernels, info.description);
    }
    REQUIRE(info.kind == TSR_DEVICE_CPU && info.host_visible && info.reads_host_memory,
            "device info: kind %d host_visible %d reads_host_memory %d", info.kind, info.host_visible,
            info.reads_host_memory);
    REQUIRE(device->api->queue_create(device, &queue) == TSR_OK, "queue_create");
    return 0;
}

FIXTURE(teardown) {
    queue->api->destroy(queue);
    plugin->shutdown();
    dlclose(plugin_so);
    return 0;
}

/* Every op on one thread. */
TEST(test_one_thread) {
    host.n_threads = 1;
    test_mul_mat();
    test_mul_mat_model_shapes();
    test_mul_mat_decode_bits();
    test_mul_mat_repacked();
    test_mul_mat_iq();
    test_mul_mat_id();
    test_flash_attn();
    test_get_rows();
    test_elementwise();
    test_gelu_erf_range();
    test_rope();
    test_soft_max();
    test_cpy();
    test_concat_argmax();
    test_delta_net();
    test_cpy_to_kv_types();
    test_bad_input();
    test_decline_reasons();
}

/* The ops that split work differently on several threads (the rest split
 * rows the same way; once is enough); FLASH_ATTN splits cells across
 * threads when units are few. */
TEST(test_three_threads) {
    host.n_threads = 3;
    test_mul_mat();
    test_mul_mat_model_shapes();
    test_mul_mat_decode_bits();
    test_mul_mat_repacked();
    test_mul_mat_id();
    test_flash_attn();
    test_delta_net();
}

HARNESS_MAIN_GROUP("cpu ops", setup, teardown, HARNESS_TEST(test_one_thread), HARNESS_TEST(test_three_threads))
