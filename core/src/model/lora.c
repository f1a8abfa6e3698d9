/* LoRA adapters: loading and validation (see lora.h). */
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/dtype.h"
#include "util/error.h"

/* A string key that must be present and equal want. */
static int key_is(const gguf_file *f, const char *key, const char *want) {
    gguf_str s;
    if (gguf_get_str(f, key, &s) != 0)
        return error_set("%s: key '%s' is missing or not a string: not a LoRA adapter (llama.cpp's "
                         "convert_lora_to_gguf.py writes %s = \"%s\")",
                         gguf_path(f), key, key, want);
    if (s.len != strlen(want) || memcmp(s.ptr, want, s.len) != 0)
        return error_set("%s: %s is \"%.*s\", expected \"%s\"", gguf_path(f), key, (int)(s.len > 64 ? 64 : s.len),
                         s.ptr, want);
    return 0;
}

int lora_file_check(const gguf_file *f, const char *arch, float *alpha) {
    *alpha = 0.0f;
    if (key_is(f, "general.type", "adapter") != 0 || key_is(f, "adapter.type", "lora") != 0 ||
        key_is(f, "general.architecture", arch) != 0)
        return -1;
    if (gguf_find_key(f, "adapter.lora.alpha") >= 0) {
        if (gguf_get_f32(f, "adapter.lora.alpha", alpha) != 0) return -1;
        if (!isfinite(*alpha) || *alpha < 0.0f)
            return error_set("%s: adapter.lora.alpha is %g, expected a finite value >= 0", gguf_path(f),
                             (double)*alpha);
    }
    if (gguf_tensor_count(f) == 0) return error_set("%s: the adapter has no tensors", gguf_path(f));
    return 0;
}

int lora_tensor_base(const gguf_file *f, const gguf_tensor_info *ti, size_t *base_len, bool *is_a) {
    const size_t len = strlen(ti->name);
    *is_a = len > 7 && !strcmp(ti->name + len - 7, ".lora_a");
    const bool is_b = len > 7 && !strcmp(ti->name + len - 7, ".lora_b");
    if (!*is_a && !is_b)
        return error_set("%s: tensor '%s' is not a LoRA tensor (its name must end in .lora_a or .lora_b)",
                         gguf_path(f), ti->name);
    const dtype_traits *tr = dtype_traits_get(ti->dtype);
    if (!tr || !tr->supported)
        return error_set("%s: tensor '%s' has type %s, which Tessera cannot compute with", gguf_path(f), ti->name,
                         dtype_name(ti->dtype));
    if (ti->n_dims != 2)
        return error_set("%s: tensor '%s' has %d dimensions, expected 2", gguf_path(f), ti->name, (int)ti->n_dims);
    *base_len = len - 7;
    return 0;
}

int lora_pair_check(const gguf_file *f, const char *w_name, const int64_t *w_ne, const char *a_name,
                    const int64_t *a_ne, const char *b_name, const int64_t *b_ne) {
    const char *path = gguf_path(f);
    if (!a_name || !b_name)
        return error_set("%s: '%s' has %s.lora_%s but no %s.lora_%s", path, w_name, w_name, a_name ? "a" : "b",
                         w_name, a_name ? "b" : "a");
    if (a_ne[0] != w_ne[0])
        return error_set("%s: tensor '%s' has shape [%lld, %lld], expected [%lld, rank] for '%s' [%lld, %lld]", path,
                         a_name, (long long)a_ne[0], (long long)a_ne[1], (long long)w_ne[0], w_name,
                         (long long)w_ne[0], (long long)w_ne[1]);
    if (b_ne[1] != w_ne[1] || b_ne[0] != a_ne[1])
        return error_set("%s: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld] (the rank of '%s', then "
                         "the rows of '%s')",
                         path, b_name, (long long)b_ne[0], (long long)b_ne[1], (long long)a_ne[1], (long long)w_ne[1],
                         a_name, w_name);
    return 0;
}

/* The model weight named name, NULL if the model has none. */
static const model_weight *base_weight(const model *m, const char *name, size_t len) {
    for (int32_t i = 0; i < m->n_weights; i++)
        if (strlen(m->weights[i].name) == len && !memcmp(m->weights[i].name, name, len)) return &m->weights[i];
    return NULL;
}

/* Whether the graph multiplies by w in blk_linear, where an adapter is
 * added: not the rows read by index (embeddings) nor vectors. */
static bool weight_is_product(const model *m, const model_weight *w) {
    return w->n_dims == 2 && w != m->tok_embd && w != m->pos_embd && w != m->type_embd;
}

