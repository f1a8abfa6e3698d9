/*
 * Saved state (tessera_state_*): save -> load -> continue gives the tokens
 * of a run that never stopped (greedy, and seeded sampling with the
 * sampler's PRNG restored into a sampler built with another seed), a
 * single sequence restores into another sequence, and bad files are one
 * clear error each that leaves the context as it was: truncated, a flipped
 * byte, trailing bytes, another model, another model file of the same
 * shape, other KV settings, too small a context or token buffer.
 *
 *   test_state MODEL OTHER_MODEL [SAME_SHAPE_MODEL] [--device D] [--ngl N] [--ctx N] [--q8] [--seqs N]
 *
 * --seqs N makes every context for N sequences (n_seq_max): a recurrent
 * model keeps a state per sequence, for at most n_seq_max at a time.
 *
 * --q8 repeats the continuation check with q8_0 K and V caches under flash
 * attention (V stored like K), loads an F16 state saved without flash
 * attention into a flash-attention context (a cell's V is packed alike),
 * and refuses an F16 state in a q8_0 context.
 *
 * A bare file name is looked up in $TESSERA_MODEL_CACHE (else
 * ~/.cache/tessera/models); an absent file skips the test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "host/host.h"

#include "model_test.h"


enum { N_GEN = 16, N_SPLIT = 7, MAX_TOK = 512 };

static const char *device = "ref";
/* Cache settings of every context the checks make (F32 ones aside). */
static tessera_kv_type type_k = TESSERA_KV_F16, type_v = TESSERA_KV_F16;
static tessera_flash_attn flash = TESSERA_FLASH_ATTN_OFF;
static uint32_t n_ctx = 128;
static uint32_t n_seqs = 0; /* n_seq_max of every context (0: the default) */
static int32_t n_gpu_layers = 0; /* --ngl: layers on the GPU device among --device */
/* When set, every sampler the checks make is constrained by this GBNF. */
static const char *grammar_gbnf;

static tessera_model *load_model(const char *path) {
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = device;
    mp.n_gpu_layers = n_gpu_layers;
    tessera_model *m = tessera_model_load(path, &mp);
    if (!m) ADD_FAILURE("load %s: %s", path, tessera_last_error());
    return m;
}

static tessera_context *new_ctx(tessera_model *m, uint32_t nc, tessera_kv_type kv) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = nc;
    cp.n_threads = 2;
    cp.kv_type = kv;
    if (kv == TESSERA_KV_F16) {
        cp.type_k = type_k;
        cp.type_v = type_v;
    }
    cp.flash_attn = flash;
    cp.n_seq_max = n_seqs;
    tessera_context *ctx = tessera_context_new(m, &cp);
    EXPECT(ctx, "context: %s", tessera_last_error());
    return ctx;
}

static tessera_sampler *new_sampler(tessera_model *m, float temp, uint32_t seed) {
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = temp;
    sp.seed = seed;
    sp.penalty_repeat = 1.1f; /* so the penalty window matters too */
    tessera_sampler *s = tessera_sampler_new(tessera_model_n_vocab(m), &sp);
    EXPECT(s, "sampler: %s", tessera_last_error());
    if (s && grammar_gbnf) {
        tessera_grammar *g = tessera_grammar_parse(grammar_gbnf, strlen(grammar_gbnf), NULL);
        EXPECT(g && tessera_sampler_set_grammar(s, m, g) == 0, "grammar: %s", tessera_last_error());
        tessera_grammar_free(g);
    }
    return s;
}

/* Sample, accept and decode n tokens after toks[0..*n_toks). */
static int generate(tessera_context *ctx, tessera_sampler *s, tessera_token *toks, int32_t *n_toks, int n) {
    for (int i = 0; i < n; i++) {
        const float *logits = tessera_logits(ctx, -1);
        if (!logits) return printf("FAIL logits: %s\n", tessera_last_error()), -1;
        tessera_token t = tessera_sampler_sample(s, logits);
        tessera_sampler_accept(s, t);
        toks[(*n_toks)++] = t;
        if (tessera_decode(ctx, &t, 1, *n_toks - 1, 0) != 0)
            return printf("FAIL decode: %s\n", tessera_last_error()), -1;
    }
    return 0;
}

static int32_t prompt_tokens(tessera_model *m, tessera_token *toks) {
    const char *text = "Once upon a time, there was a little dog named Max. He liked to";
    return tessera_tokenize(m, text, strlen(text), toks, MAX_TOK, true, false);
}

