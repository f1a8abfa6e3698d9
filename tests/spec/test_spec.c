/*
 * Speculative decoding (tessera_spec_*) on ref, against plain decoding of
 * the same target (decode one token, sample, repeat):
 *
 * - stories260K drafting for itself: greedy text identical, every draft
 *   token accepted (the draft sees what the target sees).
 * - synth-s-f32 (tests/data/models) with its own Q4_0 as the draft: the
 *   same weights rounded, so most drafts agree and some do not: greedy text
 *   identical, acceptance strictly between 0 and 1.
 * - stories260K with a different synthetic model (synth-smollm3-f32,
 *   random weights on stories260K's vocabulary) and --draft-p-min 0: few
 *   drafts agree; the text is still identical.
 * - n-grams (no draft model) on a repetitive prompt: drafts are made and
 *   some accepted; text identical.
 * - sampling (temperature 0.8, top-k 40, seeds 1 and 2) with the Q4_0 draft:
 *   the same text as plain sampling with the same seed, token for token
 *   (the engine draws with the target's own sampler, once per output token).
 *   Asserted on ref only: a CPU or GPU plugin's logits for a verified batch
 *   and for one token at a time differ within its tolerance (about 1e-3),
 *   enough to move a seeded draw that lands near a boundary (cpu-avx at
 *   avx2 parts at token 42 of seed 1); there the place they part is
 *   printed, and greedy identity is what is asserted.
 * - a draft whose vocabulary differs (tessera-synth: 300 tokens; another
 *   BOS id) is refused with an error naming the difference.
 *
 * On ref by default; a DEVICE argument runs the same on that device
 * ("cpu": the build's CPU plugin; "vulkan0": lavapipe's), skipped when the
 * build has none.
 *
 * Usage: test_spec TESSERA_SYNTH [DEVICE]
 */
#include "harness.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <tessera/tessera.h>

enum { N_GEN = 48, MAX_TOK = 512 };

static const char *g_dev = "ref";
/* generate() hands the prompt to the draft model with tessera_spec_prefill
 * before the first step (as tessera run and chat do) */
static bool g_prefill;

static tessera_model *load(const char *name) {
    harness_path path = harness_model_file(name);
    return harness_model_load(path.s, g_dev, NULL);
}

static tessera_context *new_ctx(tessera_model *m) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 64;
    cp.n_threads = 1;
    return harness_context(m, &cp);
}

static tessera_sampler *new_sampler(const tessera_model *m, uint32_t seed, bool greedy) {
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.seed = seed;
    if (greedy) sp.temp = 0.0f;
    tessera_sampler *s = tessera_sampler_new(tessera_model_n_vocab(m), &sp);
    REQUIRE(s, "sampler: %s", tessera_last_error());
    return s;
}

/* N_GEN tokens after the prompt into out (fewer at an end of text); with
 * spec through tessera_spec_step. Returns the count. */
static int32_t generate(tessera_model *m, tessera_context *ctx, tessera_spec *spec, const char *prompt, uint32_t seed,
                        bool greedy, tessera_token *out) {
    tessera_token toks[MAX_TOK];
    int32_t n = tessera_tokenize(m, prompt, strlen(prompt), toks, MAX_TOK, true, false);
    REQUIRE(n > 0 && n < MAX_TOK - N_GEN - 20, "prompt: %d tokens", n);
    tessera_sampler *smp = new_sampler(m, seed, greedy);
    for (int32_t i = 0; i < n; i++) tessera_sampler_accept(smp, toks[i]);
    REQUIRE(tessera_decode(ctx, toks, n, 0, 0) == 0, "prompt: %s", tessera_last_error());
    if (spec && g_prefill) REQUIRE(tessera_spec_prefill(spec, 0, toks, n) == 0, "prefill: %s", tessera_last_error());
    int32_t n_out = 0;
    tessera_token t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
    tessera_sampler_accept(smp, t);
    while (n_out < N_GEN) {
        out[n_out++] = t;
        toks[n++] = t;
        if (tessera_token_is_eog(m, t) || n_out == N_GEN) break;
        if (!spec) {
            REQUIRE(tessera_decode(ctx, &t, 1, n - 1, 0) == 0, "decode: %s", tessera_last_error());
            t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
            tessera_sampler_accept(smp, t);
            continue;
        }
        tessera_token got[32];
        int32_t k = tessera_spec_step(spec, 0, smp, toks, n, got, N_GEN - n_out < 32 ? N_GEN - n_out : 32, NULL);
        REQUIRE(k >= 1, "step: %s", tessera_last_error());
        REQUIRE(tessera_kv_len(ctx) == n + k - 1, "cache holds %d, want %d", tessera_kv_len(ctx), n + k - 1);
        for (int32_t i = 0; i < k - 1 && n_out < N_GEN; i++) {
            out[n_out++] = got[i];
            toks[n++] = got[i];
        }
        t = got[k - 1];
    }
    tessera_sampler_free(smp);
    return n_out;
}

