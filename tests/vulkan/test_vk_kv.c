/*
 * A quantized KV cache on a Vulkan device, step by step as the model's
 * attention runs it (core/src/model/blocks.c: blk_attention with flash
 * attention), in one compute call per case:
 *   1. CPY this batch's K and V rows (F32 [D*H_kv, T]) into cells
 *      kv_head.. of block-type caches [D*H_kv, cells] (views at a row offset,
 *      starting mid-word: a block shares its first or last 16-bit word with
 *      the neighbour's);
 *   2. q (F32 [D, H, T]) through Q8_0 and back, as the graph rounds q for a
 *      block-type K cache (blocks.c: round_like_cache);
 *   3. FLASH_ATTN over the caches' strided views [D, n_kv, H_kv] (rows of
 *      all heads; cells before kv_head filled earlier), q permuted to
 *      [D, T, H], with a causal mask or none.
 * The same nodes run on ref over host copies of the same inputs. Checked:
 *   - the quantized cells and q's Q8_0 bytes equal ref's (the quantizers are
 *     ref's operation for operation) on a CPU implementation, where division
 *     is correctly rounded; elsewhere at most 1% of the blocks may differ;
 *   - every cache byte outside the new cells, and the guard bytes before
 *     the caches, are untouched;
 *   - the attention output is within 1e-4 (absolute, plus 1e-4 relative) of
 *     ref's computed from the device's own cache and q bytes: the dequantized
 *     values are ref's, only the f32 vs double sums differ (measured: a few
 *     1e-7);
 *   - supports_op accepts every node.
 * Shapes: head sizes 64, 128, 256 and 32; GQA 4/2, 8/1, 9/3 and 6/3; n_kv 45, 71,
 * 3, 132 and 1 (not multiples of the 64-key chunk), and 2300 at head size 64
 * (lavapipe ends a shader's loops after 65535 iterations in all: up to
 * 64400 are used there, and 2400 keys are declined on a CPU implementation); prompt
 * batches and single-token decodes; F16 and F32 masks and none. K/V types:
 * each of the KV cache's block types for both, F16, and two mixed pairs.
 * Exit 77 when the machine has no Vulkan device.
 *
 * usage: test_vk_kv PLUGIN.so [K/V]   (e.g. Q8_0/Q4_0: only that pair; the
 * declines are checked in every run)
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include <tessera/plugin.h>
#include <tessera/plugin_util.h>

#include "../plugin_log.h"
#include "vk_test_open.h"

#include "ref/ref.h"
#include "tensor/dtype.h"

static char g_decline[512];

static void on_decline(const tsr_node *node, const char *reason) {
    (void)node;
    snprintf(g_decline, sizeof g_decline, "%s", reason ? reason : "");
}

static volatile int g_abort;
static const tsr_host g_host = {PLUGIN_TEST_HOST_FIELDS(&g_abort, 1), .decline = on_decline};

static tsr_device *g_dev;
static tsr_queue *g_queue;
static bool g_exact; /* a CPU implementation: quantized bytes must be ref's */

/* ------------------------------------------------------------ the cases */

typedef struct shape {
    int64_t D, H, H_kv, kv_head, T;
    int mask; /* -1 none, else its dtype (causal) */
} shape;

static const shape g_shapes[] = {
    {64, 4, 2, 40, 5, TSR_DTYPE_F16},   /* a prompt batch after 40 cells */
    {128, 8, 1, 70, 1, TSR_DTYPE_F32},  /* a decode step */
    {256, 2, 2, 0, 3, -1},              /* the first batch, no mask */
    {64, 9, 3, 130, 2, TSR_DTYPE_F16},  /* SmolLM2's heads, n_kv 132 */
    {32, 6, 3, 0, 1, TSR_DTYPE_F16},    /* one cell */
    {64, 1, 1, 2299, 1, TSR_DTYPE_F16}, /* near a CPU implementation's loop budget */
};

