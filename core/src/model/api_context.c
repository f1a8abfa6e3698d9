/* Public API: contexts (KV cache + scheduler) and their sequences; decoding
 * is in decode.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <tessera/plugin_util.h>

#include "model/public.h"
#include "host/host_log.h"
#include "tensor/dtype.h"
#include "util/error.h"

double tessera_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

tessera_context_params tessera_context_default_params(void) {
    return (tessera_context_params){
        .n_ctx = 0,
        .n_batch = 512,
        .n_threads = 0,
        .kv_type = TESSERA_KV_F16,
        .type_k = TESSERA_KV_F16,
        .type_v = TESSERA_KV_F16,
        .flash_attn = TESSERA_FLASH_ATTN_OFF,
        .n_seq_max = 1,
        .pooling = TESSERA_POOLING_UNSPECIFIED};
}

/* tessera_kv_type -> GGUF type number, in enum order. */
static const int32_t kv_type_dtype[TESSERA_KV_TYPE_COUNT] = {
    [TESSERA_KV_F16] = TSR_DTYPE_F16,   [TESSERA_KV_F32] = TSR_DTYPE_F32,   [TESSERA_KV_BF16] = TSR_DTYPE_BF16,
    [TESSERA_KV_Q8_0] = TSR_DTYPE_Q8_0, [TESSERA_KV_Q4_0] = TSR_DTYPE_Q4_0, [TESSERA_KV_Q4_1] = TSR_DTYPE_Q4_1,
    [TESSERA_KV_Q5_0] = TSR_DTYPE_Q5_0, [TESSERA_KV_Q5_1] = TSR_DTYPE_Q5_1, [TESSERA_KV_IQ4_NL] = TSR_DTYPE_IQ4_NL,
};
static const char *const kv_type_names[TESSERA_KV_TYPE_COUNT] = {
    "f16", "f32", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
};

int32_t context_kv_dtype(tessera_kv_type type) {
    return (unsigned)type < TESSERA_KV_TYPE_COUNT ? kv_type_dtype[type] : TSR_DTYPE_F16;
}

const char *tessera_kv_type_name(tessera_kv_type type) {
    return (unsigned)type < TESSERA_KV_TYPE_COUNT ? kv_type_names[type] : NULL;
}

int tessera_kv_type_from_name(const char *name) {
    for (int i = 0; name && i < TESSERA_KV_TYPE_COUNT; i++)
        if (!strcasecmp(name, kv_type_names[i])) return i;
    return -1;
}

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int32_t)n : 1;
}

/* Whether dev can write the cache itself (CPY of F32 rows into the cache
 * type). A device that cannot keeps its layers' cache in host memory, where
 * the CPU writes it and the scheduler copies what the device reads. */
static bool device_writes_cache(host_device *dev, int32_t kv_dtype, int64_t n_embd) {
    tsr_tensor src = {.dtype = TSR_DTYPE_F32, .ne = {n_embd, 1, 1, 1}, .name = "k"};
    tsr_tensor dst = {.dtype = kv_dtype, .ne = {n_embd, 1, 1, 1}, .name = "k_cache"};
    src.nb[0] = 4;
    dst.nb[0] = (uint64_t)tsr_dtype_block_bytes(kv_dtype);
    src.nb[1] = 4 * (uint64_t)n_embd;
    dst.nb[1] = kv_row_bytes(kv_dtype, n_embd);
    for (int d = 2; d < TSR_MAX_DIMS; d++) {
        src.nb[d] = src.nb[d - 1];
        dst.nb[d] = dst.nb[d - 1];
    }
    tsr_node node = {.op = TSR_OP_CPY, .n_src = 1, .dst = &dst, .src = {&src}};
    return host_device_supports(dev, &node, NULL, 0);
}

/* Whether dev computes a FLASH_ATTN node over this model's cache types (one
 * query, one cell: the dtypes and head sizes are what devices decide on). */
