/*
 * testdev — a test backend plugin built from plugins-api/ alone.
 *
 * One accelerator device whose memory is ordinary malloc'd host memory, but
 * which pretends otherwise: its buffers are NOT host-visible and its nodes do
 * NOT read plain host memory, so the scheduler must copy every input in and
 * every result out through the queue's write/read. It computes a subset of
 * the ops (ADD, MUL, MUL_MAT, F32 only); everything else must fall back.
 *
 * Build-time knobs (the test builds this file several times):
 *   TESTDEV_NAME        plugin name (default "testdev")
 *   TESTDEV_ABI_MAJOR   ABI major to claim (default TSR_ABI_MAJOR)
 *   TESTDEV_INIT_FAIL   init fails with a reason, as with no driver
 *   TESTDEV_SCORE       score() result (default 10)
 *   TESTDEV_REFUSE      tsr_plugin_entry returns NULL (cannot serve the host)
 *   TESTDEV_NO_ENTRY    export no tsr_plugin_entry at all
 *   TESTDEV_NO_DEVICES  init succeeds but finds no device (with a reason)
 *   TESTDEV_SMALL_TABLE claim a plugin table too small for this ABI
 *   TESTDEV_HOST_CPU    behave like a CPU backend instead: kind CPU, buffers
 *                       host-visible, nodes read plain host memory
 * At run time TESTDEV_MEMORY_KIB sets the memory the device reports.
 *   TESTDEV_CRASHABLE   die of SIGSEGV in device_count or supports_op when the
 *                       environment says TESTDEV_CRASH=device_count|supports_op
 *   TESTDEV_ASYNC       compute only records the nodes (copies of them) and
 *                       returns; they run at the queue's next synchronize,
 *                       write or read, as a GPU queue runs its commands later
 *   TESTDEV_PRIORITY    the device's priority (default 50)
 * testdev_set_clock() and testdev_log() (exported for the test only): every
 * node computed takes the next tick of a clock the test shares between
 * plugins, so the order in which two devices really ran is known.
 *
 * Built against the frozen ABI 1.0 header (tests/host/plugins/abi-1.0) the
 * plugin is exactly what a vendor built for 1.0. Built against the live
 * header (ABI 1.1) with TESTDEV_V11 it uses every 1.1 hook:
 *   - supports_op relies on the host's validation (tsr_node_check) and only
 *     says what it computes, giving reasons through tsr_host.decline;
 *   - max_alloc_size 4096 and buffer_alignment 128 (buffer_alloc refuses
 *     more than 4096 bytes);
 *   - set_n_threads: compute refuses to run on a queue never told its count;
 *   - open/close: supports_op, buffer_alloc and queue_create refuse to work
 *     on a device that was not opened;
 *   - claim_nodes: claims MUL_MAT followed by a SCALE of its result as one
 *     run (a "fused" product), although supports_op declines SCALE alone;
 *   - weight_size/weight_write: weights are stored XOR 0xA5 with 64 bytes
 *     of slack; kernels and read() undo it.
 * testdev_stats() (exported for the test only) counts the hook calls.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>

#if defined(TESTDEV_V11)
#if TSR_ABI_MINOR < 1
#error "TESTDEV_V11 needs the ABI 1.1 header"
#endif
#include <tessera/plugin_check.h>
enum { V11 = 1 };
#else
enum { V11 = 0 };
#endif

#ifndef TESTDEV_NAME
#define TESTDEV_NAME "testdev"
#endif
#ifndef TESTDEV_ABI_MAJOR
#define TESTDEV_ABI_MAJOR TSR_ABI_MAJOR
#endif
#ifndef TESTDEV_SCORE
#define TESTDEV_SCORE 10
#endif
#ifndef TESTDEV_PRIORITY
#define TESTDEV_PRIORITY 50
#endif
#ifdef TESTDEV_ASYNC
enum { ASYNC = 1 };
#else
enum { ASYNC = 0 };
#endif

enum { MAX_REPACKED = 16, REPACK_SLACK = 64, MAX_ALLOC = 4096, ALIGNMENT = 128 };

struct tsr_buffer {
    unsigned char *mem;
    uint64_t size;
    /* byte ranges holding repacked (XOR 0xA5) weights */
    uint64_t packed_begin[MAX_REPACKED], packed_end[MAX_REPACKED];
    int n_packed;
};

