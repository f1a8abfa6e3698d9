/* Hyperparameters from GGUF metadata keys "<arch>.<name>": the keys every
 * architecture shares, then the architecture's own hook, then the checks of
 * meaning every model must pass before a graph is built from it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

enum { KEY_MAX = 128 };

static const char *hp_key(const model_hp_reader *r, const char *suffix, char *buf) {
    snprintf(buf, KEY_MAX, "%s.%s", r->arch, suffix);
    return buf;
}

bool model_hp_has(const model_hp_reader *r, const char *suffix) {
    char key[KEY_MAX];
    return gguf_find_key(r->f, hp_key(r, suffix, key)) >= 0;
}

int model_hp_int(const model_hp_reader *r, const char *suffix, int32_t *out) {
    char key[KEY_MAX];
    int64_t v;
    hp_key(r, suffix, key);
    if (gguf_get_int(r->f, key, &v) != 0)
        return -1; /* the reader names the file and key */
    if (v <= 0 || v > INT32_MAX)
        return error_set("%s: key '%s' = %lld is out of range", gguf_path(r->f), key,
                         (long long)v);
    *out = (int32_t)v;
    return 0;
}

int model_hp_int_opt(const model_hp_reader *r, const char *suffix, int32_t *out) {
    if (!model_hp_has(r, suffix)) return 0;
    return model_hp_int(r, suffix, out);
}

int model_hp_f32_opt(const model_hp_reader *r, const char *suffix, float *out) {
    char key[KEY_MAX];
    hp_key(r, suffix, key);
    if (gguf_find_key(r->f, key) < 0) return 0;
    float v;
    if (gguf_get_f32(r->f, key, &v) != 0) return -1; /* the reader names the file and key */
    if (!isfinite(v))
        return error_set("%s: key '%s' is not a finite number", gguf_path(r->f), key);
    *out = v;
    return 0;
}

int model_hp_bool_opt(const model_hp_reader *r, const char *suffix, bool *out) {
    char key[KEY_MAX];
    hp_key(r, suffix, key);
    if (gguf_find_key(r->f, key) < 0) return 0;
    return gguf_get_bool(r->f, key, out);
}

static bool str_is(gguf_str s, const char *lit) {
    return s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len);
}

/* RoPE scaling: rope.scaling.type none | linear | yarn | llama3 | longrope,
 * with rope.scaling.factor (or the older rope.scale_linear). Llama-3 and
 * LongRoPE carry their factors in tensors. */
static int hp_rope_scaling(const model_hp_reader *r, model_hparams *hp) {
    char key[KEY_MAX];
    float factor = 0.0f;
    if (model_hp_f32_opt(r, "rope.scale_linear", &factor) != 0) return -1;
    if (factor > 0.0f) hp->rope_scaling = MODEL_ROPE_SCALING_LINEAR;
    hp_key(r, "rope.scaling.type", key);
    if (gguf_find_key(r->f, key) >= 0) {
        gguf_str s;
        if (gguf_get_str(r->f, key, &s) != 0) return -1; /* the reader names the file and key */
        if (str_is(s, "none")) hp->rope_scaling = MODEL_ROPE_SCALING_NONE;
        else if (str_is(s, "linear")) hp->rope_scaling = MODEL_ROPE_SCALING_LINEAR;
        else if (str_is(s, "yarn")) hp->rope_scaling = MODEL_ROPE_SCALING_YARN;
        else if (str_is(s, "llama3")) hp->rope_scaling = MODEL_ROPE_SCALING_LLAMA3;
        else if (str_is(s, "longrope")) hp->rope_scaling = MODEL_ROPE_SCALING_LONGROPE;
        else
            return error_set("%s: key '%s' = '%.*s' is not supported (none, linear, yarn, llama3, longrope)",
                             gguf_path(r->f), key, (int)(s.len > 32 ? 32 : s.len), s.ptr);
        if (model_hp_f32_opt(r, "rope.scaling.factor", &factor) != 0) return -1;
    }
    if (factor < 0.0f)
        return error_set("%s: rope scaling factor %g is negative", gguf_path(r->f), factor);
    bool stretches = hp->rope_scaling == MODEL_ROPE_SCALING_LINEAR || hp->rope_scaling == MODEL_ROPE_SCALING_YARN;
    hp->rope_freq_scale = stretches && factor > 0.0f ? 1.0f / factor : 1.0f;

    hp->n_ctx_orig = hp->n_ctx_train;
    if (model_hp_int_opt(r, "rope.scaling.original_context_length", &hp->n_ctx_orig)) return -1;
    if (hp->rope_scaling == MODEL_ROPE_SCALING_YARN) {
        /* YaRN's defaults; ext_factor 1 turns the NTK-by-parts ramp on. */
        hp->yarn_ext_factor = 1.0f;
        hp->yarn_beta_fast = 32.0f;
        hp->yarn_beta_slow = 1.0f;
        if (model_hp_f32_opt(r, "rope.scaling.yarn_ext_factor", &hp->yarn_ext_factor) ||
            model_hp_f32_opt(r, "rope.scaling.yarn_beta_fast", &hp->yarn_beta_fast) ||
            model_hp_f32_opt(r, "rope.scaling.yarn_beta_slow", &hp->yarn_beta_slow))
            return -1;
    }
    if (model_hp_f32_opt(r, "rope.scaling.attn_factor", &hp->yarn_attn_factor)) return -1;
    return 0;
}

/* pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank (llama.cpp's numbers). */
static int hp_pooling(const model_hp_reader *r, int32_t *out) {
    char key[KEY_MAX];
    int64_t v;
    if (!model_hp_has(r, "pooling_type")) return 0;
    if (gguf_get_int(r->f, hp_key(r, "pooling_type", key), &v) != 0) return -1;
    if (v < 0 || v > 4)
        return error_set("%s: key '%s' = %lld is not a pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank)",
                         gguf_path(r->f), key, (long long)v);
    *out = (int32_t)v;
    return 0;
}

/* Mixture of experts: expert_count (absent: a dense FFN), expert_used_count
 * (required with experts), the experts' FFN size (expert_feed_forward_length,
 * default the dense one; a family's hook may have its own rule) and the
 * shared expert's. */
static int hp_experts(const model_hp_reader *r, model_hparams *hp) {
    if (model_hp_int_opt(r, "expert_count", &hp->n_expert) ||
        model_hp_int_opt(r, "expert_used_count", &hp->n_expert_used) ||
        model_hp_int_opt(r, "expert_feed_forward_length", &hp->n_ff_exp) ||
        model_hp_int_opt(r, "expert_shared_feed_forward_length", &hp->n_ff_shexp))
        return -1;
    if (hp->n_expert > 0 && !model_hp_has(r, "expert_used_count"))
        return error_set("%s: key '%s.expert_used_count' not found (%s.expert_count is %d)", gguf_path(r->f),
                         r->arch, r->arch, hp->n_expert);
    return 0;
}

/* attention.head_count_kv: one number, or one per block where 0 marks a
 * recurrent block (llama.cpp's hybrids); the attending blocks must agree. */
static int hp_head_kv(const model_hp_reader *r, model_hparams *hp) {
    char key[KEY_MAX];
    const int64_t i = gguf_find_key(r->f, hp_key(r, "attention.head_count_kv", key));
    if (i < 0) return 0;
    /* an array only where recurrent blocks can be built (state_floats) */
    if (gguf_kv_type(r->f, i) != GGUF_TYPE_ARRAY || !hp->arch->state_floats)
        return model_hp_int(r, "attention.head_count_kv", &hp->n_head_kv);
    gguf_type et;
    uint64_t n;
    const void *data;
    if (gguf_get_arr(r->f, key, &et, &n, &data) != 0) return -1;
    if ((et != GGUF_TYPE_UINT32 && et != GGUF_TYPE_INT32) || n != (uint64_t)hp->n_layer)
        return error_set("%s: key '%s' must hold one 32-bit integer per block (%d)", gguf_path(r->f), key,
                         hp->n_layer);
    int32_t kv = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        int32_t v;
        memcpy(&v, (const char *)data + (size_t)il * 4, 4);
        if (v < 0 || (v > 0 && kv > 0 && v != kv))
            return error_set("%s: key '%s' gives block %d %d KV heads (blocks that attend must agree)",
                             gguf_path(r->f), key, il, v);
        if (v > 0) kv = v;
        hp->layer_recurrent[il] = v == 0;
    }
    if (kv == 0) return error_set("%s: key '%s' has no block that attends", gguf_path(r->f), key);
    hp->n_head_kv = kv;
    return 0;
}

