/*
 * The recurrent state of hybrid models (lfm2, mamba2, granitehybrid;
 * kv.h, "Recurrent state") through the public API:
 *   - two sequences decoded together (their prompts' tokens interleaved in
 *     one call, then one token of each per call) give each the greedy
 *     tokens, and logits within float noise, of its own run alone;
 *   - a sequence asked to forget from a position inside it forgets all of
 *     it (a state cannot be rolled back part way) and the other goes on as
 *     before; it then decodes again from position 0 as a fresh run does;
 *   - a context shift is refused with an error that says why;
 *   - a third sequence in a context for two is an error naming n_seq_max,
 *     after which the context goes on;
 *   - only attention layers get K/V (kv.h): the cache holds attention
 *     layers (those with an attn_k weight) x cells x (K row + V row) bytes,
 *     0 for mamba2, with and without flash attention, and the context's
 *     memory rows (-v, tessera_context_memory) count that plus the
 *     recurrent states, nothing for a recurrent layer's K/V;
 *   - a state file of version 2 (K/V for every layer, zeros for the
 *     recurrent ones), made here from a version 3 save, still loads and
 *     goes on with the same logits as the context it was saved from.
 *
 *   test_recurrent MODEL [--device D] [--ngl N] [--tol X]
 * (--ngl: layers on the GPU device among D; with a GPU device at 99 the
 * states live in its memory. --tol: the logits' bound, 1e-4 by default)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"
#include "model/public.h"
#include "state/state.h"

enum { N_SEQ = 2, N_GEN = 12, MAX_TOK = 128 };

static const char *device = "ref";
static double logit_tol = 1e-4; /* --tol: interleaved against alone */
static const char *const prompts[N_SEQ] = {"Once upon a time, there was a little dog named Max.",
                                           "Lily and Tom went to the park to play"};

typedef struct run {
    tessera_token toks[MAX_TOK];
    int32_t n_prompt, n;
    float *logits; /* (N_GEN) rows: the logits each generated token was chosen from */
} run;

static tessera_context *new_ctx(tessera_model *m, uint32_t n_seq) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.n_seq_max = n_seq;
    tessera_context *ctx = tessera_context_new(m, &cp);
    EXPECT(ctx, "context: %s", tessera_last_error());
    return ctx;
}

