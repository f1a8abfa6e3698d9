/*
 * Public API: embeddings and reranking.
 *
 * An embedding context's graphs end at the hidden states (kv->embd_out);
 * tessera_embed runs one sequence, keeps the rows its pooling needs (all for
 * none and mean, the first for cls and rank, the last for last) and pools,
 * scores and normalises them on the host (pooling.c).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model/decode.h"
#include "model/pooling.h"
#include "model/public.h"
#include "util/error.h"

static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};

const char *tessera_pooling_name(int32_t pooling) {
    return pooling >= 0 && pooling <= TESSERA_POOLING_RANK ? pooling_names[pooling] : NULL;
}

int32_t tessera_pooling_from_name(const char *name) {
    if (!name) return -1;
    if (!strcasecmp(name, "unspecified")) return TESSERA_POOLING_UNSPECIFIED;
    for (int32_t i = 0; i <= TESSERA_POOLING_RANK; i++)
        if (!strcasecmp(name, pooling_names[i])) return i;
    return -1;
}

int context_embed_setup(tessera_context *ctx) {
    const model *m = ctx->model->m;
    const tessera_context_params *p = &ctx->params;
    ctx->embeddings = p->embeddings || !m->hp.causal_attn;
    ctx->pooling = -1;
    ctx->kv->embd_out = ctx->embeddings;
    if (!ctx->embeddings) return 0;
    int32_t pooling = p->pooling;
    if (pooling < TESSERA_POOLING_UNSPECIFIED || pooling > TESSERA_POOLING_RANK)
        return error_set("context: pooling %d is not one of -1 (the file's), 0 none, 1 mean, 2 cls, 3 last, 4 rank",
                         pooling);
    if (pooling == TESSERA_POOLING_UNSPECIFIED)
        pooling = m->hp.pooling >= 0 ? m->hp.pooling : TESSERA_POOLING_NONE;
    if (pooling == TESSERA_POOLING_RANK && !m->cls_out)
        return error_set("context: pooling rank needs a classification head, and %s has no cls.output.weight",
                         gguf_path(m->file));
    ctx->pooling = pooling;
    return 0;
}

int32_t tessera_context_pooling(const tessera_context *ctx) { return ctx && ctx->embeddings ? ctx->pooling : -1; }

int32_t tessera_embed_dim(const tessera_context *ctx) {
    if (!ctx) return 0;
    const model *m = ctx->model->m;
    return ctx->pooling == TESSERA_POOLING_RANK ? pool_n_cls_out(m) : m->hp.n_embd;
}

/* The checks of one input; the error names what is wrong with it. */
static int embed_check(const tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens) {
    const model *m = ctx->model->m;
    if (!ctx->embeddings)
        return error_set("embed: the context gives logits, not embeddings (make it with embeddings = true)");
    if (n_tokens <= 0 || !tokens) return error_set("embed: no tokens given");
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return error_set("embed: token %d at index %d is out of range (vocabulary of %d)", tokens[i], i,
                             m->hp.n_vocab);
    if ((uint32_t)n_tokens > ctx->params.n_ctx)
        return error_set("embed: the input of %d tokens is too large to process: longer than the context of %u "
                         "tokens (-c)",
                         n_tokens, ctx->params.n_ctx);
    if (!m->hp.causal_attn && (uint32_t)n_tokens > ctx->params.n_batch)
        return error_set("embed: the input of %d tokens is too large to process: longer than the batch of %u "
                         "tokens (-b): an encoder sees its whole input at once",
                         n_tokens, ctx->params.n_batch);
    return 0;
}

/* Pool, score and normalise the kept rows into out. */
static int64_t embed_pool(tessera_context *ctx, int32_t n_rows, int32_t embd_norm, float *out) {
    const model *m = ctx->model->m;
    const int32_t E = m->hp.n_embd;
    if (ctx->pooling == TESSERA_POOLING_NONE) {
        for (int32_t r = 0; r < n_rows; r++) {
            memcpy(out + (size_t)r * E, ctx->logits + (size_t)r * E, (size_t)E * sizeof *out);
            pool_normalize(out + (size_t)r * E, E, embd_norm);
        }
        return (int64_t)n_rows * E;
    }
    if (ctx->pooling == TESSERA_POOLING_RANK) {
        if (pool_cls_head(m, ctx->logits, out) != 0) return -1;
        return pool_n_cls_out(m);
    }
    pool_rows(ctx->pooling, ctx->logits, n_rows, E, out);
    pool_normalize(out, E, embd_norm);
    return E;
}

