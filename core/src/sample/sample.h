/*
 * sample — the sampler chain: from a row of logits to one token id.
 *
 * Logit bias first, then the steps in the order asked (sample_order),
 * llama.cpp's by default:
 *   penalties → DRY → top-n-sigma → top-k → typical → top-p → min-p → XTC
 *   → temperature (dynamic when a range is set) → dist
 * or, with mirostat 1 or 2: logit bias → temperature → mirostat (llama.cpp
 * ignores the other steps then). Each step works on a candidate list (id,
 * logit, prob) and only removes candidates or changes logits; dist draws
 * one with the sampler's own PRNG: std::mt19937 as llama.cpp seeds it, and
 * a uniform double made as libstdc++'s uniform_real_distribution makes it,
 * walked over the candidates in the order the steps left them, so a seed
 * gives llama.cpp's tokens on the same logits, on every machine and libc
 * (tests/sample/test_sampler_ref.c checks it against llama.cpp's samplers).
 * Temperature <= 0 (without a dynamic range) means greedy: the highest logit
 * after the steps wins (ties go to the lowest id).
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

/* MT19937 (Matsumoto and Nishimura, 1998; C++'s std::mt19937), the
 * generator llama.cpp's samplers draw from. */
enum { SAMPLE_MT_N = 624 };
typedef struct sample_rng {
    uint32_t mt[SAMPLE_MT_N];
    uint32_t i; /* next word; SAMPLE_MT_N: regenerate first */
} sample_rng;

void sample_rng_seed(sample_rng *rng, uint32_t seed);
uint32_t sample_rng_next(sample_rng *rng);
/* Uniform double in [0, 1) from two outputs (a + b * 2^32) / 2^64, as
 * libstdc++'s std::uniform_real_distribution<double> makes it from mt19937. */
double sample_rng_uniform(sample_rng *rng);
/* Uniform float in [0, 1) from one output, as std::uniform_real_distribution<float>. */
float sample_rng_uniform_f(sample_rng *rng);

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
    bool sorted; /* descending by logit (ties: as llama.cpp's sort leaves them) */
} sample_cands;

/* Fill cands (capacity >= n_vocab) with every token of a logit row. */
void sample_cands_init(sample_cands *c, sample_cand *storage, const float *logits,
                       int32_t n_vocab);

/* Sort descending by logit as llama.cpp does (sort.c), so equal logits end
 * in its order. */
void sample_sort(sample_cands *c);
/* The k largest logits of a[0..n) to the front, in llama.cpp's order; the
 * rest behind them in some order (never lost). */
void sample_sort_top(sample_cand *a, size_t n, size_t k);
/* Ascending by score, as std::sort leaves it (typical's order). */
void sample_sort_score(sample_cand *a, size_t n);
/* qsort comparator for descending logit, ties by ascending id (a total order). */
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
/* Draw one candidate from softmax(logits) with rng, walking the candidates
 * in their current order (as llama.cpp does); -1 if empty. */
int32_t sample_dist(sample_cands *c, sample_rng *rng);
/* p = softmax(logit) in the current order (no sort). */
void sample_softmax_unsorted(sample_cands *c);

/* Top-n-sigma: logits below max - n * sigma (sigma: the standard deviation
 * of the finite logits) become -inf; n <= 0 is off. */
void sample_top_n_sigma(sample_cands *c, float n);
/* Temperature with llama.cpp's dynamic range (temp_ext): range > 0 scales
 * by a temperature between temp - range (at least 0) and temp + range by
 * the normalized entropy to the power exponent; range <= 0 is plain
 * temperature, where temp <= 0 keeps only the best logit (others -inf). */
void sample_temp_ext(sample_cands *c, float temp, float range, float exponent);
/* XTC: with chance probability (drawn from rng), drop every candidate whose
 * probability is >= threshold but the least likely of them, keeping at
 * least min_keep. Off when probability <= 0 or threshold > 0.5. */
void sample_xtc(sample_cands *c, float probability, float threshold, size_t min_keep, sample_rng *rng);
/* Mirostat 1.0 (m tokens estimate s_hat over a vocabulary of n_vocab) and
 * 2.0: pick a token, update *mu (start it at 2 * tau). */
int32_t sample_mirostat(sample_cands *c, float tau, float eta, int32_t m, int32_t n_vocab, float *mu,
                        sample_rng *rng);
int32_t sample_mirostat_v2(sample_cands *c, float tau, float eta, float *mu, sample_rng *rng);

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
/* The i-th newest token held (0: the last one); i < count. */
int32_t sample_history_back(const sample_history *h, size_t i);

