/*
 * The context shift (tessera_seq_shift) on stories260K, ref: RoPE makes
 * attention depend on position differences only, so 60 tokens decoded at
 * positions 40..99 and then shifted down by 40 must give the logits of the
 * same 60 tokens decoded at 0..59 in a fresh context, for the next tokens
 * at 60, 61, ... With an F32 cache within 1e-4 (measured 4.3e-6). With F16
 * within 2e-2 (measured 8.8e-3): the two contexts round their keys to F16
 * at other angles (and the shifted one twice), which stories260K's small
 * logits feel. A shift that kept the old angles, or turned by the wrong
 * sign, is off by whole logits. Bad ranges are one-line errors.
 *
 * On a real model with quantized weights (the optional MODEL and DEVICE
 * arguments) the logits are not invariant to a move of positions even
 * without a shift: rope's f32 angles change the attention output in the
 * last bits, and the 8-bit rounding of the activations before each
 * quantized product turns some of those into whole steps. There the bound
 * is that noise: the same tokens decoded at 40.. against at 0.. with no
 * shift at all (SmolLM2 Q4_1 on ref, F32 cache: 0.61), and the shifted
 * context may differ from the fresh one by at most 1.5 times it (measured
 * 0.50). A shift with a wrong angle is off by several logits.
 *
 * With a quantized cache (q8_0, q4_0: K and V, flash attention; stories260K's
 * heads are too small for blocks, so a MODEL is needed) the keys are stored
 * turned by a Hadamard matrix (kv.h: Rotation): the shift turns them back,
 * ropes and turns again. The bound is the position noise again (the moved
 * and the fresh context round their keys at other angles, the shifted one
 * twice); a shift that roped the turned keys directly is off by whole
 * logits.
 *
 * The same shift on the build's first CPU plugin device (cpu-avx0 or
 * cpu-neon0, from $TESSERA_BUILD_ROOT), against the fresh context on ref:
 * within the bound above plus CPU_TOL; "skipped" when the build has none.
 *
 * Usage: test_kv_shift f32|f16|q8_0|q4_0 [MODEL DEVICE]  (default stories260K on ref;
 * a MODEL without '/' is looked up in $TESSERA_MODEL_CACHE, else
 * ~/.cache/tessera/models, and the test skips when it is absent)
 */

#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "host/host.h"
#include "../logits_util.h"
#include "model_test.h"

enum { N = 60, FROM = 40, N_NEXT = 8 };

static tessera_model *g_model;
static tessera_model *g_cpu_model; /* the same file on a CPU plugin, or NULL */
static tessera_kv_type g_kv = TESSERA_KV_F32;
static bool g_real; /* a real model: the bound is the position noise */
static double g_bound; /* test_shift's bound, which test_shift_cpu adds CPU_TOL to */

/* A CPU plugin against ref at the same positions, beyond the shift's own
 * bound (stories260K and synthetic smollm3, f32 weights: measured below
 * 1e-5 over the shift's difference on ref; SmolLM2 Q4_1, whose 8-bit
 * activations round differently, 0.603 where its bound is 0.909). */
#define CPU_TOL 1e-3

static tessera_context *new_ctx_on(tessera_model *m) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 32;
    cp.n_threads = 1;
    cp.kv_type = g_kv;
    if (g_kv == TESSERA_KV_Q8_0 || g_kv == TESSERA_KV_Q4_0) cp.flash_attn = TESSERA_FLASH_ATTN_ON;
    tessera_context *ctx = tessera_context_new(m, &cp);
    if (!ctx) fail_msg("context: %s", tessera_last_error());
    return ctx;
}

static tessera_context *new_ctx(void) { return new_ctx_on(g_model); }

static tessera_token token_at(int32_t i) { return (tessera_token)(3 + (i * 7919 + 13) % 500); }

/* Decode n tokens of sequence 0 at positions p0..; keep the last row. */
static void decode(tessera_context *ctx, const tessera_token *t, int32_t n, int32_t p0) {
    int32_t pos[N], seq[N] = {0};
    bool want[N] = {0};
    for (int32_t i = 0; i < n; i++) pos[i] = p0 + i;
    want[n - 1] = true;
    if (tessera_decode_batch(ctx, t, pos, seq, want, n) != 0) fail_msg("decode: %s", tessera_last_error());
}

/* The largest logit difference between the two contexts over the N_NEXT
 * tokens after the first N, decoded into both at positions N.. */
static double next_tokens_diff(tessera_context *shifted, tessera_context *fresh, const tessera_token *toks,
                               int32_t nv) {
    double worst = 0;
    for (int32_t k = 0; k < N_NEXT; k++) {
        decode(shifted, &toks[N + k], 1, N + k);
        decode(fresh, &toks[N + k], 1, N + k);
        worst = fmax(worst, max_diff(tessera_logits(shifted, 0), tessera_logits(fresh, 0), (size_t)nv));
    }
    return worst;
}