static bool device_runs_flash_attn(host_device *d, const model_hparams *hp, int32_t dtype_k, int32_t dtype_v) {
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, bs = 32;
    tsr_tensor q = {.dtype = TSR_DTYPE_F32, .ne = {D, 1, H, 1}, .name = "q"};
    tsr_tensor k = {.dtype = dtype_k, .ne = {D, bs, Hkv, 1}, .name = "k_cache"};
    tsr_tensor v = {.dtype = dtype_v, .ne = {D, bs, Hkv, 1}, .name = "v_cache"};
    tsr_tensor mask = {.dtype = TSR_DTYPE_F32, .ne = {bs, 1, 1, 1}, .name = "mask"};
    tsr_tensor out = {.dtype = TSR_DTYPE_F32, .ne = {D, H, 1, 1}, .name = "fattn"};
    tsr_tensor *all[] = {&q, &k, &v, &mask, &out};
    for (int i = 0; i < 5; i++) {
        tsr_tensor *t = all[i];
        t->nb[0] = (uint64_t)tsr_dtype_block_bytes(t->dtype);
        t->nb[1] = kv_row_bytes(t->dtype, t->ne[0]);
        if (t == &k || t == &v) { /* rows of cells hold every kv head */
            t->nb[1] = kv_row_bytes(t->dtype, D * Hkv);
            t->nb[2] = kv_row_bytes(t->dtype, D);
        } else {
            t->nb[2] = t->nb[1] * (uint64_t)t->ne[1];
        }
        t->nb[3] = t->nb[2] * (uint64_t)t->ne[2];
    }
    tsr_node node = {.op = TSR_OP_FLASH_ATTN, .n_src = 4, .dst = &out, .src = {&q, &k, &v, &mask}};
    tsr_flash_attn_params fa = {.scale = 1.0f};
    tsr_flash_attn_params_put(&fa, node.iparams, node.fparams);
    return host_device_supports(d, &node, NULL, 0);
}

/* -fa: on and off as asked; auto is on when every device of the model
 * computes FLASH_ATTN over these cache types, and with a quantized V cache
 * (which needs it; what a device declines falls back). */
static bool context_flash_attn(const tessera_model *tm, const tessera_context_params *p, int32_t dtype_k,
                               int32_t dtype_v) {
    if (p->flash_attn != TESSERA_FLASH_ATTN_AUTO) return p->flash_attn == TESSERA_FLASH_ATTN_ON;
    if (tsr_dtype_block_size(dtype_v) != 1) return true;
    bool all = true;
    for (int32_t i = 0; i < tm->n_devices; i++) {
        bool yes = device_runs_flash_attn(tm->devices[i], &tm->m->hp, dtype_k, dtype_v);
        if (p->verbose && !yes)
            host_log_printf(TESSERA_LOG_INFO,
                            "tessera: flash attention auto: %s does not compute it with K %s, V %s\n",
                            tm->devices[i]->name, dtype_name(dtype_k), dtype_name(dtype_v));
        all = all && yes;
    }
    return all;
}

/* Cells of sliding-window layers: each sequence's window, plus a micro-batch
 * (its tokens see up to n_swa - 1 positions before the first of them),
 * rounded up to 256 cells as llama.cpp does. 0: no window. */