/* llama.cpp semantics, once per distinct token seen in the last last_n
 * tokens of h, with n = how often it occurs there:
 *   logit = logit > 0 ? logit / repeat : logit * repeat
 *   logit -= n * freq + present
 * Candidates whose id is not in the window are untouched. */
void sample_penalties(sample_cands *c, sample_history *h, size_t last_n, float repeat, float freq,
                      float present);

/* ------------------------------------------------------------------- DRY
 * "Don't repeat yourself" (p-e-w's design, as llama.cpp and koboldcpp run
 * it): a candidate that would extend a sequence repeating earlier in the
 * last tokens by n >= allowed_length tokens loses
 * multiplier * base^(n - allowed_length) from its logit. A repeat does not
 * reach across a sequence breaker: a token whose text holds a breaker
 * string, or one whose text ends with the breaker's start followed by the
 * tokens of the rest. */
typedef struct sample_dry_seq {
    int32_t head;     /* token id */
    int32_t n_tail;   /* tokens that must follow it */
    int32_t tail[20]; /* llama.cpp's limit: 20 tokens */
} sample_dry_seq;

typedef struct sample_dry_breakers {
    sample_dry_seq *seq; /* sorted by head */
    size_t n;
} sample_dry_breakers;

/* How the breakers find tokens: the text of a token as llama.cpp's
 * detokenizer gives it for that token alone (for SPM without the space the
 * tokenizer prefixes; bytes in buf, returns the length, at most size) and a
 * tokenization without BOS or special tokens (returns the count, or the
 * negated count needed). */
typedef struct sample_vocab_fns {
    int32_t (*piece)(void *user, int32_t id, char *buf, int32_t size);
    int32_t (*tokenize)(void *user, const char *text, size_t len, int32_t *out, int32_t cap);
    void *user;
    int32_t n_vocab;
} sample_vocab_fns;

/* Each breaker is used up to its first 40 bytes, as llama.cpp does; at
 * most 64 breakers. */
int sample_dry_breakers_build(sample_dry_breakers *b, const sample_vocab_fns *v, const char *const *strs,
                              size_t n);
void sample_dry_breakers_free(sample_dry_breakers *b);
void sample_dry(sample_cands *c, const sample_history *h, const sample_dry_breakers *b, float multiplier,
                float base, int32_t allowed_length, int32_t last_n);

/* ------------------------------------------------------------ the order */

typedef enum sample_step {
    SAMPLE_STEP_PENALTIES,
    SAMPLE_STEP_DRY,
    SAMPLE_STEP_TOP_N_SIGMA,
    SAMPLE_STEP_TOP_K,
    SAMPLE_STEP_TYPICAL,
    SAMPLE_STEP_TOP_P,
    SAMPLE_STEP_MIN_P,
    SAMPLE_STEP_XTC,
    SAMPLE_STEP_TEMPERATURE,
    SAMPLE_STEP_COUNT,
} sample_step;

enum { SAMPLE_MAX_STEPS = 32 };

/* llama.cpp's names: "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;
 * temperature" (separated by ';' or ','; its other spellings such as
 * "top-k", "nucleus", "typical_p", "temp" too), or with letters=true its
 * --sampling-seq letters "edskypmxt". NULL gives llama.cpp's default
 * order, "" no step at all. Returns the count, -1 with an error naming the unknown name. */
int sample_order_parse(const char *text, bool letters, sample_step *out, int cap);
/* The name of a step as llama.cpp writes it ("typ_p", "top_n_sigma", ...). */
const char *sample_step_name(sample_step s);
/* llama.cpp's default order. */
int sample_order_default(sample_step *out);

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
    /* DRY: multiplier 0 is off; last_n -1 is "all the window holds" (the
     * API resolves -1 to a context size first) */
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    const sample_dry_breakers *dry_breakers; /* copied; NULL: none */
    float xtc_probability, xtc_threshold; /* probability 0: off */
    float top_n_sigma;                    /* <= 0: off */
    float dynatemp_range, dynatemp_exponent;
    int32_t mirostat; /* 0 off, 1, 2 */
    float mirostat_tau, mirostat_eta;
    sample_step order[SAMPLE_MAX_STEPS];
    int32_t n_order; /* steps in order[] (sample_params_default: llama.cpp's order) */
} sample_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * typical 1 (off), last 64 tokens, no penalties, seed 0, DRY off (base
 * 1.75, allowed length 2, last 64 tokens), XTC off (threshold 0.1), top-n-sigma
 * off, dynamic temperature off (exponent 1), mirostat off (tau 5, eta 0.1),
 * the default order. */
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
