/*
 * Public API: decoding several sequences in one step (a server's slots).
 *
 * All sequences share the context's KV cache cells. Each micro-batch takes a
 * contiguous run of free cells (the graph writes K/V to cells
 * kv_head..kv_head+n-1); the cells record (position, sequence) and the mask
 * lets a token see only the cells of its own sequence at positions <= its
 * own. When no run is long enough the micro-batch is cut to the longest free
 * run, so the call succeeds while any cell is free. Sliding-window layers
 * have their own, smaller set of cells (kv.h), placed the same way after
 * dropping the positions no token can see any more.
 *
 * A context is driven either by tessera_decode (sequence 0, cells in
 * position order) or by tessera_decode_batch, not both.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/public.h"
#include "util/error.h"

static int batch_ensure_logits(tessera_context *ctx, int64_t rows) {
    if (rows <= ctx->logits_cap) return 0;
    size_t n = (size_t)rows * (size_t)context_row_width(ctx);
    float *p = realloc(ctx->logits, n * sizeof *p);
    if (!p) return error_set("decode batch: out of memory for %lld rows of logits", (long long)rows);
    ctx->logits = p;
    ctx->logits_cap = rows;
    return 0;
}

/* Count one decoding step's device calls (the counters' difference). */
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

/* One micro-batch of n tokens into cells head[s]..head[s]+n-1 of each cell
 * set s; kept rows go to logits_out in token order. */
static int batch_ubatch(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                        const int32_t *seq, const bool *want, int32_t n, const int32_t *head, float *logits_out) {
    const model *m = ctx->model->m;
    kv_cache *kv = ctx->kv;
    int32_t n_out = 0, n_kv[KV_MAX_SETS];
    for (int32_t i = 0; i < n; i++) n_out += want && want[i];
    for (int32_t s = 0; s < kv->n_sets; s++) {
        kv_cells_place(&kv->sets[s], head[s], n, pos, seq);
        n_kv[s] = step_kv_padded(kv_cells_n_kv(&kv->sets[s]), kv->sets[s].size, n);
    }
    /* The graph needs at least one output row; an unwanted one is dropped. */
    model_batch_graph *bg;
    const int64_t built = ctx->step.n_built;
    if (step_graph_get(&ctx->step, m, kv, ctx->sched, n, head, n_kv, n_out > 0 ? n_out : 1, ctx->graph_reuse,
                       &bg) != 0)
        goto fail;
    bool *explained = n > 1 ? &ctx->explained_prompt : &ctx->explained_gen;
    if (ctx->params.explain && !*explained) {
        fprintf(stderr, "tessera: placement of the %s graph (%d tokens, %d cells):\n",
                n > 1 ? "prompt" : "generation", n, n_kv[0]);
        sched_explain(ctx->sched, stderr);
        *explained = true;
    }
    int32_t *tok = bg->tokens->t.data, *posv = bg->pos->t.data;
    for (int32_t i = 0; i < n; i++) {
        tok[i] = tokens[i];
        posv[i] = pos[i];
    }
    if (m->hp.causal_attn) model_fill_mask(&kv->sets[0], n_kv[0], n, pos, seq, 0, bg->mask->t.data);
    else model_fill_mask_bidir(&kv->sets[0], n_kv[0], n, seq, bg->mask->t.data);
    if (bg->mask_swa) {
        const int32_t sw = kv_cache_swa_set(kv);
        model_fill_mask(&kv->sets[sw], n_kv[sw], n, pos, seq, m->hp.n_swa, bg->mask_swa->t.data);
    }
    if (bg->attn_temp) model_fill_attn_temp(&m->hp, n, pos, bg->attn_temp->t.data);
    if (bg->out_ids) {
        int32_t *ids = bg->out_ids->t.data, k = 0;
        for (int32_t i = 0; i < n; i++)
            if (want && want[i]) ids[k++] = i;
        if (k == 0) ids[0] = n - 1;
    }
    sched_counters before, after;
    sched_get_counters(ctx->sched, &before);
    if (sched_compute(ctx->sched, bg->g) != 0) goto fail;
    if (n == 1) {
        sched_get_counters(ctx->sched, &after);
        step_stats_add(&ctx->gen_stats, ctx->sched, &before, &after, ctx->step.n_built != built);
    }
    if (n_out > 0 && logits_out)
        memcpy(logits_out, bg->logits->t.data, (size_t)n_out * (size_t)context_row_width(ctx) * sizeof(float));
    return 0;
fail:
    step_graph_drop(&ctx->step);
    for (int32_t s = 0; s < kv->n_sets; s++) kv_cells_clear(&kv->sets[s], head[s], n);
    return -1;
}

