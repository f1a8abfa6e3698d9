/* Model loading: find every weight by name, check its shape, place it. */
#include "model/model.h"
#include "model/arch/arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host_weights.h"
#include "model/placement.h"
#include "tensor/dtype.h"
#include "util/error.h"

static void shape_str(char *buf, size_t size, int n_dims, const int64_t *ne) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int d = 0; d < n_dims && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)ne[d]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* Look up tensor `name`, check it has exactly the expected shape and a dtype
 * we can compute with; fill w. Returns 1 when found, 0 when absent, -1 on
 * error. */
static int weight_find(const model *m, model_weight *w, const char *name, int n_dims, const int64_t want[4]) {
    const gguf_file *f = m->file;
    memset(w, 0, sizeof *w);
    const gguf_tensor_info *ti = gguf_find_tensor(f, name);
    if (!ti) return 0;
    bool same = ti->n_dims == n_dims;
    for (int d = 0; d < 4 && same; d++) same = ti->ne[d] == want[d];
    /* Trailing 1-sized dims written explicitly are still the same shape. */
    if (!same && ti->n_dims > n_dims) {
        same = true;
        for (int d = 0; d < 4 && same; d++) same = ti->ne[d] == want[d];
    }
    if (!same) {
        char got[96], exp[96];
        shape_str(got, sizeof got, ti->n_dims, ti->ne);
        shape_str(exp, sizeof exp, n_dims, want);
        return error_set("%s: tensor '%s' has shape %s, expected %s", gguf_path(f), name, got, exp);
    }
    const dtype_traits *tr = dtype_traits_get(ti->dtype);
    if (!tr || !tr->supported)
        return error_set("%s: tensor '%s' has type %s, which Tessera cannot compute with",
                         gguf_path(f), name, dtype_name(ti->dtype));
    if (n_dims == 1 && ti->dtype != TSR_DTYPE_F32)
        return error_set("%s: tensor '%s' has type %s, expected F32", gguf_path(f), name,
                         dtype_name(ti->dtype));
    w->name = ti->name;
    w->dtype = ti->dtype;
    w->n_dims = n_dims;
    memcpy(w->ne, want, 4 * sizeof *want);
    w->nbytes = ti->size;
    w->home_device = -1;
    w->data = (void *)ti->data;
    return 1;
}

static const model_weight *tensor_declare(model_loader *ld, int32_t il, unsigned flags, int n_dims,
                                          const int64_t want[4], const char *fmt) {
    if (ld->failed) return NULL;
    model *m = ld->m;
    char name[96];
    if (il >= 0)
        snprintf(name, sizeof name, fmt, (int)il);
    else
        snprintf(name, sizeof name, "%s", fmt);
    /* one slot per tensor of the file: a name is declared at most once */
    for (int32_t i = 0; i < m->n_weights; i++)
        if (!strcmp(m->weights[i].name, name)) return &m->weights[i];
    if (m->n_weights >= gguf_tensor_count(m->file)) {
        if (flags & MODEL_TENSOR_OPTIONAL) return NULL;
        ld->failed = error_set("%s: tensor '%s' is missing", gguf_path(m->file), name);
        return NULL;
    }
    model_weight *w = &m->weights[m->n_weights];
    int rc = weight_find(m, w, name, n_dims, want);
    if (rc < 0) {
        ld->failed = -1;
        return NULL;
    }
    if (rc == 0) {
        if (!(flags & MODEL_TENSOR_OPTIONAL))
            ld->failed = error_set("%s: tensor '%s' is missing", gguf_path(m->file), name);
        return NULL;
    }
    w->layer = il;
    w->place = MODEL_PLACE_RULE;
    m->n_weights++;
    return w;
}

const model_weight *model_tensor(model_loader *ld, int32_t il, unsigned flags, int n_dims, int64_t ne0,
                                 int64_t ne1, const char *fmt) {
    const int64_t want[4] = {ne0, n_dims > 1 ? ne1 : 1, 1, 1};
    return tensor_declare(ld, il, flags, n_dims, want, fmt);
}

const model_weight *model_tensor_3d(model_loader *ld, int32_t il, unsigned flags, int64_t ne0, int64_t ne1,
                                    int64_t ne2, const char *fmt) {
    const int64_t want[4] = {ne0, ne1, ne2, 1};
    return tensor_declare(ld, il, flags, 3, want, fmt);
}

int32_t model_layer_device(const model *m, int32_t il) {
    if (m->gpu_device < 0 || m->n_gpu_layers <= 0) return -1;
    return il >= m->hp.n_layer - m->n_gpu_layers ? m->gpu_device : -1;
}

