/* Public API: decoding (tessera_decode, tessera_decode_batch, tessera_logits);
 * the path of one call is described in decode.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_mtmd.h>

#include "host/host_log.h"
#include "model/decode.h"
#include "model/observe.h"
#include "model/public.h"
#include "util/error.h"

void decode_scratch_free(decode_scratch *s) {
    free(s->pos);
    free(s->seq);
    free(s->want);
    *s = (decode_scratch){0};
}

/* Room for n tokens in each scratch array (kept on failure: cap only grows
 * once all three did). */
static int scratch_reserve(decode_scratch *s, int32_t n) {
    if (n <= s->cap) return 0;
    int32_t *pos = realloc(s->pos, (size_t)n * sizeof *pos);
    if (pos) s->pos = pos;
    int32_t *seq = realloc(s->seq, (size_t)n * sizeof *seq);
    if (seq) s->seq = seq;
    bool *want = realloc(s->want, (size_t)n * sizeof *want);
    if (want) s->want = want;
    if (!pos || !seq || !want) return error_set("out of memory for %d tokens", n);
    s->cap = n;
    return 0;
}

static int logits_reserve(tessera_context *ctx, int64_t rows) {
    if (rows <= ctx->logits_cap) return 0;
    size_t n = (size_t)rows * (size_t)context_row_width(ctx);
    float *p = realloc(ctx->logits, n * sizeof *p);
    if (!p) return error_set("out of memory for %lld rows of logits", (long long)rows);
    ctx->logits = p;
    ctx->logits_cap = rows;
    return 0;
}

/* Copy rows of logits out of the graph and check them in the same pass:
 * a NaN or an infinity (broken weights or hyperparameters) is never
 * sampled. row0 numbers the first row in the call's outputs. */
static int logits_copy_finite(float *dst, const float *src, int64_t rows, int64_t n_vocab, int64_t row0) {
    const int64_t n = rows * n_vocab;
    bool finite = true;
    for (int64_t i = 0; i < n; i++) {
        dst[i] = src[i];
        finite &= isfinite(src[i]) != 0; /* no branch: the loop stays a vector copy */
    }
    if (finite) return 0;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(src[i]))
            return error_set("the logits of output %lld are not finite (token %lld is %g): the model's weights or "
                             "hyperparameters are broken",
                             (long long)(row0 + i / n_vocab), (long long)(i % n_vocab), (double)src[i]);
    return 0;
}

/* Count one generation step's device calls (the counters' difference). */
static void step_stats_add(tessera_step_stats *st, const sched *s, const sched_counters *a, const sched_counters *b,
                           bool built) {
    sched_stats ss;
    sched_get_stats(s, &ss);
    st->n_steps++;
    st->n_graphs_built += built;
    st->n_splits = ss.n_splits;
    st->n_computes += (int64_t)(b->n_computes - a->n_computes);
    st->n_submits += (int64_t)(b->n_submits - a->n_submits);
    st->n_replayed += (int64_t)(b->n_replayed - a->n_replayed);
    st->n_uploads += (int64_t)(b->n_uploads - a->n_uploads);
    st->upload_bytes += (int64_t)(b->upload_bytes - a->upload_bytes);
    st->n_reads += (int64_t)(b->n_reads - a->n_reads);
    st->read_bytes += (int64_t)(b->read_bytes - a->read_bytes);
    st->n_waits += (int64_t)(b->n_waits - a->n_waits);
}

/* --explain: the placement of the first prompt and generation graphs. */
static void explain_once(tessera_context *ctx, int32_t n, int32_t n_kv) {
    bool *explained = n > 1 ? &ctx->explained_prompt : &ctx->explained_gen;
    if (!ctx->params.explain || *explained) return;
    *explained = true;
    if (!host_log_wanted()) return;
    /* the report is written to a FILE; the log takes it line by line */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return;
    fprintf(f, "tessera: placement of the %s graph (%d tokens, %d cells):\n", n > 1 ? "prompt" : "generation", n,
            n_kv);
    sched_explain(ctx->sched, f);
    if (fclose(f) == 0) host_log_text(TESSERA_LOG_INFO, text);
    free(text);
}