/* Where the next micro-batch of up to want tokens goes: a run of free cells
 * in every set (a sliding-window set first drops what the tokens cannot
 * see). Returns the tokens that fit, 0 when some set has no free cell. */
static int32_t batch_place(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t want, int32_t *head) {
    int32_t nb = want;
    for (int32_t s = 0; s < kv->n_sets && nb > 0; s++) {
        kv_cells *c = &kv->sets[s];
        int32_t got = kv_cells_find_run(c, nb, &head[s]);
        if (got < nb && c->n_swa > 0) {
            kv_cells_drop_old(c, nb, pos, seq);
            got = kv_cells_find_run(c, nb, &head[s]);
        }
        if (got < nb) {
            nb = got; /* the sets before this one then take fewer: look again */
            s = -1;
        }
    }
    return nb;
}

/* Decode n_tokens tokens of any sequences; the wanted rows' logits go to
 * ctx->logits in token order. Returns the number of rows kept, or -1. */
int context_decode_tokens(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                          const int32_t *seq, const bool *want_logits, int32_t n_tokens) {
    kv_cache *kv = ctx->kv;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n_tokens; i++) n_out += want_logits && want_logits[i];
    if (batch_ensure_logits(ctx, n_out > 0 ? n_out : 1) != 0) return -1;
    /* A sequence forgets what it held at or after the first position given
     * for it. */
    for (int32_t i = 0; i < n_tokens; i++) {
        bool first = true;
        for (int32_t k = 0; k < i && first; k++) first = seq[k] != seq[i];
        if (!first) continue;
        int32_t lo = pos[i];
        for (int32_t k = i + 1; k < n_tokens; k++)
            if (seq[k] == seq[i] && pos[k] < lo) lo = pos[k];
        if (kv_cache_seq_forget(kv, seq[i], lo) < lo)
            return error_set("sequence %d cannot go on at position %d: the sliding-window cache no longer holds "
                             "the positions before it, so the sequence was cleared (decode it from position 0)",
                             seq[i], lo);
    }
    int32_t n_free = kv->n_ctx - kv_cells_used(&kv->sets[0]);
    if (n_free < n_tokens)
        return error_set("context full: %d tokens need cells, %d of %d are free (-c)", n_tokens, n_free,
                         kv->n_ctx);

    kv_cache_compact(kv);

    double t0 = tessera_now_ms();
    const size_t nv = (size_t)context_row_width(ctx);
    int32_t n_batch = (int32_t)ctx->params.n_batch, done_out = 0;
    for (int32_t b0 = 0; b0 < n_tokens;) {
        int32_t want = n_tokens - b0 < n_batch ? n_tokens - b0 : n_batch, head[KV_MAX_SETS] = {0};
        int32_t nb = batch_place(kv, pos + b0, seq + b0, want, head);
        if (nb == 0)
            return error_set(kv->n_sets > 1 ? "no free cell left in the KV cache (the sliding-window cells hold "
                                              "the window of more sequences than the context was made for)"
                                            : "no free cell left in the KV cache");
        const bool *w = want_logits ? want_logits + b0 : NULL;
        if (batch_ubatch(ctx, tokens + b0, pos + b0, seq + b0, w, nb, head,
                         ctx->logits + (size_t)done_out * nv) != 0)
            return -1;
        for (int32_t i = 0; i < nb; i++) done_out += w && w[i];
        b0 += nb;
    }
    if (logits_check_finite(ctx->logits, n_out, (int64_t)nv) != 0) return -1;
    double dt = tessera_now_ms() - t0;
    if (n_tokens > 1) {
        ctx->timings.prompt_ms += dt;
        ctx->timings.n_prompt += n_tokens;
    } else {
        ctx->timings.gen_ms += dt;
        ctx->timings.n_gen += 1;
    }
    return n_out;
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
    int32_t n_out = context_decode_tokens(ctx, tokens, pos, seq, want_logits, n_tokens);
    if (n_out < 0) return error_wrap("decode batch");
    ctx->n_last = n_out;
    ctx->last_all = true;
    return 0;
}

int tessera_seq_remove(tessera_context *ctx, int32_t seq, int32_t pos) {
    if (!ctx) return error_set("seq remove: no context");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("seq remove: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    kv_cache_seq_forget(ctx->kv, seq, pos < 0 ? 0 : pos);
    return 0;
}

int32_t tessera_seq_len(const tessera_context *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= TESSERA_MAX_SEQ) return 0;
    return kv_cache_seq_len(ctx->kv, seq);
}

int32_t tessera_kv_cells_used(const tessera_context *ctx) { return kv_cells_used(&ctx->kv->sets[0]); }