/* Plain and speculative greedy (or seeded) text of target with draft model
 * dm (NULL: n-grams); returns the acceptance rate, checks identity. */
static double compare(const char *what, tessera_model *tm, tessera_model *dm, const tessera_spec_params *sp,
                      const char *prompt, uint32_t seed, bool greedy) {
    tessera_token plain[N_GEN], fast[N_GEN];
    tessera_context *c1 = new_ctx(tm);
    const int32_t n1 = generate(tm, c1, NULL, prompt, seed, greedy, plain);
    tessera_context_free(c1);
    tessera_context *tc = new_ctx(tm), *dc = dm ? new_ctx(dm) : NULL;
    tessera_spec *spec = tessera_spec_new(tc, dc, sp);
    REQUIRE(spec, "spec: %s", tessera_last_error());
    const int32_t n2 = generate(tm, tc, spec, prompt, seed, greedy, fast);
    tessera_spec_stats st;
    tessera_spec_stats_get(spec, -1, &st);
    const double rate = st.n_drafted ? (double)st.n_accepted / (double)st.n_drafted : 0;
    print_message("%s: %d tokens, %lld steps, drafted %lld, accepted %lld (%.3f)\n", what, n2, (long long)st.n_steps,
                  (long long)st.n_drafted, (long long)st.n_accepted, rate);
    /* Greedy everywhere, seeded draws on ref only (see the top comment). */
    const bool exact = greedy || strcmp(g_dev, "ref") == 0;
    int32_t parted = -1;
    for (int32_t i = 0; i < n1 && i < n2 && parted < 0; i++)
        if (plain[i] != fast[i]) parted = i;
    if (exact) {
        EXPECT(n1 == n2, "%s: %d tokens plain, %d speculative", what, n1, n2);
        if (parted >= 0)
            ADD_FAILURE("%s: token %d is %d plain, %d speculative", what, parted, plain[parted], fast[parted]);
    } else if (parted >= 0) {
        print_message("%s on %s: parts from plain sampling at token %d (not asserted off ref)\n", what, g_dev,
                      parted);
    }
    EXPECT(st.n_drafted > 0, "%s: nothing drafted", what);
    tessera_spec_free(spec);
    tessera_context_free(tc);
    tessera_context_free(dc);
    return rate;
}

static const char *PROMPT = "Once upon a time, there was a little girl named Lily.";

TEST(test_self_draft) {
    tessera_model *m = load("stories260K");
    tessera_spec_params sp = tessera_spec_default_params();
    sp.p_min = 0.0f; /* draft every time: all must be accepted */
    const double rate = compare("stories260K drafting for itself", m, m, &sp, PROMPT, 1, true);
    EXPECT(rate == 1.0, "acceptance %.3f, want 1", rate);
    tessera_model_free(m);
}

TEST(test_quantized_draft) {
    tessera_model *tm = load("synth-s-f32"), *dm = load("synth-s-Q4_0");
    tessera_spec_params sp = tessera_spec_default_params();
    sp.p_min = 0.0f;
    sp.n_max = 4;
    const double rate = compare("synth-s f32 with its Q4_0", tm, dm, &sp, PROMPT, 1, true);
    EXPECT(rate > 0.0 && rate < 1.0, "acceptance %.3f, want partial", rate);
    for (uint32_t seed = 1; seed <= 2; seed++) {
        char what[64];
        snprintf(what, sizeof what, "synth-s f32 with its Q4_0, sampling, seed %u", seed);
        compare(what, tm, dm, &sp, PROMPT, seed, false);
    }
    tessera_model_free(tm);
    tessera_model_free(dm);
}

/* The draft read the prompt beforehand: the same text, and the first
 * step's catch-up is the one token sampled since. */
