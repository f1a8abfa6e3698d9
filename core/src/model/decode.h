/*
 * decode — one decode call from tokens to logits, behind tessera_decode
 * (sequence 0) and tessera_decode_batch (any sequences).
 *
 * A call: the KV cache takes the tokens (kv_cache_batch_begin), then per
 * micro-batch of up to n_batch tokens it reserves cells (kv_cache_ubatch_
 * reserve), the step graph is fetched (kept from the last step when the
 * shape holds, step_graph.h), its inputs are filled (tokens, positions,
 * masks), the scheduler computes it, and the wanted rows of logits are
 * copied to the context and checked finite in the same pass. A failure
 * anywhere rolls the cache back (kv_cache_batch_rollback) and drops the
 * kept graph.
 *
 * A context is driven either by tessera_decode (sequence 0, cells in
 * position order) or by tessera_decode_batch, not both.
 */
#ifndef TESSERA_MODEL_DECODE_H
#define TESSERA_MODEL_DECODE_H

#include <stdbool.h>
#include <stdint.h>

/* Per-call arrays tessera_decode fills (positions, sequence 0, which rows
 * to keep), kept in the context and grown to the longest call, so decoding
 * token by token allocates nothing. */
typedef struct decode_scratch {
    int32_t *pos, *seq;
    bool *want;
    int32_t cap;
} decode_scratch;

void decode_scratch_free(decode_scratch *s);

struct tessera_context;
/* Decode n_tokens tokens of any sequences; the wanted rows of the graph's
 * output (logits, or hidden states in an embedding context) go to
 * ctx->logits in token order. Returns the number of rows kept, or -1 with
 * the cache as it was before the call's tokens. */
int32_t decode_tokens(struct tessera_context *ctx, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                      const bool *want, int32_t n_tokens);

#endif
