/* chain — the sampler object: parameters, candidate storage, penalty window
 * and PRNG, run in llama.cpp's default order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sample.h"
#include "util/error.h"
#include "util/le.h"

struct sample_chain {
    sample_params params;
    sample_bias *bias; /* owned copy of params.bias */
    int32_t n_vocab;
    sample_cand *storage; /* n_vocab candidates, refilled every call */
    sample_history history;
    sample_rng rng;
    sample_constraint con; /* allows == NULL: none */
    uint8_t *allowed;      /* n_vocab, for con.mask; allocated on first use */
    size_t n_last;         /* storage[0..n_last): the last draw's candidates */
};

sample_params sample_params_default(void) {
    return (sample_params){
        .seed = 0,
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .typical_p = 1.0f,
        .penalty_last_n = 64,
        .penalty_repeat = 1.0f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
        .bias = NULL,
        .n_bias = 0,
    };
}

/* Rejects values no step can make sense of; names the parameter at fault. */
static int params_check(const sample_params *p, int32_t n_vocab) {
    if (n_vocab <= 0) return error_set("sampler: vocabulary size %d is not positive", (int)n_vocab);
    if (isnan(p->temp)) return error_set("sampler: temperature is NaN");
    if (isnan(p->top_p) || p->top_p < 0.0f)
        return error_set("sampler: top-p %g must be in [0, 1] (1 turns it off)", (double)p->top_p);
    if (isnan(p->min_p) || p->min_p < 0.0f || p->min_p > 1.0f)
        return error_set("sampler: min-p %g must be in [0, 1] (0 turns it off)", (double)p->min_p);
    if (isnan(p->typical_p) || p->typical_p < 0.0f)
        return error_set("sampler: typical-p %g must be in [0, 1] (1 turns it off)",
                         (double)p->typical_p);
    if (p->penalty_last_n < 0)
        return error_set("sampler: penalty window %d must be >= 0", (int)p->penalty_last_n);
    if (!(p->penalty_repeat > 0.0f))
        return error_set("sampler: repeat penalty %g must be > 0", (double)p->penalty_repeat);
    if (!isfinite(p->penalty_freq) || !isfinite(p->penalty_present))
        return error_set("sampler: frequency/presence penalties must be finite");
    if (p->n_bias > 0 && !p->bias) return error_set("sampler: logit bias list is NULL");
    for (size_t i = 0; i < p->n_bias; i++) {
        if (p->bias[i].id < 0 || p->bias[i].id >= n_vocab)
            return error_set("sampler: logit bias token %d is outside the vocabulary (0..%d)",
                             (int)p->bias[i].id, (int)n_vocab - 1);
        if (isnan(p->bias[i].bias))
            return error_set("sampler: logit bias for token %d is NaN", (int)p->bias[i].id);
    }
    return 0;
}

sample_chain *sample_chain_new(const sample_params *p, int32_t n_vocab) {
    if (params_check(p, n_vocab) < 0) return NULL;
    sample_chain *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->params = *p;
    s->n_vocab = n_vocab;
    s->storage = malloc((size_t)n_vocab * sizeof *s->storage);
    if (!s->storage) goto oom;
    if (p->n_bias > 0) {
        s->bias = malloc(p->n_bias * sizeof *s->bias);
        if (!s->bias) goto oom;
        memcpy(s->bias, p->bias, p->n_bias * sizeof *s->bias);
    }
    s->params.bias = s->bias;
    if (sample_history_init(&s->history, (size_t)p->penalty_last_n) < 0) goto fail;
    sample_rng_seed(&s->rng, p->seed);
    return s;
oom:
    error_set("sampler: out of memory for a vocabulary of %d tokens", (int)n_vocab);
fail:
    sample_chain_free(s);
    return NULL;
}

void sample_chain_free(sample_chain *s) {
    if (!s) return;
    sample_history_free(&s->history);
    free(s->allowed);
    free(s->storage);
    free(s->bias);
    free(s);
}

