/*
 * cpu-avx — the x86-64 CPU backend plugin: one device "cpu-avx0" that runs
 * the llama ops with AVX2/AVX-512 kernels chosen at run time, reading
 * weights in place from host memory. This file holds the ABI tables (plugin,
 * device, queue), buffers, and the node loop that runs on the thread pool.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/plugin.h>

#include "cpu_features.h"
#include "exec.h"

#define PLUGIN_NAME "cpu-avx"

typedef struct avx_state {
    const tsr_host *host;
    cpu_features cpu;
    avx_level level;
    avx_kernels kernels;
    char features[160];
    char description[160];
    int n_devices;
    int force_threads; /* TESSERA_AVX_FORCE_THREADS=1: no small-work shortcut (tests) */
} avx_state;

static avx_state g; /* the plugin's registry entry: one per loaded plugin */

/* A host field may be read only if the host's struct is that long. */
#define HOST_HAS(field) \
    (g.host && g.host->struct_size >= offsetof(tsr_host, field) + sizeof(g.host->field))
static tsr_device g_device;

static void plog(int level, const char *fmt, ...) {
    if (!HOST_HAS(log) || !g.host->log) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g.host->log(level, PLUGIN_NAME, msg);
}

/* ------------------------------------------------------------ queue */

typedef struct avx_queue {
    tsr_queue pub;
    cpu_exec ex;
    const tsr_node *nodes;
    int32_t n_nodes;
    volatile int stop; /* written by thread 0 before a barrier, read after */
} avx_queue;

static int node_supported(const tsr_node *node) {
    if (node->op == TSR_OP_MUL_MAT) return matmul_supports(&g.kernels, node);
    return ops_supports(node);
}

/* Every tensor a node touches has an address by compute time. */
static int node_located(const tsr_node *node) {
    if (!node->dst || (!node->dst->buffer && !node->dst->data)) return 0;
    for (int i = 0; i < node->n_src && i < TSR_MAX_SRC; i++) {
        const tsr_tensor *s = node->src[i];
        if (s && !s->buffer && !s->data) return 0;
    }
    return 1;
}

/* Rough cost of a node in multiply-adds (matmul) or elements (the rest). */
static double node_cost(const tsr_node *node) {
    const tsr_tensor *d = node->dst;
    if (node->op == TSR_OP_MUL_MAT) return (double)node->src[0]->ne[0] * (double)tsr_tensor_nelements(d);
    if (node->op == TSR_OP_FLASH_ATTN) return (double)tsr_tensor_nelements(d) * (double)node->src[1]->ne[1] * 2.0;
    return (double)tsr_tensor_nelements(d);
}

/* Below this much work per node list, waking threads and meeting at a
 * barrier after every node costs more than it saves (tiny models, and
 * machines where the other cores are busy). */
#define MIN_COST_PER_EXTRA_THREAD 1.0e7

static size_t node_work_size(const tsr_node *node, int nth) {
    if (node->op == TSR_OP_MUL_MAT) return matmul_work_size(&g.kernels, node, nth);
    return ops_work_size(node, nth);
}

/* The node loop, run by every thread of the pool. */
static void run_nodes(void *ctx, int ith, int nth) {
    avx_queue *q = ctx;
    cpu_exec *ex = &q->ex;
    for (int32_t i = 0; i < q->n_nodes; i++) {
        const tsr_node *node = &q->nodes[i];
        if (node->op == TSR_OP_NONE) continue;
        if (node->op == TSR_OP_MUL_MAT) matmul_compute(ex, node, ith, nth);
        else ops_compute(ex, node, ith, nth);
        if (ith == 0 && HOST_HAS(abort_flag) && g.host->abort_flag && *g.host->abort_flag) q->stop = 1;
        exec_barrier(ex);
        if (q->stop || atomic_load(&ex->error)) break;
    }
}

