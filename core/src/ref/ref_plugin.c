/*
 * ref_plugin — the ref backend as a tsr_plugin: the same three tables any
 * plugin fills (plugin, device, queue), one CPU device, malloc'd buffers,
 * synchronous compute on the calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ref/ref.h"
#include "ref/ref_internal.h"
#include "util/error.h"

enum { REF_ALIGN = 64 };

/* Lower than any real backend: ref is the fallback, never the first choice. */
#define REF_PRIORITY (-1)

/* The host's services, from init until shutdown (NULL when used directly). */
static const tsr_host *ref_host;

static void ref_log(int level, const char *message) {
    if (ref_host && ref_host->log) ref_host->log(level, "ref", message);
}

/* ----------------------------------------------------------------- compute */

typedef tsr_status (*ref_op_fn)(const tsr_node *node);

static const ref_op_fn op_table[TSR_OP_COUNT] = {
    [TSR_OP_GET_ROWS] = ref_op_get_rows, [TSR_OP_ADD] = ref_op_add,
    [TSR_OP_MUL] = ref_op_mul,           [TSR_OP_SCALE] = ref_op_scale,
    [TSR_OP_MUL_MAT] = ref_op_mul_mat,   [TSR_OP_RMS_NORM] = ref_op_rms_norm,
    [TSR_OP_NORM] = ref_op_norm,         [TSR_OP_ROPE] = ref_op_rope,
    [TSR_OP_SOFT_MAX] = ref_op_soft_max, [TSR_OP_SILU] = ref_op_silu,
    [TSR_OP_GELU] = ref_op_gelu,         [TSR_OP_SWIGLU] = ref_op_swiglu, [TSR_OP_SWIGLU_OAI] = ref_op_swiglu_oai,
    [TSR_OP_CPY] = ref_op_cpy,           [TSR_OP_CONCAT] = ref_op_concat,
    [TSR_OP_ARGMAX] = ref_op_argmax,     [TSR_OP_FLASH_ATTN] = ref_op_flash_attn,
    [TSR_OP_MUL_MAT_ID] = ref_op_mul_mat_id, [TSR_OP_TOP_K] = ref_op_top_k,
    [TSR_OP_SUM_ROWS] = ref_op_sum_rows, [TSR_OP_DIV] = ref_op_div,
    [TSR_OP_SSM_CONV] = ref_op_ssm_conv, [TSR_OP_SSM_SCAN] = ref_op_ssm_scan,
    [TSR_OP_DELTA_NET] = ref_op_delta_net, [TSR_OP_GELU_ERF] = ref_op_gelu_erf,
};

/* Every tensor the node touches must have a host address. */
static int node_has_addresses(const tsr_node *node, const char **missing) {
    if (!ref_tensor_base(node->dst)) {
        *missing = "dst";
        return 0;
    }
    static const char *const names[TSR_MAX_SRC] = {"src0", "src1", "src2", "src3"};
    for (int i = 0; i < node->n_src; i++)
        if (node->src[i] && !ref_tensor_base(node->src[i])) {
            *missing = names[i];
            return 0;
        }
    return 1;
}

tsr_status ref_compute(const tsr_node *nodes, int32_t n_nodes, const volatile int *abort_flag) {
    if (n_nodes > 0 && !nodes) {
        error_set("ref: compute given %d nodes and no node array", (int)n_nodes);
        return TSR_ERR_INVALID;
    }
    for (int32_t i = 0; i < n_nodes; i++) {
        const tsr_node *node = &nodes[i];
        if (abort_flag && *abort_flag) {
            error_set("ref: aborted before node %d (%s)", (int)i, ref_op_name(node->op));
            return TSR_ERR_ABORTED;
        }
        char why[256];
        if (ref_node_check(node, why, sizeof why)) {
            error_set("ref: node %d: %s", (int)i, why);
            return TSR_ERR_INVALID;
        }
        const char *missing = NULL;
        if (!node_has_addresses(node, &missing)) {
            error_set("ref: node %d: %s '%s': %s has no host address (data NULL, no ref buffer)",
                      (int)i, ref_op_name(node->op), ref_node_label(node), missing);
            return TSR_ERR_INVALID;
        }
        tsr_status st = op_table[node->op](node);
        if (st != TSR_OK) {
            error_wrap("ref: node %d", (int)i);
            return st;
        }
    }
    return TSR_OK;
}

/* ------------------------------------------------------------------ queue */

static tsr_status queue_compute(tsr_queue *queue, const tsr_node *nodes, int32_t n_nodes) {
    (void)queue;
    tsr_status st = ref_compute(nodes, n_nodes, ref_host ? ref_host->abort_flag : NULL);
    if (st != TSR_OK && st != TSR_ERR_ABORTED) ref_log(TSR_LOG_ERROR, error_get());
    return st;
}

/* offset + size within the buffer, without overflow */
static int buffer_range_ok(const ref_buffer *b, uint64_t offset, uint64_t size) {
    return b && b->magic == REF_BUFFER_MAGIC && offset <= b->size && size <= b->size - offset;
}

static tsr_status queue_write(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, const void *src,
                              uint64_t size) {
    (void)queue;
    ref_buffer *b = (ref_buffer *)(void *)buffer;
    if (!buffer_range_ok(b, offset, size) || (size && !src)) {
        error_set("ref: write of %llu bytes at offset %llu is outside the buffer (%llu bytes)",
                  (unsigned long long)size, (unsigned long long)offset,
                  (unsigned long long)(b ? b->size : 0));
        return TSR_ERR_INVALID;
    }
    if (size) memcpy((uint8_t *)b->data + offset, src, size);
    return TSR_OK;
}

