/* clip: loading an mmproj file, preprocessing, the encoder graph. */
#include "mtmd/clip.h"
#include "mtmd/clip_file.h"
#include "mtmd/clip_idefics3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/plugin_util.h>
#include <tessera/tessera.h>

#include "gguf/gguf.h"
#include "host/host_log.h"
#include "graph/graph.h"
#include "sched/sched.h"
#include "util/error.h"
#include "mtmd/clip_qwen2vl.h"

enum { CLIP_MAX_LAYERS = 256 };

typedef struct clip_linear {
    const gguf_tensor_info *w, *b; /* b may be NULL */
} clip_linear;

typedef struct clip_norm {
    const gguf_tensor_info *w, *b;
} clip_norm;

typedef struct clip_layer {
    clip_linear q, k, v, o, up, down;
    clip_norm ln1, ln2;
} clip_layer;

struct clip_model {
    gguf_file *f;
    char path[512];
    char projector[32];
    int32_t image_size, patch, n_embd, n_ff, n_head, n_layer, n_out;
    int32_t n_layer_used; /* blocks run: LLaVA takes the penultimate block's output */
    float eps, mean[3], std[3];
    bool gelu; /* else quick GELU */
    bool siglip; /* gemma3: SigLIP ViT (no class token), pooled projector */
    int32_t pool; /* gemma3: the average pool's side in patches */
    const gguf_tensor_info *patch_w, *patch_b, *cls, *pos;
    clip_norm pre_ln, post_ln;
    clip_layer *layers;
    clip_linear mm0, mm2;
    const gguf_tensor_info *soft_norm, *in_proj; /* gemma3 */
    float *pool_w; /* gemma3: [n_patch, n_tokens], the average pool as a product */
    clip_qwen2vl *qv;   /* qwen2vl_merger, qwen2.5vl_merger (clip_qwen2vl.c) */
    idefics3 *i3;  /* idefics3: its projector and tiles, else NULL */
    sched *s;           /* kept across encodes */
    host_device *s_devs[8];
    int s_n;
};

/* ---------------------------------------------------------------- load */

static int key_u32(clip_model *c, const char *key, int32_t lo, int32_t hi, int32_t *out) {
    return clip_file_key_int(c->f, c->path, key, false, lo, hi, out);
}

static int key_f32x3(clip_model *c, const char *key, float *out) {
    return clip_file_key_f32x3(c->f, c->path, key, out);
}

/* Tensor name, of dtype F32 (or F16/F32 where f16_ok) and shape ne (unused
 * dims 1). Optional ones may be absent (*out = NULL). */
static int tensor(clip_model *c, const char *name, bool optional, bool f16_ok, int64_t ne0, int64_t ne1,
                  int64_t ne2, int64_t ne3, const gguf_tensor_info **out) {
    return clip_file_tensor(c->f, c->path, name, optional, f16_ok, ne0, ne1, ne2, ne3, out);
}

/* A weight [in, out] (F32 or F16) and a bias [out]. */
static int linear(clip_model *c, const char *name, int64_t in, int64_t out, bool bias_optional,
                  clip_linear *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(c, n, false, true, in, out, 1, 1, &l->w) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(c, n, bias_optional, false, out, 1, 1, 1, &l->b);
}

static int norm(clip_model *c, const char *name, bool optional, int64_t dim, clip_norm *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(c, n, optional, false, dim, 1, 1, 1, &l->w) != 0) return -1;
    if (!l->w) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(c, n, false, false, dim, 1, 1, 1, &l->b);
}

