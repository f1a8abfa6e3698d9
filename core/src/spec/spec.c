/*
 * Public API: speculative decoding (tessera.h, "Speculative decoding").
 *
 * A step of sequence s, the text t[0..n) with the target's cache holding
 * t[0..n-1):
 *   1. draft d[0..k): from the draft model (its cache brought to t, then
 *      its most likely token k times, stopping before one below p_min) or
 *      from the last n-gram of t found earlier in it;
 *   2. decode t[n-1], d[0], ..., d[k-1] at positions n-1.. in one batch,
 *      keeping every row: row i is the target's view after d[0..i);
 *   3. the sampler picks from row 0, 1, ... while each pick equals the
 *      draft token at its place; the first pick that differs (or the pick
 *      after the whole draft) ends the step;
 *   4. the cache forgets the positions past the last kept draft token.
 * The draft model's cache follows the text by its longest common prefix
 * with what it holds, so rejected drafts cost it nothing to forget.
 *
 * A draft model that helps nothing (it drafts no token above p_min, or
 * the target takes none of its tokens) is asked again only after 1, 2,
 * 4, ... SPEC_BACKOFF_MAX plain steps, and at once again after a step
 * where the target took one of its tokens. Each draft costs a draft step
 * per token (about half a target step for a Q4_0 draft of the target's
 * own shape), so a draft that keeps missing made speculation slower than
 * plain decoding (x0.55-0.63 on such a pair); the skipped steps are the
 * target's plain steps, and the draft's cache catches up in one batch when
 * it is asked again. The text is the target's either way.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/public.h"
#include "spec/spec.h"
#include "util/error.h"

/* llama.cpp's limits for a draft model's vocabulary. */
enum { SPEC_VOCAB_MAX_SIZE_DIFF = 128, SPEC_VOCAB_CHECK_FROM = 5 };
enum { SPEC_BACKOFF_MAX = 32 }; /* most plain steps between two tries of a useless draft model */

typedef struct spec_seq {
    tessera_token *held; /* the tokens the draft's cache holds for this sequence, from position 0 */
    int32_t n_held, cap;
    int32_t backoff, skip; /* plain steps between tries of the draft model, and left before the next */
    tessera_spec_stats stats;
} spec_seq;

struct tessera_spec {
    tessera_context *target, *draft;
    tessera_spec_params p;
    int32_t n_vocab_target;
    spec_seq seqs[TESSERA_MAX_SEQ];
    /* one step's scratch: the batch (last token and draft) */
    tessera_token *batch;
    int32_t *pos, *seq;
    bool *want;
    int32_t cap;
};

tessera_spec_params tessera_spec_default_params(void) {
    return (tessera_spec_params){.n_max = 16, .n_min = 0, .p_min = 0.75f, .ngram_n = 12, .ngram_m = 48};
}

int tessera_spec_compatible(const tessera_model *target, const tessera_model *draft) {
    if (!target || !draft) return error_set("speculative: no model");
    const vocab *vt = target->vocab, *vd = draft->vocab;
    if (vocab_get_type(vt) != vocab_get_type(vd))
        return error_set("speculative: the draft model's tokenizer is '%s', the target's '%s' (tokenizer.ggml.model)",
                         vocab_model_name(vd), vocab_model_name(vt));
    if (vocab_add_bos(vt) != vocab_add_bos(vd) || vocab_bos(vt) != vocab_bos(vd))
        return error_set("speculative: the draft model's BOS is %d%s, the target's %d%s", vocab_bos(vd),
                         vocab_add_bos(vd) ? " (added)" : "", vocab_bos(vt), vocab_add_bos(vt) ? " (added)" : "");
    if (vocab_add_eos(vt) != vocab_add_eos(vd) || vocab_eos(vt) != vocab_eos(vd))
        return error_set("speculative: the draft model's EOS is %d%s, the target's %d%s", vocab_eos(vd),
                         vocab_add_eos(vd) ? " (added)" : "", vocab_eos(vt), vocab_add_eos(vt) ? " (added)" : "");
    const int32_t nt = vocab_n_tokens(vt), nd = vocab_n_tokens(vd);
    if (abs(nt - nd) > SPEC_VOCAB_MAX_SIZE_DIFF)
        return error_set("speculative: the draft model's vocabulary has %d tokens, the target's %d (at most %d "
                         "apart)", nd, nt, SPEC_VOCAB_MAX_SIZE_DIFF);
    const int32_t n = nt < nd ? nt : nd;
    for (int32_t i = SPEC_VOCAB_CHECK_FROM; i < n; i++) {
        size_t lt = 0, ld = 0;
        const char *a = vocab_token_text(vt, i, &lt), *b = vocab_token_text(vd, i, &ld);
        if (lt != ld || memcmp(a, b, lt) != 0)
            return error_set("speculative: token %d is '%.*s' in the draft model, '%.*s' in the target", i,
                             (int)(ld > 40 ? 40 : ld), b, (int)(lt > 40 ? 40 : lt), a);
    }
    return 0;
}

