/*
 * Model loading and architecture checks on small GGUF files written here:
 * hyperparameters, tied output, qwen2 biases, Llama-3 frequency factors, and
 * one clear error naming the key or tensor for each kind of bad file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "kv/kv.h"
#include "mini_runner.h"
#include "model/model.h"
#include "util/error.h"
#include "../logits_util.h"
#include "model_test.h"

enum { E = 64, H = 4, HKV = 2, D = E / H, F = 96, V = 40, L = 2 };

typedef struct spec {
    const char *arch;
    const char *drop;       /* tensor left out */
    const char *reshape;    /* tensor written with ne[1] = 7 */
    const char *drop_key;   /* metadata key left out */
    int head_count;
    int biases;             /* write attn_{q,k,v}.bias */
    int tied;               /* no output.weight */
    float rope_factor;      /* > 0: write rope_freqs.weight filled with it */
    float bias_value;
    const char *rope_scaling; /* rope.scaling.type, with factor 4 */
} spec;


static float *filled(int64_t n, uint32_t seed, float value) {
    float *x = malloc((size_t)n * sizeof *x);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = isnan(value) ? ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.5f : value;
    }
    return x;
}

/* Write a tiny model to path following s. Returns 0. */
static int write_model(const char *path, const spec *s) {
    gguf_writer *w = gguf_writer_new();
    char key[128];
    const char *a = s->arch;
#define SETU(k, v)                                                           \
    do {                                                                     \
        snprintf(key, sizeof key, "%s.%s", a, k);                            \
        if (!s->drop_key || strcmp(s->drop_key, k)) gguf_writer_set_u32(w, key, v); \
    } while (0)
    gguf_writer_set_str(w, "general.architecture", a, strlen(a));
    SETU("context_length", 64);
    SETU("embedding_length", E);
    SETU("block_count", L);
    SETU("feed_forward_length", F);
    SETU("attention.head_count", (uint32_t)(s->head_count ? s->head_count : H));
    SETU("attention.head_count_kv", HKV);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    gguf_writer_set_f32(w, key, 1e-5f);
    if (s->rope_scaling) {
        snprintf(key, sizeof key, "%s.rope.scaling.type", a);
        gguf_writer_set_str(w, key, s->rope_scaling, strlen(s->rope_scaling));
        snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
        gguf_writer_set_f32(w, key, 4.0f);
    }
#undef SETU
    float *bufs[64];
    int nb = 0;
    uint32_t seed = 1;
#define T(name, ne0, ne1, value)                                                                \
    do {                                                                                        \
        if (s->drop && !strcmp(s->drop, name)) break;                                           \
        int64_t ne[2] = {ne0, ne1};                                                             \
        if (s->reshape && !strcmp(s->reshape, name)) ne[1] = 7;                                 \
        bufs[nb] = filled(ne[0] * ne[1], seed++, value);                                        \
        gguf_writer_add_tensor(w, name, TSR_DTYPE_F32, ne[1] > 1 ? 2 : 1, ne, bufs[nb]);         \
        nb++;                                                                                   \
    } while (0)
    T("token_embd.weight", E, V, NAN);
    for (int il = 0; il < L; il++) {
        char n[64];
#define TL(suffix, ne0, ne1, value) \
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix); \
    T(n, ne0, ne1, value)
        TL("attn_norm.weight", E, 1, 1.0f);
        TL("attn_q.weight", E, E, NAN);
        TL("attn_k.weight", E, D * HKV, NAN);
        TL("attn_v.weight", E, D * HKV, NAN);
        if (s->biases) {
            TL("attn_q.bias", E, 1, s->bias_value);
            TL("attn_k.bias", D * HKV, 1, s->bias_value);
            TL("attn_v.bias", D * HKV, 1, s->bias_value);
        }
        TL("attn_output.weight", E, E, NAN);
        TL("ffn_norm.weight", E, 1, 1.0f);
        TL("ffn_gate.weight", E, F, NAN);
        TL("ffn_up.weight", E, F, NAN);
        TL("ffn_down.weight", F, E, NAN);
#undef TL
    }
    T("output_norm.weight", E, 1, 1.0f);
    if (!s->tied) T("output.weight", E, V, NAN);
    if (s->rope_factor > 0) T("rope_freqs.weight", D / 2, 1, s->rope_factor);
