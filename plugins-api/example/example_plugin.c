/*
 * example_plugin — a Tessera backend plugin to copy and turn into yours.
 *
 * It has the shape of a discrete GPU or NPU: one accelerator device whose
 * buffers are "device memory" the host cannot address (here plain malloc,
 * standing in for your driver's allocations), so the host uploads weights
 * with -ngl and copies activations in and out through the queue. It
 * computes enough ops in plain C to run a llama-family model end to end:
 * GET_ROWS, ADD, MUL, SCALE, MUL_MAT (F32/F16/BF16 weights), RMS_NORM,
 * ROPE, SOFT_MAX, SILU, SWIGLU and CPY between float types; every other
 * node is declined with a reason and runs on the CPU.
 *
 * Where your code goes is marked "VENDOR:". Everything here includes only
 * tessera/plugin.h, tessera/plugin_util.h and tessera/plugin_check.h.
 * Build: see meson.build next to this file, or plugins-api/README.md.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>
#include <tessera/plugin_check.h>
#include <tessera/plugin_util.h>

#define EXAMPLE_NAME "example"
enum { MAX_ALLOC = 256u << 20, ALIGNMENT = 256 };

static const tsr_host *host; /* services from init until shutdown */

static void say(int level, const char *msg) {
    if (host && host->log) host->log(level, EXAMPLE_NAME, msg);
}

/* ------------------------------------------------------------- memory */

/* VENDOR: your device allocation (cl_mem, VkBuffer + memory, ...). */
struct tsr_buffer {
    unsigned char *mem;
    uint64_t size;
};

/* Address of element (i0, i1, i2, i3). Tensors always live in our buffers:
 * we told the host reads_host_memory = 0. */