int32_t context_swa_cells(int32_t n_swa, uint32_t n_seq, uint32_t n_batch) {
    if (n_swa <= 0) return 0;
    int64_t n = (int64_t)n_swa * n_seq + n_batch;
    n = (n + 255) / 256 * 256;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

/* p with its zeros replaced by defaults (n_ctx: the training context;
 * K/V types: kv_type, f32 for encoders), then checked. */
static int context_params_resolve(const model *m, tessera_context_params *p) {
    if (p->n_ctx == 0) p->n_ctx = (uint32_t)m->hp.n_ctx_train;
    if (p->n_ctx > (1u << 24)) return error_set("context: n_ctx %u is too large", p->n_ctx);
    if (m->pos_embd && p->n_ctx > (uint64_t)m->pos_embd->ne[1])
        return error_set("context: n_ctx %u is more than the %lld positions %s learned (-c)", p->n_ctx,
                         (long long)m->pos_embd->ne[1], m->hp.arch->name);
    if (p->n_batch == 0) p->n_batch = 512;
    if (p->n_batch > p->n_ctx) p->n_batch = p->n_ctx;
    if (p->n_threads < 0) return error_set("context: n_threads %d is negative", p->n_threads);
    if (p->n_threads == 0) p->n_threads = default_threads();
    if (p->n_seq_max == 0) p->n_seq_max = 1;
    if (p->n_seq_max > TESSERA_MAX_SEQ)
        return error_set("context: n_seq_max %u is more than %d sequences", p->n_seq_max, TESSERA_MAX_SEQ);
    if (p->type_k == TESSERA_KV_F16) p->type_k = p->kv_type;
    if (p->type_v == TESSERA_KV_F16) p->type_v = p->kv_type;
    /* An encoder keeps its K and V in f32 unless asked otherwise: llama.cpp
     * computes its attention without a cache, on f32 K and V. */
    if (!m->hp.causal_attn && p->type_k == TESSERA_KV_F16 && p->type_v == TESSERA_KV_F16)
        p->type_k = p->type_v = TESSERA_KV_F32;
    if (!tessera_kv_type_name(p->type_k) || !tessera_kv_type_name(p->type_v))
        return error_set("context: unknown KV cache type %d (f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)",
                         (int)(tessera_kv_type_name(p->type_k) ? p->type_v : p->type_k));
    if ((unsigned)p->flash_attn > TESSERA_FLASH_ATTN_AUTO)
        return error_set("context: flash_attn %d is not off (0), on (1) or auto (2)", (int)p->flash_attn);
    return 0;
}

/* The KV cache for p: the cache of an offloaded layer lives with its
 * weights when that device can write it, the others in host memory. */
static kv_cache *context_kv_new(const model *m, const tessera_context_params *p, bool fa) {
    const int32_t n_layer = m->hp.n_layer;
    const int32_t dtype_k = kv_type_dtype[p->type_k], dtype_v = kv_type_dtype[p->type_v];
    const int64_t n_embd_kv = (int64_t)m->hp.head_dim * m->hp.n_head_kv;
    tsr_device **layer_dev = calloc((size_t)n_layer, sizeof *layer_dev);
    int32_t *layer_home = calloc((size_t)n_layer, sizeof *layer_home);
    bool *layer_swa = calloc((size_t)n_layer, sizeof *layer_swa);
    int64_t *rs_floats = m->hp.arch->state_floats ? calloc((size_t)n_layer, sizeof *rs_floats) : NULL;
    kv_cache *kv = NULL;
    if (!layer_dev || !layer_home || !layer_swa || (m->hp.arch->state_floats && !rs_floats)) {
        error_set("context: out of memory");
        goto done;
    }
    host_device *gpu = m->gpu && m->gpu_device >= 0 ? host_device_get(m->gpu_device) : NULL;
    bool kv_on_gpu =
        gpu && device_writes_cache(gpu, dtype_k, n_embd_kv) && device_writes_cache(gpu, dtype_v, n_embd_kv);
    if (m->gpu && m->n_gpu_layers > 0 && !kv_on_gpu)
        host_log(TSR_LOG_INFO, "model", "the GPU device cannot write the KV cache: keeping it in host memory");
    for (int32_t il = 0; il < n_layer; il++) {
        layer_home[il] = kv_on_gpu ? model_layer_device(m, il) : -1;
        layer_dev[il] = layer_home[il] >= 0 ? m->gpu : NULL;
        layer_swa[il] = m->layers[il].swa;
        if (rs_floats) rs_floats[il] = m->hp.arch->state_floats(&m->hp, il);
    }
    kv_cache_params kp = {
        .n_layer = n_layer,
        .n_ctx = (int32_t)p->n_ctx,
        .n_embd_k = m->hp.head_dim * m->hp.n_head_kv,
        .n_embd_v = m->hp.head_dim * m->hp.n_head_kv,
        .head_dim = m->hp.head_dim,
        .dtype_k = dtype_k,
        .dtype_v = dtype_v,
        .flash_attn = fa,
        .rotation = KV_ROT_AUTO, /* block types get Hadamard-rotated heads (kv.h) */
        .layer_device = layer_dev,
        .layer_home = layer_home,
        .layer_swa = layer_swa,
        .n_swa = m->hp.n_swa,
        .n_cells_swa = p->swa_full ? 0 : context_swa_cells(m->hp.n_swa, p->n_seq_max, p->n_batch),
        .rs_layer_floats = rs_floats, /* one state per sequence of n_seq_max */
        .rs_slots = (int32_t)p->n_seq_max,
    };
    kv = kv_cache_new(&kp);
done:
    free(rs_floats);
    free(layer_dev);
    free(layer_home);
    free(layer_swa);
    return kv;
}

/* -v: the context's sizes, cache types and memory. */
static void context_print_summary(const tessera_context *ctx) {
    const tessera_context_params *p = &ctx->params;
    const kv_cache *kv = ctx->kv;
    char types[32];
    if (p->type_k == p->type_v) snprintf(types, sizeof types, "%s", tessera_kv_type_name(p->type_k));
    else snprintf(types, sizeof types, "%s/%s", tessera_kv_type_name(p->type_k), tessera_kv_type_name(p->type_v));
    /* recurrent layers have no K/V but a state per sequence (kv.h) */
    char rs[64] = "";
    if (kv_cache_is_recurrent(kv)) {
        uint64_t rs_bytes = 0;
        for (int32_t il = 0; il < kv->n_layer; il++) rs_bytes += kv_cache_rs_layer_bytes(kv, il);
        snprintf(rs, sizeof rs, ", recurrent state %.1f MiB (%d of %d layers with K/V)",
                 (double)rs_bytes / (1024.0 * 1024.0), kv_cache_n_layer_kv(kv), kv->n_layer);
    }
    host_log_printf(TESSERA_LOG_INFO,
                    "tessera: context n_ctx %u, n_batch %u, %d threads, flash attention %s, KV %s %.1f MiB%s%s\n",
                    p->n_ctx, p->n_batch, p->n_threads, kv->flash_attn ? "on" : "off", types,
                    (double)kv_cache_nbytes(kv) / (1024.0 * 1024.0),
                    kv->rot_k && kv->rot_v ? " (K, V Hadamard-rotated)"
                    : kv->rot_k            ? " (K Hadamard-rotated)"
                    : kv->rot_v            ? " (V Hadamard-rotated)"
                                           : "",
                    rs);
    context_print_memory(ctx, types);
}

/* The context's parts for its resolved params: the KV cache (flash
 * attention decided first: the V layout depends on it), the embedding
 * outputs, the scheduler and its reservation. */
static int context_setup(tessera_context *ctx) {
    const tessera_model *tm = ctx->model;
    const tessera_context_params *p = &ctx->params;
    const bool fa = context_flash_attn(tm, p, kv_type_dtype[p->type_k], kv_type_dtype[p->type_v]);
    if (!fa && tsr_dtype_block_size(kv_type_dtype[p->type_v]) != 1)
        return error_set("context: a quantized V cache (-ctv %s) needs flash attention (-fa on)",
                         tessera_kv_type_name(p->type_v));
    ctx->kv = context_kv_new(tm->m, p, fa);
    if (!ctx->kv || context_embed_setup(ctx) != 0) return -1;
    /* the context's thread count goes to its own queues (ABI 1.1
     * set_n_threads), so contexts with different counts can decode at once */
    ctx->sched = sched_new(tm->devices, tm->n_devices, &(sched_params){.n_threads = p->n_threads});
    if (!ctx->sched || context_reserve(ctx) != 0) return -1;
    const char *reuse = getenv("TESSERA_GRAPH_REUSE");
    ctx->graph_reuse = !reuse || strcmp(reuse, "0") != 0;
    return 0;
}

tessera_context *tessera_context_new(tessera_model *tm, const tessera_context_params *params) {
    if (!tm) {
        error_set("context: no model");
        return NULL;
    }
    tessera_context_params p = params ? *params : tessera_context_default_params();
    if (context_params_resolve(tm->m, &p) != 0) return NULL;
    tessera_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        error_set("context: out of memory");
        return NULL;
    }
    ctx->model = tm;
    ctx->params = p;
    ctx->timings.load_ms = tm->load_ms;
    if (context_setup(ctx) != 0) {
        tessera_context_free(ctx);
        return NULL;
    }
    if (p.verbose) context_print_summary(ctx);
    return ctx;
}