tessera_spec *tessera_spec_new(tessera_context *target, tessera_context *draft, const tessera_spec_params *params) {
    if (!target) {
        error_set("speculative: no target context");
        return NULL;
    }
    tessera_spec_params p = params ? *params : tessera_spec_default_params();
    if (p.n_max < 1 || p.n_max > 256) {
        error_set("speculative: --draft-max %d is not in 1..256", p.n_max);
        return NULL;
    }
    if (p.n_min < 0 || p.n_min > p.n_max) {
        error_set("speculative: --draft-min %d is not in 0..%d (--draft-max)", p.n_min, p.n_max);
        return NULL;
    }
    if (!(p.p_min >= 0.0f && p.p_min <= 1.0f)) {
        error_set("speculative: --draft-p-min %g is not in 0..1", (double)p.p_min);
        return NULL;
    }
    if (!draft && (p.ngram_n < 1 || p.ngram_m < 1)) {
        error_set("speculative: the n-gram sizes %d and %d must be at least 1 (--spec-ngram-simple-size-n, -m)",
                  p.ngram_n, p.ngram_m);
        return NULL;
    }
    if (target->embeddings || (draft && draft->embeddings)) {
        error_set("speculative: an embedding context has no logits to verify with");
        return NULL;
    }
    if (draft && tessera_spec_compatible(target->model, draft->model) != 0) return NULL;
    tessera_spec *s = calloc(1, sizeof *s);
    if (!s) {
        error_set("speculative: out of memory");
        return NULL;
    }
    s->target = target;
    s->draft = draft;
    s->p = p;
    s->n_vocab_target = tessera_model_n_vocab(target->model);
    s->cap = p.n_max + 1 > 256 ? p.n_max + 1 : 256; /* also the draft's catch-up batches */
    s->batch = malloc((size_t)s->cap * sizeof *s->batch);
    s->pos = malloc((size_t)s->cap * sizeof *s->pos);
    s->seq = malloc((size_t)s->cap * sizeof *s->seq);
    s->want = malloc((size_t)s->cap * sizeof *s->want);
    if (!s->batch || !s->pos || !s->seq || !s->want) {
        tessera_spec_free(s);
        error_set("speculative: out of memory");
        return NULL;
    }
    return s;
}

void tessera_spec_free(tessera_spec *spec) {
    if (!spec) return;
    for (int32_t i = 0; i < TESSERA_MAX_SEQ; i++) free(spec->seqs[i].held);
    free(spec->batch);
    free(spec->pos);
    free(spec->seq);
    free(spec->want);
    free(spec);
}

/* The most likely token of a row and its softmax probability. */
static tessera_token row_top(const float *row, int32_t n, float *prob) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)row[i] - (double)row[best]);
    *prob = (float)(1.0 / sum);
    return best;
}

static int held_reserve(spec_seq *q, int32_t n) {
    if (n <= q->cap) return 0;
    int32_t cap = q->cap ? q->cap : 256;
    while (cap < n) cap *= 2;
    tessera_token *t = realloc(q->held, (size_t)cap * sizeof *t);
    if (!t) return error_set("speculative: out of memory");
    q->held = t;
    q->cap = cap;
    return 0;
}

/* Decode toks[0..n) into the draft's sequence seq at positions from..,
 * the last row kept; what it held from `from` on is forgotten. */
static int draft_decode(tessera_spec *s, int32_t seq, const tessera_token *toks, int32_t n, int32_t from) {
    spec_seq *q = &s->seqs[seq];
    if (held_reserve(q, from + n) != 0) return -1;
    for (int32_t b0 = 0; b0 < n;) {
        int32_t c = n - b0 < s->cap ? n - b0 : s->cap;
        for (int32_t i = 0; i < c; i++) {
            s->pos[i] = from + b0 + i;
            s->seq[i] = seq;
            s->want[i] = b0 + i == n - 1;
        }
        if (tessera_decode_batch(s->draft, toks + b0, s->pos, s->seq, s->want, c) != 0) {
            q->n_held = 0;
            tessera_seq_remove(s->draft, seq, 0);
            return -1;
        }
        b0 += c;
    }
    memcpy(q->held + from, toks, (size_t)n * sizeof *toks);
    q->n_held = from + n;
    return 0;
}

/* How many leading tokens of tokens[0..n) the draft's sequence holds
 * already, leaving at least the last to decode (its row is the draft's). */
static int32_t draft_shared_prefix(const spec_seq *q, const tessera_token *tokens, int32_t n) {
    int32_t c = 0;
    const int32_t lim = q->n_held < n - 1 ? q->n_held : n - 1;
    while (c < lim && q->held[c] == tokens[c]) c++;
    return c;
}

/* Up to max tokens from the draft model after tokens[0..n); a failure of
 * the draft only shortens the draft (the target decides anyway). */
