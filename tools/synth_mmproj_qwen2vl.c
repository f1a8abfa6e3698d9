/*
 * tessera-synth-mmproj's Qwen2-VL / Qwen2.5-VL projectors (synth_mmproj.c
 * hands --projector qwen2vl_merger and qwen2.5vl_merger here): a ViT
 * without learned positions (2-D rope in the attention), the patch
 * convolution's two temporal slices (v.patch_embd.weight and .weight.1, an
 * image being two equal frames), and the 2x2 patch merger: the norm
 * (v.post_ln), mm.0, GELU, mm.2 onto the text model.
 *   qwen2vl_merger    Qwen2-VL: LayerNorm, quick-GELU FFN (ffn_up/ffn_down)
 *   qwen2.5vl_merger  Qwen2.5-VL: RMSNorm, SiLU-gated FFN (ffn_gate/up/down),
 *                     window attention (clip.vision.window_size pixels)
 *                     but in every clip.vision.n_wa_pattern-th block
 * Sizes come from synth_mmproj.c's options; the image size is only the
 * warm-up size llama.cpp keeps (the encoder takes any multiple of 28).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "gguf/gguf.h"
#include "util/error.h"

#include "synth_mmproj_qwen2vl.h"

typedef struct qt {
    gguf_writer *w;
    uint64_t rng;
    void *bufs[512];
    int n;
} qt;

static uint64_t qsplitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double qgauss(uint64_t *s) {
    double u = ((double)(qsplitmix(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double v = (double)(qsplitmix(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int qadd(qt *t, const char *name, int dtype, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                double mean, double std) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    int64_t n = ne0 * ne1 * ne2 * ne3;
    size_t esz = dtype == 1 ? 2 : 4;
    void *buf = malloc((size_t)n * esz);
    if (!buf || t->n == 512) {
        free(buf);
        return error_set("out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(mean + std * qgauss(&t->rng));
        if (dtype == 1) ((uint16_t *)buf)[i] = tsr_f32_to_fp16(v);
        else ((float *)buf)[i] = v;
    }
    t->bufs[t->n++] = buf;
    return gguf_writer_add_tensor(t->w, name, dtype, n_dims, ne, buf);
}

static int qlinear(qt *t, const char *name, int64_t in, int64_t out) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (qadd(t, n, 0, 2, in, out, 1, 1, 0.0, 1.0 / sqrt((double)in)) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return qadd(t, n, 0, 1, out, 1, 1, 1, 0.0, 0.02);
}

static int qnorm(qt *t, const char *name, int64_t dim, bool bias) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (qadd(t, n, 0, 1, dim, 1, 1, 1, 1.0, 0.1) != 0) return -1;
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return qadd(t, n, 0, 1, dim, 1, 1, 1, 0.0, 0.05);
}

int synth_mmproj_qwen2vl(const char *out, const char *projector, int dim, int layers, int heads, int ffn, int image,
                         int patch, int proj, int seed) {
    const bool v25 = !strcmp(projector, "qwen2.5vl_merger");
    gguf_writer *w = gguf_writer_new();
    qt t = {w, (uint64_t)seed, {0}, 0};
    int rc = -1;
    gguf_writer_set_str(w, "general.architecture", "clip", 4);
    gguf_writer_set_str(w, "general.name", "synth-mmproj", 12);
    gguf_writer_set_u32(w, "general.file_type", 0);
    gguf_writer_set_bool(w, "clip.has_vision_encoder", true);
    gguf_writer_set_str(w, "clip.projector_type", projector, strlen(projector));
    gguf_writer_set_bool(w, "clip.use_gelu", false);
    gguf_writer_set_bool(w, "clip.use_silu", v25);
    gguf_writer_set_u32(w, "clip.vision.image_size", (uint32_t)image);
    gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)patch);
    gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)dim);
    gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)ffn);
    gguf_writer_set_u32(w, "clip.vision.projection_dim", (uint32_t)proj);
    gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)layers);
    gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)heads);
    gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    gguf_writer_set_u32(w, "clip.vision.spatial_merge_size", 2);
    /* Qwen2-VL's image processor: CLIP's normalisation */
    const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    const float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    gguf_writer_set_arr(w, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, mean, 3);
    gguf_writer_set_arr(w, "clip.vision.image_std", GGUF_TYPE_FLOAT32, std, 3);
    if (v25) {
        /* Qwen2.5-VL's window of 112 pixels (4 x 4 merged patches of 14), and
         * every n_wa_pattern-th block full attention (8: 7, 15, 23, 31 of 32;
         * here 2: blocks 1 and 3 of 4) */
        gguf_writer_set_u32(w, "clip.vision.window_size", (uint32_t)(patch * 8));
        gguf_writer_set_u32(w, "clip.vision.n_wa_pattern", 2);
    }
    const int64_t D = dim, M = 4 * D;
    char n[96];
    /* the Conv3d kernel [2, 14, 14] as two 2-D kernels [kw, kh, c_in, c_out], F16 as converters write them */
    const double ps = 1.0 / sqrt(6.0 * patch * patch);
    if (qadd(&t, "v.patch_embd.weight", 1, 4, patch, patch, 3, D, 0.0, ps) ||
        qadd(&t, "v.patch_embd.weight.1", 1, 4, patch, patch, 3, D, 0.0, ps))
        goto done;
    for (int l = 0; l < layers; l++) {
        static const char *const lin[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int i = 0; i < 4; i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s", l, lin[i]);
            if (qlinear(&t, n, D, D) != 0) goto done;
        }
        snprintf(n, sizeof n, "v.blk.%d.ln1", l);
        if (qnorm(&t, n, D, !v25) != 0) goto done;
        snprintf(n, sizeof n, "v.blk.%d.ln2", l);
        if (qnorm(&t, n, D, !v25) != 0) goto done;
        if (v25) {
            snprintf(n, sizeof n, "v.blk.%d.ffn_gate", l);
            if (qlinear(&t, n, D, ffn) != 0) goto done;
        }
        snprintf(n, sizeof n, "v.blk.%d.ffn_up", l);
        if (qlinear(&t, n, D, ffn) != 0) goto done;
        snprintf(n, sizeof n, "v.blk.%d.ffn_down", l);
        if (qlinear(&t, n, ffn, D) != 0) goto done;
    }
    if (qnorm(&t, "v.post_ln", D, !v25) || qlinear(&t, "mm.0", M, M) || qlinear(&t, "mm.2", M, proj)) goto done;
    rc = gguf_writer_write_file(w, out);
done:
    gguf_writer_free(w);
    for (int i = 0; i < t.n; i++) free(t.bufs[i]);
    return rc;
}
