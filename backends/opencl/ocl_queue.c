/*
 * ocl_queue — a queue of one device: compute a node list, copy in and out,
 * synchronize.
 *
 * compute enqueues each node's kernels on an in-order command queue and
 * returns (one clFlush: one submission per step); synchronize waits
 * (clFinish). Every tensor must lie in one of this device's buffers, wholly
 * inside it: checked before anything is enqueued, so a bad node is an error,
 * never a stray device write. Writes to device memory are enqueued without
 * blocking from a copy of the source (freed once the queue is finished), so
 * a step's inputs cost the host no wait. With profiling on (ABI 1.3) a
 * marker after each node times it from the queue's profiling events.
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
    /* kernels load whole elements (ocl_dtype_alignment) */
    const uint64_t align = (uint64_t)ocl_dtype_alignment(t->dtype);
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

/* Profiling: a marker event after the work enqueued so far; op is the
 * node it ends (-1: the first mark, before any node). */
static tsr_status mark(ocl_queue *q, int32_t op) {
    if (q->n_marks == q->cap_marks) {
        uint32_t cap = q->cap_marks ? 2 * q->cap_marks : 256;
        cl_event *m = realloc(q->marks, cap * sizeof *m);
        if (m) q->marks = m;
        int32_t *o = realloc(q->mark_ops, cap * sizeof *o);
        if (o) q->mark_ops = o;
        if (!m || !o) return TSR_ERR_NO_MEMORY;
        q->cap_marks = cap;
    }
    cl_event ev = NULL;
    if (clEnqueueMarkerWithWaitList(q->cq, 0, NULL, &ev) != CL_SUCCESS) return TSR_ERR_DEVICE;
    q->marks[q->n_marks] = ev;
    q->mark_ops[q->n_marks++] = op;
    return TSR_OK;
}

/* After clFinish: add each timed node to stats.op_ns and free the marks. */
static void collect_marks(ocl_queue *q) {
    cl_ulong prev = 0;
    for (uint32_t i = 0; i < q->n_marks; i++) {
        cl_ulong end = 0;
        if (clGetEventProfilingInfo(q->marks[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) != CL_SUCCESS)
            end = prev;
        const int32_t op = q->mark_ops[i];
        if (i > 0 && op >= 0 && op < TSR_STATS_OPS && end >= prev) {
            q->stats.op_ns[op] += end - prev;
            q->stats.op_nodes[op]++;
        }
        prev = end;
        clReleaseEvent(q->marks[i]);
    }
    q->n_marks = 0;
}

/* Wait for everything enqueued, then free what it needed. */
static cl_int finish(ocl_queue *q) {
    cl_int err = clFinish(q->cq);
    q->stats.n_host_waits++;
    for (uint32_t i = 0; i < q->n_held; i++) free(q->held[i]);
    q->n_held = 0;
    if (q->n_marks) collect_marks(q);
    return err;
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
        if (q->profiling && q->n_marks == 0 && mark(q, -1) != TSR_OK) return TSR_ERR_DEVICE;
        pthread_mutex_lock(&d->enqueue_lock);
        tsr_status st = ocl_op_enqueue(d, q, node);
        pthread_mutex_unlock(&d->enqueue_lock);
        if (st != TSR_OK) return st;
        if (q->profiling && mark(q, node->op) != TSR_OK) return TSR_ERR_DEVICE;
    }
    q->stats.n_computes++;
    q->stats.n_submits++;
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
    cl_int err = finish(q);
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

enum { OCL_HOLD_MAX = 1 << 20 }; /* largest write enqueued without blocking */

/* Keep a copy of src for a write that has not run yet; false: no memory. */
static bool hold(ocl_queue *q, const void *src, uint64_t size) {
    if (q->n_held == q->cap_held) {
        uint32_t cap = q->cap_held ? 2 * q->cap_held : 16;
        void **p = realloc(q->held, cap * sizeof *p);
        if (!p) return false;
        q->held = p;
        q->cap_held = cap;
    }
    void *copy = malloc((size_t)size);
    if (!copy) return false;
    memcpy(copy, src, (size_t)size);
    q->held[q->n_held++] = copy;
    return true;
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
        err = finish(q);
        if (err == CL_SUCCESS) memcpy((unsigned char *)b->host + offset, src, (size_t)size);
    } else if (size <= OCL_HOLD_MAX && hold(q, src, size)) {
        /* from our own copy, without blocking (ordered before the next compute) */
        err = clEnqueueWriteBuffer(q->cq, b->mem, CL_FALSE, (size_t)offset, (size_t)size, q->held[q->n_held - 1],
                                   0, NULL, NULL);
    } else {
        err = clEnqueueWriteBuffer(q->cq, b->mem, CL_TRUE, (size_t)offset, (size_t)size, src, 0, NULL, NULL);
        q->stats.n_host_waits++;
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
        err = finish(q);
        if (err == CL_SUCCESS) memcpy(dst, (const unsigned char *)b->host + offset, (size_t)size);
    } else {
        err = clEnqueueReadBuffer(q->cq, b->mem, CL_TRUE, (size_t)offset, (size_t)size, dst, 0, NULL, NULL);
        q->stats.n_host_waits++;
    }
    if (err != CL_SUCCESS) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: reading %llu bytes failed: %s",
                ocl_device_label(q->dev, label, sizeof label), (unsigned long long)size, ocl_error_name(err));
        return TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

