/*
 * Fit layers and context to the devices' free memory (tessera_params_fit,
 * what llama.cpp's -ngl auto / --fit does).
 *
 * Sizes come from the GGUF header alone (the file is mapped, no weight is
 * read): each block's tensors ("blk.N.*"; those -ot and --n-cpu-moe place
 * by name counted where they go), the KV cache per cell (a
 * sliding-window layer holds only its window's cells), and the
 * compute buffers of the largest step, estimated from the shapes:
 *     activations  4 * n_tokens * (5 * n_embd + 3 * n_ff + 2 * n_head * head_dim)
 *     scores       2 * 4 * n_tokens * n_ctx * n_head   (q.k and its softmax)
 *     logits       4 * n_tokens * n_vocab              (host only)
 * which is above what the scheduler plans (SmolLM2, 512 tokens over 8192
 * cells: estimate 400 MiB, reserved 307 MiB), so a fitted context's
 * reservation at creation succeeds. A device that does not report its free
 * memory counts its total; 5% is kept as margin.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/placement.h"
#include "model/public.h"
#include "util/error.h"

/* FIT_MIN_CTX: the host never fits a context below it. FIT_GPU_MIN_CTX: an
 * automatic context is halved down to it (as llama.cpp's --fit-ctx) before
 * layers are left off the GPU, since a layer on the host costs more speed
 * than the context costs memory. */
enum { FIT_MIN_CTX = 256, FIT_GPU_MIN_CTX = 4096 };

typedef struct fit_sizes {
    int32_t n_layer;
    uint64_t *layer;     /* [n_layer] weight bytes of block il */
    uint64_t other;      /* weights outside the blocks (embeddings, output) */
    uint64_t host_named, gpu_named; /* weights placed by name (-ot, --n-cpu-moe), in neither sum above */
    uint64_t kv_cell;    /* KV bytes per cell and layer */
    bool *swa;           /* [n_layer] the layer keeps only its window */
    uint32_t swa_cells;  /* cells of a sliding-window layer (0: n_ctx, as the others) */
    uint64_t act_token;  /* activation bytes per token */
    uint64_t score_cell; /* score bytes per token and cell */
    uint64_t logit_token;
    uint64_t *rs;        /* [n_layer] recurrent states of every sequence, where the layer's KV is */
} fit_sizes;

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static int sizes_read(const gguf_file *f, const tessera_context_params *cp, const model_placement *pl, fit_sizes *s,
                      model_hparams *hp) {
    memset(s, 0, sizeof *s);
    if (model_hparams_load(hp, f) != 0) return -1;
    s->n_layer = hp->n_layer;
    s->layer = calloc((size_t)hp->n_layer, sizeof *s->layer);
    s->swa = calloc((size_t)hp->n_layer, sizeof *s->swa);
    s->rs = calloc((size_t)hp->n_layer, sizeof *s->rs);
    if (!s->layer || !s->swa || !s->rs) return error_set("fit: out of memory");
    for (int32_t il = 0; il < hp->n_layer; il++) s->swa[il] = model_layer_is_swa(hp, il);
    s->swa_cells = cp->swa_full ? 0
                                : (uint32_t)context_swa_cells(hp->n_swa, cp->n_seq_max ? cp->n_seq_max : 1,
                                                              cp->n_batch ? cp->n_batch : 512);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *ti = gguf_tensor(f, i);
        const int32_t place = model_placement_of(pl, ti->name);
        if (place != MODEL_PLACE_RULE) {
            *(place == MODEL_PLACE_HOST ? &s->host_named : &s->gpu_named) += ti->size;
            continue;
        }
        int il = -1, end = 0;
        if (sscanf(ti->name, "blk.%d.%n", &il, &end) == 1 && end > 0 && il >= 0 && il < hp->n_layer)
            s->layer[il] += ti->size;
        else
            s->other += ti->size;
    }
    /* as tessera_context_new resolves them: --kv-type fills the F16 defaults */
    tessera_kv_type tk = cp->type_k == TESSERA_KV_F16 ? cp->kv_type : cp->type_k;
    tessera_kv_type tv = cp->type_v == TESSERA_KV_F16 ? cp->kv_type : cp->type_v;
    s->kv_cell = kv_row_bytes(context_kv_dtype(tk), (int64_t)hp->n_head_kv * hp->head_dim) +
                 kv_row_bytes(context_kv_dtype(tv), (int64_t)hp->n_head_kv * hp->head_dim_v);
    s->act_token = 4ull * (5ull * (uint64_t)hp->n_embd + 3ull * (uint64_t)hp->n_ff +
                           2ull * (uint64_t)hp->n_head * (uint64_t)hp->head_dim);
    s->score_cell = 8ull * (uint64_t)hp->n_head;
    s->logit_token = 4ull * (uint64_t)hp->n_vocab;
    if (hp->arch->state_floats)
        for (int32_t il = 0; il < hp->n_layer; il++)
            s->rs[il] = 4ull * (uint64_t)hp->arch->state_floats(hp, il) * (cp->n_seq_max ? cp->n_seq_max : 1);
    return 0;
}