static unsigned char *elem(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return t->buffer->mem + t->offset + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static float load(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const unsigned char *p = elem(t, i0, i1, i2, i3);
    uint16_t h;
    float f;
    switch (t->dtype) {
    case TSR_DTYPE_F16: memcpy(&h, p, 2); return tsr_fp16_to_f32(h);
    case TSR_DTYPE_BF16: memcpy(&h, p, 2); return tsr_bf16_to_f32(h);
    default: memcpy(&f, p, 4); return f;
    }
}

static void store(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    unsigned char *p = elem(t, i0, i1, i2, i3);
    uint16_t h;
    switch (t->dtype) {
    case TSR_DTYPE_F16: h = tsr_f32_to_fp16(v); memcpy(p, &h, 2); break;
    case TSR_DTYPE_BF16: h = tsr_f32_to_bf16(v); memcpy(p, &h, 2); break;
    default: memcpy(p, &v, 4); break;
    }
}

static int32_t load_i32(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2) {
    int32_t v;
    memcpy(&v, elem(t, i0, i1, i2, 0), 4);
    return v;
}

/* Loop over every element of t (dst), innermost first. */
#define FOR_EACH(t)                                  \
    for (int64_t i3 = 0; i3 < (t)->ne[3]; i3++)      \
        for (int64_t i2 = 0; i2 < (t)->ne[2]; i2++)  \
            for (int64_t i1 = 0; i1 < (t)->ne[1]; i1++) \
                for (int64_t i0 = 0; i0 < (t)->ne[0]; i0++)

/* -------------------------------------------------------------- kernels */

/* VENDOR: each function below is one kernel launch on your device. They
 * read every source element before writing the same dst element, so a dst
 * that shares memory with src0 (the host plans that) is fine. */

static void op_binary(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *b = n->src[1], *d = n->dst;
    FOR_EACH(d) {
        const float x = load(a, i0, i1, i2, i3);
        const float y = load(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        store(d, i0, i1, i2, i3, n->op == TSR_OP_ADD ? x + y : x * y);
    }
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

static void op_unary(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *b = n->n_src > 1 ? n->src[1] : NULL, *d = n->dst;
    const tsr_scale_params sp = tsr_scale_params_of(n); /* SCALE's */
    FOR_EACH(d) {
        const float x = load(a, i0, i1, i2, i3);
        float y = x;
        if (n->op == TSR_OP_SCALE) y = x * sp.scale + sp.bias;
        if (n->op == TSR_OP_SILU) y = silu(x);
        if (n->op == TSR_OP_SWIGLU) y = silu(x) * load(b, i0, i1, i2, i3);
        store(d, i0, i1, i2, i3, y);
    }
}

/* Rows: y = x / sqrt(mean(x^2) + eps). */
static void op_rms_norm(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *d = n->dst;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++) {
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    const double x = load(a, i0, i1, i2, i3);
                    sum += x * x;
                }
                const float scale = (float)(1.0 / sqrt(sum / (double)a->ne[0] + tsr_norm_params_of(n).eps));
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
                    store(d, i0, i1, i2, i3, load(a, i0, i1, i2, i3) * scale);
            }
}

/* dst[m, j, b2, b3] = sum_k w[k, m, b2/r2, b3/r3] * x[k, j, b2, b3]. */
static void op_mul_mat(const tsr_node *n) {
    const tsr_tensor *w = n->src[0], *x = n->src[1], *d = n->dst;
    const int64_t r2 = x->ne[2] / w->ne[2], r3 = x->ne[3] / w->ne[3];
    FOR_EACH(d) {
        double sum = 0.0;
        for (int64_t k = 0; k < w->ne[0]; k++)
            sum += (double)load(w, k, i0, i2 / r2, i3 / r3) * load(x, k, i1, i2, i3);
        store(d, i0, i1, i2, i3, (float)sum);
    }
}

/* dst[:, i, j, k] = src0[:, rows[i, j, k], j, k]; -1 on a row out of range. */
static int op_get_rows(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *rows = n->src[1], *d = n->dst;
    for (int64_t k = 0; k < d->ne[3]; k++)
        for (int64_t j = 0; j < d->ne[2]; j++)
            for (int64_t i = 0; i < d->ne[1]; i++) {
                const int32_t r = load_i32(rows, i, j, k);
                if (r < 0 || r >= a->ne[1]) return -1;
                for (int64_t i0 = 0; i0 < d->ne[0]; i0++) store(d, i0, i, j, k, load(a, i0, r, j, k));
            }
    return 0;
}

/* Element e of src0 to element e of dst, both counted as if contiguous. */
static void op_cpy(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *d = n->dst;
    FOR_EACH(a) {
        int64_t e = ((i3 * a->ne[2] + i2) * a->ne[1] + i1) * a->ne[0] + i0;
        const int64_t j0 = e % d->ne[0];
        e /= d->ne[0];
        const int64_t j1 = e % d->ne[1];
        e /= d->ne[1];
        store(d, j0, j1, e % d->ne[2], e / d->ne[2], load(a, i0, i1, i2, i3));
    }
}

/* Rows of src0 * scale + mask, softmax along ne[0] (no ALiBi: declined). */
static void op_soft_max(const tsr_node *n) {
    const tsr_tensor *a = n->src[0], *m = n->n_src > 1 ? n->src[1] : NULL, *d = n->dst;
    const float scale = tsr_soft_max_params_of(n).scale;
    for (int64_t i3 = 0; i3 < d->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < d->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < d->ne[1]; i1++) {
                float mx = -INFINITY;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    float v = load(a, i0, i1, i2, i3) * scale;
                    if (m) v += load(m, i0, i1, i2 % m->ne[2], i3 % m->ne[3]);
                    store(d, i0, i1, i2, i3, v);
                    if (v > mx) mx = v;
                }
                double sum = 0.0;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
                    const float e = mx == -INFINITY ? 0.0f : expf(load(d, i0, i1, i2, i3) - mx);
                    store(d, i0, i1, i2, i3, e);
                    sum += e;
                }
                const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
                for (int64_t i0 = 0; i0 < a->ne[0]; i0++) store(d, i0, i1, i2, i3, load(d, i0, i1, i2, i3) * inv);
            }
}