static int32_t draft_model(tessera_spec *s, int32_t seq, const tessera_token *tokens, int32_t n, int32_t max,
                           tessera_token *out) {
    spec_seq *q = &s->seqs[seq];
    const int32_t c = draft_shared_prefix(q, tokens, n);
    if (draft_decode(s, seq, tokens + c, n - c, c) != 0) return 0;
    const int32_t nv = tessera_model_n_vocab(s->draft->model);
    int32_t k = 0;
    while (k < max) {
        float prob = 0;
        const float *row = tessera_logits(s->draft, -1);
        if (!row) break;
        tessera_token t = row_top(row, nv, &prob);
        if (prob < s->p.p_min || t >= s->n_vocab_target) break;
        out[k++] = t;
        if (k == max || tessera_token_is_eog(s->draft->model, t)) break;
        if (draft_decode(s, seq, &t, 1, n + k - 1) != 0) break;
    }
    return k;
}

int tessera_spec_prefill(tessera_spec *spec, int32_t seq, const tessera_token *tokens, int32_t n_tokens) {
    if (!spec || !tokens || n_tokens < 1) return error_set("speculative prefill: no speculation or tokens");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("speculative prefill: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    if (!spec->draft) return 0;
    const int32_t c = draft_shared_prefix(&spec->seqs[seq], tokens, n_tokens);
    if (draft_decode(spec, seq, tokens + c, n_tokens - c, c) != 0) return error_wrap("speculative prefill");
    return 0;
}

int32_t tessera_spec_step(tessera_spec *spec, int32_t seq, tessera_sampler *sampler, const tessera_token *tokens,
                          int32_t n_tokens, tessera_token *out, int32_t max_out, int32_t *n_drafted) {
    if (n_drafted) *n_drafted = 0;
    if (!spec || !sampler || !tokens || !out) return error_set("speculative step: no speculation, sampler or tokens");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("speculative step: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    if (n_tokens < 1 || max_out < 1) return error_set("speculative step: no text, or no room for a token");
    tessera_context *tgt = spec->target;
    /* Room: the batch is positions n_tokens - 1 .. n_tokens - 1 + k. */
    int32_t max = spec->p.n_max;
    if (max > max_out - 1) max = max_out - 1;
    const int32_t room = (int32_t)tessera_context_n_ctx(tgt) - n_tokens;
    if (max > room) max = room < 0 ? 0 : room;
    tessera_token *draft = spec->batch + 1;
    int32_t k = 0;
    spec_seq *q = &spec->seqs[seq];
    const int asked = spec->draft && max > 0 && q->skip == 0;
    if (spec->draft && max > 0 && q->skip > 0) q->skip--;
    if (max > 0) {
        if (spec->draft) k = asked ? draft_model(spec, seq, tokens, n_tokens, max, draft) : 0;
        else {
            const int32_t m = spec->p.ngram_m < max ? spec->p.ngram_m : max;
            k = spec_ngram_draft(tokens, n_tokens, spec->p.ngram_n, m, draft);
        }
    }
    if (k < spec->p.n_min) k = 0;
    spec->batch[0] = tokens[n_tokens - 1];
    for (int32_t i = 0; i <= k; i++) {
        spec->pos[i] = n_tokens - 1 + i;
        spec->seq[i] = seq;
        spec->want[i] = true;
    }
    if (tessera_decode_batch(tgt, spec->batch, spec->pos, spec->seq, spec->want, k + 1) != 0)
        return error_wrap("speculative step");
    int32_t m = 0;
    for (int32_t i = 0; i <= k; i++) {
        const float *row = tessera_logits(tgt, i);
        tessera_token t = row ? tessera_sampler_sample(sampler, row) : -1;
        if (t < 0) {
            tessera_seq_remove(tgt, seq, n_tokens - 1);
            return error_wrap("speculative step");
        }
        tessera_sampler_accept(sampler, t);
        out[m++] = t;
        if (i == k || t != draft[i] || tessera_token_is_eog(tgt->model, t)) break;
    }
    /* Kept: the last token and the m - 1 drafts the sampler agreed with. */
    if (tessera_seq_remove(tgt, seq, n_tokens + m - 1) != 0) return error_wrap("speculative step");
    if (asked) { /* useful when the target took a drafted token */
        if (m > 1) q->backoff = 0;
        else q->backoff = q->backoff ? (q->backoff * 2 > SPEC_BACKOFF_MAX ? SPEC_BACKOFF_MAX : q->backoff * 2) : 1;
        q->skip = q->backoff;
    }
    if (k > 0) q->stats.n_steps++;
    q->stats.n_drafted += k;
    q->stats.n_accepted += m - 1;
    if (n_drafted) *n_drafted = k;
    return m;
}

void tessera_spec_stats_get(const tessera_spec *spec, int32_t seq, tessera_spec_stats *out) {
    memset(out, 0, sizeof *out);
    if (!spec) return;
    for (int32_t i = 0; i < TESSERA_MAX_SEQ; i++) {
        if (seq >= 0 && i != seq) continue;
        out->n_steps += spec->seqs[i].stats.n_steps;
        out->n_drafted += spec->seqs[i].stats.n_drafted;
        out->n_accepted += spec->seqs[i].stats.n_accepted;
    }
}

void tessera_spec_stats_reset(tessera_spec *spec) {
    if (!spec) return;
    for (int32_t i = 0; i < TESSERA_MAX_SEQ; i++) memset(&spec->seqs[i].stats, 0, sizeof spec->seqs[i].stats);
}
