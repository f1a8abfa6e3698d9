/*
 * kv — the attention key/value cache.
 *
 * Per layer, K is [n_embd_k, n_ctx] (one row of keys per cell). V is stored
 * transposed, [n_ctx, n_embd_v] (one row per value dimension), when the
 * attention is two MUL_MATs (its V product then reads contiguous rows of
 * cells), or like K, [n_embd_v, n_ctx], for FLASH_ATTN (flash_attn).
 * K and V each have their own type: F16 by default (as llama.cpp), F32,
 * BF16 or one of the 32-element block types Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * IQ4_NL. A block type needs whole blocks per row, so a quantized V is
 * never transposed (it needs FLASH_ATTN).
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
    int32_t dtype_k, dtype_v; /* see kv_dtype_supported */
    bool flash_attn;          /* read by FLASH_ATTN: V is [n_embd_v, n_ctx] */
    kv_layer *layers;
    void *host_mem;   /* K/V of all host layers */
    int32_t *cell_pos; /* -1: empty */
    uint64_t *cell_seq;
} kv_cache;

typedef struct kv_cache_params {
    int32_t n_layer, n_ctx, n_embd_k, n_embd_v;
    int32_t head_dim; /* rows split into heads of this size (0: not checked) */
    int32_t dtype_k, dtype_v;
    bool flash_attn; /* V stored like K (else transposed) */
    /* Per layer (may be NULL: all host): the device that will compute the
     * layer when its memory must live there, and its host index. */
    tsr_device *const *layer_device;
    const int32_t *layer_home;
} kv_cache_params;

/* Whether dtype can be a cache type (F16, F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL). */
bool kv_dtype_supported(int32_t dtype);

/* Bytes of n values of dtype in the cache (n a multiple of its block size;
 * 0 otherwise). The one place cache offsets and row sizes come from. */
uint64_t kv_row_bytes(int32_t dtype, int64_t n);

kv_cache *kv_cache_new(const kv_cache_params *p);
void kv_cache_free(kv_cache *kv);

uint64_t kv_cache_nbytes(const kv_cache *kv);

/* Bytes of one layer's K and V. */
uint64_t kv_cache_layer_k_bytes(const kv_cache *kv);
uint64_t kv_cache_layer_v_bytes(const kv_cache *kv);

/* Persistent leaves for layer il's whole K [n_embd_k, n_ctx] and V
 * ([n_embd_v, n_ctx] for flash_attn, else [n_ctx, n_embd_v]) tensors, bound to
 * the cache's memory. */
graph_tensor *kv_cache_k_leaf(graph *g, const kv_cache *kv, int32_t il);
graph_tensor *kv_cache_v_leaf(graph *g, const kv_cache *kv, int32_t il);

/* Sequence 0: one past the highest position it holds. */
int32_t kv_cache_seq_len(const kv_cache *kv);
/* Sequence 0 forgets positions >= pos. */
void kv_cache_seq_truncate(kv_cache *kv, int32_t pos);

#endif