#undef T
    int rc = gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    return rc;
}

static model *load(const char *path) {
    gguf_file *f = gguf_open(path);
    if (!f) return NULL;
    model_load_params lp = {.gpu_device = -1, .cpu_device = -1};
    return model_load(f, &lp);
}

/* Logits of the last of 5 fixed tokens. */
static int forward(const model *m, float *out) {
    const int32_t toks[5] = {1, 7, 3, 12, 30};
    kv_cache_params kp = {.n_layer = m->hp.n_layer, .n_ctx = 8, .n_embd_k = D * HKV, .n_embd_v = D * HKV,
                          .dtype_k = TSR_DTYPE_F32, .dtype_v = TSR_DTYPE_F32};
    kv_cache *kv = kv_cache_new(&kp);
    model_batch_graph bg;
    if (!kv || model_build_graph(m, kv, NULL, 5, (int32_t[]){0}, (int32_t[]){5}, 1, &bg) != 0 || mini_alloc(bg.g) != 0) return -1;
    for (int i = 0; i < 5; i++) {
        ((int32_t *)bg.tokens->t.data)[i] = toks[i];
        ((int32_t *)bg.pos->t.data)[i] = i;
        for (int j = 0; j < 5; j++) ((float *)bg.mask->t.data)[i * 5 + j] = j <= i ? 0.0f : -INFINITY;
    }
    ((int32_t *)bg.out_ids->t.data)[0] = 4;
    int rc = mini_compute(bg.g);
    if (rc == 0) memcpy(out, bg.logits->t.data, V * sizeof(float));
    mini_release(bg.g);
    graph_free(bg.g);
    kv_cache_free(kv);
    return rc;
}

/* Expect loading to fail with a message containing every needle. */
static void expect_error(const char *path, const spec *s, const char *what, const char *n1, const char *n2,
                         const char *n3) {
    if (write_model(path, s) != 0) {
        ADD_FAILURE("%s: cannot write test file: %s", what, error_get());
        return;
    }
    model *m = load(path);
    const char *msg = error_get();
    EXPECT_ERROR(!m, msg, n1, "%s", what);
    /* (n ? n : "") only for the printf check: a NULL needle never fails */
    EXPECT(!n2 || strstr(msg, n2), "%s: message lacks '%s': %s", what, n2 ? n2 : "", msg);
    EXPECT(!n3 || strstr(msg, n3), "%s: message lacks '%s': %s", what, n3 ? n3 : "", msg);
    model_free(m);
}

