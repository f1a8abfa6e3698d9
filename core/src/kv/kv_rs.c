/*
 * kv_rs — the recurrent state beside the KV cache (see kv.h, "Recurrent
 * state"): one fixed-size state per sequence and recurrent layer, in one of
 * n_seq_max slots, kept where the layer's KV cache is (host memory, or a
 * buffer on its device, so that the graph's SSM nodes and the copy of the
 * next state into the cache stay on that device). A sequence takes a slot
 * when a decode call first gives it tokens and lets it go when it forgets
 * position 0.
 */
#include <stdlib.h>
#include <string.h>

#include "host/host_log.h"
#include "kv/kv_internal.h"
#include "util/error.h"

static uint64_t align64(uint64_t x) { return (x + 63) / 64 * 64; }

static uint64_t layer_bytes(const kv_rs *rs, int32_t il) {
    return (uint64_t)rs->layer_floats[il] * sizeof(float) * (uint64_t)rs->n_slots;
}

/* Layer il's states in a zeroed buffer of dev (host index home). */
static int rs_device_layer(kv_rs *rs, int32_t il, tsr_device *dev, int32_t home) {
    const uint64_t n = layer_bytes(rs, il);
    rs->dev[il] = dev;
    rs->home[il] = home;
    if (dev->api->buffer_alloc(dev, n, &rs->buf[il]) != TSR_OK || !rs->buf[il]) {
        rs->buf[il] = NULL;
        return error_set("kv cache: device %d cannot allocate %.1f KiB of recurrent state for layer %d", home,
                         (double)n / 1024.0, il);
    }
    rs->host[il] = dev->api->buffer_host_ptr ? dev->api->buffer_host_ptr(dev, rs->buf[il]) : NULL;
    if (!rs->host[il]) return kv_device_zero(dev, rs->buf[il], n);
    memset(rs->host[il], 0, (size_t)n);
    return 0;
}

int kv_rs_init(kv_cache *kv, const kv_cache_params *p) {
    if (!p->rs_layer_floats) return 0;
    const int32_t slots = p->rs_slots > 0 ? p->rs_slots : 1;
    if (slots > KV_MAX_SEQ) return error_set("kv cache: %d recurrent-state slots, at most %d", slots, KV_MAX_SEQ);
    kv_rs *rs = calloc(1, sizeof *rs);
    if (!rs) return error_set("kv cache: out of memory");
    kv->rs = rs;
    rs->n_slots = slots;
    const size_t nl = (size_t)p->n_layer;
    rs->layer_floats = calloc(nl, sizeof *rs->layer_floats);
    rs->layer_offset = calloc(nl, sizeof *rs->layer_offset);
    rs->host = calloc(nl, sizeof *rs->host);
    rs->dev = calloc(nl, sizeof *rs->dev);
    rs->buf = calloc(nl, sizeof *rs->buf);
    rs->home = calloc(nl, sizeof *rs->home);
    if (!rs->layer_floats || !rs->layer_offset || !rs->host || !rs->dev || !rs->buf || !rs->home)
        return error_set("kv cache: out of memory");
    uint64_t bytes = 0;
    for (int32_t il = 0; il < p->n_layer; il++) {
        if (p->rs_layer_floats[il] < 0) return error_set("kv cache: layer %d has a negative state size", il);
        rs->layer_floats[il] = p->rs_layer_floats[il];
        rs->home[il] = -1;
        tsr_device *dev = p->layer_device ? p->layer_device[il] : NULL;
        if (dev && rs->layer_floats[il] > 0) continue; /* on the device, below */
        rs->layer_offset[il] = bytes;
        bytes += align64(layer_bytes(rs, il));
    }
    rs->bytes = bytes;
    rs->mem = calloc(1, bytes ? (size_t)bytes : 1);
    if (!rs->mem)
        return error_set("kv cache: cannot allocate %.1f MiB of recurrent state", (double)bytes / (1024.0 * 1024.0));
    for (int32_t il = 0; il < p->n_layer; il++) {
        tsr_device *dev = p->layer_device ? p->layer_device[il] : NULL;
        if (!dev || rs->layer_floats[il] == 0) rs->host[il] = (char *)rs->mem + rs->layer_offset[il];
        else if (rs_device_layer(rs, il, dev, p->layer_home ? p->layer_home[il] : -1) != 0) return -1;
    }
    for (int32_t s = 0; s < KV_MAX_SEQ; s++) rs->slot_of[s] = -1;
    return 0;
}

void kv_rs_free(kv_cache *kv) {
    kv_rs *rs = kv->rs;
    if (!rs) return;
    if (rs->buf)
        for (int32_t il = 0; il < kv->n_layer; il++)
            if (rs->buf[il]) rs->dev[il]->api->buffer_free(rs->dev[il], rs->buf[il]);
    free(rs->mem);
    free(rs->layer_floats);
    free(rs->layer_offset);
    free(rs->host);
    free(rs->dev);
    free(rs->buf);
    free(rs->home);
    free(rs);
    kv->rs = NULL;
}