/* Deterministic values in [-1, 1). */
static float rnd(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* A tensor [n0, n1, n2] with the given strides at off (buffer or host data). */
static tsr_tensor tensor(int32_t dtype, int64_t n0, int64_t n1, int64_t n2, int64_t nb1, int64_t nb2,
                         uint64_t off, const char *name) {
    tsr_tensor t = {.dtype = dtype, .ne = {n0, n1, n2, 1}, .offset = off, .name = name};
    t.nb[0] = tsr_dtype_block_bytes(dtype);
    t.nb[1] = nb1;
    t.nb[2] = nb2;
    t.nb[3] = nb2 * n2;
    return t;
}

/* Byte offsets of everything in one buffer (each a multiple of 4, but the
 * caches start 2 bytes past one: mid-word). */
typedef struct layout {
    uint64_t k_row, v_row, cells;
    uint64_t guard, kc, vc, k_new, v_new, q, q8, q2, mask, out, size;
} layout;

static uint64_t up4(uint64_t x) { return (x + 63) / 64 * 64; }

static layout plan(const shape *s, int32_t kt, int32_t vt) {
    layout l = {0};
    const int64_t n_embd = s->D * s->H_kv, n_kv = s->kv_head + s->T;
    l.k_row = tsr_dtype_row_bytes(kt, n_embd);
    l.v_row = tsr_dtype_row_bytes(vt, n_embd);
    l.cells = (uint64_t)n_kv + 3; /* cells past n_kv stay as they were */
    l.guard = 0;
    l.kc = 66;
    l.vc = up4(l.kc + l.cells * l.k_row) + 2;
    l.k_new = up4(l.vc + l.cells * l.v_row);
    l.v_new = l.k_new + up4((uint64_t)(n_embd * s->T) * 4);
    l.q = l.v_new + up4((uint64_t)(n_embd * s->T) * 4);
    l.q8 = l.q + up4((uint64_t)(s->D * s->H * s->T) * 4);
    l.q2 = l.q8 + up4(tsr_dtype_row_bytes(TSR_DTYPE_Q8_0, s->D * s->H) * (uint64_t)s->T);
    l.mask = l.q2 + up4((uint64_t)(s->D * s->H * s->T) * 4);
    l.out = l.mask + up4((uint64_t)(n_kv * (s->T + 3)) * 4);
    l.size = l.out + up4((uint64_t)(s->D * s->H * s->T) * 4);
    return l;
}

/* The case's inputs in host memory laid out as the buffer: random F32 for
 * the new rows and q, earlier cells quantized on the host (valid blocks),
 * a pattern in the guard bytes and in the cells after n_kv, the mask. */
static uint8_t *inputs(const shape *s, int32_t kt, int32_t vt, const layout *l, uint32_t seed) {
    uint8_t *m = calloc(1, l->size);
    assert_non_null(m);
    const int64_t n_embd = s->D * s->H_kv, n_kv = s->kv_head + s->T;
    for (uint64_t i = 0; i < l->size; i++) m[i] = (uint8_t)(i * 37u + 11u);
    float *row = malloc((size_t)n_embd * sizeof *row);
    assert_non_null(row);
    for (int64_t c = 0; c < s->kv_head; c++)
        for (int kv = 0; kv < 2; kv++) {
            for (int64_t i = 0; i < n_embd; i++) row[i] = rnd(&seed);
            uint8_t *dst = m + (kv ? l->vc + (uint64_t)c * l->v_row : l->kc + (uint64_t)c * l->k_row);
            assert_int_equal(dtype_quantize_row(kv ? vt : kt, row, dst, n_embd), 0);
        }
    free(row);
    float *f = (float *)(m + l->k_new);
    for (int64_t i = 0; i < n_embd * s->T; i++) f[i] = rnd(&seed);
    f = (float *)(m + l->v_new);
    for (int64_t i = 0; i < n_embd * s->T; i++) f[i] = rnd(&seed);
    f = (float *)(m + l->q);
    for (int64_t i = 0; i < s->D * s->H * s->T; i++) f[i] = rnd(&seed);
    /* causal: query i (position kv_head + i) sees cells 0..kv_head + i */
    for (int64_t i = 0; i < s->T + 3; i++)
        for (int64_t j = 0; j < n_kv; j++) {
            const float v = j <= s->kv_head + i ? 0.0f : -INFINITY;
            if (s->mask == TSR_DTYPE_F16) ((uint16_t *)(m + l->mask))[i * n_kv + j] = tsr_f32_to_fp16(v);
            else ((float *)(m + l->mask))[i * n_kv + j] = v;
        }
    return m;
}

/* The case's five nodes over tensors at the layout's offsets: in buffer b
 * (b != NULL) or in host memory at base. */
typedef struct graph5 {
    tsr_tensor k_new, v_new, k_dst, v_dst, q, q8, q2, qp, K, V, mask, out;
    tsr_node nodes[5];
} graph5;

static void build(graph5 *g, const shape *s, int32_t kt, int32_t vt, const layout *l, tsr_buffer *b,
                  uint8_t *base) {
    const int64_t D = s->D, H = s->H, Hkv = s->H_kv, T = s->T, n_embd = D * Hkv, n_kv = s->kv_head + T;
    const uint64_t kv0 = (uint64_t)s->kv_head;
    g->k_new = tensor(TSR_DTYPE_F32, n_embd, T, 1, n_embd * 4, n_embd * T * 4, l->k_new, "k");
    g->v_new = tensor(TSR_DTYPE_F32, n_embd, T, 1, n_embd * 4, n_embd * T * 4, l->v_new, "v");
    g->k_dst = tensor(kt, n_embd, T, 1, (int64_t)l->k_row, (int64_t)l->k_row * T, l->kc + kv0 * l->k_row, "k_cache_view");
    g->v_dst = tensor(vt, n_embd, T, 1, (int64_t)l->v_row, (int64_t)l->v_row * T, l->vc + kv0 * l->v_row, "v_cache_view");
    g->q = tensor(TSR_DTYPE_F32, D * H, T, 1, D * H * 4, D * H * T * 4, l->q, "q");
    const int64_t q8_row = (int64_t)tsr_dtype_row_bytes(TSR_DTYPE_Q8_0, D * H);
    g->q8 = tensor(TSR_DTYPE_Q8_0, D * H, T, 1, q8_row, q8_row * T, l->q8, "q_q8_0");
    g->q2 = tensor(TSR_DTYPE_F32, D * H, T, 1, D * H * 4, D * H * T * 4, l->q2, "q_rounded");
    g->qp = tensor(TSR_DTYPE_F32, D, T, H, D * H * 4, D * 4, l->q2, "q_permuted"); /* [D, T, H] */
    g->K = tensor(kt, D, n_kv, Hkv, (int64_t)l->k_row, (int64_t)tsr_dtype_row_bytes(kt, D), l->kc, "K");
    g->V = tensor(vt, D, n_kv, Hkv, (int64_t)l->v_row, (int64_t)tsr_dtype_row_bytes(vt, D), l->vc, "V");
    const int32_t mdt = s->mask < 0 ? TSR_DTYPE_F32 : s->mask;
    const int64_t mb = tsr_dtype_block_bytes(mdt);
    g->mask = tensor(mdt, n_kv, T + 3, 1, n_kv * mb, n_kv * (T + 3) * mb, l->mask, "mask");
    g->out = tensor(TSR_DTYPE_F32, D, H, T, D * 4, D * H * 4, l->out, "fattn");
    tsr_tensor *all[] = {&g->k_new, &g->v_new, &g->k_dst, &g->v_dst, &g->q, &g->q8,
                         &g->q2,    &g->qp,    &g->K,     &g->V,     &g->mask, &g->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        all[i]->buffer = b;
        if (!b) all[i]->data = base + all[i]->offset;
        if (!b) all[i]->offset = 0;
    }
    memset(g->nodes, 0, sizeof g->nodes);
    g->nodes[0] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->k_dst, .src = {&g->k_new}};
    g->nodes[1] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->v_dst, .src = {&g->v_new}};
    g->nodes[2] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->q8, .src = {&g->q}};
    g->nodes[3] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->q2, .src = {&g->q8}};
    g->nodes[4] = (tsr_node){.op = TSR_OP_FLASH_ATTN, .n_src = s->mask < 0 ? 3 : 4, .dst = &g->out,
                             .src = {&g->qp, &g->K, &g->V, s->mask < 0 ? NULL : &g->mask}};
    g->nodes[4].fparams[TSR_FLASH_ATTN_F_SCALE] = 1.0f / sqrtf((float)D);
}

