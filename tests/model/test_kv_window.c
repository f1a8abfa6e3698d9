/*
 * The sliding-window KV cache (kv.h: SWA layers get their own window +
 * batch cells) against the full cache (swa_full), on a synthetic gemma3
 * file with a window of 16 (tests/data/synth-gemma3-swa16-f32.gguf): 5 of
 * its 6 layers attend through the window, and its 256 window cells are
 * reused three times over by 750 positions.
 *
 *   window   same logits within 1e-4 over a 600-token prompt in batches of
 *            32 and 150 single tokens after it; rewinding inside the window
 *            keeps the cache, rewinding past it clears it with a clear error
 *   batch    three sequences side by side (tessera_decode_batch, n_seq_max
 *            3): each sequence's logits as with the full cache
 *   gemma    Gemma 3 270M at -c 32768: KV cache <= 115 MiB with F16
 *            (llama.cpp: 111 MiB), skipped (77) when the model is absent
 *
 * window and batch also run the windowed cache on the first CPU plugin
 * device of the build (cpu-avx0 or cpu-neon0, from $TESSERA_BUILD_ROOT):
 * its logits within CPU_TOL of ref's windowed ones, over the same 750
 * positions (window) or 3 x 300 (batch); that part says "skipped" when the
 * build has no CPU plugin.
 *
 * Usage: test_kv_window window|batch|gemma [fa]   (fa: with flash attention)
 */

#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "host/host.h"
#include "model/public.h"
#include "../logits_util.h"
#include "model_test.h"

enum { N_VOCAB_USED = 500, WINDOW = 16 };

/* A CPU plugin's windowed cache against ref's, f32 weights and an F16
 * cache: f32 sums against ref's double ones through 6 layers, some landing
 * on the other side of an F16 rounding in the cache (cpu-avx0 measured
 * 2.6e-3 window, 2.4e-3 window with flash attention, 3.2e-3 batch). */
#define CPU_TOL 1e-2

static tessera_model *g_model;
static tessera_model *g_cpu_model; /* the same file on a CPU plugin, or NULL */
static bool g_flash_attn; /* second argument "fa": the FLASH_ATTN path */

/* A fixed pseudo-random token stream (ids 3..502): attention then has
 * something different to look at in every cell. */
static tessera_token token_at(uint32_t i, uint32_t salt) {
    uint32_t x = (i + 1) * 2654435761u ^ (salt * 40503u);
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (tessera_token)(3 + x % N_VOCAB_USED);
}

static tessera_context *new_ctx_on(tessera_model *m, uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq, bool full) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.n_seq_max = n_seq;
    cp.swa_full = full;
    cp.flash_attn = g_flash_attn ? TESSERA_FLASH_ATTN_ON : TESSERA_FLASH_ATTN_OFF;
    tessera_context *ctx = tessera_context_new(m, &cp);
    if (!ctx) fail_msg("context: %s", tessera_last_error());
    return ctx;
}

static tessera_context *new_ctx(uint32_t n_ctx, uint32_t n_batch, uint32_t n_seq, bool full) {
    return new_ctx_on(g_model, n_ctx, n_batch, n_seq, full);
}

/* toks[0, n_prompt) as one prompt (every row's logits), then n_gen single
 * tokens, into a and b; the largest difference between their logits. */
static double decode_worst(tessera_context *a, tessera_context *b, const tessera_token *toks, int32_t n_prompt,
                           int32_t n_gen) {
    const int32_t nv = tessera_model_n_vocab(g_model);
    assert_int_equal(tessera_decode(a, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS), 0);
    assert_int_equal(tessera_decode(b, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS), 0);
    double worst = 0;
    for (int32_t i = 0; i < n_prompt; i++) {
        double d = max_diff(tessera_logits(a, i), tessera_logits(b, i), nv);
        if (d > worst) worst = d;
    }
    for (int32_t i = n_prompt; i < n_prompt + n_gen; i++) {
        assert_int_equal(tessera_decode(a, &toks[i], 1, i, 0), 0);
        assert_int_equal(tessera_decode(b, &toks[i], 1, i, 0), 0);
        double d = max_diff(tessera_logits(a, -1), tessera_logits(b, -1), nv);
        if (d > worst) worst = d;
    }
    return worst;
}