/* The step graph's inputs for n tokens (want: NULL keeps none). */
static void fill_inputs(const tessera_context *ctx, model_batch_graph *bg, const tessera_token *tokens,
                        const int32_t *pos, const int32_t *seq, const bool *want, int32_t n, const int32_t *n_kv) {
    const model *m = ctx->model->m;
    if (bg->embd)
        memcpy(bg->embd->t.data, ctx->embd_in, (size_t)n * (size_t)m->hp.n_embd * sizeof(float));
    else
        memcpy(bg->tokens->t.data, tokens, (size_t)n * sizeof *tokens);
    memcpy(bg->pos->t.data, pos, (size_t)n * sizeof *pos);
    if (bg->pos_mrope) mrope_fill(&ctx->mrope, pos, seq, n, bg->pos_mrope->t.data);
    const bool causal = m->hp.causal_attn && !ctx->non_causal;
    kv_cache_fill_mask(ctx->kv, false, causal, n_kv, n, pos, seq, bg->mask->t.data);
    if (bg->mask_swa) kv_cache_fill_mask(ctx->kv, true, causal, n_kv, n, pos, seq, bg->mask_swa->t.data);
    if (bg->attn_temp) model_fill_attn_temp(&m->hp, n, pos, bg->attn_temp->t.data);
    if (bg->out_ids) {
        int32_t *ids = bg->out_ids->t.data, k = 0;
        for (int32_t i = 0; i < n; i++)
            if (want && want[i]) ids[k++] = i;
        if (k == 0) ids[0] = n - 1; /* the graph needs one output row; it is dropped */
    }
}

/* One micro-batch in the cells ub reserved; its n_out kept rows go to the
 * context's logits from row row0. */
static int decode_ubatch(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos, const int32_t *seq,
                         const bool *want, const kv_ubatch *ub, int32_t row0) {
    const model *m = ctx->model->m;
    const int32_t n = ub->n;
    int32_t n_out = 0, n_kv[KV_MAX_SETS] = {0};
    for (int32_t i = 0; i < n; i++) n_out += want && want[i];
    for (int32_t s = 0; s < ub->n_sets; s++) n_kv[s] = step_kv_padded(ub->n_kv[s], ub->n_cells[s], n);
    model_batch_graph *bg;
    const int64_t built = ctx->step.n_built;
    if (step_graph_get(&ctx->step, m, ctx->kv, &ctx->lora, ctx->sched, n, ub->head, n_kv, n_out > 0 ? n_out : 1,
                       ctx->graph_reuse, &bg) != 0)
        return -1;
    explain_once(ctx, n, n_kv[0]);
    fill_inputs(ctx, bg, tokens, pos, seq, want, n, n_kv);
    sched_counters before, after;
    sched_get_counters(ctx->sched, &before);
    if (sched_compute(ctx->sched, bg->g) != 0) return -1;
    if (ctx->observer && observe_step(ctx, bg->g) != 0) return -1;
    if (n == 1) {
        sched_get_counters(ctx->sched, &after);
        step_stats_add(&ctx->gen_stats, ctx->sched, &before, &after, ctx->step.n_built != built);
    }
    const int64_t nv = context_row_width(ctx); /* n_vocab, or n_embd in an embedding context */
    return logits_copy_finite(ctx->logits + (size_t)row0 * (size_t)nv, bg->logits->t.data, n_out, nv, row0);
}

static void add_timing(tessera_context *ctx, int32_t n_tokens, double ms) {
    if (n_tokens > 1) {
        ctx->timings.prompt_ms += ms;
        ctx->timings.n_prompt += n_tokens;
    } else {
        ctx->timings.gen_ms += ms;
        ctx->timings.n_gen += 1;
    }
}

/* Decode n_tokens tokens of any sequences; the wanted rows' logits go to
 * ctx->logits in token order. Returns the number of rows kept, or -1 with
 * the cache as it was before the call's tokens (what they replaced is
 * gone). */
int32_t decode_tokens(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                             const int32_t *seq, const bool *want, int32_t n_tokens) {
    int32_t n_out = 0;
    for (int32_t i = 0; i < n_tokens; i++) n_out += want && want[i];
    if (logits_reserve(ctx, n_out > 0 ? n_out : 1) != 0) return -1;
    if (kv_cache_batch_begin(ctx->kv, pos, seq, n_tokens) != 0) return -1;
    const double t0 = tessera_now_ms();
    const int32_t n_batch = (int32_t)ctx->params.n_batch;
    int32_t row = 0;
    for (int32_t b0 = 0; b0 < n_tokens;) {
        const int32_t left = n_tokens - b0;
        const bool *w = want ? want + b0 : NULL;
        kv_ubatch ub;
        if (kv_cache_ubatch_reserve(ctx->kv, pos + b0, seq + b0, left < n_batch ? left : n_batch, &ub) == 0 ||
            decode_ubatch(ctx, tokens ? tokens + b0 : NULL, pos + b0, seq + b0, w, &ub, row) != 0) {
            step_graph_drop(&ctx->step); /* nothing about a failed step is trusted */
            kv_cache_batch_rollback(ctx->kv);
            return -1;
        }
        if (ctx->embd_in) ctx->embd_in += (size_t)ub.n * (size_t)ctx->model->m->hp.n_embd;
        for (int32_t i = 0; i < ub.n; i++) row += w && w[i];
        b0 += ub.n;
    }
    add_timing(ctx, n_tokens, tessera_now_ms() - t0);
    return n_out;
}