clip_model *clip_model_load(const char *path, int32_t n_embd_text) {
    clip_model *c = calloc(1, sizeof *c);
    if (!c) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    snprintf(c->path, sizeof c->path, "%s", path);
    c->f = gguf_open(path);
    if (!c->f) goto fail;
    gguf_str s;
    if (gguf_get_str(c->f, "general.architecture", &s) != 0 || s.len != 4 || memcmp(s.ptr, "clip", 4) != 0) {
        error_set("%s: not an mmproj file (general.architecture is not \"clip\")", path);
        goto fail;
    }
    bool has_vision = false;
    if (gguf_find_key(c->f, "clip.has_vision_encoder") >= 0 &&
        gguf_get_bool(c->f, "clip.has_vision_encoder", &has_vision) != 0) {
        error_wrap("%s", path);
        goto fail;
    }
    if (!has_vision) {
        error_set("%s: key clip.has_vision_encoder: no vision encoder (an audio mmproj loads as clip_audio)",
                  path);
        goto fail;
    }
    const char *ptkey = gguf_find_key(c->f, "clip.projector_type") >= 0 ? "clip.projector_type"
                                                                          : "clip.vision.projector_type";
    if (gguf_get_str(c->f, ptkey, &s) != 0) {
        error_wrap("%s", path);
        goto fail;
    }
    if (s.len >= sizeof c->projector) s.len = sizeof c->projector - 1;
    memcpy(c->projector, s.ptr, s.len);
    if (clip_qwen2vl_is(c->projector)) {
        if (!(c->qv = clip_qwen2vl_load(c->f, path, c->projector, n_embd_text))) goto fail;
        return c;
    }
    const bool i3 = !strcmp(c->projector, "idefics3");
    c->siglip = !strcmp(c->projector, "gemma3") || i3;
    if (strcmp(c->projector, "mlp") != 0 && !c->siglip) {
        error_set("%s: key %s: projector type \"%s\" is not supported (supported: mlp, gemma3, qwen2vl_merger, "
                  "qwen2.5vl_merger, idefics3)", path, ptkey, c->projector);
        goto fail;
    }
    if (key_u32(c, "clip.vision.image_size", 1, 4096, &c->image_size) ||
        key_u32(c, "clip.vision.patch_size", 1, 256, &c->patch) ||
        key_u32(c, "clip.vision.embedding_length", 1, 16384, &c->n_embd) ||
        key_u32(c, "clip.vision.feed_forward_length", 1, 65536, &c->n_ff) ||
        key_u32(c, "clip.vision.attention.head_count", 1, 256, &c->n_head) ||
        key_u32(c, "clip.vision.block_count", 1, CLIP_MAX_LAYERS, &c->n_layer) ||
        key_f32x3(c, "clip.vision.image_mean", c->mean) || key_f32x3(c, "clip.vision.image_std", c->std))
        goto fail;
    if (gguf_get_f32(c->f, "clip.vision.attention.layer_norm_epsilon", &c->eps) != 0 || !(c->eps > 0) ||
        c->eps > 1) {
        error_set("%s: key clip.vision.attention.layer_norm_epsilon is missing or not in (0, 1]", path);
        goto fail;
    }
    for (int i = 0; i < 3; i++)
        if (!(c->std[i] > 0)) {
            error_set("%s: key clip.vision.image_std: %g is not positive", path, (double)c->std[i]);
            goto fail;
        }
    c->gelu = false;
    if (gguf_find_key(c->f, "clip.use_gelu") >= 0 && gguf_get_bool(c->f, "clip.use_gelu", &c->gelu) != 0) {
        error_wrap("%s", path);
        goto fail;
    }
    if (c->image_size % c->patch) {
        error_set("%s: key clip.vision.image_size (%d) is not a multiple of clip.vision.patch_size (%d)", path,
                  c->image_size, c->patch);
        goto fail;
    }
    if (c->n_embd % c->n_head) {
        error_set("%s: key clip.vision.embedding_length (%d) is not a multiple of the head count (%d)", path,
                  c->n_embd, c->n_head);
        goto fail;
    }
    /* LLaVA-1.5 feeds the projector the penultimate block's output (its
     * vision_feature_layer -2); llama.cpp does so for "mlp" files without
     * a post-norm, which we measured: with the last block's weights zeroed
     * its embeddings do not change (tests/data/mm/README.md). */
    c->n_layer_used = c->siglip ? c->n_layer : c->n_layer - 1;
    if (c->n_layer_used < 1) {
        error_set("%s: key clip.vision.block_count = %d: LLaVA needs at least 2 blocks", path, c->n_layer);
        goto fail;
    }
    const int64_t D = c->n_embd, side = c->image_size / c->patch, n_pos = side * side + !c->siglip;
    if (c->siglip && !i3) {
        /* Gemma 3 pools its 64x64 patches to 16x16 tokens (4x4); the
         * synthetic files keep the 4x4 pool on a smaller grid, as llama.cpp
         * does (16 tokens from 16x16 patches, tests/data/mm/README.md) */
        c->pool = 4;
        if (side % c->pool) {
            error_set("%s: key clip.vision.image_size (%d): gemma3 needs a multiple of %d patches of %d", path,
                      c->image_size, c->pool, c->patch);
            goto fail;
        }
    }
    if (tensor(c, "v.patch_embd.weight", false, true, c->patch, c->patch, 3, D, &c->patch_w) ||
        tensor(c, "v.patch_embd.bias", true, false, D, 1, 1, 1, &c->patch_b) ||
        (!c->siglip && tensor(c, "v.class_embd", false, false, D, 1, 1, 1, &c->cls)) ||
        tensor(c, "v.position_embd.weight", false, false, D, n_pos, 1, 1, &c->pos) ||
        norm(c, "v.pre_ln", true, D, &c->pre_ln) || norm(c, "v.post_ln", true, D, &c->post_ln))
        goto fail;
    c->layers = calloc((size_t)c->n_layer, sizeof *c->layers);
    if (!c->layers) {
        error_set("%s: out of memory", path);
        goto fail;
    }
    for (int il = 0; il < c->n_layer; il++) {
        clip_layer *L = &c->layers[il];
        char n[64];
#define LIN(field, name, in, out)                                     \
    snprintf(n, sizeof n, "v.blk.%d.%s", il, name);                   \
    if (linear(c, n, in, out, false, &L->field) != 0) goto fail;
        LIN(q, "attn_q", D, D)
        LIN(k, "attn_k", D, D)
        LIN(v, "attn_v", D, D)
        LIN(o, "attn_out", D, D)
        LIN(up, "ffn_up", D, c->n_ff)
        LIN(down, "ffn_down", c->n_ff, D)
#undef LIN
        snprintf(n, sizeof n, "v.blk.%d.ln1", il);
        if (norm(c, n, false, D, &L->ln1) != 0) goto fail;
        snprintf(n, sizeof n, "v.blk.%d.ln2", il);
        if (norm(c, n, false, D, &L->ln2) != 0) goto fail;
    }
    if (c->siglip && !c->post_ln.w) {
        error_set("%s: tensor v.post_ln.weight is missing (%s needs the post-layernorm)", path, c->projector);
        goto fail;
    }
    if (i3) {
        c->i3 = calloc(1, sizeof *c->i3);
        if (!c->i3 || idefics3_load(c->i3, c->f, path, c->image_size, c->patch, c->n_embd, n_embd_text) != 0) {
            if (!c->i3) error_set("%s: out of memory", path);
            goto fail;
        }
        c->n_out = c->i3->n_out;
        return c;
    }
    if (c->siglip) {
        if (tensor(c, "mm.soft_emb_norm.weight", false, false, D, 1, 1, 1, &c->soft_norm)) goto fail;
        const gguf_tensor_info *ip = gguf_find_tensor(c->f, "mm.input_projection.weight");
        if (!ip) {
            error_set("%s: tensor mm.input_projection.weight is missing", path);
            goto fail;
        }
        /* stored [text width, vision width] (ne0 first), x W as in HF */
        if (tensor(c, "mm.input_projection.weight", false, true, ip->ne[0], D, 1, 1, &c->in_proj)) goto fail;
        c->n_out = (int32_t)ip->ne[0];
        if (clip_file_check_width(path, "mm.input_projection.weight", c->n_out, n_embd_text) != 0) goto fail;
        const int64_t n_tok = (side / c->pool) * (side / c->pool), n_patch = side * side;
        c->pool_w = calloc((size_t)(n_patch * n_tok), sizeof(float));
        if (!c->pool_w) {
            error_set("%s: out of memory", path);
            goto fail;
        }
        const int64_t ts = side / c->pool;
        for (int64_t py = 0; py < side; py++)
            for (int64_t px = 0; px < side; px++)
                c->pool_w[((py / c->pool) * ts + px / c->pool) * n_patch + py * side + px] =
                    1.0f / (float)(c->pool * c->pool);
        return c;
    }
    const gguf_tensor_info *mm0 = gguf_find_tensor(c->f, "mm.0.weight");
    if (!mm0) {
        error_set("%s: tensor mm.0.weight is missing", path);
        goto fail;
    }
    int64_t hidden = mm0->ne[1];
    if (linear(c, "mm.0", D, hidden, false, &c->mm0) != 0) goto fail;
    const gguf_tensor_info *mm2 = gguf_find_tensor(c->f, "mm.2.weight");
    if (!mm2) {
        error_set("%s: tensor mm.2.weight is missing", path);
        goto fail;
    }
    if (linear(c, "mm.2", hidden, mm2->ne[1], false, &c->mm2) != 0) goto fail;
    c->n_out = (int32_t)mm2->ne[1];
    if (clip_file_check_width(path, "mm.2.weight", c->n_out, n_embd_text) != 0) goto fail;
    return c;
fail:
    clip_model_free(c);
    return NULL;
}

