/*
 * RMS_NORM / NORM followed by the MUL of its result by a weight, fused into
 * one dispatch by the Vulkan plugin (backends/vulkan/vk_fused.c), in the
 * shapes the graph makes them (core/src/model/blocks.c: the norm, then the
 * MUL by its weight in place over the norm's rows) and in the ones where
 * the normalized rows are still read afterwards. Per case, in one compute:
 *   - the product equals, to the bit, the same two nodes run unfused on the
 *     same device (an unrelated node between them keeps them apart);
 *   - a node after them that reads the normalized rows sees them (the fused
 *     pass still stores them when the MUL is not in place);
 *   - both are within 1e-5 of ref's;
 *   - with profiling, the queue timed no MUL for a fused pair (one
 *     dispatch), and one per MUL with TESSERA_VULKAN_NO_FUSE=1 set.
 * Row sizes 300 and 2048 (not a multiple of the 128-invocation workgroup,
 * and TinyLlama's), 1 and 7 rows, weight [K] broadcast over rows.
 *
 * ROPE followed by the CPY of its result into a KV cache view (the new K
 * rows of a step, as blk_attention writes them), fused into one dispatch:
 *   - the cache's bytes (the rows written and their untouched neighbours)
 *     and the rotated rows equal, to the bit, the same pair run unfused (a
 *     SCALE between them) into a second cache;
 *   - both are within rounding of ref's (rope to 1e-5, then the cache
 *     dtype's rounding);
 *   - with profiling, the queue timed one CPY of the two pairs when fused,
 *     two with TESSERA_VULKAN_NO_FUSE=1 and for a Q8_0 cache (not fused).
 * Normal and NeoX pairs, partial rotation, frequency factors with YaRN,
 * the rope in place, one token (decoding) and several, F32/F16/BF16 caches.
 * Exit 77 when the machine has no Vulkan device or the device cannot time
 * its work (the dispatch count is then unobservable).
 *
 * usage: test_vk_fuse PLUGIN.so
 */
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

static volatile int g_abort;
static const tsr_host g_host = {PLUGIN_TEST_HOST_FIELDS(&g_abort, 1)};

static tsr_device *g_dev;
static tsr_queue *g_queue;
static bool g_fuse; /* TESSERA_VULKAN_NO_FUSE not set */

typedef struct fuse_case {
    int32_t norm_op; /* TSR_OP_RMS_NORM or TSR_OP_NORM */
    int64_t K, rows;
    bool in_place;   /* the MUL writes over the norm's rows (as the graph does) */
} fuse_case;

static const fuse_case g_cases[] = {
    {TSR_OP_RMS_NORM, 300, 7, true},  {TSR_OP_RMS_NORM, 300, 7, false}, {TSR_OP_RMS_NORM, 2048, 1, true},
    {TSR_OP_NORM, 300, 5, true},      {TSR_OP_NORM, 2048, 1, false},
};

/* Regions of the one buffer, in floats. */
enum { R_X, R_W, R_MID, R_OUT, R_SUM, R_MID2, R_OUT2, R_PAD, R_COUNT };

static tsr_tensor f32(int64_t n0, int64_t n1, uint64_t off, tsr_buffer *b, uint8_t *host, const char *name) {
    tsr_tensor t = {.dtype = TSR_DTYPE_F32, .ne = {n0, n1, 1, 1}, .buffer = b, .offset = b ? off : 0, .name = name};
    t.nb[0] = 4;
    t.nb[1] = 4 * n0;
    t.nb[2] = t.nb[3] = 4 * n0 * n1;
    t.data = host ? host + off : NULL;
    return t;
}

typedef struct graph {
    tsr_tensor x, w, mid, out, sum, mid2, out2, pad;
    tsr_node nodes[6];
} graph;

/* norm -> mul (fusable), add(mid, out) reading the rows after them, then
 * the same pair kept apart by a SCALE between them (unfused). */
