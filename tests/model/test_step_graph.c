/*
 * Graph reuse between decode steps (model/step_graph.h): a context that
 * keeps its step graph and one that builds every step's graph must give
 * the same logits, bit for bit, through every event that changes what a
 * step looks like: the prompt and single tokens across the STEP_KV_PAD
 * boundaries of n_kv, batches of other sizes, kv truncate and rewinding
 * decodes, a context shift, a saved state loaded back, several sequences
 * (tessera_decode_batch, sequences added and removed) and, on the
 * sliding-window model, a window set whose cells are reused many times
 * over. The reusing context must really have reused graphs (its counts are
 * checked), and the other none.
 *
 *   llama   stories260K (../shared/models), F16 cache
 *   fa      stories260K with flash attention (V cache not transposed)
 *   swa     tests/data/synth-gemma3-swa16-f32.gguf (window 16, 256 cells)
 *   NAME    ../shared/models/NAME.gguf
 *
 * With --trace FILE the one-sequence script runs once (reuse on) and writes
 * every logit it gets to FILE (step_plan.py compares two such runs).
 *
 * Usage: test_step_graph llama|fa|swa|NAME [DEVICE|cpu] [--trace FILE]
 * (cpu: the first CPU plugin's device, cpu-avx0 or cpu-neon0; the test
 * skips when this build has none; default cpu)
 */

#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "host/host.h"
#include "model/public.h"
#include "model_test.h"

static tessera_model *g_model;
static bool g_fa;

/* The logits of every step of a run, in order. */
typedef struct trace {
    float *v;
    size_t n, cap;
} trace;

static void trace_add(trace *t, const float *x, int32_t n) {
    assert_non_null(x);
    if (t->n + (size_t)n > t->cap) {
        t->cap = (t->n + (size_t)n) * 2;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        assert_non_null(t->v);
    }
    memcpy(t->v + t->n, x, (size_t)n * sizeof *x);
    t->n += (size_t)n;
}

static tessera_token token_at(uint32_t i, uint32_t salt) {
    uint32_t x = (i + 1) * 2654435761u ^ (salt * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (tessera_token)(3 + x % 200);
}

static tessera_context *new_ctx(uint32_t n_ctx, uint32_t n_seq, bool reuse) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 32;
    cp.n_threads = 2;
    cp.n_seq_max = n_seq;
    cp.flash_attn = g_fa ? TESSERA_FLASH_ATTN_ON : TESSERA_FLASH_ATTN_OFF;
    tessera_context *ctx = tessera_context_new(g_model, &cp);
    if (!ctx) fail_msg("context: %s", tessera_last_error());
    context_set_graph_reuse(ctx, reuse);
    return ctx;
}

/* Decode one token at pos of sequence 0 and record its logits. */
static void one(tessera_context *ctx, trace *t, uint32_t i, int32_t pos) {
    tessera_token tok = token_at(i, 1);
    if (tessera_decode(ctx, &tok, 1, pos, 0) != 0) fail_msg("decode at %d: %s", pos, tessera_last_error());
    trace_add(t, tessera_logits(ctx, -1), tessera_model_n_vocab(g_model));
}

static void many(tessera_context *ctx, trace *t, uint32_t i, int32_t pos, int32_t n) {
    tessera_token toks[64];
    assert_true(n <= 64);
    for (int32_t k = 0; k < n; k++) toks[k] = token_at(i + (uint32_t)k, 2);
    if (tessera_decode(ctx, toks, n, pos, TESSERA_DECODE_ALL_LOGITS) != 0)
        fail_msg("decode of %d at %d: %s", n, pos, tessera_last_error());
    for (int32_t k = 0; k < n; k++) trace_add(t, tessera_logits(ctx, k), tessera_model_n_vocab(g_model));
}