void clip_model_free(clip_model *c) {
    if (!c) return;
    if (c->s) sched_free(c->s);
    clip_qwen2vl_free(c->qv);
    free(c->layers);
    free(c->pool_w);
    idefics3_free(c->i3);
    gguf_close(c->f);
    free(c);
}

const char *clip_projector_type(const clip_model *c) { return c->projector; }
int32_t clip_n_embd_out(const clip_model *c) { return c->qv ? clip_qwen2vl_n_embd_out(c->qv) : c->n_out; }
int32_t clip_image_size(const clip_model *c) { return c->image_size; }
const char *clip_media_begin(const clip_model *c) {
    return c->qv ? "<|vision_start|>" : c->siglip && !c->i3 ? "<start_of_image>" : "";
}
const char *clip_media_end(const clip_model *c) {
    return c->qv ? "<|vision_end|>" : c->siglip && !c->i3 ? "<end_of_image>" : "";
}
bool clip_non_causal(const clip_model *c) { return c->siglip && !c->i3; }

int32_t clip_n_tiles(const clip_model *c, int32_t nx, int32_t ny) {
    return c->i3 ? idefics3_n_tiles(c->i3, nx, ny) : 1;
}

int32_t clip_tile_n_tokens(const clip_model *c, int32_t nx, int32_t ny, int32_t t) {
    (void)t;
    return c->i3 ? idefics3_tile_rows(c->i3) : clip_n_tokens(c, nx, ny);
}

