/* clip_audio: loading an audio mmproj, its features, the encoder graph. */
#include "mtmd/clip_audio.h"
#include "mtmd/clip_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/plugin_util.h>
#include <tessera/tessera.h>

#include "gguf/gguf.h"
#include "graph/graph.h"
#include "host/host_log.h"
#include "mtmd/mel.h"
#include "sched/sched.h"
#include "util/error.h"

enum {
    AUDIO_MAX_LAYERS = 128,
    /* Whisper's window: 30 s, 3000 mel frames */
    AUDIO_CHUNK_SAMPLES = 30 * MEL_RATE,
    AUDIO_CHUNK_FRAMES = AUDIO_CHUNK_SAMPLES / MEL_HOP,
};

typedef struct a_linear {
    const gguf_tensor_info *w, *b; /* b may be NULL */
} a_linear;

typedef struct a_norm {
    const gguf_tensor_info *w, *b; /* b NULL: an RMS norm */
} a_norm;

typedef struct a_layer {
    a_linear q, k, v, o, up, down;
    a_norm ln1, ln2;
} a_layer;

/* The projectors after the Whisper encoder (clip_audio.h). */
typedef enum audio_family { AUDIO_ULTRAVOX, AUDIO_VOXTRAL } audio_family;

static const struct {
    const char *name;
    audio_family fam;
} families[] = {{"ultravox", AUDIO_ULTRAVOX}, {"voxtral", AUDIO_VOXTRAL}};

struct clip_audio {
    gguf_file *f;
    char path[512];
    char projector[32];
    audio_family fam;
    int32_t n_mel, n_embd, n_ff, n_head, n_layer, n_pos, stack, n_hidden, n_out;
    float eps;
    const gguf_tensor_info *conv1_w, *conv1_b, *conv2_w, *conv2_b, *pos;
    a_layer *layers;
    a_norm post_ln, norm_pre, norm_mid;
    a_linear mlp1, mlp2;
    float *conv2_01, *conv2_2; /* the second convolution's taps as products */
    float *zeros;              /* padding columns */
    mel_bank mel;
    float *mel_all; /* the last sound's features [n_mel][frames] */
    uint64_t mel_key;
    int64_t mel_n;
    sched *s;
    host_device *s_devs[8];
    int s_n;
};

/* ---------------------------------------------------------------- load */

static int key_i32(clip_audio *a, const char *key, int32_t lo, int32_t hi, int32_t *out) {
    return clip_file_key_int(a->f, a->path, key, false, lo, hi, out);
}

static int tensor(clip_audio *a, const char *name, bool optional, bool f16_ok, int64_t ne0, int64_t ne1, int64_t ne2,
                  const gguf_tensor_info **out) {
    return clip_file_tensor(a->f, a->path, name, optional, f16_ok, ne0, ne1, ne2, 1, out);
}

static int linear(clip_audio *a, const char *name, int64_t in, int64_t out, bool bias, a_linear *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(a, n, false, true, in, out, 1, &l->w) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(a, n, !bias, false, out, 1, 1, &l->b);
}

static int norm(clip_audio *a, const char *name, bool bias, int64_t dim, a_norm *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(a, n, false, false, dim, 1, 1, &l->w) != 0) return -1;
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(a, n, false, false, dim, 1, 1, &l->b);
}

