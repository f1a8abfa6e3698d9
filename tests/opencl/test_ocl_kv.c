/*
 * test_ocl_kv — a quantized KV cache on the OpenCL device (opencl0, PoCL in
 * CI), against the built-in reference backend.
 *
 *   test_ocl_kv ops
 *     - CPY of F32 rows into each KV block type (Q8_0, Q4_0, Q4_1, Q5_0,
 *       Q5_1, IQ4_NL), written into a slot of a larger cache (row stride
 *       wider than the row, cells after the first), gives ref's quantizer's
 *       bytes exactly and leaves the rest of the cache alone; rows with
 *       zeros, equal values, an outlier, tiny values and a negative extreme
 *       included; also from a transposed F16 source;
 *     - FLASH_ATTN with K and V of each block type (and mixed pairs) read
 *       from cache-shaped views, q a permuted view, GQA, an F16 or F32 mask
 *       with -inf cells (a fully masked query gets zeros), n_kv 1, 17, 50,
 *       300 (not multiples of the block size), head sizes 32/64/128 (and
 *       float K/V at 80 and 40, whose rows end in a partial chunk): within
 *       FA_TOL of ref on the same bytes (both dequantize exactly; ref sums
 *       in double).
 *   test_ocl_kv model MODEL GOLDEN TYPE_K TYPE_V TOL [CPU [N_CASES [N_GREEDY]]]
 *     the model fully offloaded (--device opencl0,CPU -ngl 99, flash
 *     attention on, the cache types given) against the same model on the
 *     CPU device alone (CPU: a device name, or "best", the default:
 *     cpu-avx0 if present, else ref), 2 prompts, 16 tokens: each golden prompt's
 *     logits within TOL, then the greedy tokens equal until the first step
 *     where the CPU's own margin between the two picks is within twice the
 *     largest logit difference seen so far (a near tie), which ends the
 *     comparison for that prompt. MODEL and GOLDEN: absolute paths or
 *     names under ../shared/models and ../shared/golden (a model not there:
 *     in the cache of scripts/fetch-models.sh).
 *
 * Exits 77 (skipped) when there is no OpenCL device or no model file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>
#include <tessera/tessera.h>

#include "golden.h"
#include "harness.h"
#include "host/host.h"
#include "tensor/dtype.h"
#include "../logits_util.h"

#define FA_TOL 2e-5 /* absolute, on outputs of magnitude <= 1 */


static const int32_t kv_blocks[] = {TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_1,
                                    TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_1, TSR_DTYPE_IQ4_NL};
enum { N_KV_BLOCKS = sizeof kv_blocks / sizeof kv_blocks[0] };

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

/* A tensor of a test node and its bytes on the host. */
typedef struct ttensor {
    tsr_tensor t;
    uint8_t *bytes; /* size bytes; the tensor starts at off (a view) */
    uint64_t size, off;
} ttensor;

static uint64_t row_bytes(int32_t dtype, int64_t n) {
    return (uint64_t)(n / tsr_dtype_block_size(dtype) * tsr_dtype_block_bytes(dtype));
}

/* t with shape ne and strides nb over size bytes (zeroed). */
static void tt_init(ttensor *x, int32_t dtype, const int64_t ne[4], const uint64_t nb[4], uint64_t size,
                    const char *name) {
    memset(x, 0, sizeof *x);
    x->t.dtype = dtype;
    for (int d = 0; d < 4; d++) {
        x->t.ne[d] = ne[d];
        x->t.nb[d] = (int64_t)nb[d];
    }
    x->t.name = name;
    x->size = size;
    x->bytes = calloc(1, size);
}

/* Compute node on hd (ref reads host memory; opencl0 gets a buffer per
 * tensor) and copy dst's size bytes into out. 0 on success. */
