/*
 * Context memory: compute buffers reserved at creation, and what a context
 * holds on each device (weights, KV cache, compute buffers) for --verbose,
 * bench and tessera_context_memory.
 */
#include <stdio.h>
#include <string.h>

#include "model/public.h"
#include "host/host_log.h"
#include "util/error.h"

int context_reserve(tessera_context *ctx) {
    const model *m = ctx->model->m;
    kv_cache *kv = ctx->kv;
    int32_t n_ctx = (int32_t)ctx->params.n_ctx;
    int32_t n = (int32_t)ctx->params.n_batch < n_ctx ? (int32_t)ctx->params.n_batch : n_ctx;
    /* The largest step: a full micro-batch attending to every cell of each
     * cell set with every row's logits kept (perplexity). Buffers only
     * grow, so later steps fit; pages of host buffers are taken when first
     * used. */
    int32_t head[KV_MAX_SETS] = {0}, n_kv[KV_MAX_SETS] = {0};
    for (int32_t s = 0; s < kv->n_sets; s++) {
        n_kv[s] = kv_cache_set_size(kv, s);
        if (n > n_kv[s]) n = n_kv[s];
    }
    model_batch_graph bg;
    if (model_build_graph(m, kv, NULL, n, head, n_kv, n, &bg) != 0) return error_wrap("reserving compute buffers");
    int rc = sched_alloc(ctx->sched, bg.g);
    graph_free(bg.g);
    if (rc) return error_wrap("reserving compute buffers for %d tokens over %d cells", n, n_ctx);
    return 0;
}

/* The row of out[0..*n) for device index dev, added when new. */
static tessera_memory *row_for(tessera_memory *out, int32_t *n, int32_t max, int32_t dev) {
    host_device *hd = host_device_get(dev);
    const char *name = hd ? hd->name : "host";
    for (int32_t i = 0; i < *n; i++)
        if (!strcmp(out[i].device, name)) return &out[i];
    if (*n >= max) return NULL;
    tessera_memory *r = &out[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->device, sizeof r->device, "%s", name);
    return r;
}

int32_t tessera_context_memory(const tessera_context *ctx, tessera_memory *out, int32_t max) {
    const tessera_model *tm = ctx->model;
    const model *m = tm->m;
    int32_t n = 0, host = m->cpu_device;
    /* the chosen devices in order, so rows come out GPU first */
    for (int32_t i = 0; i < tm->n_devices; i++) {
        tessera_memory *r = row_for(out, &n, max, tm->devices[i]->index);
        if (r) r->compute = sched_buffer_bytes(ctx->sched, tm->devices[i]);
    }
    uint64_t offloaded = 0;
    if (m->gpu_hd) {
        tessera_memory *r = row_for(out, &n, max, m->gpu_hd->index);
        for (int32_t b = 0; b < m->gpu_weights.n_buffers; b++) {
            offloaded += m->gpu_weights.sizes[b];
            if (r) r->weights += m->gpu_weights.sizes[b];
        }
    }
    tessera_memory *h = row_for(out, &n, max, host);
    if (h) {
        uint64_t dev_bytes = 0;
        for (int32_t i = 0; i < m->n_weights; i++)
            if (m->weights[i].home_device >= 0) dev_bytes += m->weights[i].nbytes;
        h->weights = m->nbytes > dev_bytes ? m->nbytes - dev_bytes : 0;
        h->compute += sched_host_bytes(ctx->sched);
    }
    (void)offloaded;
    const kv_cache *kv = ctx->kv;
    /* a layer's recurrent states (hybrid models) live where its KV does */
    for (int32_t il = 0; il < kv->n_layer; il++) {
        int32_t home = kv->layers[il].home_device;
        tessera_memory *r = row_for(out, &n, max, home >= 0 ? home : host);
        if (r)
            r->kv += kv_cache_layer_k_bytes(kv, il) + kv_cache_layer_v_bytes(kv, il) + kv_cache_rs_layer_bytes(kv, il);
    }
    /* fallback devices the scheduler added (ref, a CPU backend) */
    (void)h;
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++)
        if (out[i].weights || out[i].kv || out[i].compute) out[kept++] = out[i];
    return kept;
}

void context_print_memory(const tessera_context *ctx, const char *kv_type) {
    tessera_memory rows[TESSERA_MAX_DEVICES];
    int32_t n = tessera_context_memory(ctx, rows, TESSERA_MAX_DEVICES);
    const double mib = 1024.0 * 1024.0;
    for (int32_t i = 0; i < n; i++)
        host_log_printf(TESSERA_LOG_INFO, "tessera: memory %s: weights %.1f MiB, KV %s %.1f MiB, compute %.1f MiB\n",
                        rows[i].device, (double)rows[i].weights / mib, kv_type, (double)rows[i].kv / mib,
                        (double)rows[i].compute / mib);
}
