/*
 * kv_cells — copy the K/V bytes of chosen cells out of and into the cache,
 * for saved state. The layout knowledge stays here: a cell's K is one
 * contiguous row; its V is one too when V is stored like K (flash_attn),
 * else one element in each of the n_embd_v rows of the transposed V (a
 * plain type then). Either way a cell's V is packed as one row, so a state
 * moves between the two layouts. Layers in device memory the host cannot address go through
 * the device queue's read/write (whole layer read, patched, written back).
 */
#include <stdlib.h>
#include <string.h>

#include "kv/kv.h"
#include "util/error.h"

uint64_t kv_cache_cell_k_bytes(const kv_cache *kv) { return kv_row_bytes(kv->dtype_k, kv->n_embd_k); }
uint64_t kv_cache_cell_v_bytes(const kv_cache *kv) { return kv_row_bytes(kv->dtype_v, kv->n_embd_v); }

/* Copy cell c's V between the cache's layer memory v and a packed row. */
static void cell_v_copy(const kv_cache *kv, int32_t il, char *v, int32_t cell, char *row, bool to_cache) {
    const uint64_t vr = kv_cache_cell_v_bytes(kv);
    if (kv->flash_attn) {
        if (to_cache) memcpy(v + (uint64_t)cell * vr, row, vr);
        else memcpy(row, v + (uint64_t)cell * vr, vr);
        return;
    }
    const uint64_t es = kv_row_bytes(kv->dtype_v, 1);
    const uint64_t stride = (uint64_t)kv_v_row_cells(kv->sets[kv->layers[il].set].size) * es;
    for (int32_t r = 0; r < kv->n_embd_v; r++) {
        char *at = v + (uint64_t)r * stride + (uint64_t)cell * es;
        if (to_cache) memcpy(at, row + (uint64_t)r * es, es);
        else memcpy(row + (uint64_t)r * es, at, es);
    }
}

/* Host addresses of layer il's K and V: the cache's own when host-visible,
 * else *scratch (allocated here) filled from the device. */
static int layer_map(const kv_cache *kv, int32_t il, bool fill, char **k, char **v, char **scratch,
                     tsr_queue **q) {
    const kv_layer *L = &kv->layers[il];
    *scratch = NULL;
    *q = NULL;
    if (L->k_data && L->v_data) {
        *k = L->k_data;
        *v = L->v_data;
        return 0;
    }
    uint64_t kb = kv_cache_layer_k_bytes(kv, il), vb = kv_cache_layer_v_bytes(kv, il);
    *scratch = malloc(kb + vb);
    if (!*scratch) return error_set("kv cache: out of memory for layer %d (%llu bytes)", il,
                                    (unsigned long long)(kb + vb));
    if (L->device->api->queue_create(L->device, q) != TSR_OK || !*q) {
        *q = NULL;
        free(*scratch);
        *scratch = NULL;
        return error_set("kv cache: cannot create a queue on the device of layer %d", il);
    }
    *k = *scratch;
    *v = *scratch + kb;
    if (!fill) return 0;
    tsr_queue *qq = *q;
    if (qq->api->read(qq, L->buffer, L->k_offset, *k, kb) != TSR_OK ||
        qq->api->read(qq, L->buffer, L->v_offset, *v, vb) != TSR_OK || qq->api->synchronize(qq) != TSR_OK)
        return error_set("kv cache: reading layer %d from its device failed", il);
    return 0;
}

static void layer_unmap(char *scratch, tsr_queue *q) {
    if (q) q->api->destroy(q);
    free(scratch);
}

/* Copy the K/V of cells[0..n) of layer il between the cache and the packed
 * arrays k_buf/v_buf, into the cache when to_cache (then written back to a
 * device that is not host-addressable). */
static int cells_copy(const kv_cache *kv, int32_t il, const int32_t *cells, int32_t n, char *k_buf, char *v_buf,
                      bool to_cache) {
    if (!kv_cache_layer_has_kv(kv, il)) { /* a recurrent layer has no K/V: it reads as zeros */
        if (!to_cache) {
            memset(k_buf, 0, (size_t)n * kv_cache_cell_k_bytes(kv));
            memset(v_buf, 0, (size_t)n * kv_cache_cell_v_bytes(kv));
        }
        return 0;
    }
    char *k = NULL, *v = NULL, *scratch = NULL;
    tsr_queue *q = NULL;
    int rc = layer_map(kv, il, true, &k, &v, &scratch, &q);
    if (rc == 0) {
        const uint64_t kr = kv_cache_cell_k_bytes(kv), vr = kv_cache_cell_v_bytes(kv);
        for (int32_t c = 0; c < n; c++) {
            char *in_cache = k + (uint64_t)cells[c] * kr, *packed = k_buf + (uint64_t)c * kr;
            memcpy(to_cache ? in_cache : packed, to_cache ? packed : in_cache, kr);
            cell_v_copy(kv, il, v, cells[c], v_buf + (uint64_t)c * vr, to_cache);
        }
    }
    if (rc == 0 && q && to_cache) {
        const kv_layer *L = &kv->layers[il];
        uint64_t kb = kv_cache_layer_k_bytes(kv, il), vb = kv_cache_layer_v_bytes(kv, il);
        if (q->api->write(q, L->buffer, L->k_offset, k, kb) != TSR_OK ||
            q->api->write(q, L->buffer, L->v_offset, v, vb) != TSR_OK || q->api->synchronize(q) != TSR_OK)
            rc = error_set("kv cache: writing layer %d to its device failed", il);
    }
    layer_unmap(scratch, q);
    return rc;
}

int kv_cache_cells_get(const kv_cache *kv, int32_t il, const int32_t *cells, int32_t n, void *k_out,
                       void *v_out) {
    return cells_copy(kv, il, cells, n, k_out, v_out, false);
}

int kv_cache_cells_set(kv_cache *kv, int32_t il, const int32_t *cells, int32_t n, const void *k_in,
                       const void *v_in) {
    /* (the packed arrays are only read when copying into the cache) */
    return cells_copy(kv, il, cells, n, (char *)(uintptr_t)k_in, (char *)(uintptr_t)v_in, true);
}
