/* api — the public tessera_sampler_* calls over the internal chain. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "sample/grammar_hook.h"
#include "sample/sample.h"
#include "util/error.h"

struct tessera_sampler {
    sample_chain *chain;
    uint32_t seed;
    sample_grammar *grammar; /* NULL: unconstrained */
};

/* The settings tessera_sampler_params and sample_params share, field for
 * field: one list for the two copies below (the defaults out, a caller's
 * settings in). */
#define SHARED_SETTINGS(X) X(temp) X(top_k) X(top_p) X(min_p) X(typical_p) X(penalty_last_n) \
    X(penalty_repeat) X(penalty_freq) X(penalty_present) X(dry_multiplier) X(dry_base) X(dry_allowed_length) \
    X(dry_penalty_last_n) X(xtc_probability) X(xtc_threshold) X(top_n_sigma) X(dynatemp_range) \
    X(dynatemp_exponent) X(mirostat) X(mirostat_tau) X(mirostat_eta)

tessera_sampler_params tessera_sampler_default_params(void) {
    sample_params d = sample_params_default();
    tessera_sampler_params out = {
        .seed = TESSERA_SEED_RANDOM,
#define COPY_DEFAULT(f) .f = d.f,
        SHARED_SETTINGS(COPY_DEFAULT)
#undef COPY_DEFAULT
    }; /* no logit bias, llama.cpp's DRY breakers, the default order */
    return out;
}

/* llama.cpp's default sequence breakers. */
static const char *const default_breakers[] = {"\n", ":", "\"", "*"};

const char *const *tessera_sampler_default_breakers(int32_t *n) {
    if (n) *n = (int32_t)(sizeof default_breakers / sizeof *default_breakers);
    return default_breakers;
}

int32_t tessera_sampler_order(const char *text, bool letters, char *out, size_t cap) {
    sample_step steps[SAMPLE_MAX_STEPS];
    int n = sample_order_parse(text, letters, steps, SAMPLE_MAX_STEPS);
    if (n < 0) return -1;
    if (!out && cap > 0) return error_set("sampler order: out is NULL");
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const char *name = sample_step_name(steps[i]);
        size_t nl = strlen(name);
        if (len + nl + 2 > cap) return error_set("sampler order: %zu bytes are too few for '%s'", cap, text);
        if (i > 0) out[len++] = ';';
        memcpy(out + len, name, nl);
        len += nl;
    }
    if (cap > 0) out[len] = '\0';
    return (int32_t)len;
}

static int32_t model_piece(void *user, int32_t id, char *buf, int32_t size) {
    int32_t n = tessera_detokenize(user, &id, 1, buf, size, false, true);
    return n < 0 ? 0 : n;
}

static int32_t model_tokenize(void *user, const char *text, size_t len, int32_t *out, int32_t cap) {
    return tessera_tokenize(user, text, len, out, cap, false, false);
}

static tessera_sampler *sampler_make(int32_t n_vocab, const tessera_model *model,
                                     const tessera_sampler_params *params);

tessera_sampler *tessera_sampler_new(int32_t n_vocab, const tessera_sampler_params *params) {
    return sampler_make(n_vocab, NULL, params);
}

tessera_sampler *tessera_sampler_new_model(const tessera_model *model, const tessera_sampler_params *params) {
    if (!model) {
        error_set("sampler: model is NULL");
        return NULL;
    }
    return sampler_make(tessera_model_n_vocab(model), model, params);
}

/* Only for TESSERA_SEED_RANDOM: the clock and the pid, mixed. */
static uint32_t seed_from_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)getpid() << 32);
    sample_rng rng;
    sample_rng_seed(&rng, x);
    uint32_t seed = (uint32_t)sample_rng_next(&rng);
    return seed == TESSERA_SEED_RANDOM ? 0 : seed;
}

/* DRY's breakers as token sequences of model's vocabulary (none without
 * DRY). 0, or -1 with the error set. */
