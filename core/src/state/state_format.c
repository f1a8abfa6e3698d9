/* state_format — the saved-state header, sizes and checksum (state.h). */
#include <stdbool.h>
#include <string.h>

#include <tessera/plugin.h>

#include "kv/kv.h"
#include "state/state.h"
#include "util/error.h"

static const char STATE_MAGIC[8] = {'T', 'S', 'R', 'S', 'T', 'A', 'T', 'E'};

void state_put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t state_get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Eight bytes at a time through a multiply-xorshift mix; the tail bytes and
 * the length go in last, so files differing only in trailing zeros differ. */
uint64_t state_checksum(const void *data, size_t len) {
    const uint8_t *p = data;
    uint64_t h = 0x6a09e667f3bcc909ULL;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        h ^= state_get(p + i, 8);
        h *= 0x9fb21c651e98df25ULL;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (size_t j = 0; i + j < len; j++) tail |= (uint64_t)p[i + j] << (8 * j);
    h ^= tail ^ ((uint64_t)len << 3);
    h *= 0x9fb21c651e98df25ULL;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ULL;
    return h ^ (h >> 32);
}

/* Bytes of a cell's row of n values of a cache type; 0 when the type is
 * not a cache type or n is not whole blocks of it. */
static uint64_t cell_bytes(uint32_t dtype, uint32_t n) {
    return dtype <= INT32_MAX && kv_dtype_supported((int32_t)dtype) ? kv_row_bytes((int32_t)dtype, n) : 0;
}

/* a += b * c, false on overflow */
static bool add_mul(uint64_t *a, uint64_t b, uint64_t c) {
    uint64_t m;
    return !__builtin_mul_overflow(b, c, &m) && !__builtin_add_overflow(*a, m, a);
}

int state_header_sizes(state_header *h) {
    h->k_cell_bytes = cell_bytes(h->k_dtype, h->n_embd_k);
    h->v_cell_bytes = cell_bytes(h->v_dtype, h->n_embd_v);
    if (!h->k_cell_bytes || !h->v_cell_bytes)
        return error_set("%s type %u with %u values per cell is not a KV cache row", h->k_cell_bytes ? "V" : "K",
                         h->k_cell_bytes ? h->v_dtype : h->k_dtype, h->k_cell_bytes ? h->n_embd_v : h->n_embd_k);
    uint64_t off = state_header_bytes(h->version);
    h->off_tokens = off;
    bool ok = add_mul(&off, h->n_tokens, 4);
    h->off_logits = off;
    ok = ok && add_mul(&off, h->n_logits, 4);
    h->off_sampler = off;
    ok = ok && add_mul(&off, h->sampler_bytes, 1);
    if (h->version < 3) h->n_layer_kv = h->n_layer; /* every layer had K/V */
    if (h->n_layer_kv > h->n_layer)
        return error_set("%u layers with K/V of %u make no cache", h->n_layer_kv, h->n_layer);
    if (h->n_sets < 1 || h->n_sets > 2 || h->n_layer_swa > h->n_layer_kv ||
        (h->n_sets == 1 && (h->n_cells_swa || h->n_layer_swa)))
        return error_set("%u cell sets with %u sliding-window layers of %u make no cache", h->n_sets, h->n_layer_swa,
                         h->n_layer_kv);
    h->off_cells = off;
    ok = ok && add_mul(&off, h->n_cells, STATE_CELL_BYTES);
    h->off_cells_swa = off;
    ok = ok && add_mul(&off, h->n_cells_swa, STATE_CELL_BYTES);
    h->off_dropped = off;
    ok = ok && add_mul(&off, h->n_sets, 4 * STATE_SEQS);
    h->off_kv = off;
    const uint64_t cell = h->k_cell_bytes + h->v_cell_bytes;
    uint64_t full = 0, swa = 0;
    ok = ok && add_mul(&full, h->n_cells, cell) && add_mul(&swa, h->n_cells_swa, cell);
    ok = ok && add_mul(&off, full, h->n_layer_kv - h->n_layer_swa) && add_mul(&off, swa, h->n_layer_swa);
    h->off_rs = off;
    if (h->n_rs > STATE_SEQS || (h->n_rs && !h->rs_bytes) || h->rs_bytes > (UINT64_C(1) << 40))
        return error_set("%u recurrent states of %llu bytes make no cache", h->n_rs, (unsigned long long)h->rs_bytes);
    ok = ok && add_mul(&off, h->n_rs, 4 + h->rs_bytes);
    h->off_checksum = off;
    ok = ok && add_mul(&off, 8, 1);
    h->total = off;
    if (!ok || h->total > (uint64_t)SIZE_MAX) return error_set("the header's counts overflow the size of a file");
    return 0;
}