int64_t tessera_embed(tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens, int32_t embd_norm,
                      float *out, int64_t max_out) {
    if (!ctx) return error_set("embed: no context");
    if (embed_check(ctx, tokens, n_tokens) != 0) return -1;
    const int32_t pooling = ctx->pooling;
    const int64_t need = pooling == TESSERA_POOLING_NONE ? (int64_t)n_tokens * ctx->model->m->hp.n_embd
                                                          : tessera_embed_dim(ctx);
    if (!out || max_out < need)
        return error_set("embed: the output holds %lld floats, %lld needed", (long long)max_out, (long long)need);
    int32_t *pos = malloc((size_t)n_tokens * sizeof *pos);
    int32_t *seq = calloc((size_t)n_tokens, sizeof *seq);
    bool *want = malloc((size_t)n_tokens * sizeof *want);
    int64_t rc = -1;
    if (!pos || !seq || !want) {
        error_set("embed: out of memory for %d tokens", n_tokens);
        goto done;
    }
    for (int32_t i = 0; i < n_tokens; i++) {
        pos[i] = i;
        /* rank scores an encoder's first token ([CLS]), a decoder's last */
        const bool rank_first = pooling == TESSERA_POOLING_RANK && !ctx->model->m->hp.causal_attn;
        const bool rank_last = pooling == TESSERA_POOLING_RANK && ctx->model->m->hp.causal_attn;
        want[i] = pooling == TESSERA_POOLING_NONE || pooling == TESSERA_POOLING_MEAN ||
                  (i == 0 && (pooling == TESSERA_POOLING_CLS || rank_first)) ||
                  (i == n_tokens - 1 && (pooling == TESSERA_POOLING_LAST || rank_last));
    }
    kv_cache_seq_forget(ctx->kv, 0, 0);
    mrope_forget(&ctx->mrope, 0, 0);
    ctx->n_last = 0;
    int32_t n_rows = decode_tokens(ctx, tokens, pos, seq, want, n_tokens);
    kv_cache_seq_forget(ctx->kv, 0, 0);
    if (n_rows < 0) {
        error_wrap("embed");
        goto done;
    }
    rc = embed_pool(ctx, n_rows, embd_norm, out);
done:
    free(pos);
    free(seq);
    free(want);
    return rc;
}

/* llama.cpp's layout of a rerank pair: [BOS] query [EOS] [SEP] doc [EOS]
 * then, with final_sep (llama-embedding, not llama-server), [SEP]. */
static int32_t rerank_layout(const tessera_model *tm, const char *query, size_t query_len, const char *doc,
                             size_t doc_len, bool final_sep, tessera_token *tokens, int32_t max_tokens) {
    if (!tm || (!query && query_len) || (!doc && doc_len) || max_tokens < 0) {
        error_set("rerank tokens: bad arguments");
        return INT32_MIN;
    }
    const vocab *v = tm->vocab;
    const bool wpm = vocab_get_type(v) == VOCAB_TYPE_WPM;
    vocab_tokens t = {0};
    int32_t rc = INT32_MIN;
    /* llama.cpp's layout (measured against llama-embedding --pooling rank):
     * [BOS] query [EOS] [SEP] doc [EOS] [SEP], each where the vocabulary adds
     * it; WordPiece always adds [CLS] and [SEP]: [CLS] query [SEP] doc [SEP]. */
    const int32_t bos = wpm || vocab_add_bos(v) ? vocab_bos(v) : -1;
    const int32_t eos = vocab_add_eos(v) ? vocab_eos(v) : -1;
    const int32_t sep = wpm || vocab_add_sep(v) ? vocab_sep(v) : -1;
    if ((bos >= 0 && vocab_tokens_push(&t, bos)) || vocab_tokenize(v, query, query_len, false, false, &t) ||
        (eos >= 0 && vocab_tokens_push(&t, eos)) || (sep >= 0 && vocab_tokens_push(&t, sep)) ||
        vocab_tokenize(v, doc, doc_len, false, false, &t) || (eos >= 0 && vocab_tokens_push(&t, eos)) ||
        (final_sep && sep >= 0 && vocab_tokens_push(&t, sep)))
        goto done;
    if (t.n > (size_t)INT32_MAX) {
        error_set("rerank tokens: too many tokens");
        goto done;
    }
    if ((int32_t)t.n > max_tokens) {
        rc = -(int32_t)t.n;
        goto done;
    }
    if (t.n) memcpy(tokens, t.ids, t.n * sizeof *tokens);
    rc = (int32_t)t.n;
done:
    vocab_tokens_free(&t);
    return rc;
}

int32_t tessera_rerank_tokens(const tessera_model *tm, const char *query, size_t query_len, const char *doc,
                              size_t doc_len, tessera_token *tokens, int32_t max_tokens) {
    return rerank_layout(tm, query, query_len, doc, doc_len, true, tokens, max_tokens);
}

/* llama-server's /rerank (measured on a WordPiece reranker: 5 + query +
 * document tokens per pair, one fewer than llama-embedding's). */
int32_t tessera_rerank_tokens_server(const tessera_model *tm, const char *query, size_t query_len, const char *doc,
                                     size_t doc_len, tessera_token *tokens, int32_t max_tokens) {
    return rerank_layout(tm, query, query_len, doc, doc_len, false, tokens, max_tokens);
}
