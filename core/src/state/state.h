/*
 * state — a context's saved state (tessera_state_* in tessera.h).
 *
 * File layout, little-endian, version 3 (still read: version 2, the same
 * without n_layer_kv, every layer then having K/V in the file; version 1,
 * version 2 without the recurrent-state fields, which are then 0):
 *
 *   header  "TSRSTATE" u32 version
 *           model:    char arch[32], u32 n_layer, n_embd, n_vocab,
 *                     u64 gguf_hash (of the GGUF's metadata and tensor infos)
 *           settings: u32 n_ctx, k_dtype, v_dtype (cache types), n_embd_k,
 *                     n_embd_v, flags: bit 0 V transposed (informative: a
 *                     cell's V is packed as one row either way), bit 1 K and
 *                     bit 2 V hold Hadamard-rotated heads (kv.h: Rotation;
 *                     files from before the rotation have both clear, which
 *                     is what they hold)
 *           counts:   i32 seq (-1: the whole cache), u32 n_tokens, n_cells,
 *                     n_logits, sampler_bytes, n_sets (1, or 2 with a
 *                     sliding-window set), n_cells_swa, n_layer_swa (of
 *                     the layers with K/V)
 *           (v2)      u32 n_rs (sequences saved with a recurrent state),
 *                     u64 rs_bytes (bytes of one sequence's state: every
 *                     recurrent layer's, in layer order; 0 without)
 *           (v3)      u32 n_layer_kv (layers with K/V: the attention
 *                     layers; a recurrent layer has none, kv.h)
 *   payload i32 tokens[n_tokens], f32 logits[n_logits], sampler bytes,
 *           cells of set 0 [n_cells] {u32 index, i32 pos, u64 seq_mask},
 *           cells of set 1 [n_cells_swa] (the same),
 *           i32 dropped[n_sets][64] (per set and sequence: the highest
 *           position a sliding window dropped, -1: none),
 *           per layer with K/V (every layer before v3, a recurrent
 *           layer's being zeros then: a reader skips them): K of its set's
 *           cells (count * k bytes), then V,
 *           (v2) n_rs times {i32 seq, rs_bytes of its state}
 *   u64     checksum of every byte before it
 *
 * The header's counts fix the file's exact size, so a truncated or padded
 * file is refused before anything is read; every value is checked before
 * use (the reader treats the file as hostile).
 */
#ifndef TESSERA_STATE_H
#define TESSERA_STATE_H

#include <stddef.h>
#include <stdint.h>

enum { STATE_VERSION = 3, STATE_ARCH_MAX = 32, STATE_SEQS = 64 };
enum { STATE_FLAG_V_TRANS = 1, STATE_FLAG_K_ROT = 2, STATE_FLAG_V_ROT = 4 };

typedef struct state_header {
    uint32_t version;
    char arch[STATE_ARCH_MAX]; /* NUL-padded */
    uint32_t n_layer, n_embd, n_vocab;
    uint64_t gguf_hash;
    uint32_t n_ctx, k_dtype, v_dtype, n_embd_k, n_embd_v, flags; /* STATE_FLAG_* */
    int32_t seq;
    uint32_t n_tokens, n_cells, n_logits, sampler_bytes;
    uint32_t n_sets, n_cells_swa, n_layer_swa;
    uint32_t n_rs;     /* v2 */
    uint64_t rs_bytes; /* v2 */
    uint32_t n_layer_kv; /* v3; n_layer before */
    /* derived by state_header_sizes */
    uint64_t k_cell_bytes, v_cell_bytes;
    uint64_t off_tokens, off_logits, off_sampler, off_cells, off_cells_swa, off_dropped, off_kv, off_rs,
        off_checksum, total;
} state_header;

/* Bytes of the encoded header of versions 1 and 2, and of the current one. */
#define STATE_HEADER_BYTES_V1 ((size_t)(8 + 4 + STATE_ARCH_MAX + 3 * 4 + 8 + 6 * 4 + 4 + 4 * 4 + 3 * 4))
#define STATE_HEADER_BYTES_V2 (STATE_HEADER_BYTES_V1 + 4 + 8)
#define STATE_HEADER_BYTES (STATE_HEADER_BYTES_V2 + 4)
/* Bytes of the header of a version (1 to 3). */
static inline size_t state_header_bytes(uint32_t version) {
    return version == 1 ? STATE_HEADER_BYTES_V1 : version == 2 ? STATE_HEADER_BYTES_V2 : STATE_HEADER_BYTES;
}
#define STATE_CELL_BYTES ((size_t)16)

/* A 64-bit checksum (not cryptographic: it catches damage, not forgery). */
uint64_t state_checksum(const void *data, size_t len);

/* Fill h's offsets and total size from its counts and the K/V cell sizes of
 * its dtypes; an error when a count or the total overflows. */
int state_header_sizes(state_header *h);
void state_header_write(const state_header *h, uint8_t *out);
/* Parse and check data[0..len) as far as the bytes themselves go: magic,
 * version, sizes (the length must be exactly h->total) and checksum. label
 * names the file in errors. */
int state_header_read(state_header *h, const uint8_t *data, size_t len, const char *label);

/* Little-endian stores and loads. */
void state_put(uint8_t *p, uint64_t v, int n);
uint64_t state_get(const uint8_t *p, int n);

#endif