static int run_node(host_device *hd, tsr_node *node, ttensor **tts, int n, const ttensor *dst, uint8_t *out) {
    char why[400] = "";
    if (!host_device_supports(hd, node, why, sizeof why)) {
        ADD_FAILURE("%s declines %s '%s': %s", hd->name, tsr_op_name(node->op), node->dst->name, why);
        return -1;
    }
    tsr_queue *q = host_device_queue(hd);
    tsr_buffer *bufs[8] = {0};
    int rc = 0;
    for (int i = 0; i < n; i++) {
        tts[i]->t.offset = tts[i]->off;
        if (hd->info.reads_host_memory) {
            tts[i]->t.buffer = NULL;
            tts[i]->t.offset = 0;
            tts[i]->t.data = tts[i]->bytes + tts[i]->off;
            continue;
        }
        if (hd->dev->api->buffer_alloc(hd->dev, tts[i]->size, &bufs[i]) != TSR_OK ||
            q->api->write(q, bufs[i], 0, tts[i]->bytes, tts[i]->size) != TSR_OK)
            rc = -1;
        tts[i]->t.buffer = bufs[i];
        uint8_t *hp = bufs[i] ? hd->dev->api->buffer_host_ptr(hd->dev, bufs[i]) : NULL;
        tts[i]->t.data = hp ? hp + tts[i]->off : NULL;
    }
    if (!rc && (q->api->compute(q, node, 1) != TSR_OK || q->api->synchronize(q) != TSR_OK)) rc = -1;
    if (!rc) {
        if (hd->info.reads_host_memory) {
            memcpy(out, dst->bytes, dst->size);
        } else {
            for (int i = 0; i < n; i++)
                if (tts[i] == dst && (q->api->read(q, bufs[i], 0, out, dst->size) != TSR_OK ||
                                      q->api->synchronize(q) != TSR_OK))
                    rc = -1;
        }
    }
    for (int i = 0; i < n; i++)
        if (bufs[i]) hd->dev->api->buffer_free(hd->dev, bufs[i]);
    EXPECT(rc == 0, "%s: %s '%s' failed: %s", hd->name, tsr_op_name(node->op), node->dst->name, tessera_last_error());
    return rc;
}

/* ------------------------------------------------------------- CPY */

/* Row r of the test data: the patterns that take the quantizers' special
 * paths, then random rows. */
static void fill_row(float *x, int64_t n, int r) {
    for (int64_t i = 0; i < n; i++) {
        switch (r) {
        case 0: x[i] = 0.0f; break;                                  /* d = 0 */
        case 1: x[i] = 0.75f; break;                                 /* max == min */
        case 2: x[i] = i % 37 == 5 ? 100.0f : uniform(-1, 1); break; /* an outlier */
        case 3: x[i] = uniform(-1, 1) * 1e-20f; break;               /* below IQ4_NL's eps; F16 d underflows */
        case 4: x[i] = i % 32 == 7 ? -3.0f : uniform(-1, 1); break;  /* the extreme is negative */
        default: x[i] = uniform(-2, 2); break;
        }
    }
}

/* CPY of T rows of W elements (src: F32 contiguous, or F16 stored
 * transposed) into cells c0.. of a cache of CELLS rows of ROW elements
 * (ROW >= W); compared byte for byte with ref's quantizer over the whole
 * cache (the bytes around the slot must not change). */
