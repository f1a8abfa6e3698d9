/* grammar_hook — the grammar as a sample_constraint (see grammar_hook.h). */
#include <stdint.h>
#include <stdlib.h>

#include "grammar/grammar.h"
#include "sample/grammar_hook.h"
#include "util/error.h"
#include "util/le.h"

struct sample_grammar {
    grammar *g;
    grammar_matcher m;
    grammar_vocab *vocab;
    uint8_t *eog; /* n_vocab: 1 for end-of-generation tokens */
    int32_t n_vocab;
    int32_t failed_token; /* -1, or the accepted token the grammar rejected */
    /* Every token accepted since the last restart: a saved state stores
     * these and a restore replays them, which rebuilds the matcher's parse
     * stacks exactly without a format for the stacks themselves. */
    int32_t *accepted;
    size_t n_accepted, cap_accepted; /* cap SIZE_MAX: a recording failed */
    uint64_t fingerprint;            /* of the rules: a restore refuses another grammar */
};

/* FNV-1a over the compiled rules: grammars parsed from the same text give
 * the same value. */
static uint64_t grammar_fingerprint(const grammar *g) {
    uint64_t h = 1469598103934665603ull;
    const uint32_t words[3] = {g->n_elems, g->n_rules, g->root};
    for (int i = 0; i < 3; i++) h = (h ^ words[i]) * 1099511628211ull;
    for (uint32_t i = 0; i < g->n_elems; i++) {
        h = (h ^ g->elems[i].op) * 1099511628211ull;
        h = (h ^ g->elems[i].value) * 1099511628211ull;
    }
    return h;
}

static int32_t model_piece(void *user, int32_t id, char *buf, int32_t size) {
    const tessera_model *model = user;
    /* Control tokens render as nothing without render_special. */
    int32_t n = tessera_token_to_piece(model, id, buf, size, false);
    return n < 0 ? 0 : n;
}

sample_grammar *sample_grammar_new(const tessera_model *model, const tessera_grammar *grammar) {
    sample_grammar *sg = calloc(1, sizeof *sg);
    if (!sg) {
        error_set("sampler: out of memory");
        return NULL;
    }
    sg->failed_token = -1;
    sg->n_vocab = tessera_model_n_vocab(model);
    sg->g = grammar_copy(grammar->g);
    if (!sg->g || grammar_matcher_init(&sg->m, sg->g) < 0) goto fail;
    sg->fingerprint = grammar_fingerprint(sg->g);
    sg->vocab = grammar_vocab_new(sg->n_vocab, model_piece, (void *)model);
    sg->eog = calloc((size_t)sg->n_vocab, 1);
    if (!sg->vocab || !sg->eog) goto fail;
    for (int32_t id = 0; id < sg->n_vocab; id++)
        sg->eog[id] = tessera_token_is_eog(model, id);
    return sg;
fail:
    if (!sg->eog && sg->vocab) error_set("sampler: out of memory");
    sample_grammar_free(sg);
    return NULL;
}

void sample_grammar_free(sample_grammar *sg) {
    if (!sg) return;
    if (sg->g) grammar_matcher_free(&sg->m);
    grammar_vocab_free(sg->vocab);
    grammar_free(sg->g);
    free(sg->eog);
    free(sg->accepted);
    free(sg);
}

static int fail_state(const sample_grammar *sg) {
    return error_set("sampler: token %d was accepted but the grammar does not allow it (accept the "
                     "prompt before attaching the grammar, or restart it)",
                     (int)sg->failed_token);
}

static int hook_allows(void *user, int32_t id) {
    sample_grammar *sg = user;
    if (sg->failed_token >= 0) return fail_state(sg);
    if (id < 0 || id >= sg->n_vocab) return 0;
    if (sg->eog[id]) return grammar_matcher_complete(&sg->m);
    size_t n;
    const char *piece = grammar_vocab_piece(sg->vocab, id, &n);
    if (n == 0) return 0;
    return grammar_matcher_check(&sg->m, piece, n);
}

static int32_t hook_mask(void *user, uint8_t *allowed) {
    sample_grammar *sg = user;
    if (sg->failed_token >= 0) return fail_state(sg);
    int32_t n = grammar_vocab_mask(sg->vocab, &sg->m, allowed);
    if (n < 0) return -1;
    if (grammar_matcher_complete(&sg->m))
        for (int32_t id = 0; id < sg->n_vocab; id++)
            if (sg->eog[id]) {
                n += !allowed[id];
                allowed[id] = 1;
            }
    return n;
}

sample_constraint sample_grammar_constraint(sample_grammar *sg) {
    return (sample_constraint){.allows = hook_allows, .mask = hook_mask, .user = sg};
}

