/*
 * cpu_plugin — the CPU plugin core that cpu-avx and cpu-neon share: one
 * device (cpu-avx0, cpu-neon0) that runs the llama ops with the kernel
 * level chosen at run time, reading weights in place from host memory. This
 * file holds the ABI tables (plugin, device, queue), buffers, the level
 * choice and the node loop that runs on the thread pool; the ISA folder
 * linked with it supplies cpu_isa_this (cpu_isa.h): names, feature
 * detection and kernel tables.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tessera/plugin_check.h>

#include "cpu_isa.h"
#include "cpu_steps.h"

#define ISA (&cpu_isa_this)

typedef struct cpu_state {
    const tsr_host *host;
    cpu_kernels kernels;
    char features[160];
    char description[160];
    int n_devices;
    int force_threads; /* threads_env=1: no small-work shortcut (tests) */
    int plain_steps;   /* TESSERA_CPU_PLAIN_STEPS=1: every node shared, a barrier after each (A/B, tests) */
    int no_repack;     /* TESSERA_CPU_REPACK=0: decoding reads every weight in place */
} cpu_state;

static cpu_state g; /* the plugin's registry entry: one per loaded plugin */

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
    g.host->log(level, ISA->plugin_name, msg);
}

/* ------------------------------------------------------------ queue */

typedef struct cpu_queue {
    tsr_queue pub;
    cpu_exec ex;
    cpu_plan plan;     /* the steps of the node list being computed */
    int stop;          /* thread 0 saw the abort flag (read after the run) */
    int32_t n_threads; /* set_n_threads (ABI 1.1); 0: tsr_host.n_threads */
    cpu_xcache xc;     /* weights repacked for decoding (cpu_repack.h) */
} cpu_queue;