static int breakers_make(const tessera_model *model, const tessera_sampler_params *params,
                         sample_dry_breakers *out) {
    memset(out, 0, sizeof *out);
    if (!(params->dry_multiplier > 0.0f)) return 0;
    const char *const *strs = params->dry_sequence_breakers ? params->dry_sequence_breakers : default_breakers;
    int32_t n = params->dry_sequence_breakers ? params->n_dry_sequence_breakers
                                              : (int32_t)(sizeof default_breakers / sizeof *default_breakers);
    if (n < 0) return error_set("sampler: %d DRY sequence breakers", (int)n);
    if (n == 0) return 0;
    if (!model)
        return error_set("sampler: DRY's sequence breakers are tokenized with the model's vocabulary: make the "
                         "sampler with tessera_sampler_new_model (or give no breakers)");
    sample_vocab_fns v = {model_piece, model_tokenize, (void *)model, tessera_model_n_vocab(model)};
    return sample_dry_breakers_build(out, &v, strs, (size_t)n);
}

static tessera_sampler *sampler_make(int32_t n_vocab, const tessera_model *model,
                                     const tessera_sampler_params *params) {
    if (!params) {
        error_set("sampler: params is NULL");
        return NULL;
    }
    if (params->n_logit_bias < 0 || (params->n_logit_bias > 0 && !params->logit_bias)) {
        error_set("sampler: logit bias list of %d entries is invalid", (int)params->n_logit_bias);
        return NULL;
    }
    /* tessera_logit_bias and sample_bias have the same layout; copy anyway
     * so neither header depends on the other. */
    sample_bias *bias = NULL;
    if (params->n_logit_bias > 0) {
        bias = malloc((size_t)params->n_logit_bias * sizeof *bias);
        if (!bias) {
            error_set("sampler: out of memory");
            return NULL;
        }
        for (int32_t i = 0; i < params->n_logit_bias; i++) {
            bias[i].id = params->logit_bias[i].token;
            bias[i].bias = params->logit_bias[i].bias;
        }
    }
    sample_dry_breakers dry;
    if (breakers_make(model, params, &dry) < 0) {
        free(bias);
        return NULL;
    }
    tessera_sampler *s = calloc(1, sizeof *s);
    if (!s) {
        free(bias);
        sample_dry_breakers_free(&dry);
        error_set("sampler: out of memory");
        return NULL;
    }
    s->seed = params->seed == TESSERA_SEED_RANDOM ? seed_from_clock() : params->seed;
    sample_params p = {
        .seed = s->seed,
        .bias = bias,
        .n_bias = (size_t)params->n_logit_bias,
        .dry_breakers = &dry,
#define COPY_PARAM(f) .f = params->f,
        SHARED_SETTINGS(COPY_PARAM)
#undef COPY_PARAM
    };
    if (p.dry_penalty_last_n == -1 && model) p.dry_penalty_last_n = tessera_model_n_ctx_train(model);
    p.n_order = sample_order_parse(params->samplers, false, p.order, SAMPLE_MAX_STEPS);
    s->chain = p.n_order < 0 ? NULL : sample_chain_new(&p, n_vocab);
    free(bias);
    sample_dry_breakers_free(&dry);
    if (!s->chain) {
        free(s);
        return NULL;
    }
    return s;
}

void tessera_sampler_free(tessera_sampler *sampler) {
    if (!sampler) return;
    sample_chain_free(sampler->chain);
    sample_grammar_free(sampler->grammar);
    free(sampler);
}

tessera_token tessera_sampler_sample(tessera_sampler *sampler, const float *logits) {
    if (!sampler || !logits) {
        error_set("sampler: %s is NULL", sampler ? "logits" : "sampler");
        return -1;
    }
    return sample_chain_sample(sampler->chain, logits);
}

void tessera_sampler_accept(tessera_sampler *sampler, tessera_token token) {
    if (!sampler) return;
    sample_chain_accept(sampler->chain, token);
    if (sampler->grammar) sample_grammar_accept(sampler->grammar, token);
}