static void build(graph *g, const fuse_case *c, const uint64_t off[R_COUNT], tsr_buffer *b, uint8_t *host) {
    const int64_t K = c->K, R = c->rows;
    g->x = f32(K, R, off[R_X], b, host, "x");
    g->w = f32(K, 1, off[R_W], b, host, "w");
    g->mid = f32(K, R, off[R_MID], b, host, "norm");
    g->out = c->in_place ? g->mid : f32(K, R, off[R_OUT], b, host, "norm_w");
    g->sum = f32(K, R, off[R_SUM], b, host, "sum");
    g->mid2 = f32(K, R, off[R_MID2], b, host, "norm2");
    g->out2 = c->in_place ? g->mid2 : f32(K, R, off[R_OUT2], b, host, "norm2_w");
    g->pad = f32(K, 1, off[R_PAD], b, host, "pad");
    const float eps = 1e-5f;
    g->nodes[0] = (tsr_node){.op = c->norm_op, .n_src = 1, .dst = &g->mid, .src = {&g->x}, .fparams = {eps}};
    g->nodes[1] = (tsr_node){.op = TSR_OP_MUL, .n_src = 2, .dst = &g->out, .src = {&g->mid, &g->w}};
    g->nodes[2] = (tsr_node){.op = TSR_OP_ADD, .n_src = 2, .dst = &g->sum, .src = {&g->mid, &g->out}};
    g->nodes[3] = (tsr_node){.op = c->norm_op, .n_src = 1, .dst = &g->mid2, .src = {&g->x}, .fparams = {eps}};
    g->nodes[4] = (tsr_node){.op = TSR_OP_SCALE, .n_src = 1, .dst = &g->pad, .src = {&g->w}, .fparams = {2.0f}};
    g->nodes[5] = (tsr_node){.op = TSR_OP_MUL, .n_src = 2, .dst = &g->out2, .src = {&g->mid2, &g->w}};
}

/* Builds a case's graph in g over the device buffer b, or (b NULL) over
 * the host bytes host; returns its nodes. */
typedef const tsr_node *(*case_builder)(void *g, const void *c, const uint64_t *off, tsr_buffer *b, uint8_t *host);

/* Runs a case's n nodes on the device over a buffer holding host's size
 * bytes, read back into dev (dispatched[op] gets how many nodes of each op
 * the queue ran, which tells whether a pair was fused), and on ref over ref,
 * a copy of host. dg and rg hold the two graphs. */
static void run_case(case_builder build, void *dg, void *rg, int32_t n, const void *c, const uint64_t *off,
                     const uint8_t *host, uint8_t *dev, uint8_t *ref, uint64_t size,
                     uint64_t dispatched[TSR_STATS_OPS]) {
    tsr_buffer *b = NULL;
    assert_int_equal(g_dev->api->buffer_alloc(g_dev, size, &b), TSR_OK);
    assert_int_equal(g_queue->api->write(g_queue, b, 0, host, size), TSR_OK);
    const tsr_node *nodes = build(dg, c, off, b, NULL);
    tsr_queue_stats before = {.struct_size = sizeof before}, after = {.struct_size = sizeof after};
    g_queue->api->get_stats(g_queue, &before);
    assert_int_equal(g_queue->api->compute(g_queue, nodes, n), TSR_OK);
    assert_int_equal(g_queue->api->synchronize(g_queue), TSR_OK);
    g_queue->api->get_stats(g_queue, &after);
    assert_int_equal(g_queue->api->read(g_queue, b, 0, dev, size), TSR_OK);
    assert_int_equal(g_queue->api->synchronize(g_queue), TSR_OK);
    g_dev->api->buffer_free(g_dev, b);
    for (int32_t op = 0; op < TSR_STATS_OPS; op++) dispatched[op] = after.op_nodes[op] - before.op_nodes[op];

    memcpy(ref, host, size);
    assert_int_equal(ref_compute(build(rg, c, off, NULL, ref), n, NULL), TSR_OK);
}

static const tsr_node *build_norm_case(void *g, const void *c, const uint64_t *off, tsr_buffer *b, uint8_t *host) {
    build(g, c, off, b, host);
    return ((graph *)g)->nodes;
}

