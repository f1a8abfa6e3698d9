#include "kv/kv_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <tessera/plugin_check.h>

#include "tensor/dtype.h"
#include "util/error.h"

/* The cache types are FLASH_ATTN's k/v types. */
bool kv_dtype_supported(int32_t dtype) { return tsr_flash_attn_kv_dtype(dtype) != 0; }

uint64_t kv_row_bytes(int32_t dtype, int64_t n) { return dtype_row_bytes(dtype, n); }

static int32_t kv_layer_cells(const kv_cache *kv, int32_t il) { return kv->sets[kv->layers[il].set].size; }

/* A recurrent layer has no attention, so no K/V (llama.cpp's hybrid memory
 * likewise gives K/V to the attention layers alone). */
bool kv_cache_layer_has_kv(const kv_cache *kv, int32_t il) { return !kv_cache_layer_is_recurrent(kv, il); }

int32_t kv_cache_n_layer_kv(const kv_cache *kv) {
    int32_t n = 0;
    for (int32_t il = 0; il < kv->n_layer; il++) n += kv_cache_layer_has_kv(kv, il);
    return n;
}

uint64_t kv_cache_layer_k_bytes(const kv_cache *kv, int32_t il) {
    if (!kv_cache_layer_has_kv(kv, il)) return 0;
    return kv_row_bytes(kv->dtype_k, kv->n_embd_k) * (uint64_t)kv_layer_cells(kv, il);
}

uint64_t kv_cache_layer_v_bytes(const kv_cache *kv, int32_t il) {
    if (!kv_cache_layer_has_kv(kv, il)) return 0;
    const int32_t cells = kv_layer_cells(kv, il);
    return kv_row_bytes(kv->dtype_v, kv->n_embd_v) * (uint64_t)(kv->flash_attn ? cells : kv_v_row_cells(cells));
}

/* One cache's type against its row width: a known type, whole blocks per row
 * (and per head: the attention views split rows into heads of head_dim), and
 * a transposed V only of a plain type. */
