/*
 * ocl_memory — device buffers.
 *
 * On unified-memory devices (CL_DEVICE_HOST_UNIFIED_MEMORY: integrated GPUs,
 * PoCL on the CPU) a buffer is allocated with CL_MEM_ALLOC_HOST_PTR and
 * mapped once for its lifetime; the mapped address is what buffer_host_ptr
 * hands out, so the host reads and writes it in place instead of copying.
 * (Kernels then use a buffer that stays mapped, which OpenCL 1.2 leaves to
 * the driver; unified-memory drivers back both by the same pages. Set
 * TESSERA_OPENCL_NO_MAP=1 to copy instead.) Other devices get plain device
 * buffers and explicit copies (ocl_queue.c).
 */
#include <stdlib.h>

#include "ocl_internal.h"

ocl_buffer *ocl_buffer_of(const ocl_device *d, tsr_buffer *buffer) {
    ocl_buffer *b = (ocl_buffer *)(void *)buffer;
    if (!b || b->magic != OCL_BUFFER_MAGIC || b->dev != d) return NULL;
    return b;
}

tsr_status ocl_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out) {
    ocl_device *d = device ? device->impl : NULL;
    char label[32];
    if (!out) return TSR_ERR_INVALID;
    *out = NULL;
    if (!d) return TSR_ERR_INVALID;
    if (size == 0) size = 1;
    if (size > d->max_alloc) {
        ocl_log(TSR_LOG_ERROR, "%s: a buffer of %llu bytes exceeds the device's largest allocation (%llu)",
                ocl_device_label(d, label, sizeof label), (unsigned long long)size,
                (unsigned long long)d->max_alloc);
        return TSR_ERR_NO_MEMORY;
    }
    ocl_buffer *b = calloc(1, sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    cl_int err;
    cl_mem_flags flags = CL_MEM_READ_WRITE | (d->unified ? CL_MEM_ALLOC_HOST_PTR : 0);
    b->mem = clCreateBuffer(d->ctx, flags, (size_t)size, NULL, &err);
    if (!b->mem) {
        ocl_log(TSR_LOG_ERROR, "%s: clCreateBuffer(%llu bytes) failed: %s",
                ocl_device_label(d, label, sizeof label), (unsigned long long)size, ocl_error_name(err));
        free(b);
        return TSR_ERR_NO_MEMORY;
    }
    if (d->unified) {
        b->host = clEnqueueMapBuffer(d->alloc_queue, b->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                     (size_t)size, 0, NULL, NULL, &err);
        if (!b->host) {
            ocl_log(TSR_LOG_ERROR, "%s: mapping a buffer of %llu bytes failed: %s",
                    ocl_device_label(d, label, sizeof label), (unsigned long long)size,
                    ocl_error_name(err));
            clReleaseMemObject(b->mem);
            free(b);
            return TSR_ERR_NO_MEMORY;
        }
    }
    b->magic = OCL_BUFFER_MAGIC;
    b->dev = d;
    b->size = size;
    *out = (tsr_buffer *)(void *)b;
    return TSR_OK;
}

void ocl_buffer_free(tsr_device *device, tsr_buffer *buffer) {
    ocl_device *d = device ? device->impl : NULL;
    ocl_buffer *b = d ? ocl_buffer_of(d, buffer) : NULL;
    if (!b) return;
    if (b->host) {
        clEnqueueUnmapMemObject(d->alloc_queue, b->mem, b->host, 0, NULL, NULL);
        clFinish(d->alloc_queue);
    }
    clReleaseMemObject(b->mem);
    b->magic = 0;
    free(b);
}

void *ocl_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer) {
    ocl_device *d = device ? device->impl : NULL;
    ocl_buffer *b = d ? ocl_buffer_of(d, buffer) : NULL;
    return b ? b->host : NULL;
}
