#include "kv/kv.h"

#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "tensor/dtype.h"
#include "util/error.h"

/* The cache types are FLASH_ATTN's k/v types. */
bool kv_dtype_supported(int32_t dtype) { return tsr_flash_attn_kv_dtype(dtype) != 0; }

uint64_t kv_row_bytes(int32_t dtype, int64_t n) { return dtype_row_bytes(dtype, n); }

uint64_t kv_cache_layer_k_bytes(const kv_cache *kv) {
    return kv_row_bytes(kv->dtype_k, kv->n_embd_k) * (uint64_t)kv->n_ctx;
}

uint64_t kv_cache_layer_v_bytes(const kv_cache *kv) {
    return kv_row_bytes(kv->dtype_v, kv->n_embd_v) * (uint64_t)kv->n_ctx;
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

/* Device memory starts zeroed too: empty cells are masked, but 0 * NaN from
 * uninitialised bytes would still poison the V product. */
static int kv_device_zero(tsr_device *dev, tsr_buffer *buf, uint64_t size) {
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
    kv->layers = calloc((size_t)p->n_layer, sizeof *kv->layers);
    kv->cell_pos = malloc((size_t)p->n_ctx * sizeof *kv->cell_pos);
    kv->cell_seq = calloc((size_t)p->n_ctx, sizeof *kv->cell_seq);
    if (!kv->layers || !kv->cell_pos || !kv->cell_seq) goto oom;
    for (int32_t i = 0; i < p->n_ctx; i++) kv->cell_pos[i] = -1;

    uint64_t k_bytes = kv_cache_layer_k_bytes(kv), v_bytes = kv_cache_layer_v_bytes(kv);
    uint64_t layer_bytes = align_up(k_bytes, 64) + align_up(v_bytes, 64);
    int32_t n_host = 0;
    for (int32_t il = 0; il < p->n_layer; il++)
        if (!p->layer_device || !p->layer_device[il]) n_host++;
    if (n_host > 0) {
        kv->host_mem = aligned_alloc(64, layer_bytes * (uint64_t)n_host);
        if (!kv->host_mem) {
            error_set("kv cache: cannot allocate %.1f MiB of host memory",
                      (double)(layer_bytes * (uint64_t)n_host) / (1024.0 * 1024.0));
            goto fail;
        }
        memset(kv->host_mem, 0, layer_bytes * (uint64_t)n_host);
    }
    int32_t host_i = 0;
    for (int32_t il = 0; il < p->n_layer; il++) {
        kv_layer *L = &kv->layers[il];
        tsr_device *dev = p->layer_device ? p->layer_device[il] : NULL;
        if (!dev) {
            char *base = (char *)kv->host_mem + layer_bytes * (uint64_t)host_i++;
            L->home_device = -1;
            L->k_data = base;
            L->v_data = base + align_up(k_bytes, 64);
            continue;
        }
        L->home_device = p->layer_home ? p->layer_home[il] : -1;
        L->device = dev;
        if (dev->api->buffer_alloc(dev, layer_bytes, &L->buffer) != TSR_OK || !L->buffer) {
            L->buffer = NULL;
            error_set("kv cache: device %d cannot allocate %.1f MiB for layer %d", L->home_device,
                      (double)layer_bytes / (1024.0 * 1024.0), il);
            goto fail;
        }
        L->k_offset = 0;
        L->v_offset = align_up(k_bytes, 64);
        char *host = dev->api->buffer_host_ptr ? dev->api->buffer_host_ptr(dev, L->buffer) : NULL;
        if (host) {
            memset(host, 0, layer_bytes);
            L->k_data = host;
            L->v_data = host + L->v_offset;
        } else if (kv_device_zero(dev, L->buffer, layer_bytes) != 0) {
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
    free(kv->host_mem);
    free(kv->layers);
    free(kv->cell_pos);
    free(kv->cell_seq);
    free(kv);
}

uint64_t kv_cache_nbytes(const kv_cache *kv) {
    return (kv_cache_layer_k_bytes(kv) + kv_cache_layer_v_bytes(kv)) * (uint64_t)kv->n_layer;
}

static graph_tensor *kv_leaf(graph *g, const kv_cache *kv, int32_t il, bool is_k) {
    const kv_layer *L = &kv->layers[il];
    graph_tensor *t = is_k             ? graph_tensor_new_2d(g, kv->dtype_k, kv->n_embd_k, kv->n_ctx)
                      : kv->flash_attn ? graph_tensor_new_2d(g, kv->dtype_v, kv->n_embd_v, kv->n_ctx)
                                       : graph_tensor_new_2d(g, kv->dtype_v, kv->n_ctx, kv->n_embd_v);
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

int32_t kv_cache_seq_len(const kv_cache *kv) {
    int32_t len = 0;
    for (int32_t i = 0; i < kv->n_ctx; i++)
        if ((kv->cell_seq[i] & 1) && kv->cell_pos[i] + 1 > len) len = kv->cell_pos[i] + 1;
    return len;
}

void kv_cache_seq_truncate(kv_cache *kv, int32_t pos) {
    if (pos < 0) pos = 0;
    for (int32_t i = 0; i < kv->n_ctx; i++)
        if ((kv->cell_seq[i] & 1) && kv->cell_pos[i] >= pos) {
            kv->cell_seq[i] &= ~(uint64_t)1;
            if (!kv->cell_seq[i]) kv->cell_pos[i] = -1;
        }
}