static int kv_check_dtype(const char *which, int32_t dtype, int32_t n_embd, int32_t head_dim, bool trans) {
    if (!kv_dtype_supported(dtype))
        return error_set("kv cache: %s type %s is not a cache type (f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, "
                         "q5_1, iq4_nl)", which, dtype_name(dtype));
    const int64_t bs = tsr_dtype_block_size(dtype);
    if (n_embd % bs != 0 || (head_dim > 0 && head_dim % bs != 0))
        return error_set("kv cache: %s type %s needs a head size that is a multiple of %lld (it is %d)", which,
                         dtype_name(dtype), (long long)bs, head_dim > 0 ? head_dim : n_embd);
    if (trans && bs != 1)
        return error_set("kv cache: a quantized V cache (%s) needs flash attention (-fa on)", dtype_name(dtype));
    return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint64_t kv_layer_bytes(const kv_cache *kv, int32_t il) {
    return align_up(kv_cache_layer_k_bytes(kv, il), 64) + align_up(kv_cache_layer_v_bytes(kv, il), 64);
}

static int kv_cells_init(kv_cells *c, int32_t size, int32_t n_swa) {
    c->size = size;
    c->n_swa = n_swa;
    c->pos = malloc((size_t)size * sizeof *c->pos);
    c->seq = calloc((size_t)size, sizeof *c->seq);
    if (!c->pos || !c->seq) return -1;
    for (int32_t i = 0; i < size; i++) c->pos[i] = -1;
    for (int32_t s = 0; s < KV_MAX_SEQ; s++) c->dropped[s] = -1;
    return 0;
}

/* Device memory starts zeroed too: empty cells are masked, but 0 * NaN from
 * uninitialised bytes would still poison the V product. */
int kv_device_zero(tsr_device *dev, tsr_buffer *buf, uint64_t size) {
    tsr_queue *q = NULL;
    if (dev->api->queue_create(dev, &q) != TSR_OK) return error_set("kv cache: cannot create a queue");
    enum { CHUNK = 1 << 20 };
    void *zeros = calloc(1, CHUNK);
    int rc = zeros ? 0 : error_set("kv cache: out of memory");
    for (uint64_t off = 0; rc == 0 && off < size; off += CHUNK) {
        uint64_t n = size - off < CHUNK ? size - off : CHUNK;
        if (q->api->write(q, buf, off, zeros, n) != TSR_OK) rc = error_set("kv cache: device write failed");
    }
    if (rc == 0 && q->api->synchronize(q) != TSR_OK) rc = error_set("kv cache: device synchronize failed");
    free(zeros);
    q->api->destroy(q);
    return rc;
}

/* Which caches are rotated, and H when one is. */
static int kv_rot_init(kv_cache *kv, kv_rotation rotation) {
    if ((unsigned)rotation > KV_ROT_ON) return error_set("kv cache: rotation %d is not auto, off or on", (int)rotation);
    kv->rot_k = rotation == KV_ROT_ON || (rotation == KV_ROT_AUTO && tsr_dtype_block_size(kv->dtype_k) > 1);
    kv->rot_v = rotation == KV_ROT_ON || (rotation == KV_ROT_AUTO && tsr_dtype_block_size(kv->dtype_v) > 1);
    if (!kv->rot_k && !kv->rot_v) return 0;
    if (kv->head_dim <= 0 || kv->n_embd_k % kv->head_dim != 0 || kv->n_embd_v % kv->head_dim != 0)
        return error_set("kv cache: rotating the cached heads needs a head size that divides the rows (head size "
                         "%d, K rows %d, V rows %d)", kv->head_dim, kv->n_embd_k, kv->n_embd_v);
    kv->rot = malloc((size_t)kv->head_dim * (size_t)kv->head_dim * sizeof *kv->rot);
    if (!kv->rot) return error_set("kv cache: out of memory");
    kv_rot_fill(kv->rot, kv->head_dim);
    return 0;
}

/* One mapping for the K/V of every layer kept in host memory. Fresh
 * anonymous pages read as zero (empty cells must hold finite values:
 * masked scores still multiply V) and take no memory until a cell is
 * written, so a long context costs what it holds. */
static int kv_host_map(kv_cache *kv, const kv_cache_params *p) {
    uint64_t host_bytes = 0;
    for (int32_t il = 0; il < p->n_layer; il++)
        if (!p->layer_device || !p->layer_device[il]) host_bytes += kv_layer_bytes(kv, il);
    if (host_bytes == 0) return 0;
    kv->host_bytes = host_bytes;
    void *mem = mmap(NULL, (size_t)host_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    kv->host_mem = mem == MAP_FAILED ? NULL : mem;
    if (!kv->host_mem)
        return error_set("kv cache: cannot allocate %.1f MiB of host memory", (double)host_bytes / (1024.0 * 1024.0));
    return 0;
}

/* Layer il's K then V in a zeroed buffer of device dev (host index home). */
static int kv_device_layer(kv_cache *kv, int32_t il, tsr_device *dev, int32_t home) {
    kv_layer *L = &kv->layers[il];
    const uint64_t layer_bytes = kv_layer_bytes(kv, il);
    L->home_device = home; /* a recurrent layer's too: its state lives there (kv_rs.c) */
    L->device = dev;
    if (layer_bytes == 0) return 0;
    if (dev->api->buffer_alloc(dev, layer_bytes, &L->buffer) != TSR_OK || !L->buffer) {
        L->buffer = NULL;
        return error_set("kv cache: device %d cannot allocate %.1f MiB for layer %d", L->home_device,
                         (double)layer_bytes / (1024.0 * 1024.0), il);
    }
    L->k_offset = 0;
    L->v_offset = align_up(kv_cache_layer_k_bytes(kv, il), 64);
    char *host = dev->api->buffer_host_ptr ? dev->api->buffer_host_ptr(dev, L->buffer) : NULL;
    if (!host) return kv_device_zero(dev, L->buffer, layer_bytes);
    memset(host, 0, layer_bytes);
    L->k_data = host;
    L->v_data = host + L->v_offset;
    return 0;
}

kv_cache *kv_cache_new(const kv_cache_params *p) {
    if (p->n_layer <= 0 || p->n_ctx <= 0 || p->n_embd_k <= 0 || p->n_embd_v <= 0) {
        error_set("kv cache: bad size (%d layers, %d cells, k %d, v %d)", p->n_layer, p->n_ctx,
                  p->n_embd_k, p->n_embd_v);
        return NULL;
    }
    if (kv_check_dtype("K", p->dtype_k, p->n_embd_k, p->head_dim, false) != 0 ||
        kv_check_dtype("V", p->dtype_v, p->n_embd_v, p->head_dim, !p->flash_attn) != 0)
        return NULL;
    kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) goto oom;
    kv->n_layer = p->n_layer;
    kv->n_ctx = p->n_ctx;
    kv->n_embd_k = p->n_embd_k;
    kv->n_embd_v = p->n_embd_v;
    kv->dtype_k = p->dtype_k;
    kv->dtype_v = p->dtype_v;
    kv->flash_attn = p->flash_attn;
    kv->head_dim = p->head_dim > 0 ? p->head_dim : 0;
    kv->n_swa = p->n_swa > 0 ? p->n_swa : 0;
    if (kv_rot_init(kv, p->rotation) != 0) goto fail;
    kv->layers = calloc((size_t)p->n_layer, sizeof *kv->layers);
    if (!kv->layers) goto oom;
    kv->n_sets = 1;
    if (kv_cells_init(&kv->sets[0], p->n_ctx, 0) != 0) goto oom;
    if (p->layer_swa && p->n_swa > 0 && p->n_cells_swa > 0 && p->n_cells_swa < p->n_ctx) {
        kv->n_sets = 2;
        if (kv_cells_init(&kv->sets[1], p->n_cells_swa, p->n_swa) != 0) goto oom;
        for (int32_t il = 0; il < p->n_layer; il++) kv->layers[il].set = p->layer_swa[il] ? 1 : 0;
    }

    if (kv_rs_init(kv, p) != 0) goto fail;
    if (kv_host_map(kv, p) != 0) goto fail;
    uint64_t host_off = 0;
    for (int32_t il = 0; il < p->n_layer; il++) {
        tsr_device *dev = p->layer_device ? p->layer_device[il] : NULL;
        if (!dev) {
            kv_layer *L = &kv->layers[il];
            char *base = (char *)kv->host_mem + host_off;
            host_off += kv_layer_bytes(kv, il);
            L->home_device = -1;
            if (!kv_cache_layer_has_kv(kv, il)) continue;
            L->k_data = base;
            L->v_data = base + align_up(kv_cache_layer_k_bytes(kv, il), 64);
        } else if (kv_device_layer(kv, il, dev, p->layer_home ? p->layer_home[il] : -1) != 0) {
            goto fail;
        }
    }
    return kv;
oom:
    error_set("kv cache: out of memory");
fail:
    kv_cache_free(kv);
    return NULL;
}

void kv_cache_free(kv_cache *kv) {
    if (!kv) return;
    if (kv->layers)
        for (int32_t il = 0; il < kv->n_layer; il++) {
            kv_layer *L = &kv->layers[il];
            if (L->buffer) L->device->api->buffer_free(L->device, L->buffer);
        }
    if (kv->host_mem) munmap(kv->host_mem, (size_t)kv->host_bytes);
    kv_rs_free(kv);
    free(kv->rot);
    free(kv->layers);
    for (int32_t s = 0; s < KV_MAX_SETS; s++) {
        free(kv->sets[s].pos);
        free(kv->sets[s].seq);
    }
    free(kv);
}

uint64_t kv_cache_nbytes(const kv_cache *kv) {
    uint64_t n = 0;
    for (int32_t il = 0; il < kv->n_layer; il++) n += kv_cache_layer_k_bytes(kv, il) + kv_cache_layer_v_bytes(kv, il);
    return n;
}

static graph_tensor *kv_leaf(graph *g, const kv_cache *kv, int32_t il, bool is_k) {
    const kv_layer *L = &kv->layers[il];
    if (!kv_cache_layer_has_kv(kv, il)) {
        error_set("kv cache: layer %d is recurrent and has no %s cache", il, is_k ? "K" : "V");
        return NULL;
    }
    const int32_t cells = kv_layer_cells(kv, il);
    graph_tensor *t = is_k             ? graph_tensor_new_2d(g, kv->dtype_k, kv->n_embd_k, cells)
                      : kv->flash_attn ? graph_tensor_new_2d(g, kv->dtype_v, kv->n_embd_v, cells)
                                       : graph_tensor_new_2d(g, kv->dtype_v, kv_v_row_cells(cells), kv->n_embd_v);
    if (!t) return NULL;
    graph_tensor_set_name(t, "%s_cache-%d", is_k ? "k" : "v", il);
    graph_tensor_bind(t, GRAPH_PERSISTENT, L->home_device, L->buffer,
                      is_k ? L->k_offset : L->v_offset, is_k ? L->k_data : L->v_data);
    return t;
}

graph_tensor *kv_cache_k_leaf(graph *g, const kv_cache *kv, int32_t il) {
    return kv_leaf(g, kv, il, true);
}

graph_tensor *kv_cache_v_leaf(graph *g, const kv_cache *kv, int32_t il) {
    return kv_leaf(g, kv, il, false);
}

graph_tensor *kv_cache_rot_leaf(graph *g, const kv_cache *kv) {
    if (!kv->rot) return NULL;
    graph_tensor *t = graph_tensor_new_2d(g, TSR_DTYPE_F32, kv->head_dim, kv->head_dim);
    if (!t) return NULL;
    graph_tensor_set_name(t, "kv_rot");
    /* persistent, not a weight: the products follow their activations'
     * device, which gets a copy */
    graph_tensor_bind(t, GRAPH_PERSISTENT, -1, NULL, 0, kv->rot);
    return t;
}

/* ------------------------------------------------------------ cell sets */

int32_t kv_cache_swa_set(const kv_cache *kv) { return kv->n_sets > 1 ? 1 : 0; }

int32_t kv_cache_seq_len(const kv_cache *kv, int32_t seq) {
    const kv_cells *c = &kv->sets[0]; /* set 0 keeps every position */
    const uint64_t bit = (uint64_t)1 << seq;
    int32_t len = 0;
    for (int32_t i = 0; i < c->size; i++)
        if ((c->seq[i] & bit) && c->pos[i] + 1 > len) len = c->pos[i] + 1;
    return len;
}

void kv_cells_forget(kv_cells *c, int32_t seq, int32_t pos) {
    const uint64_t bit = (uint64_t)1 << seq;
    for (int32_t i = 0; i < c->size; i++)
        if ((c->seq[i] & bit) && c->pos[i] >= pos) {
            c->seq[i] &= ~bit;
            if (!c->seq[i]) c->pos[i] = -1;
        }
    if (pos == 0) c->dropped[seq] = -1;
}

int32_t kv_cache_seq_forget(kv_cache *kv, int32_t seq, int32_t pos) {
    if (pos < 0) pos = 0;
    /* The token at pos sees positions > pos - n_swa: all must still be held. */
    for (int32_t s = 0; s < kv->n_sets; s++)
        if (kv->sets[s].n_swa > 0 && pos > 0 && kv->sets[s].dropped[seq] >= 0 &&
            kv->sets[s].dropped[seq] > pos - kv->sets[s].n_swa)
            pos = 0;
    /* A recurrent state cannot be rolled back part way: all of it goes. */
    if (kv_cache_rs_held(kv, seq) && pos < kv_cache_seq_len(kv, seq)) pos = 0;
    for (int32_t s = 0; s < kv->n_sets; s++) kv_cells_forget(&kv->sets[s], seq, pos);
    if (pos == 0) kv_rs_release(kv, seq);
    return pos;
}

int32_t kv_cells_used(const kv_cells *c) {
    int32_t n = 0;
    for (int32_t j = 0; j < c->size; j++) n += c->seq[j] != 0;
    return n;
}

int32_t kv_cells_n_kv(const kv_cells *c) {
    for (int32_t j = c->size - 1; j >= 0; j--)
        if (c->seq[j]) return j + 1;
    return 0;
}

static void kv_cells_clear(kv_cells *c, int32_t head, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        c->pos[head + i] = -1;
        c->seq[head + i] = 0;
    }
}

