/*
 * kv_rs — the recurrent state beside the KV cache (see kv.h, "Recurrent
 * state"): one fixed-size state per sequence and recurrent layer, in host
 * memory, in one of n_seq_max slots. A sequence takes a slot when a decode
 * call first gives it tokens and lets it go when it forgets position 0.
 */
#include <stdlib.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "util/error.h"

static uint64_t align64(uint64_t x) { return (x + 63) / 64 * 64; }

int kv_rs_init(kv_cache *kv, const kv_cache_params *p) {
    if (!p->rs_layer_floats) return 0;
    const int32_t slots = p->rs_slots > 0 ? p->rs_slots : 1;
    if (slots > KV_MAX_SEQ) return error_set("kv cache: %d recurrent-state slots, at most %d", slots, KV_MAX_SEQ);
    kv_rs *rs = calloc(1, sizeof *rs);
    if (!rs) return error_set("kv cache: out of memory");
    kv->rs = rs;
    rs->n_slots = slots;
    rs->layer_floats = calloc((size_t)p->n_layer, sizeof *rs->layer_floats);
    rs->layer_offset = calloc((size_t)p->n_layer, sizeof *rs->layer_offset);
    if (!rs->layer_floats || !rs->layer_offset) return error_set("kv cache: out of memory");
    uint64_t bytes = 0;
    for (int32_t il = 0; il < p->n_layer; il++) {
        if (p->rs_layer_floats[il] < 0) return error_set("kv cache: layer %d has a negative state size", il);
        rs->layer_floats[il] = p->rs_layer_floats[il];
        rs->layer_offset[il] = bytes;
        bytes += align64((uint64_t)p->rs_layer_floats[il] * sizeof(float) * (uint64_t)slots);
    }
    rs->bytes = bytes;
    rs->mem = calloc(1, bytes ? (size_t)bytes : 1);
    if (!rs->mem)
        return error_set("kv cache: cannot allocate %.1f MiB of recurrent state", (double)bytes / (1024.0 * 1024.0));
    for (int32_t s = 0; s < KV_MAX_SEQ; s++) rs->slot_of[s] = -1;
    return 0;
}

void kv_rs_free(kv_cache *kv) {
    if (!kv->rs) return;
    free(kv->rs->mem);
    free(kv->rs->layer_floats);
    free(kv->rs->layer_offset);
    free(kv->rs);
    kv->rs = NULL;
}

bool kv_cache_is_recurrent(const kv_cache *kv) { return kv->rs != NULL; }

bool kv_cache_layer_is_recurrent(const kv_cache *kv, int32_t il) {
    return kv->rs && il >= 0 && il < kv->n_layer && kv->rs->layer_floats[il] > 0;
}

uint64_t kv_cache_rs_bytes(const kv_cache *kv) { return kv->rs ? kv->rs->bytes : 0; }

static float *slot_state(const kv_rs *rs, int32_t il, int32_t slot) {
    return (float *)(void *)((char *)rs->mem + rs->layer_offset[il]) + (size_t)slot * (size_t)rs->layer_floats[il];
}

/* The slot sequence seq lets go of starts from zero for its next holder. */
void kv_rs_release(kv_cache *kv, int32_t seq) {
    kv_rs *rs = kv->rs;
    if (!rs || seq < 0 || seq >= KV_MAX_SEQ || rs->slot_of[seq] < 0) return;
    const int32_t slot = rs->slot_of[seq];
    for (int32_t il = 0; il < kv->n_layer; il++)
        memset(slot_state(rs, il, slot), 0, (size_t)rs->layer_floats[il] * sizeof(float));
    rs->slot_of[seq] = -1;
}

int32_t kv_rs_acquire(kv_cache *kv, int32_t seq) {
    kv_rs *rs = kv->rs;
    if (!rs) return 0;
    if (rs->slot_of[seq] >= 0) return rs->slot_of[seq];
    for (int32_t slot = 0; slot < rs->n_slots; slot++) {
        bool taken = false;
        for (int32_t s = 0; s < KV_MAX_SEQ && !taken; s++) taken = rs->slot_of[s] == slot;
        if (!taken) {
            rs->slot_of[seq] = slot; /* released slots are zero */
            return slot;
        }
    }
    return error_set("sequence %d needs a recurrent state, but all %d are held by other sequences (n_seq_max, "
                     "-np)", seq, rs->n_slots);
}

int32_t kv_cache_rs_slot(const kv_cache *kv) { return kv->rs ? kv->rs->cur_slot : 0; }

graph_tensor *kv_cache_rs_leaf(graph *g, const kv_cache *kv, int32_t il) {
    const kv_rs *rs = kv->rs;
    if (!kv_cache_layer_is_recurrent(kv, il)) return NULL;
    graph_tensor *t = graph_tensor_new_2d(g, TSR_DTYPE_F32, rs->layer_floats[il], rs->n_slots);
    if (!t) return NULL;
    graph_tensor_set_name(t, "rs_cache-%d", il);
    graph_tensor_bind(t, GRAPH_PERSISTENT, -1, NULL, 0, (char *)rs->mem + rs->layer_offset[il]);
    return t;
}

bool kv_cache_rs_root(const kv_cache *kv, const graph_tensor *root) {
    const kv_rs *rs = kv->rs;
    if (!rs || root->t.buffer) return false;
    const char *p = root->t.data, *base = rs->mem;
    return p >= base && p < base + rs->bytes;
}

uint64_t kv_cache_rs_seq_bytes(const kv_cache *kv) {
    if (!kv->rs) return 0;
    uint64_t n = 0;
    for (int32_t il = 0; il < kv->n_layer; il++) n += (uint64_t)kv->rs->layer_floats[il] * sizeof(float);
    return n;
}

bool kv_cache_rs_held(const kv_cache *kv, int32_t seq) {
    return kv->rs && seq >= 0 && seq < KV_MAX_SEQ && kv->rs->slot_of[seq] >= 0;
}

void kv_cache_rs_get(const kv_cache *kv, int32_t seq, void *out) {
    const kv_rs *rs = kv->rs;
    char *o = out;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const size_t n = (size_t)rs->layer_floats[il] * sizeof(float);
        if (rs->slot_of[seq] >= 0) memcpy(o, slot_state(rs, il, rs->slot_of[seq]), n);
        else memset(o, 0, n);
        o += n;
    }
}

int kv_cache_rs_set(kv_cache *kv, int32_t seq, const void *in) {
    const int32_t slot = kv_rs_acquire(kv, seq);
    if (slot < 0) return -1;
    const char *p = in;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        const size_t n = (size_t)kv->rs->layer_floats[il] * sizeof(float);
        memcpy(slot_state(kv->rs, il, slot), p, n);
        p += n;
    }
    return 0;
}

int kv_cache_rs_copy(kv_cache *kv, int32_t src, int32_t dst) {
    if (!kv->rs || src == dst) return 0;
    kv_rs_release(kv, dst);
    if (kv->rs->slot_of[src] < 0) return 0;
    const int32_t slot = kv_rs_acquire(kv, dst);
    if (slot < 0) return -1;
    for (int32_t il = 0; il < kv->n_layer; il++)
        memcpy(slot_state(kv->rs, il, slot), slot_state(kv->rs, il, kv->rs->slot_of[src]),
               (size_t)kv->rs->layer_floats[il] * sizeof(float));
    return 0;
}
