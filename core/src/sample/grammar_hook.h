/*
 * grammar_hook — a grammar as a constraint of the sampler chain: the token
 * pieces of a model, the matcher's state, and the sample_constraint calls
 * over them. End-of-generation tokens are allowed only when the text so
 * far is a complete match; tokens with no text (control tokens) never.
 */
#ifndef TESSERA_SAMPLE_GRAMMAR_HOOK_H
#define TESSERA_SAMPLE_GRAMMAR_HOOK_H

#include <tessera/tessera.h>

#include "sample/sample.h"

typedef struct sample_grammar sample_grammar;

/* A copy of grammar over model's tokens. NULL with an error. */
sample_grammar *sample_grammar_new(const tessera_model *model, const tessera_grammar *grammar);
void sample_grammar_free(sample_grammar *sg);
/* The constraint to hand to sample_chain_set_constraint. */
sample_constraint sample_grammar_constraint(sample_grammar *sg);
/* Advance by an accepted token. A token the grammar does not allow puts it
 * in a failed state (every later pick fails) until a restart. */
void sample_grammar_accept(sample_grammar *sg, int32_t id);
int sample_grammar_restart(sample_grammar *sg);
bool sample_grammar_complete(const sample_grammar *sg);

/* Saved state: the tokens accepted since the last restart and a fingerprint
 * of the grammar. Reading checks both and replays the tokens. */
size_t sample_grammar_state_size(const sample_grammar *sg);
int sample_grammar_state_write(const sample_grammar *sg, uint8_t *out);
int sample_grammar_state_check(const sample_grammar *sg, const uint8_t *in, size_t len); /* no change */
int sample_grammar_state_read(sample_grammar *sg, const uint8_t *in, size_t len);

#endif