/* Cells after the last used one are not attended to, but holes below it are:
 * every token of a step computes attention over all n_kv cells. Sequences
 * finishing at different times leave holes, so n_kv would creep up to the
 * set's size; moving the used cells down keeps it near the cells in use.
 * Done in place (the decode calls are synchronous, nothing is computing
 * meanwhile). K rows are contiguous per cell, and V's unless it is
 * transposed (a cell is then one element per row). */
static void kv_set_compact(kv_cache *kv, int32_t set) {
    kv_cells *c = &kv->sets[set];
    int32_t used = kv_cells_used(c), n_kv = kv_cells_n_kv(c);
    int32_t slack = used / 4 > 64 ? used / 4 : 64;
    if (n_kv - used <= slack) return;
    for (int32_t il = 0; il < kv->n_layer; il++)
        if (kv->layers[il].set == set && kv_cache_layer_has_kv(kv, il) &&
            (!kv->layers[il].k_data || !kv->layers[il].v_data))
            return;
    const size_t k_row = kv_row_bytes(kv->dtype_k, kv->n_embd_k);
    const size_t v_cell = kv->flash_attn ? kv_row_bytes(kv->dtype_v, kv->n_embd_v) : kv_row_bytes(kv->dtype_v, 1);
    const size_t v_row = kv_row_bytes(kv->dtype_v, kv_v_row_cells(c->size));
    int32_t dst = 0;
    for (int32_t j = 0; j < n_kv; j++) {
        if (!c->seq[j]) continue;
        if (j != dst) {
            for (int32_t il = 0; il < kv->n_layer; il++) {
                if (kv->layers[il].set != set || !kv_cache_layer_has_kv(kv, il)) continue;
                char *k = kv->layers[il].k_data, *v = kv->layers[il].v_data;
                memcpy(k + (size_t)dst * k_row, k + (size_t)j * k_row, k_row);
                if (kv->flash_attn) memcpy(v + (size_t)dst * v_cell, v + (size_t)j * v_cell, v_cell);
                else
                    for (int32_t r = 0; r < kv->n_embd_v; r++)
                        memcpy(v + (size_t)r * v_row + (size_t)dst * v_cell, v + (size_t)r * v_row + (size_t)j * v_cell,
                               v_cell);
            }
            c->seq[dst] = c->seq[j];
            c->pos[dst] = c->pos[j];
            kv_cells_clear(c, j, 1);
        }
        dst++;
    }
}

