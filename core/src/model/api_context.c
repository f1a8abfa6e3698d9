/* Public API: contexts (KV cache + scheduler) and decoding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/public.h"
#include "util/error.h"

double tessera_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

tessera_context_params tessera_context_default_params(void) {
    return (tessera_context_params){
        .n_ctx = 0, .n_batch = 512, .n_threads = 0, .kv_type = TESSERA_KV_F16};
}

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 1024 ? (int32_t)n : 1;
}

/* Whether dev can write the cache itself (CPY of F32 rows into the cache
 * type). A device that cannot keeps its layers' cache in host memory, where
 * the CPU writes it and the scheduler copies what the device reads. */
static bool device_writes_cache(tsr_device *dev, int32_t kv_dtype, int64_t n_embd) {
    if (!dev->api->supports_op) return false;
    tsr_tensor src = {.dtype = TSR_DTYPE_F32, .ne = {n_embd, 1, 1, 1}, .name = "k"};
    tsr_tensor dst = {.dtype = kv_dtype, .ne = {n_embd, 1, 1, 1}, .name = "k_cache"};
    src.nb[0] = 4;
    dst.nb[0] = kv_dtype == TSR_DTYPE_F32 ? 4 : 2;
    for (int d = 1; d < TSR_MAX_DIMS; d++) {
        src.nb[d] = src.nb[d - 1] * src.ne[d - 1];
        dst.nb[d] = dst.nb[d - 1] * dst.ne[d - 1];
    }
    tsr_node node = {.op = TSR_OP_CPY, .n_src = 1, .dst = &dst, .src = {&src}};
    return dev->api->supports_op(dev, &node) != 0;
}

tessera_context *tessera_context_new(tessera_model *tm, const tessera_context_params *params) {
    if (!tm) {
        error_set("context: no model");
        return NULL;
    }
    tessera_context_params p = params ? *params : tessera_context_default_params();
    const model *m = tm->m;
    if (p.n_ctx == 0) p.n_ctx = (uint32_t)m->hp.n_ctx_train;
    if (p.n_ctx > (1u << 24)) {
        error_set("context: n_ctx %u is too large", p.n_ctx);
        return NULL;
    }
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.n_threads < 0) {
        error_set("context: n_threads %d is negative", p.n_threads);
        return NULL;
    }
    if (p.n_threads == 0) p.n_threads = default_threads();
    if (p.kv_type != TESSERA_KV_F16 && p.kv_type != TESSERA_KV_F32) {
        error_set("context: unknown KV cache type %d (F16 or F32)", (int)p.kv_type);
        return NULL;
    }
    tessera_context *ctx = calloc(1, sizeof *ctx);
    tsr_device **layer_dev = calloc((size_t)m->hp.n_layer, sizeof *layer_dev);
    int32_t *layer_home = calloc((size_t)m->hp.n_layer, sizeof *layer_home);
    if (!ctx || !layer_dev || !layer_home) {
        error_set("context: out of memory");
        goto fail;
    }
    ctx->model = tm;
    ctx->params = p;
    ctx->timings.load_ms = tm->load_ms;
    /* The KV cache of an offloaded layer lives with its weights when that
     * device can write it. */
    const int32_t kv_dtype = p.kv_type == TESSERA_KV_F32 ? TSR_DTYPE_F32 : TSR_DTYPE_F16;
    const int64_t n_embd_kv = (int64_t)m->hp.head_dim * m->hp.n_head_kv;
    bool kv_on_gpu = m->gpu && device_writes_cache(m->gpu, kv_dtype, n_embd_kv);
    if (m->gpu && m->n_gpu_layers > 0 && !kv_on_gpu)
        host_log(TSR_LOG_INFO, "model", "the GPU device cannot write the KV cache: keeping it in host memory");
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        layer_home[il] = kv_on_gpu ? model_layer_device(m, il) : -1;
        layer_dev[il] = layer_home[il] >= 0 ? m->gpu : NULL;
    }
    kv_cache_params kp = {
        .n_layer = m->hp.n_layer,
        .n_ctx = (int32_t)p.n_ctx,
        .n_embd_k = m->hp.head_dim * m->hp.n_head_kv,
        .n_embd_v = m->hp.head_dim * m->hp.n_head_kv,
        .dtype = kv_dtype,
        .layer_device = layer_dev,
        .layer_home = layer_home,
    };
    ctx->kv = kv_cache_new(&kp);
    if (!ctx->kv) goto fail;
    ctx->sched = sched_new(tm->devices, tm->n_devices, NULL);
    if (!ctx->sched) goto fail;
    free(layer_dev);
    free(layer_home);
    if (p.verbose)
        fprintf(stderr, "tessera: context n_ctx %u, n_batch %u, %d threads, KV %s %.1f MiB\n", p.n_ctx,
                p.n_batch, p.n_threads, p.kv_type == TESSERA_KV_F32 ? "F32" : "F16",
                (double)kv_cache_nbytes(ctx->kv) / (1024.0 * 1024.0));
    return ctx;