/* The one placement rule for weights. A block's weights live with their
 * layer (the last n_gpu_layers layers on the GPU). The global ones (token
 * embedding, output norm, output projection, rope factors: layer -1) go to
 * the GPU once -ngl exceeds the layer count, as llama.cpp counts its output
 * layer as one more: then the whole graph runs there with every weight
 * resident, and the tied output (output == token_embd) is the same upload.
 * -1: host memory (the mapping). */
int32_t model_weight_device(const model *m, const model_weight *w) {
    if (w->nbytes == 0) return -1;
    if (w->place != MODEL_PLACE_RULE) return w->place == MODEL_PLACE_HOST || m->gpu_device < 0 ? -1 : w->place;
    if (w->layer >= 0) return model_layer_device(m, w->layer);
    return m->gpu_device >= 0 && m->offload_globals ? m->gpu_device : -1;
}

/* Whether weight w is uploaded to the GPU at load. */
static bool weight_offloaded(const model *m, const model_weight *w) { return model_weight_device(m, w) >= 0; }

int model_weights_upload(host_device *hd, int32_t device, model_weight *const *mw, int32_t n, host_weight_set *set,
                         bool (*uploaded)(const model_weight *w, void *user), void *user) {
    memset(set, 0, sizeof *set);
    if (n == 0) return 0;
    host_weight *hw = calloc((size_t)n, sizeof *hw);
    if (!hw) return error_set("model: out of memory planning %d offloaded weights", n);
    for (int32_t i = 0; i < n; i++) {
        const model_weight *w = mw[i];
        tsr_tensor t = {.dtype = w->dtype, .ne = {w->ne[0], w->ne[1], w->ne[2], w->ne[3]}, .name = w->name};
        t.nb[0] = dtype_traits_get(w->dtype)->block_bytes;
        t.nb[1] = w->nbytes / (uint64_t)(w->ne[1] * w->ne[2] * w->ne[3]);
        t.nb[2] = t.nb[1] * (uint64_t)w->ne[1];
        t.nb[3] = t.nb[2] * (uint64_t)w->ne[2];
        hw[i] = (host_weight){.t = t, .src = w->data, .name = w->name};
    }
    int rc = host_weights_alloc(hd, hw, n, set);
    for (int32_t i = 0; i < n && rc == 0; i++) {
        rc = host_weights_upload(hd, set, &hw[i]);
        if (rc) break;
        model_weight *w = mw[i];
        tsr_buffer *buf = set->buffers[hw[i].buffer];
        char *host = hd->dev->api->buffer_host_ptr ? hd->dev->api->buffer_host_ptr(hd->dev, buf) : NULL;
        w->home_device = device;
        w->buffer = buf;
        w->offset = hw[i].offset;
        w->data = host ? host + hw[i].offset : NULL;
        if (uploaded && !uploaded(w, user)) rc = error_set("model load cancelled");
    }
    free(hw);
    return rc;
}

typedef struct offload_progress {
    const model_load_params *p;
    uint64_t *done, total;
} offload_progress;

static bool offload_uploaded(const model_weight *w, void *user) {
    offload_progress *op = user;
    *op->done += w->nbytes;
    return !op->p->progress || op->p->progress((float)((double)*op->done / (double)op->total), op->p->progress_user);
}

/* Copy the last n_gpu_layers layers' weights into buffers of the GPU
 * device, split to fit its largest allocation and aligned as it asks
 * (host_weights). */
static int model_offload(model *m, const model_load_params *p, uint64_t *done, uint64_t total) {
    host_device *hd = host_device_get(p->gpu_device);
    if (!hd || hd->dev != p->gpu) return error_set("model: device %d is not a loaded device", p->gpu_device);
    int32_t n = 0;
    for (int32_t i = 0; i < m->n_weights; i++) n += weight_offloaded(m, &m->weights[i]);
    if (n == 0) return 0;
    model_weight **mw = calloc((size_t)n, sizeof *mw);
    if (!mw) return error_set("model: out of memory planning %d offloaded weights", n);
    n = 0;
    for (int32_t i = 0; i < m->n_weights; i++)
        if (weight_offloaded(m, &m->weights[i])) mw[n++] = &m->weights[i];
    offload_progress op = {.p = p, .done = done, .total = total};
    int rc = model_weights_upload(hd, p->gpu_device, mw, n, &m->gpu_weights, offload_uploaded, &op);
    if (m->gpu_weights.n_buffers > 0) m->gpu_hd = hd;
    if (rc && !m->gpu_hd)
        error_wrap("cannot allocate %d offloaded layers%s", m->n_gpu_layers,
                   m->offload_globals ? " and the output layer" : "");
    free(mw);
    return rc;
}

/* Read every page of the host weights once so the first decode does not stall
 * on page faults, reporting progress as we go. */