/* KV bytes (recurrent states included) of layers [from, to) with a context
 * of n_ctx: a recurrent layer (a state) has no K/V, as in kv_cache_new. */
static uint64_t kv_bytes(const fit_sizes *s, int32_t from, int32_t to, uint32_t n_ctx) {
    uint64_t b = 0;
    for (int32_t il = from; il < to; il++)
        b += s->rs[il] ? s->rs[il]
                       : s->kv_cell * (s->swa[il] && s->swa_cells && s->swa_cells < n_ctx ? s->swa_cells : n_ctx);
    return b;
}

static uint64_t compute_bytes(const fit_sizes *s, uint32_t n_ctx, uint32_t n_batch, bool host) {
    uint64_t t = n_batch < n_ctx ? n_batch : n_ctx;
    return t * (s->act_token + s->score_cell * n_ctx + (host ? s->logit_token : 0));
}

/* What a device can hold: 95% of its free memory (total when unknown), read
 * now (the list's copy is from discovery). 0: no figure at all. */
static uint64_t device_budget(host_device *d) {
    tsr_device_info info = d->info;
    if (d->dev && d->dev->api->get_info) {
        tsr_device_info now = {.struct_size = sizeof now};
        if (d->dev->api->get_info(d->dev, &now) == TSR_OK) info = now;
    }
    uint64_t b = info.memory_free ? info.memory_free : info.memory_total;
    return b / 20 * 19;
}

/* Layers of n_gpu that are blocks: -ngl counts the output layer (the
 * weights outside the blocks) as one more, as llama.cpp does, so n_layer + 1
 * puts every weight on the GPU (model_weight_device). */
static int32_t gpu_blocks(const fit_sizes *s, int32_t n_gpu) { return n_gpu > s->n_layer ? s->n_layer : n_gpu; }

/* Bytes the last n layers need on the GPU with a context of n_ctx. */
static uint64_t gpu_need(const fit_sizes *s, int32_t n, uint32_t n_ctx, uint32_t n_batch, uint64_t *w, uint64_t *kv,
                         uint64_t *c) {
    const int32_t blocks = gpu_blocks(s, n);
    *w = (n > s->n_layer ? s->other : 0) + s->gpu_named;
    for (int32_t il = s->n_layer - blocks; il < s->n_layer; il++) *w += s->layer[il];
    *kv = kv_bytes(s, s->n_layer - blocks, s->n_layer, n_ctx);
    *c = n > 0 ? compute_bytes(s, n_ctx, n_batch, false) : 0;
    return *w + *kv + *c;
}