static void expect_close(const char *what, const float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        if (d > 1e-5 + 1e-5 * fabs((double)want[i]))
            fail_msg("%s[%lld]: %.9g, ref %.9g", what, (long long)i, (double)got[i], (double)want[i]);
    }
}

static void test_case(void **state) {
    const fuse_case *c = *state;
    const int64_t n = c->K * c->rows;
    uint64_t off[R_COUNT], size = 0;
    for (int r = 0; r < R_COUNT; r++) {
        off[r] = size;
        size += (uint64_t)(r == R_W || r == R_PAD ? c->K : n) * 4 + 256;
    }
    uint8_t *host = calloc(1, size), *dev = malloc(size), *ref = malloc(size);
    assert_non_null(host);
    assert_non_null(dev);
    assert_non_null(ref);
    uint32_t s = 12345u + (uint32_t)n;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ((float *)(host + off[R_X]))[i] = (float)(s >> 8) / 2097152.0f - 4.0f + (c->norm_op == TSR_OP_NORM ? 1.5f : 0.0f);
    }
    for (int64_t i = 0; i < c->K; i++) ((float *)(host + off[R_W]))[i] = 0.5f + (float)(i % 17) / 16.0f;

    graph dg, rg;
    uint64_t dispatched[TSR_STATS_OPS];
    run_case(build_norm_case, &dg, &rg, 6, c, off, host, dev, ref, size, dispatched);

    const float *out = (const float *)(dev + (c->in_place ? off[R_MID] : off[R_OUT]));
    const float *out2 = (const float *)(dev + (c->in_place ? off[R_MID2] : off[R_OUT2]));
    if (memcmp(out, out2, (size_t)n * 4) != 0) fail_msg("the fused product differs from the unfused one's bits");
    expect_close("norm x w", out, (const float *)(ref + (c->in_place ? off[R_MID] : off[R_OUT])), n);
    expect_close("norm + norm x w", (const float *)(dev + off[R_SUM]), (const float *)(ref + off[R_SUM]), n);
    if (!c->in_place) expect_close("norm", (const float *)(dev + off[R_MID]), (const float *)(ref + off[R_MID]), n);

    /* dispatches: the pair kept apart always has its MUL timed */
    const uint64_t muls = dispatched[TSR_OP_MUL];
    const uint64_t norms = dispatched[c->norm_op];
    printf("  %s K %lld rows %lld%s: %llu %s and %llu MUL dispatches timed\n", tsr_op_name(c->norm_op),
           (long long)c->K, (long long)c->rows, c->in_place ? " in place" : "", (unsigned long long)norms,
           tsr_op_name(c->norm_op), (unsigned long long)muls);
    assert_int_equal(norms, 2);
    assert_int_equal(muls, g_fuse ? 1 : 2);
    free(host);
    free(dev);
    free(ref);
}

/* ------------------------------------------------- ROPE + CPY into a cache */

typedef struct rope_case {
    int32_t mode;                /* TSR_ROPE_NORMAL or TSR_ROPE_NEOX */
    int64_t D, H, T, n_dims;     /* head size, heads, tokens, dims rotated */
    int32_t cache_dtype;
    bool factors, yarn, in_place; /* frequency factors; YaRN; rope over x */
    int64_t kv_head;             /* first cache cell written */
} rope_case;

static const rope_case g_rope_cases[] = {
    {TSR_ROPE_NORMAL, 64, 4, 3, 64, TSR_DTYPE_F16, false, false, false, 5},
    {TSR_ROPE_NEOX, 64, 2, 1, 32, TSR_DTYPE_F32, true, true, false, 9},
    {TSR_ROPE_NEOX, 128, 3, 7, 128, TSR_DTYPE_BF16, false, false, false, 0},
    {TSR_ROPE_NORMAL, 64, 2, 1, 64, TSR_DTYPE_F16, false, false, true, 12},
    {TSR_ROPE_NORMAL, 64, 2, 2, 64, TSR_DTYPE_Q8_0, false, false, false, 3},
};