/* A sliding-window set is left as it is: its size bounds what attention
 * reads, and its dropping frees low cells again and again. */
void kv_cache_compact(kv_cache *kv) { kv_set_compact(kv, 0); }

/* Positions [p0, p0 + n) of seq go; later ones move down by n. */
static void kv_cells_shift(kv_cells *c, int32_t seq, int32_t p0, int32_t n, int32_t *delta) {
    const uint64_t bit = (uint64_t)1 << seq;
    for (int32_t j = 0; j < c->size; j++) {
        if (delta) delta[j] = 0;
        if (!(c->seq[j] & bit) || c->pos[j] < p0) continue;
        if (c->pos[j] < p0 + n) {
            c->seq[j] &= ~bit;
            if (!c->seq[j]) c->pos[j] = -1;
            continue;
        }
        c->pos[j] -= n;
        if (delta) delta[j] = -n;
    }
    /* Dropped positions moved with the rest; dropped ones among those that
     * went leave at most everything below p0 dropped. */
    int32_t *d = &c->dropped[seq];
    if (*d >= p0 + n) *d -= n;
    else if (*d >= p0) *d = p0 - 1;
}

int kv_cache_seq_shift(kv_cache *kv, int32_t seq, int32_t p0, int32_t n, int32_t *const *delta) {
    const uint64_t bit = (uint64_t)1 << seq;
    if (kv->rs)
        return error_set("context shift: sequence %d has a recurrent state, which holds everything before it and "
                         "cannot drop positions from its middle", seq);
    for (int32_t s = 0; s < kv->n_sets; s++)
        for (int32_t j = 0; j < kv->sets[s].size; j++)
            if ((kv->sets[s].seq[j] & bit) && kv->sets[s].seq[j] != bit && kv->sets[s].pos[j] >= p0)
                return error_set("context shift: cell %d of sequence %d is shared with another sequence", j, seq);
    for (int32_t s = 0; s < kv->n_sets; s++) kv_cells_shift(&kv->sets[s], seq, p0, n, delta ? delta[s] : NULL);
    return 0;
}

