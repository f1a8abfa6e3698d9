/*
 * Self-Extend (tessera_seq_add, tessera_seq_div, tessera_self_extend) on
 * stories260K (trained context 128), ref, F32 cache:
 *
 * - seq_add: 40 tokens decoded at 0..39 and moved to 20..59 give the next
 *   tokens' logits of the same 40 decoded at 20..59 in a fresh context
 *   (RoPE depends on position differences; a key turned by the wrong angle
 *   is off by whole logits). Within 1e-4.
 * - seq_div: dividing positions by 2 is the same as moving each position p
 *   to p / 2 one at a time with seq_add (the bookkeeping and the turn),
 *   within 1e-4; positions held are then 0..19.
 * - Perplexity of tests/data/golden/story.txt (1355 tokens) past the
 *   trained context: the text decoded in chunks of 16 at growing positions
 *   (no Self-Extend: the positions run to 1354) against the same with
 *   --grp-attn-n 4 --grp-attn-w 256, which keeps every position below 512.
 *   The file says 128 (llama.context_length), but the model was trained on
 *   512 (llama2.c's stories260K) and reads to 512 without trouble: the
 *   plain perplexity of tokens 128..511 is 3.37. Past 512 it is worse:
 *   tokens 512.. measure 4.350 plain and
 *   3.945 with Self-Extend (0.907 of it; 2/64: 4.094, 8/128: 4.095, while
 *   windows of 32 or 64 grouped by 4 or more lose: 4/32: 4.436). The bound:
 *   at most 0.95 times the plain figure.
 * - Bad flags and ranges are one-line errors.
 */
#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "../logits_util.h"
#include "model_test.h"

enum { N = 40, N_NEXT = 6, CHUNK = 16, TRAIN = 512 };

static tessera_model *g_model;

static tessera_context *new_ctx(uint32_t n_ctx) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = 64;
    cp.n_threads = 1;
    cp.kv_type = TESSERA_KV_F32;
    return harness_context(g_model, &cp);
}

static tessera_token token_at(int32_t i) { return (tessera_token)(3 + (i * 7919 + 13) % 500); }

/* n tokens of sequence 0 at positions pos[0..n); keeps the last row. */
static void decode_at(tessera_context *ctx, const tessera_token *t, const int32_t *pos, int32_t n) {
    int32_t seq[N] = {0};
    bool want[N] = {0};
    want[n - 1] = true;
    REQUIRE(tessera_decode_batch(ctx, t, pos, seq, want, n) == 0, "decode: %s", tessera_last_error());
}

/* The largest logit difference over N_NEXT tokens decoded into both
 * contexts at positions from, from + 1, ... */
static double next_diff(tessera_context *a, tessera_context *b, int32_t from) {
    const size_t nv = (size_t)tessera_model_n_vocab(g_model);
    double worst = 0;
    for (int32_t k = 0; k < N_NEXT; k++) {
        tessera_token t = token_at(N + k);
        int32_t p = from + k;
        decode_at(a, &t, &p, 1);
        decode_at(b, &t, &p, 1);
        worst = fmax(worst, max_diff(tessera_logits(a, 0), tessera_logits(b, 0), nv));
    }
    return worst;
}

TEST(test_seq_add) {
    tessera_token toks[N];
    int32_t pos[N], moved[N];
    for (int32_t i = 0; i < N; i++) {
        toks[i] = token_at(i);
        pos[i] = i;
        moved[i] = 20 + i;
    }
    tessera_context *a = new_ctx(128), *b = new_ctx(128);
    decode_at(a, toks, pos, N);
    EXPECT(tessera_seq_add(a, 0, 0, -1, 20) == 0, "seq_add: %s", tessera_last_error());
    EXPECT(tessera_seq_len(a, 0) == N + 20, "held %d", tessera_seq_len(a, 0));
    decode_at(b, toks, moved, N);
    const double d = next_diff(a, b, N + 20);
    print_message("moved by 20 vs decoded there: max logit difference %.3g\n", d);
    EXPECT(d <= 1e-4, "difference %.3g", d);
    /* Moving below 0 forgets: 10 positions of 0..9 go. */
    tessera_context_free(a);
    a = new_ctx(128);
    decode_at(a, toks, pos, N);
    EXPECT(tessera_seq_add(a, 0, 0, 10, -10) == 0, "seq_add: %s", tessera_last_error());
    EXPECT(tessera_kv_cells_used(a) == N - 10, "cells %d", tessera_kv_cells_used(a));
    tessera_context_free(a);
    tessera_context_free(b);
}

TEST(test_seq_div) {
    tessera_token toks[N];
    int32_t pos[N];
    for (int32_t i = 0; i < N; i++) {
        toks[i] = token_at(i);
        pos[i] = i;
    }
    tessera_context *a = new_ctx(128), *b = new_ctx(128);
    decode_at(a, toks, pos, N);
    decode_at(b, toks, pos, N);
    EXPECT(tessera_seq_div(a, 0, 0, N, 2) == 0, "seq_div: %s", tessera_last_error());
    for (int32_t p = 1; p < N; p++)
        REQUIRE(tessera_seq_add(b, 0, p, p + 1, p / 2 - p) == 0, "seq_add: %s", tessera_last_error());
    EXPECT(tessera_seq_len(a, 0) == N / 2 && tessera_seq_len(b, 0) == N / 2, "held %d and %d",
           tessera_seq_len(a, 0), tessera_seq_len(b, 0));
    EXPECT(tessera_kv_cells_used(a) == N, "cells %d", tessera_kv_cells_used(a));
    const double d = next_diff(a, b, N / 2);
    print_message("divided by 2 vs moved one by one: max logit difference %.3g\n", d);
    EXPECT(d <= 1e-4, "difference %.3g", d);
    tessera_context_free(a);
    tessera_context_free(b);
}

