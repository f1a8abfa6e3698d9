/*
 * ocl_queue — a queue of one device: compute a node list, copy in and out,
 * synchronize.
 *
 * compute enqueues each node's kernels on an in-order command queue and
 * returns; synchronize waits (clFinish). Every tensor must lie in one of this
 * device's buffers, wholly inside it: checked before anything is enqueued,
 * so a bad node is an error, never a stray device write.
 */
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "ocl_internal.h"

/* Bytes from a tensor's first element to one past its last. */
static uint64_t tensor_extent(const tsr_tensor *t) {
    int64_t bs = tsr_dtype_block_size(t->dtype), bytes = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0 || bytes <= 0) return UINT64_MAX;
    uint64_t end = (uint64_t)((t->ne[0] / bs - 1) * t->nb[0] + bytes);
    for (int d = 1; d < TSR_MAX_DIMS; d++) end += (uint64_t)((t->ne[d] - 1) * t->nb[d]);
    return end;
}

static bool tensor_in_buffer(ocl_device *d, const tsr_tensor *t, const char *role, const tsr_node *node) {
    char label[32];
    ocl_buffer *b = ocl_buffer_of(d, t->buffer);
    if (!b) {
        ocl_log(TSR_LOG_ERROR, "%s: %s '%s': %s '%s' is not in a buffer of this device",
                ocl_device_label(d, label, sizeof label), tsr_op_name(node->op),
                node->dst->name ? node->dst->name : "", role, t->name ? t->name : "");
        return false;
    }
    /* kernels load whole elements: F32/I32 at 4-byte, the rest at 2-byte addresses */
    int64_t bytes = tsr_dtype_block_bytes(t->dtype);
    uint64_t align = tsr_dtype_block_size(t->dtype) == 1 && bytes == 4 ? 4 : 2;
    if (t->offset % align) {
        ocl_log(TSR_LOG_ERROR, "%s: %s '%s': %s '%s' at offset %llu is not %llu-byte aligned",
                ocl_device_label(d, label, sizeof label), tsr_op_name(node->op),
                node->dst->name ? node->dst->name : "", role, t->name ? t->name : "",
                (unsigned long long)t->offset, (unsigned long long)align);
        return false;
    }
    uint64_t ext = tensor_extent(t);
    if (ext == UINT64_MAX || t->offset > b->size || ext > b->size - t->offset) {
        ocl_log(TSR_LOG_ERROR, "%s: %s '%s': %s '%s' at offset %llu runs past its buffer of %llu bytes",
                ocl_device_label(d, label, sizeof label), tsr_op_name(node->op),
                node->dst->name ? node->dst->name : "", role, t->name ? t->name : "",
                (unsigned long long)t->offset, (unsigned long long)b->size);
        return false;
    }
    return true;
}

static tsr_status queue_compute(tsr_queue *queue, const tsr_node *nodes, int32_t n_nodes) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q || (n_nodes > 0 && !nodes) || n_nodes < 0) return TSR_ERR_INVALID;
    ocl_device *d = q->dev;
    const tsr_host *host = ocl_host();
    char label[32], why[256];
    if (n_nodes > 0 && !ocl_program_ensure(d)) return TSR_ERR_UNSUPPORTED;
    for (int32_t i = 0; i < n_nodes; i++) {
        const tsr_node *node = &nodes[i];
        if (host && host->abort_flag && *host->abort_flag) return TSR_ERR_ABORTED;
        if (node->op == TSR_OP_NONE) continue;
        if (!ocl_node_supported(d, node, why, sizeof why)) {
            ocl_log(TSR_LOG_ERROR, "%s: cannot compute %s", ocl_device_label(d, label, sizeof label), why);
            return TSR_ERR_UNSUPPORTED;
        }
        if (!tensor_in_buffer(d, node->dst, "dst", node)) return TSR_ERR_INVALID;
        for (int s = 0; s < node->n_src; s++) {
            static const char *const roles[TSR_MAX_SRC] = {"src0", "src1", "src2", "src3"};
            if (node->src[s] && !tensor_in_buffer(d, node->src[s], roles[s], node)) return TSR_ERR_INVALID;
        }
        pthread_mutex_lock(&d->enqueue_lock);
        tsr_status st = ocl_op_enqueue(d, q->cq, node);
        pthread_mutex_unlock(&d->enqueue_lock);
        if (st != TSR_OK) return st;
    }
    cl_int err = clFlush(q->cq);
    if (err != CL_SUCCESS) {
        ocl_log(TSR_LOG_ERROR, "%s: clFlush failed: %s", ocl_device_label(d, label, sizeof label),
                ocl_error_name(err));
        return TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

static tsr_status queue_synchronize(tsr_queue *queue) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q) return TSR_ERR_INVALID;
    cl_int err = clFinish(q->cq);
    if (err != CL_SUCCESS) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: the device failed while computing: %s",
                ocl_device_label(q->dev, label, sizeof label), ocl_error_name(err));
        return TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

