/*
 * Public API: decoding several sequences in one step (a server's slots).
 *
 * All sequences share the context's KV cache cells. Each micro-batch takes a
 * contiguous run of free cells (the graph writes K/V to cells
 * kv_head..kv_head+n-1); the cells record (position, sequence) and the mask
 * lets a token see only the cells of its own sequence at positions <= its
 * own. When no run is long enough the micro-batch is cut to the longest free
 * run, so the call succeeds while any cell is free.
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
    size_t n = (size_t)rows * (size_t)ctx->model->m->hp.n_vocab;
    float *p = realloc(ctx->logits, n * sizeof *p);
    if (!p) return error_set("decode batch: out of memory for %lld rows of logits", (long long)rows);
    ctx->logits = p;
    ctx->logits_cap = rows;
    return 0;
}

static void cell_clear(kv_cache *kv, int32_t j) {
    kv->cell_seq[j] = 0;
    kv->cell_pos[j] = -1;
}

/* Forget the cells of seq at positions >= pos. */
static void seq_forget_from(kv_cache *kv, int32_t seq, int32_t pos) {
    const uint64_t bit = (uint64_t)1 << seq;
    for (int32_t j = 0; j < kv->n_ctx; j++)
        if ((kv->cell_seq[j] & bit) && kv->cell_pos[j] >= pos) {
            kv->cell_seq[j] &= ~bit;
            if (!kv->cell_seq[j]) kv->cell_pos[j] = -1;
        }
}

/* The lowest run of up to want free cells: the first run of length want, or
 * else the longest run. Returns its length (0: the cache is full). */
static int32_t find_free_run(const kv_cache *kv, int32_t want, int32_t *head) {
    int32_t best_len = 0, best_head = 0;
    for (int32_t j = 0; j < kv->n_ctx;) {
        if (kv->cell_seq[j]) {
            j++;
            continue;
        }
        int32_t s = j;
        while (j < kv->n_ctx && !kv->cell_seq[j] && j - s < want) j++;
        if (j - s == want) {
            *head = s;
            return want;
        }
        if (j - s > best_len) {
            best_len = j - s;
            best_head = s;
        }
    }
    *head = best_head;
    return best_len;
}

/* Cells after the last used one are not attended to, but holes below it are:
 * every token of a step computes attention over all n_kv cells. Sequences
 * finishing at different times leave holes, so n_kv would creep up to n_ctx;
 * moving the used cells down to 0..used-1 keeps it near the cells in use.
 * Done in place when every layer's K/V is in host-addressable memory (the
 * decode calls are synchronous, nothing is computing meanwhile). K rows are
 * contiguous per cell, and V's unless it is transposed (a cell is then one
 * element per row). */
static void kv_compact(kv_cache *kv) {
    int32_t used = 0, n_kv = 0;
    for (int32_t j = 0; j < kv->n_ctx; j++)
        if (kv->cell_seq[j]) {
            used++;
            n_kv = j + 1;
        }
    int32_t slack = used / 4 > 64 ? used / 4 : 64;
    if (n_kv - used <= slack) return;
    for (int32_t il = 0; il < kv->n_layer; il++)
        if (!kv->layers[il].k_data || !kv->layers[il].v_data) return;
    const size_t k_row = kv_row_bytes(kv->dtype_k, kv->n_embd_k);
    const size_t v_cell = kv->flash_attn ? kv_row_bytes(kv->dtype_v, kv->n_embd_v) : kv_row_bytes(kv->dtype_v, 1);
    const size_t v_row = kv_row_bytes(kv->dtype_v, kv->n_ctx);
    int32_t dst = 0;
    for (int32_t j = 0; j < n_kv; j++) {
        if (!kv->cell_seq[j]) continue;
        if (j != dst) {
            for (int32_t il = 0; il < kv->n_layer; il++) {
                char *k = kv->layers[il].k_data, *v = kv->layers[il].v_data;
                memcpy(k + (size_t)dst * k_row, k + (size_t)j * k_row, k_row);
                if (kv->flash_attn) memcpy(v + (size_t)dst * v_cell, v + (size_t)j * v_cell, v_cell);
                else
                    for (int32_t r = 0; r < kv->n_embd_v; r++)
                        memcpy(v + (size_t)r * v_row + (size_t)dst * v_cell,
                               v + (size_t)r * v_row + (size_t)j * v_cell, v_cell);
            }
            kv->cell_seq[dst] = kv->cell_seq[j];
            kv->cell_pos[dst] = kv->cell_pos[j];
            cell_clear(kv, j);
        }
        dst++;
    }
}

