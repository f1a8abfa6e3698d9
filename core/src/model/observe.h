/*
 * observe — hand the activations that multiply the model's weights to a
 * caller (tessera_context_set_matmul_observer; `tessera imatrix` builds an
 * importance matrix from them).
 *
 * Where: the step graph, not the scheduler or a plugin. When a context has
 * an observer, every graph it builds marks the activation input (src1) of
 * each MUL_MAT and MUL_MAT_ID whose src0 is a model weight, and the expert
 * ids (src2) of the latter, as graph outputs. The scheduler then keeps them
 * alive to the end of the step and, on a device the host cannot read,
 * copies them back with the logits, so the same rule holds on every
 * backend and no plugin learns anything new. After the step's compute the
 * nodes are walked in order and each one's rows are handed over. The cost
 * (memory for the kept inputs, the copies back) is paid only by contexts
 * with an observer.
 */
#ifndef TESSERA_MODEL_OBSERVE_H
#define TESSERA_MODEL_OBSERVE_H

#include "graph/graph.h"
#include "model/public.h"

/* Mark what observe_step reads as outputs of g (before sched_alloc). */
void observe_mark(graph *g);

/* Hand every observed product of g (computed) to ctx's observer. 0, or -1
 * with an error (out of memory). */
int observe_step(tessera_context *ctx, const graph *g);

#endif