static tsr_status queue_read(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, void *dst,
                             uint64_t size) {
    (void)queue;
    const ref_buffer *b = (const ref_buffer *)(void *)buffer;
    if (!buffer_range_ok(b, offset, size) || (size && !dst)) {
        error_set("ref: read of %llu bytes at offset %llu is outside the buffer (%llu bytes)",
                  (unsigned long long)size, (unsigned long long)offset,
                  (unsigned long long)(b ? b->size : 0));
        return TSR_ERR_INVALID;
    }
    if (size) memcpy(dst, (const uint8_t *)b->data + offset, size);
    return TSR_OK;
}

static tsr_status queue_synchronize(tsr_queue *queue) {
    (void)queue; /* compute is synchronous */
    return TSR_OK;
}

static void queue_destroy(tsr_queue *queue) { free(queue); }

static const tsr_queue_api ref_queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_synchronize,
    .destroy = queue_destroy,
};

/* ----------------------------------------------------------------- device */

static tsr_status device_get_info(tsr_device *device, tsr_device_info *info) {
    (void)device;
    if (!info || info->struct_size < offsetof(tsr_device_info, kind) + sizeof info->kind)
        return TSR_ERR_INVALID;
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES);
    long page = sysconf(_SC_PAGESIZE);
    tsr_device_info full = {
        .struct_size = info->struct_size,
        .kind = TSR_DEVICE_CPU,
        .description = "reference backend (portable C, single thread)",
        .features = "",
        .memory_total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0,
        .memory_free = avail > 0 && page > 0 ? (uint64_t)avail * (uint64_t)page : 0,
        .host_visible = 1,
        .reads_host_memory = 1,
        .priority = REF_PRIORITY,
    };
    /* Fill only the fields the caller's struct has. */
    size_t n = info->struct_size < sizeof full ? info->struct_size : sizeof full;
    memcpy(info, &full, n);
    return TSR_OK;
}

static int32_t device_supports_op(tsr_device *device, const tsr_node *node) {
    (void)device;
    return ref_node_check(node, NULL, 0) == 0;
}

static tsr_status device_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out) {
    (void)device;
    if (!out) return TSR_ERR_INVALID;
    *out = NULL;
    if (size > UINT64_MAX - REF_ALIGN || size > (uint64_t)SIZE_MAX - REF_ALIGN) return TSR_ERR_NO_MEMORY;
    /* aligned_alloc wants a multiple of the alignment; never zero bytes */
    uint64_t rounded = size == 0 ? REF_ALIGN : (size + REF_ALIGN - 1) / REF_ALIGN * REF_ALIGN;
    ref_buffer *b = malloc(sizeof *b);
    void *data = b ? aligned_alloc(REF_ALIGN, (size_t)rounded) : NULL;
    if (!data) {
        free(b);
        char msg[128];
        snprintf(msg, sizeof msg, "cannot allocate a buffer of %llu bytes", (unsigned long long)size);
        ref_log(TSR_LOG_ERROR, msg);
        return TSR_ERR_NO_MEMORY;
    }
    *b = (ref_buffer){.magic = REF_BUFFER_MAGIC, .size = size, .data = data};
    *out = (tsr_buffer *)(void *)b;
    return TSR_OK;
}

static void device_buffer_free(tsr_device *device, tsr_buffer *buffer) {
    (void)device;
    ref_buffer *b = (ref_buffer *)(void *)buffer;
    if (!b) return;
    b->magic = 0;
    free(b->data);
    free(b);
}

static void *device_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer) {
    (void)device;
    const ref_buffer *b = (const ref_buffer *)(void *)buffer;
    return b ? b->data : NULL;
}

static tsr_status device_queue_create(tsr_device *device, tsr_queue **out) {
    (void)device;
    if (!out) return TSR_ERR_INVALID;
    tsr_queue *q = malloc(sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    *q = (tsr_queue){.api = &ref_queue_api, .impl = NULL};
    *out = q;
    return TSR_OK;
}

static const tsr_device_api ref_device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = device_get_info,
    .supports_op = device_supports_op,
    .buffer_alloc = device_buffer_alloc,
    .buffer_free = device_buffer_free,
    .buffer_host_ptr = device_buffer_host_ptr,
    .queue_create = device_queue_create,
};

static tsr_device ref_device = {.api = &ref_device_api, .impl = NULL};

/* ----------------------------------------------------------------- plugin */

static int32_t plugin_score(void) { return 1; /* runs anywhere */ }

static tsr_status plugin_init(const tsr_host *host, char *reason, size_t reason_size) {
    if (reason && reason_size) reason[0] = '\0';
    ref_host = host;
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return 1; }

static tsr_device *plugin_device_get(int32_t index) { return index == 0 ? &ref_device : NULL; }

static void plugin_shutdown(void) { ref_host = NULL; }

static const tsr_plugin ref_plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = "ref",
    .version = TESSERA_VERSION,
    .score = plugin_score,
    .init = plugin_init,
    .device_count = plugin_device_count,
    .device_get = plugin_device_get,
    .shutdown = plugin_shutdown,
};

const tsr_plugin *ref_plugin_entry(uint32_t host_abi_version) {
    if (TSR_ABI_MAJOR_OF(host_abi_version) != TSR_ABI_MAJOR) return NULL;
    return &ref_plugin;
}
