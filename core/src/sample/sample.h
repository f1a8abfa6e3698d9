/*
 * sample — the sampler chain: from a row of logits to one token id.
 *
 * The chain runs in llama.cpp's default order:
 *   logit bias → penalties → top-k → typical → top-p → min-p → temperature → dist
 * Each step works on a candidate list (id, logit, prob) and only ever removes
 * candidates or changes logits; dist draws one with the sampler's own PRNG
 * (xoshiro256**, seeded by splitmix64), so a seed gives the same tokens on
 * every machine and libc. Temperature <= 0 means greedy: the highest logit
 * after bias and penalties wins (ties go to the lowest id).
 *
 * The steps are exposed one by one so tests can check each on hand-made
 * logits; tessera.h wraps the chain for users.
 */
#ifndef TESSERA_SAMPLE_H
#define TESSERA_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ PRNG */

typedef struct sample_rng {
    uint64_t s[4];
} sample_rng;

void sample_rng_seed(sample_rng *rng, uint64_t seed);
uint64_t sample_rng_next(sample_rng *rng);
/* Uniform double in [0, 1) with 53 random bits. */
double sample_rng_uniform(sample_rng *rng);

/* ------------------------------------------------------------ candidates */

typedef struct sample_cand {
    int32_t id;
    float logit;
    float p;     /* valid after sample_softmax() */
    float score; /* scratch for sample_typical() */
} sample_cand;

typedef struct sample_cands {
    sample_cand *data;
    size_t size;
    bool sorted; /* descending by logit (ties: ascending id) */
} sample_cands;

/* Fill cands (capacity >= n_vocab) with every token of a logit row. */
void sample_cands_init(sample_cands *c, sample_cand *storage, const float *logits,
                       int32_t n_vocab);

/* Sort descending by logit, ties by ascending id (a total order, so the
 * result does not depend on the sort algorithm). */
void sample_sort(sample_cands *c);
/* qsort comparator for that order. */
int sample_cand_cmp(const void *a, const void *b);
/* True when a sorts before b in that order. */
bool sample_cand_before(const sample_cand *a, const sample_cand *b);
/* Sort, then p = softmax(logit) over the current candidates. */
void sample_softmax(sample_cands *c);

/* ------------------------------------------------------------------ steps
 * Every truncating step keeps at least one candidate. Parameters that turn a
 * step off: k <= 0, p >= 1 (top-p, typical), p <= 0 (min-p), temp == 1. */

void sample_top_k(sample_cands *c, int32_t k);
/* Keep the smallest prefix (by descending probability) whose mass >= p. */
void sample_top_p(sample_cands *c, float p);
/* Keep candidates with prob >= p * max prob, i.e. logit >= max + log(p). */
void sample_min_p(sample_cands *c, float p);
/* Locally typical sampling: order by |-log p - H| ascending and keep the
 * smallest prefix whose mass exceeds p. */
void sample_typical(sample_cands *c, float p);
void sample_temperature(sample_cands *c, float temp);
/* Greedy pick: id of the highest logit (ties: lowest id); -1 if empty. */
int32_t sample_argmax(const sample_cands *c);
/* Draw one candidate from softmax(logits) with rng; -1 if empty. */
int32_t sample_dist(sample_cands *c, sample_rng *rng);

/* ------------------------------------------------------------- penalties */

typedef struct sample_bias {
    int32_t id;
    float bias;
} sample_bias;

/* Add bias to the logits of the listed ids (ids outside the row are ignored). */
void sample_logit_bias(sample_cands *c, const sample_bias *bias, size_t n_bias);

/* Ring of the last tokens accepted, for the penalties. */
typedef struct sample_history {
    int32_t *ring;
    int32_t *scratch; /* cap ids, sorted copy of the window (no per-token malloc) */
    size_t cap;   /* window length (penalty_last_n) */
    size_t count; /* tokens held, <= cap */
    size_t head;  /* next write position */
} sample_history;

int sample_history_init(sample_history *h, size_t cap);
void sample_history_free(sample_history *h);
void sample_history_push(sample_history *h, int32_t id);
void sample_history_clear(sample_history *h);

/* llama.cpp semantics, once per distinct token seen in the window, with
 * n = how often it occurs there:
 *   logit = logit > 0 ? logit / repeat : logit * repeat
 *   logit -= n * freq + present
 * Candidates whose id is not in the window are untouched. */
void sample_penalties(sample_cands *c, sample_history *h, float repeat, float freq,
                       float present);

/* ----------------------------------------------------------------- chain */

typedef struct sample_params {
    uint64_t seed;
    float temp;          /* <= 0: greedy */
    int32_t top_k;       /* <= 0: off */
    float top_p;         /* >= 1: off */
    float min_p;         /* <= 0: off */
    float typical_p;     /* >= 1: off */
    int32_t penalty_last_n; /* 0: penalties off */
    float penalty_repeat;   /* 1: off */
    float penalty_freq;     /* 0: off */
    float penalty_present;  /* 0: off */
    const sample_bias *bias; /* copied by sample_chain_new */
    size_t n_bias;
} sample_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * typical 1 (off), last 64 tokens, no penalties, seed 0. */
sample_params sample_params_default(void);

typedef struct sample_chain sample_chain;

/* NULL with error_get() set on bad parameters or out of memory. */
sample_chain *sample_chain_new(const sample_params *p, int32_t n_vocab);
void sample_chain_free(sample_chain *s);
/* Sample one token from a row of n_vocab logits (not modified). */
int32_t sample_chain_sample(sample_chain *s, const float *logits);
/* The candidates the last sample_chain_sample drew from, after every
 * filter, sorted by descending p and with p renormalized over them (one with
 * p = 1 after a greedy pick). *n = 0 before the first sample or after reset.
 * Valid until the next sample or reset. */
const sample_cand *sample_chain_last(const sample_chain *s, size_t *n);
/* Record a token as generated or fed (for the penalties). */
void sample_chain_accept(sample_chain *s, int32_t id);
/* Forget the history and reseed with the original seed. */
void sample_chain_reset(sample_chain *s);

/* Saved state: the PRNG and the penalty window (not the parameters: the
 * loading side builds its chain with its own). read validates everything
 * before changing s. */
size_t sample_chain_state_size(const sample_chain *s);
void sample_chain_state_write(const sample_chain *s, uint8_t *out);
int sample_chain_state_read(sample_chain *s, const uint8_t *in, size_t len);
/* How many of in[0..len) bytes are the chain's section (its length follows
 * from its own count); 0 with an error when len cannot hold it. */
size_t sample_chain_state_length(const uint8_t *in, size_t len);

/* A constraint on the tokens the chain may return (a grammar). The chain
 * picks as usual, then asks allows() about the pick; only when it is
 * rejected does it ask mask() for every allowed token and pick again among
 * those (greedy first tries the next best few one by one). So the common
 * step costs one check, not one per vocabulary entry. */
typedef struct sample_constraint {
    int (*allows)(void *user, int32_t id);          /* 1 yes, 0 no, -1 error */
    int32_t (*mask)(void *user, uint8_t *allowed);  /* allowed[n_vocab] = 0/1; count or -1 */
    void *user;
} sample_constraint;

/* NULL removes it. The chain keeps a copy of *c (not of what user points at). */
void sample_chain_set_constraint(sample_chain *s, const sample_constraint *c);
/* sample_cands_init over the ids with allowed[id] != 0 only. */
void sample_cands_init_masked(sample_cands *c, sample_cand *storage, const float *logits, int32_t n_vocab,
                              const uint8_t *allowed);

#endif
