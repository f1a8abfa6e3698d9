/*
 * kv — the attention key/value cache.
 *
 * Per layer, K is [n_embd_k, n_ctx] (one row of keys per cell). V is stored
 * transposed, [n_ctx rounded up to 32, n_embd_v] (one row per value dimension, see kv_v_row_cells), when the
 * attention is two MUL_MATs (its V product then reads contiguous rows of
 * cells), or like K, [n_embd_v, n_ctx], for FLASH_ATTN (flash_attn).
 * K and V each have their own type: F16 by default (as llama.cpp), F32,
 * BF16 or one of the 32-element block types Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
 * IQ4_NL. A block type needs whole blocks per row, so a quantized V is
 * never transposed (it needs FLASH_ATTN).
 *
 * Cells: a cell set holds, in cell i, position pos[i] of the sequences in
 * seq[i] (a bit mask); a batch of tokens takes a run of free cells of each
 * set (kv_batch.c: the decode code only sees kv_ubatch). Set 0 has n_ctx cells and keeps every position. When
 * the model has sliding-window layers and their window (times the
 * sequences, plus a batch) is smaller than n_ctx, those layers use set 1:
 * window + batch cells whose positions no later token of their sequence can
 * see any more are dropped to make room (a ring in effect), so a 32k
 * context costs the SWA layers about a window each. Each set remembers per
 * sequence the highest position it dropped: rewinding a sequence to a
 * point whose window was dropped forgets the sequence entirely.
 * All the cell bookkeeping is in kv_cache (it is what a saved state holds).
 *
 * Layers whose weights live on a device that does not read host memory get
 * their K/V in a buffer of that device; the others in host memory. A
 * recurrent layer (below) has no K/V at all: no bytes, no leaves.
 *
 * Rotation (kv_rot.c): a block-type K cache holds every head of the keys
 * turned by H, the orthonormal Walsh-Hadamard matrix of the head size, and
 * the queries are turned alike (q.k is unchanged); a block-type V cache
 * holds H v, and the attention output is turned back by H (H = H^T =
 * H^-1). This is what llama.cpp does for a quantized cache: the turn
 * spreads a head's outlier dimensions over its blocks, so 4-bit blocks lose
 * far less. When the head size is not a power of two, H is block-diagonal:
 * one Hadamard matrix per run of kv_rot_block(head_dim) dimensions (at
 * least 32, since a block type needs head sizes that are multiples of 32).
 *
 * Recurrent state (kv_rs.c): models with recurrent layers (Mamba-2's scan,
 * LFM2's short convolutions) keep, beside the cells, one fixed-size state
 * per sequence and recurrent layer (its last conv inputs and its scan
 * state), in n_seq_max slots, in host memory or on the device that holds
 * the layer's KV cache would be (so that -ngl 99 leaves nothing on the
 * CPU). Recurrent layers get no K/V (as llama.cpp's hybrid memory: K/V for
 * the attention layers, a state for the recurrent ones; a pure-recurrent
 * model such as mamba2 has no K/V bytes at all). The cells still record
 * each sequence's positions (its length, the masks of the attention layers). A
 * state sums everything before it, so, as llama.cpp's recurrent memory:
 *   - a sequence cannot be rolled back part way: forgetting positions from
 *     pos > 0 while it holds later ones forgets the whole sequence
 *     (kv_cache_seq_forget returns 0, as when a sliding window dropped what
 *     the rewind needs), and a prompt cache only reuses a state whose
 *     positions all match;
 *   - it cannot be shifted: kv_cache_seq_shift fails (no context shift);
 *   - a failed decode call forgets its sequences entirely (their states may
 *     have taken some of its tokens);
 *   - a micro-batch holds tokens of one sequence (kv_cache_ubatch_reserve
 *     cuts it there), whose slot is kv_ubatch.rs_slot and kv_cache_rs_slot:
 *     the graph reads and writes that row of each layer's state.
 * Saved states carry every recurrent layer's state of each saved sequence.
 */
#ifndef TESSERA_KV_H
#define TESSERA_KV_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

#include "graph/graph.h"

enum { KV_MAX_SEQ = 64, KV_MAX_SETS = 2 };