/* Checks of meaning: a file that passes them can be built into a graph. */
static int hp_validate(const model_hparams *hp, const gguf_file *f) {
    const char *path = gguf_path(f);
    if (!(hp->rms_eps > 0.0f) || hp->rms_eps > 1.0f)
        return error_set("%s: attention.layer_norm_rms_epsilon %g must be in (0, 1]", path, hp->rms_eps);
    if (hp->n_head % hp->n_head_kv != 0)
        return error_set("%s: head_count %d is not a multiple of head_count_kv %d", path, hp->n_head,
                         hp->n_head_kv);
    if (hp->head_dim_v != hp->head_dim)
        return error_set("%s: attention.value_length %d differs from key_length %d (not supported)", path,
                         hp->head_dim_v, hp->head_dim);
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return error_set("%s: rope.dimension_count %d must be even and at most the head size %d", path,
                         hp->n_rot, hp->head_dim);
    if (!(hp->rope_freq_base > 0.0f) || !(hp->rope_freq_base_swa > 0.0f))
        return error_set("%s: rope.freq_base %g must be positive", path, hp->rope_freq_base);
    if (!(hp->norm_eps > 0.0f) || hp->norm_eps > 1.0f)
        return error_set("%s: attention.layer_norm_epsilon %g must be in (0, 1]", path, hp->norm_eps);
    if (hp->n_swa < 0)
        return error_set("%s: attention.sliding_window %d is negative", path, hp->n_swa);
    if (!isfinite(hp->attn_scale) || hp->attn_scale < 0.0f || !isfinite(hp->embd_scale) ||
        !isfinite(hp->residual_scale) || !isfinite(hp->logit_scale) || hp->logit_scale == 0.0f ||
        !isfinite(hp->logit_softcap) || hp->logit_softcap < 0.0f)
        return error_set("%s: a scale or soft-cap key is not a usable number", path);
    if (hp->n_expert == 0 && (hp->n_expert_used || hp->n_ff_shexp))
        return error_set("%s: expert_used_count or expert_shared_feed_forward_length without expert_count",
                         path);
    if (hp->n_expert > 0 && hp->n_expert_used > hp->n_expert)
        return error_set("%s: expert_used_count %d is more than expert_count %d", path, hp->n_expert_used,
                         hp->n_expert);
    if (hp->n_expert > 4096 || hp->n_ff_exp > (1 << 24) || hp->n_ff_shexp > (1 << 24))
        return error_set("%s: experts out of range (%d experts, FFN %d, shared FFN %d)", path, hp->n_expert,
                         hp->n_ff_exp, hp->n_ff_shexp);
    /* The largest graph tensors must stay indexable. */
    if ((int64_t)hp->head_dim * hp->n_head > (1 << 20) || hp->n_embd > (1 << 20) || hp->n_ff > (1 << 24) ||
        hp->n_layer > 4096)
        return error_set("%s: dimensions out of range (embedding %d, heads %d x %d, FFN %d, %d blocks)", path,
                         hp->n_embd, hp->n_head, hp->head_dim, hp->n_ff, hp->n_layer);
    return 0;
}

bool model_layer_is_swa(const model_hparams *hp, int32_t il) {
    if (hp->n_swa <= 0) return false;
    return hp->swa_pattern <= 0 || il % hp->swa_pattern < hp->swa_pattern - 1;
}