TEST(test_window) {
    const int32_t nv = tessera_model_n_vocab(g_model), n_prompt = 600, n_gen = 150;
    tessera_context *w = new_ctx(1024, 32, 1, false), *f = new_ctx(1024, 32, 1, true);
    /* The windowed context has a second cell set of window + batch rounded
     * to 256 cells for the SWA layers; the full one does not. */
    assert_int_equal(w->kv->n_sets, 2);
    assert_int_equal(kv_cache_set_size(w->kv, 1), 256);
    assert_int_equal(f->kv->n_sets, 1);
    assert_true(kv_cache_nbytes(w->kv) < kv_cache_nbytes(f->kv) / 2);

    tessera_token *toks = malloc((size_t)(n_prompt + n_gen) * sizeof *toks);
    assert_non_null(toks);
    for (int32_t i = 0; i < n_prompt + n_gen; i++) toks[i] = token_at((uint32_t)i, 1);
    double worst = decode_worst(w, f, toks, n_prompt, n_gen);
    print_message("window vs full cache over %d positions: max logit difference %.3g\n", n_prompt + n_gen,
                  worst);
    assert_true(worst <= 1e-4);
    /* The window cells are full and were reused: fewer than the positions. */
    assert_int_equal(kv_cache_set_used(w->kv, 0), n_prompt + n_gen);
    assert_true(kv_cache_set_used(w->kv, 1) < 256);
    assert_true(kv_cache_set_used(w->kv, 1) >= WINDOW - 1);

    /* Rewinding a few tokens stays inside what the window cells hold. */
    const int32_t back = n_prompt + n_gen - 4;
    assert_int_equal(tessera_kv_truncate(w, back), 0);
    assert_int_equal(tessera_kv_len(w), back);
    tessera_token t = token_at(9999, 2);
    assert_int_equal(tessera_decode(w, &t, 1, back, 0), 0);
    assert_int_equal(tessera_decode(f, &t, 1, back, 0), 0);
    assert_true(max_diff(tessera_logits(w, -1), tessera_logits(f, -1), nv) <= 1e-4);

    /* Going back to position 50 needs positions 35..49, long dropped: the
     * call fails with a one-line error and the cache is cleared. */
    assert_int_not_equal(tessera_decode(w, &t, 1, 50, 0), 0);
    const char *msg = tessera_last_error();
    print_message("rewind past the window -> %s\n", msg);
    assert_non_null(strstr(msg, "sliding-window"));
    assert_null(strchr(msg, '\n'));
    assert_int_equal(tessera_kv_len(w), 0);
    assert_int_equal(tessera_kv_cells_used(w), 0);
    /* and it starts over from 0 as a fresh context would. */
    assert_int_equal(tessera_decode(w, toks, 40, 0, 0), 0);
    assert_int_equal(tessera_decode(f, toks, 40, 0, 0), 0);
    assert_true(max_diff(tessera_logits(w, -1), tessera_logits(f, -1), nv) <= 1e-4);
    free(toks);
    tessera_context_free(w);
    tessera_context_free(f);
}

/* test_window's prompt and generation with the windowed cache on the CPU
 * plugin and on ref. */
TEST(test_window_cpu) {
    model_test_need_cpu(g_cpu_model);
    const int32_t n_prompt = 600, n_gen = 150;
    tessera_context *r = new_ctx(1024, 32, 1, false), *c = new_ctx_on(g_cpu_model, 1024, 32, 1, false);
    assert_int_equal(c->kv->n_sets, 2);
    tessera_token *toks = malloc((size_t)(n_prompt + n_gen) * sizeof *toks);
    assert_non_null(toks);
    for (int32_t i = 0; i < n_prompt + n_gen; i++) toks[i] = token_at((uint32_t)i, 1);
    double worst = decode_worst(c, r, toks, n_prompt, n_gen);
    print_message("window cache, %s vs ref over %d positions: max logit difference %.3g (tolerance %g)\n",
                  tessera_model_devices(g_cpu_model), n_prompt + n_gen, worst, CPU_TOL);
    assert_true(worst <= CPU_TOL);
    assert_true(kv_cache_set_used(c->kv, 1) < 256);
    free(toks);
    tessera_context_free(r);
    tessera_context_free(c);
}

enum { N_SEQ = 3, STEP = 9, LEN = 300 };

/* Three sequences of different lengths decoded together in w and f, 9
 * tokens each per call until each has 300 positions; the largest
 * difference between their logits. */
static double batch_worst(tessera_context *w, tessera_context *f) {
    const int32_t nv = tessera_model_n_vocab(g_model);
    tessera_token toks[N_SEQ * STEP];
    int32_t pos[N_SEQ * STEP], seq[N_SEQ * STEP];
    bool want[N_SEQ * STEP];
    double worst = 0;
    for (int32_t p0 = 0; p0 < LEN; p0 += STEP) {
        int32_t n = 0;
        for (int32_t s = 0; s < N_SEQ; s++)
            for (int32_t k = 0; k < STEP && p0 + k < LEN; k++, n++) {
                toks[n] = token_at((uint32_t)(p0 + k), (uint32_t)s + 10);
                pos[n] = p0 + k;
                seq[n] = s;
                want[n] = k == STEP - 1 || p0 + k == LEN - 1;
            }
        assert_int_equal(tessera_decode_batch(w, toks, pos, seq, want, n), 0);
        int32_t rows = 0;
        for (int32_t i = 0; i < n; i++) rows += want[i];
        float *ref = malloc((size_t)rows * (size_t)nv * sizeof *ref);
        assert_non_null(ref);
        for (int32_t r = 0; r < rows; r++) memcpy(ref + (size_t)r * nv, tessera_logits(w, r), (size_t)nv * 4);
        assert_int_equal(tessera_decode_batch(f, toks, pos, seq, want, n), 0);
        for (int32_t r = 0; r < rows; r++) {
            double d = max_diff(ref + (size_t)r * nv, tessera_logits(f, r), nv);
            if (d > worst) worst = d;
        }
        free(ref);
    }
    return worst;
}