typedef struct kv_cells {
    int32_t size;
    int32_t n_swa;     /* 0: keeps every position; > 0: the sliding window */
    int32_t *pos;      /* -1: empty */
    uint64_t *seq;     /* bit s: sequence s holds the cell */
    int32_t dropped[KV_MAX_SEQ]; /* highest position dropped per sequence (-1: none) */
} kv_cells;

typedef struct kv_layer {
    int32_t set;         /* the cell set whose cells index its K/V rows */
    int32_t home_device; /* -1: host memory */
    tsr_device *device;  /* NULL for host memory */
    tsr_buffer *buffer;  /* device buffer holding K then V, or NULL */
    uint64_t k_offset, v_offset;
    void *k_data, *v_data; /* host addresses (NULL if not host-visible) */
} kv_layer;

/* The recurrent state (kv_rs.c): per layer, layer_floats[il] floats per
 * slot (0: not a recurrent layer), as [layer_floats, n_slots]: in the
 * buffer buf[il] of device dev[il] (host index home[il]) where the layer's
 * KV cache is on a device, else at layer_offset[il] bytes in mem. host[il]
 * is where the host reads and writes them directly (mem, or the device
 * buffer's host mapping), NULL when only the device's queue can.
 * slot_of[seq]: the sequence's slot (-1: none). */
typedef struct kv_rs {
    int32_t n_slots;
    int64_t *layer_floats;
    uint64_t *layer_offset;
    char **host;
    tsr_device **dev;
    tsr_buffer **buf;
    int32_t *home;
    void *mem;
    uint64_t bytes;
    int32_t slot_of[KV_MAX_SEQ];
    int32_t cur_slot; /* the slot of the last micro-batch reserved */
} kv_rs;

typedef struct kv_cache {
    int32_t n_layer;
    int32_t n_ctx;    /* cells of set 0: the context */
    int32_t n_embd_k; /* head_dim * n_head_kv */
    int32_t n_embd_v;
    int32_t dtype_k, dtype_v; /* see kv_dtype_supported */
    bool flash_attn;          /* read by FLASH_ATTN: V is [n_embd_v, n_ctx] */
    bool rot_k, rot_v;        /* K / V hold rotated heads (see Rotation above) */
    int32_t head_dim;         /* 0 when not given (then neither is rotated) */
    float *rot;               /* H [head_dim, head_dim], NULL when neither is rotated */
    kv_layer *layers;
    void *host_mem;   /* K/V of all host layers (an anonymous mapping) */
    uint64_t host_bytes;
    int32_t n_sets;
    kv_cells sets[KV_MAX_SETS];
    /* Graphs over this cache end at the hidden states [n_embd, n_out], not
     * the logits: the cache belongs to an embedding context. */
    bool embd_out;
    int32_t n_swa; /* the sliding window of SWA layers' masks (0: none) */
    /* The decode call in progress (kv_cache_batch_begin): its sequences and
     * the position each starts at, what kv_cache_batch_rollback forgets. */
    int32_t batch_n_seq;
    int32_t batch_seq[KV_MAX_SEQ], batch_from[KV_MAX_SEQ];
    kv_rs *rs; /* NULL: no recurrent layer */
} kv_cache;

/* Which caches hold rotated heads: AUTO (0) rotates K when it is a block
 * type and V likewise; OFF and ON force it for both (tests, comparisons). */
typedef enum kv_rotation { KV_ROT_AUTO = 0, KV_ROT_OFF, KV_ROT_ON } kv_rotation;

typedef struct kv_cache_params {
    int32_t n_layer, n_ctx, n_embd_k, n_embd_v;
    int32_t head_dim; /* rows split into heads of this size (0: not checked) */
    int32_t dtype_k, dtype_v;
    bool flash_attn; /* V stored like K (else transposed) */
    kv_rotation rotation; /* needs head_dim when it rotates */
    /* Per layer (may be NULL: all host): the device that will compute the
     * layer when its memory must live there, and its host index. */
    tsr_device *const *layer_device;
    const int32_t *layer_home;
    /* Sliding-window layers (layer_swa may be NULL: none) get a set of
     * n_cells_swa cells when 0 < n_cells_swa < n_ctx, window n_swa. */
    const bool *layer_swa;
    int32_t n_swa, n_cells_swa;
    /* Recurrent layers (NULL: none): floats of state per sequence of each
     * layer (0: not recurrent), kept for rs_slots sequences at a time. */
    const int64_t *rs_layer_floats;
    int32_t rs_slots;
} kv_cache_params;