/* The convolution kernel [3, c_in, c_out] (F16 or F32) at (k, ci, co). */
static float kernel_at(const gguf_tensor_info *t, int64_t k, int64_t ci, int64_t co) {
    const size_t i = (size_t)(k + 3 * (ci + t->ne[1] * co));
    return t->dtype == TSR_DTYPE_F16 ? tsr_fp16_to_f32(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

int clip_audio_probe(const char *path) {
    gguf_file *f = gguf_open(path);
    if (!f) {
        error_clear();
        return 0;
    }
    bool vision = false, audio = false;
    if (gguf_find_key(f, "clip.has_vision_encoder") >= 0 && gguf_get_bool(f, "clip.has_vision_encoder", &vision) != 0)
        vision = false;
    if (gguf_find_key(f, "clip.has_audio_encoder") >= 0 && gguf_get_bool(f, "clip.has_audio_encoder", &audio) != 0)
        audio = false;
    gguf_close(f);
    error_clear();
    return audio && !vision;
}

/* Whisper's encoder: the convolutions, positions, blocks and final norm. */
static int whisper_load(clip_audio *a) {
    const int64_t D = a->n_embd, M = a->n_mel;
    if (tensor(a, "a.conv1d.1.weight", false, true, 3, M, D, &a->conv1_w) ||
        tensor(a, "a.conv1d.1.bias", false, false, 1, D, 1, &a->conv1_b) ||
        tensor(a, "a.conv1d.2.weight", false, true, 3, D, D, &a->conv2_w) ||
        tensor(a, "a.conv1d.2.bias", false, false, 1, D, 1, &a->conv2_b))
        return -1;
    const gguf_tensor_info *pos = gguf_find_tensor(a->f, "a.position_embd.weight");
    if (!pos) return error_set("%s: tensor a.position_embd.weight is missing", a->path);
    if (pos->ne[1] < 1500 || pos->ne[1] > 1 << 20)
        return error_set("%s: tensor a.position_embd.weight has %lld positions: a 30 s window needs 1500", a->path,
                         (long long)pos->ne[1]);
    if (tensor(a, "a.position_embd.weight", false, false, D, pos->ne[1], 1, &a->pos)) return -1;
    a->n_pos = (int32_t)pos->ne[1];
    a->layers = calloc((size_t)a->n_layer, sizeof *a->layers);
    if (!a->layers) return error_set("%s: out of memory", a->path);
    for (int il = 0; il < a->n_layer; il++) {
        a_layer *L = &a->layers[il];
        char n[64];
#define LIN(field, name, in, out, bias)                  \
    snprintf(n, sizeof n, "a.blk.%d.%s", il, name);      \
    if (linear(a, n, in, out, bias, &L->field) != 0) return -1;
        LIN(q, "attn_q", D, D, true)
        LIN(k, "attn_k", D, D, false)
        LIN(v, "attn_v", D, D, true)
        LIN(o, "attn_out", D, D, true)
        LIN(up, "ffn_up", D, a->n_ff, true)
        LIN(down, "ffn_down", a->n_ff, D, true)
#undef LIN
        snprintf(n, sizeof n, "a.blk.%d.ln1", il);
        if (norm(a, n, true, D, &L->ln1) != 0) return -1;
        snprintf(n, sizeof n, "a.blk.%d.ln2", il);
        if (norm(a, n, true, D, &L->ln2) != 0) return -1;
    }
    if (norm(a, "a.post_ln", true, D, &a->post_ln) != 0) return -1;
    /* the second convolution as two products over pairs of frames: taps 0
     * and 1 [2D, D] on a pair, tap 2 [D, D] on the next pair's first */
    a->conv2_01 = malloc((size_t)2 * D * D * sizeof(float));
    a->conv2_2 = malloc((size_t)D * D * sizeof(float));
    a->zeros = calloc((size_t)D * (a->stack > 2 ? a->stack : 2), sizeof(float));
    if (!a->conv2_01 || !a->conv2_2 || !a->zeros) return error_set("%s: out of memory", a->path);
    for (int64_t co = 0; co < D; co++)
        for (int64_t ci = 0; ci < D; ci++) {
            a->conv2_01[co * 2 * D + ci] = kernel_at(a->conv2_w, 0, ci, co);
            a->conv2_01[co * 2 * D + D + ci] = kernel_at(a->conv2_w, 1, ci, co);
            a->conv2_2[co * D + ci] = kernel_at(a->conv2_w, 2, ci, co);
        }
    return 0;
}

/* A weight's output count (ne[1]), before its shape is checked. */
static int out_rows(clip_audio *a, const char *name, int64_t *out) {
    const gguf_tensor_info *t = gguf_find_tensor(a->f, name);
    if (!t) return error_set("%s: tensor %s is missing", a->path, name);
    if (t->ne[1] < 1 || t->ne[1] > 1 << 20)
        return error_set("%s: tensor %s has %lld outputs", a->path, name, (long long)t->ne[1]);
    *out = t->ne[1];
    return 0;
}

/* Ultravox: RMS norm, linear, SwiGLU, RMS norm, linear. */
static int ultravox_load(clip_audio *a) {
    const int64_t DS = (int64_t)a->n_embd * a->stack;
    int64_t hidden = 0, n_out = 0;
    if (norm(a, "mm.a.norm_pre", false, DS, &a->norm_pre) != 0 || out_rows(a, "mm.a.mlp.1.weight", &hidden) != 0)
        return -1;
    if (hidden < 2 || hidden % 2)
        return error_set("%s: tensor mm.a.mlp.1.weight: %lld outputs, SwiGLU needs an even count", a->path,
                         (long long)hidden);
    a->n_hidden = (int32_t)hidden;
    if (linear(a, "mm.a.mlp.1", DS, hidden, false, &a->mlp1) || norm(a, "mm.a.norm_mid", false, hidden / 2, &a->norm_mid) ||
        out_rows(a, "mm.a.mlp.2.weight", &n_out) || linear(a, "mm.a.mlp.2", hidden / 2, n_out, false, &a->mlp2))
        return -1;
    a->n_out = (int32_t)n_out;
    return 0;
}

/* Voxtral: linear, GELU, linear. */
static int voxtral_load(clip_audio *a) {
    const int64_t DS = (int64_t)a->n_embd * a->stack;
    int64_t hidden = 0, n_out = 0;
    if (out_rows(a, "mm.a.mlp.1.weight", &hidden) || linear(a, "mm.a.mlp.1", DS, hidden, false, &a->mlp1) ||
        out_rows(a, "mm.a.mlp.2.weight", &n_out) || linear(a, "mm.a.mlp.2", hidden, n_out, false, &a->mlp2))
        return -1;
    a->n_hidden = (int32_t)hidden;
    a->n_out = (int32_t)n_out;
    return 0;
}

clip_audio *clip_audio_load(const char *path, int32_t n_embd_text) {
    clip_audio *a = calloc(1, sizeof *a);
    if (!a) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    snprintf(a->path, sizeof a->path, "%s", path);
    a->f = gguf_open(path);
    if (!a->f) goto fail;
    gguf_str s;
    if (gguf_get_str(a->f, "general.architecture", &s) != 0 || s.len != 4 || memcmp(s.ptr, "clip", 4) != 0) {
        error_set("%s: not an mmproj file (general.architecture is not \"clip\")", path);
        goto fail;
    }
    const char *ptkey = gguf_find_key(a->f, "clip.audio.projector_type") >= 0 ? "clip.audio.projector_type"
                                                                                : "clip.projector_type";
    if (gguf_get_str(a->f, ptkey, &s) != 0) {
        error_wrap("%s", path);
        goto fail;
    }
    if (s.len >= sizeof a->projector) s.len = sizeof a->projector - 1;
    memcpy(a->projector, s.ptr, s.len);
    size_t k = 0;
    while (k < sizeof families / sizeof families[0] && strcmp(a->projector, families[k].name) != 0) k++;
    if (k == sizeof families / sizeof families[0]) {
        error_set("%s: key %s: audio projector type \"%s\" is not supported (supported: ultravox, voxtral)", path,
                  ptkey, a->projector);
        goto fail;
    }
    a->fam = families[k].fam;
    if (key_i32(a, "clip.audio.num_mel_bins", 1, 256, &a->n_mel) ||
        key_i32(a, "clip.audio.embedding_length", 1, 16384, &a->n_embd) ||
        key_i32(a, "clip.audio.feed_forward_length", 1, 65536, &a->n_ff) ||
        key_i32(a, "clip.audio.attention.head_count", 1, 256, &a->n_head) ||
        key_i32(a, "clip.audio.block_count", 1, AUDIO_MAX_LAYERS, &a->n_layer) ||
        key_i32(a, "clip.audio.projector.stack_factor", 1, 64, &a->stack))
        goto fail;
    if (gguf_get_f32(a->f, "clip.audio.attention.layer_norm_epsilon", &a->eps) != 0 || !(a->eps > 0) || a->eps > 1) {
        error_set("%s: key clip.audio.attention.layer_norm_epsilon is missing or not in (0, 1]", path);
        goto fail;
    }
    if (a->n_embd % a->n_head) {
        error_set("%s: key clip.audio.embedding_length (%d) is not a multiple of the head count (%d)", path, a->n_embd,
                  a->n_head);
        goto fail;
    }
    if (whisper_load(a) != 0 || (a->fam == AUDIO_ULTRAVOX ? ultravox_load(a) : voxtral_load(a)) != 0 ||
        clip_file_check_width(path, "mm.a.mlp.2.weight", a->n_out, n_embd_text) != 0)
        goto fail;
    if (mel_bank_init(&a->mel, a->n_mel) != 0) {
        error_wrap("%s", path);
        goto fail;
    }
    return a;
fail:
    clip_audio_free(a);
    return NULL;
}

void clip_audio_free(clip_audio *a) {
    if (!a) return;
    if (a->s) sched_free(a->s);
    free(a->layers);
    free(a->conv2_01);
    free(a->conv2_2);
    free(a->zeros);
    mel_bank_free(&a->mel);
    free(a->mel_all);
    gguf_close(a->f);
    free(a);
}

const char *clip_audio_projector_type(const clip_audio *a) { return a->projector; }
int32_t clip_audio_n_embd_out(const clip_audio *a) { return a->n_out; }
int32_t clip_audio_n_mel(const clip_audio *a) { return a->n_mel; }

const char *clip_audio_text_before(const clip_audio *a) {
    return a->fam == AUDIO_VOXTRAL ? "[BEGIN_AUDIO]" : NULL; /* measured: once, before the first window */
}

int32_t clip_audio_n_chunks(const clip_audio *a, int64_t n_samples) {
    (void)a;
    const int64_t n = (n_samples + AUDIO_CHUNK_SAMPLES - 1) / AUDIO_CHUNK_SAMPLES;
    return n < 1 ? 1 : (int32_t)n;
}

/* frames out of the encoder: 3000 -> 1500 after the convolutions, 750
 * after Voxtral's pooling */
static int64_t enc_frames(const clip_audio *a) {
    return AUDIO_CHUNK_FRAMES / (a->fam == AUDIO_VOXTRAL ? 4 : 2);
}

int32_t clip_audio_n_tokens(const clip_audio *a) {
    return (int32_t)((enc_frames(a) + a->stack - 1) / a->stack);
}

/* ------------------------------------------------------------ features */

/* FNV-1a 64 of the samples: the key of the features kept. */
static uint64_t pcm_hash(const float *pcm, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    const uint8_t *p = (const uint8_t *)pcm;
    for (size_t i = 0; i < (size_t)n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* The whole sound's features, as libmtmd computes them before cutting them
 * into windows (measured: the frames across a window's edge see the sound
 * on both sides, and the max - 8 floor is the whole sound's: with a second
 * window 40 dB quieter, per-window features are at row cosine 0.38 of
 * llama.cpp's, whole ones at 0.9999996). Kept for the next window. */
static const float *whole_mel(clip_audio *a, const float *pcm, int64_t n_samples, int64_t *frames) {
    const int32_t n_chunks = clip_audio_n_chunks(a, n_samples);
    const int64_t total = (int64_t)n_chunks * AUDIO_CHUNK_SAMPLES;
    *frames = mel_n_frames(total);
    for (int64_t i = 0; i < n_samples; i++) /* a float WAV may carry them */
        if (!isfinite(pcm[i])) {
            error_set("sound: sample %lld (%.3f s) is not a finite number", (long long)i, (double)i / MEL_RATE);
            return NULL;
        }
    const uint64_t h = pcm_hash(pcm, n_samples);
    if (a->mel_all && a->mel_key == h && a->mel_n == n_samples) return a->mel_all;
    free(a->mel_all);
    a->mel_all = NULL;
    float *win = calloc((size_t)total, sizeof(float));
    float *all = malloc((size_t)a->n_mel * (size_t)*frames * sizeof(float));
    if (!win || !all) {
        free(win);
        free(all);
        error_set("%s: out of memory for the log-mel features", a->path);
        return NULL;
    }
    if (n_samples > 0) memcpy(win, pcm, (size_t)n_samples * sizeof(float));
    const int rc = mel_compute(&a->mel, win, total, all);
    free(win);
    if (rc != 0) {
        free(all);
        return NULL;
    }
    a->mel_all = all;
    a->mel_key = h;
    a->mel_n = n_samples;
    return all;
}

float *clip_audio_mel(clip_audio *a, const float *pcm, int64_t n_samples, int32_t chunk, int64_t *n_frames) {
    if (chunk < 0 || chunk >= clip_audio_n_chunks(a, n_samples)) {
        error_set("%s: the sound has no window %d", a->path, chunk);
        return NULL;
    }
    int64_t frames;
    const float *all = whole_mel(a, pcm, n_samples, &frames);
    if (!all) return NULL;
    float *mel = malloc((size_t)a->n_mel * AUDIO_CHUNK_FRAMES * sizeof(float));
    if (!mel) {
        error_set("%s: out of memory for the log-mel features", a->path);
        return NULL;
    }
    for (int64_t m = 0; m < a->n_mel; m++)
        memcpy(mel + m * AUDIO_CHUNK_FRAMES, all + m * frames + (int64_t)chunk * AUDIO_CHUNK_FRAMES,
               AUDIO_CHUNK_FRAMES * sizeof(float));
    *n_frames = AUDIO_CHUNK_FRAMES;
    return mel;
}

/* -------------------------------------------------------------- graph */

static graph_tensor *weight(graph *g, const char *name, int32_t dtype, int n_dims, const int64_t *ne,
                            const void *data) {
    graph_tensor *w = graph_tensor_new(g, dtype, n_dims, ne);
    if (!w) return NULL;
    graph_tensor_set_name(w, "%s", name);
    graph_tensor_bind(w, GRAPH_WEIGHT, -1, NULL, 0, (void *)data);
    return w;
}

static graph_tensor *wt(graph *g, const gguf_tensor_info *t, int n_dims) {
    return weight(g, t->name, t->dtype, n_dims, t->ne, t->data);
}

static graph_tensor *lin(graph *g, const a_linear *l, graph_tensor *x) {
    graph_tensor *y = graph_mul_mat(g, wt(g, l->w, 2), x);
    return l->b ? graph_add(g, y, wt(g, l->b, 1)) : y;
}

static graph_tensor *layer_norm(graph *g, const a_norm *n, graph_tensor *x, float eps) {
    graph_tensor *y = graph_mul(g, graph_norm(g, x, eps), wt(g, n->w, 1));
    return graph_add(g, y, wt(g, n->b, 1));
}

/* A bias stored [1, D] as a vector [D]. */
static graph_tensor *bias_vec(graph *g, const gguf_tensor_info *t) {
    const int64_t ne[1] = {t->ne[1]};
    return weight(g, t->name, t->dtype, 1, ne, t->data);
}

/* Whisper's encoder: inp F32 [3 n_mel, T] (the first convolution's
 * windows, tap fastest, as its kernel [3, n_mel, D] is laid out) -> the
 * frames [D, enc_frames] after the final norm (Voxtral's averaged in pairs
 * before it, as Qwen2-Audio's encoder does: measured, llama.cpp's rows are
 * at cosine 0.9999994 with the pooling there, 0.9965 with it after).
 * Its GELUs (both convolutions', the blocks' FFN) are the exact one:
 * llama-mtmd-cli logs "ffn_op: gelu_erf" for these files, and with
 * GELU_ERF at every site (Voxtral's projector too) the rows' RMS error
 * against llama.cpp's fell from 7.7e-4 to 5.4e-4 (Ultravox) and from
 * 4.4e-4 to 2.0e-4 (Voxtral); the tanh form at any one site but the
 * first convolution's was worse, and there the two families disagreed. */
static graph_tensor *whisper_build(graph *g, const clip_audio *a, graph_tensor *inp, int64_t T) {
    const int64_t D = a->n_embd, H = a->n_head, hd = D / H;
    const int64_t k1[2] = {3 * a->n_mel, D};
    graph_tensor *x = graph_mul_mat(g, weight(g, a->conv1_w->name, a->conv1_w->dtype, 2, k1, a->conv1_w->data), inp);
    x = graph_gelu_erf(g, graph_add(g, x, bias_vec(g, a->conv1_b))); /* [D, T] */
    /* the second convolution, stride 2, one zero frame either side: T + 2
     * frames as (T + 2) / 2 pairs; output t = taps 0,1 . pair t + tap 2 .
     * the first of pair t + 1 */
    const int64_t zne[2] = {D, 1};
    graph_tensor *zero = weight(g, "a.zero", TSR_DTYPE_F32, 2, zne, a->zeros);
    x = graph_concat(g, graph_concat(g, zero, x, 1), weight(g, "a.zero", TSR_DTYPE_F32, 2, zne, a->zeros), 1);
    const int64_t Tp = T + 2, X = (Tp - 2) / 2;
    graph_tensor *pairs = graph_reshape_2d(g, x, 2 * D, Tp / 2);
    const int64_t w01[2] = {2 * D, D}, w2[2] = {D, D};
    const uint64_t pnb = pairs ? pairs->t.nb[1] : 0;
    graph_tensor *y = graph_mul_mat(g, weight(g, "a.conv1d.2.taps01", TSR_DTYPE_F32, 2, w01, a->conv2_01),
                                    graph_view_2d(g, pairs, 2 * D, X, pnb, 0));
    graph_tensor *nxt = graph_cont(g, graph_view_2d(g, pairs, D, X, pnb, pnb));
    y = graph_add(g, y, graph_mul_mat(g, weight(g, "a.conv1d.2.tap2", TSR_DTYPE_F32, 2, w2, a->conv2_2), nxt));
    x = graph_gelu_erf(g, graph_add(g, y, bias_vec(g, a->conv2_b))); /* [D, X] */
    x = graph_add(g, x, graph_view_2d(g, wt(g, a->pos, 2), D, X, (uint64_t)D * sizeof(float), 0));
    const float kq_scale = 1.0f / sqrtf((float)hd);
    for (int il = 0; il < a->n_layer; il++) {
        const a_layer *L = &a->layers[il];
        graph_tensor *h = layer_norm(g, &L->ln1, x, a->eps);
        graph_tensor *q = graph_permute(g, graph_reshape_3d(g, lin(g, &L->q, h), hd, H, X), 0, 2, 1, 3);
        graph_tensor *k = graph_permute(g, graph_reshape_3d(g, lin(g, &L->k, h), hd, H, X), 0, 2, 1, 3);
        graph_tensor *v = graph_permute(g, graph_reshape_3d(g, lin(g, &L->v, h), hd, H, X), 0, 2, 1, 3);
        graph_tensor *att = graph_reshape_2d(g, graph_flash_attn(g, q, k, v, NULL, kq_scale), D, X);
        x = graph_add(g, x, lin(g, &L->o, att));
        h = layer_norm(g, &L->ln2, x, a->eps);
        h = lin(g, &L->down, graph_gelu_erf(g, lin(g, &L->up, h)));
        x = graph_tensor_set_name(graph_add(g, x, h), "whisper-out-%d", il);
    }
    if (a->fam == AUDIO_VOXTRAL) { /* frames averaged in pairs (X is even) */
        graph_tensor *p = graph_reshape_2d(g, x, 2 * D, X / 2);
        const uint64_t nb = p ? p->t.nb[1] : 0;
        graph_tensor *even = graph_cont(g, graph_view_2d(g, p, D, X / 2, nb, 0));
        graph_tensor *odd = graph_cont(g, graph_view_2d(g, p, D, X / 2, nb, (uint64_t)D * sizeof(float)));
        x = graph_scale(g, graph_add(g, even, odd), 0.5f, 0.0f);
    }
    return layer_norm(g, &a->post_ln, x, a->eps);
}

/* Frames x [D, X] stacked S at a time (the last row padded with zeros)
 * into [D S, ceil(X / S)]. */
static graph_tensor *stack_frames(graph *g, const clip_audio *a, graph_tensor *x, int64_t X) {
    const int64_t D = a->n_embd, S = a->stack, N = (X + S - 1) / S, pad = N * S - X;
    if (pad > 0) {
        const int64_t pne[2] = {D, pad};
        x = graph_concat(g, x, weight(g, "a.zero", TSR_DTYPE_F32, 2, pne, a->zeros), 1);
    }
    return graph_reshape_2d(g, x, D * S, N);
}

/* Ultravox's projector on the stacked frames x [D S, N]. */
static graph_tensor *ultravox_project(graph *g, const clip_audio *a, graph_tensor *x, int64_t N) {
    x = graph_mul(g, graph_rms_norm(g, x, 1e-6f), wt(g, a->norm_pre.w, 1));
    x = lin(g, &a->mlp1, x); /* [n_hidden, N] */
    const int64_t hh = a->n_hidden / 2;
    const uint64_t xnb = x ? x->t.nb[1] : 0;
    graph_tensor *lo = graph_cont(g, graph_view_2d(g, x, hh, N, xnb, 0));
    graph_tensor *hi = graph_cont(g, graph_view_2d(g, x, hh, N, xnb, (uint64_t)hh * sizeof(float)));
    /* SwiGLU as Ultravox has it: x, gate = chunk(2); silu(gate) * x
     * (measured: the other order's rows are at cosine 0.70 of llama.cpp's) */
    x = graph_swiglu(g, hi, lo);
    x = graph_mul(g, graph_rms_norm(g, x, 1e-6f), wt(g, a->norm_mid.w, 1));
    return lin(g, &a->mlp2, x);
}

/* Voxtral's projector on the stacked frames x [D S, N] (the exact GELU,
 * as the encoder's: whisper_build). */
static graph_tensor *voxtral_project(graph *g, const clip_audio *a, graph_tensor *x) {
    return lin(g, &a->mlp2, graph_gelu_erf(g, lin(g, &a->mlp1, x)));
}

static graph *build(const clip_audio *a, int64_t T, graph_tensor **inp, graph_tensor **out) {
    graph *g = graph_new(96 + 48 * a->n_layer);
    if (!g) return NULL;
    *inp = graph_set_input(graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 3 * a->n_mel, T), "mel"));
    graph_tensor *x = whisper_build(g, a, *inp, T);
    const int64_t X = enc_frames(a), N = (X + a->stack - 1) / a->stack;
    x = stack_frames(g, a, x, X);
    x = a->fam == AUDIO_ULTRAVOX ? ultravox_project(g, a, x, N) : voxtral_project(g, a, x);
    *out = graph_set_output(graph_tensor_set_name(x, "mm-out"));
    if (graph_check(g) != 0) {
        error_wrap("%s: the audio encoder graph", a->path);
        graph_free(g);
        return NULL;
    }
    return g;
}

/* TESSERA_CLIP_TIMING=1 prints each window's phases as the image
 * encoders' (clip.h's clip_timing): "preprocess" is the features (made
 * once per sound by whole_mel, so a later window's is the copy of its
 * frames), "patchify" the first convolution's windows. */
int clip_audio_encode(clip_audio *a, clip_run *run, const float *pcm, int64_t n_samples, int32_t chunk, float *out) {
    int64_t T = 0;
    clip_timing tm;
    clip_timing_mark(&tm, CLIP_T_START);
    float *mel = clip_audio_mel(a, pcm, n_samples, chunk, &T);
    clip_timing_mark(&tm, CLIP_T_PREPROCESS);
    if (!mel) return -1;
    graph_tensor *inp = NULL, *res = NULL;
    graph *g = build(a, T, &inp, &res);
    clip_timing_mark(&tm, CLIP_T_BUILD);
    if (!g) {
        free(mel);
        return -1;
    }
    bool same = a->s && a->s_n == run->n_devices && run->n_devices <= 8;
    for (int i = 0; same && i < run->n_devices; i++) same = a->s_devs[i] == run->devices[i];
    if (!same) {
        if (a->s) sched_free(a->s);
        a->s = sched_new(run->devices, run->n_devices, &(sched_params){.n_threads = run->n_threads});
        a->s_n = run->n_devices > 8 ? 8 : run->n_devices;
        for (int i = 0; i < a->s_n; i++) a->s_devs[i] = run->devices[i];
    } else {
        sched_set_n_threads(a->s, run->n_threads);
    }
    int rc = -1;
    if (!a->s || sched_alloc(a->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_ALLOC);
    if (run->explain && host_log_wanted()) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (f) {
            fprintf(f, "tessera: placement of the audio encoder graph (%s):\n", a->projector);
            sched_explain(a->s, f);
            if (fclose(f) == 0) host_log_text(TESSERA_LOG_INFO, text);
            free(text);
        }
    }
    /* the first convolution's windows: column t holds mel[m][t + k - 1] at
     * k + 3 m (zero beyond either end) */
    float *dst = inp->t.data;
    const int64_t M = a->n_mel;
    for (int64_t t = 0; t < T; t++)
        for (int64_t m = 0; m < M; m++)
            for (int k = 0; k < 3; k++) {
                const int64_t s = t + k - 1;
                dst[t * 3 * M + 3 * m + k] = s >= 0 && s < T ? mel[m * T + s] : 0.0f;
            }
    clip_timing_mark(&tm, CLIP_T_PATCHIFY);
    if (sched_compute(a->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_COMPUTE);
    run->encode_ms = clip_timing_end(&tm);
    const int64_t n = (int64_t)clip_audio_n_tokens(a) * a->n_out;
    const float *r = res->t.data;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(r[i])) {
            error_set("%s: the audio encoder produced a non-finite value (row %lld)", a->path,
                      (long long)(i / a->n_out));
            goto done;
        }
        out[i] = r[i];
    }
    rc = 0;
done:
    graph_free(g);
    free(mel);
    return rc;
}