/* A greedy pick as the last draw's distribution: that token alone, p = 1. */
static int32_t record_greedy(sample_chain *s, int32_t id) {
    s->n_last = id >= 0 ? 1 : 0;
    if (id >= 0) s->storage[0] = (sample_cand){.id = id, .logit = 0.0f, .p = 1.0f};
    return id;
}

/* The chain over every token, or only over those with allowed[id] set.
 * The candidates left after the filters stay in storage (sample_chain_last). */
static int32_t chain_pick(sample_chain *s, const float *logits, const uint8_t *allowed) {
    const sample_params *p = &s->params;
    bool penalized = p->penalty_repeat != 1.0f || p->penalty_freq != 0.0f ||
                     p->penalty_present != 0.0f;
    bool penalties = s->history.count > 0 && penalized;
    /* Plain greedy needs no candidate list: scan the row. */
    if (p->temp <= 0.0f && p->n_bias == 0 && !penalties && !allowed) {
        int32_t best = 0;
        for (int32_t i = 1; i < s->n_vocab; i++)
            if (logits[i] > logits[best] || isnan(logits[best])) best = i;
        return record_greedy(s, best);
    }
    sample_cands c;
    if (allowed)
        sample_cands_init_masked(&c, s->storage, logits, s->n_vocab, allowed);
    else
        sample_cands_init(&c, s->storage, logits, s->n_vocab);
    sample_logit_bias(&c, p->bias, p->n_bias);
    sample_penalties(&c, &s->history, p->penalty_repeat, p->penalty_freq, p->penalty_present);
    /* Greedy: every truncation keeps the best candidate, so skip them. */
    if (p->temp <= 0.0f) return record_greedy(s, sample_argmax(&c));
    sample_top_k(&c, p->top_k);
    sample_typical(&c, p->typical_p);
    sample_top_p(&c, p->top_p);
    sample_min_p(&c, p->min_p);
    sample_temperature(&c, p->temp);
    int32_t id = sample_dist(&c, &s->rng); /* softmax: sorted, p renormalized */
    s->n_last = c.size;
    return id;
}

/* Greedy under a constraint whose first choice was rejected: the next
 * best candidates one by one (usually one of them is allowed). Returns
 * the id, -1 when none of them is, -2 on error. */
static int32_t greedy_next_allowed(sample_chain *s, const float *logits) {
    enum { TRIES = 16 };
    const sample_params *p = &s->params;
    sample_cands c;
    sample_cands_init(&c, s->storage, logits, s->n_vocab);
    sample_logit_bias(&c, p->bias, p->n_bias);
    sample_penalties(&c, &s->history, p->penalty_repeat, p->penalty_freq, p->penalty_present);
    /* The TRIES best, best first, by insertion into a short sorted list. */
    sample_cand top[TRIES];
    size_t n = 0;
    for (size_t i = 0; i < c.size; i++) {
        const sample_cand *x = &c.data[i];
        if (n == TRIES && !sample_cand_before(x, &top[n - 1])) continue;
        size_t j = n < TRIES ? n++ : n - 1;
        while (j > 0 && sample_cand_before(x, &top[j - 1])) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = *x;
    }
    /* top[0] is the pick already rejected. */
    for (size_t i = 1; i < n; i++) {
        int ok = s->con.allows(s->con.user, top[i].id);
        if (ok < 0) return -2;
        if (ok) return top[i].id;
    }
    return -1;
}

int32_t sample_chain_sample(sample_chain *s, const float *logits) {
    int32_t t = chain_pick(s, logits, NULL);
    if (!s->con.allows || t < 0) return t;
    int ok = s->con.allows(s->con.user, t);
    if (ok) return ok > 0 ? t : -1;
    if (s->params.temp <= 0.0f) {
        t = greedy_next_allowed(s, logits);
        if (t != -1) return t >= 0 ? record_greedy(s, t) : -1;
    }
    if (!s->allowed) {
        s->allowed = malloc((size_t)s->n_vocab);
        if (!s->allowed) {
            error_set("sampler: out of memory");
            return -1;
        }
    }
    int32_t n = s->con.mask(s->con.user, s->allowed);
    if (n < 0) return -1;
    if (n == 0) {
        error_set("sampler: the grammar allows no token here");
        return -1;
    }
    return chain_pick(s, logits, s->allowed);
}

