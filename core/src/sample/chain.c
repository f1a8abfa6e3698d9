/* chain — the sampler object: parameters, candidate storage, token window
 * (penalties and DRY), PRNG and mirostat's mu, its steps run in the order
 * asked (llama.cpp's by default). */
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
    sample_history history; /* max(penalty_last_n, dry_penalty_last_n) tokens */
    sample_dry_breakers dry; /* owned copy of params.dry_breakers */
    sample_rng rng;     /* the draw's (dist or mirostat) */
    sample_rng rng_xtc; /* XTC's own, from the same seed, as llama.cpp's XTC sampler has */
    float mu;           /* mirostat's, 2 * tau after a reset */
    sample_constraint con; /* allows == NULL: none */
    uint8_t *allowed;      /* n_vocab, for con.mask; allocated on first use */
    const sample_cand *last; /* last[0..n_last): the last draw's candidates */
    size_t n_last;
};

static sample_params params_base(void) {
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
        .dry_multiplier = 0.0f,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_penalty_last_n = 64,
        .dry_breakers = NULL,
        .xtc_probability = 0.0f,
        .xtc_threshold = 0.1f,
        .top_n_sigma = -1.0f,
        .dynatemp_range = 0.0f,
        .dynatemp_exponent = 1.0f,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
    };
}

sample_params sample_params_default(void) {
    sample_params p = params_base();
    p.n_order = sample_order_default(p.order);
    return p;
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
    if (!isfinite(p->dry_multiplier) || p->dry_multiplier < 0.0f)
        return error_set("sampler: DRY multiplier %g must be >= 0 (0 turns it off)", (double)p->dry_multiplier);
    if (!isfinite(p->dry_base) || p->dry_base <= 0.0f)
        return error_set("sampler: DRY base %g must be > 0", (double)p->dry_base);
    if (p->dry_allowed_length < 0)
        return error_set("sampler: DRY allowed length %d must be >= 0", (int)p->dry_allowed_length);
    if (p->dry_penalty_last_n < 0)
        return error_set("sampler: DRY window %d must be >= 0 (0 turns it off)", (int)p->dry_penalty_last_n);
    if (isnan(p->xtc_probability) || p->xtc_probability < 0.0f || p->xtc_probability > 1.0f)
        return error_set("sampler: XTC probability %g must be in [0, 1] (0 turns it off)",
                         (double)p->xtc_probability);
    if (isnan(p->xtc_threshold) || p->xtc_threshold < 0.0f || p->xtc_threshold > 1.0f)
        return error_set("sampler: XTC threshold %g must be in [0, 1] (above 0.5 turns it off)",
                         (double)p->xtc_threshold);
    if (isnan(p->top_n_sigma) || isinf(p->top_n_sigma))
        return error_set("sampler: top-n-sigma %g must be finite (<= 0 turns it off)", (double)p->top_n_sigma);
    if (!isfinite(p->dynatemp_range) || p->dynatemp_range < 0.0f)
        return error_set("sampler: dynamic temperature range %g must be >= 0 (0 turns it off)",
                         (double)p->dynatemp_range);
    if (!isfinite(p->dynatemp_exponent) || p->dynatemp_exponent < 0.0f)
        return error_set("sampler: dynamic temperature exponent %g must be >= 0", (double)p->dynatemp_exponent);
    if (p->mirostat < 0 || p->mirostat > 2)
        return error_set("sampler: mirostat %d must be 0 (off), 1 or 2", (int)p->mirostat);
    if (!isfinite(p->mirostat_tau) || p->mirostat_tau < 0.0f)
        return error_set("sampler: mirostat tau %g must be >= 0", (double)p->mirostat_tau);
    if (!isfinite(p->mirostat_eta) || p->mirostat_eta < 0.0f)
        return error_set("sampler: mirostat eta %g must be >= 0", (double)p->mirostat_eta);
    if (p->n_order < 0 || p->n_order > SAMPLE_MAX_STEPS)
        return error_set("sampler: %d steps in the order, at most %d", (int)p->n_order, SAMPLE_MAX_STEPS);
    for (int32_t i = 0; i < p->n_order; i++)
        if ((unsigned)p->order[i] >= SAMPLE_STEP_COUNT)
            return error_set("sampler: step %d of the order is unknown (%d)", (int)i, (int)p->order[i]);
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
    if (p->dry_breakers && p->dry_breakers->n > 0) {
        s->dry.seq = malloc(p->dry_breakers->n * sizeof *s->dry.seq);
        if (!s->dry.seq) goto oom;
        memcpy(s->dry.seq, p->dry_breakers->seq, p->dry_breakers->n * sizeof *s->dry.seq);
        s->dry.n = p->dry_breakers->n;
    }
    s->params.dry_breakers = &s->dry;
    size_t window = (size_t)p->penalty_last_n;
    if (p->dry_multiplier > 0.0f && (size_t)p->dry_penalty_last_n > window) window = (size_t)p->dry_penalty_last_n;
    if (sample_history_init(&s->history, window) < 0) goto fail;
    sample_rng_seed(&s->rng, (uint32_t)p->seed);
    sample_rng_seed(&s->rng_xtc, (uint32_t)p->seed);
    s->mu = 2.0f * p->mirostat_tau;
    s->last = s->storage;
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
    sample_dry_breakers_free(&s->dry);
    free(s->allowed);
    free(s->storage);
    free(s->bias);
    free(s);
}