static tessera_token argmax(const float *l, int32_t n_vocab) {
    tessera_token best = 0;
    for (int32_t i = 1; i < n_vocab; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* The greedy run of one prompt alone (tessera_decode, sequence 0). */
static int run_alone(tessera_model *m, const char *prompt, run *r) {
    const int32_t nv = tessera_model_n_vocab(m);
    tessera_context *ctx = new_ctx(m, 1);
    if (!ctx) return -1;
    r->n_prompt = r->n = tessera_tokenize(m, prompt, strlen(prompt), r->toks, MAX_TOK, true, false);
    int rc = tessera_decode(ctx, r->toks, r->n, 0, 0);
    for (int32_t s = 0; rc == 0 && s < N_GEN; s++) {
        const float *l = tessera_logits(ctx, -1);
        memcpy(r->logits + (size_t)s * nv, l, (size_t)nv * sizeof *l);
        r->toks[r->n] = argmax(l, nv);
        rc = tessera_decode(ctx, &r->toks[r->n], 1, r->n, 0);
        r->n++;
    }
    if (rc) ADD_FAILURE("alone: %s", tessera_last_error());
    tessera_context_free(ctx);
    return rc;
}

/* Both prompts in one call, their tokens interleaved, then one token of
 * each per call; checked against the runs alone. */
static void check_interleaved(tessera_model *m, tessera_context *ctx, run *alone) {
    const int32_t nv = tessera_model_n_vocab(m);
    tessera_token toks[2 * MAX_TOK];
    int32_t pos[2 * MAX_TOK], seq[2 * MAX_TOK], k = 0, last[N_SEQ] = {0};
    bool want[2 * MAX_TOK];
    for (int32_t i = 0; i < alone[0].n_prompt || i < alone[1].n_prompt; i++)
        for (int32_t s = 0; s < N_SEQ; s++)
            if (i < alone[s].n_prompt) {
                toks[k] = alone[s].toks[i], pos[k] = i, seq[k] = s;
                want[k] = i == alone[s].n_prompt - 1;
                k++;
            }
    REQUIRE(tessera_decode_batch(ctx, toks, pos, seq, want, k) == 0, "prompts: %s", tessera_last_error());
    /* the kept rows come in token order: which sequence's is first */
    const int first = alone[0].n_prompt <= alone[1].n_prompt ? 0 : 1;
    double worst = 0.0;
    tessera_token got[N_SEQ][N_GEN];
    for (int32_t step = 0; step < N_GEN; step++) {
        for (int32_t r = 0; r < N_SEQ; r++) {
            const int s = step == 0 ? (r == 0 ? first : 1 - first) : r;
            const float *l = tessera_logits(ctx, r);
            REQUIRE(l, "logits: %s", tessera_last_error());
            const float *want_l = alone[s].logits + (size_t)step * nv;
            for (int32_t i = 0; i < nv; i++) worst = fmax(worst, fabs((double)l[i] - want_l[i]));
            got[s][step] = argmax(l, nv);
        }
        for (int32_t s = 0; s < N_SEQ; s++) {
            toks[s] = got[s][step], pos[s] = alone[s].n_prompt + step, seq[s] = s, want[s] = true;
            last[s] = pos[s] + 1;
        }
        REQUIRE(tessera_decode_batch(ctx, toks, pos, seq, want, N_SEQ) == 0, "step %d: %s", step,
                tessera_last_error());
    }
    for (int32_t s = 0; s < N_SEQ; s++) {
        EXPECT(!memcmp(got[s], alone[s].toks + alone[s].n_prompt, sizeof got[s]),
               "sequence %d: interleaved greedy tokens differ from its run alone", s);
        EXPECT(tessera_seq_len(ctx, s) == last[s], "sequence %d holds %d positions, want %d", s,
               tessera_seq_len(ctx, s), last[s]);
    }
    EXPECT(worst < logit_tol, "interleaved logits differ from the runs alone by %g", worst);
    printf("ok   two interleaved sequences: greedy tokens as alone, logits within %.2g\n", worst);
}

/* Sequence 0 forgets from position 3: all of it goes; sequence 1 goes on
 * as alone; sequence 0 from position 0 gives its run alone again. */
static void check_forget(tessera_model *m, tessera_context *ctx, run *alone) {
    const int32_t nv = tessera_model_n_vocab(m);
    const int32_t len1 = tessera_seq_len(ctx, 1);
    EXPECT(tessera_seq_remove(ctx, 0, 3) == 0, "seq_remove: %s", tessera_last_error());
    EXPECT(tessera_seq_len(ctx, 0) == 0, "after forgetting from 3, sequence 0 holds %d positions (want 0: a "
                                         "recurrent state cannot be rolled back part way)", tessera_seq_len(ctx, 0));
    EXPECT(tessera_seq_len(ctx, 1) == len1, "sequence 1 holds %d positions, had %d", tessera_seq_len(ctx, 1), len1);
    /* a position inside a sequence again: refused, and the sequence is gone */
    int32_t p = 2, s1 = 1;
    bool w = true;
    EXPECT_ERROR(tessera_decode_batch(ctx, &alone[1].toks[2], &p, &s1, &w, 1) != 0, tessera_last_error(),
                 "cannot be rolled back", "decoding position 2 of a sequence of %d", len1);
    EXPECT(tessera_seq_len(ctx, 1) == 0, "sequence 1 after a refused rewind holds %d", tessera_seq_len(ctx, 1));
    /* sequence 0 from scratch, in a context that held other states */
    const run *r = &alone[0];
    int32_t pos[MAX_TOK], seq[MAX_TOK];
    for (int32_t i = 0; i < r->n_prompt; i++) pos[i] = i, seq[i] = 0;
    REQUIRE(tessera_decode_batch(ctx, r->toks, pos, seq, NULL, r->n_prompt - 1) == 0, "%s", tessera_last_error());
    int same = 1;
    for (int32_t i = r->n_prompt - 1; i < r->n - 1 && same; i++) {
        int32_t pi = i, s0 = 0;
        REQUIRE(tessera_decode_batch(ctx, &r->toks[i], &pi, &s0, &w, 1) == 0, "%s", tessera_last_error());
        same = argmax(tessera_logits(ctx, 0), nv) == r->toks[i + 1];
    }
    EXPECT(same, "sequence 0 decoded again from position 0 parts from its run alone");
}

/* The K/V bytes of a context of n_ctx cells against the attention layers'
 * weights, and its memory rows against K/V plus the recurrent states. */
static void check_kv_bytes(tessera_model *tm, bool fa) {
    enum { N_CTX = 256 }; /* a multiple of 32: a transposed V has no padding cells */
    const model *m = tm->m;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 2;
    cp.n_seq_max = N_SEQ;
    cp.flash_attn = fa ? TESSERA_FLASH_ATTN_ON : TESSERA_FLASH_ATTN_OFF;
    tessera_context *ctx = tessera_context_new(tm, &cp);
    REQUIRE(ctx, "context (fa %d): %s", fa, tessera_last_error());
    uint64_t want = 0, rs = 0;
    int32_t n_attn = 0;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const model_layer *L = &m->layers[il];
        rs += 4ull * (uint64_t)m->hp.arch->state_floats(&m->hp, il) * N_SEQ;
        if (!L->wk) continue;
        n_attn++; /* F16 K and V rows of the layer's projections' widths */
        want += (uint64_t)N_CTX * 2ull * (uint64_t)(L->wk->ne[1] + L->wv->ne[1]);
    }
    const uint64_t got = kv_cache_nbytes(ctx->kv);
    EXPECT(got == want, "fa %d: K/V %llu bytes, want %d attention layers x %d cells x rows = %llu", fa,
           (unsigned long long)got, n_attn, N_CTX, (unsigned long long)want);
    EXPECT(kv_cache_n_layer_kv(ctx->kv) == n_attn, "%d layers with K/V, %d attention layers",
           kv_cache_n_layer_kv(ctx->kv), n_attn);
    if (!strcmp(tm->arch, "mamba2")) EXPECT(got == 0 && n_attn == 0, "mamba2: %llu K/V bytes", (unsigned long long)got);
    else EXPECT(n_attn > 0 && n_attn < m->hp.n_layer, "%s: %d attention layers of %d", tm->arch, n_attn, m->hp.n_layer);
    tessera_memory rows[TESSERA_MAX_DEVICES];
    const int32_t n = tessera_context_memory(ctx, rows, TESSERA_MAX_DEVICES);
    uint64_t mem = 0;
    for (int32_t i = 0; i < n; i++) mem += rows[i].kv;
    EXPECT(mem == want + rs, "fa %d: memory rows count %llu KV bytes, want K/V %llu + states %llu", fa,
           (unsigned long long)mem, (unsigned long long)want, (unsigned long long)rs);
    printf("%s fa %d: %d of %d layers with K/V, %llu K/V bytes, %llu state bytes\n", tm->arch, fa, n_attn,
           m->hp.n_layer, (unsigned long long)got, (unsigned long long)rs);
    tessera_context_free(ctx);
}

/* The version 2 layout of a version 3 file: the shorter header, and zero
 * K/V for each recurrent layer where the older writer put its rows. */
static uint8_t *state_as_v2(const kv_cache *kv, const uint8_t *v3, size_t len, size_t *len2) {
    state_header h, h2;
    REQUIRE(state_header_read(&h, v3, len, "v3") == 0 && h.version == 3, "%s", tessera_last_error());
    h2 = h;
    h2.version = 2;
    REQUIRE(state_header_sizes(&h2) == 0, "v2 sizes");
    uint8_t *out = calloc(1, (size_t)h2.total);
    REQUIRE(out, "out of memory");
    state_header_write(&h2, out); /* the v3 field it adds past v2's header is overwritten below */
    memcpy(out + h2.off_tokens, v3 + h.off_tokens, (size_t)(h.off_kv - h.off_tokens));
    uint64_t from = h.off_kv, to = h2.off_kv;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const uint64_t n = (uint64_t)(kv->layers[il].set ? h.n_cells_swa : h.n_cells) *
                           (h.k_cell_bytes + h.v_cell_bytes);
        if (kv_cache_layer_has_kv(kv, il)) memcpy(out + to, v3 + from, (size_t)n), from += n;
        to += n; /* a recurrent layer: zeros */
    }
    REQUIRE(from == h.off_rs && to == h2.off_rs, "layer offsets");
    memcpy(out + h2.off_rs, v3 + h.off_rs, (size_t)(h.off_checksum - h.off_rs));
    state_put(out + h2.off_checksum, state_checksum(out, (size_t)h2.off_checksum), 8);
    *len2 = (size_t)h2.total;
    return out;
}