static const tsr_host *host;

/* Hook counters, read by the test through testdev_stats(). */
static struct {
    int opens, closes, claims, weight_writes, supports_asked, last_threads, open_now;
} stats;

static int is_packed(const tsr_buffer *b, uint64_t byte) {
    for (int i = 0; b && i < b->n_packed; i++)
        if (byte >= b->packed_begin[i] && byte < b->packed_end[i]) return 1;
    return 0;
}

/* ------------------------------------------------------------ compute */

#ifdef TESTDEV_HOST_CPU
enum { HOST_CPU = 1 };
#else
enum { HOST_CPU = 0 };
#endif

/* Address of a tensor's element (i0..i3). The accelerator build addresses
 * its own buffers only; the CPU build uses host addresses. */
static float *at(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    unsigned char *base = HOST_CPU ? (unsigned char *)t->data : t->buffer->mem + t->offset;
    return (float *)(base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

/* Every byte the tensor spans lies inside its buffer (CPU build: it has a
 * host address). */
static int in_buffer(const tsr_tensor *t) {
    if (HOST_CPU) return t && t->data;
    if (!t || !t->buffer) return 0;
    uint64_t span = 4;
    for (int d = 0; d < TSR_MAX_DIMS; d++) span += (uint64_t)(t->ne[d] - 1) * (uint64_t)t->nb[d];
    return t->offset <= t->buffer->size && span <= t->buffer->size - t->offset;
}

/* Read element (i0..i3), undoing the repacking of weights. */
static float rd(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float *p = at(t, i0, i1, i2, i3);
    if (!V11 || HOST_CPU || !is_packed(t->buffer, (uint64_t)((unsigned char *)p - t->buffer->mem))) return *p;
    unsigned char bytes[4];
    memcpy(bytes, p, 4);
    for (int i = 0; i < 4; i++) bytes[i] ^= 0xA5;
    float v;
    memcpy(&v, bytes, 4);
    return v;
}

static void binary(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *b = n->src[1], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++) {
                    float x = rd(a, i0, i1, i2, i3);
                    float y = rd(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                    *at(d, i0, i1, i2, i3) = n->op == TSR_OP_ADD ? x + y : x * y;
                }
}

static void mul_mat(const tsr_node *n) {
    const tsr_tensor *w = n->src[0], *x = n->src[1], *d = n->dst;
    const int64_t r2 = d->ne[2] / w->ne[2], r3 = d->ne[3] / w->ne[3];
    for (int64_t b3 = 0; b3 < d->ne[3]; b3++)
        for (int64_t b2 = 0; b2 < d->ne[2]; b2++)
            for (int64_t j = 0; j < d->ne[1]; j++)
                for (int64_t i = 0; i < d->ne[0]; i++) {
                    double sum = 0;
                    for (int64_t k = 0; k < w->ne[0]; k++)
                        sum += (double)rd(w, k, i, b2 / r2, b3 / r3) * rd(x, k, j, b2, b3);
                    *at(d, i, j, b2, b3) = (float)sum;
                }
}

/* dst = src0 * fparams[0] + fparams[1]; only inside a claimed run. */
static void scale(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++)
                    *at(d, i0, i1, i2, i3) = rd(a, i0, i1, i2, i3) * n->fparams[0] + n->fparams[1];
}

#if defined(TESTDEV_V11)
/* ABI 1.1: the host validated the node; say only what this device computes,
 * and why not. */
static const char *cannot(const tsr_node *n) {
    if (n->op == TSR_OP_SCALE) return "SCALE only inside a claimed MUL_MAT+SCALE run";
    if (n->op != TSR_OP_ADD && n->op != TSR_OP_MUL && n->op != TSR_OP_MUL_MAT)
        return TESTDEV_NAME " computes ADD, MUL and MUL_MAT only";
    for (int i = 0; i < n->n_src; i++)
        if (n->src[i] && n->src[i]->dtype != TSR_DTYPE_F32) return TESTDEV_NAME " computes F32 only";
    if (n->dst->dtype != TSR_DTYPE_F32) return TESTDEV_NAME " computes F32 only";
    return NULL;
}

static int32_t supports(const tsr_node *n) {
    /* The host checked the node; a 1.0 host would not have: check again. */
    return tsr_node_check(n, NULL, 0) == 0 && cannot(n) == NULL;
}
#else
/* Truthful for the exact node: op, dtypes and every shape must fit. */
static int32_t supports(const tsr_node *n) {
    if (n->op != TSR_OP_ADD && n->op != TSR_OP_MUL && n->op != TSR_OP_MUL_MAT) return 0;
    if (n->n_src != 2 || !n->dst || !n->src[0] || !n->src[1]) return 0;
    const tsr_tensor *a = n->src[0], *b = n->src[1], *d = n->dst;
    if (a->dtype != TSR_DTYPE_F32 || b->dtype != TSR_DTYPE_F32 || d->dtype != TSR_DTYPE_F32)
        return 0;
    for (int i = 0; i < TSR_MAX_DIMS; i++)
        if (a->ne[i] <= 0 || b->ne[i] <= 0 || d->ne[i] <= 0) return 0;
    if (n->op == TSR_OP_MUL_MAT) {
        return a->ne[0] == b->ne[0] && d->ne[0] == a->ne[1] && d->ne[1] == b->ne[1] &&
               d->ne[2] == b->ne[2] && d->ne[3] == b->ne[3] && b->ne[2] % a->ne[2] == 0 &&
               b->ne[3] % a->ne[3] == 0;
    }
    for (int i = 0; i < TSR_MAX_DIMS; i++)
        if (d->ne[i] != a->ne[i] || a->ne[i] % b->ne[i] != 0) return 0;
    return 1;
}
#endif

/* The clock the test shares between plugins, and which op ran at which tick. */
enum { MAX_LOG = 64, MAX_PENDING = 64 };
static int *shared_clock;
static int log_op[MAX_LOG], log_tick[MAX_LOG], n_log;

static void log_node(const tsr_node *n) {
    if (!shared_clock || n_log == MAX_LOG) return;
    log_op[n_log] = n->op;
    log_tick[n_log++] = ++*shared_clock;
}

TSR_PLUGIN_EXPORT void testdev_set_clock(int *clock);
TSR_PLUGIN_EXPORT void testdev_set_clock(int *clock) {
    shared_clock = clock;
    n_log = 0;
}

/* ops[i] ran at ticks[i]; returns how many were logged. */
TSR_PLUGIN_EXPORT int testdev_log(int *ops, int *ticks, int max);
TSR_PLUGIN_EXPORT int testdev_log(int *ops, int *ticks, int max) {
    int n = n_log < max ? n_log : max;
    memcpy(ops, log_op, (size_t)n * sizeof *ops);
    memcpy(ticks, log_tick, (size_t)n * sizeof *ticks);
    return n;
}

/* A node recorded by an asynchronous queue, with its own copies of the
 * tensors (the host reuses its node array once compute returns). */
typedef struct pending_node {
    tsr_node node;
    tsr_tensor t[1 + TSR_MAX_SRC];
} pending_node;

/* The queue: its thread count (ABI 1.1 set_n_threads; 0 = never told) and,
 * for TESTDEV_ASYNC, the nodes that have not run yet. */
typedef struct testdev_queue {
    tsr_queue base;
    int32_t n_threads;
    pending_node pending[MAX_PENDING];
    int32_t n_pending;
} testdev_queue;

static tsr_status run_nodes(const tsr_node *nodes, int32_t n_nodes);

/* TESTDEV_ASYNC: run what compute recorded (before any later queue work). */
static tsr_status flush(testdev_queue *q) {
    tsr_node nodes[MAX_PENDING];
    for (int32_t i = 0; i < q->n_pending; i++) nodes[i] = q->pending[i].node;
    tsr_status st = run_nodes(nodes, q->n_pending);
    q->n_pending = 0;
    return st;
}

static tsr_status record(testdev_queue *q, const tsr_node *nodes, int32_t n_nodes) {
    if (n_nodes > MAX_PENDING - q->n_pending) {
        tsr_status st = flush(q);
        if (st != TSR_OK) return st;
        if (n_nodes > MAX_PENDING) return run_nodes(nodes, n_nodes);
    }
    for (int32_t i = 0; i < n_nodes; i++) {
        pending_node *p = &q->pending[q->n_pending++];
        p->node = nodes[i];
        p->t[0] = *nodes[i].dst;
        p->node.dst = &p->t[0];
        for (int k = 0; k < nodes[i].n_src && k < TSR_MAX_SRC; k++) {
            if (!nodes[i].src[k]) continue;
            p->t[1 + k] = *nodes[i].src[k];
            p->node.src[k] = &p->t[1 + k];
        }
    }
    return TSR_OK;
}

static tsr_status queue_compute(tsr_queue *q, const tsr_node *nodes, int32_t n_nodes) {
    testdev_queue *tq = (testdev_queue *)q;
    if (V11 && tq->n_threads < 1) {
        if (host && host->log) host->log(TSR_LOG_ERROR, TESTDEV_NAME, "compute before set_n_threads");
        return TSR_ERR_INVALID;
    }
    if (ASYNC) return record(tq, nodes, n_nodes);
    return run_nodes(nodes, n_nodes);
}

static tsr_status run_nodes(const tsr_node *nodes, int32_t n_nodes) {
    for (int32_t i = 0; i < n_nodes; i++) {
        const tsr_node *n = &nodes[i];
        if (host && host->abort_flag && *host->abort_flag) return TSR_ERR_ABORTED;
        /* a SCALE right after its MUL_MAT was claimed as one run */
        const int claimed = V11 && n->op == TSR_OP_SCALE && i > 0 && nodes[i - 1].op == TSR_OP_MUL_MAT;
        if (!claimed && !supports(n)) return TSR_ERR_UNSUPPORTED;
        /* This device cannot see host memory: every tensor must be ours. */
        if (!in_buffer(n->dst) || !in_buffer(n->src[0]) || (n->n_src > 1 && !in_buffer(n->src[1]))) {
            if (host && host->log)
                host->log(TSR_LOG_ERROR, TESTDEV_NAME, "tensor outside device buffers");
            return TSR_ERR_INVALID;
        }
        if (n->op == TSR_OP_MUL_MAT)
            mul_mat(n);
        else if (n->op == TSR_OP_SCALE)
            scale(n);
        else
            binary(n);
        log_node(n);
    }
    return TSR_OK;
}

static tsr_status queue_write(tsr_queue *q, tsr_buffer *b, uint64_t off, const void *src,
                              uint64_t size) {
    tsr_status st = flush((testdev_queue *)q); /* work on one queue runs in call order */
    if (st != TSR_OK) return st;
    if (!b || off > b->size || size > b->size - off) return TSR_ERR_INVALID;
    memcpy(b->mem + off, src, size);
    return TSR_OK;
}

static tsr_status queue_read(tsr_queue *q, tsr_buffer *b, uint64_t off, void *dst,
                             uint64_t size) {
    tsr_status st = flush((testdev_queue *)q);
    if (st != TSR_OK) return st;
    if (!b || off > b->size || size > b->size - off) return TSR_ERR_INVALID;
    memcpy(dst, b->mem + off, size);
    /* repacked weights read back in their plain form (ABI 1.1 contract) */
    for (uint64_t i = 0; V11 && i < size; i++)
        if (is_packed(b, off + i)) ((unsigned char *)dst)[i] ^= 0xA5;
    return TSR_OK;
}

static tsr_status queue_sync(tsr_queue *q) { return flush((testdev_queue *)q); }

static void queue_destroy(tsr_queue *q) { free(q); }

#if defined(TESTDEV_V11)
static void queue_set_threads(tsr_queue *q, int32_t n) {
    ((testdev_queue *)q)->n_threads = n;
    stats.last_threads = n;
}
#endif

static const tsr_queue_api queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_sync,
    .destroy = queue_destroy,
#if defined(TESTDEV_V11)
    .set_n_threads = queue_set_threads,
#endif
};