/* A greedy pick as the last draw's distribution: that token alone, p = 1. */
static int32_t record_greedy(sample_chain *s, int32_t id) {
    s->last = s->storage;
    s->n_last = id >= 0 ? 1 : 0;
    if (id >= 0) s->storage[0] = (sample_cand){.id = id, .logit = 0.0f, .p = 1.0f};
    return id;
}

/* True when the chain may return something else than the best logit of
 * the row: a step that changes logits or may drop the best candidate. */
static bool chain_steers(const sample_chain *s) {
    const sample_params *p = &s->params;
    bool penalized = p->penalty_repeat != 1.0f || p->penalty_freq != 0.0f || p->penalty_present != 0.0f;
    return p->n_bias > 0 || (s->history.count > 0 && penalized && p->penalty_last_n > 0) ||
           (p->dry_multiplier > 0.0f && s->history.count > 0) || p->typical_p < 1.0f || p->xtc_probability > 0.0f;
}

static bool chain_greedy(const sample_params *p) {
    return p->temp <= 0.0f && !(p->dynatemp_range > 0.0f) && p->mirostat == 0;
}

static void run_step(sample_chain *s, sample_cands *c, sample_step step) {
    const sample_params *p = &s->params;
    switch (step) {
    case SAMPLE_STEP_PENALTIES:
        sample_penalties(c, &s->history, (size_t)p->penalty_last_n, p->penalty_repeat, p->penalty_freq,
                         p->penalty_present);
        break;
    case SAMPLE_STEP_DRY:
        sample_dry(c, &s->history, &s->dry, p->dry_multiplier, p->dry_base, p->dry_allowed_length,
                   p->dry_penalty_last_n);
        break;
    case SAMPLE_STEP_TOP_N_SIGMA: sample_top_n_sigma(c, p->top_n_sigma); break;
    case SAMPLE_STEP_TOP_K: sample_top_k(c, p->top_k); break;
    case SAMPLE_STEP_TYPICAL: sample_typical(c, p->typical_p); break;
    case SAMPLE_STEP_TOP_P: sample_top_p(c, p->top_p); break;
    case SAMPLE_STEP_MIN_P: sample_min_p(c, p->min_p); break;
    case SAMPLE_STEP_XTC: sample_xtc(c, p->xtc_probability, p->xtc_threshold, 1, &s->rng_xtc); break;
    case SAMPLE_STEP_TEMPERATURE:
        /* Greedy picks after the steps: a temperature <= 0 changes nothing then. */
        if (!chain_greedy(p)) sample_temp_ext(c, p->temp, p->dynatemp_range, p->dynatemp_exponent);
        break;
    case SAMPLE_STEP_COUNT: break;
    }
}

/* The draw's candidates for sample_chain_last: most likely first, without
 * those left at probability 0 (-inf logits). */
static void record_last(sample_chain *s, sample_cands *c) {
    sample_sort(c);
    size_t n = c->size;
    while (n > 1 && !(c->data[n - 1].p > 0.0f)) n--;
    s->last = c->data;
    s->n_last = n;
}

/* The chain over every token, or only over those with allowed[id] set.
 * The candidates left after the steps stay in storage (sample_chain_last). */