/* Regions of the one buffer: x and its copy for the unfused pair, positions,
 * factors, rotated rows (twice), the SCALE's output, the two caches. */
enum { Q_X, Q_X2, Q_POS, Q_FF, Q_MID, Q_MID2, Q_PAD, Q_CACHE, Q_CACHE2, Q_COUNT };

typedef struct rope_graph {
    tsr_tensor x, x2, pos, ff, mid, mid2, pad, view, view2;
    tsr_node nodes[5];
} rope_graph;

static tsr_tensor dense(int32_t dtype, const int64_t ne[4], uint64_t off, tsr_buffer *b, uint8_t *host,
                        const char *name) {
    tsr_tensor t = {.dtype = dtype, .ne = {ne[0], ne[1], ne[2], ne[3]}, .buffer = b, .offset = b ? off : 0,
                    .name = name};
    t.nb[0] = (int64_t)tsr_dtype_row_bytes(dtype, 1);
    t.nb[1] = (int64_t)tsr_dtype_row_bytes(dtype, ne[0]);
    t.nb[2] = t.nb[1] * ne[1];
    t.nb[3] = t.nb[2] * ne[2];
    t.data = host ? host + off : NULL;
    return t;
}

/* Cells kv_head.. of a cache [D*H, cells] at off: the CPY's dst. */
static tsr_tensor cache_view(const rope_case *c, uint64_t off, tsr_buffer *b, uint8_t *host, const char *name) {
    const int64_t ne[4] = {c->D * c->H, c->T, 1, 1};
    tsr_tensor t = dense(c->cache_dtype, ne, off + (uint64_t)c->kv_head * tsr_dtype_row_bytes(c->cache_dtype, ne[0]),
                         b, host, name);
    if (c->cache_dtype == TSR_DTYPE_Q8_0) t.nb[0] = 34; /* a block */
    return t;
}

/* rope -> cpy (fusable); rope, SCALE, cpy (kept apart). */
static void rope_build(rope_graph *g, const rope_case *c, const uint64_t off[Q_COUNT], tsr_buffer *b,
                       uint8_t *host) {
    const int64_t ne_x[4] = {c->D, c->H, c->T, 1}, ne_pos[4] = {c->T, 1, 1, 1}, ne_ff[4] = {c->n_dims / 2, 1, 1, 1};
    g->x = dense(TSR_DTYPE_F32, ne_x, off[Q_X], b, host, "x");
    g->x2 = dense(TSR_DTYPE_F32, ne_x, off[Q_X2], b, host, "x2");
    g->pos = dense(TSR_DTYPE_I32, ne_pos, off[Q_POS], b, host, "pos");
    g->ff = dense(TSR_DTYPE_F32, ne_ff, off[Q_FF], b, host, "freq_factors");
    g->mid = c->in_place ? g->x : dense(TSR_DTYPE_F32, ne_x, off[Q_MID], b, host, "k");
    g->mid2 = c->in_place ? g->x2 : dense(TSR_DTYPE_F32, ne_x, off[Q_MID2], b, host, "k2");
    g->pad = dense(TSR_DTYPE_F32, ne_x, off[Q_PAD], b, host, "pad");
    g->view = cache_view(c, off[Q_CACHE], b, host, "cache");
    g->view2 = cache_view(c, off[Q_CACHE2], b, host, "cache2");
    const tsr_node rope = {
        .op = TSR_OP_ROPE,
        .n_src = 3,
        .src = {&g->x, &g->pos, c->factors ? &g->ff : NULL},
        .dst = &g->mid,
        .iparams = {(int32_t)c->n_dims, c->mode, 4096},
        .fparams = {10000.0f, c->yarn ? 0.25f : 1.0f, c->yarn ? 1.0f : 0.0f, 1.0f, 32.0f, 1.0f},
    };
    g->nodes[0] = rope;
    g->nodes[1] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->view, .src = {&g->mid}};
    g->nodes[2] = rope;
    g->nodes[2].src[0] = &g->x2;
    g->nodes[2].dst = &g->mid2;
    g->nodes[3] = (tsr_node){.op = TSR_OP_SCALE, .n_src = 1, .dst = &g->pad, .src = {&g->x2}, .fparams = {2.0f}};
    g->nodes[4] = (tsr_node){.op = TSR_OP_CPY, .n_src = 1, .dst = &g->view2, .src = {&g->mid2}};
}