/* The cells each row of a transposed V holds for a set of `cells` cells:
 * rounded up to 32, so every row starts 64-byte aligned for F16 (the rows
 * past `cells` stay zero and are never read). An odd row stride cost a
 * decode 4% on SmolLM2 at -c 513 (each row's few hundred bytes straddled one
 * more cache line and the prefetchers lost the pattern). */
static inline int32_t kv_v_row_cells(int32_t cells) { return (cells + 31) & ~31; }

/* Whether dtype can be a cache type (F16, F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL). */
bool kv_dtype_supported(int32_t dtype);

/* Bytes of n values of dtype in the cache (n a multiple of its block size;
 * 0 otherwise). The one place cache offsets and row sizes come from. */
uint64_t kv_row_bytes(int32_t dtype, int64_t n);

kv_cache *kv_cache_new(const kv_cache_params *p);
void kv_cache_free(kv_cache *kv);

uint64_t kv_cache_nbytes(const kv_cache *kv);

/* Whether layer il has K/V (false for a recurrent layer: it has a state
 * instead), and how many layers have. */
bool kv_cache_layer_has_kv(const kv_cache *kv, int32_t il);
int32_t kv_cache_n_layer_kv(const kv_cache *kv);

/* Bytes of layer il's K and V (their set's cells; 0 for a recurrent layer). */
uint64_t kv_cache_layer_k_bytes(const kv_cache *kv, int32_t il);
uint64_t kv_cache_layer_v_bytes(const kv_cache *kv, int32_t il);

/* Persistent leaves for layer il's whole K [n_embd_k, cells] and V
 * ([n_embd_v, cells] for flash_attn, else [cells, n_embd_v]) tensors (cells:
 * the size of the layer's set), bound to
 * the cache's memory; NULL with the error set for a recurrent layer. */
graph_tensor *kv_cache_k_leaf(graph *g, const kv_cache *kv, int32_t il);
graph_tensor *kv_cache_v_leaf(graph *g, const kv_cache *kv, int32_t il);

/* A leaf for H [head_dim, head_dim] F32 in host memory (kv->rot: only when
 * kv->rot_k or kv->rot_v). MUL_MAT(H, x) with x [head_dim, n] turns each
 * column: H is symmetric, so it rotates and rotates back. */
graph_tensor *kv_cache_rot_leaf(graph *g, const kv_cache *kv);

/* The size of the Hadamard blocks H is made of: the largest power of two
 * dividing head_dim (head_dim itself when it is one; 0 for head_dim <= 0). */
int32_t kv_rot_block(int32_t head_dim);
/* Fill h [head_dim * head_dim] with H: block-diagonal normalized
 * Walsh-Hadamard matrices of size kv_rot_block(head_dim). */
void kv_rot_fill(float *h, int32_t head_dim);

/* One past the highest position sequence seq holds (0: none). */
int32_t kv_cache_seq_len(const kv_cache *kv, int32_t seq);
/* Sequence seq forgets positions >= pos in every set; when a sliding-window
 * set already dropped a position the next token (at pos) would see, it
 * forgets everything. Returns the position it forgot from (pos or 0). */
int32_t kv_cache_seq_forget(kv_cache *kv, int32_t seq, int32_t pos);

/* Context shift: sequence seq forgets positions [p0, p0 + n) and its
 * positions from p0 + n on move down by n. delta[s] (NULL, or one int per
 * cell of set s) receives how far each cell's position moved (0 or -n):
 * the keys of those cells must be rotated by it (the caller's graph). Fails
 * when such a cell is shared with another sequence. */
int kv_cache_seq_shift(kv_cache *kv, int32_t seq, int32_t p0, int32_t n, int32_t *const *delta);