static void check_old_state(tessera_model *m, const run *r) {
    const int32_t nv = tessera_model_n_vocab(m);
    tessera_context *a = new_ctx(m, 1), *b = new_ctx(m, 1);
    REQUIRE(a && b, "contexts");
    REQUIRE(tessera_decode(a, r->toks, r->n_prompt, 0, 0) == 0, "%s", tessera_last_error());
    size_t len = 0, len2 = 0;
    uint8_t *v3 = tessera_state_save(a, -1, r->toks, r->n_prompt, NULL, &len);
    REQUIRE(v3, "save: %s", tessera_last_error());
    uint8_t *v2 = state_as_v2(a->kv, v3, len, &len2);
    tessera_token toks[MAX_TOK];
    int32_t n = 0;
    EXPECT(tessera_state_load(b, -1, v2, len2, "v2", toks, MAX_TOK, &n, NULL) == 0, "loading a version 2 file: %s",
           tessera_last_error());
    double worst = 0;
    for (int32_t i = r->n_prompt; i < r->n; i++) { /* both go on from the prompt */
        REQUIRE(tessera_decode(a, &r->toks[i], 1, i, 0) == 0 && tessera_decode(b, &r->toks[i], 1, i, 0) == 0, "%s",
                tessera_last_error());
        const float *la = tessera_logits(a, -1), *lb = tessera_logits(b, -1);
        for (int32_t v = 0; v < nv; v++) worst = fmax(worst, fabs((double)la[v] - lb[v]));
    }
    EXPECT(n == r->n_prompt && worst == 0, "version 2 file: %d tokens, logits differ by %g", n, worst);
    if (n == r->n_prompt && worst == 0)
        printf("ok   a version 2 state file (%zu bytes, %zu as version 3) loads: logits as the saved context's\n",
               len2, len);
    free(v2);
    free(v3);
    tessera_context_free(a);
    tessera_context_free(b);
}