/* Rotary embedding without YaRN (ext_factor 0; declined otherwise): pair i
 * turns by theta_i = pos * freq_scale * base^(-2i/n_dims) / factor_i, both
 * outputs times attn_factor. theta advances by repeated multiplication, as
 * ggml does, so angles match the reference to the last bit. */
static void op_rope(const tsr_node *n) {
    const tsr_tensor *x = n->src[0], *pos = n->src[1], *ff = n->n_src > 2 ? n->src[2] : NULL, *d = n->dst;
    const tsr_rope_params rp = tsr_rope_params_of(n);
    const int32_t n_dims = rp.n_dims, neox = rp.mode == TSR_ROPE_NEOX;
    const float theta_scale = rp.theta_scale; /* freq_base^(-2/n_dims) */
    const float freq_scale = rp.freq_scale, attn_factor = rp.attn_factor;
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            const float p = (float)load_i32(pos, i2, 0, 0);
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
                for (int64_t i0 = n_dims; i0 < x->ne[0]; i0++) store(d, i0, i1, i2, i3, load(x, i0, i1, i2, i3));
                float theta = p;
                for (int64_t i = 0; i < n_dims / 2; i++, theta *= theta_scale) {
                    const float factor = ff ? load(ff, i, 0, 0, 0) : 1.0f;
                    const float angle = freq_scale * (theta / factor);
                    const float c = cosf(angle) * attn_factor, s = sinf(angle) * attn_factor;
                    const int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + n_dims / 2 : 2 * i + 1;
                    const float x0 = load(x, j0, i1, i2, i3), x1 = load(x, j1, i1, i2, i3);
                    store(d, j0, i1, i2, i3, x0 * c - x1 * s);
                    store(d, j1, i1, i2, i3, x0 * s + x1 * c);
                }
            }
        }
}

/* ---------------------------------------------------------- what we do */

/* The host validated the node (tsr_node_check) before asking: say only
 * whether THIS device computes it; NULL if so, else why not. VENDOR: your
 * kernels' limits go here (dtypes, sizes, parameters). */
static const char *cannot(const tsr_node *n) {
    for (int i = 0; i <= n->n_src; i++) {
        const tsr_tensor *t = i == 0 ? n->dst : n->src[i - 1];
        if (!t) continue;
        const int index = (n->op == TSR_OP_GET_ROWS || n->op == TSR_OP_ROPE) && i == 2;
        if (!tsr_dtype_is_float(t->dtype) && !(index && t->dtype == TSR_DTYPE_I32))
            return "quantized and integer tensors are left to the CPU (this example has no dequantizer)";
    }
    switch (n->op) {
    case TSR_OP_ADD: case TSR_OP_MUL: case TSR_OP_SCALE: case TSR_OP_MUL_MAT:
    case TSR_OP_RMS_NORM: case TSR_OP_SILU: case TSR_OP_SWIGLU: case TSR_OP_GET_ROWS:
    case TSR_OP_CPY:
        return NULL;
    case TSR_OP_SOFT_MAX:
        return tsr_soft_max_params_of(n).max_bias != 0.0f ? "ALiBi (max_bias) is not implemented" : NULL;
    case TSR_OP_ROPE:
        return tsr_rope_params_of(n).ext_factor != 0.0f ? "YaRN (ext_factor) is not implemented" : NULL;
    default: return "the example implements GET_ROWS, ADD, MUL, SCALE, MUL_MAT, RMS_NORM, ROPE, "
                    "SOFT_MAX, SILU, SWIGLU and CPY";
    }
}

/* A 1.0 host did not validate: check the node ourselves too (cheap). */
static int can_do(const tsr_node *n) { return tsr_node_check(n, NULL, 0) == 0 && cannot(n) == NULL; }