void clip_tile_text(const clip_model *c, int32_t nx, int32_t ny, int32_t t, clip_text *before, clip_text *after) {
    if (c->i3) {
        idefics3_tile_text(c->i3, nx, ny, t, before, after);
        return;
    }
    memset(before, 0, sizeof *before);
    memset(after, 0, sizeof *after);
    snprintf(before->piece[0], sizeof before->piece[0], "%s", clip_media_begin(c));
    snprintf(after->piece[0], sizeof after->piece[0], "%s", clip_media_end(c));
    before->n = before->piece[0][0] != 0;
    after->n = after->piece[0][0] != 0;
}

void clip_grid(const clip_model *c, int32_t nx, int32_t ny, int32_t *gx, int32_t *gy) {
    if (c->qv) {
        clip_qwen2vl_grid(c->qv, nx, ny, gx, gy);
        return;
    }
    *gx = clip_n_tokens(c, nx, ny);
    *gy = 1;
}

int32_t clip_n_tokens(const clip_model *c, int32_t nx, int32_t ny) {
    if (c->qv) {
        int32_t gx, gy;
        clip_qwen2vl_grid(c->qv, nx, ny, &gx, &gy);
        return gx * gy;
    }
    if (c->i3) return idefics3_n_tiles(c->i3, nx, ny) * idefics3_tile_rows(c->i3);
    const int32_t side = c->image_size / c->patch;
    if (c->siglip) return (side / c->pool) * (side / c->pool);
    return side * side; /* the class token is dropped */
}

/* ---------------------------------------------------------- preprocess */

/* The resize kernels, as Pillow defines them (support 2, 1 and 3). */
static double cubic(double x) {
    /* Keys' cubic convolution kernel, a = -0.5 */
    const double a = -0.5;
    x = fabs(x);
    if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
    return 0;
}

static double triangle(double x) {
    x = fabs(x);
    return x < 1 ? 1 - x : 0;
}

static double sinc(double x) {
    if (x == 0) return 1;
    x *= M_PI;
    return sin(x) / x;
}

static double lanczos3(double x) { return x > -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0; }

enum { RS_BITS = 22 }; /* Pillow's fixed point for 8-bit images: 32 - 8 - 2 */

/* One pass of resampling as Pillow's does it for 8-bit images: output
 * pixel o samples the input around (o + 0.5) * scale with the kernel
 * widened by the scale when shrinking (antialiasing), the weights
 * normalised, then turned into 22-bit fixed point (rounded away from zero)
 * and the sum rounded half up to 8 bits. src nx x ny -> dst (horizontal:
 * n x ny; vertical: nx x n). */