/* log-softmax of row at t */
static double logprob(const float *row, int32_t nv, tessera_token t) {
    double mx = row[0];
    for (int32_t i = 1; i < nv; i++) mx = fmax(mx, row[i]);
    double sum = 0;
    for (int32_t i = 0; i < nv; i++) sum += exp(row[i] - mx);
    return row[t] - mx - log(sum);
}

/* Perplexity of toks[TRAIN..n) (predicted from what precedes them), the
 * text decoded in chunks of CHUNK with Self-Extend ga_n, ga_w (ga_n 1: off).
 * *max_pos gets the highest position any token was decoded at. */
static double ppl_past_train(const tessera_token *toks, int32_t n, int32_t ga_n, int32_t ga_w, int32_t *max_pos) {
    const int32_t nv = tessera_model_n_vocab(g_model);
    tessera_context *ctx = new_ctx((uint32_t)n + CHUNK);
    int32_t n_past = 0, ga_i = 0, counted = 0;
    double nll = 0;
    *max_pos = 0;
    for (int32_t i = 0; i < n - 1; i += CHUNK) {
        const int32_t c = i + CHUNK < n ? CHUNK : n - i;
        REQUIRE(tessera_self_extend(ctx, 0, ga_n, ga_w, &ga_i, &n_past) == 0, "self-extend: %s",
                tessera_last_error());
        REQUIRE(tessera_decode(ctx, toks + i, c, n_past, TESSERA_DECODE_ALL_LOGITS) == 0, "decode at %d: %s",
                n_past, tessera_last_error());
        n_past += c;
        if (n_past - 1 > *max_pos) *max_pos = n_past - 1;
        for (int32_t j = 0; j < c && i + j + 1 < n; j++) {
            if (i + j + 1 < TRAIN) continue;
            nll -= logprob(tessera_logits(ctx, j), nv, toks[i + j + 1]);
            counted++;
        }
    }
    tessera_context_free(ctx);
    return exp(nll / counted);
}

TEST(test_perplexity) {
    harness_path path = harness_source_file("tests/data/golden/story.txt");
    size_t len = 0;
    char *text = harness_read_file(path.s, &len);
    REQUIRE(text, "cannot read %s", path.s);
    tessera_token *toks = malloc((len + 8) * sizeof *toks);
    const int32_t n = tessera_tokenize(g_model, text, len, toks, (int32_t)len + 8, true, false);
    REQUIRE(n > 2 * TRAIN, "story.txt gives %d tokens, fewer than %d", n, 2 * TRAIN);
    int32_t top_plain = 0, top_se = 0;
    const double plain = ppl_past_train(toks, n, 1, 0, &top_plain);
    const double se = ppl_past_train(toks, n, 4, 256, &top_se);
    print_message("story.txt, %d tokens, perplexity of tokens %d..: %.3f plain (positions up to %d), %.3f with "
                  "--grp-attn-n 4 --grp-attn-w 256 (positions up to %d, ratio %.3f)\n",
                  n, TRAIN, plain, top_plain, se, top_se, se / plain);
    EXPECT(top_se < TRAIN, "Self-Extend reached position %d", top_se);
    EXPECT(se <= 0.95 * plain, "Self-Extend %.3f, plain %.3f", se, plain);
    free(toks);
    free(text);
}

TEST(test_errors) {
    tessera_context *ctx = new_ctx(64);
    int32_t ga_i = 0, n_past = 0;
    EXPECT(tessera_self_extend(ctx, 0, 4, 30, &ga_i, &n_past) != 0, "no error");
    EXPECT_HAS(tessera_last_error(), "--grp-attn-w 30", "error");
    EXPECT(tessera_self_extend(ctx, 0, 0, 32, &ga_i, &n_past) != 0, "no error");
    EXPECT_HAS(tessera_last_error(), "--grp-attn-n 0", "error");
    EXPECT(tessera_seq_div(ctx, 0, 0, 10, 0) != 0, "no error");
    EXPECT_HAS(tessera_last_error(), "divisor", "error");
    EXPECT(tessera_seq_add(ctx, 0, 10, 5, 1) != 0, "no error");
    EXPECT_HAS(tessera_last_error(), "range", "error");
    EXPECT(tessera_seq_add(ctx, 99, 0, 5, 1) != 0, "no error");
    EXPECT_HAS(tessera_last_error(), "sequence 99", "error");
    EXPECT(tessera_self_extend(ctx, 0, 1, 0, &ga_i, &n_past) == 0, "ga_n 1 is off: %s", tessera_last_error());
    tessera_context_free(ctx);
}

FIXTURE(setup) {
    harness_path path = harness_model_file("stories260K");
    g_model = model_test_open(path.s, "ref", NULL);
    return 0;
}

FIXTURE(teardown) {
    model_test_close(g_model, NULL);
    return 0;
}

HARNESS_MAIN_GROUP("self extend", setup, teardown, HARNESS_TEST(test_seq_add), HARNESS_TEST(test_seq_div),
                   HARNESS_TEST(test_perplexity), HARNESS_TEST(test_errors))
