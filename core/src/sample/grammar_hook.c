/* grammar_hook — the grammar as a sample_constraint (see grammar_hook.h). */
#include <stdlib.h>

#include "grammar/grammar.h"
#include "sample/grammar_hook.h"
#include "util/error.h"

struct sample_grammar {
    grammar *g;
    grammar_matcher m;
    grammar_vocab *vocab;
    uint8_t *eog; /* n_vocab: 1 for end-of-generation tokens */
    int32_t n_vocab;
    int32_t failed_token; /* -1, or the accepted token the grammar rejected */
};

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

void sample_grammar_accept(sample_grammar *sg, int32_t id) {
    if (sg->failed_token >= 0 || id < 0 || id >= sg->n_vocab) return;
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
    return grammar_matcher_reset(&sg->m);
}

bool sample_grammar_complete(const sample_grammar *sg) {
    return sg->failed_token < 0 && grammar_matcher_complete(&sg->m);
}