/* The buffer and a range check shared by write and read. */
static ocl_buffer *copy_target(ocl_queue *q, tsr_buffer *buffer, uint64_t offset, uint64_t size,
                               const char *what) {
    char label[32];
    ocl_buffer *b = ocl_buffer_of(q->dev, buffer);
    if (!b) {
        ocl_log(TSR_LOG_ERROR, "%s: %s: the buffer is not one of this device's",
                ocl_device_label(q->dev, label, sizeof label), what);
        return NULL;
    }
    if (offset > b->size || size > b->size - offset) {
        ocl_log(TSR_LOG_ERROR, "%s: %s of %llu bytes at offset %llu runs past the buffer of %llu bytes",
                ocl_device_label(q->dev, label, sizeof label), what, (unsigned long long)size,
                (unsigned long long)offset, (unsigned long long)b->size);
        return NULL;
    }
    return b;
}

static tsr_status queue_write(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, const void *src,
                              uint64_t size) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q || (!src && size)) return TSR_ERR_INVALID;
    ocl_buffer *b = copy_target(q, buffer, offset, size, "write");
    if (!b) return TSR_ERR_INVALID;
    if (size == 0) return TSR_OK;
    cl_int err;
    if (b->host) {
        /* mapped: wait for kernels that may still use the bytes, then copy */
        err = clFinish(q->cq);
        if (err == CL_SUCCESS) memcpy((unsigned char *)b->host + offset, src, (size_t)size);
    } else {
        err = clEnqueueWriteBuffer(q->cq, b->mem, CL_TRUE, (size_t)offset, (size_t)size, src, 0, NULL, NULL);
    }
    if (err != CL_SUCCESS) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: writing %llu bytes failed: %s",
                ocl_device_label(q->dev, label, sizeof label), (unsigned long long)size, ocl_error_name(err));
        return TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

static tsr_status queue_read(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, void *dst,
                             uint64_t size) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q || (!dst && size)) return TSR_ERR_INVALID;
    ocl_buffer *b = copy_target(q, buffer, offset, size, "read");
    if (!b) return TSR_ERR_INVALID;
    if (size == 0) return TSR_OK;
    cl_int err;
    if (b->host) {
        err = clFinish(q->cq);
        if (err == CL_SUCCESS) memcpy(dst, (const unsigned char *)b->host + offset, (size_t)size);
    } else {
        err = clEnqueueReadBuffer(q->cq, b->mem, CL_TRUE, (size_t)offset, (size_t)size, dst, 0, NULL, NULL);
    }
    if (err != CL_SUCCESS) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: reading %llu bytes failed: %s",
                ocl_device_label(q->dev, label, sizeof label), (unsigned long long)size, ocl_error_name(err));
        return TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

static void queue_destroy(tsr_queue *queue) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q) return;
    clFinish(q->cq);
    clReleaseCommandQueue(q->cq);
    free(q);
}

static const tsr_queue_api queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_synchronize,
    .destroy = queue_destroy,
};

tsr_status ocl_queue_create(tsr_device *device, tsr_queue **out) {
    ocl_device *d = device ? device->impl : NULL;
    if (!out) return TSR_ERR_INVALID;
    *out = NULL;
    if (!d) return TSR_ERR_INVALID;
    ocl_queue *q = calloc(1, sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    cl_int err;
    q->cq = clCreateCommandQueue(d->ctx, d->id, 0, &err);
    if (!q->cq) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: clCreateCommandQueue failed: %s",
                ocl_device_label(d, label, sizeof label), ocl_error_name(err));
        free(q);
        return TSR_ERR_DEVICE;
    }
    q->dev = d;
    q->q.api = &queue_api;
    q->q.impl = q;
    *out = &q->q;
    return TSR_OK;
}