/* -------------------------------------------------------------- queue */

/* VENDOR: your command queue / stream. */
typedef struct example_queue {
    tsr_queue base;
    int32_t n_threads; /* set_n_threads: a CPU-side helper pool would use it */
} example_queue;

static tsr_status queue_compute(tsr_queue *q, const tsr_node *nodes, int32_t n_nodes) {
    (void)q;
    for (int32_t i = 0; i < n_nodes; i++) {
        const tsr_node *n = &nodes[i];
        if (host && host->abort_flag && *host->abort_flag) return TSR_ERR_ABORTED;
        if (!can_do(n)) return TSR_ERR_UNSUPPORTED;
        switch (n->op) {
        case TSR_OP_ADD: case TSR_OP_MUL: op_binary(n); break;
        case TSR_OP_SCALE: case TSR_OP_SILU: case TSR_OP_SWIGLU: op_unary(n); break;
        case TSR_OP_RMS_NORM: op_rms_norm(n); break;
        case TSR_OP_MUL_MAT: op_mul_mat(n); break;
        case TSR_OP_CPY: op_cpy(n); break;
        case TSR_OP_SOFT_MAX: op_soft_max(n); break;
        case TSR_OP_ROPE: op_rope(n); break;
        case TSR_OP_GET_ROWS:
            if (op_get_rows(n)) {
                say(TSR_LOG_ERROR, "GET_ROWS: a row index is out of range");
                return TSR_ERR_INVALID;
            }
            break;
        default: return TSR_ERR_UNSUPPORTED;
        }
    }
    /* VENDOR: a real device returns here with the work queued; synchronize
     * waits for it. */
    return TSR_OK;
}

static int in_range(const tsr_buffer *b, uint64_t off, uint64_t size) {
    return b && off <= b->size && size <= b->size - off;
}

/* Contract (plugin.h): the host may reuse src as soon as write returns, so a
 * device that copies asynchronously must stage src first. This one copies
 * at once. */
static tsr_status queue_write(tsr_queue *q, tsr_buffer *b, uint64_t off, const void *src, uint64_t size) {
    (void)q;
    if (!in_range(b, off, size)) return TSR_ERR_INVALID;
    memcpy(b->mem + off, src, size);
    return TSR_OK;
}

/* May return early; dst is valid after the next synchronize. */
static tsr_status queue_read(tsr_queue *q, tsr_buffer *b, uint64_t off, void *dst, uint64_t size) {
    (void)q;
    if (!in_range(b, off, size)) return TSR_ERR_INVALID;
    memcpy(dst, b->mem + off, size);
    return TSR_OK;
}

static tsr_status queue_synchronize(tsr_queue *q) {
    (void)q;
    return TSR_OK;
}

static void queue_destroy(tsr_queue *q) { free(q); }

static void queue_set_n_threads(tsr_queue *q, int32_t n) { ((example_queue *)q)->n_threads = n; }

static const tsr_queue_api queue_api = {
    .struct_size = sizeof(tsr_queue_api),
    .compute = queue_compute,
    .write = queue_write,
    .read = queue_read,
    .synchronize = queue_synchronize,
    .destroy = queue_destroy,
    .set_n_threads = queue_set_n_threads,
};

/* ------------------------------------------------------------- device */

static int device_open_count; /* VENDOR: your context, compiled kernels */