cl_mem ocl_queue_scratch(ocl_queue *q, uint64_t bytes) {
    if (q->scratch && q->scratch_bytes >= bytes) return q->scratch;
    if (q->scratch) clReleaseMemObject(q->scratch);
    q->scratch = NULL;
    q->scratch_bytes = 0;
    cl_int err;
    cl_mem m = clCreateBuffer(q->dev->ctx, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &err);
    if (!m) {
        char label[32];
        ocl_log(TSR_LOG_ERROR, "%s: a scratch buffer of %llu bytes: %s", ocl_device_label(q->dev, label, sizeof label),
                (unsigned long long)bytes, ocl_error_name(err));
        return NULL;
    }
    q->scratch = m;
    q->scratch_bytes = bytes;
    return m;
}

static void queue_destroy(tsr_queue *queue) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q) return;
    finish(q);
    if (q->scratch) clReleaseMemObject(q->scratch);
    clReleaseCommandQueue(q->cq);
    free(q->held);
    free(q->marks);
    free(q->mark_ops);
    free(q);
}

static void queue_get_stats(tsr_queue *queue, tsr_queue_stats *out) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q || !out || out->struct_size < 8) return;
    tsr_queue_stats all = q->stats;
    const uint32_t size = out->struct_size < sizeof all ? out->struct_size : (uint32_t)sizeof all;
    all.struct_size = size;
    memcpy(out, &all, size);
}

/* Profiling needs a queue created with it: make a new one (after the old
 * one finished; the queue is called from one thread at a time). */
static tsr_status queue_set_profiling(tsr_queue *queue, int32_t on) {
    ocl_queue *q = queue ? queue->impl : NULL;
    if (!q) return TSR_ERR_INVALID;
    if ((on != 0) == q->profiling) return TSR_OK;
    if (finish(q) != CL_SUCCESS) return TSR_ERR_DEVICE;
    cl_int err;
    cl_command_queue cq = clCreateCommandQueue(q->dev->ctx, q->dev->id, on ? CL_QUEUE_PROFILING_ENABLE : 0, &err);
    if (!cq) return on ? TSR_ERR_UNSUPPORTED : TSR_ERR_DEVICE;
    clReleaseCommandQueue(q->cq);
    q->cq = cq;
    q->profiling = on != 0;
    return TSR_OK;
}

static const tsr_queue_api queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_synchronize,
    .destroy = queue_destroy,
    .get_stats = queue_get_stats,
    .set_profiling = queue_set_profiling,
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
