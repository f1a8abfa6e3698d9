/*
 * tessera-synth-mmproj --projector ultravox|voxtral: a synthetic audio
 * mmproj as llama.cpp writes one: a Whisper encoder (two 1-D convolutions,
 * learned positions, pre-norm blocks, a final norm) and the projector:
 * Ultravox's (frames stacked, RMS norm, linear, SwiGLU, RMS norm, linear)
 * or Voxtral's (frames stacked, linear, GELU, linear; no biases), random
 * (seeded) weights. llama.cpp's llama-mtmd-cli loads both (the key and
 * tensor names were found by its load errors, the names its library holds
 * and gguf-py's tables; tests/data/mm/README.md).
 */
#include "synth_mmproj_audio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "gguf/gguf.h"
#include "util/error.h"

enum { MAX_BUFS = 512 };

typedef struct abufs {
    gguf_writer *w;
    uint64_t rng;
    void *bufs[MAX_BUFS];
    int n;
} abufs;

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double normal(uint64_t *s) {
    double u = ((double)(next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double v = (double)(next(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* dtype 0 F32, 1 F16; values mean + std * N(0, 1) */
static int put(abufs *t, const char *name, int32_t dtype, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
               double mean, double std) {
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    const int64_t n = ne0 * ne1 * ne2;
    void *buf = malloc((size_t)n * (dtype == 1 ? 2 : 4));
    if (!buf || t->n == MAX_BUFS) {
        free(buf);
        return error_set("out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        const float v = (float)(mean + std * normal(&t->rng));
        if (dtype == 1) ((uint16_t *)buf)[i] = tsr_f32_to_fp16(v);
        else ((float *)buf)[i] = v;
    }
    t->bufs[t->n++] = buf;
    return gguf_writer_add_tensor(t->w, name, dtype, n_dims, ne, buf);
}

static int lin(abufs *t, const char *name, int64_t in, int64_t out, bool bias) {
    char n[128];
    snprintf(n, sizeof n, "%s.weight", name);
    if (put(t, n, 0, 2, in, out, 1, 0.0, 1.0 / sqrt((double)in)) != 0) return -1;
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return put(t, n, 0, 1, out, 1, 1, 0.0, 0.02);
}

static int ln(abufs *t, const char *name, int64_t dim, bool bias) {
    char n[128];
    snprintf(n, sizeof n, "%s.weight", name);
    if (put(t, n, 0, 1, dim, 1, 1, 1.0, 0.1) != 0) return -1;
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return put(t, n, 0, 1, dim, 1, 1, 0.0, 0.05);
}

int synth_mmproj_audio(const synth_audio_opts *o) {
    const bool voxtral = !strcmp(o->projector, "voxtral");
    gguf_writer *w = gguf_writer_new();
    abufs t = {w, (uint64_t)o->seed, {0}, 0};
    int rc = -1;
    const int64_t D = o->dim, M = o->n_mel, S = o->stack, H = o->proj_hidden;
    const size_t plen = strlen(o->projector);
    char name[64];
    snprintf(name, sizeof name, "synth-mmproj-%s", o->projector);
    gguf_writer_set_str(w, "general.architecture", "clip", 4);
    gguf_writer_set_str(w, "general.name", name, strlen(name));
    gguf_writer_set_u32(w, "general.file_type", 0);
    gguf_writer_set_bool(w, "clip.has_vision_encoder", false);
    gguf_writer_set_bool(w, "clip.has_audio_encoder", true);
    gguf_writer_set_str(w, "clip.projector_type", o->projector, plen);
    gguf_writer_set_str(w, "clip.audio.projector_type", o->projector, plen);
    gguf_writer_set_bool(w, "clip.use_gelu", true);
    gguf_writer_set_u32(w, "clip.audio.num_mel_bins", (uint32_t)M);
    gguf_writer_set_u32(w, "clip.audio.embedding_length", (uint32_t)D);
    gguf_writer_set_u32(w, "clip.audio.feed_forward_length", (uint32_t)o->ffn);
    gguf_writer_set_u32(w, "clip.audio.projection_dim", (uint32_t)o->proj);
    gguf_writer_set_u32(w, "clip.audio.block_count", (uint32_t)o->layers);
    gguf_writer_set_u32(w, "clip.audio.attention.head_count", (uint32_t)o->heads);
    gguf_writer_set_f32(w, "clip.audio.attention.layer_norm_epsilon", 1e-5f);
    gguf_writer_set_u32(w, "clip.audio.projector.stack_factor", (uint32_t)S);
    char n[64];
    /* the convolutions' kernels [k, c_in, c_out], F16 as converters write them */
    if (put(&t, "a.conv1d.1.weight", 1, 3, 3, M, D, 0.0, 1.0 / sqrt(3.0 * (double)M)) != 0 ||
        put(&t, "a.conv1d.1.bias", 0, 2, 1, D, 1, 0.0, 0.05) != 0 ||
        put(&t, "a.conv1d.2.weight", 1, 3, 3, D, D, 0.0, 1.0 / sqrt(3.0 * (double)D)) != 0 ||
        put(&t, "a.conv1d.2.bias", 0, 2, 1, D, 1, 0.0, 0.05) != 0 ||
        put(&t, "a.position_embd.weight", 0, 2, D, o->n_pos, 1, 0.0, 0.5) != 0)
        goto done;
    for (int l = 0; l < o->layers; l++) {
        static const char *const names[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int i = 0; i < 4; i++) {
            snprintf(n, sizeof n, "a.blk.%d.%s", l, names[i]);
            /* Whisper's key projection has no bias */
            if (lin(&t, n, D, D, i != 1) != 0) goto done;
        }
        snprintf(n, sizeof n, "a.blk.%d.ln1", l);
        if (ln(&t, n, D, true) != 0) goto done;
        snprintf(n, sizeof n, "a.blk.%d.ffn_up", l);
        if (lin(&t, n, D, o->ffn, true) != 0) goto done;
        snprintf(n, sizeof n, "a.blk.%d.ffn_down", l);
        if (lin(&t, n, o->ffn, D, true) != 0) goto done;
        snprintf(n, sizeof n, "a.blk.%d.ln2", l);
        if (ln(&t, n, D, true) != 0) goto done;
    }
    if (ln(&t, "a.post_ln", D, true) != 0) goto done;
    if (voxtral) { /* frames stacked, linear, GELU, linear; no biases */
        if (lin(&t, "mm.a.mlp.1", D * S, H, false) != 0 || lin(&t, "mm.a.mlp.2", H, o->proj, false) != 0) goto done;
    } else if (ln(&t, "mm.a.norm_pre", D * S, false) != 0 || lin(&t, "mm.a.mlp.1", D * S, H, false) != 0 ||
               ln(&t, "mm.a.norm_mid", H / 2, false) != 0 || lin(&t, "mm.a.mlp.2", H / 2, o->proj, false) != 0) {
        goto done;
    }
    rc = gguf_writer_write_file(w, o->out);
done:
    gguf_writer_free(w);
    for (int i = 0; i < t.n; i++) free(t.bufs[i]);
    return rc;
}