void state_header_write(const state_header *h, uint8_t *out) {
    uint8_t *p = out;
    memcpy(p, STATE_MAGIC, 8), p += 8;
    state_put(p, h->version, 4), p += 4;
    memset(p, 0, STATE_ARCH_MAX);
    memcpy(p, h->arch, strnlen(h->arch, STATE_ARCH_MAX - 1)), p += STATE_ARCH_MAX;
    const uint32_t a[] = {h->n_layer, h->n_embd, h->n_vocab};
    for (size_t i = 0; i < 3; i++) state_put(p, a[i], 4), p += 4;
    state_put(p, h->gguf_hash, 8), p += 8;
    const uint32_t b[] = {h->n_ctx, h->k_dtype, h->v_dtype, h->n_embd_k, h->n_embd_v, h->flags,
                          (uint32_t)h->seq, h->n_tokens, h->n_cells, h->n_logits, h->sampler_bytes,
                          h->n_sets,        h->n_cells_swa, h->n_layer_swa};
    for (size_t i = 0; i < 14; i++) state_put(p, b[i], 4), p += 4;
    state_put(p, h->n_rs, 4), p += 4;
    state_put(p, h->rs_bytes, 8), p += 8;
    state_put(p, h->n_layer_kv, 4);
}

int state_header_read(state_header *h, const uint8_t *data, size_t len, const char *label) {
    memset(h, 0, sizeof *h);
    if (len < 8 || memcmp(data, STATE_MAGIC, 8) != 0)
        return error_set("state file %s: not a Tessera state file (%s)", label,
                         len < 8 ? "shorter than its magic" : "no TSRSTATE magic");
    if (len < STATE_HEADER_BYTES_V1 + 8)
        return error_set("state file %s: truncated: %zu bytes, a header alone takes %zu", label, len,
                         STATE_HEADER_BYTES_V1 + 8);
    const uint8_t *p = data + 8;
    h->version = (uint32_t)state_get(p, 4), p += 4;
    if (h->version < 1 || h->version > STATE_VERSION)
        return error_set("state file %s: version %u, this build reads versions 1 to %d", label, h->version,
                         STATE_VERSION);
    if (len < state_header_bytes(h->version) + 8)
        return error_set("state file %s: truncated: %zu bytes, a header alone takes %zu", label, len,
                         state_header_bytes(h->version) + 8);
    memcpy(h->arch, p, STATE_ARCH_MAX), p += STATE_ARCH_MAX;
    if (h->arch[STATE_ARCH_MAX - 1] != '\0')
        return error_set("state file %s: the architecture name is not NUL-terminated", label);
    uint32_t *a[] = {&h->n_layer, &h->n_embd, &h->n_vocab};
    for (size_t i = 0; i < 3; i++) *a[i] = (uint32_t)state_get(p, 4), p += 4;
    h->gguf_hash = state_get(p, 8), p += 8;
    uint32_t seq;
    uint32_t *b[] = {&h->n_ctx,    &h->k_dtype,  &h->v_dtype, &h->n_embd_k,  &h->n_embd_v,      &h->flags,
                     &seq,         &h->n_tokens, &h->n_cells, &h->n_logits,  &h->sampler_bytes,
                     &h->n_sets,   &h->n_cells_swa, &h->n_layer_swa};
    for (size_t i = 0; i < 14; i++) *b[i] = (uint32_t)state_get(p, 4), p += 4;
    h->seq = (int32_t)seq;
    if (h->version >= 2) {
        h->n_rs = (uint32_t)state_get(p, 4), p += 4;
        h->rs_bytes = state_get(p, 8), p += 8;
    }
    if (h->version >= 3) h->n_layer_kv = (uint32_t)state_get(p, 4);
    if (state_header_sizes(h) != 0) return error_wrap("state file %s", label);
    if (h->total != len)
        return error_set("state file %s: %s: the header describes %llu bytes, the file has %zu", label,
                         len < h->total ? "truncated" : "trailing bytes", (unsigned long long)h->total, len);
    uint64_t want = state_get(data + h->off_checksum, 8);
    if (state_checksum(data, (size_t)h->off_checksum) != want)
        return error_set("state file %s: checksum mismatch: the file is corrupt", label);
    return 0;
}