static int resample(const uint8_t *src, int nx, int ny, uint8_t *dst, int n, bool horizontal, clip_resize_kind kind) {
    const int in = horizontal ? nx : ny;
    double (*k)(double) = kind == CLIP_RESIZE_BILINEAR ? triangle : kind == CLIP_RESIZE_LANCZOS ? lanczos3 : cubic;
    const double kernel_support = kind == CLIP_RESIZE_BILINEAR ? 1 : kind == CLIP_RESIZE_LANCZOS ? 3 : 2;
    const double scale = (double)in / n;
    const double fs = scale > 1 ? scale : 1, support = kernel_support * fs;
    const int taps = (int)ceil(support) * 2 + 1;
    double *w = malloc((size_t)taps * sizeof(double));
    int32_t *wi = malloc((size_t)taps * sizeof(int32_t));
    if (!w || !wi) {
        free(w);
        free(wi);
        return -1;
    }
    for (int o = 0; o < n; o++) {
        const double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        if (hi - lo > taps) hi = lo + taps;
        double sum = 0;
        for (int i = lo; i < hi; i++) sum += w[i - lo] = k((i - center + 0.5) / fs);
        for (int i = lo; i < hi; i++) {
            const double v = (sum != 0 ? w[i - lo] / sum : w[i - lo]) * (1 << RS_BITS);
            wi[i - lo] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
        }
        const int other = horizontal ? ny : nx;
        for (int j = 0; j < other; j++)
            for (int ch = 0; ch < 3; ch++) {
                int64_t acc = (int64_t)1 << (RS_BITS - 1);
                for (int i = lo; i < hi; i++) {
                    const size_t at = horizontal ? ((size_t)j * nx + i) * 3 : ((size_t)i * nx + j) * 3;
                    acc += (int64_t)wi[i - lo] * src[at + ch];
                }
                const int64_t v = acc >> RS_BITS;
                const size_t to = horizontal ? ((size_t)j * n + o) * 3 : ((size_t)o * nx + j) * 3;
                dst[to + ch] = (uint8_t)(acc < 0 ? 0 : v > 255 ? 255 : v);
            }
    }
    free(w);
    free(wi);
    return 0;
}

int clip_resample_rgb(const uint8_t *src, int nx, int ny, uint8_t *dst, int ox, int oy, clip_resize_kind kind) {
    uint8_t *tmp = malloc((size_t)ox * ny * 3);
    int rc = !tmp || resample(src, nx, ny, tmp, ox, true, kind) != 0 || resample(tmp, ox, ny, dst, oy, false, kind) != 0;
    free(tmp);
    return rc ? error_set("image: out of memory resizing to %dx%d", ox, oy) : 0;
}

int clip_fit_pad(const media_image *img, uint8_t *out, int W, int H, int rw, int rh, const uint8_t fill[3],
                 clip_resize_kind kind) {
    if (img->nx == W && img->ny == H) {
        memcpy(out, img->rgb, (size_t)W * H * 3);
        return 0;
    }
    uint8_t *t = malloc((size_t)rw * rh * 3);
    if (!t) return error_set("image: out of memory resizing to %dx%d", rw, rh);
    if (clip_resample_rgb(img->rgb, img->nx, img->ny, t, rw, rh, kind) != 0) {
        free(t);
        return -1;
    }
    const int ox = (W - rw) / 2, oy = (H - rh) / 2;
    for (size_t i = 0; i < (size_t)W * H; i++) memcpy(out + i * 3, fill, 3);
    for (int y = 0; y < rh; y++) memcpy(out + ((size_t)(y + oy) * W + ox) * 3, t + (size_t)y * rw * 3, (size_t)rw * 3);
    free(t);
    return 0;
}

int clip_preprocess(const clip_model *c, const media_image *img, float *out) {
    if (c->qv) return error_set("%s: a %s image has no fixed size to preprocess to", c->path, c->projector);
    const int S = c->image_size;
    /* As libmtmd does it (measured, tests/data/mm/README.md): scaled to fit
     * S x S keeping its aspect, the shorter side rounded up, with Pillow's
     * bicubic (LLaVA) or bilinear (Gemma 3), centred, the rest filled with
     * the mean colour truncated to 8 bits (LLaVA) or black (Gemma 3) */
    const int64_t nx = img->nx, ny = img->ny;
    const int rw = nx >= ny ? S : (int)((S * nx + ny - 1) / ny), rh = ny >= nx ? S : (int)((S * ny + nx - 1) / nx);
    uint8_t fill[3] = {0, 0, 0};
    if (!c->siglip)
        for (int ch = 0; ch < 3; ch++) fill[ch] = (uint8_t)(c->mean[ch] * 255.0f);
    uint8_t *rs = malloc((size_t)S * S * 3);
    if (!rs) return error_set("image: out of memory resizing to %dx%d", S, S);
    if (clip_fit_pad(img, rs, S, S, rw, rh, fill, c->siglip ? CLIP_RESIZE_BILINEAR : CLIP_RESIZE_BICUBIC) != 0) {
        free(rs);
        return -1;
    }
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++)
            for (int ch = 0; ch < 3; ch++)
                out[((size_t)ch * S + y) * S + x] =
                    ((float)rs[((size_t)y * S + x) * 3 + ch] / 255.0f - c->mean[ch]) / c->std[ch];
    free(rs);
    return 0;
}