TEST(test_recurrent) {
    REQUIRE(harness_argc() >= 2, "usage: test_recurrent MODEL [--device D] [--ngl N] [--tol X]");
    const char *path = harness_arg(1);
    tessera_model_params mp = tessera_model_default_params();
    for (int i = 2; i < harness_argc(); i++)
        if (!strcmp(harness_arg(i), "--device") && i + 1 < harness_argc()) device = harness_arg(++i);
        else if (!strcmp(harness_arg(i), "--ngl") && i + 1 < harness_argc()) mp.n_gpu_layers = atoi(harness_arg(++i));
        else if (!strcmp(harness_arg(i), "--tol") && i + 1 < harness_argc()) logit_tol = atof(harness_arg(++i));
    harness_require_file(path);
    harness_host_start(); /* ref and this build's plugins */
    tessera_model *m = harness_model_load(path, device, &mp);
    check_kv_bytes(m, false);
    check_kv_bytes(m, true);
    const int32_t nv = tessera_model_n_vocab(m);
    run alone[N_SEQ];
    for (int s = 0; s < N_SEQ; s++) {
        alone[s].logits = malloc((size_t)N_GEN * (size_t)nv * sizeof(float));
        REQUIRE(alone[s].logits && run_alone(m, prompts[s], &alone[s]) == 0, "run alone %d", s);
    }
    check_old_state(m, &alone[0]);
    tessera_context *ctx = new_ctx(m, N_SEQ);
    REQUIRE(ctx, "context");
    check_interleaved(m, ctx, alone);

    /* no context shift of a recurrent state */
    EXPECT_ERROR(tessera_seq_shift(ctx, 0, 2, 4) != 0, tessera_last_error(), "recurrent state",
                 "a context shift of sequence 0");
    EXPECT(tessera_seq_len(ctx, 1) > 0, "a refused shift of sequence 0 emptied sequence 1");

    /* a third sequence in a context for two */
    int32_t p = 0, s2 = 2;
    bool w = true;
    EXPECT_ERROR(tessera_decode_batch(ctx, alone[0].toks, &p, &s2, &w, 1) != 0, tessera_last_error(), "n_seq_max",
                 "a third sequence");
    check_forget(m, ctx, alone);

    tessera_context_free(ctx);
    for (int s = 0; s < N_SEQ; s++) free(alone[s].logits);
    tessera_model_free(m);
    tessera_shutdown();
}

HARNESS_MAIN("recurrent state", HARNESS_TEST(test_recurrent))