/* Prompt, then N_GEN tokens; or stop after N_SPLIT and save to path. */
static int32_t run(tessera_model *m, float temp, uint32_t seed, tessera_token *toks, const char *save_path) {
    tessera_context *ctx = new_ctx(m, n_ctx, TESSERA_KV_F16);
    tessera_sampler *s = new_sampler(m, temp, seed);
    int32_t n = prompt_tokens(m, toks);
    for (int32_t i = 0; i < n; i++) tessera_sampler_accept(s, toks[i]);
    if (grammar_gbnf) tessera_sampler_grammar_restart(s); /* the grammar constrains the reply only */
    EXPECT(tessera_decode(ctx, toks, n, 0, 0) == 0, "prompt: %s", tessera_last_error());
    generate(ctx, s, toks, &n, save_path ? N_SPLIT : N_GEN);
    if (save_path)
        EXPECT(tessera_state_save_file(ctx, -1, save_path, toks, n, s) == 0, "save: %s", tessera_last_error());
    tessera_sampler_free(s);
    tessera_context_free(ctx);
    return n;
}

static void expect_error(int rc, const char *what, const char *needle) {
    EXPECT_ERROR(rc != 0, tessera_last_error(), needle, "%s", what);
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Same tokens as never stopping, through a file and a fresh context and a
 * sampler built with another seed. */
static void check_continue(tessera_model *m, float temp, uint32_t seed, const char *path) {
    tessera_token ref[MAX_TOK], part[MAX_TOK], got[MAX_TOK];
    int32_t n_ref = run(m, temp, seed, ref, NULL);
    int32_t n_part = run(m, temp, seed, part, path);
    tessera_context *ctx = new_ctx(m, n_ctx, TESSERA_KV_F16);
    tessera_sampler *s = new_sampler(m, temp, seed + 12345);
    int32_t n = 0;
    EXPECT(tessera_state_load_file(ctx, -1, path, got, MAX_TOK, &n, s) == 0, "load: %s", tessera_last_error());
    EXPECT(n == n_part && !memcmp(got, part, (size_t)n * sizeof *got), "tokens restored (%d of %d)", n, n_part);
    EXPECT(tessera_kv_len(ctx) == n, "kv len %d after load, %d tokens", tessera_kv_len(ctx), n);
    /* Saving the loaded state gives the same bytes. */
    size_t len1 = 0, len2 = 0;
    uint8_t *file = read_all(path, &len1);
    uint8_t *again = tessera_state_save(ctx, -1, got, n, s, &len2);
    EXPECT(file && again && len1 == len2 && !memcmp(file, again, len1), "re-saved state differs");
    free(file);
    free(again);
    generate(ctx, s, got, &n, N_GEN - N_SPLIT);
    EXPECT(n == n_ref && !memcmp(got, ref, (size_t)n * sizeof *got), "temp %g seed %u: continued tokens differ",
           (double)temp, seed);
    printf("ok   temp %g seed %u: %d tokens after a save at %d match the uninterrupted run (file %zu bytes)\n",
           (double)temp, seed, n_ref, n_part, len1);
    tessera_sampler_free(s);
    tessera_context_free(ctx);
}

/* A sampler with a grammar: the grammar's state travels with the file (the
 * continuation above then only matches when the matcher is where it was),
 * and a sampler without that grammar refuses the state. */
static void check_grammar(tessera_model *m, const char *path) {
    /* a dot exactly 30 characters in: only a restored matcher puts it there */
    grammar_gbnf = "root ::= [a-z ]{30} \".\" [a-z ]*";
    check_continue(m, 0.9f, 42, path);
    const char *other[2] = {NULL, "root ::= [a-z ]+"};
    const char *needle[2] = {"no grammar", "different grammar"};
    for (int i = 0; i < 2; i++) {
        grammar_gbnf = other[i];
        tessera_context *ctx = new_ctx(m, n_ctx, TESSERA_KV_F16);
        tessera_sampler *s = new_sampler(m, 0.9f, 1);
        tessera_token toks[MAX_TOK];
        int32_t n = 0;
        expect_error(tessera_state_load_file(ctx, -1, path, toks, MAX_TOK, &n, s), "grammar state into another sampler",
                     needle[i]);
        EXPECT(tessera_kv_len(ctx) == 0, "a refused grammar state left %d cells", tessera_kv_len(ctx));
        tessera_sampler_free(s);
        tessera_context_free(ctx);
    }
    grammar_gbnf = NULL;
}

/* Greedy tokens in sequence seq of ctx after its first n tokens toks[0..n),
 * of which the cache holds the first n - 1: the last one decoded at its
 * position (a restored sequence has no logits, and a recurrent state
 * cannot decode a position again), then one token at a time up to n_want. */
static int32_t continue_seq(tessera_context *ctx, tessera_model *m, int32_t seq, tessera_token *toks, int32_t n,
                            int32_t n_want) {
    tessera_sampler *s = new_sampler(m, 0.0f, 1);
    for (int32_t i = 0; i < n; i++) tessera_sampler_accept(s, toks[i]);
    for (int32_t i = n - 1; i < n_want - 1; i++) {
        int32_t pos = i;
        bool want = true;
        if (tessera_decode_batch(ctx, &toks[i], &pos, &seq, &want, 1) != 0) {
            ADD_FAILURE("sequence %d: decode at %d: %s", seq, pos, tessera_last_error());
            break;
        }
        toks[i + 1] = tessera_sampler_sample(s, tessera_logits(ctx, 0));
        tessera_sampler_accept(s, toks[i + 1]);
        n = i + 2;
    }
    tessera_sampler_free(s);
    return n;
}

/* A context whose sequence 0 holds three other tokens (so a restored
 * sequence's cells do not start at cell 0). */
static tessera_context *ctx_with_other(tessera_model *m, const tessera_token *toks) {
    tessera_context *ctx = new_ctx(m, n_ctx, TESSERA_KV_F16);
    tessera_token other[3] = {toks[0], toks[2], toks[1]};
    int32_t pos3[3] = {0, 1, 2}, seq0[3] = {0, 0, 0};
    EXPECT(tessera_decode_batch(ctx, other, pos3, seq0, NULL, 3) == 0, "batch: %s", tessera_last_error());
    return ctx;
}

/* One sequence saved from sequence 1 restores into sequence 2 of another
 * context and continues there token for token as it does in the context it
 * was saved from. What the API promises is that restored cells are the
 * saved cells: the continuation is the same computation, so the same tokens
 * on every CPU level. (Against a run whose prompt started at cell 0, or whose
 * last prompt token's logits came out of the prompt batch, the sums run in
 * another order; on AVX-512 SmolLM2 then parts at a near-tie.) */
static void check_seq(tessera_model *m) {
    tessera_token toks[MAX_TOK];
    int32_t n = prompt_tokens(m, toks);
    tessera_context *a = ctx_with_other(m, toks);
    int32_t pos[MAX_TOK], seq1[MAX_TOK];
    for (int32_t i = 0; i < n; i++) pos[i] = i, seq1[i] = 1;
    /* all but the last token: continue_seq decodes it */
    EXPECT(tessera_decode_batch(a, toks, pos, seq1, NULL, n - 1) == 0, "decode: %s", tessera_last_error());
    size_t len = 0;
    uint8_t *st = tessera_state_save(a, 1, toks, n, NULL, &len);
    EXPECT(st, "save seq 1: %s", tessera_last_error());
    tessera_context *b = ctx_with_other(m, toks);
    tessera_token got[MAX_TOK];
    int32_t ng = 0;
    expect_error(tessera_state_load(b, 2, st, len, "seq-state", got, 4, &ng, NULL), "token buffer too small",
                 "room was given for 4");
    EXPECT(tessera_kv_cells_used(b) == 3, "cells after a refused load: %d", tessera_kv_cells_used(b));
    EXPECT(tessera_state_load(b, 2, st, len, "seq-state", got, MAX_TOK, &ng, NULL) == 0, "load seq 2: %s",
           tessera_last_error());
    EXPECT(ng == n && !memcmp(got, toks, (size_t)n * sizeof *got), "tokens restored (%d of %d)", ng, n);
    EXPECT(tessera_kv_cells_used(b) == 3 + n - 1, "cells used %d, want %d", tessera_kv_cells_used(b), 3 + n - 1);
    int32_t n_a = continue_seq(a, m, 1, toks, n, n + N_GEN);
    int32_t n_b = continue_seq(b, m, 2, got, ng, n + N_GEN);
    int first = -1;
    for (int32_t i = 0; i < n_a && first < 0; i++)
        if (i >= n_b || got[i] != toks[i]) first = i;
    EXPECT(n_a == n_b && first < 0, "sequence 2: token %d is %d, sequence 1 of the saving context has %d", first,
           first >= 0 && first < n_b ? got[first] : -1, first >= 0 ? toks[first] : -1);
    if (n_a == n_b && first < 0)
        printf("ok   a sequence saved from 1 continues in sequence 2 of another context as in the first (%d tokens)\n",
               n_a);
    expect_error(tessera_state_load(b, 2, st, len, "seq-state", got, MAX_TOK, &ng, NULL) == 0 &&
                         tessera_state_load(b, 70, st, len, "seq-state", got, MAX_TOK, &ng, NULL),
                 "sequence 70", "sequence 70");
    free(st);
    /* a negative token (a medium's row, as tessera serve keys them) is kept;
     * one past the vocabulary is a hostile file */
    for (int k = 0; k < 2; k++) {
        tessera_token odd[MAX_TOK];
        memcpy(odd, toks, (size_t)n * sizeof *odd);
        odd[1] = k == 0 ? -12345 : tessera_model_n_vocab(m);
        st = tessera_state_save(a, 1, odd, n, NULL, &len);
        EXPECT(st, "save with token %d: %s", odd[1], tessera_last_error());
        int rc = st ? tessera_state_load(b, 3, st, len, "odd-token", got, MAX_TOK, &ng, NULL) : -1;
        if (k == 0)
            EXPECT(rc == 0 && ng == n && !memcmp(got, odd, (size_t)n * sizeof *got), "a media token restored: %s",
                   rc ? tessera_last_error() : "tokens differ");
        else
            expect_error(rc, "a token past the vocabulary", "outside the vocabulary");
        free(st);
    }
    tessera_context_free(a);
    tessera_context_free(b);
}

static void check_bad_files(tessera_model *m, tessera_model *other, tessera_model *same_shape, const char *path) {
    size_t len = 0;
    uint8_t *good = read_all(path, &len);
    if (!good) {
        ADD_FAILURE("cannot read %s", path);
        return;
    }
    tessera_token toks[MAX_TOK];
    int32_t n = 0;
    tessera_context *ctx = new_ctx(m, n_ctx, TESSERA_KV_F16);
    tessera_token p[MAX_TOK];
    int32_t np = prompt_tokens(m, p);
    tessera_decode(ctx, p, 3, 0, 0);
    uint8_t *bad = malloc(len + 1);
    expect_error(tessera_state_load(ctx, -1, good, len - 1, "cut", toks, MAX_TOK, &n, NULL), "truncated by a byte",
                 "truncated");
    expect_error(tessera_state_load(ctx, -1, good, 40, "cut", toks, MAX_TOK, &n, NULL), "truncated to 40 bytes",
                 "truncated");
    memcpy(bad, good, len);
    bad[len] = 0;
    expect_error(tessera_state_load(ctx, -1, bad, len + 1, "long", toks, MAX_TOK, &n, NULL), "a trailing byte",
                 "trailing bytes");
    bad[len / 2] ^= 0x10;
    expect_error(tessera_state_load(ctx, -1, bad, len, "flip", toks, MAX_TOK, &n, NULL), "a flipped payload byte",
                 "checksum");
    memcpy(bad, good, len);
    bad[8 + 4 + 32 + 12 + 8 + 4 * 8] ^= 1; /* n_tokens */
    expect_error(tessera_state_load(ctx, -1, bad, len, "count", toks, MAX_TOK, &n, NULL), "a flipped count",
                 "the header describes");
    memcpy(bad, good, len);
    bad[0] = 'X';
    expect_error(tessera_state_load(ctx, -1, bad, len, "magic", toks, MAX_TOK, &n, NULL), "bad magic", "magic");
    EXPECT(tessera_kv_len(ctx) == 3, "a refused load changed the cache (len %d)", tessera_kv_len(ctx));
    expect_error(tessera_state_load(ctx, -1, good, len, "few", toks, 3, &n, NULL), "token buffer too small",
                 "room was given for 3");
    expect_error(tessera_state_load_file(ctx, -1, "/nonexistent/state.bin", toks, MAX_TOK, &n, NULL),
                 "a missing file", "cannot open");
    tessera_context *f32 = new_ctx(m, n_ctx, TESSERA_KV_F32);
    expect_error(tessera_state_load(f32, -1, good, len, "kvtype", toks, MAX_TOK, &n, NULL), "F32 cache",
                 "K cache type");
    tessera_context_free(f32);
    tessera_context *small = new_ctx(m, 8, TESSERA_KV_F16);
    /* With a sliding-window model a context this small has no window set:
     * that difference is named instead. */
    int rc_small = tessera_state_load(small, -1, good, len, "small", toks, MAX_TOK, &n, NULL);
    expect_error(rc_small, "too small a context", strstr(tessera_last_error(), "cell sets") ? "cell sets" : "do not fit");
    tessera_context_free(small);
    tessera_context *oc = new_ctx(other, n_ctx, TESSERA_KV_F16);
    expect_error(tessera_state_load(oc, -1, good, len, "other", toks, MAX_TOK, &n, NULL), "another model",
                 "saved for");
    tessera_context_free(oc);
    if (same_shape) {
        tessera_context *sc = new_ctx(same_shape, n_ctx, TESSERA_KV_F16);
        expect_error(tessera_state_load(sc, -1, good, len, "sameshape", toks, MAX_TOK, &n, NULL),
                     "another file of the same shape", "another model file");
        tessera_context_free(sc);
    }
    /* Still usable after all that. */
    EXPECT(tessera_decode(ctx, p + 3, np - 3, 3, 0) == 0, "decode after refused loads: %s", tessera_last_error());
    free(bad);
    free(good);
    tessera_context_free(ctx);
}

/* Usage: test_state MODEL OTHER_MODEL [SAME_SHAPE_MODEL] [--q8] [--device D] [--ngl N] [--ctx N]
 * (each MODEL as harness_model_file takes it) */
TEST(test_state) {
    static harness_path paths[3];
    int np = 0, q8 = 0;
    for (int i = 1; i < harness_argc(); i++) {
        const char *arg = harness_arg(i);
        if (!strcmp(arg, "--q8")) q8 = 1;
        else if (!strcmp(arg, "--device") && i + 1 < harness_argc()) device = harness_arg(++i);
        else if (!strcmp(arg, "--ctx") && i + 1 < harness_argc()) n_ctx = (uint32_t)atoi(harness_arg(++i));
        else if (!strcmp(arg, "--seqs") && i + 1 < harness_argc()) n_seqs = (uint32_t)atoi(harness_arg(++i));
        else if (!strcmp(arg, "--ngl") && i + 1 < harness_argc()) n_gpu_layers = atoi(harness_arg(++i));
        else if (np < 3) paths[np++] = harness_model_file(arg);
    }
    REQUIRE(np >= 2, "usage: test_state MODEL OTHER_MODEL [SAME_SHAPE_MODEL] [--q8] [--device D] [--ctx N]");
    harness_host_start();
    tessera_model *m = load_model(paths[0].s), *other = load_model(paths[1].s);
    tessera_model *same = np > 2 ? load_model(paths[2].s) : NULL;
    REQUIRE(m && other && (np < 3 || same), "a model did not load");
    char path[64];
    snprintf(path, sizeof path, "test-state-%ld.bin", (long)getpid());
    check_continue(m, 0.0f, 7, path);
    check_continue(m, 0.9f, 42, path);
    check_seq(m);
    check_grammar(m, path);
    check_bad_files(m, other, same, path);
    if (q8) {
        /* The F16 state of the last check_continue is still in path. */
        flash = TESSERA_FLASH_ATTN_ON;
        tessera_context *fa = new_ctx(m, n_ctx, TESSERA_KV_F16);
        tessera_token toks[MAX_TOK];
        int32_t n = 0;
        EXPECT(fa && tessera_state_load_file(fa, -1, path, toks, MAX_TOK, &n, NULL) == 0 && tessera_kv_len(fa) == n &&
                  tessera_decode(fa, toks, 1, n, 0) == 0,
               "an F16 state into a flash-attention context: %s", tessera_last_error());
        tessera_context_free(fa);
        type_k = type_v = TESSERA_KV_Q8_0;
        tessera_context *qc = new_ctx(m, n_ctx, TESSERA_KV_F16);
        expect_error(qc ? tessera_state_load_file(qc, -1, path, toks, MAX_TOK, &n, NULL) : 0, "a q8_0 cache",
                     "K cache type F16 there, Q8_0 here");
        tessera_context_free(qc);
        check_continue(m, 0.0f, 3, path);
        check_continue(m, 0.9f, 9, path);
    }
    remove(path);
    tessera_model_free(m);
    tessera_model_free(other);
    tessera_model_free(same);
    tessera_shutdown();
}

HARNESS_MAIN("state", HARNESS_TEST(test_state))