/* Self-Extend's moves (llama.cpp's seq_add and seq_div): the cells of
 * sequence seq at positions [p0, p1) move to pos + d (a cell moved below 0
 * is forgotten), or to pos / d. delta[0] (one int per cell of set 0)
 * receives how far each cell moved, for the caller's graph to turn its
 * keys. Fails when such a cell is shared with another sequence, or when
 * the cache has a sliding-window set (whose dropped marks cannot move). */
int kv_cache_seq_add(kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t d, int32_t *const *delta);
int kv_cache_seq_div(kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t d, int32_t *const *delta);

/* The set sliding-window layers use (0 when they share set 0). */
int32_t kv_cache_swa_set(const kv_cache *kv);

/* ------------------------------------------------------------ cell sets */

/* Set `set` (0 .. kv->n_sets - 1) of the cache: its size, the cells in
 * use, and one past the highest cell in use (what attention reads). The
 * code outside kv/ asks these; it never reads a set's cell arrays. */
int32_t kv_cache_set_size(const kv_cache *kv, int32_t set);
int32_t kv_cache_set_used(const kv_cache *kv, int32_t set);
int32_t kv_cache_set_n_kv(const kv_cache *kv, int32_t set);

/* ------------------------------------- the cell table of a saved state (kv_table.c) */

/* One cell as a saved state records it: its index in its set, the position
 * it holds and the sequences holding it (a bit mask). */
typedef struct kv_cell_rec {
    int32_t cell, pos;
    uint64_t seq_mask;
} kv_cell_rec;

/* The cells of set `set` that sequence seq holds (seq -1: every cell in
 * use), in cell order, into out[] (NULL: only count them); the count. With
 * seq >= 0 a record's mask is that sequence's bit alone. */
int32_t kv_cache_cells_list(const kv_cache *kv, int32_t set, int32_t seq, kv_cell_rec *out);
/* The highest position set `set` dropped of sequence seq (-1: none), and
 * setting it (a loaded state's). */
int32_t kv_cache_dropped(const kv_cache *kv, int32_t set, int32_t seq);
void kv_cache_set_dropped(kv_cache *kv, int32_t set, int32_t seq, int32_t pos);
/* Sequence seq (-1: every sequence) lets go of all its cells in every set;
 * unlike kv_cache_seq_forget, what the sets dropped is kept. */
void kv_cache_seq_clear(kv_cache *kv, int32_t seq);
/* Where n saved cells go in set `set`: dst[i] = recs[i].cell when that cell
 * is free (so a reloaded whole cache is laid out as it was), else the
 * lowest free cell. Nothing is changed; -1 with the error set when the
 * free cells are too few. */
int kv_cache_cells_place(const kv_cache *kv, int32_t set, const kv_cell_rec *recs, int32_t n, int32_t *dst);
/* Cell dst[i] of set `set` takes recs[i]'s position and sequences. */
void kv_cache_cells_fill(kv_cache *kv, int32_t set, const kv_cell_rec *recs, const int32_t *dst, int32_t n);
/* A copy of every set's cell table, to put back when a load fails part way:
 * NULL with the error set when out of memory. Restore puts it back and
 * frees it; free only frees it (either takes NULL). */
typedef struct kv_cells_backup kv_cells_backup;
kv_cells_backup *kv_cache_cells_backup(const kv_cache *kv);
void kv_cache_cells_restore(kv_cache *kv, kv_cells_backup *b);
void kv_cells_backup_free(kv_cells_backup *b);

/* ------------------------------------- a decode call's cells (kv_batch.c) */

/* Where a micro-batch's n tokens went: cells head[s]..head[s]+n-1 of each
 * of the n_sets cell sets; n_kv[s]: one past the highest cell in use (what
 * attention reads, before the step graph pads it), n_cells[s]: the set's
 * size. */
typedef struct kv_ubatch {
    int32_t n, n_sets;
    int32_t head[KV_MAX_SETS], n_kv[KV_MAX_SETS], n_cells[KV_MAX_SETS];
    int32_t rs_slot; /* recurrent models: the state slot of the (one) sequence */
} kv_ubatch;

/* Start a decode call of n tokens (pos[i] of sequence seq[i]): each
 * sequence forgets what it held at or after its lowest position among the
 * tokens, then used cells are compacted. -1 with the error set when a
 * sliding-window set no longer holds what a sequence needs to go on (the
 * sequence is then cleared) or when fewer than n cells are free. */
