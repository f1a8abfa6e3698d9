/*
 * The embedding API's contract with stories260K (a decoder used as an
 * embedder) on ref: mean, cls and last pooling are the mean, the first and
 * the last of pooling none's rows; L2 normalisation gives unit vectors and
 * llama.cpp's other norms their sums; the errors (logits context, no tokens,
 * a token out of range, an input longer than the context, rank pooling
 * without a classification head, a bad pooling) are one-line messages and
 * leave the context usable; pooling names round-trip; a decoder's embedding
 * is the state its logits come from (output.weight times the last-pooled,
 * unnormalised vector gives the logits of a logits context).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"
#include "model/public.h"

/* stories260K on ref and a short prompt of its tokens (setup). */
static tessera_model *g_model;
static tessera_token g_toks[16];
static int32_t g_n;

static tessera_context *embed_ctx(tessera_model *m, int32_t pooling, uint32_t n_ctx) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    cp.embeddings = true;
    cp.pooling = pooling;
    return tessera_context_new(m, &cp);
}

/* A call that had to fail did, with a one-line message holding needle. */
static void expect_fail(bool failed, const char *what, const char *needle) {
    const char *msg = tessera_last_error();
    if (EXPECT_ERROR(failed, msg, needle, "%s", what)) printf("ok   %s -> %s\n", what, msg);
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0.0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Pooled vectors against the rows of pooling none (no normalisation). */
static void check_poolings(tessera_model *m, const tessera_token *toks, int32_t n) {
    const int32_t E = tessera_model_n_embd(m);
    float *rows = malloc((size_t)n * E * sizeof *rows), *v = malloc((size_t)E * sizeof *v);
    float *mean = calloc((size_t)E, sizeof *mean);
    tessera_context *ctx = embed_ctx(m, TESSERA_POOLING_NONE, 64);
    EXPECT(ctx && rows && v && mean, "context none: %s", tessera_last_error());
    if (!ctx) return;
    EXPECT(tessera_context_pooling(ctx) == TESSERA_POOLING_NONE, "pooling none");
    int64_t got = tessera_embed(ctx, toks, n, TESSERA_EMBD_NORM_NONE, rows, (int64_t)n * E);
    EXPECT(got == (int64_t)n * E, "pooling none: %lld floats, %s", (long long)got, tessera_last_error());
    for (int32_t r = 0; r < n; r++)
        for (int32_t j = 0; j < E; j++) mean[j] += rows[(size_t)r * E + j] / (float)n;
    tessera_context_free(ctx);
    const struct {
        int32_t pooling;
        const float *want;
    } cases[] = {{TESSERA_POOLING_MEAN, mean}, {TESSERA_POOLING_CLS, rows}, {TESSERA_POOLING_LAST, rows + (size_t)(n - 1) * E}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ctx = embed_ctx(m, cases[c].pooling, 64);
        EXPECT(ctx, "context %s: %s", tessera_pooling_name(cases[c].pooling), tessera_last_error());
        if (!ctx) continue;
        got = tessera_embed(ctx, toks, n, TESSERA_EMBD_NORM_NONE, v, E);
        double d = got == E ? max_diff(v, cases[c].want, E) : 1e9;
        EXPECT(d < 1e-5, "pooling %s: max difference %g from pooling none's rows", tessera_pooling_name(cases[c].pooling), d);
        printf("ok   pooling %s = its rows of pooling none (max diff %.2g)\n", tessera_pooling_name(cases[c].pooling), d);
        /* normalisations: L2 -> unit length, taxicab -> unit sum, 0 -> max 32760 */
        const int32_t norms[] = {2, 1, 0};
        for (int k = 0; k < 3; k++) {
            got = tessera_embed(ctx, toks, n, norms[k], v, E);
            double s = 0.0;
            for (int32_t j = 0; j < E; j++)
                s = norms[k] == 2 ? s + (double)v[j] * v[j] : norms[k] == 1 ? s + fabs(v[j]) : fmax(s, fabs(v[j]));
            double want = norms[k] == 0 ? 32760.0 : 1.0;
            EXPECT(got == E && fabs(s - want) < 1e-3 * want, "norm %d: %g, want %g", norms[k], s, want);
        }
        tessera_context_free(ctx);
    }
    free(rows);
    free(v);
    free(mean);
}

static void check_errors(tessera_model *m, const tessera_token *toks, int32_t n) {
    const int32_t E = tessera_model_n_embd(m);
    float *v = malloc((size_t)E * 64 * sizeof *v);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    tessera_context *plain = tessera_context_new(m, &cp);
    expect_fail(plain && tessera_embed(plain, toks, n, 2, v, E) < 0, "embed on a logits context", "gives logits");
    EXPECT(tessera_context_pooling(plain) == -1, "a logits context has no pooling");
    tessera_context_free(plain);

    cp.embeddings = true;
    cp.pooling = TESSERA_POOLING_RANK;
    expect_fail(!tessera_context_new(m, &cp), "rank pooling without a head", "cls.output.weight");
    cp.pooling = 9;
    expect_fail(!tessera_context_new(m, &cp), "pooling 9", "pooling 9");

    tessera_context *ctx = embed_ctx(m, TESSERA_POOLING_MEAN, 16);
    EXPECT(ctx, "context: %s", tessera_last_error());
    if (!ctx) return;
    expect_fail(tessera_logits(ctx, -1) == NULL, "logits of an embedding context", "embedding context");
    expect_fail(tessera_embed(ctx, toks, 0, 2, v, E) < 0, "no tokens", "no tokens");
    tessera_token bad[3] = {toks[0], tessera_model_n_vocab(m), toks[1]};
    expect_fail(tessera_embed(ctx, bad, 3, 2, v, E) < 0, "token out of range", "out of range");
    tessera_token *many = malloc(40 * sizeof *many);
    for (int i = 0; i < 40; i++) many[i] = toks[i % n];
    expect_fail(tessera_embed(ctx, many, 40, 2, v, E) < 0, "input longer than the context", "longer than the context");
    expect_fail(tessera_embed(ctx, toks, n, 2, v, E - 1) < 0, "output too small", "floats");
    /* still usable, and the same as a fresh context */
    float *a = malloc((size_t)E * sizeof *a);
    EXPECT(tessera_embed(ctx, toks, n, 2, v, E) == E, "after the errors: %s", tessera_last_error());
    tessera_context *fresh = embed_ctx(m, TESSERA_POOLING_MEAN, 16);
    EXPECT(fresh && tessera_embed(fresh, toks, n, 2, a, E) == E && max_diff(a, v, E) == 0.0,
          "after the errors the vector differs from a fresh context's");
    tessera_context_free(fresh);
    tessera_context_free(ctx);
    free(many);
    free(a);
    free(v);
}

/* logits = output . embedding (stories260K's output.weight is f32). */
static void check_logits_link(tessera_model *m, const tessera_token *toks, int32_t n) {
    const int32_t E = tessera_model_n_embd(m), V = tessera_model_n_vocab(m);
    const model_weight *out = m->m->output;
    EXPECT(out->dtype == 0 && out->data, "stories260K's output.weight is host f32");
    float *v = malloc((size_t)E * sizeof *v);
    tessera_context *ectx = embed_ctx(m, TESSERA_POOLING_LAST, 64);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    tessera_context *lctx = tessera_context_new(m, &cp);
    EXPECT(ectx && lctx && tessera_embed(ectx, toks, n, TESSERA_EMBD_NORM_NONE, v, E) == E &&
              tessera_decode(lctx, toks, n, 0, 0) == 0,
          "embed and decode: %s", tessera_last_error());
    const float *logits = lctx ? tessera_logits(lctx, -1) : NULL;
    double worst = logits ? 0.0 : 1e9;
    for (int32_t j = 0; logits && j < V; j++) {
        const float *row = (const float *)out->data + (size_t)j * E;
        double s = 0.0;
        for (int32_t i = 0; i < E; i++) s += (double)row[i] * v[i];
        worst = fmax(worst, fabs(s - logits[j]));
    }
    EXPECT(worst < 1e-3, "output . embedding differs from the logits by %g", worst);
    printf("ok   output.weight . last embedding = logits (max diff %.2g)\n", worst);
    tessera_context_free(ectx);
    tessera_context_free(lctx);
    free(v);
}

TEST(test_names) {
    for (int32_t p = TESSERA_POOLING_NONE; p <= TESSERA_POOLING_RANK; p++)
        EXPECT(tessera_pooling_from_name(tessera_pooling_name(p)) == p, "pooling %d name round trip", p);
    EXPECT(tessera_pooling_from_name("MEAN") == TESSERA_POOLING_MEAN, "names are case-insensitive");
    EXPECT(tessera_pooling_from_name("avg") == -1 && !tessera_pooling_name(7), "unknown names");
}

TEST(test_poolings) { check_poolings(g_model, g_toks, g_n); }
TEST(test_errors) { check_errors(g_model, g_toks, g_n); }
TEST(test_logits_link) { check_logits_link(g_model, g_toks, g_n); }

FIXTURE(setup) {
    harness_path path = harness_model_file("stories260K");
    harness_host_start();
    tessera_model_params mp = tessera_model_default_params();
    g_model = harness_model_load(path.s, "ref", &mp);
    g_n = tessera_tokenize(g_model, "Once upon a time there was", 26, g_toks, 16, true, false);
    REQUIRE(g_n > 3, "tokenize: %d", g_n);
    return 0;
}

FIXTURE(teardown) {
    tessera_model_free(g_model);
    tessera_shutdown();
    return 0;
}

HARNESS_MAIN_GROUP("embed-api", setup, teardown, HARNESS_TEST(test_names), HARNESS_TEST(test_poolings),
                   HARNESS_TEST(test_errors), HARNESS_TEST(test_logits_link))
