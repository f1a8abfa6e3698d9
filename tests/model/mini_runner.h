/*
 * mini_runner — run a model graph straight on the ref backend, without the
 * scheduler: every unbound tensor gets its own malloc'd block, views point
 * into their storage, nodes go to ref_compute in order. It checks the model
 * graph alone (the scheduler has its own tests).
 */
#ifndef TESSERA_TEST_MINI_RUNNER_H
#define TESSERA_TEST_MINI_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "kv/kv.h"
#include "model/model.h"

/* Allocate g's tensors (inputs get memory at t.data). Returns 0 or -1. */
int mini_alloc(graph *g);
/* Compute every node on ref. Returns 0 or -1 (error_get() says why). */
int mini_compute(graph *g);
/* Free what mini_alloc allocated (before graph_free). */
void mini_release(graph *g);
/* The model's graph for tokens[0..n) at positions pos.. (causal mask, the
 * attention temperature where the model has one) run on ref; the logits of
 * every token (all) or of the last to out. Returns 0 or -1. */
int mini_forward(const model *m, kv_cache *kv, const int32_t *tokens, int32_t n, int32_t pos, bool all,
                 float *out);

#endif