/* ------------------------------------------------------------- device */

static tsr_status dev_info(tsr_device *d, tsr_device_info *info) {
    (void)d;
    if (info->struct_size < sizeof *info) return TSR_ERR_INVALID;
    info->kind = HOST_CPU ? TSR_DEVICE_CPU : TSR_DEVICE_ACCEL;
    info->description = "Tessera test device (" TESTDEV_NAME ")";
    info->features = "add mul mul_mat";
    /* TESTDEV_MEMORY_KIB: a small device, so the host's fit is forced */
    const char *kib = getenv("TESTDEV_MEMORY_KIB");
    info->memory_total = kib && kib[0] ? strtoull(kib, NULL, 10) * 1024u : 1u << 30;
    info->memory_free = info->memory_total;
    info->host_visible = HOST_CPU;
    info->reads_host_memory = HOST_CPU;
    info->priority = TESTDEV_PRIORITY;
#if defined(TESTDEV_V11)
    /* fields the caller's struct has (a 1.0 host's is shorter) */
    if (TSR_HAS_FIELD(tsr_device_info, info->struct_size, max_alloc_size)) info->max_alloc_size = MAX_ALLOC;
    if (TSR_HAS_FIELD(tsr_device_info, info->struct_size, buffer_alignment)) info->buffer_alignment = ALIGNMENT;
#endif
    return TSR_OK;
}