static void cpy_case(host_device *ocl, int32_t qt, bool f16_transposed) {
    enum { W = 128, T = 7, ROW = 160, CELLS = 16, C0 = 5 };
    float x[T][W];
    for (int r = 0; r < T; r++) fill_row(x[r], W, r);
    ttensor src, cache;
    if (f16_transposed) { /* element (i0, i1) at i0 * T + i1 */
        tt_init(&src, TSR_DTYPE_F16, (int64_t[4]){W, T, 1, 1}, (uint64_t[4]){2 * T, 2, 2 * W * T, 2 * W * T},
                2 * W * T, "src");
        for (int r = 0; r < T; r++)
            for (int i = 0; i < W; i++) {
                uint16_t h;
                dtype_quantize_row(TSR_DTYPE_F16, &x[r][i], &h, 1);
                memcpy(src.bytes + 2 * (i * T + r), &h, 2);
                dtype_dequantize_row(TSR_DTYPE_F16, &h, &x[r][i], 1); /* what the device reads */
            }
    } else {
        tt_init(&src, TSR_DTYPE_F32, (int64_t[4]){W, T, 1, 1}, (uint64_t[4]){4, 4 * W, 4 * W * T, 4 * W * T},
                4 * W * T, "src");
        memcpy(src.bytes, x, sizeof x);
    }
    const uint64_t rb = row_bytes(qt, ROW), size = rb * CELLS;
    const uint64_t bb = (uint64_t)tsr_dtype_block_bytes(qt);
    tt_init(&cache, qt, (int64_t[4]){W, T, 1, 1}, (uint64_t[4]){bb, rb, rb * T, rb * T}, size, "k_cache");
    for (uint64_t i = 0; i < size; i++) cache.bytes[i] = (uint8_t)(i * 7 + 0xA5);
    uint8_t *want = malloc(size), *got = malloc(size);
    memcpy(want, cache.bytes, size);
    for (int r = 0; r < T; r++) dtype_quantize_row(qt, x[r], want + (C0 + r) * rb, W);
    cache.off = C0 * rb; /* the slot: cells C0.. */
    tsr_node node = {.op = TSR_OP_CPY, .n_src = 1, .dst = &cache.t, .src = {&src.t}};
    ttensor *tts[2] = {&src, &cache};
    if (run_node(ocl, &node, tts, 2, &cache, got) == 0) {
        int bad = 0, first = -1;
        const int64_t nblocks = (int64_t)(size / bb);
        for (int64_t b = 0; b < nblocks; b++)
            if (memcmp(want + b * bb, got + b * bb, bb)) {
                if (first < 0) first = (int)b;
                bad++;
            }
        EXPECT(bad == 0, "CPY %s -> %s: %d of %lld cache blocks differ from ref's bytes (first: block %d, cell %d)",
               f16_transposed ? "F16 transposed" : "F32", tsr_dtype_name(qt), bad, (long long)nblocks, first,
               first < 0 ? -1 : (int)((uint64_t)first * bb / rb));
        if (bad == 0)
            printf("  CPY %-14s -> %-6s: %d rows into cells %d.. of a %d-wide cache: ref's bytes\n",
                   f16_transposed ? "F16 transposed" : "F32", tsr_dtype_name(qt), T, C0, ROW);
    }
    free(cache.bytes);
    free(src.bytes);
    free(want);
    free(got);
}

/* ------------------------------------------------------- FLASH_ATTN */

typedef struct fa_shape {
    int64_t D, n_q, n_kv, H, H_kv;
    int32_t mask; /* -1 none, else F16/F32 */
} fa_shape;