/* One sequence through tessera_decode: every event but several sequences. */
static void script_single(tessera_context *ctx, trace *t) {
    uint32_t i = 0;
    many(ctx, t, i, 0, 20);
    i += 20;
    for (int32_t k = 0; k < 80; k++, i++) one(ctx, t, i, tessera_kv_len(ctx)); /* n_kv crosses 32, 64, 96 */
    many(ctx, t, i, tessera_kv_len(ctx), 5);                                 /* another batch size */
    i += 5;
    for (int32_t k = 0; k < 6; k++, i++) one(ctx, t, i, tessera_kv_len(ctx));
    assert_int_equal(tessera_kv_truncate(ctx, tessera_kv_len(ctx) - 40), 0); /* back below a pad boundary */
    for (int32_t k = 0; k < 8; k++, i++) one(ctx, t, i, tessera_kv_len(ctx));
    one(ctx, t, i++, tessera_kv_len(ctx) - 3); /* a rewinding decode */
    for (int32_t k = 0; k < 4; k++, i++) one(ctx, t, i, tessera_kv_len(ctx));

    /* A context shift: its own graph runs on the scheduler in between. */
    if (tessera_seq_shift(ctx, 0, 4, 30) != 0) fail_msg("shift: %s", tessera_last_error());
    for (int32_t k = 0; k < 10; k++, i++) one(ctx, t, i, tessera_kv_len(ctx));

    /* Save, go on, load it back, go on another way. */
    size_t len = 0;
    void *st = tessera_state_save(ctx, -1, NULL, 0, NULL, &len);
    if (!st) fail_msg("state save: %s", tessera_last_error());
    for (int32_t k = 0; k < 7; k++, i++) one(ctx, t, i, tessera_kv_len(ctx));
    int32_t n_tok = 0;
    if (tessera_state_load(ctx, -1, st, len, NULL, NULL, 0, &n_tok, NULL) != 0)
        fail_msg("state load: %s", tessera_last_error());
    free(st);
    for (int32_t k = 0; k < 7; k++, i++) one(ctx, t, i + 1000, tessera_kv_len(ctx));
}

/* Several sequences through tessera_decode_batch: one, then three side by
 * side, one of them removed, a new one started. */
static void script_batch(tessera_context *ctx, trace *t) {
    const int32_t nv = tessera_model_n_vocab(g_model);
    int32_t len[3] = {0, 0, 0};
    uint32_t i = 0;
    for (int32_t step = 0; step < 90; step++) {
        tessera_token tok[3];
        int32_t pos[3], seq[3], n = 0;
        for (int32_t s = 0; s < 3; s++) {
            bool live = s == 0 || (s == 1 && step >= 10) || (s == 2 && step >= 20 && step < 60);
            if (!live) continue;
            tok[n] = token_at(i++, (uint32_t)s + 3);
            pos[n] = len[s]++;
            seq[n++] = s;
        }
        if (step == 60) { /* sequence 2 is done: its cells go */
            assert_int_equal(tessera_seq_remove(ctx, 2, 0), 0);
            len[2] = 0;
        }
        const bool want[3] = {true, true, true};
        if (tessera_decode_batch(ctx, tok, pos, seq, want, n) != 0)
            fail_msg("batch step %d: %s", step, tessera_last_error());
        for (int32_t k = 0; k < n; k++) trace_add(t, tessera_logits(ctx, k), nv);
    }
}

static void compare(const trace *a, const trace *b, const char *what) {
    assert_int_equal(a->n, b->n);
    size_t first = a->n;
    for (size_t k = 0; k < a->n && first == a->n; k++)
        if (memcmp(&a->v[k], &b->v[k], sizeof(float)) != 0) first = k;
    if (first != a->n)
        fail_msg("%s: logit %zu (row %zu) differs: %.9g with reuse, %.9g without", what, first,
                 first / (size_t)tessera_model_n_vocab(g_model), (double)a->v[first], (double)b->v[first]);
}

static void run(void (*script)(tessera_context *, trace *), uint32_t n_ctx, uint32_t n_seq, const char *what) {
    tessera_context *on = new_ctx(n_ctx, n_seq, true), *off = new_ctx(n_ctx, n_seq, false);
    trace a = {0}, b = {0};
    script(on, &a);
    script(off, &b);
    compare(&a, &b, what);
    print_message("%s: %zu logits the same; with reuse %d graphs built, %d reused; without %d built\n", what, a.n,
                  on->step.n_built, on->step.n_reused, off->step.n_built);
    assert_int_equal(off->step.n_reused, 0);
    assert_true(on->step.n_reused > 2 * on->step.n_built);
    free(a.v);
    free(b.v);
    tessera_context_free(on);
    tessera_context_free(off);
}