/* One micro-batch of n tokens into cells head..head+n-1; kept rows go to
 * logits_out in token order. */
static int batch_ubatch(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                        const int32_t *seq, const bool *want, int32_t n, int32_t head, float *logits_out) {
    const model *m = ctx->model->m;
    kv_cache *kv = ctx->kv;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) n_out += want && want[i];
    for (int32_t i = 0; i < n; i++) {
        kv->cell_pos[head + i] = pos[i];
        kv->cell_seq[head + i] = (uint64_t)1 << seq[i];
    }
    int32_t n_kv = 0;
    for (int32_t j = kv->n_ctx - 1; j >= 0; j--)
        if (kv->cell_seq[j]) {
            n_kv = j + 1;
            break;
        }
    /* The graph needs at least one output row; an unwanted one is dropped. */
    model_batch_graph bg;
    int rc = -1;
    if (model_build_graph(m, kv, n, head, n_kv, n_out > 0 ? n_out : 1, &bg) != 0) goto fail;
    if (sched_alloc(ctx->sched, bg.g) != 0) goto done;
    bool *explained = n > 1 ? &ctx->explained_prompt : &ctx->explained_gen;
    if (ctx->params.explain && !*explained) {
        fprintf(stderr, "tessera: placement of the %s graph (%d tokens, %d cells):\n",
                n > 1 ? "prompt" : "generation", n, n_kv);
        sched_explain(ctx->sched, stderr);
        *explained = true;
    }
    int32_t *tok = bg.tokens->t.data, *posv = bg.pos->t.data;
    for (int32_t i = 0; i < n; i++) {
        tok[i] = tokens[i];
        posv[i] = pos[i];
    }
    model_fill_masks(kv, n_kv, n, pos, seq, m->hp.n_swa, bg.mask->t.data,
                     bg.mask_swa ? bg.mask_swa->t.data : NULL);
    if (bg.attn_temp) model_fill_attn_temp(&m->hp, n, pos, bg.attn_temp->t.data);
    if (bg.out_ids) {
        int32_t *ids = bg.out_ids->t.data, k = 0;
        for (int32_t i = 0; i < n; i++)
            if (want && want[i]) ids[k++] = i;
        if (k == 0) ids[0] = n - 1;
    }
    host_set_n_threads(ctx->params.n_threads);
    if (sched_compute(ctx->sched, bg.g) != 0) goto done;
    if (n_out > 0 && logits_out)
        memcpy(logits_out, bg.logits->t.data, (size_t)n_out * (size_t)m->hp.n_vocab * sizeof(float));
    rc = 0;
done:
    graph_free(bg.g);
fail:
    if (rc != 0)
        for (int32_t i = 0; i < n; i++) cell_clear(kv, head + i);
    return rc;
}

/* Decode n_tokens tokens of any sequences; the wanted rows' logits go to
 * ctx->logits in token order. Returns the number of rows kept, or -1. */
int context_decode_tokens(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                          const int32_t *seq, const bool *want_logits, int32_t n_tokens) {
    const model *m = ctx->model->m;
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
        seq_forget_from(kv, seq[i], lo);
    }
    int32_t n_free = 0;
    for (int32_t j = 0; j < kv->n_ctx; j++) n_free += kv->cell_seq[j] == 0;
    if (n_free < n_tokens)
        return error_set("context full: %d tokens need cells, %d of %d are free (-c)", n_tokens, n_free,
                         kv->n_ctx);

    kv_compact(kv);

    double t0 = tessera_now_ms();
    const size_t nv = (size_t)m->hp.n_vocab;
    int32_t n_batch = (int32_t)ctx->params.n_batch, done_out = 0;
    for (int32_t b0 = 0; b0 < n_tokens;) {
        int32_t want = n_tokens - b0 < n_batch ? n_tokens - b0 : n_batch, head = 0;
        int32_t nb = find_free_run(kv, want, &head);
        if (nb == 0) return error_set("no free cell left in the KV cache");
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
    seq_forget_from(ctx->kv, seq, pos < 0 ? 0 : pos);
    return 0;
}

int32_t tessera_kv_cells_used(const tessera_context *ctx) {
    int32_t n = 0;
    for (int32_t j = 0; j < ctx->kv->n_ctx; j++) n += ctx->kv->cell_seq[j] != 0;
    return n;
}
