/*
 * kv — the attention key/value cache.
 *
 * Per layer, K is [n_embd_k, n_ctx] (one row of keys per cell) and V is
 * stored transposed, [n_ctx, n_embd_v] (one row per value dimension), so the
 * attention's V product reads contiguous rows of cells. Both are F16 by
 * default (as llama.cpp) or F32.
 *
 * Cells: cell i holds position cell_pos[i] of the sequences in cell_seq[i]
 * (a bit mask); a batch of tokens takes a run of free cells (api_batch.c).
 *
 * Layers whose weights live on a device that does not read host memory get
 * their K/V in a buffer of that device; the others in host memory.
 */
#ifndef TESSERA_KV_H
#define TESSERA_KV_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

#include "graph/graph.h"

typedef struct kv_layer {
    int32_t home_device; /* -1: host memory */
    tsr_device *device;  /* NULL for host memory */
    tsr_buffer *buffer;  /* device buffer holding K then V, or NULL */
    uint64_t k_offset, v_offset;
    void *k_data, *v_data; /* host addresses (NULL if not host-visible) */
} kv_layer;

typedef struct kv_cache {
    int32_t n_layer;
    int32_t n_ctx;
    int32_t n_embd_k; /* head_dim * n_head_kv */
    int32_t n_embd_v;
    int32_t dtype;    /* TSR_DTYPE_F16 or TSR_DTYPE_F32 */
    kv_layer *layers;
    void *host_mem;   /* K/V of all host layers */
    int32_t *cell_pos; /* -1: empty */
    uint64_t *cell_seq;
} kv_cache;

typedef struct kv_cache_params {
    int32_t n_layer, n_ctx, n_embd_k, n_embd_v;
    int32_t dtype;
    /* Per layer (may be NULL: all host): the device that will compute the
     * layer when its memory must live there, and its host index. */
    tsr_device *const *layer_device;
    const int32_t *layer_home;
} kv_cache_params;

kv_cache *kv_cache_new(const kv_cache_params *p);
void kv_cache_free(kv_cache *kv);

uint64_t kv_cache_nbytes(const kv_cache *kv);

/* Persistent leaves for layer il's whole K [n_embd_k, n_ctx] and V
 * [n_ctx, n_embd_v] tensors, bound to the cache's memory. */
graph_tensor *kv_cache_k_leaf(graph *g, const kv_cache *kv, int32_t il);
graph_tensor *kv_cache_v_leaf(graph *g, const kv_cache *kv, int32_t il);

/* Sequence 0: one past the highest position it holds. */
int32_t kv_cache_seq_len(const kv_cache *kv);
/* Sequence 0 forgets positions >= pos. */
void kv_cache_seq_truncate(kv_cache *kv, int32_t pos);

#endif