static const tsr_node *build_rope_case(void *g, const void *c, const uint64_t *off, tsr_buffer *b, uint8_t *host) {
    rope_build(g, c, off, b, host);
    return ((rope_graph *)g)->nodes;
}

static float cache_value(int32_t dtype, const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    if (dtype == TSR_DTYPE_F16) return tsr_fp16_to_f32(h);
    if (dtype == TSR_DTYPE_BF16) return tsr_bf16_to_f32(h);
    float f;
    memcpy(&f, p, 4);
    return f;
}

/* The written cache rows against ref's: the same values up to one
 * rounding step of the cache dtype (the rotation itself within 1e-5). */
static void expect_cache_close(const rope_case *c, const uint8_t *got, const uint8_t *want) {
    if (tsr_dtype_is_quantized(c->cache_dtype)) return; /* Q8_0: the bytes equal the unfused pair's */
    const double rel = c->cache_dtype == TSR_DTYPE_F32 ? 1e-5 : c->cache_dtype == TSR_DTYPE_F16 ? 1e-3 : 8e-3;
    const int64_t n = c->D * c->H * c->T, esz = (int64_t)tsr_dtype_row_bytes(c->cache_dtype, 1);
    for (int64_t i = 0; i < n; i++) {
        const double g = cache_value(c->cache_dtype, got + i * esz), w = cache_value(c->cache_dtype, want + i * esz);
        if (fabs(g - w) > 1e-5 + rel * fabs(w))
            fail_msg("cache[%lld]: %.9g, ref %.9g", (long long)i, g, w);
    }
}

static void rope_fill(const rope_case *c, uint8_t *host, const uint64_t off[Q_COUNT], uint64_t cache_bytes) {
    const int64_t n = c->D * c->H * c->T;
    uint32_t s = 777u + (uint32_t)n;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        ((float *)(host + off[Q_X]))[i] = (float)(s >> 8) / 2097152.0f - 4.0f;
    }
    memcpy(host + off[Q_X2], host + off[Q_X], (size_t)n * 4);
    for (int64_t t = 0; t < c->T; t++) ((int32_t *)(host + off[Q_POS]))[t] = (int32_t)(c->kv_head + t * 3 + 1);
    for (int64_t i = 0; i < c->n_dims / 2; i++) ((float *)(host + off[Q_FF]))[i] = 1.0f + (float)(i % 5);
    /* the caches' other cells: a pattern that must survive */
    for (uint64_t i = 0; i < cache_bytes; i++) host[off[Q_CACHE] + i] = host[off[Q_CACHE2] + i] = (uint8_t)(i * 37u + 11u);
}