/* TESTDEV_CRASHABLE: die where the environment says. */
static void maybe_crash(const char *where) {
#ifdef TESTDEV_CRASHABLE
    const char *e = getenv("TESTDEV_CRASH");
    if (e && !strcmp(e, where)) raise(SIGSEGV);
#else
    (void)where;
#endif
}

static int32_t dev_supports(tsr_device *d, const tsr_node *n) {
    (void)d;
    maybe_crash("supports_op");
    stats.supports_asked++;
#if defined(TESTDEV_V11)
    if (!stats.open_now) return 0;
    const char *why = tsr_node_check(n, NULL, 0) ? "malformed node" : cannot(n);
    tsr_host_decline(host, n, why);
    return why == NULL;
#else
    return supports(n);
#endif
}

static tsr_status dev_alloc(tsr_device *d, uint64_t size, tsr_buffer **out) {
    (void)d;
    if (V11 && (!stats.open_now || size > MAX_ALLOC)) return TSR_ERR_NO_MEMORY;
    tsr_buffer *b = calloc(1, sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    b->mem = calloc(1, size ? size : 1);
    if (!b->mem) {
        free(b);
        return TSR_ERR_NO_MEMORY;
    }
    b->size = size;
    *out = b;
    return TSR_OK;
}

static void dev_free(tsr_device *d, tsr_buffer *b) {
    (void)d;
    if (!b) return;
    free(b->mem);
    free(b);
}

static void *dev_host_ptr(tsr_device *d, tsr_buffer *b) {
    (void)d;
    return HOST_CPU && b ? b->mem : NULL; /* the accelerator: not host-visible, on purpose */
}

static tsr_status dev_queue(tsr_device *d, tsr_queue **out) {
    (void)d;
    if (V11 && !stats.open_now) return TSR_ERR_DEVICE;
    testdev_queue *q = calloc(1, sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    q->base.api = &queue_api;
    q->base.impl = q;
    *out = &q->base;
    return TSR_OK;
}

#if defined(TESTDEV_V11)
static tsr_status dev_open(tsr_device *d, char *reason, size_t reason_size) {
    (void)d;
    if (getenv("TESTDEV_OPEN_FAIL")) {
        snprintf(reason, reason_size, "TESTDEV_OPEN_FAIL is set");
        return TSR_ERR_DEVICE;
    }
    stats.opens++;
    stats.open_now = 1;
    return TSR_OK;
}

static void dev_close(tsr_device *d) {
    (void)d;
    stats.closes++;
    stats.open_now = 0;
}

/* A MUL_MAT and the SCALE of its result: one run ("fused"). */
static int32_t dev_claim(tsr_device *d, const tsr_node *nodes, int32_t n) {
    (void)d;
    if (n < 2 || nodes[0].op != TSR_OP_MUL_MAT || nodes[1].op != TSR_OP_SCALE) return 0;
    if (nodes[1].src[0] != nodes[0].dst || cannot(&nodes[0])) return 0;
    if (nodes[1].src[0]->dtype != TSR_DTYPE_F32 || nodes[1].dst->dtype != TSR_DTYPE_F32) return 0;
    stats.claims++;
    return 2;
}

static uint64_t weight_bytes(const tsr_tensor *t) {
    return (uint64_t)tsr_tensor_nelements(t) * tsr_dtype_block_bytes(t->dtype) / tsr_dtype_block_size(t->dtype);
}

static uint64_t dev_weight_size(tsr_device *d, const tsr_tensor *t) {
    (void)d;
    return weight_bytes(t) + REPACK_SLACK;
}

static tsr_status dev_weight_write(tsr_device *d, tsr_buffer *b, uint64_t off, const tsr_tensor *t,
                                   const void *src) {
    (void)d;
    const uint64_t n = weight_bytes(t);
    if (!b || t->dtype != TSR_DTYPE_F32 || off > b->size || n > b->size - off || b->n_packed == MAX_REPACKED)
        return TSR_ERR_INVALID;
    for (uint64_t i = 0; i < n; i++) b->mem[off + i] = ((const unsigned char *)src)[i] ^ 0xA5;
    b->packed_begin[b->n_packed] = off;
    b->packed_end[b->n_packed++] = off + n;
    stats.weight_writes++;
    return TSR_OK;
}

TSR_PLUGIN_EXPORT void testdev_stats(int out[7]);
TSR_PLUGIN_EXPORT void testdev_stats(int out[7]) {
    const int v[7] = {stats.opens, stats.closes, stats.claims, stats.weight_writes, stats.supports_asked,
                      stats.last_threads, stats.open_now};
    memcpy(out, v, sizeof v);
}
#endif

static const tsr_device_api device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = dev_info,
    .supports_op = dev_supports,
    .buffer_alloc = dev_alloc,
    .buffer_free = dev_free,
    .buffer_host_ptr = dev_host_ptr,
    .queue_create = dev_queue,
#if defined(TESTDEV_V11)
    .open = dev_open,
    .close = dev_close,
    .claim_nodes = dev_claim,
    .weight_size = dev_weight_size,
    .weight_write = dev_weight_write,
#endif
};

static tsr_device the_device = {.api = &device_api, .impl = NULL};

/* ------------------------------------------------------------- plugin */

static int32_t score(void) { return TESTDEV_SCORE; }

static tsr_status init(const tsr_host *h, char *reason, size_t reason_size) {
    host = h;
#ifdef TESTDEV_INIT_FAIL
    if (reason && reason_size) {
        const char msg[] = "no test device driver (built with TESTDEV_INIT_FAIL)";
        size_t n = sizeof msg < reason_size ? sizeof msg : reason_size;
        memcpy(reason, msg, n);
        reason[n - 1] = '\0';
    }
    return TSR_ERR_DEVICE;
#else
#ifdef TESTDEV_NO_DEVICES
    if (reason && reason_size) {
        const char msg[] = "no test device present (built with TESTDEV_NO_DEVICES)";
        size_t n = sizeof msg < reason_size ? sizeof msg : reason_size;
        memcpy(reason, msg, n);
        reason[n - 1] = '\0';
    }
#else
    (void)reason;
    (void)reason_size;
#endif
    return TSR_OK;
#endif
}

#ifdef TESTDEV_NO_DEVICES
static int32_t device_count(void) { return 0; }
#else
static int32_t device_count(void) {
    maybe_crash("device_count");
    return 1;
}
#endif

static tsr_device *device_get(int32_t i) { return i == 0 ? &the_device : NULL; }

static void shutdown(void) { host = NULL; }

static const tsr_plugin plugin = {
    .abi_version = ((uint32_t)TESTDEV_ABI_MAJOR << 16) | TSR_ABI_MINOR,
#ifdef TESTDEV_SMALL_TABLE
    .struct_size = 16,
#else
    .struct_size = sizeof(tsr_plugin),
#endif
    .name = TESTDEV_NAME,
    .version = "1.0",
    .score = score,
    .init = init,
    .device_count = device_count,
    .device_get = device_get,
    .shutdown = shutdown,
};

#ifdef TESTDEV_NO_ENTRY
TSR_PLUGIN_EXPORT const tsr_plugin *testdev_misnamed_entry(uint32_t host_abi_version);
TSR_PLUGIN_EXPORT const tsr_plugin *testdev_misnamed_entry(uint32_t host_abi_version) {
#else
TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
#endif
    (void)host_abi_version; /* answer every host: the host must check the major */
#ifdef TESTDEV_REFUSE
    if (host_abi_version != 0) return NULL; /* always, for any real host */
#endif
    return &plugin;
}