void tessera_sampler_reset(tessera_sampler *sampler) {
    if (!sampler) return;
    sample_chain_reset(sampler->chain);
    if (sampler->grammar) sample_grammar_restart(sampler->grammar);
}

int tessera_sampler_set_grammar(tessera_sampler *sampler, const tessera_model *model,
                                const tessera_grammar *grammar) {
    if (!sampler) return error_set("sampler: sampler is NULL");
    if (grammar && !model) return error_set("sampler: model is NULL");
    sample_grammar *sg = NULL;
    if (grammar) {
        sg = sample_grammar_new(model, grammar);
        if (!sg) return -1;
    }
    sample_grammar_free(sampler->grammar);
    sampler->grammar = sg;
    sample_constraint c = sg ? sample_grammar_constraint(sg) : (sample_constraint){0};
    sample_chain_set_constraint(sampler->chain, sg ? &c : NULL);
    return 0;
}

int tessera_sampler_grammar_restart(tessera_sampler *sampler) {
    if (!sampler) return error_set("sampler: sampler is NULL");
    return sampler->grammar ? sample_grammar_restart(sampler->grammar) : 0;
}

bool tessera_sampler_grammar_complete(const tessera_sampler *sampler) {
    return sampler && sampler->grammar && sample_grammar_complete(sampler->grammar);
}

uint32_t tessera_sampler_seed(const tessera_sampler *sampler) {
    return sampler ? sampler->seed : 0;
}

int32_t tessera_sampler_last_probs(const tessera_sampler *sampler, tessera_token_prob *out, int32_t cap) {
    if (!sampler || (cap > 0 && !out)) return error_set("sampler: %s is NULL", sampler ? "out" : "sampler");
    size_t n;
    const sample_cand *c = sample_chain_last(sampler->chain, &n);
    for (size_t i = 0; i < n && (int64_t)i < cap; i++) out[i] = (tessera_token_prob){c[i].id, c[i].p};
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* A sampler's state is the chain's section (PRNG, penalty window) followed,
 * when the sampler has a grammar, by the grammar's section. */
size_t tessera_sampler_state_size(const tessera_sampler *sampler) {
    if (!sampler) return 0;
    return sample_chain_state_size(sampler->chain) +
           (sampler->grammar ? sample_grammar_state_size(sampler->grammar) : 0);
}

int tessera_sampler_state_get(const tessera_sampler *sampler, void *buf, size_t size) {
    if (!sampler || !buf) return error_set("sampler state: %s is NULL", sampler ? "buffer" : "sampler");
    size_t need = tessera_sampler_state_size(sampler);
    if (size < need) return error_set("sampler state: buffer of %zu bytes, %zu needed", size, need);
    sample_chain_state_write(sampler->chain, buf);
    if (sampler->grammar)
        return sample_grammar_state_write(sampler->grammar, (uint8_t *)buf + sample_chain_state_size(sampler->chain));
    return 0;
}

int tessera_sampler_state_set(tessera_sampler *sampler, const void *buf, size_t size) {
    if (!sampler || !buf) return error_set("sampler state: %s is NULL", sampler ? "buffer" : "sampler");
    size_t chain_len = sample_chain_state_length(buf, size);
    if (chain_len == 0) return -1;
    if (!sampler->grammar && chain_len < size)
        return error_set("sampler state: it holds a grammar's state but this sampler has no grammar");
    if (sampler->grammar && chain_len == size)
        return error_set("sampler state: it holds no grammar state but this sampler has a grammar");
    /* Check the grammar's part before changing anything (the chain's read
     * applies itself only when valid), so a refused state changes nothing. */
    if (sampler->grammar &&
        sample_grammar_state_check(sampler->grammar, (const uint8_t *)buf + chain_len, size - chain_len) != 0)
        return -1;
    if (sample_chain_state_read(sampler->chain, buf, chain_len) != 0) return -1;
    if (sampler->grammar) return sample_grammar_state_read(sampler->grammar, (const uint8_t *)buf + chain_len, size - chain_len);
    return 0;
}