TEST(test_prefilled_draft) {
    tessera_model *tm = load("synth-s-f32"), *dm = load("synth-s-Q4_0");
    tessera_spec_params sp = tessera_spec_default_params();
    sp.p_min = 0.0f;
    sp.n_max = 4;
    g_prefill = true;
    compare("synth-s f32 with its Q4_0, draft prefilled", tm, dm, &sp, PROMPT, 1, true);
    g_prefill = false;
    tessera_context *tc = new_ctx(tm), *dc = new_ctx(dm);
    tessera_spec *spec = tessera_spec_new(tc, dc, &sp);
    REQUIRE(spec, "spec: %s", tessera_last_error());
    tessera_token toks[MAX_TOK];
    const int32_t n = tessera_tokenize(tm, PROMPT, strlen(PROMPT), toks, MAX_TOK, true, false);
    REQUIRE(n > 1, "prompt: %d tokens", n);
    EXPECT(tessera_spec_prefill(spec, 0, toks, n) == 0, "prefill: %s", tessera_last_error());
    EXPECT(tessera_seq_len(dc, 0) == n, "the draft holds %d of %d prompt tokens", tessera_seq_len(dc, 0), n);
    /* again with the same text: nothing but the last token is read again */
    EXPECT(tessera_spec_prefill(spec, 0, toks, n) == 0, "prefill again: %s", tessera_last_error());
    EXPECT(tessera_seq_len(dc, 0) == n, "the draft holds %d after a second prefill, want %d", tessera_seq_len(dc, 0),
           n);
    EXPECT(tessera_spec_prefill(spec, TESSERA_MAX_SEQ, toks, n) != 0, "a sequence out of range was taken");
    EXPECT(strstr(tessera_last_error(), "sequence") != NULL, "error: %s", tessera_last_error());
    tessera_spec_free(spec);
    tessera_context_free(tc);
    tessera_context_free(dc);
    tessera_model_free(tm);
    tessera_model_free(dm);
}

TEST(test_other_draft) {
    tessera_model *tm = load("stories260K");
    char p[4096];
    snprintf(p, sizeof p, "%s/synth-smollm3-f32.gguf", getenv("TESSERA_TEST_DATA") ? getenv("TESSERA_TEST_DATA") : ".");
    harness_require_file(p);
    tessera_model *dm = harness_model_load(p, g_dev, NULL);
    tessera_spec_params sp = tessera_spec_default_params();
    sp.p_min = 0.0f;
    sp.n_max = 3;
    const double rate = compare("stories260K with synth-smollm3", tm, dm, &sp, PROMPT, 1, true);
    EXPECT(rate < 1.0, "acceptance %.3f from random weights", rate);
    tessera_model_free(tm);
    tessera_model_free(dm);
}

/* A draft model that never drafts (p_min 1: a random model is never
 * sure) is asked after 1, 2, 4, ... plain steps, not at every step: its
 * cache (tessera_seq_len) moves only when it is asked. */
TEST(test_useless_draft_backs_off) {
    tessera_model *tm = load("stories260K");
    char p[4096];
    snprintf(p, sizeof p, "%s/synth-smollm3-f32.gguf", getenv("TESSERA_TEST_DATA") ? getenv("TESSERA_TEST_DATA") : ".");
    harness_require_file(p);
    tessera_model *dm = harness_model_load(p, g_dev, NULL);
    tessera_spec_params sp = tessera_spec_default_params();
    sp.p_min = 1.0f;
    tessera_context *tc = new_ctx(tm), *dc = new_ctx(dm);
    tessera_spec *spec = tessera_spec_new(tc, dc, &sp);
    REQUIRE(spec, "spec: %s", tessera_last_error());
    tessera_token toks[MAX_TOK];
    int32_t n = tessera_tokenize(tm, PROMPT, strlen(PROMPT), toks, MAX_TOK, true, false);
    REQUIRE(n > 0 && n < MAX_TOK - 64, "prompt: %d tokens", n);
    REQUIRE(tessera_decode(tc, toks, n - 1, 0, 0) == 0, "prompt: %s", tessera_last_error());
    tessera_sampler *smp = new_sampler(tm, 1, true);
    int32_t asked = 0, steps = 0, held = tessera_seq_len(dc, 0);
    for (; steps < 40; steps++) {
        tessera_token got[4];
        int32_t k = tessera_spec_step(spec, 0, smp, toks, n, got, 4, NULL);
        REQUIRE(k == 1, "step %d: %d tokens (%s)", steps, k, k < 0 ? tessera_last_error() : "nothing drafted");
        if (tessera_seq_len(dc, 0) != held) asked++;
        held = tessera_seq_len(dc, 0);
        toks[n++] = got[0];
        if (tessera_token_is_eog(tm, got[0])) break;
    }
    print_message("useless draft: asked at %d of %d steps\n", asked, steps);
    /* 1, 2, 4, ... plain steps between tries: 6 tries in 40 steps */
    EXPECT(asked >= 2 && asked <= 8, "the draft model was asked at %d of %d steps", asked, steps);
    tessera_sampler_free(smp);
    tessera_spec_free(spec);
    tessera_context_free(tc);
    tessera_context_free(dc);
    tessera_model_free(tm);
    tessera_model_free(dm);
}

