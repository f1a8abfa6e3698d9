/*
 * step_graph — the graph of a decode step, kept for the next step when that
 * step has the same shape (graph reuse).
 *
 * Decoding token by token builds the same graph again and again: only the
 * cells the new tokens' K and V go to (kv_head) and the cells attended to
 * (n_kv) move. In steps of up to STEP_PAD_TOKENS tokens (one per sequence:
 * decoding) n_kv is rounded up to STEP_KV_PAD cells (the mask hides the
 * cells past the last one in use; they hold finite values, zeros or old
 * ones, which the attention weighs by 0), so the shape holds for STEP_KV_PAD
 * steps; prompt batches keep the exact n_kv (a padded one would change
 * their sums: small attention products are summed in double below 32
 * cells); the cache writes, CPY nodes into views of the cache at kv_head
 * times the bytes of a cell, are moved to the new kv_head in place. Every
 * other thing that changes is an input, filled every step.
 *
 * A kept graph is used again when the step has the same tokens, outputs and
 * padded n_kv of every cell set, and the scheduler's last allocation is
 * still this graph (a context-shift graph or a reserve in between re-plans
 * the buffers). Anything the cache-write check does not recognise makes the
 * graph single-use. A recurrent model's graph reads and writes the state
 * slot of its sequence (kv_cache_rs_slot): it is kept for that slot only.
 * Changing the adapters in use (lora) drops the kept
 * graph: the caller does (tessera_context_set_loras).
 */
#ifndef TESSERA_MODEL_STEP_GRAPH_H
#define TESSERA_MODEL_STEP_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "kv/kv.h"
#include "model/model.h"
#include "sched/sched.h"

enum { STEP_KV_PAD = 32, STEP_PAD_TOKENS = 8 };

/* A CPY node writing this step's tokens into a cache view at kv_head[set]
 * times cell_bytes. */
typedef struct step_kv_write {
    graph_tensor *node;
    int32_t set;
    uint64_t cell_bytes;
} step_kv_write;

typedef struct step_graph {
    model_batch_graph bg; /* bg.g NULL: none kept */
    bool reusable;        /* every cache write recognised */
    step_kv_write *writes;
    int32_t n_writes, cap_writes;
    int32_t n_reused, n_built; /* statistics (tests) */
    bool embd_in; /* the next step takes embedding rows, not tokens (set by the caller) */
    bool observe; /* mark the products' inputs as outputs (observe.h; set by the caller) */
} step_graph;

/* The cells a step of n_tokens attends to when n_kv cells of a set of size
 * cells are in use. */
int32_t step_kv_padded(int32_t n_kv, int32_t size, int32_t n_tokens);

/* The allocated graph of a step of n tokens written to cells kv_head[s]..
 * of each set, attending to n_kv[s] cells (already padded), with n_out
 * outputs: the kept one moved to kv_head when it fits and reuse is on,
 * else a new one (kept for later when reusable). Returns 0 with *out set
 * (owned by sg), or -1. */
int step_graph_get(step_graph *sg, const model *m, kv_cache *kv, const model_lora_set *lora, sched *s, int32_t n,
                   const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, bool reuse, model_batch_graph **out);

/* Forget the kept graph (after a failed step: nothing is trusted). */
void step_graph_drop(step_graph *sg);
void step_graph_free(step_graph *sg);

#endif