/* -------------------------------------------------------------- graph */

static graph_tensor *weight(graph *g, const gguf_tensor_info *t, int n_dims, const int64_t *ne) {
    graph_tensor *w = graph_tensor_new(g, t->dtype, n_dims, ne);
    if (!w) return NULL;
    graph_tensor_set_name(w, "%s", t->name);
    graph_tensor_bind(w, GRAPH_WEIGHT, -1, NULL, 0, (void *)t->data);
    return w;
}

static graph_tensor *w1(graph *g, const gguf_tensor_info *t) { return weight(g, t, 1, t->ne); }
static graph_tensor *w2(graph *g, const gguf_tensor_info *t) { return weight(g, t, 2, t->ne); }

static graph_tensor *lin(graph *g, const clip_linear *l, graph_tensor *x) {
    graph_tensor *y = graph_mul_mat(g, w2(g, l->w), x);
    return l->b ? graph_add(g, y, w1(g, l->b)) : y;
}

static graph_tensor *layer_norm(graph *g, const clip_norm *n, graph_tensor *x, float eps) {
    graph_tensor *y = graph_norm(g, x, eps);
    y = graph_mul(g, y, w1(g, n->w));
    return graph_add(g, y, w1(g, n->b));
}

/* quick GELU, x * sigmoid(1.702 x) = silu(1.702 x) / 1.702 */
static graph_tensor *act(const clip_model *c, graph *g, graph_tensor *x) {
    if (c->gelu) return graph_gelu(g, x);
    return graph_scale(g, graph_silu(g, graph_scale(g, x, 1.702f, 0.0f)), 1.0f / 1.702f, 0.0f);
}

/* inp F32 [3 p p, n_patch] (patches in row order, each c-major then y, x as
 * the convolution kernel [kw, kh, c, D] is laid out) -> out [n_out, n_patch]. */