fail:
    free(layer_dev);
    free(layer_home);
    tessera_context_free(ctx);
    return NULL;
}

void tessera_context_free(tessera_context *ctx) {
    if (!ctx) return;
    sched_free(ctx->sched);
    kv_cache_free(ctx->kv);
    free(ctx->logits);
    free(ctx);
}

uint32_t tessera_context_n_ctx(const tessera_context *ctx) { return ctx->params.n_ctx; }
uint32_t tessera_context_n_batch(const tessera_context *ctx) { return ctx->params.n_batch; }
const tessera_model *tessera_context_model(const tessera_context *ctx) { return ctx->model; }

int tessera_context_set_threads(tessera_context *ctx, int32_t n_threads) {
    if (n_threads < 0) return error_set("context: n_threads %d is negative", n_threads);
    ctx->params.n_threads = n_threads ? n_threads : default_threads();
    return 0;
}

int32_t tessera_kv_len(const tessera_context *ctx) { return kv_cache_seq_len(ctx->kv); }

int tessera_kv_truncate(tessera_context *ctx, int32_t pos) {
    if (pos < 0) return error_set("kv truncate: position %d is negative", pos);
    kv_cache_seq_truncate(ctx->kv, pos);
    return 0;
}

void tessera_context_timings(const tessera_context *ctx, tessera_timings *out) { *out = ctx->timings; }

void tessera_context_timings_reset(tessera_context *ctx) {
    double load = ctx->timings.load_ms;
    memset(&ctx->timings, 0, sizeof ctx->timings);
    ctx->timings.load_ms = load;
}

/* ------------------------------------------------------------- decoding */

/* One sequence (0) is the batch path with every token in sequence 0. */
int tessera_decode(tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens, int32_t pos,
                   uint32_t flags) {
    const model *m = ctx->model->m;
    int32_t n_ctx = (int32_t)ctx->params.n_ctx;
    int32_t len = kv_cache_seq_len(ctx->kv);
    ctx->n_last = 0;
    if (n_tokens <= 0 || !tokens) return error_set("decode: no tokens given");
    if (pos < 0 || pos > len)
        return error_set("decode: position %d is not in 0..%d (the cache holds %d positions)", pos, len, len);
    if ((int64_t)pos + n_tokens > n_ctx)
        return error_set("decode: context full: %d tokens at position %d need %lld cells, the context has %d (-c)",
                         n_tokens, pos, (long long)pos + n_tokens, n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return error_set("decode: token %d at index %d is out of range (vocabulary of %d)", tokens[i], i,
                             m->hp.n_vocab);
    bool all = (flags & TESSERA_DECODE_ALL_LOGITS) != 0;
    int32_t *posv = malloc((size_t)n_tokens * sizeof *posv);
    int32_t *seqv = calloc((size_t)n_tokens, sizeof *seqv);
    bool *want = malloc((size_t)n_tokens * sizeof *want);
    int rc = -1;
    if (!posv || !seqv || !want) {
        error_set("decode: out of memory for %d tokens", n_tokens);
        goto done;
    }
    for (int32_t i = 0; i < n_tokens; i++) {
        posv[i] = pos + i;
        want[i] = all || i == n_tokens - 1;
    }
    if (context_decode_tokens(ctx, tokens, posv, seqv, want, n_tokens) < 0) {
        kv_cache_seq_truncate(ctx->kv, pos);
        error_wrap("decode");
        goto done;
    }
    ctx->n_last = n_tokens;
    ctx->last_all = all;
    rc = 0;
done:
    free(posv);
    free(seqv);
    free(want);
    return rc;
}

int logits_check_finite(const float *logits, int64_t rows, int64_t n_vocab) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n_vocab; j++)
            if (!isfinite(logits[r * n_vocab + j]))
                return error_set("the logits of output %lld are not finite (token %lld is %g): the model's "
                                 "weights or hyperparameters are broken",
                                 (long long)r, (long long)j, (double)logits[r * n_vocab + j]);
    return 0;
}

const float *tessera_logits(tessera_context *ctx, int32_t i) {
    if (ctx->n_last == 0) {
        error_set("logits: no successful decode call yet");
        return NULL;
    }
    if (i < 0) i = ctx->n_last + i;
    if (i < 0 || i >= ctx->n_last) {
        error_set("logits: index %d is outside the last call's %d tokens", i, ctx->n_last);
        return NULL;
    }
    size_t nv = (size_t)ctx->model->m->hp.n_vocab;
    if (ctx->last_all) return ctx->logits + (size_t)i * nv;
    if (i != ctx->n_last - 1) {
        error_set("logits: token %d was not kept (decode with TESSERA_DECODE_ALL_LOGITS)", i);
        return NULL;
    }
    return ctx->logits;
}