void tessera_context_free(tessera_context *ctx) {
    if (!ctx) return;
    step_graph_free(&ctx->step);
    sched_free(ctx->sched);
    kv_cache_free(ctx->kv);
    decode_scratch_free(&ctx->scratch);
    mrope_free(&ctx->mrope);
    free(ctx->logits);
    free(ctx->lora_use);
    free(ctx->observe_rows);
    free(ctx->observe_ids);
    free(ctx);
}

void context_set_graph_reuse(tessera_context *ctx, bool on) {
    ctx->graph_reuse = on;
    if (!on) step_graph_drop(&ctx->step);
}

uint32_t tessera_context_n_ctx(const tessera_context *ctx) { return ctx->params.n_ctx; }
uint32_t tessera_context_n_batch(const tessera_context *ctx) { return ctx->params.n_batch; }
const tessera_model *tessera_context_model(const tessera_context *ctx) { return ctx->model; }

int tessera_context_set_threads(tessera_context *ctx, int32_t n_threads) {
    if (n_threads < 0) return error_set("context: n_threads %d is negative", n_threads);
    ctx->params.n_threads = n_threads ? n_threads : default_threads();
    sched_set_n_threads(ctx->sched, ctx->params.n_threads);
    return 0;
}

int32_t tessera_kv_len(const tessera_context *ctx) { return kv_cache_seq_len(ctx->kv, 0); }