void sample_chain_set_constraint(sample_chain *s, const sample_constraint *c) {
    s->con = c ? *c : (sample_constraint){0};
}

void sample_chain_accept(sample_chain *s, int32_t id) { sample_history_push(&s->history, id); }

const sample_cand *sample_chain_last(const sample_chain *s, size_t *n) {
    *n = s->n_last;
    return s->storage;
}

void sample_chain_reset(sample_chain *s) {
    s->n_last = 0;
    sample_history_clear(&s->history);
    sample_rng_seed(&s->rng, s->params.seed);
}

/* ------------------------------------------------------------ saved state
 * Little-endian: u32 version, u64 rng[4], u32 count, i32 ids[count] (the
 * penalty window, oldest first). */
enum { CHAIN_STATE_VERSION = 1, CHAIN_STATE_FIXED = 4 + 32 + 4 };


size_t sample_chain_state_size(const sample_chain *s) { return CHAIN_STATE_FIXED + 4 * s->history.count; }

size_t sample_chain_state_length(const uint8_t *in, size_t len) {
    if (len < CHAIN_STATE_FIXED) {
        error_set("sampler state: %zu bytes, a state needs at least %d", len, (int)CHAIN_STATE_FIXED);
        return 0;
    }
    uint64_t count = le_get(in + 36, 4);
    if (count > (len - CHAIN_STATE_FIXED) / 4) {
        error_set("sampler state: %llu tokens recorded but %zu bytes follow", (unsigned long long)count,
                  len - CHAIN_STATE_FIXED);
        return 0;
    }
    return CHAIN_STATE_FIXED + 4 * (size_t)count;
}

void sample_chain_state_write(const sample_chain *s, uint8_t *out) {
    const sample_history *h = &s->history;
    le_put(out, CHAIN_STATE_VERSION, 4);
    for (int i = 0; i < 4; i++) le_put(out + 4 + 8 * i, s->rng.s[i], 8);
    le_put(out + 36, h->count, 4);
    size_t first = (h->head + h->cap - h->count) % (h->cap ? h->cap : 1);
    for (size_t i = 0; i < h->count; i++)
        le_put(out + CHAIN_STATE_FIXED + 4 * i, (uint32_t)h->ring[(first + i) % h->cap], 4);
}

int sample_chain_state_read(sample_chain *s, const uint8_t *in, size_t len) {
    if (len < CHAIN_STATE_FIXED)
        return error_set("sampler state: %zu bytes, a state needs at least %d", len, (int)CHAIN_STATE_FIXED);
    uint32_t version = (uint32_t)le_get(in, 4);
    if (version != CHAIN_STATE_VERSION)
        return error_set("sampler state: version %u, this build reads %d", version, CHAIN_STATE_VERSION);
    sample_rng rng;
    for (int i = 0; i < 4; i++) rng.s[i] = le_get(in + 4 + 8 * i, 8);
    if (!(rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3]))
        return error_set("sampler state: the PRNG state is all zero (never a valid xoshiro state)");
    uint64_t count = le_get(in + 36, 4);
    if (count != (len - CHAIN_STATE_FIXED) / 4 || (len - CHAIN_STATE_FIXED) % 4)
        return error_set("sampler state: %llu tokens recorded but %zu bytes follow", (unsigned long long)count,
                         len - CHAIN_STATE_FIXED);
    for (uint64_t i = 0; i < count; i++) {
        int32_t id = (int32_t)(uint32_t)le_get(in + CHAIN_STATE_FIXED + 4 * i, 4);
        if (id < 0 || id >= s->n_vocab)
            return error_set("sampler state: recorded token %d is outside the vocabulary (0..%d)", (int)id,
                             (int)s->n_vocab - 1);
    }
    /* Valid: apply. A window shorter than the saved one keeps the newest. */
    s->rng = rng;
    sample_history_clear(&s->history);
    for (uint64_t i = 0; i < count; i++)
        sample_history_push(&s->history, (int32_t)(uint32_t)le_get(in + CHAIN_STATE_FIXED + 4 * i, 4));
    return 0;
}