TEST(test_shift) {
    const int32_t nv = tessera_model_n_vocab(g_model);
    tessera_token toks[N + N_NEXT];
    for (int32_t i = 0; i < N + N_NEXT; i++) toks[i] = token_at(i);
    tessera_context *shifted = new_ctx(), *fresh = new_ctx();
    double bound = g_kv == TESSERA_KV_F32 ? 1e-4 : 2e-2;
    if (g_real) {
        /* The noise: at FROM.. against at 0.., no shift. */
        tessera_context *moved = new_ctx();
        decode(moved, toks, N, FROM);
        decode(fresh, toks, N, 0);
        double noise = 0;
        for (int32_t k = 0; k < N_NEXT; k++) {
            decode(moved, &toks[N + k], 1, FROM + N + k);
            decode(fresh, &toks[N + k], 1, N + k);
            noise = fmax(noise, max_diff(tessera_logits(moved, 0), tessera_logits(fresh, 0), (size_t)nv));
        }
        print_message("no shift, at %d vs at 0: max logit difference %.3g\n", FROM, noise);
        tessera_context_free(moved);
        tessera_context_free(fresh);
        fresh = new_ctx();
        if (1.5 * noise > bound) bound = 1.5 * noise;
    }
    g_bound = bound;
    decode(shifted, toks, N, FROM);
    assert_int_equal(tessera_seq_shift(shifted, 0, 0, FROM), 0);
    assert_int_equal(tessera_seq_len(shifted, 0), N);
    assert_int_equal(tessera_kv_cells_used(shifted), N);
    decode(fresh, toks, N, 0);
    const double worst = next_tokens_diff(shifted, fresh, toks, nv);
    print_message("shifted vs fresh, %d next tokens: max logit difference %.3g\n", N_NEXT, worst);
    assert_true(worst <= bound);

    /* Keep 10, drop 20 of the 68: positions 30.. move to 10.. */
    assert_int_equal(tessera_seq_shift(shifted, 0, 10, 20), 0);
    assert_int_equal(tessera_seq_len(shifted, 0), N + N_NEXT - 20);
    assert_int_equal(tessera_kv_cells_used(shifted), N + N_NEXT - 20);

    /* Bad ranges. */
    assert_int_not_equal(tessera_seq_shift(shifted, 0, 10, 0), 0);
    assert_int_not_equal(tessera_seq_shift(shifted, 0, 40, 40), 0);
    assert_non_null(strstr(tessera_last_error(), "context shift"));
    assert_null(strchr(tessera_last_error(), '\n'));
    assert_int_not_equal(tessera_seq_shift(shifted, 99, 0, 1), 0);
    tessera_context_free(shifted);
    tessera_context_free(fresh);
}

/* The shift on the CPU plugin: its shifted context against a fresh one on
 * ref, for the next tokens, within test_shift's bound (run first) plus
 * CPU_TOL. */
TEST(test_shift_cpu) {
    model_test_need_cpu(g_cpu_model);
    const int32_t nv = tessera_model_n_vocab(g_model);
    tessera_token toks[N + N_NEXT];
    for (int32_t i = 0; i < N + N_NEXT; i++) toks[i] = token_at(i);
    tessera_context *shifted = new_ctx_on(g_cpu_model), *fresh = new_ctx();
    decode(shifted, toks, N, FROM);
    assert_int_equal(tessera_seq_shift(shifted, 0, 0, FROM), 0);
    decode(fresh, toks, N, 0);
    const double worst = next_tokens_diff(shifted, fresh, toks, nv);
    print_message("shifted on %s vs fresh on ref, %d next tokens: max logit difference %.3g (bound %.3g)\n",
                  tessera_model_devices(g_cpu_model), N_NEXT, worst, g_bound + CPU_TOL);
    assert_true(g_bound > 0 && worst <= g_bound + CPU_TOL);
    tessera_context_free(shifted);
    tessera_context_free(fresh);
}

/* Usage: test_kv_shift f32|f16|q8_0|q4_0 [MODEL DEVICE] */
FIXTURE(setup) {
    const char *kv = harness_arg(1) ? harness_arg(1) : "f32";
    if (!strcmp(kv, "f16")) g_kv = TESSERA_KV_F16;
    if (!strcmp(kv, "q8_0")) g_kv = TESSERA_KV_Q8_0;
    if (!strcmp(kv, "q4_0")) g_kv = TESSERA_KV_Q4_0;
    g_real = harness_argc() > 3;
    harness_path path = harness_model_file(g_real ? harness_arg(2) : "stories260K");
    g_model = model_test_open(path.s, g_real ? harness_arg(3) : "ref", &g_cpu_model);
    return 0;
}

FIXTURE(teardown) {
    model_test_close(g_model, g_cpu_model);
    return 0;
}

HARNESS_MAIN_GROUP("kv shift", setup, teardown, HARNESS_TEST(test_shift), HARNESS_TEST(test_shift_cpu))