TEST(test_model_load) {
    char path[] = "/tmp/tessera-model-test-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp %s", path);
    close(fd);

    /* A good llama file. */
    spec good = {.arch = "llama"};
    EXPECT(write_model(path, &good) == 0, "write: %s", error_get());
    model *m = load(path);
    EXPECT(m, "llama: %s", error_get());
    float base[V], other[V], ff4[V];
    if (m) {
        EXPECT(m->hp.n_embd == E && m->hp.n_layer == L && m->hp.n_head == H && m->hp.n_head_kv == HKV &&
                  m->hp.head_dim == D && m->hp.n_ff == F && m->hp.n_vocab == V && m->hp.n_rot == D,
               "llama hparams");
        EXPECT(m->hp.rope_freq_base == 10000.0f && m->hp.rope_freq_scale == 1.0f, "rope defaults");
        EXPECT(m->output->data != m->tok_embd->data, "untied output");
        EXPECT(forward(m, base) == 0, "forward: %s", error_get());
        printf("ok   llama: hparams, untied output, forward\n");
    }
    model_free(m);

    /* Tied output uses token_embd. */
    spec tied = good;
    tied.tied = 1;
    write_model(path, &tied);
    m = load(path);
    EXPECT(m && m->output->data == m->tok_embd->data, "tied output: %s", error_get());
    if (m) printf("ok   tied output reads token_embd.weight\n");
    model_free(m);

    /* Llama-3 frequency factors: all ones change nothing, twos change logits. */
    spec ff = good;
    ff.rope_factor = 1.0f;
    write_model(path, &ff);
    m = load(path);
    EXPECT(m && m->rope_freqs && m->rope_freqs->nbytes == (uint64_t)(D / 2) * 4, "rope_freqs loaded: %s", error_get());
    if (m && forward(m, other) == 0) {
        EXPECT(max_diff(base, other, V) < 1e-5, "factors of 1 changed logits by %g", max_diff(base, other, V));
        printf("ok   rope_freqs of 1: max diff %.3g\n", max_diff(base, other, V));
    }
    model_free(m);
    ff.rope_factor = 4.0f;
    write_model(path, &ff);
    m = load(path);
    if (m && forward(m, other) == 0) {
        EXPECT(max_diff(base, other, V) > 1e-4, "factors of 4 did not change logits");
        printf("ok   rope_freqs of 4: max diff %.3g\n", max_diff(base, other, V));
        memcpy(ff4, other, sizeof ff4);
    }
    model_free(m);

    /* Linear RoPE scaling: positions divided by the factor. */
    spec lin = good;
    lin.rope_scaling = "linear";
    write_model(path, &lin);
    m = load(path);
    EXPECT(m && m->hp.rope_freq_scale == 0.25f, "linear scaling: %s", error_get());
    if (m && forward(m, other) == 0) {
        EXPECT(max_diff(base, other, V) > 1e-4, "linear scaling did not change logits");
        printf("ok   linear rope scaling x4: freq_scale 0.25, logits differ by %.3g\n", max_diff(base, other, V));
        /* dividing every frequency by 4 is the same rotation either way */
        EXPECT(max_diff(ff4, other, V) < 1e-4, "factors of 4 and linear x4 differ by %g", max_diff(ff4, other, V));
        printf("ok   frequency factors of 4 == linear scaling x4: max diff %.3g\n", max_diff(ff4, other, V));
    }
    model_free(m);

    /* qwen2: biases are required and used. */
    spec q = {.arch = "qwen2", .biases = 1, .bias_value = 0.0f};
    write_model(path, &q);
    m = load(path);
    EXPECT(m && m->layers[0].bq && m->hp.rope_mode == TSR_ROPE_NEOX, "qwen2: %s", error_get());
    float q0[V], q1[V];
    int q_ok = m && forward(m, q0) == 0;
    model_free(m);
    q.bias_value = 0.25f;
    write_model(path, &q);
    m = load(path);
    q_ok = q_ok && m && forward(m, q1) == 0;
    EXPECT(q_ok, "qwen2 forward: %s", error_get());
    if (q_ok) {
        EXPECT(max_diff(q0, q1, V) > 1e-4, "qwen2 biases have no effect");
        EXPECT(max_diff(q0, base, V) > 1e-4, "qwen2 (NeoX rope) equals llama (normal rope)");
        printf("ok   qwen2: biases change logits by %.3g, NeoX vs normal rope by %.3g\n", max_diff(q0, q1, V),
               max_diff(q0, base, V));
    }
    model_free(m);

    /* Errors. */
    spec s;
    s = good, s.arch = "gpt2";
    expect_error(path, &s, "unknown architecture", "'gpt2'", "llama, qwen2", NULL);
    s = good, s.drop = "blk.1.ffn_up.weight";
    expect_error(path, &s, "missing tensor", "blk.1.ffn_up.weight", "missing", NULL);
    s = good, s.reshape = "blk.0.attn_k.weight";
    expect_error(path, &s, "wrong shape", "blk.0.attn_k.weight", "[64, 7]", "[64, 32]");
    s = good, s.drop = "output_norm.weight";
    expect_error(path, &s, "missing output norm", "output_norm.weight", NULL, NULL);
    s = (spec){.arch = "qwen2"};
    expect_error(path, &s, "qwen2 without biases", "blk.0.attn_q.bias", "missing", NULL);
    s = good, s.drop_key = "embedding_length";
    expect_error(path, &s, "missing key", "llama.embedding_length", NULL, NULL);
    s = good, s.head_count = 5;
    expect_error(path, &s, "heads do not divide", "head_count", NULL, NULL);
    s = good, s.rope_scaling = "su-scaled";
    expect_error(path, &s, "unsupported rope scaling", "rope.scaling.type", "su-scaled", NULL);
    s = good, s.drop = "token_embd.weight";
    expect_error(path, &s, "missing embeddings", "token_embd.weight", NULL, NULL);

    unlink(path);
}

HARNESS_MAIN("model load", HARNESS_TEST(test_model_load))