static tsr_status dev_get_info(tsr_device *d, tsr_device_info *info) {
    (void)d;
    if (!info || info->struct_size < offsetof(tsr_device_info, priority) + sizeof info->priority)
        return TSR_ERR_INVALID;
    info->kind = TSR_DEVICE_ACCEL;
    info->description = "Tessera example device (plain C in host memory)";
    info->features = "f32 f16 bf16";
    info->memory_total = 1ull << 30;
    info->memory_free = 1ull << 30;
    info->host_visible = 0;      /* the host cannot address our buffers */
    info->reads_host_memory = 0; /* and we cannot read the host's mmap */
    info->priority = 10;
    /* ABI 1.1 fields: only if the host's struct has them */
    if (TSR_HAS_FIELD(tsr_device_info, info->struct_size, max_alloc_size)) info->max_alloc_size = MAX_ALLOC;
    if (TSR_HAS_FIELD(tsr_device_info, info->struct_size, buffer_alignment)) info->buffer_alignment = ALIGNMENT;
    return TSR_OK;
}

static int32_t dev_supports_op(tsr_device *d, const tsr_node *n) {
    (void)d;
    const char *why = tsr_node_check(n, NULL, 0) ? "malformed node" : cannot(n);
    tsr_host_decline(host, n, why); /* ABI 1.1: shown by tessera run --explain */
    return why == NULL;
}

static tsr_status dev_buffer_alloc(tsr_device *d, uint64_t size, tsr_buffer **out) {
    (void)d;
    if (size > MAX_ALLOC) return TSR_ERR_NO_MEMORY; /* we said so in max_alloc_size */
    tsr_buffer *b = calloc(1, sizeof *b);
    if (!b) return TSR_ERR_NO_MEMORY;
    b->mem = malloc(size ? size : 1);
    if (!b->mem) {
        free(b);
        return TSR_ERR_NO_MEMORY;
    }
    b->size = size;
    *out = b;
    return TSR_OK;
}

static void dev_buffer_free(tsr_device *d, tsr_buffer *b) {
    (void)d;
    if (!b) return;
    free(b->mem);
    free(b);
}

static void *dev_buffer_host_ptr(tsr_device *d, tsr_buffer *b) {
    (void)d;
    (void)b;
    return NULL; /* device memory */
}

static tsr_status dev_queue_create(tsr_device *d, tsr_queue **out) {
    (void)d;
    example_queue *q = calloc(1, sizeof *q);
    if (!q) return TSR_ERR_NO_MEMORY;
    q->base.api = &queue_api;
    q->base.impl = q;
    q->n_threads = host ? host->n_threads : 1;
    *out = &q->base;
    return TSR_OK;
}

/* ABI 1.1: called once before the device is used (compile kernels here). */
static tsr_status dev_open(tsr_device *d, char *reason, size_t reason_size) {
    (void)d;
    (void)reason;
    (void)reason_size;
    device_open_count++;
    return TSR_OK;
}

static void dev_close(tsr_device *d) {
    (void)d;
    device_open_count--;
}

static const tsr_device_api device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = dev_get_info,
    .supports_op = dev_supports_op,
    .buffer_alloc = dev_buffer_alloc,
    .buffer_free = dev_buffer_free,
    .buffer_host_ptr = dev_buffer_host_ptr,
    .queue_create = dev_queue_create,
    .open = dev_open,
    .close = dev_close,
    /* claim_nodes, weight_size, weight_write: optional, left NULL here */
};

static tsr_device the_device = {.api = &device_api, .impl = NULL};

/* ------------------------------------------------------------- plugin */

static int32_t plugin_score(void) { return 1; } /* VENDOR: 0 if this build cannot run here */

static tsr_status plugin_init(const tsr_host *h, char *reason, size_t reason_size) {
    if (!h || h->struct_size < offsetof(tsr_host, n_threads) + sizeof h->n_threads) {
        snprintf(reason, reason_size, "host services are missing");
        return TSR_ERR_INVALID;
    }
    host = h;
    /* VENDOR: load your driver here (dlopen it), find devices; on failure
     * return a status with a one-line reason, never abort. */
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return 1; }

static tsr_device *plugin_device_get(int32_t i) { return i == 0 ? &the_device : NULL; }

static void plugin_shutdown(void) { host = NULL; }

static const tsr_plugin plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = EXAMPLE_NAME,
    .version = "1.0",
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