static graph *build(const clip_model *c, graph_tensor **inp, graph_tensor **out) {
    const int64_t D = c->n_embd, P = (int64_t)c->patch * c->patch * 3;
    const int64_t side = c->image_size / c->patch, n_patch = side * side, N = n_patch + !c->siglip;
    const int64_t H = c->n_head, hd = D / H;
    graph *g = graph_new(64 + 48 * c->n_layer);
    if (!g) return NULL;
    *inp = graph_set_input(graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, P, n_patch), "patches"));
    const int64_t pne[2] = {P, D};
    graph_tensor *x = graph_mul_mat(g, weight(g, c->patch_w, 2, pne), *inp); /* [D, n_patch] */
    if (c->patch_b) x = graph_add(g, x, w1(g, c->patch_b));
    const int64_t cne[2] = {D, 1};
    /* llama.cpp (libmtmd of October 2026) appends the class token after the
     * patches, adds positions 0..N-1 in that order, and later drops row 0
     * (the first patch), keeping the class token's row: measured by probing
     * its encoder with one-pixel images (tests/data/mm/README.md). HF's CLIP
     * puts the class token first; we follow llama.cpp so embeddings match. */
    if (!c->siglip) x = graph_concat(g, x, weight(g, c->cls, 2, cne), 1); /* [D, N] */
    x = graph_add(g, x, w2(g, c->pos));
    if (c->pre_ln.w) x = layer_norm(g, &c->pre_ln, x, c->eps);
    const float kq_scale = 1.0f / sqrtf((float)hd);
    for (int il = 0; il < c->n_layer_used; il++) {
        const clip_layer *L = &c->layers[il];
        graph_tensor *h = layer_norm(g, &L->ln1, x, c->eps);
        graph_tensor *q = graph_reshape_3d(g, lin(g, &L->q, h), hd, H, N);
        graph_tensor *k = graph_reshape_3d(g, lin(g, &L->k, h), hd, H, N);
        graph_tensor *v = graph_reshape_3d(g, lin(g, &L->v, h), hd, H, N);
        q = graph_permute(g, q, 0, 2, 1, 3); /* [hd, N, H] */
        k = graph_permute(g, k, 0, 2, 1, 3);
        v = graph_permute(g, v, 0, 2, 1, 3);
        graph_tensor *a = graph_flash_attn(g, q, k, v, NULL, kq_scale); /* [hd, H, N] */
        a = graph_reshape_2d(g, a, D, N);
        x = graph_add(g, x, lin(g, &L->o, a));
        h = layer_norm(g, &L->ln2, x, c->eps);
        h = lin(g, &L->down, act(c, g, lin(g, &L->up, h)));
        x = graph_tensor_set_name(graph_add(g, x, h), "vit-out-%d", il);
    }
    if (c->post_ln.w) x = layer_norm(g, &c->post_ln, x, c->eps);
    if (c->i3) {
        x = idefics3_project(c->i3, g, x, w2(g, c->i3->fc));
    } else if (c->siglip) {
        /* the pool x P: P [n_patch, n_tok] averages each pool x pool square
         * of patches (row order) into one token (row order) */
        const int64_t n_tok = n_patch / ((int64_t)c->pool * c->pool);
        graph_tensor *pw = graph_tensor_new_2d(g, TSR_DTYPE_F32, n_patch, n_tok);
        if (pw) {
            graph_tensor_set_name(pw, "mm.pool");
            graph_tensor_bind(pw, GRAPH_WEIGHT, -1, NULL, 0, c->pool_w);
        }
        x = graph_mul_mat(g, graph_cont(g, graph_transpose(g, x)), pw); /* [D, n_tok] */
        x = graph_mul(g, graph_rms_norm(g, x, c->eps), w1(g, c->soft_norm));
        x = graph_mul_mat(g, graph_cont(g, graph_transpose(g, w2(g, c->in_proj))), x); /* [n_out, n_tok] */
    } else {
        /* drop row 0 */
        x = graph_cont(g, graph_view_2d(g, x, D, n_patch, x ? x->t.nb[1] : 0, x ? x->t.nb[1] : 0));
        x = lin(g, &c->mm2, graph_gelu(g, lin(g, &c->mm0, x)));
    }
    *out = graph_set_output(graph_tensor_set_name(x, "mm-out"));
    if (graph_check(g) != 0) {
        error_wrap("%s: the encoder graph", c->path);
        graph_free(g);
        return NULL;
    }
    return g;
}

static double ms_between(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

void clip_timing_mark(clip_timing *tm, int phase) {
    if (phase == CLIP_T_COMPUTE) {
        clock_gettime(CLOCK_MONOTONIC, &tm->t[phase]);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &tm->cpu[1]);
        return;
    }
    if (phase == CLIP_T_PATCHIFY) clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &tm->cpu[0]);
    clock_gettime(CLOCK_MONOTONIC, &tm->t[phase]);
}

double clip_timing_end(const clip_timing *tm) {
    static int on = -1;
    if (on < 0) on = getenv("TESSERA_CLIP_TIMING") && strcmp(getenv("TESSERA_CLIP_TIMING"), "0") != 0;
    const struct timespec *t = tm->t;
    if (on)
        fprintf(stderr,
                "clip timing: preprocess %.3f build %.3f alloc %.3f patchify %.3f compute %.3f (cpu %.3f) total %.3f "
                "ms\n",
                ms_between(&t[CLIP_T_START], &t[CLIP_T_PREPROCESS]), ms_between(&t[CLIP_T_PREPROCESS], &t[CLIP_T_BUILD]),
                ms_between(&t[CLIP_T_BUILD], &t[CLIP_T_ALLOC]), ms_between(&t[CLIP_T_ALLOC], &t[CLIP_T_PATCHIFY]),
                ms_between(&t[CLIP_T_PATCHIFY], &t[CLIP_T_COMPUTE]), ms_between(&tm->cpu[0], &tm->cpu[1]),
                ms_between(&t[CLIP_T_START], &t[CLIP_T_COMPUTE]));
    return ms_between(&t[CLIP_T_PATCHIFY], &t[CLIP_T_COMPUTE]);
}

