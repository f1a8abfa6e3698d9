/*
 * host_weights — put a model's offloaded weights into a device's memory:
 * as many buffers as the device's maximum allocation size requires, each
 * weight at an offset aligned as the device asks, each uploaded through
 * the device's repacking hook (ABI 1.1 weight_write) when it has one.
 *
 *     host_weight w[n] = {{.t = tensor_as_nodes_see_it, .src = bytes, .name = "blk.0.ffn_up"}, ...};
 *     host_weight_set set;
 *     if (host_weights_alloc(dev, w, n, &set)) fail;          // plans and allocates
 *     for (i..n) { bind tensor i to set.buffers[w[i].buffer] + w[i].offset;
 *                  if (host_weights_upload(dev, &set, &w[i])) fail; }
 *     ...
 *     host_weights_free(dev, &set);                            // before host_shutdown
 *
 * Errors name the device, the weight and the limit at fault.
 */
#ifndef TESSERA_HOST_WEIGHTS_H
#define TESSERA_HOST_WEIGHTS_H

#include <stdint.h>

#include "host/host.h"

typedef struct host_weight {
    /* in: the weight as nodes will see it (dtype, ne, nb; contiguous) */
    tsr_tensor t;
    const void *src;    /* in: its plain GGUF bytes (for upload)      */
    const char *name;   /* in: for messages                           */
    /* out (host_weights_alloc): where it lives */
    int32_t buffer;     /* index into the set's buffers */
    uint64_t offset;    /* byte offset in that buffer   */
    uint64_t size;      /* bytes reserved (the device's repacked size) */
} host_weight;

typedef struct host_weight_set {
    int32_t n_buffers;
    tsr_buffer **buffers;
    uint64_t *sizes;    /* [n_buffers] bytes of each buffer */
} host_weight_set;

/* Plan and allocate: weights are packed in order into buffers no larger
 * than the device's max_alloc_size; sets each weight's buffer, offset and
 * size. -1 with an error (a weight larger than the device allows, or an
 * allocation failing) and nothing allocated. */
int host_weights_alloc(host_device *d, host_weight *w, int32_t n, host_weight_set *set);

/* Store one weight's bytes: the device's weight_write (repacking) when it
 * has one, else a queue write followed by synchronize. */
int host_weights_upload(host_device *d, const host_weight_set *set, const host_weight *w);

void host_weights_free(host_device *d, host_weight_set *set);

#endif