static tsr_status queue_compute(tsr_queue *queue, const tsr_node *nodes, int32_t n_nodes) {
    avx_queue *q = queue->impl;
    if (n_nodes < 0 || (n_nodes > 0 && !nodes)) return TSR_ERR_INVALID;
    int nth = HOST_HAS(n_threads) && g.host->n_threads > 0 ? g.host->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nth < 1) nth = 1;
    if (nth > CPU_POOL_MAX_THREADS) nth = CPU_POOL_MAX_THREADS;

    size_t need = 0;
    double cost = 0.0;
    for (int32_t i = 0; i < n_nodes; i++) {
        if (nodes[i].op == TSR_OP_NONE) continue;
        if (!node_supported(&nodes[i]) || !node_located(&nodes[i])) {
            plog(TSR_LOG_ERROR, "node %d (op %d, tensor '%s') is not supported by cpu-avx0", i,
                 nodes[i].op, nodes[i].dst && nodes[i].dst->name ? nodes[i].dst->name : "");
            return TSR_ERR_UNSUPPORTED;
        }
        size_t w = node_work_size(&nodes[i], nth);
        if (w > need) need = w;
        cost += node_cost(&nodes[i]);
    }
    if (nth > 1 && !g.force_threads && cost / (nth - 1) < MIN_COST_PER_EXTRA_THREAD) {
        int fit = (int)(cost / MIN_COST_PER_EXTRA_THREAD) + 1;
        nth = fit < nth ? fit : nth;
    }
    if (need > q->ex.work_size) {
        size_t size = (need + 4095) & ~(size_t)4095;
        void *p = aligned_alloc(64, size);
        if (!p) return TSR_ERR_NO_MEMORY;
        free(q->ex.work);
        q->ex.work = p;
        q->ex.work_size = size;
    }
    if (!q->ex.pool && !(q->ex.pool = cpu_pool_create())) return TSR_ERR_NO_MEMORY;

    q->nodes = nodes;
    q->n_nodes = n_nodes;
    q->stop = 0;
    q->ex.k = &g.kernels;
    q->ex.exp_sub_sum = g.kernels.exp_sub_sum; /* vector softmax exp */
    atomic_store(&q->ex.error, 0);
    /* the barrier count must equal the threads that run */
    q->ex.nth = cpu_pool_reserve(q->ex.pool, nth);
    cpu_pool_run(q->ex.pool, q->ex.nth, run_nodes, q);
    if (q->stop) return TSR_ERR_ABORTED;
    return (tsr_status)atomic_load(&q->ex.error);
}

static tsr_status queue_write(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, const void *src,
                              uint64_t size) {
    (void)queue;
    cpu_buffer *b = (cpu_buffer *)buffer;
    if (!b || (!src && size) || offset > b->size || size > b->size - offset) return TSR_ERR_INVALID;
    if (size) memcpy((uint8_t *)b->ptr + offset, src, size);
    return TSR_OK;
}

static tsr_status queue_read(tsr_queue *queue, tsr_buffer *buffer, uint64_t offset, void *dst,
                             uint64_t size) {
    (void)queue;
    cpu_buffer *b = (cpu_buffer *)buffer;
    if (!b || (!dst && size) || offset > b->size || size > b->size - offset) return TSR_ERR_INVALID;
    if (size) memcpy(dst, (uint8_t *)b->ptr + offset, size);
    return TSR_OK;
}

static tsr_status queue_synchronize(tsr_queue *queue) {
    (void)queue; /* compute is synchronous */
    return TSR_OK;
}

static void queue_destroy(tsr_queue *queue) {
    if (!queue) return;
    avx_queue *q = queue->impl;
    cpu_pool_destroy(q->ex.pool);
    free(q->ex.work);
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

/* ----------------------------------------------------------- device */

static tsr_status device_get_info(tsr_device *device, tsr_device_info *info) {
    (void)device;
    if (!info || info->struct_size < sizeof(uint32_t)) return TSR_ERR_INVALID;
    tsr_device_info full = {0};
    full.struct_size = sizeof full;
    full.kind = TSR_DEVICE_CPU;
    full.description = g.description;
    full.features = g.features;
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    full.memory_total = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
    full.memory_free = avail > 0 && psize > 0 ? (uint64_t)avail * (uint64_t)psize : 0;
    full.host_visible = 1;
    full.reads_host_memory = 1;
    full.priority = 100; /* above ref */
    uint32_t n = info->struct_size < sizeof full ? info->struct_size : (uint32_t)sizeof full;
    uint32_t caller_size = info->struct_size;
    memcpy(info, &full, n);
    info->struct_size = caller_size;
    return TSR_OK;
}

static int32_t device_supports_op(tsr_device *device, const tsr_node *node) {
    (void)device;
    if (!node || !node->dst || node->op <= TSR_OP_NONE || node->op >= TSR_OP_COUNT) return 0;
    /* No location check here: the host asks before it plans memory, so
     * tensors have neither buffer nor data yet. */
    return node_supported(node);
}

static tsr_status device_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out) {
    (void)device;
    if (!out) return TSR_ERR_INVALID;
    *out = NULL;
    if (size > (uint64_t)SIZE_MAX - 128) return TSR_ERR_NO_MEMORY;
    cpu_buffer *b = malloc(sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    size_t bytes = ((size_t)size + 63) & ~(size_t)63;
    b->ptr = aligned_alloc(64, bytes ? bytes : 64);
    if (!b->ptr) {
        free(b);
        return TSR_ERR_NO_MEMORY;
    }
    b->size = size;
    *out = (tsr_buffer *)b;
    return TSR_OK;
}

static void device_buffer_free(tsr_device *device, tsr_buffer *buffer) {
    (void)device;
    cpu_buffer *b = (cpu_buffer *)buffer;
    if (!b) return;
    free(b->ptr);
    free(b);
}

static void *device_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer) {
    (void)device;
    return buffer ? ((cpu_buffer *)buffer)->ptr : NULL;
}