int tessera_kv_truncate(tessera_context *ctx, int32_t pos) {
    if (pos < 0) return error_set("kv truncate: position %d is negative", pos);
    kv_cache_seq_forget(ctx->kv, 0, pos);
    mrope_forget(&ctx->mrope, 0, pos);
    return 0;
}

void tessera_context_timings(const tessera_context *ctx, tessera_timings *out) { *out = ctx->timings; }

void tessera_context_timings_reset(tessera_context *ctx) {
    double load = ctx->timings.load_ms;
    memset(&ctx->timings, 0, sizeof ctx->timings);
    ctx->timings.load_ms = load;
    memset(&ctx->gen_stats, 0, sizeof ctx->gen_stats);
}

void tessera_context_step_stats(const tessera_context *ctx, tessera_step_stats *out) { *out = ctx->gen_stats; }

int tessera_context_set_profiling(tessera_context *ctx, bool on) {
    if (!ctx) return error_set("profiling: no context");
    return sched_set_profiling(ctx->sched, on);
}

int32_t tessera_context_profile(const tessera_context *ctx, tessera_op_profile *out, int32_t max) {
    if (!ctx || !out || max <= 0) return 0;
    sched_profile p;
    sched_get_profile(ctx->sched, &p);
    int32_t n = 0;
    for (int op = 0; op < TSR_STATS_OPS && op < TSR_OP_COUNT; op++) {
        if (!p.nodes[op]) continue;
        /* insertion by device time, largest first */
        tessera_op_profile row = {.op = tsr_op_name(op), .nodes = (int64_t)p.nodes[op],
                                  .untimed = (int64_t)p.untimed[op], .device_ms = (double)p.ns[op] / 1e6,
                                  .bytes = (double)p.bytes[op], .flops = p.flops[op]};
        int32_t at = n < max ? n : max - 1;
        if (n >= max && row.device_ms <= out[at].device_ms) continue;
        while (at > 0 && out[at - 1].device_ms < row.device_ms) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = row;
        if (n < max) n++;
    }
    return n;
}

/* ------------------------------------------------------------ sequences */

int tessera_seq_remove(tessera_context *ctx, int32_t seq, int32_t pos) {
    if (!ctx) return error_set("seq remove: no context");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("seq remove: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    kv_cache_seq_forget(ctx->kv, seq, pos < 0 ? 0 : pos);
    mrope_forget(&ctx->mrope, seq, pos < 0 ? 0 : pos);
    return 0;
}

int32_t tessera_seq_len(const tessera_context *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= TESSERA_MAX_SEQ) return 0;
    return kv_cache_seq_len(ctx->kv, seq);
}

int32_t tessera_kv_cells_used(const tessera_context *ctx) { return kv_cache_cells_used(ctx->kv); }