TEST(test_single) {
    run(script_single, 512, 1, "one sequence");
}

TEST(test_batch) {
    run(script_batch, 512, 3, "three sequences");
}

/* The window model: 300 single tokens reuse the 256 window cells. */
static void script_window(tessera_context *ctx, trace *t) {
    many(ctx, t, 0, 0, 40);
    for (uint32_t k = 0; k < 300; k++) one(ctx, t, 40 + k, tessera_kv_len(ctx));
    assert_int_equal(tessera_kv_truncate(ctx, tessera_kv_len(ctx) - 5), 0);
    for (uint32_t k = 0; k < 10; k++) one(ctx, t, 500 + k, tessera_kv_len(ctx));
}

TEST(test_window) {
    run(script_window, 1024, 1, "sliding window");
}

/* --trace: the one-sequence script's logits to a file. */
static int write_trace(const char *file) {
    tessera_context *ctx = new_ctx(512, 1, true);
    trace t = {0};
    script_single(ctx, &t);
    FILE *f = fopen(file, "wb");
    int rc = !f || fwrite(t.v, sizeof *t.v, t.n, f) != t.n;
    if (f && fclose(f) != 0) rc = 1;
    printf("%zu logits to %s; %d graphs built, %d reused\n", t.n, file, ctx->step.n_built, ctx->step.n_reused);
    free(t.v);
    tessera_context_free(ctx);
    return rc;
}

/* Usage: test_step_graph llama|fa|swa|MODEL_NAME [DEVICE|cpu [--trace FILE]]: stories260K
 * (llama, fa: flash attention), the synthetic gemma3 (swa) or shared/models/MODEL_NAME.gguf, on
 * DEVICE or (default "cpu") the build's first CPU plugin device. With --trace only the trace. */
FIXTURE(setup) {
    const char *mode = harness_arg(1) ? harness_arg(1) : "llama";
    g_fa = !strcmp(mode, "fa");
    harness_path path = !strcmp(mode, "swa") ? harness_source_file("tests/data/synth-gemma3-swa16-f32.gguf")
                        : g_fa || !strcmp(mode, "llama") ? harness_model_file("stories260K")
                                                         : harness_model_file(mode);
    harness_host_start();
    const char *devices = harness_arg(2) ? harness_arg(2) : "cpu";
    if (!strcmp(devices, "cpu")) {
        const char *build = getenv("TESSERA_BUILD_ROOT");
        devices = harness_cpu_plugin();
        if (!devices) harness_skip("no CPU plugin device in %s", build ? build : "(no TESSERA_BUILD_ROOT)");
    }
    printf("%s on %s\n", path.s, devices);
    g_model = harness_model_load(path.s, devices, NULL);
    return 0;
}

FIXTURE(teardown) {
    tessera_model_free(g_model);
    tessera_shutdown();
    return 0;
}

TEST(test_trace) {
    EXPECT(write_trace(harness_arg(4)) == 0, "trace %s", harness_arg(4));
}

int main(int argc, char **argv) {
    const struct CMUnitTest single[] = {HARNESS_TEST(test_single), HARNESS_TEST(test_batch)};
    const struct CMUnitTest window[] = {HARNESS_TEST(test_window)};
    const struct CMUnitTest trace[] = {HARNESS_TEST(test_trace)};
    if (argc > 4 && !strcmp(argv[3], "--trace"))
        return HARNESS_RUN_GROUP("step graph trace", trace, setup, teardown, argc, argv);
    if (argc > 1 && !strcmp(argv[1], "swa"))
        return HARNESS_RUN_GROUP("step graph reuse", window, setup, teardown, argc, argv);
    return HARNESS_RUN_GROUP("step graph reuse", single, setup, teardown, argc, argv);
}