static tsr_status device_queue_create(tsr_device *device, tsr_queue **out) {
    (void)device;
    if (!out) return TSR_ERR_INVALID;
    avx_queue *q = calloc(1, sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    q->pub.api = &queue_api;
    q->pub.impl = q;
    *out = &q->pub;
    return TSR_OK;
}

static const tsr_device_api device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = device_get_info,
    .supports_op = device_supports_op,
    .buffer_alloc = device_buffer_alloc,
    .buffer_free = device_buffer_free,
    .buffer_host_ptr = device_buffer_host_ptr,
    .queue_create = device_queue_create,
};

/* ----------------------------------------------------------- plugin */

static int32_t plugin_score(void) {
    cpu_features f;
    cpu_features_detect(&f);
    return (int32_t)cpu_features_best_level(&f) * 10;
}

/* TESSERA_AVX_LEVEL=avx2|avxvnni|avx512|avx512-novnni lowers the level
 * (never raises it); avx2 and avx512-novnni also leave VNNI out (set
 * *no_vnni), so the plain kernels are tested on a VNNI machine. */
static avx_level requested_level(avx_level best, int *no_vnni) {
    const char *env = getenv("TESSERA_AVX_LEVEL");
    *no_vnni = 0;
    if (!env || !*env) return best;
    avx_level want;
    if (!strcmp(env, "avx2")) want = AVX_LEVEL_AVX2, *no_vnni = 1;
    else if (!strcmp(env, "avxvnni")) want = AVX_LEVEL_AVX2;
    else if (!strcmp(env, "avx512")) want = AVX_LEVEL_AVX512;
    else if (!strcmp(env, "avx512-novnni")) want = AVX_LEVEL_AVX512, *no_vnni = 1;
    else {
        plog(TSR_LOG_WARN, "TESSERA_AVX_LEVEL='%s' is not avx2, avxvnni, avx512 or avx512-novnni; using %s", env,
             best == AVX_LEVEL_AVX512 ? "avx512" : "avx2");
        return best;
    }
    if (want > best) {
        plog(TSR_LOG_WARN, "TESSERA_AVX_LEVEL=%s: this CPU lacks it; using avx2", env);
        return best;
    }
    return want;
}

static int wants_avxvnni(void) {
    const char *env = getenv("TESSERA_AVX_LEVEL");
    return env && !strcmp(env, "avxvnni");
}

static tsr_status plugin_init(const tsr_host *host, char *reason, size_t reason_size) {
    memset(&g, 0, sizeof g);
    g.host = host;
    cpu_features_detect(&g.cpu);
    cpu_features_string(&g.cpu, g.features, sizeof g.features);
    avx_level best = cpu_features_best_level(&g.cpu);
    if (best == AVX_LEVEL_NONE) {
        if (reason && reason_size)
            snprintf(reason, reason_size, "cpu-avx: this CPU (or OS) lacks AVX2+FMA+F16C (has: %s)",
                     g.features[0] ? g.features : "none of them");
        g.n_devices = 0;
        return TSR_ERR_UNSUPPORTED;
    }
    int no_vnni;
    g.level = requested_level(best, &no_vnni);
    const char *force = getenv("TESSERA_AVX_FORCE_THREADS");
    g.force_threads = force && *force && strcmp(force, "0") != 0;
    if (g.level == AVX_LEVEL_AVX512 && g.cpu.avx512vnni && !no_vnni) kernels_init_avx512vnni(&g.kernels);
    else if (g.level == AVX_LEVEL_AVX512) kernels_init_avx512(&g.kernels);
    else if (g.cpu.avxvnni && !no_vnni) kernels_init_avxvnni(&g.kernels);
    else if (wants_avxvnni()) {
        plog(TSR_LOG_WARN, "TESSERA_AVX_LEVEL=avxvnni: this CPU lacks AVX-VNNI; using avx2");
        kernels_init_avx2(&g.kernels);
    }
    else kernels_init_avx2(&g.kernels);
    snprintf(g.description, sizeof g.description, "%s (%s kernels)",
             g.cpu.brand[0] ? g.cpu.brand : "x86-64 CPU", g.kernels.name);
    g_device.api = &device_api;
    g_device.impl = &g;
    g.n_devices = 1;
    if (reason && reason_size) reason[0] = 0;
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return g.n_devices; }

static tsr_device *plugin_device_get(int32_t index) { return index == 0 && g.n_devices == 1 ? &g_device : NULL; }

static void plugin_shutdown(void) { memset(&g, 0, sizeof g); }

static const tsr_plugin plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = PLUGIN_NAME,
    .version = "0.1.0",
    .score = plugin_score,
    .init = plugin_init,
    .device_count = plugin_device_count,
    .device_get = plugin_device_get,
    .shutdown = plugin_shutdown,
};

TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
    if (TSR_ABI_MAJOR_OF(host_abi_version) != TSR_ABI_MAJOR) return NULL;
    return &plugin;
}