/* The cells of seq holding a position in [p0, p1) of set 0 take
 * move(pos); delta[0][j] (one int per cell) gets how far cell j moved. */
static int kv_cache_seq_move(kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t add, int32_t div,
                             int32_t *const *delta, const char *what) {
    if (kv->rs) /* Self-Extend regroups attention positions; a state has none to regroup */
        return error_set("%s: sequence %d has a recurrent state, which holds everything before it and whose "
                         "positions cannot move", what, seq);
    if (kv->n_sets > 1)
        return error_set("%s: the cache has a sliding-window cell set, whose dropped positions cannot move", what);
    const uint64_t bit = (uint64_t)1 << seq;
    kv_cells *c = &kv->sets[0];
    for (int32_t j = 0; j < c->size; j++)
        if ((c->seq[j] & bit) && c->seq[j] != bit && c->pos[j] >= p0 && c->pos[j] < p1)
            return error_set("%s: cell %d of sequence %d is shared with another sequence", what, j, seq);
    for (int32_t j = 0; j < c->size; j++) {
        delta[0][j] = 0;
        if (!(c->seq[j] & bit) || c->pos[j] < p0 || c->pos[j] >= p1) continue;
        const int32_t to = div > 1 ? c->pos[j] / div : c->pos[j] + add;
        if (to < 0) { /* moved before the start: forgotten (llama.cpp's seq_add too) */
            c->seq[j] &= ~bit;
            if (!c->seq[j]) c->pos[j] = -1;
            continue;
        }
        delta[0][j] = to - c->pos[j];
        c->pos[j] = to;
    }
    return 0;
}

int kv_cache_seq_add(kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t d, int32_t *const *delta) {
    return kv_cache_seq_move(kv, seq, p0, p1, d, 1, delta, "position add");
}

int kv_cache_seq_div(kv_cache *kv, int32_t seq, int32_t p0, int32_t p1, int32_t d, int32_t *const *delta) {
    return kv_cache_seq_move(kv, seq, p0, p1, 0, d, delta, "position divide");
}
