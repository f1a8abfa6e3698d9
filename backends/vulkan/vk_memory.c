/*
 * vk_memory — tensor buffers: one VkBuffer with its own device-local
 * allocation each. On unified-memory devices the memory is also
 * host-visible and stays mapped, so the host reads and writes it in place;
 * elsewhere the queue copies through a staging buffer.
 *
 * Out of device memory is TSR_ERR_NO_MEMORY with a log line saying how much
 * was asked for and how much the device has free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static double mib(uint64_t n) { return (double)n / (1024.0 * 1024.0); }

vk_buffer *vk_buffer_of(const vk_device *d, tsr_buffer *buffer) {
    vk_buffer *b = (vk_buffer *)(void *)buffer;
    if (!b || b->magic != VK_BUFFER_MAGIC || b->owner != d) return NULL;
    return b;
}

static tsr_status no_memory(vk_device *d, uint64_t size, const char *what) {
    uint64_t total, free_bytes;
    vk_device_memory(d, &total, &free_bytes);
    if (d->has_budget || d->memory_limit)
        vk_log(TSR_LOG_ERROR, "vulkan%d: out of device memory: %s %.1f MiB, %.1f MiB free of %.1f MiB",
               d->index, what, mib(size), mib(free_bytes), mib(total));
    else
        vk_log(TSR_LOG_ERROR, "vulkan%d: out of device memory: %s %.1f MiB, device has %.1f MiB "
               "(free amount unknown)", d->index, what, mib(size), mib(total));
    return TSR_ERR_NO_MEMORY;
}

tsr_status vk_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out) {
    vk_device *d = device ? (vk_device *)device->impl : NULL;
    if (!d || !out) return TSR_ERR_INVALID;
    *out = NULL;
    if (vk_device_ready(d)) return TSR_ERR_DEVICE;
    /* Whole 4-byte words: shaders address buffers as uint arrays. */
    if (size > UINT64_MAX - 4) return no_memory(d, size, "needed");
    uint64_t alloc = size < 4 ? 4 : (size + 3) / 4 * 4;
    const uint32_t heap = d->mem_props.memoryTypes[d->device_type].heapIndex;
    if (alloc > d->mem_props.memoryHeaps[heap].size) return no_memory(d, size, "needed");
    pthread_mutex_lock(&d->lock);
    const bool over = d->memory_limit && (alloc > d->memory_limit || d->allocated > d->memory_limit - alloc);
    pthread_mutex_unlock(&d->lock);
    if (over) return no_memory(d, size, "needed");

    vk_buffer *b = calloc(1, sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    void *mapped = NULL;
    VkResult r = vk_raw_buffer_create(d, alloc,
                                      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                          VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                      d->device_type, &b->buf, &b->mem, d->unified ? &mapped : NULL);
    if (r != VK_SUCCESS) {
        free(b);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY ||
            r == VK_ERROR_TOO_MANY_OBJECTS)
            return no_memory(d, size, "needed");
        vk_log(TSR_LOG_ERROR, "vulkan%d: cannot create a buffer of %.1f MiB (VkResult %d)", d->index,
               mib(size), (int)r);
        return r == VK_ERROR_FEATURE_NOT_PRESENT ? TSR_ERR_UNSUPPORTED : TSR_ERR_NO_MEMORY;
    }
    b->magic = VK_BUFFER_MAGIC;
    b->owner = d;
    b->size = size;
    b->alloc_size = alloc;
    b->mapped = mapped;
    pthread_mutex_lock(&d->lock);
    d->allocated += alloc;
    pthread_mutex_unlock(&d->lock);
    *out = (tsr_buffer *)(void *)b;
    return TSR_OK;
}

void vk_buffer_free(tsr_device *device, tsr_buffer *buffer) {
    vk_device *d = device ? (vk_device *)device->impl : NULL;
    vk_buffer *b = d ? vk_buffer_of(d, buffer) : NULL;
    if (!b) return;
    /* The host frees buffers only after synchronize; a queue of another
     * thread could still use it, so wait for the device to be idle (with
     * the queue's submit lock: vkDeviceWaitIdle needs it too). */
    pthread_mutex_lock(&d->submit_lock);
    vkf.vkDeviceWaitIdle(d->dev);
    pthread_mutex_unlock(&d->submit_lock);
    pthread_mutex_lock(&d->lock);
    vk_queues_forget_buffer(d, b->buf);
    pthread_mutex_unlock(&d->lock);
    vk_raw_buffer_destroy(d, b->buf, b->mem);
    pthread_mutex_lock(&d->lock);
    d->allocated -= b->alloc_size;
    d->buffers_freed++;
    pthread_mutex_unlock(&d->lock);
    b->magic = 0;
    free(b);
}

void *vk_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer) {
    vk_device *d = device ? (vk_device *)device->impl : NULL;
    vk_buffer *b = d ? vk_buffer_of(d, buffer) : NULL;
    return b ? b->mapped : NULL;
}