/* One tile (the image itself but for idefics3) through the graph. */
static int encode_one(clip_model *c, clip_run *run, const media_image *img, int32_t n_rows, float *out) {
    const int S = c->image_size, p = c->patch, side = S / p;
    clip_timing tm;
    clip_timing_mark(&tm, CLIP_T_START);
    float *pix = malloc((size_t)3 * S * S * sizeof(float));
    if (!pix) return error_set("%s: out of memory", c->path);
    if (clip_preprocess(c, img, pix) != 0) {
        free(pix);
        return -1;
    }
    clip_timing_mark(&tm, CLIP_T_PREPROCESS);
    graph_tensor *inp = NULL, *res = NULL;
    graph *g = build(c, &inp, &res);
    clip_timing_mark(&tm, CLIP_T_BUILD);
    if (!g) {
        free(pix);
        return -1;
    }
    bool same = c->s && c->s_n == run->n_devices && run->n_devices <= 8;
    for (int i = 0; same && i < run->n_devices; i++) same = c->s_devs[i] == run->devices[i];
    if (!same) {
        if (c->s) sched_free(c->s);
        c->s = sched_new(run->devices, run->n_devices, &(sched_params){.n_threads = run->n_threads});
        c->s_n = run->n_devices > 8 ? 8 : run->n_devices;
        for (int i = 0; i < c->s_n; i++) c->s_devs[i] = run->devices[i];
    } else {
        sched_set_n_threads(c->s, run->n_threads);
    }
    int rc = -1;
    if (!c->s || sched_alloc(c->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_ALLOC);
    if (run->explain && host_log_wanted()) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (f) {
            fprintf(f, "tessera: placement of the image encoder graph (%s):\n", c->projector);
            sched_explain(c->s, f);
            if (fclose(f) == 0) host_log_text(TESSERA_LOG_INFO, text);
            free(text);
        }
    }
    /* patchify: patch (py, px) is column py * side + px; element (ch, ky, kx) */
    float *dst = inp->t.data;
    const int64_t P = (int64_t)p * p * 3;
    for (int py = 0; py < side; py++)
        for (int px = 0; px < side; px++) {
            float *col = dst + (size_t)(py * side + px) * (size_t)P;
            for (int ch = 0; ch < 3; ch++)
                for (int ky = 0; ky < p; ky++)
                    for (int kx = 0; kx < p; kx++)
                        col[(ch * p + ky) * p + kx] = pix[((size_t)ch * S + py * p + ky) * S + px * p + kx];
        }
    clip_timing_mark(&tm, CLIP_T_PATCHIFY);
    if (sched_compute(c->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_COMPUTE);
    run->encode_ms = clip_timing_end(&tm);
    const int64_t n = (int64_t)n_rows * c->n_out;
    const float *r = res->t.data;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(r[i])) {
            error_set("%s: the encoder produced a non-finite value (row %lld)", c->path, (long long)(i / c->n_out));
            goto done;
        }
        out[i] = r[i];
    }
    rc = 0;
done:
    graph_free(g);
    free(pix);
    return rc;
}

int clip_encode_tile(clip_model *c, clip_run *run, const media_image *img, int32_t t, float *out) {
    const int32_t n_rows = clip_tile_n_tokens(c, img->nx, img->ny, t);
    if (!c->i3) return t == 0 ? clip_encode(c, run, img, out) : error_set("image: tile %d does not exist", t);
    const int32_t S = c->image_size;
    media_image tile = {S, S, malloc((size_t)S * S * 3)};
    if (!tile.rgb) return error_set("%s: out of memory", c->path);
    int rc = idefics3_tile_image(c->i3, img, t, tile.rgb) != 0 ? -1 : encode_one(c, run, &tile, n_rows, out);
    free(tile.rgb);
    return rc;
}

int clip_encode(clip_model *c, clip_run *run, const media_image *img, float *out) {
    if (c->qv) return clip_qwen2vl_encode(c->qv, run, img, out);
    if (!c->i3) return encode_one(c, run, img, clip_n_tokens(c, img->nx, img->ny), out);
    double ms = 0;
    for (int32_t t = 0; t < clip_n_tiles(c, img->nx, img->ny); t++) {
        if (clip_encode_tile(c, run, img, t, out) != 0) return -1;
        out += (size_t)clip_tile_n_tokens(c, img->nx, img->ny, t) * (size_t)c->n_out;
        ms += run->encode_ms;
    }
    run->encode_ms = ms;
    return 0;
}