/* 1 if this plugin computes node, else 0 with the reason in why (may be NULL). */
static int node_supported(const tsr_node *node, char *why, size_t why_size) {
    if (node->op == TSR_OP_MUL_MAT) return matmul_supports(&g.kernels, node, why, why_size);
    return ops_supports(&g.kernels, node, why, why_size);
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

/* Rough cost of a node in multiply-adds (products) or elements (the rest). */
static double node_cost(const tsr_node *node) {
    const tsr_tensor *d = node->dst;
    if (node->op == TSR_OP_MUL_MAT) return (double)node->src[0]->ne[0] * (double)tsr_tensor_nelements(d);
    return ops_cost(node);
}

/* Below this much work per node list, waking threads and meeting at a
 * barrier after every node costs more than it saves (tiny models, and
 * machines where the other cores are busy). */
#define MIN_COST_PER_EXTRA_THREAD 1.0e7

static size_t node_work_size(const tsr_node *node, int nth) {
    if (node->op == TSR_OP_MUL_MAT) return matmul_work_size(&g.kernels, node, nth);
    return ops_work_size(&g.kernels, node, nth);
}

/* The node loop, run by every thread of the pool: the plan's steps
 * (cpu_steps.h). At each barrier the threads decide together whether to
 * stop (thread 0 saw the abort flag, or an op failed), so none is left
 * waiting at a barrier the others skipped. */
static void run_nodes(void *ctx, int ith, int nth) {
    cpu_queue *q = ctx;
    cpu_exec *ex = &q->ex;
    const cpu_plan *p = &q->plan;
    for (int32_t i = 0; i < p->n_steps; i++) {
        const cpu_step *st = &p->steps[i];
        if (st->barrier) {
            int stop = atomic_load_explicit(&ex->error, memory_order_relaxed) != 0;
            if (ith == 0 && HOST_HAS(abort_flag) && g.host->abort_flag && *g.host->abort_flag) stop = q->stop = 1;
            if (cpu_pool_barrier_or(ex->pool, nth, stop)) return;
        }
        if (st->solo) {
            if (ith != 0 || atomic_load_explicit(&ex->error, memory_order_relaxed)) continue;
        }
        const int me = st->solo ? 0 : ith, n = st->solo ? 1 : nth;
        switch (st->kind) {
        case STEP_MM_PREPARE: matmul_prepare(ex, st->node, me, n); break;
        case STEP_MM_RUN: matmul_run_xw(ex, st->node, st->xw, &p->counters[i].next, me, n); break;
        default:
            if (st->node->op == TSR_OP_MUL_MAT) matmul_compute(ex, st->node, me, n);
            else if (st->xw) mul_mat_id_compute_xw(ex, st->node, st->xw, me, n);
            else ops_compute(ex, st->node, me, n);
            break;
        }
    }
    if (ith == 0 && HOST_HAS(abort_flag) && g.host->abort_flag && *g.host->abort_flag) q->stop = 1;
}

/* Each decoding product of a constant weight reads the weight's x16 copy,
 * made here the first time (cpu_repack.h). A weight that cannot be copied
 * (out of memory) is read in place, as before. */
static void plan_repacked(cpu_queue *q) {
    for (int32_t i = 0; i < q->plan.n_steps; i++) {
        cpu_step *st = &q->plan.steps[i];
        const int mm = st->kind == STEP_MM_RUN && matmul_x_eligible(&g.kernels, st->node);
        const int moe = st->kind == STEP_OP && mul_mat_id_x_eligible(&g.kernels, st->node);
        if (!mm && !moe) continue;
        const tsr_tensor *w = st->node->src[0];
        const uint8_t *src = tensor_ptr(w);
        int fresh;
        cpu_xentry *e = cpu_xcache_get(&q->xc, w, src, &fresh);
        if (!e) continue;
        if (fresh) {
            /* every expert (ne[2]) repacked alone, one after the other */
            const int64_t n_groups = w->ne[1] / CPU_XROWS, E = mm ? 1 : w->ne[2];
            const size_t per = (size_t)n_groups * cpu_x_group_bytes(w->dtype, w->ne[0]);
            const size_t bytes = per * (size_t)E;
            e->x = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
            if (e->x) {
                for (int64_t x = 0; x < E; x++)
                    cpu_x_repack(w->dtype, src + x * w->nb[2], (size_t)w->nb[1], w->ne[0], 0, n_groups,
                                 (uint8_t *)e->x + (size_t)x * per);
                q->xc.bytes += bytes;
            }
        }
        st->xw = e->x;
    }
}

/* The queue's work area. From WORK_MAP_BYTES on it is a mapping of its
 * own whose pages are faulted in as it is made (MAP_POPULATE): a fresh
 * area's pages were each faulted in by the first compute that wrote
 * them, a fault apiece (about 2 us on this KVM guest: 0.3 ms of a 2.7 ms
 * first image encode for the synthetic Gemma 3's 800 KiB), where the
 * mapping call does it for a fraction of that. Every byte of the area is
 * there to be written (its size is the largest node's need). */
enum { WORK_MAP_BYTES = 256 * 1024 };

static void *work_alloc(size_t size) {
    if (size < WORK_MAP_BYTES) return aligned_alloc(64, size);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void work_free(void *p, size_t size) {
    if (!p) return;
    if (size < WORK_MAP_BYTES) free(p);
    else munmap(p, size);
}

static tsr_status queue_compute(tsr_queue *queue, const tsr_node *nodes, int32_t n_nodes) {
    cpu_queue *q = queue->impl;
    if (n_nodes < 0 || (n_nodes > 0 && !nodes)) return TSR_ERR_INVALID;
    int nth = q->n_threads; /* a 1.0 host never sets it: the host's count */
    if (nth < 1) nth = HOST_HAS(n_threads) && g.host->n_threads > 0 ? g.host->n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nth < 1) nth = 1;
    if (nth > CPU_POOL_MAX_THREADS) nth = CPU_POOL_MAX_THREADS;

    size_t need = 0;
    double cost = 0.0;
    for (int32_t i = 0; i < n_nodes; i++) {
        if (nodes[i].op == TSR_OP_NONE) continue;
        if (!node_supported(&nodes[i], NULL, 0) || !node_located(&nodes[i])) {
            plog(TSR_LOG_ERROR, "node %d (op %d, tensor '%s') is not supported by %s0", i, nodes[i].op,
                 ISA->plugin_name, nodes[i].dst && nodes[i].dst->name ? nodes[i].dst->name : "");
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
        void *p = work_alloc(size);
        if (!p) return TSR_ERR_NO_MEMORY;
        work_free(q->ex.work, q->ex.work_size);
        q->ex.work = p;
        q->ex.work_size = size;
    }
    if (!q->ex.pool && !(q->ex.pool = cpu_pool_create())) return TSR_ERR_NO_MEMORY;

    q->stop = 0;
    q->ex.k = &g.kernels;
    q->ex.exp_sub_sum = g.kernels.exp_sub_sum; /* vector softmax exp, or NULL */
    atomic_store(&q->ex.error, 0);
    /* the barrier count must equal the threads that run */
    q->ex.nth = cpu_pool_reserve(q->ex.pool, nth);
    if (cpu_plan_build(&q->plan, &g.kernels, nodes, n_nodes, q->ex.nth, g.plain_steps) != 0)
        return TSR_ERR_NO_MEMORY;
    if (!g.no_repack) plan_repacked(q);
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

/* Each queue keeps its own count, so contexts with different -t that
 * compute at the same time do not share one. */
static void queue_set_n_threads(tsr_queue *queue, int32_t n_threads) {
    cpu_queue *q = queue->impl;
    q->n_threads = n_threads > 0 ? n_threads : 0;
}

static void queue_destroy(tsr_queue *queue) {
    if (!queue) return;
    cpu_queue *q = queue->impl;
    cpu_pool_destroy(q->ex.pool);
    cpu_plan_free(&q->plan);
    cpu_xcache_free(&q->xc);
    work_free(q->ex.work, q->ex.work_size);
    free(q);
}

static const tsr_queue_api queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_synchronize,
    .destroy = queue_destroy,
    .set_n_threads = queue_set_n_threads,
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
    if (!node) return 0;
    /* No location check here: the host asks before it plans memory, so
     * tensors have neither buffer nor data yet. */
    char why[256];
    if (node_supported(node, why, sizeof why)) return 1;
    tsr_host_decline(g.host, node, why); /* ABI 1.1: shown by --explain */
    return 0;
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
    cpu_queue *q = calloc(1, sizeof *q);
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

static int32_t plugin_score(void) { return ISA->score(); }

void cpu_feature_list(const void *features, const cpu_feature_name *names, int n, char *out, size_t size) {
    size_t used = 0;
    if (size == 0) return;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        int on;
        memcpy(&on, (const char *)features + names[i].off, sizeof on);
        if (!on) continue;
        int w = snprintf(out + used, size - used, "%s%s", used ? " " : "", names[i].name);
        if (w < 0 || (size_t)w >= size - used) break;
        used += (size_t)w;
    }
}

static int level_usable(const cpu_level *l, unsigned have) { return (l->needs & have) == l->needs; }

/* "a, b or c": the distinct level names, for a warning. */
static void level_names(char *out, size_t size) {
    const char *names[16];
    int n = 0;
    for (int i = 0; i < ISA->n_levels && n < 16; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= !strcmp(names[j], ISA->levels[i].name);
        if (!seen) names[n++] = ISA->levels[i].name;
    }
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + used, size - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
        if (w < 0 || (size_t)w >= size - used) break;
        used += (size_t)w;
    }
}

/* The level to run: the best usable one, or the one level_env names
 * (never a level the CPU lacks: it falls back to the next usable one
 * below it, with a warning). NULL when none is usable. */
static const cpu_level *choose_level(unsigned have) {
    const cpu_level *best = NULL;
    for (int i = 0; i < ISA->n_levels && !best; i++)
        if (level_usable(&ISA->levels[i], have)) best = &ISA->levels[i];
    const char *env = getenv(ISA->level_env);
    if (!best || !env || !*env) return best;
    int last = -1;
    for (int i = 0; i < ISA->n_levels; i++) {
        if (strcmp(ISA->levels[i].name, env) != 0) continue;
        if (level_usable(&ISA->levels[i], have)) return &ISA->levels[i];
        last = i;
    }
    if (last < 0) {
        char names[160];
        level_names(names, sizeof names);
        plog(TSR_LOG_WARN, "%s='%s' is not %s; using %s", ISA->level_env, env, names, best->name);
        return best;
    }
    const cpu_level *below = best;
    for (int i = last + 1; i < ISA->n_levels; i++)
        if (level_usable(&ISA->levels[i], have)) {
            below = &ISA->levels[i];
            break;
        }
    plog(TSR_LOG_WARN, "%s=%s: this CPU lacks it; using %s", ISA->level_env, env, below->name);
    return below;
}

static tsr_status plugin_init(const tsr_host *host, char *reason, size_t reason_size) {
    memset(&g, 0, sizeof g);
    g.host = host;
    char cpu_name[96] = "";
    unsigned have = ISA->detect(g.features, sizeof g.features, cpu_name, sizeof cpu_name);
    const cpu_level *level = choose_level(have);
    if (!level) {
        if (reason && reason_size) ISA->why_none(g.features, reason, reason_size);
        g.n_devices = 0;
        return TSR_ERR_UNSUPPORTED;
    }
    const char *force = getenv(ISA->threads_env);
    g.force_threads = force && *force && strcmp(force, "0") != 0;
    const char *plain = getenv("TESSERA_CPU_PLAIN_STEPS");
    g.plain_steps = plain && *plain && strcmp(plain, "0") != 0;
    const char *repack = getenv("TESSERA_CPU_REPACK");
    g.no_repack = repack && strcmp(repack, "0") == 0;
    level->init(&g.kernels);
    ops_init();
    snprintf(g.description, sizeof g.description, "%s (%s kernels)", cpu_name, g.kernels.name);
    g_device.api = &device_api;
    g_device.impl = &g;
    g.n_devices = 1;
    if (reason && reason_size) reason[0] = 0;
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return g.n_devices; }

static tsr_device *plugin_device_get(int32_t index) { return index == 0 && g.n_devices == 1 ? &g_device : NULL; }

static void plugin_shutdown(void) { memset(&g, 0, sizeof g); }

static tsr_plugin plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = NULL, /* set from cpu_isa_this by tsr_plugin_entry */
    .version = "0.1.0",
    .score = plugin_score,
    .init = plugin_init,
    .device_count = plugin_device_count,
    .device_get = plugin_device_get,
    .shutdown = plugin_shutdown,
};

TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
    if (TSR_ABI_MAJOR_OF(host_abi_version) != TSR_ABI_MAJOR) return NULL;
    plugin.name = ISA->plugin_name;
    return &plugin;
}