TEST(test_ngram) {
    tessera_model *m = load("stories260K");
    tessera_spec_params sp = tessera_spec_default_params();
    sp.ngram_n = 3;
    const char *rep = "The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the "
                      "log. The cat sat on the mat. The dog sat on the";
    const double rate = compare("n-grams, repetitive prompt", m, NULL, &sp, rep, 1, true);
    EXPECT(rate > 0.0, "acceptance %.3f", rate);
    tessera_model_free(m);
}

/* tessera-synth ARGS... into a file of the test's directory. */
static void synth(const char *out, const char *extra) {
    char cmd[8192];
    char stories[4096];
    snprintf(stories, sizeof stories, "%s", harness_model_file("stories260K").s);
    snprintf(cmd, sizeof cmd, "%s -q -o %s --vocab-from %s --dim 64 --layers 1 --heads 2 --ffn 64 --ctx 256 %s",
             harness_arg(1), out, stories, extra);
    int rc = system(cmd);
    REQUIRE(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s failed", cmd);
}

TEST(test_vocab_mismatch) {
    REQUIRE(harness_arg(1), "usage: test_spec TESSERA_SYNTH");
    tessera_model *tm = load("stories260K");
    char small[4200], bos[4200];
    snprintf(small, sizeof small, "%s/small-vocab.gguf", harness_tmpdir());
    snprintf(bos, sizeof bos, "%s/other-bos.gguf", harness_tmpdir());
    synth(small, "--vocab 300");
    synth(bos, "--set tokenizer.ggml.bos_token_id=7");
    tessera_model *a = harness_model_load(small, "ref", NULL), *b = harness_model_load(bos, "ref", NULL);
    EXPECT(tessera_spec_compatible(tm, a) != 0, "300 tokens accepted");
    EXPECT_HAS(tessera_last_error(), "vocabulary has 300 tokens, the target's 512", "error");
    EXPECT(tessera_spec_compatible(tm, b) != 0, "another BOS accepted");
    EXPECT_HAS(tessera_last_error(), "BOS is 7", "error");
    tessera_context *tc = new_ctx(tm), *dc = new_ctx(b);
    EXPECT(tessera_spec_new(tc, dc, NULL) == NULL, "made with another BOS");
    EXPECT_HAS(tessera_last_error(), "speculative: the draft model's BOS", "error");
    EXPECT(tessera_spec_compatible(tm, tm) == 0, "a model with itself: %s", tessera_last_error());
    tessera_spec_params sp = tessera_spec_default_params();
    sp.n_min = 20;
    sp.n_max = 16;
    EXPECT(tessera_spec_new(tc, NULL, &sp) == NULL, "--draft-min over --draft-max");
    EXPECT_HAS(tessera_last_error(), "--draft-min 20", "error");
    tessera_context_free(tc);
    tessera_context_free(dc);
    tessera_model_free(a);
    tessera_model_free(b);
    tessera_model_free(tm);
}

FIXTURE(setup) {
    harness_host_start();
    const char *dev = harness_arg(2);
    if (dev && !strcmp(dev, "cpu")) {
        g_dev = harness_cpu_plugin();
        if (!g_dev) harness_skip("no CPU plugin device in this build");
    } else if (dev) {
        tessera_device_info info[32];
        int32_t n = tessera_devices(info, 32);
        bool found = false;
        for (int32_t i = 0; i < n && i < 32; i++) found |= !strcmp(info[i].name, dev);
        if (!found) harness_skip("no device %s", dev);
        g_dev = dev;
    }
    return 0;
}

FIXTURE(teardown) {
    tessera_shutdown();
    return 0;
}

HARNESS_MAIN_GROUP("spec", setup, teardown, HARNESS_TEST(test_self_draft), HARNESS_TEST(test_quantized_draft),
                   HARNESS_TEST(test_prefilled_draft), HARNESS_TEST(test_other_draft),
                   HARNESS_TEST(test_useless_draft_backs_off),
                   HARNESS_TEST(test_ngram), HARNESS_TEST(test_vocab_mismatch))