static uint64_t host_need(const fit_sizes *s, int32_t n_gpu, uint32_t n_ctx, uint32_t n_batch, uint64_t *w,
                          uint64_t *kv, uint64_t *c) {
    const int32_t blocks = gpu_blocks(s, n_gpu);
    *w = (n_gpu > s->n_layer ? 0 : s->other) + s->host_named;
    for (int32_t il = 0; il < s->n_layer - blocks; il++) *w += s->layer[il];
    *kv = kv_bytes(s, 0, s->n_layer - blocks, n_ctx);
    *c = compute_bytes(s, n_ctx, n_batch, true);
    return *w + *kv + *c;
}

/* What the fit decides as it goes: the context, the layers on the GPU, and
 * the report of both. */
typedef struct fit_plan {
    const fit_sizes *s;
    bool ctx_auto;    /* the context is ours to choose (-c 0) */
    uint32_t n_ctx, n_batch;
    int32_t ngl;      /* layers on the GPU, the output layer counting as one more */
    char *report;
    size_t report_size, used;
} fit_plan;

/* The GPU: an automatic context gives way first, down to FIT_GPU_MIN_CTX;
 * then the most layers that fit (-ngl auto) or the asked count, checked. */
static int fit_gpu(fit_plan *p, host_device *gpu, int32_t asked_ngl) {
    const fit_sizes *s = p->s;
    const uint64_t budget = device_budget(gpu);
    uint64_t w, kv, c;
    while (p->ctx_auto && budget && p->n_ctx > FIT_GPU_MIN_CTX &&
           gpu_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c) > budget)
        p->n_ctx = p->n_ctx / 2 > FIT_GPU_MIN_CTX ? p->n_ctx / 2 : FIT_GPU_MIN_CTX;
    int32_t fit = s->n_layer + 1;
    while (fit > 0 && budget && gpu_need(s, fit, p->n_ctx, p->n_batch, &w, &kv, &c) > budget) fit--;
    if (asked_ngl == TESSERA_NGL_AUTO) {
        p->ngl = fit;
    } else if (p->ngl > fit) {
        uint64_t need = gpu_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c);
        return error_set("device %s: -ngl %d (%d layers) with -c %u needs %.1f MiB (weights %.1f, KV %.1f, "
                         "compute %.1f), %.1f MiB available; %d layers fit (-ngl auto)",
                         gpu->name, asked_ngl, gpu_blocks(s, p->ngl), p->n_ctx, mib(need), mib(w), mib(kv),
                         mib(c), mib(budget), fit);
    }
    uint64_t need = gpu_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c);
    if (p->report && p->report_size)
        p->used += (size_t)snprintf(p->report + p->used, p->report_size - p->used,
                                    "fit: %s: %d of %d layers, %.1f MiB (weights %.1f, KV %.1f, compute %.1f) of "
                                    "%.1f MiB available%s",
                                    gpu->name, gpu_blocks(s, p->ngl), s->n_layer, mib(need), mib(w), mib(kv),
                                    mib(c), mib(budget), p->ngl > s->n_layer ? " (and the output layer)" : "");
    return 0;
}

/* The host: the context that fits (halved down to FIT_MIN_CTX when
 * automatic) or the asked one, checked. */
static int fit_host(fit_plan *p, host_device *cpu) {
    const fit_sizes *s = p->s;
    const uint64_t budget = device_budget(cpu);
    uint64_t w, kv, c;
    uint64_t need = host_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c);
    if (budget && need > budget) {
        if (!p->ctx_auto)
            return error_set("device %s: -c %u needs %.1f MiB of host memory (weights %.1f, KV %.1f, compute "
                             "%.1f), %.1f MiB available",
                             cpu->name, p->n_ctx, mib(need), mib(w), mib(kv), mib(c), mib(budget));
        while (p->n_ctx > FIT_MIN_CTX && host_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c) > budget)
            p->n_ctx = p->n_ctx / 2 > FIT_MIN_CTX ? p->n_ctx / 2 : FIT_MIN_CTX;
        need = host_need(s, p->ngl, p->n_ctx, p->n_batch, &w, &kv, &c);
        if (need > budget)
            return error_set("device %s: even -c %u needs %.1f MiB of host memory (weights %.1f, KV %.1f, "
                             "compute %.1f), %.1f MiB available",
                             cpu->name, p->n_ctx, mib(need), mib(w), mib(kv), mib(c), mib(budget));
    }
    if (p->report && p->report_size && p->used < p->report_size)
        snprintf(p->report + p->used, p->report_size - p->used,
                 "%s%s: -c %u%s, %.1f MiB (weights %.1f, KV %.1f, compute %.1f) of %.1f MiB available",
                 p->used ? "; " : "fit: ", cpu->name, p->n_ctx, p->ctx_auto ? " (auto)" : "", mib(need), mib(w),
                 mib(kv), mib(c), mib(budget));
    return 0;
}

