/*
 * mini_runner — run a model graph straight on the ref backend, without the
 * scheduler: every unbound tensor gets its own malloc'd block, views point
 * into their storage, nodes go to ref_compute in order. It checks the model
 * graph alone (the scheduler has its own tests).
 */
#ifndef TESSERA_TEST_MINI_RUNNER_H
#define TESSERA_TEST_MINI_RUNNER_H

#include "graph/graph.h"

/* Allocate g's tensors (inputs get memory at t.data). Returns 0 or -1. */
int mini_alloc(graph *g);
/* Compute every node on ref. Returns 0 or -1 (error_get() says why). */
int mini_compute(graph *g);
/* Free what mini_alloc allocated (before graph_free). */
void mini_release(graph *g);

#endif