static int32_t chain_pick(sample_chain *s, const float *logits, const uint8_t *allowed) {
    const sample_params *p = &s->params;
    /* Plain greedy needs no candidate list: scan the row. */
    if (chain_greedy(p) && !chain_steers(s) && !allowed) {
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
    int32_t id;
    if (p->mirostat != 0) {
        /* llama.cpp's mirostat chain: temperature, then mirostat alone. */
        sample_temp_ext(&c, p->temp, 0.0f, 1.0f);
        id = p->mirostat == 1
                 ? sample_mirostat(&c, p->mirostat_tau, p->mirostat_eta, 100, s->n_vocab, &s->mu, &s->rng)
                 : sample_mirostat_v2(&c, p->mirostat_tau, p->mirostat_eta, &s->mu, &s->rng);
        record_last(s, &c);
        return id;
    }
    for (int32_t i = 0; i < p->n_order; i++) run_step(s, &c, p->order[i]);
    if (chain_greedy(p)) return record_greedy(s, sample_argmax(&c));
    id = sample_dist(&c, &s->rng); /* p renormalized, in the steps' order */
    record_last(s, &c);
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
    for (int32_t i = 0; i < p->n_order; i++) run_step(s, &c, p->order[i]);
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
    if (chain_greedy(&s->params)) {
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
    return s->last;
}

void sample_chain_reset(sample_chain *s) {
    s->n_last = 0;
    s->last = s->storage;
    sample_history_clear(&s->history);
    sample_rng_seed(&s->rng, (uint32_t)s->params.seed);
    sample_rng_seed(&s->rng_xtc, (uint32_t)s->params.seed);
    s->mu = 2.0f * s->params.mirostat_tau;
}

/* ------------------------------------------------------------ saved state
 * Little-endian: u32 version, the draw's generator (u32 mt[624], u32 index),
 * XTC's (the same), f32 mirostat mu, u32 count, i32 ids[count] (the token
 * window, oldest first). */
enum {
    CHAIN_STATE_VERSION = 2,
    STATE_RNG_BYTES = 4 * SAMPLE_MT_N + 4,
    STATE_MT = 4,
    STATE_MT_XTC = STATE_MT + STATE_RNG_BYTES,
    STATE_MU = STATE_MT_XTC + STATE_RNG_BYTES,
    STATE_COUNT = STATE_MU + 4,
    STATE_INDEX = 4 * SAMPLE_MT_N, /* within a generator's bytes */
    CHAIN_STATE_FIXED = STATE_COUNT + 4,
};

size_t sample_chain_state_size(const sample_chain *s) { return CHAIN_STATE_FIXED + 4 * s->history.count; }

size_t sample_chain_state_length(const uint8_t *in, size_t len) {
    if (len < CHAIN_STATE_FIXED) {
        error_set("sampler state: %zu bytes, a state needs at least %d", len, (int)CHAIN_STATE_FIXED);
        return 0;
    }
    uint64_t count = le_get(in + STATE_COUNT, 4);
    if (count > (len - CHAIN_STATE_FIXED) / 4) {
        error_set("sampler state: %llu tokens recorded but %zu bytes follow", (unsigned long long)count,
                  len - CHAIN_STATE_FIXED);
        return 0;
    }
    return CHAIN_STATE_FIXED + 4 * (size_t)count;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void rng_write(const sample_rng *r, uint8_t *out) {
    for (int i = 0; i < SAMPLE_MT_N; i++) le_put(out + 4 * i, r->mt[i], 4);
    le_put(out + STATE_INDEX, r->i, 4);
}

/* A generator's bytes, checked; 0 or -1 with the error set. */
static int rng_read(sample_rng *r, const uint8_t *in, const char *which) {
    uint32_t any = 0;
    for (int i = 0; i < SAMPLE_MT_N; i++) any |= r->mt[i] = (uint32_t)le_get(in + 4 * i, 4);
    r->i = (uint32_t)le_get(in + STATE_INDEX, 4);
    if (!any) return error_set("sampler state: the %s PRNG state is all zero (never a valid MT19937 state)", which);
    if (r->i > SAMPLE_MT_N) return error_set("sampler state: %s PRNG index %u is past %d", which, r->i, (int)SAMPLE_MT_N);
    return 0;
}

void sample_chain_state_write(const sample_chain *s, uint8_t *out) {
    const sample_history *h = &s->history;
    le_put(out, CHAIN_STATE_VERSION, 4);
    rng_write(&s->rng, out + STATE_MT);
    rng_write(&s->rng_xtc, out + STATE_MT_XTC);
    le_put(out + STATE_MU, f32_bits(s->mu), 4);
    le_put(out + STATE_COUNT, h->count, 4);
    for (size_t i = 0; i < h->count; i++)
        le_put(out + CHAIN_STATE_FIXED + 4 * i, (uint32_t)sample_history_back(h, h->count - 1 - i), 4);
}

int sample_chain_state_read(sample_chain *s, const uint8_t *in, size_t len) {
    if (len < CHAIN_STATE_FIXED)
        return error_set("sampler state: %zu bytes, a state needs at least %d", len, (int)CHAIN_STATE_FIXED);
    uint32_t version = (uint32_t)le_get(in, 4);
    if (version != CHAIN_STATE_VERSION)
        return error_set("sampler state: version %u, this build reads %d", version, CHAIN_STATE_VERSION);
    sample_rng rng, rng_xtc;
    if (rng_read(&rng, in + STATE_MT, "draw's") < 0 || rng_read(&rng_xtc, in + STATE_MT_XTC, "XTC's") < 0) return -1;
    uint32_t mu_bits = (uint32_t)le_get(in + STATE_MU, 4);
    float mu;
    memcpy(&mu, &mu_bits, 4);
    if (!isfinite(mu)) return error_set("sampler state: mirostat's mu is not finite");
    uint64_t count = le_get(in + STATE_COUNT, 4);
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
    s->rng_xtc = rng_xtc;
    s->mu = mu;
    sample_history_clear(&s->history);
    for (uint64_t i = 0; i < count; i++)
        sample_history_push(&s->history, (int32_t)(uint32_t)le_get(in + CHAIN_STATE_FIXED + 4 * i, 4));
    return 0;
}