static void remember_accepted(sample_grammar *sg, int32_t id) {
    if (sg->cap_accepted == SIZE_MAX) return;
    if (sg->n_accepted == sg->cap_accepted) {
        size_t cap = sg->cap_accepted ? 2 * sg->cap_accepted : 64;
        int32_t *a = realloc(sg->accepted, cap * sizeof *a);
        if (!a) { /* a later save says so rather than save a wrong state */
            sg->cap_accepted = SIZE_MAX;
            return;
        }
        sg->accepted = a;
        sg->cap_accepted = cap;
    }
    sg->accepted[sg->n_accepted++] = id;
}

void sample_grammar_accept(sample_grammar *sg, int32_t id) {
    if (sg->failed_token >= 0 || id < 0 || id >= sg->n_vocab) return;
    remember_accepted(sg, id);
    if (sg->eog[id]) {
        if (!grammar_matcher_complete(&sg->m)) sg->failed_token = id;
        return;
    }
    size_t n;
    const char *piece = grammar_vocab_piece(sg->vocab, id, &n);
    if (n == 0 || grammar_matcher_accept(&sg->m, piece, n) != 0) sg->failed_token = id;
}

int sample_grammar_restart(sample_grammar *sg) {
    sg->failed_token = -1;
    sg->n_accepted = 0;
    if (sg->cap_accepted == SIZE_MAX) {
        free(sg->accepted);
        sg->accepted = NULL;
        sg->cap_accepted = 0;
    }
    return grammar_matcher_reset(&sg->m);
}

/* ------------------------------------------------------------ saved state
 * Little-endian: u32 magic "GRM1", u64 fingerprint, u32 count, i32 ids[count]
 * (the tokens accepted since the last restart, in order). */
enum { GRAMMAR_STATE_MAGIC = 0x314d5247u, GRAMMAR_STATE_FIXED = 4 + 8 + 4 };


size_t sample_grammar_state_size(const sample_grammar *sg) { return GRAMMAR_STATE_FIXED + 4 * sg->n_accepted; }

int sample_grammar_state_write(const sample_grammar *sg, uint8_t *out) {
    if (sg->cap_accepted == SIZE_MAX)
        return error_set("sampler state: out of memory while recording the grammar's tokens; cannot save");
    le_put(out, GRAMMAR_STATE_MAGIC, 4);
    le_put(out + 4, sg->fingerprint, 8);
    le_put(out + 12, sg->n_accepted, 4);
    for (size_t i = 0; i < sg->n_accepted; i++)
        le_put(out + GRAMMAR_STATE_FIXED + 4 * i, (uint32_t)sg->accepted[i], 4);
    return 0;
}

int sample_grammar_state_check(const sample_grammar *sg, const uint8_t *in, size_t len) {
    if (len < GRAMMAR_STATE_FIXED || le_get(in, 4) != GRAMMAR_STATE_MAGIC)
        return error_set("sampler state: the grammar's state is missing or damaged");
    if (le_get(in + 4, 8) != sg->fingerprint)
        return error_set("sampler state: it was saved with a different grammar than this sampler's");
    uint64_t count = le_get(in + 12, 4);
    if (count != (len - GRAMMAR_STATE_FIXED) / 4 || (len - GRAMMAR_STATE_FIXED) % 4)
        return error_set("sampler state: the grammar records %llu tokens but %zu bytes follow",
                         (unsigned long long)count, len - GRAMMAR_STATE_FIXED);
    for (uint64_t i = 0; i < count; i++) {
        int32_t id = (int32_t)(uint32_t)le_get(in + GRAMMAR_STATE_FIXED + 4 * i, 4);
        if (id < 0 || id >= sg->n_vocab)
            return error_set("sampler state: grammar token %d is outside the vocabulary (0..%d)", (int)id,
                             (int)sg->n_vocab - 1);
    }
    return 0;
}

int sample_grammar_state_read(sample_grammar *sg, const uint8_t *in, size_t len) {
    if (sample_grammar_state_check(sg, in, len) != 0) return -1;
    uint64_t count = le_get(in + 12, 4);
    /* Replay from the start symbol: a token the grammar refused when it was
     * accepted puts the matcher back in the same failed state. */
    if (sample_grammar_restart(sg) != 0) return -1;
    for (uint64_t i = 0; i < count; i++)
        sample_grammar_accept(sg, (int32_t)(uint32_t)le_get(in + GRAMMAR_STATE_FIXED + 4 * i, 4));
    return 0;
}

bool sample_grammar_complete(const sample_grammar *sg) {
    return sg->failed_token < 0 && grammar_matcher_complete(&sg->m);
}