TEST(test_batch) {
    tessera_context *w = new_ctx(2048, 32, N_SEQ, false), *f = new_ctx(2048, 32, N_SEQ, true);
    assert_int_equal(w->kv->n_sets, 2);
    assert_int_equal(f->kv->n_sets, 1);
    double worst = batch_worst(w, f);
    print_message("3 sequences, window vs full cache: max logit difference %.3g\n", worst);
    assert_true(worst <= 1e-4);
    for (int32_t s = 0; s < N_SEQ; s++) assert_int_equal(tessera_seq_len(w, s), LEN);
    /* Removing the tail keeps the sequence when its window is held ... */
    assert_int_equal(tessera_seq_remove(w, 1, LEN - 3), 0);
    assert_int_equal(tessera_seq_len(w, 1), LEN - 3);
    /* ... and clears it when not; the other sequences keep theirs. */
    assert_int_equal(tessera_seq_remove(w, 1, 20), 0);
    assert_int_equal(tessera_seq_len(w, 1), 0);
    assert_int_equal(tessera_seq_len(w, 0), LEN);
    assert_int_equal(tessera_seq_len(w, 2), LEN);
    /* A sequence asked to go on where its window is gone: a clear error. */
    tessera_token t = 7;
    int32_t p = 40, s0 = 0;
    assert_int_not_equal(tessera_decode_batch(w, &t, &p, &s0, NULL, 1), 0);
    assert_non_null(strstr(tessera_last_error(), "sliding-window"));
    tessera_context_free(w);
    tessera_context_free(f);
}

/* The same three sequences with the windowed cache on the CPU plugin and
 * on ref. */
TEST(test_batch_cpu) {
    model_test_need_cpu(g_cpu_model);
    tessera_context *c = new_ctx_on(g_cpu_model, 2048, 32, N_SEQ, false), *r = new_ctx(2048, 32, N_SEQ, false);
    assert_int_equal(c->kv->n_sets, 2);
    double worst = batch_worst(c, r);
    print_message("3 sequences, window cache, %s vs ref: max logit difference %.3g (tolerance %g)\n",
                  tessera_model_devices(g_cpu_model), worst, CPU_TOL);
    assert_true(worst <= CPU_TOL);
    for (int32_t s = 0; s < N_SEQ; s++) assert_int_equal(tessera_seq_len(c, s), LEN);
    tessera_context_free(c);
    tessera_context_free(r);
}

TEST(test_gemma) {
    tessera_context *w = new_ctx(32768, 512, 1, false);
    const double mib = (double)kv_cache_nbytes(w->kv) / (1024.0 * 1024.0);
    print_message("Gemma 3 270M, -c 32768, F16: KV %.1f MiB (%d cells for its sliding-window layers)\n", mib,
                  w->kv->n_sets > 1 ? kv_cache_set_size(w->kv, 1) : 32768);
    assert_true(mib <= 115.0);
    tessera_context_free(w);
}

/* Usage: test_kv_window window|batch|gemma [fa]: the synthetic gemma3 file
 * (tests/data) on ref and the CPU plugin, or Gemma 3 270M (model cache). */
static const char *which(void) {
    return harness_arg(1) ? harness_arg(1) : "";
}

FIXTURE(setup) {
    g_flash_attn = harness_argc() > 2 && !strcmp(harness_arg(2), "fa");
    bool gemma = !strcmp(which(), "gemma");
    harness_path path = gemma ? harness_model_file("gemma-3-270m-q4_k_m.gguf")
                              : harness_source_file("tests/data/synth-gemma3-swa16-f32.gguf");
    g_model = model_test_open(path.s, "ref", gemma ? NULL : &g_cpu_model);
    return 0;
}

FIXTURE(teardown) {
    model_test_close(g_model, g_cpu_model);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest window[] = {HARNESS_TEST(test_window), HARNESS_TEST(test_window_cpu)};
    const struct CMUnitTest batch[] = {HARNESS_TEST(test_batch), HARNESS_TEST(test_batch_cpu)};
    const struct CMUnitTest gemma[] = {HARNESS_TEST(test_gemma)};
    const char *w = argc > 1 ? argv[1] : "";
    if (!strcmp(w, "window")) return HARNESS_RUN_GROUP("kv window", window, setup, teardown, argc, argv);
    if (!strcmp(w, "batch")) return HARNESS_RUN_GROUP("kv window batch", batch, setup, teardown, argc, argv);
    if (!strcmp(w, "gemma")) return HARNESS_RUN_GROUP("kv window gemma", gemma, setup, teardown, argc, argv);
    printf("usage: test_kv_window window|batch|gemma [fa]\n");
    return 2;
}