/* Blocks of n bytes (bb each) that differ between a and b. */
static int64_t blocks_differ(const uint8_t *a, const uint8_t *b, uint64_t n, int64_t bb) {
    int64_t bad = 0;
    for (uint64_t o = 0; o < n; o += (uint64_t)bb) bad += memcmp(a + o, b + o, (size_t)bb) != 0;
    return bad;
}

/* The quantized bytes of [lo, hi): ref's exactly, or (not a CPU
 * implementation) at most 1% of the blocks off. */
static void check_quantized(const char *what, const uint8_t *got, const uint8_t *want, uint64_t lo, uint64_t hi,
                            int32_t dtype) {
    const int64_t bb = tsr_dtype_block_bytes(dtype);
    const int64_t bad = blocks_differ(got + lo, want + lo, hi - lo, bb), n = (int64_t)(hi - lo) / bb;
    if (bad) printf("  %s: %lld of %lld %s blocks differ from ref's\n", what, (long long)bad, (long long)n,
                    tsr_dtype_name(dtype));
    if (g_exact) assert_int_equal(bad, 0);
    else assert_true(bad * 100 <= n);
}

static void run_case(const shape *s, int32_t kt, int32_t vt, uint32_t seed) {
    const layout l = plan(s, kt, vt);
    const int64_t n_kv = s->kv_head + s->T, n_out = s->D * s->H * s->T;
    uint8_t *host = inputs(s, kt, vt, &l, seed);
    uint8_t *dev_bytes = malloc(l.size), *ref_in = malloc(l.size);
    assert_non_null(dev_bytes);
    assert_non_null(ref_in);

    /* device */
    tsr_buffer *b = NULL;
    assert_int_equal(g_dev->api->buffer_alloc(g_dev, l.size, &b), TSR_OK);
    assert_int_equal(g_queue->api->write(g_queue, b, 0, host, l.size), TSR_OK);
    graph5 dg;
    build(&dg, s, kt, vt, &l, b, NULL);
    for (int i = 0; i < 5; i++) {
        g_decline[0] = '\0';
        const int ok = g_dev->api->supports_op(g_dev, &dg.nodes[i]);
        if (!ok) printf("  node %d (%s) declined: %s\n", i, tsr_op_name(dg.nodes[i].op), g_decline);
        assert_true(ok);
    }
    assert_int_equal(g_queue->api->compute(g_queue, dg.nodes, 5), TSR_OK);
    assert_int_equal(g_queue->api->synchronize(g_queue), TSR_OK);
    assert_int_equal(g_queue->api->read(g_queue, b, 0, dev_bytes, l.size), TSR_OK);
    assert_int_equal(g_queue->api->synchronize(g_queue), TSR_OK);
    g_dev->api->buffer_free(g_dev, b);

    /* ref, the whole chain on the same inputs */
    graph5 rg;
    uint8_t *ref_bytes = malloc(l.size);
    assert_non_null(ref_bytes);
    memcpy(ref_bytes, host, l.size);
    build(&rg, s, kt, vt, &l, NULL, ref_bytes);
    assert_int_equal(ref_compute(rg.nodes, 5, NULL), TSR_OK);

    /* the new cells and q's Q8_0 bytes: ref's; all else in the caches as it was */
    const uint64_t kv0 = (uint64_t)s->kv_head, kv1 = (uint64_t)n_kv;
    check_quantized("K cells", dev_bytes, ref_bytes, l.kc + kv0 * l.k_row, l.kc + kv1 * l.k_row, kt);
    check_quantized("V cells", dev_bytes, ref_bytes, l.vc + kv0 * l.v_row, l.vc + kv1 * l.v_row, vt);
    check_quantized("q as Q8_0", dev_bytes, ref_bytes, l.q8,
                    l.q8 + tsr_dtype_row_bytes(TSR_DTYPE_Q8_0, s->D * s->H) * (uint64_t)s->T, TSR_DTYPE_Q8_0);
    assert_memory_equal(dev_bytes, host, l.kc + kv0 * l.k_row); /* guard and earlier K cells */
    assert_memory_equal(dev_bytes + l.kc + kv1 * l.k_row, host + l.kc + kv1 * l.k_row, l.vc + kv0 * l.v_row - (l.kc + kv1 * l.k_row));
    assert_memory_equal(dev_bytes + l.vc + kv1 * l.v_row, host + l.vc + kv1 * l.v_row, l.k_new - (l.vc + kv1 * l.v_row));

    /* attention: ref over the device's own cache and q bytes */
    memcpy(ref_in, dev_bytes, l.size);
    graph5 ag;
    build(&ag, s, kt, vt, &l, NULL, ref_in);
    assert_int_equal(ref_compute(&ag.nodes[4], 1, NULL), TSR_OK);
    const float *got = (const float *)(dev_bytes + l.out), *want = (const float *)(ref_in + l.out);
    double worst = 0.0, max_err = 0.0;
    int64_t at = -1;
    for (int64_t i = 0; i < n_out; i++) {
        const double e = fabs((double)got[i] - want[i]), r = e / (1e-4 + 1e-4 * fabs(want[i]));
        if (!(r <= worst)) {
            worst = r;
            at = i;
        }
        if (e > max_err) max_err = e;
    }
    printf("  D %lld H %lld/%lld n_kv %lld T %lld K %s V %s mask %s: attention max error %.3g\n",
           (long long)s->D, (long long)s->H, (long long)s->H_kv, (long long)n_kv, (long long)s->T,
           tsr_dtype_name(kt), tsr_dtype_name(vt), s->mask < 0 ? "none" : tsr_dtype_name(s->mask), max_err);
    if (!(worst <= 1.0))
        printf("  element %lld: %.9g, ref %.9g\n", (long long)at, (double)got[at], (double)want[at]);
    assert_true(worst <= 1.0);
    free(host);
    free(dev_bytes);
    free(ref_in);
    free(ref_bytes);
}