static void fa_case(host_device *ocl, host_device *ref, int32_t kt, int32_t vt, fa_shape s) {
    const int64_t D = s.D, n_q = s.n_q, n_kv = s.n_kv, H = s.H, H_kv = s.H_kv, cells = n_kv + 9;
    ttensor q, k, v, m, out;
    /* q: [D, H, n_q] contiguous seen as [D, n_q, H] (the graph's permute) */
    tt_init(&q, TSR_DTYPE_F32, (int64_t[4]){D, n_q, H, 1},
            (uint64_t[4]){4, (uint64_t)(4 * D * H), (uint64_t)(4 * D), (uint64_t)(4 * D * H * n_q)},
            (uint64_t)(4 * D * H * n_q), "q");
    for (int64_t i = 0; i < D * H * n_q; i++) ((float *)q.bytes)[i] = uniform(-1, 1);
    /* k, v: cache rows of D * H_kv per cell, head g at g * row(D) */
    ttensor *kv[2] = {&k, &v};
    const int32_t types[2] = {kt, vt};
    float *row = malloc((size_t)(D * H_kv) * sizeof *row);
    for (int w = 0; w < 2; w++) {
        const int32_t t = types[w];
        const uint64_t cell = row_bytes(t, D * H_kv), head = row_bytes(t, D);
        tt_init(kv[w], t, (int64_t[4]){D, n_kv, H_kv, 1},
                (uint64_t[4]){(uint64_t)tsr_dtype_block_bytes(t), cell, head, cell * (uint64_t)cells},
                cell * (uint64_t)cells, w ? "v_cache" : "k_cache");
        for (int64_t c = 0; c < cells; c++) {
            for (int64_t i = 0; i < D * H_kv; i++) row[i] = uniform(-1, 1);
            dtype_quantize_row(t, row, kv[w]->bytes + c * cell, D * H_kv);
        }
    }
    free(row);
    tsr_node node = {.op = TSR_OP_FLASH_ATTN, .n_src = 3, .src = {&q.t, &k.t, &v.t}};
    node.fparams[TSR_FLASH_ATTN_F_SCALE] = 1.0f / sqrtf((float)D);
    ttensor *tts[5] = {&q, &k, &v, &m, &out};
    int n = 3;
    if (s.mask >= 0) { /* causal over the last n_q cells; query 1 fully masked when n_q > 2 */
        const int64_t rows = n_q + 2, es = s.mask == TSR_DTYPE_F16 ? 2 : 4;
        tt_init(&m, s.mask, (int64_t[4]){n_kv, rows, 1, 1},
                (uint64_t[4]){(uint64_t)es, (uint64_t)(es * n_kv), (uint64_t)(es * n_kv * rows),
                              (uint64_t)(es * n_kv * rows)},
                (uint64_t)(es * n_kv * rows), "mask");
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n_kv; j++) {
                float val = j > n_kv - n_q + i || (n_q > 2 && i == 1) ? -INFINITY : 0.0f;
                dtype_quantize_row(s.mask, &val, m.bytes + (i * n_kv + j) * es, 1);
            }
        node.src[3] = &m.t;
        node.n_src = 4;
        n = 4;
    }
    tt_init(&out, TSR_DTYPE_F32, (int64_t[4]){D, H, n_q, 1},
            (uint64_t[4]){4, (uint64_t)(4 * D), (uint64_t)(4 * D * H), (uint64_t)(4 * D * H * n_q)},
            (uint64_t)(4 * D * H * n_q), "fattn");
    node.dst = &out.t;
    tts[n] = &out;
    float *want = malloc(out.size), *got = malloc(out.size);
    if (run_node(ref, &node, tts, n + 1, &out, (uint8_t *)want) == 0 &&
        run_node(ocl, &node, tts, n + 1, &out, (uint8_t *)got) == 0) {
        double err = 0;
        int64_t worst = 0;
        for (int64_t i = 0; i < D * H * n_q; i++) {
            double e = fabs((double)got[i] - want[i]);
            if (!(e <= err)) {
                err = e;
                worst = i;
            }
        }
        EXPECT(err <= FA_TOL, "FLASH_ATTN D %lld n_q %lld n_kv %lld H %lld/%lld K %s V %s: error %.3g at %lld "
               "(%.7g, ref %.7g)", (long long)D, (long long)n_q, (long long)n_kv, (long long)H, (long long)H_kv,
               tsr_dtype_name(kt), tsr_dtype_name(vt), err, (long long)worst, (double)got[worst], (double)want[worst]);
        printf("  FLASH_ATTN D %3lld n_q %lld n_kv %3lld H %lld/%lld K %-6s V %-6s mask %-4s: max error %.2g\n",
               (long long)D, (long long)n_q, (long long)n_kv, (long long)H, (long long)H_kv, tsr_dtype_name(kt),
               tsr_dtype_name(vt), s.mask < 0 ? "none" : tsr_dtype_name(s.mask), err);
    }
    free(want);
    free(got);
    for (int i = 0; i <= n; i++) free(tts[i]->bytes);
}