int model_hparams_load(model_hparams *hp, const gguf_file *f) {
    memset(hp, 0, sizeof *hp);
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch) != 0)
        return -1;
    const model_arch_desc *ad = model_arch_find(arch.ptr, arch.len);
    if (!ad) return error_wrap("%s", gguf_path(f));
    model_hp_reader r = {.f = f};
    snprintf(r.arch, sizeof r.arch, "%s", ad->name);
    hp->arch = ad;
    hp->rope_mode = ad->rope_mode;

    if (model_hp_int(&r, "context_length", &hp->n_ctx_train) ||
        model_hp_int(&r, "embedding_length", &hp->n_embd) || model_hp_int(&r, "block_count", &hp->n_layer))
        return -1;
    if (hp->n_layer > MODEL_MAX_LAYERS)
        return error_set("%s: block_count %d is more than %d", gguf_path(f), hp->n_layer, MODEL_MAX_LAYERS);
    if (ad->no_attention) { /* one nominal head: no attention is built, the cache's cells count positions */
        hp->n_head = hp->n_head_kv = 1;
        for (int32_t il = 0; il < hp->n_layer; il++) hp->layer_recurrent[il] = true;
        /* no FFN: llama.cpp's converter writes 0 for Mamba-2, as if absent */
        char key[KEY_MAX];
        int64_t ff;
        hp_key(&r, "feed_forward_length", key);
        if (gguf_find_key(f, key) >= 0 && (gguf_get_int(f, key, &ff) != 0 || ff != 0) &&
            model_hp_int(&r, "feed_forward_length", &hp->n_ff))
            return -1;
    } else {
        if (model_hp_int(&r, "feed_forward_length", &hp->n_ff) ||
            model_hp_int(&r, "attention.head_count", &hp->n_head))
            return -1;
        hp->n_head_kv = hp->n_head;
        if (hp_head_kv(&r, hp)) return -1;
    }
    hp->head_dim = hp->n_embd / hp->n_head;
    if (!model_hp_has(&r, "attention.key_length") && hp->n_embd % hp->n_head != 0)
        return error_set("%s: embedding_length %d is not a multiple of head_count %d", gguf_path(f),
                         hp->n_embd, hp->n_head);
    if (model_hp_int_opt(&r, "attention.key_length", &hp->head_dim)) return -1;
    hp->head_dim_v = hp->head_dim;
    if (model_hp_int_opt(&r, "attention.value_length", &hp->head_dim_v)) return -1;
    hp->n_rot = hp->head_dim;
    if (model_hp_int_opt(&r, "rope.dimension_count", &hp->n_rot)) return -1;

    hp->rms_eps = 1e-5f;
    if (model_hp_f32_opt(&r, "attention.layer_norm_rms_epsilon", &hp->rms_eps)) return -1;
    hp->rope_freq_base = 10000.0f;
    if (model_hp_f32_opt(&r, "rope.freq_base", &hp->rope_freq_base)) return -1;
    hp->yarn_attn_factor = 1.0f;
    if (hp_rope_scaling(&r, hp)) return -1;

    hp->rope_freq_base_swa = hp->rope_freq_base;
    hp->rope_freq_scale_swa = 1.0f;
    hp->embd_scale = 1.0f;
    hp->residual_scale = 1.0f;
    hp->logit_scale = 1.0f;
    hp->causal_attn = true;
    hp->pooling = -1;
    hp->norm_eps = 1e-12f;
    if (model_hp_bool_opt(&r, "attention.causal", &hp->causal_attn) ||
        model_hp_f32_opt(&r, "attention.layer_norm_epsilon", &hp->norm_eps) || hp_pooling(&r, &hp->pooling))
        return -1;
    if (hp_experts(&r, hp) != 0) return -1;
    if (ad->hparams && ad->hparams(hp, &r) != 0) return -1;
    if (hp->n_expert > 0 && hp->n_ff_exp == 0) hp->n_ff_exp = hp->n_ff;

    /* The vocabulary size: the embedding matrix is the authority. */
    const gguf_tensor_info *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return error_set("%s: tensor 'token_embd.weight' is missing", gguf_path(f));
    if (emb->n_dims != 2 || emb->ne[1] <= 0 || emb->ne[1] > INT32_MAX)
        return error_set("%s: tensor 'token_embd.weight' has a bad shape", gguf_path(f));
    hp->n_vocab = (int32_t)emb->ne[1];
    int32_t vocab_key = 0;
    if (model_hp_int_opt(&r, "vocab_size", &vocab_key)) return -1;
    if (vocab_key != 0 && vocab_key != hp->n_vocab)
        return error_set("%s: %s.vocab_size %d disagrees with token_embd.weight rows %d",
                         gguf_path(f), r.arch, vocab_key, hp->n_vocab);
    return hp_validate(hp, f);
}