/* K and V types: each block type for both, F16, and mixed pairs. */
static const int32_t g_types[][2] = {
    {TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0}, {TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_0}, {TSR_DTYPE_Q4_1, TSR_DTYPE_Q4_1},
    {TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_0}, {TSR_DTYPE_Q5_1, TSR_DTYPE_Q5_1}, {TSR_DTYPE_IQ4_NL, TSR_DTYPE_IQ4_NL},
    {TSR_DTYPE_F16, TSR_DTYPE_F16},   {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0}, {TSR_DTYPE_F16, TSR_DTYPE_Q5_1},
};

static void test_types(void **state) {
    const int32_t *kv = *state;
    for (size_t s = 0; s < sizeof g_shapes / sizeof g_shapes[0]; s++)
        run_case(&g_shapes[s], kv[0], kv[1], 1000u + (uint32_t)s * 7919u + (uint32_t)kv[0] * 31u + (uint32_t)kv[1]);
}

/* Quantized destinations the shaders do not write are declined with a
 * reason (the CPU writes them). */
TEST(test_declines_k_quants) {
    tsr_buffer *b = NULL;
    assert_int_equal(g_dev->api->buffer_alloc(g_dev, 4096, &b), TSR_OK);
    tsr_tensor src = tensor(TSR_DTYPE_F32, 256, 1, 1, 1024, 1024, 0, "x");
    tsr_tensor dst = tensor(TSR_DTYPE_Q4_K, 256, 1, 1, 144, 144, 2048, "x_q4_k");
    src.buffer = dst.buffer = b;
    tsr_node n = {.op = TSR_OP_CPY, .n_src = 1, .dst = &dst, .src = {&src}};
    g_decline[0] = '\0';
    assert_false(g_dev->api->supports_op(g_dev, &n));
    assert_non_null(strstr(g_decline, "Q4_K"));
    g_dev->api->buffer_free(g_dev, b);
}

