/*
 * host_weights — weights into device buffers that fit the device's limits.
 * See host_weights.h.
 */
#include "host/host_weights.h"

#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "util/error.h"

/* Plain bytes of a contiguous weight. */
static uint64_t plain_size(const tsr_tensor *t) {
    uint64_t rows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    return tsr_dtype_row_bytes(t->dtype, t->ne[0]) * rows;
}

static uint64_t device_size(host_device *d, const host_weight *w) {
    const tsr_device_api *api = d->dev->api;
    uint64_t n = 0;
    if (TSR_HAS_FIELD(tsr_device_api, api->struct_size, weight_size) && api->weight_size)
        n = api->weight_size(d->dev, &w->t);
    return n ? n : plain_size(&w->t);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void host_weights_free(host_device *d, host_weight_set *set) {
    for (int32_t i = 0; i < set->n_buffers; i++)
        if (set->buffers[i] && d->dev->api->buffer_free) d->dev->api->buffer_free(d->dev, set->buffers[i]);
    free(set->buffers);
    free(set->sizes);
    memset(set, 0, sizeof *set);
}

int host_weights_alloc(host_device *d, host_weight *w, int32_t n, host_weight_set *set) {
    memset(set, 0, sizeof *set);
    if (host_device_open(d)) return -1;
    const uint64_t limit = host_device_max_alloc(d), align = host_device_alignment(d);
    /* First pass: offsets, opening a new buffer when the next weight would
     * cross the limit. Buffers are counted, then sized. */
    int32_t cur = 0;
    uint64_t top = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *name = w[i].name ? w[i].name : "?";
        if (!tsr_tensor_is_contiguous(&w[i].t) || plain_size(&w[i].t) == 0)
            return error_set("device %s: weight '%s' is not a contiguous %s tensor", d->name, name,
                             tsr_dtype_name(w[i].t.dtype));
        w[i].size = device_size(d, &w[i]);
        if (limit && w[i].size > limit)
            return error_set("device %s: weight '%s' needs %llu bytes, above the device's largest "
                             "allocation (%llu bytes)",
                             d->name, name, (unsigned long long)w[i].size, (unsigned long long)limit);
        uint64_t at = align_up(top, align);
        if (limit && top > 0 && at + w[i].size > limit) {
            cur++;
            at = 0;
        }
        w[i].buffer = cur;
        w[i].offset = at;
        top = at + w[i].size;
    }
    set->n_buffers = n > 0 ? cur + 1 : 0;
    set->buffers = calloc((size_t)(set->n_buffers ? set->n_buffers : 1), sizeof *set->buffers);
    set->sizes = calloc((size_t)(set->n_buffers ? set->n_buffers : 1), sizeof *set->sizes);
    if (!set->buffers || !set->sizes) {
        host_weights_free(d, set);
        return error_set("device %s: out of memory planning weight buffers", d->name);
    }
    for (int32_t i = 0; i < n; i++)
        if (w[i].offset + w[i].size > set->sizes[w[i].buffer]) set->sizes[w[i].buffer] = w[i].offset + w[i].size;
    for (int32_t b = 0; b < set->n_buffers; b++) {
        tsr_status st = d->dev->api->buffer_alloc(d->dev, set->sizes[b], &set->buffers[b]);
        if (st != TSR_OK || !set->buffers[b]) {
            uint64_t size = set->sizes[b];
            set->buffers[b] = NULL;
            host_weights_free(d, set);
            return error_set("device %s: allocating weight buffer %d of %llu bytes failed (status %d)",
                             d->name, (int)b, (unsigned long long)size, (int)st);
        }
    }
    return 0;
}

int host_weights_upload(host_device *d, const host_weight_set *set, const host_weight *w) {
    const char *name = w->name ? w->name : "?";
    if (w->buffer < 0 || w->buffer >= set->n_buffers)
        return error_set("device %s: weight '%s' has no buffer (call host_weights_alloc)", d->name, name);
    tsr_buffer *buf = set->buffers[w->buffer];
    const tsr_device_api *api = d->dev->api;
    tsr_status st;
    if (TSR_HAS_FIELD(tsr_device_api, api->struct_size, weight_write) && api->weight_write) {
        tsr_tensor t = w->t;
        t.buffer = buf;
        t.offset = w->offset;
        t.data = NULL;
        t.flags |= TSR_TENSOR_WEIGHT;
        st = api->weight_write(d->dev, buf, w->offset, &t, w->src);
    } else {
        tsr_queue *q = host_device_queue(d);
        if (!q) return -1;
        st = q->api->write(q, buf, w->offset, w->src, plain_size(&w->t));
        if (st == TSR_OK) st = q->api->synchronize(q);
    }
    if (st != TSR_OK)
        return error_set("device %s: uploading weight '%s' (%llu bytes) failed (status %d)", d->name, name,
                         (unsigned long long)plain_size(&w->t), (int)st);
    return 0;
}