/* Sequence 0's tokens at pos, pos + 1, ...: checked, then the batch path. */
int tessera_decode(tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens, int32_t pos,
                   uint32_t flags) {
    const model *m = ctx->model->m;
    int32_t n_ctx = (int32_t)ctx->params.n_ctx;
    int32_t len = kv_cache_seq_len(ctx->kv, 0);
    ctx->n_last = 0;
    if (n_tokens <= 0 || !tokens) return error_set("decode: no tokens given");
    if (pos < 0 || pos > len)
        return error_set("decode: position %d is not in 0..%d (the cache holds %d positions)", pos, len, len);
    /* Rewinding past what a sliding-window cache still holds clears it. */
    mrope_forget(&ctx->mrope, 0, pos);
    if (pos < len && kv_cache_seq_forget(ctx->kv, 0, pos) < pos)
        return error_set(kv_cache_is_recurrent(ctx->kv)
                             ? "decode: position %d cannot be reached again: a recurrent state cannot be rolled "
                               "back, so it was cleared (decode from position 0)"
                             : "decode: position %d cannot be reached again: the sliding-window cache dropped "
                               "positions before it, so it was cleared (decode from position 0)",
                         pos);
    if ((int64_t)pos + n_tokens > n_ctx)
        return error_set("decode: context full: %d tokens at position %d need %lld cells, the context has %d (-c)",
                         n_tokens, pos, (long long)pos + n_tokens, n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return error_set("decode: token %d at index %d is out of range (vocabulary of %d)", tokens[i], i,
                             m->hp.n_vocab);
    if (scratch_reserve(&ctx->scratch, n_tokens) != 0) return error_wrap("decode");
    const bool all = (flags & TESSERA_DECODE_ALL_LOGITS) != 0;
    decode_scratch *s = &ctx->scratch;
    for (int32_t i = 0; i < n_tokens; i++) {
        s->pos[i] = pos + i;
        s->seq[i] = 0;
        s->want[i] = all || i == n_tokens - 1;
    }
    if (decode_tokens(ctx, tokens, s->pos, s->seq, s->want, n_tokens) < 0) return error_wrap("decode");
    ctx->n_last = n_tokens;
    ctx->last_all = all;
    return 0;
}

/* Embedding rows (a medium's, from its projector) into sequence seq at
 * pos, pos + 1, ...: the same checks and path as tokens, through a graph
 * that takes the rows in place of the token lookup. */
static int decode_embd(tessera_context *ctx, const float *embd, int32_t n_rows, int32_t pos, int32_t seq,
                       uint32_t flags, int32_t nx, int32_t ny) {
    if (!ctx) return error_set("decode embeddings: no context");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("decode embeddings: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    int32_t n_ctx = (int32_t)ctx->params.n_ctx;
    int32_t len = kv_cache_seq_len(ctx->kv, seq);
    ctx->n_last = 0;
    if (n_rows <= 0 || !embd) return error_set("decode embeddings: no rows given");
    if (pos < 0 || pos > len)
        return error_set("decode embeddings: position %d is not in 0..%d (the cache holds %d positions)", pos, len,
                         len);
    mrope_forget(&ctx->mrope, seq, pos);
    if (pos < len && kv_cache_seq_forget(ctx->kv, seq, pos) < pos)
        return error_set("decode embeddings: position %d cannot be reached again: the sliding-window cache "
                         "dropped positions before it", pos);
    if ((int64_t)pos + n_rows > n_ctx)
        return error_set("decode embeddings: context full: %d rows at position %d need %lld cells, the context "
                         "has %d (-c)", n_rows, pos, (long long)pos + n_rows, n_ctx);
    const bool non_causal = (flags & TESSERA_DECODE_NON_CAUSAL) != 0;
    if (non_causal && (uint32_t)n_rows > ctx->params.n_batch)
        return error_set("decode embeddings: %d rows that attend both ways need one batch, but -b is %u", n_rows,
                         ctx->params.n_batch);
    if (scratch_reserve(&ctx->scratch, n_rows) != 0) return error_wrap("decode embeddings");
    const bool all = (flags & TESSERA_DECODE_ALL_LOGITS) != 0;
    decode_scratch *s = &ctx->scratch;
    for (int32_t i = 0; i < n_rows; i++) {
        s->pos[i] = pos + i;
        s->seq[i] = seq;
        s->want[i] = all || i == n_rows - 1;
    }
    ctx->embd_in = embd;
    ctx->step.embd_in = true;
    ctx->non_causal = non_causal;
    const bool grid = nx > 0 && model_hparams_mrope(&ctx->model->m->hp);
    if (grid) ctx->mrope = (mrope_state){ctx->mrope.marks, ctx->mrope.n, ctx->mrope.cap, nx, pos, seq};
    int32_t rc = decode_tokens(ctx, NULL, s->pos, s->seq, s->want, n_rows);
    ctx->mrope.grid_nx = 0;
    if (rc >= 0 && grid && mrope_add_grid(&ctx->mrope, seq, pos, nx, ny) != 0) rc = -1;
    ctx->non_causal = false;
    ctx->embd_in = NULL;
    ctx->step.embd_in = false;
    if (rc < 0) return error_wrap("decode embeddings");
    ctx->n_last = n_rows;
    ctx->last_all = all;
    return 0;
}

int tessera_decode_embd_seq(tessera_context *ctx, const float *embd, int32_t n_rows, int32_t pos, int32_t seq,
                            uint32_t flags) {
    return decode_embd(ctx, embd, n_rows, pos, seq, flags, 0, 0);
}

int tessera_decode_embd_grid(tessera_context *ctx, const float *embd, int32_t nx, int32_t ny, int32_t pos,
                             int32_t seq, uint32_t flags) {
    if (nx <= 0 || ny <= 0 || (int64_t)nx * ny > INT32_MAX)
        return error_set("decode embeddings: a grid of %d x %d rows", nx, ny);
    return decode_embd(ctx, embd, nx * ny, pos, seq, flags, nx, ny);
}

int tessera_decode_embd(tessera_context *ctx, const float *embd, int32_t n_rows, int32_t pos, uint32_t flags) {
    return tessera_decode_embd_seq(ctx, embd, n_rows, pos, 0, flags);
}

int tessera_decode_batch(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                         const int32_t *seq, const bool *want_logits, int32_t n_tokens) {
    if (!ctx) return error_set("decode batch: no context");
    const model *m = ctx->model->m;
    ctx->n_last = 0;
    if (n_tokens <= 0 || !tokens || !pos || !seq) return error_set("decode batch: no tokens given");
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return error_set("decode batch: token %d at index %d is out of range (vocabulary of %d)",
                             tokens[i], i, m->hp.n_vocab);
        if (seq[i] < 0 || seq[i] >= TESSERA_MAX_SEQ)
            return error_set("decode batch: sequence %d at index %d is not in 0..%d", seq[i], i,
                             TESSERA_MAX_SEQ - 1);
        if (pos[i] < 0) return error_set("decode batch: position %d at index %d is negative", pos[i], i);
    }
    int32_t n_out = decode_tokens(ctx, tokens, pos, seq, want_logits, n_tokens);
    if (n_out < 0) return error_wrap("decode batch");
    ctx->n_last = n_out;
    ctx->last_all = true;
    return 0;
}

const float *tessera_logits(tessera_context *ctx, int32_t i) {
    if (ctx->embeddings) {
        error_set("logits: an embedding context has none (tessera_embed)");
        return NULL;
    }
    if (ctx->n_last == 0) {
        error_set("logits: no successful decode call yet");
        return NULL;
    }
    if (i < 0) i = ctx->n_last + i;
    if (i < 0 || i >= ctx->n_last) {
        error_set("logits: index %d is outside the last call's %d tokens", i, ctx->n_last);
        return NULL;
    }
    size_t nv = (size_t)ctx->model->m->hp.n_vocab;
    if (ctx->last_all) return ctx->logits + (size_t)i * nv;
    if (i != ctx->n_last - 1) {
        error_set("logits: token %d was not kept (decode with TESSERA_DECODE_ALL_LOGITS)", i);
        return NULL;
    }
    return ctx->logits;
}
