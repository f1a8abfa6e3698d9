/*
 * tessera-synth-mmproj — a synthetic mmproj file as llama.cpp writes them:
 * random (seeded) weights with the keys and tensors of a CLIP vision encoder
 * and its projector, the stand-in for a real one in the tests (a text model
 * of the same width comes from tessera-synth).
 *
 *   --projector mlp     LLaVA-1.5 / MobileVLM style: CLIP ViT (class token,
 *                       learned positions, pre-norm), MLP projector mm.0/mm.2
 *   --projector gemma3  Gemma 3: SigLIP ViT (no class token, learned
 *                       positions, GELU, post-layernorm), then a 4x4 average
 *                       pool, the soft-embedding RMS norm and the input
 *                       projection onto the text model
 *   --projector idefics3 SmolVLM / Idefics3: the same SigLIP ViT, then a
 *                       pixel shuffle (--scale-factor S: each SxS block of
 *                       patches one row, S*S*width wide) and one linear map
 *                       mm.model.fc (no bias) onto the text model; big
 *                       images are split into tiles of the encoder's size
 *                       after their longest side is resized to --preproc-size
 *
 * The key and tensor names are those gguf-py (the `gguf` PyPI package)
 * defines for vision encoders (gguf.Keys.ClipVision, gguf.TENSOR_NAMES),
 * and llama.cpp's llama-mtmd-cli loads the result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "gguf/gguf.h"
#include "synth_mmproj_audio.h"
#include "util/error.h"

#include "synth_mmproj_qwen2vl.h"

typedef struct opts {
    const char *out;
    int dim, layers, heads, ffn, image, patch, proj, seed, scale, preproc;
    bool gelu;
    const char *projector;
} opts;

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Normal(0, 1) by Box-Muller. */
static double gauss(uint64_t *s) {
    double u = ((double)(splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double v = (double)(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

typedef struct tensors {
    gguf_writer *w;
    uint64_t rng;
    void *bufs[256];
    int n;
} tensors;

/* A tensor of n_dims with values mean + std * N(0,1), F32 or F16. */
static int add(tensors *t, const char *name, int32_t dtype, int n_dims, int64_t ne0, int64_t ne1,
               int64_t ne2, int64_t ne3, double mean, double std) {
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    int64_t n = ne0 * ne1 * ne2 * ne3;
    size_t esz = dtype == 1 ? 2 : 4;
    void *buf = malloc((size_t)n * esz);
    if (!buf || t->n == 256) return error_set("out of memory");
    for (int64_t i = 0; i < n; i++) {
        float v = (float)(mean + std * gauss(&t->rng));
        if (dtype == 1) ((uint16_t *)buf)[i] = tsr_f32_to_fp16(v);
        else ((float *)buf)[i] = v;
    }
    t->bufs[t->n++] = buf;
    return gguf_writer_add_tensor(t->w, name, dtype, n_dims, ne, buf);
}

static int linear(tensors *t, const char *name, int64_t in, int64_t out) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (add(t, n, 0, 2, in, out, 1, 1, 0.0, 1.0 / sqrt((double)in)) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return add(t, n, 0, 1, out, 1, 1, 1, 0.0, 0.02);
}

static int layer_norm(tensors *t, const char *name, int64_t dim) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (add(t, n, 0, 1, dim, 1, 1, 1, 1.0, 0.1) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return add(t, n, 0, 1, dim, 1, 1, 1, 0.0, 0.05);
}

static int write_mmproj(const opts *o) {
    const bool idefics3 = !strcmp(o->projector, "idefics3");
    const bool siglip = !strcmp(o->projector, "gemma3") || idefics3;
    gguf_writer *w = gguf_writer_new();
    tensors t = {w, (uint64_t)o->seed, {0}, 0};
    int rc = -1;
    const char *s;
    gguf_writer_set_str(w, "general.architecture", "clip", 4);
    gguf_writer_set_str(w, "general.name", "synth-mmproj", 12);
    gguf_writer_set_u32(w, "general.file_type", 0);
    gguf_writer_set_bool(w, "clip.has_vision_encoder", true);
    if (!siglip) gguf_writer_set_bool(w, "clip.has_llava_projector", true);
    s = o->projector;
    gguf_writer_set_str(w, "clip.projector_type", s, strlen(s));
    gguf_writer_set_bool(w, "clip.use_gelu", siglip || o->gelu);
    gguf_writer_set_u32(w, "clip.vision.image_size", (uint32_t)o->image);
    gguf_writer_set_u32(w, "clip.vision.patch_size", (uint32_t)o->patch);
    gguf_writer_set_u32(w, "clip.vision.embedding_length", (uint32_t)o->dim);
    gguf_writer_set_u32(w, "clip.vision.feed_forward_length", (uint32_t)o->ffn);
    gguf_writer_set_u32(w, "clip.vision.projection_dim", (uint32_t)o->proj);
    gguf_writer_set_u32(w, "clip.vision.block_count", (uint32_t)o->layers);
    gguf_writer_set_u32(w, "clip.vision.attention.head_count", (uint32_t)o->heads);
    gguf_writer_set_f32(w, "clip.vision.attention.layer_norm_epsilon", siglip ? 1e-6f : 1e-5f);
    /* CLIP's (OpenAI's) normalisation, as LLaVA-1.5's file carries it;
     * SigLIP's is 0.5 / 0.5 as Gemma 3's file carries it */
    const float mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
    const float std[3] = {0.26862954f, 0.26130258f, 0.27577711f};
    const float half[3] = {0.5f, 0.5f, 0.5f};
    gguf_writer_set_arr(w, "clip.vision.image_mean", GGUF_TYPE_FLOAT32, siglip ? half : mean, 3);
    gguf_writer_set_arr(w, "clip.vision.image_std", GGUF_TYPE_FLOAT32, siglip ? half : std, 3);
    if (idefics3) {
        gguf_writer_set_u32(w, "clip.vision.projector.scale_factor", (uint32_t)o->scale);
        gguf_writer_set_u32(w, "clip.vision.preproc_image_size", (uint32_t)o->preproc);
    }

    int64_t D = o->dim, np = (int64_t)(o->image / o->patch) * (o->image / o->patch);
    char n[96];
    if (!siglip && add(&t, "v.class_embd", 0, 1, D, 1, 1, 1, 0.0, 0.5) != 0) goto done;
    /* the patch convolution's kernel [kw, kh, c_in, c_out], F16 as converters write it */
    if (add(&t, "v.patch_embd.weight", 1, 4, o->patch, o->patch, 3, D, 0.0,
            1.0 / sqrt(3.0 * o->patch * o->patch)) != 0)
        goto done;
    if (siglip && add(&t, "v.patch_embd.bias", 0, 1, D, 1, 1, 1, 0.0, 0.05) != 0) goto done;
    if (add(&t, "v.position_embd.weight", 0, 2, D, np + !siglip, 1, 1, 0.0, 0.5) != 0) goto done;
    if (!siglip && layer_norm(&t, "v.pre_ln", D) != 0) goto done;
    for (int l = 0; l < o->layers; l++) {
        static const char *const lin[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int i = 0; i < 4; i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s", l, lin[i]);
            if (linear(&t, n, D, D) != 0) goto done;
        }
        snprintf(n, sizeof n, "v.blk.%d.ln1", l);
        if (layer_norm(&t, n, D) != 0) goto done;
        snprintf(n, sizeof n, "v.blk.%d.ffn_up", l);
        if (linear(&t, n, D, o->ffn) != 0) goto done;
        snprintf(n, sizeof n, "v.blk.%d.ffn_down", l);
        if (linear(&t, n, o->ffn, D) != 0) goto done;
        snprintf(n, sizeof n, "v.blk.%d.ln2", l);
        if (layer_norm(&t, n, D) != 0) goto done;
    }
    if (idefics3) {
        if (layer_norm(&t, "v.post_ln", D) != 0) goto done;
        const int64_t in = D * o->scale * o->scale;
        if (add(&t, "mm.model.fc.weight", 0, 2, in, o->proj, 1, 1, 0.0, 1.0 / sqrt((double)in)) != 0) goto done;
    } else if (siglip) {
        if (layer_norm(&t, "v.post_ln", D) != 0) goto done;
        /* Gemma's RMS norm weight as converters write it (the "1 +" folded in) */
        if (add(&t, "mm.soft_emb_norm.weight", 0, 1, D, 1, 1, 1, 1.0, 0.1) != 0) goto done;
        if (add(&t, "mm.input_projection.weight", 0, 2, o->proj, D, 1, 1, 0.0, 1.0 / sqrt((double)D)) != 0)
            goto done;
    } else {
        if (linear(&t, "mm.0", D, o->proj) != 0) goto done;
        if (linear(&t, "mm.2", o->proj, o->proj) != 0) goto done;
    }
    rc = gguf_writer_write_file(w, o->out);
done:
    gguf_writer_free(w);
    for (int i = 0; i < t.n; i++) free(t.bufs[i]);
    return rc;
}

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: tessera-synth-mmproj -o OUT.gguf [options]\n\n"
            "Writes a synthetic mmproj (vision encoder and projector) with random\n"
            "(seeded) weights, as llama.cpp's converter lays one out.\n\n"
            "  -o, --out FILE      output path\n"
            "  --projector NAME    mlp (LLaVA-1.5: CLIP ViT, MLP projector; default),\n"
            "                      gemma3 (SigLIP ViT, 4x4 average pool, RMS norm,\n"
            "                      input projection; the image size a multiple of 4 patches),\n"
            "                      qwen2vl_merger (Qwen2-VL: 2-D rope ViT, 2x2 merger),\n"
            "                      qwen2.5vl_merger (Qwen2.5-VL: RMS norms, gated SiLU FFN,\n"
            "                      window attention but in 2 blocks),\n"
            "                      idefics3 (SigLIP ViT, pixel shuffle, linear projector;\n"
            "                      the image size a multiple of --scale-factor patches)\n"
            "  --scale-factor N    idefics3: the pixel shuffle's side in patches (default 2)\n"
            "  --preproc-size N    idefics3: the longest side a big image is resized to\n"
            "                      before tiling (default 2 x the image size)\n"
            "  --dim N             encoder width (default 64)\n"
            "  --layers N          encoder blocks (default 2)\n"
            "  --heads N           attention heads (default 4)\n"
            "  --ffn N             feed-forward size (default 128)\n"
            "  --image-size N      input side in pixels (default 56)\n"
            "  --patch N           patch side in pixels (default 14)\n"
            "  --proj-dim N        the text model's embedding size (default 128)\n"
            "  --gelu              GELU in the FFN (default: quick GELU, as CLIP)\n"
            "  --seed N            random seed (default 42)\n\n"
            "  --projector ultravox  an audio mmproj: Whisper encoder (--dim, --layers,\n"
            "                      --heads, --ffn) and Ultravox's projector onto --proj-dim;\n"
            "                      --mel N mel bins (128), --stack N frames stacked (8),\n"
            "                      --proj-hidden N the projector's first linear (256)\n"
            "  --projector voxtral   an audio mmproj: the same Whisper encoder and Voxtral's\n"
            "                      projector (frames stacked, linear, GELU, linear) onto\n"
            "                      --proj-dim; --mel, --stack, --proj-hidden as for ultravox\n");
}

int main(int argc, char **argv) {
    opts o = {NULL, 64, 2, 4, 128, 56, 14, 128, 42, 2, 0, false, "mlp"};
    synth_audio_opts ao = {.n_mel = 128, .n_pos = 1500, .stack = 8, .proj_hidden = 256};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *num = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--gelu")) {
            o.gelu = true;
            continue;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
            if (!v) goto missing;
            o.out = v;
            i++;
            continue;
        } else if (!strcmp(a, "--projector")) {
            if (!v) goto missing;
            o.projector = v;
            i++;
            continue;
        }
        if (!strcmp(a, "--dim")) num = &o.dim;
        else if (!strcmp(a, "--layers")) num = &o.layers;
        else if (!strcmp(a, "--heads")) num = &o.heads;
        else if (!strcmp(a, "--ffn")) num = &o.ffn;
        else if (!strcmp(a, "--image-size")) num = &o.image;
        else if (!strcmp(a, "--patch")) num = &o.patch;
        else if (!strcmp(a, "--proj-dim")) num = &o.proj;
        else if (!strcmp(a, "--seed")) num = &o.seed;
        else if (!strcmp(a, "--scale-factor")) num = &o.scale;
        else if (!strcmp(a, "--preproc-size")) num = &o.preproc;
        else if (!strcmp(a, "--mel")) num = &ao.n_mel;
        else if (!strcmp(a, "--stack")) num = &ao.stack;
        else if (!strcmp(a, "--proj-hidden")) num = &ao.proj_hidden;
        if (!num) {
            fprintf(stderr, "tessera-synth-mmproj: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!v) goto missing;
        char *end;
        long x = strtol(v, &end, 10);
        if (*end || x < 0 || x > 1 << 20) {
            fprintf(stderr, "tessera-synth-mmproj: %s: not a size: '%s'\n", a, v);
            return 2;
        }
        *num = (int)x;
        i++;
        continue;
    missing:
        fprintf(stderr, "tessera-synth-mmproj: %s needs a value\n", a);
        return 2;
    }
    if (!o.out) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(o.projector, "ultravox") || !strcmp(o.projector, "voxtral")) {
        ao.out = o.out, ao.projector = o.projector, ao.dim = o.dim, ao.layers = o.layers, ao.heads = o.heads, ao.ffn = o.ffn;
        ao.proj = o.proj, ao.seed = o.seed;
        if (ao.n_mel < 1 || ao.stack < 1 || ao.proj_hidden < 2 || ao.proj_hidden % 2 || o.heads < 1 ||
            o.dim % o.heads || o.layers < 1) {
            fprintf(stderr, "tessera-synth-mmproj: %s: --mel, --stack and --layers must be positive, "
                            "--proj-hidden even, --dim a multiple of --heads\n", o.projector);
            return 2;
        }
        if (synth_mmproj_audio(&ao) != 0) {
            fprintf(stderr, "tessera-synth-mmproj: %s\n", error_get());
            return 1;
        }
        return 0;
    }
    if (!strcmp(o.projector, "qwen2vl_merger") || !strcmp(o.projector, "qwen2.5vl_merger")) {
        if (o.patch < 1 || o.heads < 1 || o.dim % (4 * o.heads) || o.layers < 1) {
            fprintf(stderr, "tessera-synth-mmproj: %s: the width must be a multiple of 4 x the head count\n",
                    o.projector);
            return 2;
        }
        if (synth_mmproj_qwen2vl(o.out, o.projector, o.dim, o.layers, o.heads, o.ffn, o.image, o.patch, o.proj,
                                 o.seed) != 0) {
            fprintf(stderr, "tessera-synth-mmproj: %s\n", error_get());
            return 1;
        }
        return 0;
    }
    if (strcmp(o.projector, "mlp") != 0 && strcmp(o.projector, "gemma3") != 0 &&
        strcmp(o.projector, "idefics3") != 0) {
        fprintf(stderr,
                "tessera-synth-mmproj: --projector: '%s' is not one of: mlp, gemma3, qwen2vl_merger, "
                "qwen2.5vl_merger, idefics3, ultravox, voxtral\n",
                o.projector);
        return 2;
    }
    if (o.patch < 1 || o.image < o.patch || o.image % o.patch || o.heads < 1 || o.dim % o.heads ||
        o.layers < 1) {
        fprintf(stderr, "tessera-synth-mmproj: the image size must be a multiple of the patch "
                        "size and the width of the head count\n");
        return 2;
    }
    if (!strcmp(o.projector, "gemma3") && (o.image / o.patch) % 4) {
        fprintf(stderr, "tessera-synth-mmproj: gemma3: the image size must be a multiple of 4 patches\n");
        return 2;
    }
    if (!strcmp(o.projector, "idefics3")) {
        if (o.preproc == 0) o.preproc = 2 * o.image;
        if (o.scale < 1 || (o.image / o.patch) % o.scale || o.preproc < o.image) {
            fprintf(stderr, "tessera-synth-mmproj: idefics3: the image size must be a multiple of "
                            "--scale-factor patches, and --preproc-size at least the image size\n");
            return 2;
        }
    }
    if (write_mmproj(&o) != 0) {
        fprintf(stderr, "tessera-synth-mmproj: %s\n", error_get());
        return 1;
    }
    return 0;
}