/* The context to start from: the asked one, or the training context (4096
 * when unknown, at most n_ctx_default_max) per sequence, so each of
 * n_seq_max sequences gets as much. */
static uint32_t fit_start_ctx(const model_hparams *hp, const tessera_context_params *cp, uint32_t n_ctx_default_max) {
    if (cp->n_ctx) return cp->n_ctx;
    uint32_t n_ctx = hp->n_ctx_train > 0 ? (uint32_t)hp->n_ctx_train : 4096;
    if (n_ctx_default_max && n_ctx > n_ctx_default_max) n_ctx = n_ctx_default_max;
    uint32_t n_seq = cp->n_seq_max > 1 ? cp->n_seq_max : 1;
    return n_ctx > UINT32_MAX / n_seq ? UINT32_MAX / n_seq * n_seq : n_ctx * n_seq;
}

int tessera_params_fit(const char *path, tessera_model_params *mp, tessera_context_params *cp,
                       uint32_t n_ctx_default_max, char *report, size_t report_size) {
    if (report && report_size) report[0] = '\0';
    if (!path || !mp || !cp) return error_set("fit: no model path or parameters given");
    if (!host_is_initialized() && tessera_init(NULL) != 0) return -1;
    host_device *devs[TESSERA_MAX_DEVICES];
    int32_t n_dev = mp->devices && mp->devices[0] ? host_select_devices(mp->devices, devs, TESSERA_MAX_DEVICES)
                                                  : host_default_devices(devs, TESSERA_MAX_DEVICES);
    if (n_dev < 0) return -1;
    host_device *gpu = NULL, *cpu = NULL;
    model_pick_devices(devs, n_dev, &gpu, &cpu);
    model_placement pl;
    if (model_placement_init(&pl, mp->tensor_overrides, mp->n_cpu_moe, devs, n_dev, gpu) != 0) return -1;
    gguf_file *f = gguf_open(path);
    if (!f) {
        model_placement_free(&pl);
        return -1;
    }
    fit_sizes s;
    model_hparams hp;
    int rc = sizes_read(f, cp, &pl, &s, &hp);
    gguf_close(f);
    model_placement_free(&pl);
    if (rc == 0) {
        fit_plan plan = {.s = &s, .ctx_auto = cp->n_ctx == 0, .n_ctx = fit_start_ctx(&hp, cp, n_ctx_default_max),
                         .n_batch = cp->n_batch ? cp->n_batch : 512, .report = report, .report_size = report_size};
        /* n_layer + 1: the blocks and the output layer (gpu_blocks) */
        plan.ngl = mp->n_gpu_layers == TESSERA_NGL_AUTO ? s.n_layer + 1 : mp->n_gpu_layers;
        if (plan.ngl > s.n_layer + 1) plan.ngl = s.n_layer + 1;
        if (!gpu) plan.ngl = 0;
        if (gpu) rc = fit_gpu(&plan, gpu, mp->n_gpu_layers);
        if (rc == 0 && cpu) rc = fit_host(&plan, cpu);
        if (rc == 0) {
            if (gpu || mp->n_gpu_layers == TESSERA_NGL_AUTO) mp->n_gpu_layers = plan.ngl; /* else the load warns */
            cp->n_ctx = plan.n_ctx;
        }
    }
    free(s.layer);
    free(s.swa);
    free(s.rs);
    return rc;
}