/* On a CPU implementation, FLASH_ATTN past the shader's loop budget is
 * declined (gallivm would end its loops early), within it accepted (run
 * only there: a GPU has no such budget). */
TEST(test_declines_long_attention) {
    const shape s = {64, 1, 1, 2399, 1, -1}, ok = {64, 1, 1, 2299, 1, -1};
    graph5 g;
    const layout l_ok = plan(&ok, TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0), l = plan(&s, TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0);
    uint8_t *mem = calloc(1, l.size); /* addresses only: supports_op reads no data */
    assert_non_null(mem);
    build(&g, &ok, TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0, &l_ok, NULL, mem);
    assert_true(g_dev->api->supports_op(g_dev, &g.nodes[4]));
    build(&g, &s, TSR_DTYPE_Q8_0, TSR_DTYPE_Q8_0, &l, NULL, mem);
    g_decline[0] = '\0';
    assert_false(g_dev->api->supports_op(g_dev, &g.nodes[4]));
    free(mem);
    printf("  2400 keys: %s\n", g_decline);
    assert_non_null(strstr(g_decline, "loop iterations"));
}

/* Usage: test_vk_kv PLUGIN.so [K/V]: every K/V type pair, or the one named. */
int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_vk_kv PLUGIN.so [K/V]\n");
        return 2;
    }
    vk_test_plugin vk = vk_test_open(argv[1], &g_host);
    g_dev = vk.dev;
    g_queue = vk.queue;
    tsr_device_info info = {.struct_size = sizeof info};
    if (g_dev->api->get_info(g_dev, &info) != TSR_OK) {
        printf("vulkan0: no device info\n");
        return 1;
    }
    g_exact = strstr(info.features, "cpu-implementation") != NULL;
    printf("vulkan0: %s [%s]: quantized bytes %s\n", info.description, info.features,
           g_exact ? "must equal ref's" : "may differ from ref's in 1% of the blocks");

    enum { N_TYPES = sizeof g_types / sizeof g_types[0] };
    struct CMUnitTest tests[N_TYPES + 2];
    char names[N_TYPES][64];
    int n = 0;
    for (int i = 0; i < N_TYPES; i++) {
        char pair[32];
        snprintf(pair, sizeof pair, "%s/%s", tsr_dtype_name(g_types[i][0]), tsr_dtype_name(g_types[i][1]));
        if (argc > 2 && strcmp(argv[2], pair)) continue;
        snprintf(names[n], sizeof names[n], "K/V %s", pair);
        tests[n] = (struct CMUnitTest)HARNESS_TEST(test_types);
        tests[n].name = names[n];
        tests[n++].initial_state = (void *)g_types[i];
    }
    if (argc > 2 && n == 0) {
        printf("no K/V pair %s in this test\n", argv[2]);
        return 2;
    }
    tests[n++] = (struct CMUnitTest)HARNESS_TEST(test_declines_k_quants);
    if (g_exact) tests[n++] = (struct CMUnitTest)HARNESS_TEST(test_declines_long_attention);
    const int rc = harness_run("vulkan-kv", tests, (size_t)n, NULL, NULL, argc, argv);
    vk_test_close(&vk);
    return rc;
}