static int model_prefault(model *m, const model_load_params *p, uint64_t *done, uint64_t total) {
    int64_t n = gguf_tensor_count(m->file);
    volatile unsigned char sink = 0;
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *ti = gguf_tensor(m->file, i);
        const unsigned char *b = ti->data;
        for (uint64_t o = 0; o < ti->size; o += 4096) sink ^= b[o];
        *done += ti->size;
        if (p->progress && !p->progress((float)((double)*done / (double)total), p->progress_user))
            return error_set("model load cancelled");
    }
    (void)sink;
    return 0;
}

model *model_load(gguf_file *f, const model_load_params *p) {
    model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(f);
        error_set("model: out of memory");
        return NULL;
    }
    m->file = f;
    m->gpu_device = -1;
    m->cpu_device = p->cpu_device;
    if (model_hparams_load(&m->hp, f) != 0) goto fail;
    const model_hparams *hp = &m->hp;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->weights = calloc((size_t)gguf_tensor_count(f) + 1, sizeof *m->weights);
    if (!m->layers || !m->weights) {
        error_set("model: out of memory");
        goto fail;
    }
    /* The tensors every architecture has, then the architecture's own. */
    model_loader ld = {.m = m};
    m->tok_embd = model_tensor(&ld, -1, MODEL_TENSOR_REQUIRED, 2, hp->n_embd, hp->n_vocab, "token_embd.weight");
    /* (encoders end with their last layer's norm) */
    if (!hp->arch->own_output_norm)
        m->output_norm = model_tensor(&ld, -1, hp->causal_attn ? MODEL_TENSOR_REQUIRED : MODEL_TENSOR_OPTIONAL, 1,
                                      hp->n_embd, 1, "output_norm.weight");
    m->output = model_tensor(&ld, -1, MODEL_TENSOR_OPTIONAL, 2, hp->n_embd, hp->n_vocab, "output.weight");
    if (!m->output) m->output = m->tok_embd; /* tied embeddings */
    if (hp->arch->tensors) hp->arch->tensors(&ld, m); /* first: its refusals (mistral3's scales) name the cause */
    arch_tensor_sets(&ld, m, hp->arch->tensor_sets);
    if (!m->cls_out) arch_cls_head_tensors(&ld, m); /* rerankers of any architecture */
    if (ld.failed) goto fail;

    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *ti = gguf_tensor(f, i);
        m->nbytes += ti->size;
        int64_t ne = ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3];
        m->n_params += (uint64_t)ne;
    }

    /* Weights placed by name (-ot, --n-cpu-moe) before the -ngl rule. */
    bool named_to_gpu = false;
    uint64_t named_host = 0;
    int32_t n_named = 0;
    for (int32_t i = 0; i < m->n_weights && p->placement; i++) {
        model_weight *w = &m->weights[i];
        w->place = model_placement_of(p->placement, w->name);
        if (w->place == MODEL_PLACE_RULE) continue;
        n_named++;
        if (w->place >= 0) named_to_gpu = true;
        else named_host += w->nbytes;
    }
    if (n_named)
        host_log(TSR_LOG_INFO, "model", "placed by name (-ot, --n-cpu-moe): %d weights, %.1f MiB of them in host memory",
                 n_named, (double)named_host / (1024.0 * 1024.0));

    uint64_t done = 0, total = m->nbytes;
    if (p->gpu && (p->n_gpu_layers > 0 || named_to_gpu)) {
        m->gpu = p->gpu;
        m->gpu_device = p->gpu_device;
        m->n_gpu_layers = p->n_gpu_layers > hp->n_layer ? hp->n_layer : p->n_gpu_layers;
        m->offload_globals = p->n_gpu_layers > hp->n_layer;
        for (int32_t i = 0; i < m->n_weights; i++)
            if (weight_offloaded(m, &m->weights[i])) total += m->weights[i].nbytes; /* uploaded, then prefaulted */
        if (model_offload(m, p, &done, total) != 0) goto fail;
    }
    if (p->prefault && model_prefault(m, p, &done, total) != 0) goto fail;
    if (p->progress) p->progress(1.0f, p->progress_user);
    return m;
fail:
    model_free(m);
    return NULL;
}

void model_free(model *m) {
    if (!m) return;
    if (m->gpu_hd) host_weights_free(m->gpu_hd, &m->gpu_weights);
    free(m->layers);
    free(m->weights);
    gguf_close(m->file);
    free(m);
}

graph_tensor *model_weight_leaf(graph *g, const model_weight *w) {
    graph_tensor *t = graph_tensor_new(g, w->dtype, w->n_dims, w->ne);
    if (!t) return NULL;
    graph_tensor_set_name(t, "%s", w->name);
    graph_tensor_bind(t, GRAPH_WEIGHT, w->home_device, w->buffer, w->offset, w->data);
    return t;
}