/* File one tensor of the adapter under its base weight's pair. */
static int take_tensor(model_lora *l, const gguf_tensor_info *ti) {
    const model *m = l->base;
    const char *path = gguf_path(l->file);
    size_t len;
    bool is_a;
    if (lora_tensor_base(l->file, ti, &len, &is_a) != 0) return -1;
    const model_weight *w = base_weight(m, ti->name, len);
    if (!w)
        return error_set("%s: tensor '%s' adapts '%.*s', which the %s model does not have", path, ti->name,
                         (int)len, ti->name, m->hp.arch->name);
    if (!weight_is_product(m, w))
        return error_set("%s: tensor '%s' adapts '%s', which is not a matrix product Tessera can adapt "
                         "(token and position embeddings, norms and biases are not)",
                         path, ti->name, w->name);
    const int32_t wi = (int32_t)(w - m->weights);
    if (l->pair_of[wi] < 0) l->pair_of[wi] = l->n_pairs++;
    model_lora_pair *p = &l->pairs[l->pair_of[wi]];
    model_weight *half = is_a ? &p->a : &p->b;
    if (half->name) return error_set("%s: tensor '%s' appears twice", path, ti->name);
    *half = (model_weight){
        .name = ti->name,
        .dtype = ti->dtype,
        .n_dims = 2,
        .ne = {ti->ne[0], ti->ne[1], 1, 1},
        .nbytes = ti->size,
        .layer = w->layer,
        .home_device = -1,
        .data = (void *)ti->data,
    };
    return 0;
}

/* Put the pairs of offloaded weights beside them on the GPU. */
static int lora_upload(model_lora *l) {
    const model *m = l->base;
    if (!m->gpu_hd) return 0;
    model_weight **mw = calloc((size_t)l->n_pairs * 2 + 1, sizeof *mw);
    if (!mw) return error_set("%s: out of memory", gguf_path(l->file));
    int32_t n = 0;
    for (int32_t i = 0; i < m->n_weights; i++) {
        if (l->pair_of[i] < 0 || m->weights[i].home_device < 0) continue;
        model_lora_pair *p = &l->pairs[l->pair_of[i]];
        mw[n++] = &p->a;
        mw[n++] = &p->b;
    }
    int rc = model_weights_upload(m->gpu_hd, m->gpu_device, mw, n, &l->gpu_weights, NULL, NULL);
    if (l->gpu_weights.n_buffers > 0) l->gpu_hd = m->gpu_hd;
    free(mw);
    return rc ? error_wrap("%s: uploading the adapter", gguf_path(l->file)) : 0;
}

model_lora *model_lora_load(const model *m, const char *path) {
    gguf_file *f = gguf_open(path);
    if (!f) return NULL;
    model_lora *l = calloc(1, sizeof *l);
    if (!l) {
        gguf_close(f);
        error_set("%s: out of memory", path);
        return NULL;
    }
    l->file = f;
    l->base = m;
    if (lora_file_check(f, m->hp.arch->name, &l->alpha) != 0) goto fail;
    const int64_t n_tensors = gguf_tensor_count(f);
    l->pair_of = malloc(((size_t)m->n_weights + 1) * sizeof *l->pair_of);
    l->pairs = calloc((size_t)n_tensors, sizeof *l->pairs);
    if (!l->pair_of || !l->pairs) {
        error_set("%s: out of memory", path);
        goto fail;
    }
    for (int32_t i = 0; i < m->n_weights; i++) l->pair_of[i] = -1;
    for (int64_t i = 0; i < n_tensors; i++)
        if (take_tensor(l, gguf_tensor(f, i)) != 0) goto fail;
    for (int32_t i = 0; i < m->n_weights; i++)
        if (l->pair_of[i] >= 0) {
            const model_lora_pair *p = &l->pairs[l->pair_of[i]];
            if (lora_pair_check(f, m->weights[i].name, m->weights[i].ne, p->a.name, p->a.ne, p->b.name, p->b.ne))
                goto fail;
        }
    if (lora_upload(l) != 0) goto fail;
    return l;
fail:
    model_lora_free(l);
    return NULL;
}

void model_lora_free(model_lora *l) {
    if (!l) return;
    if (l->gpu_hd) host_weights_free(l->gpu_hd, &l->gpu_weights);
    free(l->pair_of);
    free(l->pairs);
    gguf_close(l->file);
    free(l);
}

const model_lora_pair *model_lora_pair_for(const model_lora *l, const model_weight *w) {
    const model *m = l->base;
    if (w < m->weights || w >= m->weights + m->n_weights) return NULL;
    const int32_t i = l->pair_of[w - m->weights];
    return i >= 0 ? &l->pairs[i] : NULL;
}

float model_lora_scale(const model_lora *l, const model_lora_pair *p, float user_scale) {
    const float rank = (float)p->a.ne[1];
    return l->alpha != 0.0f ? user_scale * l->alpha / rank : user_scale;
}