bool kv_cache_is_recurrent(const kv_cache *kv) { return kv->rs != NULL; }

bool kv_cache_layer_is_recurrent(const kv_cache *kv, int32_t il) {
    return kv->rs && il >= 0 && il < kv->n_layer && kv->rs->layer_floats[il] > 0;
}

uint64_t kv_cache_rs_layer_bytes(const kv_cache *kv, int32_t il) {
    return kv_cache_layer_is_recurrent(kv, il) ? layer_bytes(kv->rs, il) : 0;
}

/* Slot slot's state of layer il: copied out to out, in from in, or zeroed
 * (both NULL); directly where the host reaches it, else through a queue of
 * its device. */
static int slot_io(const kv_rs *rs, int32_t il, int32_t slot, void *out, const void *in) {
    const size_t n = (size_t)rs->layer_floats[il] * sizeof(float);
    const uint64_t off = (uint64_t)slot * n;
    if (n == 0) return 0;
    if (rs->host[il]) {
        char *p = rs->host[il] + off;
        if (out) memcpy(out, p, n);
        else if (in) memcpy(p, in, n);
        else memset(p, 0, n);
        return 0;
    }
    tsr_device *dev = rs->dev[il];
    tsr_queue *q = NULL;
    if (dev->api->queue_create(dev, &q) != TSR_OK || !q)
        return error_set("kv cache: cannot create a queue on device %d for layer %d's state", rs->home[il], il);
    void *zeros = out || in ? NULL : calloc(1, n);
    tsr_status st = TSR_ERR_NO_MEMORY;
    if (out) st = q->api->read(q, rs->buf[il], off, out, n);
    else if (in || zeros) st = q->api->write(q, rs->buf[il], off, in ? in : zeros, n);
    if (st == TSR_OK) st = q->api->synchronize(q);
    q->api->destroy(q);
    free(zeros);
    return st == TSR_OK ? 0
                        : error_set("kv cache: %s layer %d's recurrent state on device %d failed",
                                    out ? "reading" : "writing", il, rs->home[il]);
}

/* The slot sequence seq lets go of starts from zero for its next holder. */
void kv_rs_release(kv_cache *kv, int32_t seq) {
    kv_rs *rs = kv->rs;
    if (!rs || seq < 0 || seq >= KV_MAX_SEQ || rs->slot_of[seq] < 0) return;
    const int32_t slot = rs->slot_of[seq];
    for (int32_t il = 0; il < kv->n_layer; il++)
        if (slot_io(rs, il, slot, NULL, NULL) != 0)
            host_log_printf(TESSERA_LOG_ERROR, "tessera: %s\n", error_get());
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
    graph_tensor_bind(t, GRAPH_PERSISTENT, rs->home[il], rs->buf[il], 0, rs->host[il]);
    return t;
}

bool kv_cache_rs_root(const kv_cache *kv, const graph_tensor *root) {
    const kv_rs *rs = kv->rs;
    if (!rs) return false;
    if (root->t.buffer) {
        for (int32_t il = 0; il < kv->n_layer; il++)
            if (rs->buf[il] && root->t.buffer == rs->buf[il]) return true;
        return false;
    }
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
        if (rs->slot_of[seq] < 0 || slot_io(rs, il, rs->slot_of[seq], o, NULL) != 0) memset(o, 0, n);
        o += n;
    }
}

int kv_cache_rs_set(kv_cache *kv, int32_t seq, const void *in) {
    const int32_t slot = kv_rs_acquire(kv, seq);
    if (slot < 0) return -1;
    const char *p = in;
    for (int32_t il = 0; il < kv->n_layer; il++) {
        if (slot_io(kv->rs, il, slot, NULL, p) != 0) return -1;
        p += (size_t)kv->rs->layer_floats[il] * sizeof(float);
    }
    return 0;
}

int kv_cache_rs_copy(kv_cache *kv, int32_t src, int32_t dst) {
    if (!kv->rs || src == dst) return 0;
    kv_rs_release(kv, dst);
    if (kv->rs->slot_of[src] < 0) return 0;
    const int32_t slot = kv_rs_acquire(kv, dst);
    if (slot < 0) return -1;
    kv_rs *rs = kv->rs;
    int rc = 0;
    for (int32_t il = 0; il < kv->n_layer && rc == 0; il++) {
        void *tmp = malloc((size_t)rs->layer_floats[il] * sizeof(float) + 1);
        if (!tmp) return error_set("kv cache: out of memory");
        rc = slot_io(rs, il, rs->slot_of[src], tmp, NULL);
        if (rc == 0) rc = slot_io(rs, il, slot, NULL, tmp);
        free(tmp);
    }
    return rc;
}
