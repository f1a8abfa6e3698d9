/* Hyperparameters from GGUF metadata keys "<arch>.<name>". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "util/error.h"

enum { KEY_MAX = 128 };

typedef struct hp_reader {
    const gguf_file *f;
    char arch[32];
} hp_reader;

static const char *hp_key(const hp_reader *r, const char *suffix, char *buf) {
    snprintf(buf, KEY_MAX, "%s.%s", r->arch, suffix);
    return buf;
}

/* A required positive integer key. */
static int hp_int(const hp_reader *r, const char *suffix, int32_t *out) {
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

/* An optional positive integer key: 0 and *out untouched when absent. */
static int hp_int_opt(const hp_reader *r, const char *suffix, int32_t *out) {
    char key[KEY_MAX];
    if (gguf_find_key(r->f, hp_key(r, suffix, key)) < 0) return 0;
    return hp_int(r, suffix, out);
}

static int hp_f32_opt(const hp_reader *r, const char *suffix, float *out) {
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

/* RoPE scaling: "none", "linear" (freq_scale = 1/factor); Llama-3 style
 * scaling needs no key here (the rope_freqs.weight tensor carries it). */
static int hp_rope_scaling(const hp_reader *r, model_hparams *hp) {
    char key[KEY_MAX];
    float factor = 0.0f;
    if (hp_f32_opt(r, "rope.scale_linear", &factor) != 0) return -1;
    hp_key(r, "rope.scaling.type", key);
    if (gguf_find_key(r->f, key) >= 0) {
        gguf_str s;
        if (gguf_get_str(r->f, key, &s) != 0) return -1; /* the reader names the file and key */
        bool linear = s.len == 6 && !memcmp(s.ptr, "linear", 6);
        bool none = s.len == 4 && !memcmp(s.ptr, "none", 4);
        bool llama3 = s.len == 6 && !memcmp(s.ptr, "llama3", 6);
        if (!linear && !none && !llama3)
            return error_set("%s: key '%s' = '%.*s' is not supported (none, linear, llama3)",
                             gguf_path(r->f), key, (int)(s.len > 32 ? 32 : s.len), s.ptr);
        if (linear && hp_f32_opt(r, "rope.scaling.factor", &factor) != 0) return -1;
        if (!linear) factor = 0.0f;
    }
    if (factor < 0.0f)
        return error_set("%s: rope scaling factor %g is negative", gguf_path(r->f), factor);
    hp->rope_freq_scale = factor > 0.0f ? 1.0f / factor : 1.0f;
    return 0;
}

int model_hparams_load(model_hparams *hp, const gguf_file *f) {
    memset(hp, 0, sizeof *hp);
    gguf_str arch;
    if (gguf_get_str(f, "general.architecture", &arch) != 0)
        return -1;
    const model_arch_info *ai = model_arch_find(arch.ptr, arch.len);
    if (!ai) return error_wrap("%s", gguf_path(f));
    hp_reader r = {.f = f};
    snprintf(r.arch, sizeof r.arch, "%s", ai->name);
    hp->arch = ai->arch;
    hp->rope_mode = ai->rope_mode;
    hp->qkv_bias = ai->qkv_bias;

    if (hp_int(&r, "context_length", &hp->n_ctx_train) || hp_int(&r, "embedding_length", &hp->n_embd) ||
        hp_int(&r, "block_count", &hp->n_layer) || hp_int(&r, "feed_forward_length", &hp->n_ff) ||
        hp_int(&r, "attention.head_count", &hp->n_head))
        return -1;
    hp->n_head_kv = hp->n_head;
    if (hp_int_opt(&r, "attention.head_count_kv", &hp->n_head_kv)) return -1;
    if (hp->n_embd % hp->n_head != 0)
        return error_set("%s: embedding_length %d is not a multiple of head_count %d", gguf_path(f),
                         hp->n_embd, hp->n_head);
    if (hp->n_head % hp->n_head_kv != 0)
        return error_set("%s: head_count %d is not a multiple of head_count_kv %d", gguf_path(f),
                         hp->n_head, hp->n_head_kv);
    hp->head_dim = hp->n_embd / hp->n_head;
    if (hp_int_opt(&r, "attention.key_length", &hp->head_dim)) return -1;
    int32_t v_len = hp->head_dim;
    if (hp_int_opt(&r, "attention.value_length", &v_len)) return -1;
    if (v_len != hp->head_dim)
        return error_set("%s: attention.value_length %d differs from key_length %d (not supported)",
                         gguf_path(f), v_len, hp->head_dim);
    hp->n_rot = hp->head_dim;
    if (hp_int_opt(&r, "rope.dimension_count", &hp->n_rot)) return -1;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return error_set("%s: rope.dimension_count %d must be even and at most the head size %d",
                         gguf_path(f), hp->n_rot, hp->head_dim);

    hp->rms_eps = 1e-5f;
    if (hp_f32_opt(&r, "attention.layer_norm_rms_epsilon", &hp->rms_eps)) return -1;
    hp->rope_freq_base = 10000.0f;
    if (hp_f32_opt(&r, "rope.freq_base", &hp->rope_freq_base)) return -1;
    if (hp->rope_freq_base <= 0.0f)
        return error_set("%s: rope.freq_base %g must be positive", gguf_path(f), hp->rope_freq_base);
    if (hp_rope_scaling(&r, hp)) return -1;

    /* The vocabulary size: the embedding matrix is the authority. */
    const gguf_tensor_info *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) return error_set("%s: tensor 'token_embd.weight' is missing", gguf_path(f));
    if (emb->n_dims != 2 || emb->ne[1] <= 0 || emb->ne[1] > INT32_MAX)
        return error_set("%s: tensor 'token_embd.weight' has a bad shape", gguf_path(f));
    hp->n_vocab = (int32_t)emb->ne[1];
    int32_t vocab_key = 0;
    if (hp_int_opt(&r, "vocab_size", &vocab_key)) return -1;
    if (vocab_key != 0 && vocab_key != hp->n_vocab)
        return error_set("%s: %s.vocab_size %d disagrees with token_embd.weight rows %d",
                         gguf_path(f), r.arch, vocab_key, hp->n_vocab);
    return 0;
}