int kv_cache_batch_begin(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t n);
/* Reserve cells for the next micro-batch: up to want tokens, fewer when no
 * run of free cells is that long. Returns the tokens placed (ub->n), or 0
 * with the error set when some set has no free cell. */
int32_t kv_cache_ubatch_reserve(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t want,
                                kv_ubatch *ub);
/* The call failed: its sequences forget every position it placed. */
void kv_cache_batch_rollback(kv_cache *kv);
/* The attention mask [n_kv[set], n_tokens] of a micro-batch: token t
 * (sequence seq[t] at position pos[t]) sees cell j when the cell holds a
 * position p of the same sequence (0, else -inf) with, when causal,
 * p <= pos[t] (an encoder's tokens see their whole sequence), and, for the
 * sliding-window mask (swa: the SWA layers' set), pos[t] - p < n_swa. */
void kv_cache_fill_mask(const kv_cache *kv, bool swa, bool causal, const int32_t *n_kv, int32_t n_tokens,
                        const int32_t *pos, const int32_t *seq, float *mask);
/* Cells in use in set 0 (every position the sequences hold). */
int32_t kv_cache_cells_used(const kv_cache *kv);

/* Moves the cells in use of set 0 to its lowest cells when holes make
 * attention read many empty ones (sequences ending at different times);
 * only when every layer of the set has its K/V in host memory
 * (kv_cache_batch_begin does it). */
void kv_cache_compact(kv_cache *kv);

/* Saved state (kv_cells.c): the bytes one cell takes in a layer's K and V,
 * and copies of the K/V of cells[0..n) (of the layer's set) of layer il to / from packed arrays
 * (n * cell bytes each; cell c's K then at c * k bytes), through the
 * device's queue where the layer's memory is not host-addressable. A
 * recurrent layer has no K/V: its cells read as zeros and take nothing. */
uint64_t kv_cache_cell_k_bytes(const kv_cache *kv);
uint64_t kv_cache_cell_v_bytes(const kv_cache *kv);
int kv_cache_cells_get(const kv_cache *kv, int32_t il, const int32_t *cells, int32_t n, void *k_out,
                       void *v_out);
int kv_cache_cells_set(kv_cache *kv, int32_t il, const int32_t *cells, int32_t n, const void *k_in,
                       const void *v_in);

/* ------------------------------------- recurrent state (kv_rs.c) */

/* Whether the cache has recurrent layers; whether layer il is one. */
bool kv_cache_is_recurrent(const kv_cache *kv);
bool kv_cache_layer_is_recurrent(const kv_cache *kv, int32_t il);
/* The slot the graph being built reads and writes (the last micro-batch's). */
int32_t kv_cache_rs_slot(const kv_cache *kv);
/* A persistent leaf for layer il's states [floats, n_slots] F32 (NULL when
 * the layer is not recurrent). */
graph_tensor *kv_cache_rs_leaf(graph *g, const kv_cache *kv, int32_t il);
/* Whether root is the storage of some layer's states (step graphs). */
bool kv_cache_rs_root(const kv_cache *kv, const graph_tensor *root);
/* The bytes of layer il's states, every slot (0: not a recurrent layer);
 * they live where the layer's KV cache does (what -v reports with it). */
uint64_t kv_cache_rs_layer_bytes(const kv_cache *kv, int32_t il);
/* Saved states: the bytes of one sequence's states (every recurrent layer's,
 * in layer order), whether seq holds one, a copy of it (zeros when it holds
 * none) and setting it (taking a slot: -1 with the error set when none is
 * free). */
uint64_t kv_cache_rs_seq_bytes(const kv_cache *kv);
bool kv_cache_rs_held(const kv_cache *kv, int32_t seq);
void kv_cache_rs_get(const kv_cache *kv, int32_t seq, void *out);
int kv_cache_rs_set(kv_cache *kv, int32_t seq, const void *in);
/* dst's state becomes a copy of src's (llama.cpp's seq_cp of a recurrent
 * state); -1 when no slot is free. */
int kv_cache_rs_copy(kv_cache *kv, int32_t src, int32_t dst);

#endif