static void test_ops(host_device *ocl) {
    host_device *ref = host_device_ref();
    printf("CPY into the KV block types on %s:\n", ocl->name);
    for (int i = 0; i < N_KV_BLOCKS; i++) {
        cpy_case(ocl, kv_blocks[i], false);
        cpy_case(ocl, kv_blocks[i], true);
    }
    printf("FLASH_ATTN on %s against ref (tolerance %g):\n", ocl->name, FA_TOL);
    static const fa_shape shapes[] = {
        {64, 1, 50, 9, 3, TSR_DTYPE_F32},  /* SmolLM2's heads, decoding */
        {32, 4, 17, 8, 2, TSR_DTYPE_F16},  /* a batch; query 1 fully masked */
        {128, 2, 300, 4, 1, TSR_DTYPE_F16},
        {64, 3, 1, 2, 2, -1},
    };
    for (int i = 0; i < N_KV_BLOCKS; i++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            fa_case(ocl, ref, kv_blocks[i], kv_blocks[i], shapes[s]);
    fa_case(ocl, ref, TSR_DTYPE_Q8_0, TSR_DTYPE_Q4_0, shapes[0]);
    fa_case(ocl, ref, TSR_DTYPE_F16, TSR_DTYPE_Q5_1, shapes[1]);
    fa_case(ocl, ref, TSR_DTYPE_IQ4_NL, TSR_DTYPE_F32, shapes[2]);
    /* float K/V with a head size that is not a multiple of 32 (phi-2's 80):
     * the last chunk of each row is partial */
    fa_case(ocl, ref, TSR_DTYPE_F16, TSR_DTYPE_F16, (fa_shape){80, 2, 33, 4, 2, TSR_DTYPE_F16});
    fa_case(ocl, ref, TSR_DTYPE_F32, TSR_DTYPE_BF16, (fa_shape){40, 3, 9, 2, 1, TSR_DTYPE_F32});
}

/* ------------------------------------------------------------ model */

/* One golden prompt on both models. Returns 1 if it passes. */
static int model_case(tessera_model *dev, tessera_model *cpu, const tessera_context_params *cp, const golden_case *g,
                      int c, double tol, int n_greedy) {
    const int32_t nv = tessera_model_n_vocab(cpu);
    tessera_context_params p = *cp;
    p.n_ctx = (uint32_t)(g->n_tokens + n_greedy + 1);
    tessera_context *a = tessera_context_new(dev, &p), *b = tessera_context_new(cpu, &p);
    int ok = 0;
    if (!a || !b || tessera_decode(a, g->tokens, g->n_tokens, 0, TESSERA_DECODE_ALL_LOGITS) ||
        tessera_decode(b, g->tokens, g->n_tokens, 0, TESSERA_DECODE_ALL_LOGITS)) {
        printf("  case %d: %s\n", c, tessera_last_error());
        goto done;
    }
    double err = 0;
    for (int32_t i = 0; i < g->n_tokens; i++) {
        double e = max_diff(tessera_logits(a, i), tessera_logits(b, i), nv);
        if (e > err) err = e;
    }
    const double prompt_err = err;
    int matched = 0;
    const char *end = "all";
    for (int i = 0; i < n_greedy; i++) {
        const float *la = tessera_logits(a, -1), *lb = tessera_logits(b, -1);
        double e = max_diff(la, lb, nv);
        if (e > err) err = e;
        tessera_token ta = argmax(la, nv), tb = argmax(lb, nv);
        if (ta != tb) {
            double margin = (double)lb[tb] - lb[ta];
            if (margin > 2 * err) {
                printf("  case %d step %d: token %d on the device, %d on the CPU, CPU margin %.3g > 2 x %.3g\n",
                       c, i, ta, tb, margin, err);
                goto done;
            }
            end = "near tie";
            break;
        }
        matched++;
        if (tessera_decode(a, &ta, 1, g->n_tokens + i, 0) || tessera_decode(b, &tb, 1, g->n_tokens + i, 0)) {
            printf("  case %d: decode: %s\n", c, tessera_last_error());
            goto done;
        }
    }
    ok = prompt_err <= tol;
    printf("  %s case %d (%d tokens): prompt logits max diff %.3g (tolerance %g), greedy %d/%d equal (%s)\n",
           ok ? "ok  " : "FAIL", c, g->n_tokens, prompt_err, tol, matched, n_greedy, end);
done:
    if (a) tessera_context_free(a);
    if (b) tessera_context_free(b);
    return ok;
}

/* Usage: test_ocl_kv model MODEL GOLDEN TYPE_K TYPE_V TOL [CPU [N_CASES [N_GREEDY]]]: MODEL as
 * harness_model_file finds it, GOLDEN a path or a file of $TESSERA_SHARED/golden. */
static void test_model(host_device *ocl) {
    REQUIRE(harness_argc() >= 7, "usage: test_ocl_kv model MODEL GOLDEN TYPE_K TYPE_V TOL [CPU [N_CASES [N_GREEDY]]]");
    const char *golden_arg = harness_arg(3), *type_k = harness_arg(4), *type_v = harness_arg(5);
    harness_path path = harness_model_file(harness_arg(2)), gpath;
    if (golden_arg[0] == '/') {
        gpath = harness_file(golden_arg);
    } else {
        char rel[512];
        snprintf(rel, sizeof rel, "golden/%s", golden_arg);
        gpath = harness_shared_file(rel);
    }
    const int tk = tessera_kv_type_from_name(type_k), tv = tessera_kv_type_from_name(type_v);
    const double tol = atof(harness_arg(6));
    const int n_cases_max = harness_arg(8) ? atoi(harness_arg(8)) : 2;
    const int n_greedy = harness_arg(9) ? atoi(harness_arg(9)) : 16;
    REQUIRE(tk >= 0 && tv >= 0, "%s/%s: not KV cache types", type_k, type_v);
    golden_case *cases;
    int n_cases = golden_load(gpath.s, &cases);
    REQUIRE(n_cases > 0, "%s: no golden cases", gpath.s);
    const int n_loaded = n_cases; /* what golden_free must release */
    if (n_cases > n_cases_max) n_cases = n_cases_max;
    const char *cpu = harness_arg(7) && strcmp(harness_arg(7), "best") ? harness_arg(7) : NULL;
    if (cpu && !host_device_find(cpu)) {
        golden_free(cases, n_loaded);
        harness_skip("no CPU device '%s'", cpu);
    }
    if (!cpu) cpu = host_device_find("cpu-avx0") ? "cpu-avx0" : "ref";
    char devices[64];
    snprintf(devices, sizeof devices, "%s,%s", ocl->name, cpu);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = 99;
    tessera_model *dev = tessera_model_load(path.s, &mp);
    mp.devices = cpu;
    mp.n_gpu_layers = 0;
    tessera_model *cm = dev ? tessera_model_load(path.s, &mp) : NULL;
    if (EXPECT(dev && cm, "%s: %s", path.s, tessera_last_error())) {
        tessera_context_params cp = tessera_context_default_params();
        cp.n_threads = 2;
        cp.type_k = (tessera_kv_type)tk;
        cp.type_v = (tessera_kv_type)tv;
        cp.flash_attn = TESSERA_FLASH_ATTN_ON;
        printf("%s: %s -ngl 99 against %s, -fa on -ctk %s -ctv %s\n", harness_arg(2), devices, cpu, type_k, type_v);
        for (int c = 0; c < n_cases; c++)
            EXPECT(model_case(dev, cm, &cp, &cases[c], c, tol, n_greedy) == 1, "case %d (line above)", c);
    }
    if (cm) tessera_model_free(cm);
    if (dev) tessera_model_free(dev);
    golden_free(cases, n_loaded);
}

/* Usage: test_ocl_kv ops | model ... (test_model) */
TEST(test_ocl_kv) {
    const char *mode = harness_arg(1) ? harness_arg(1) : "";
    REQUIRE(!strcmp(mode, "ops") || !strcmp(mode, "model"),
            "usage: test_ocl_kv ops | model MODEL GOLDEN TYPE_K TYPE_V TOL [CPU [N_CASES [N_GREEDY]]]");
    harness_host_start();
    host_device *ocl = host_device_find("opencl0");
    if (!ocl || host_device_open(ocl) != 0) {
        tessera_shutdown();
        harness_skip("no OpenCL device (see 'tessera devices' for the reason)");
    }
    if (!strcmp(mode, "ops"))
        test_ops(ocl);
    else
        test_model(ocl);
    tessera_shutdown();
}

HARNESS_MAIN("opencl kv", HARNESS_TEST(test_ocl_kv))