static void test_rope_case(void **state) {
    const rope_case *c = *state;
    const int64_t n = c->D * c->H * c->T;
    const uint64_t cache_bytes = tsr_dtype_row_bytes(c->cache_dtype, c->D * c->H) * (uint64_t)(c->kv_head + c->T + 2);
    uint64_t off[Q_COUNT], size = 0;
    for (int r = 0; r < Q_COUNT; r++) {
        off[r] = size;
        size += (r >= Q_CACHE ? cache_bytes : (uint64_t)n * 4) + 256;
        size = (size + 255) / 256 * 256;
    }
    uint8_t *host = calloc(1, size), *dev = malloc(size), *ref = malloc(size);
    assert_non_null(host);
    assert_non_null(dev);
    assert_non_null(ref);
    rope_fill(c, host, off, cache_bytes);

    rope_graph dg, rg;
    uint64_t dispatched[TSR_STATS_OPS];
    run_case(build_rope_case, &dg, &rg, 5, c, off, host, dev, ref, size, dispatched);

    const uint64_t mid = c->in_place ? off[Q_X] : off[Q_MID], mid2 = c->in_place ? off[Q_X2] : off[Q_MID2];
    if (memcmp(dev + off[Q_CACHE], dev + off[Q_CACHE2], cache_bytes) != 0)
        fail_msg("the cache written by the fused pair differs from the unfused pair's bytes");
    if (memcmp(dev + mid, dev + mid2, (size_t)n * 4) != 0)
        fail_msg("the rotated rows of the fused pair differ from the unfused rope's bits");
    if (memcmp(dev + off[Q_CACHE], host + off[Q_CACHE], (size_t)(dg.view.offset - off[Q_CACHE])) != 0)
        fail_msg("cells before kv_head were written");
    expect_close("rope", (const float *)(dev + mid), (const float *)(ref + mid), n);
    expect_cache_close(c, dev + dg.view.offset, ref + dg.view.offset);

    const uint64_t cpys = dispatched[TSR_OP_CPY];
    const uint64_t ropes = dispatched[TSR_OP_ROPE];
    const bool fusable = g_fuse && !tsr_dtype_is_quantized(c->cache_dtype);
    printf("  ROPE %s D %lld H %lld T %lld -> %s: %llu ROPE and %llu CPY dispatches timed\n",
           c->mode == TSR_ROPE_NEOX ? "neox" : "normal", (long long)c->D, (long long)c->H, (long long)c->T,
           tsr_dtype_name(c->cache_dtype), (unsigned long long)ropes, (unsigned long long)cpys);
    assert_int_equal(ropes, 2);
    assert_int_equal(cpys, fusable ? 1 : 2);
    free(host);
    free(dev);
    free(ref);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_vk_fuse PLUGIN.so\n");
        return 2;
    }
    const char *nf = getenv("TESSERA_VULKAN_NO_FUSE");
    g_fuse = !(nf && nf[0] && strcmp(nf, "0") != 0);
    vk_test_plugin vk = vk_test_open(argv[1], &g_host);
    g_dev = vk.dev;
    g_queue = vk.queue;
    if (g_queue->api->struct_size < sizeof(tsr_queue_api) || !g_queue->api->set_profiling ||
        g_queue->api->set_profiling(g_queue, 1) != TSR_OK) {
        vk_test_close(&vk);
        harness_skip("vulkan0 cannot time its work: the dispatch count is unobservable");
    }
    printf("fusion %s\n", g_fuse ? "on" : "off (TESSERA_VULKAN_NO_FUSE)");
    enum { N_NORM = sizeof g_cases / sizeof g_cases[0], N = N_NORM + sizeof g_rope_cases / sizeof g_rope_cases[0] };
    struct CMUnitTest tests[N];
    char names[N][80];
    for (int i = 0; i < N_NORM; i++) {
        const fuse_case *c = &g_cases[i];
        snprintf(names[i], sizeof names[i], "%s K %lld rows %lld%s", tsr_op_name(c->norm_op), (long long)c->K,
                 (long long)c->rows, c->in_place ? " in place" : "");
        tests[i] = (struct CMUnitTest)HARNESS_TEST(test_case);
        tests[i].name = names[i];
        tests[i].initial_state = (void *)c;
    }
    for (int i = N_NORM; i < N; i++) {
        const rope_case *c = &g_rope_cases[i - N_NORM];
        snprintf(names[i], sizeof names[i], "ROPE %s D %lld H %lld T %lld n_dims %lld%s%s -> CPY %s",
                 c->mode == TSR_ROPE_NEOX ? "neox" : "normal", (long long)c->D, (long long)c->H, (long long)c->T,
                 (long long)c->n_dims, c->factors ? " factors" : "", c->in_place ? " in place" : "",
                 tsr_dtype_name(c->cache_dtype));
        tests[i] = (struct CMUnitTest)HARNESS_TEST(test_rope_case);
        tests[i].name = names[i];
        tests[i].initial_state = (void *)c;
    }
    const int rc = harness_run("vulkan-fuse", tests, (size_t)N, NULL, NULL, argc, argv);
    vk_test_close(&vk);
    return rc;
}
