/*
 * spec — speculative decoding: drafts of the next tokens (from a small
 * draft model, or from n-grams of the text so far), verified by the target
 * model in one batch (spec.c, behind tessera_spec_* in tessera.h).
 *
 *   spec.c    the public API: the step (draft, verify, roll back), the
 *             draft model's cache, vocabulary compatibility, statistics
 *   ngram.c   prompt lookup: a draft from an earlier occurrence of the
 *             text's last n tokens (llama.cpp's ngram-simple)
 *   accept.c  the acceptance rule of speculative sampling
 */
#ifndef TESSERA_SPEC_H
#define TESSERA_SPEC_H

#include <stdint.h>

#include "sample/sample.h"

/* Prompt lookup: the most recent earlier occurrence of the last n tokens
 * of toks[0..n_toks) and the tokens that followed it there, at most max of
 * them, into out. Returns how many (0: no occurrence, or n_toks <= n). */
int32_t spec_ngram_draft(const int32_t *toks, int32_t n_toks, int32_t n, int32_t max, int32_t *out);

/* The acceptance rule of speculative sampling (Leviathan et al. 2023; Chen
 * et al. 2023): the target's distribution p and the draft's q over the
 * same n tokens, and x drawn from q. x is kept with probability
 * min(1, p[x] / q[x]); otherwise the token is drawn from the residual
 * max(0, p - q), normalised. The result is distributed as p, whatever q
 * is. Returns the token (x when kept; *accepted says which).
 *
 * The engine's drafts are deterministic (the draft model's most likely
 * token, or an n-gram's continuation): q is then 1 at x, the rule keeps x
 * with probability p[x] and otherwise draws from p without x, which is the
 * same as drawing t from p and keeping x when t == x. The engine does the
 * latter with the target's own sampler, so speculation uses the sampler's
 * random stream exactly as plain decoding does (same seed, same text);
 * test_spec_accept checks both forms against p. */
int32_t spec_accept(const float *p, const float *q, int32_t n, int32_t x, sample_rng *rng, int *accepted);

#endif
