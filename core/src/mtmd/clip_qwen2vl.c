/* clip_qwen2vl: the Qwen2-VL / Qwen2.5-VL encoders (see clip_qwen2vl.h). */
#include "mtmd/clip_qwen2vl.h"
#include "mtmd/clip_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/plugin_util.h>
#include <tessera/tessera.h>

#include "graph/graph.h"
#include "host/host_log.h"
#include "sched/sched.h"
#include "util/error.h"

enum { QV_MAX_LAYERS = 256, QV_MERGE = 2 };
#define QV_ROPE_BASE 10000.0f
/* libmtmd's bounds on a Qwen image, in 28 x 28 cells (measured: 40x30 and
 * 64x64 pixels are scaled up to 12 and 9 cells, 2400x1600 and 4000x3000
 * down to 78x52 and 73x55, which these bounds give; the file's
 * image_min_pixels / image_max_pixels keys did not change them) */
enum { QV_MIN_CELLS = 8, QV_MAX_CELLS = 4096 };

typedef struct qv_lin {
    const gguf_tensor_info *w, *b;
} qv_lin;

typedef struct qv_layer {
    qv_lin q, k, v, o, gate, up, down;
    qv_lin ln1, ln2; /* weight and bias (bias NULL: RMS norm) */
} qv_layer;

struct clip_qwen2vl {
    const gguf_file *f;
    char path[512];
    char projector[32];
    bool v25;
    int32_t patch, n_embd, n_ff, n_head, n_layer, n_out, wa_pattern, window;
    float eps, mean[3], std[3];
    const gguf_tensor_info *patch_w0, *patch_w1, *patch_b;
    qv_layer *layers;
    qv_lin post_ln, mm0, mm2;
    float *rope_ff; /* rope_2d's frequency factors [hd]: the row's half, then the column's */
    sched *s;
    host_device *s_devs[8];
    int s_n;
};

bool clip_qwen2vl_is(const char *projector) {
    return !strcmp(projector, "qwen2vl_merger") || !strcmp(projector, "qwen2.5vl_merger");
}

/* ---------------------------------------------------------------- load */

static int key_int(clip_qwen2vl *q, const char *key, bool optional, int32_t lo, int32_t hi, int32_t *out) {
    return clip_file_key_int(q->f, q->path, key, optional, lo, hi, out);
}

static int key_f32x3(clip_qwen2vl *q, const char *key, float *out) {
    return clip_file_key_f32x3(q->f, q->path, key, out);
}

static int tensor(clip_qwen2vl *q, const char *name, bool optional, bool f16_ok, int64_t ne0, int64_t ne1,
                  int64_t ne2, int64_t ne3, const gguf_tensor_info **out) {
    return clip_file_tensor(q->f, q->path, name, optional, f16_ok, ne0, ne1, ne2, ne3, out);
}

static int linear(clip_qwen2vl *q, const char *name, int64_t in, int64_t out, qv_lin *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(q, n, false, true, in, out, 1, 1, &l->w) != 0) return -1;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(q, n, true, false, out, 1, 1, 1, &l->b);
}

/* A norm's weight, and its bias where bias (LayerNorm; RMS norm has none). */
static int norm(clip_qwen2vl *q, const char *name, bool bias, int64_t dim, qv_lin *l) {
    char n[96];
    snprintf(n, sizeof n, "%s.weight", name);
    if (tensor(q, n, false, false, dim, 1, 1, 1, &l->w) != 0) return -1;
    l->b = NULL;
    if (!bias) return 0;
    snprintf(n, sizeof n, "%s.bias", name);
    return tensor(q, n, false, false, dim, 1, 1, 1, &l->b);
}

/* rope_2d's frequency factors for a head of hd dims: ff[0..hd/2) turning
 * the row's quarter (pairs [0, hd/4)) and ff[hd/2..hd) the column's. The
 * ROPE turns pair i by pos * base^(-i / (hd/2)) / factor_i; the quarter
 * starting at pair s wants pos * base^(-(i - s) / (hd/4)). */
static void rope_factors(int64_t hd, float *ff) {
    const int64_t half = hd / 2, n = hd / 4;
    for (int s = 0; s < 2; s++)
        for (int64_t i = 0; i < half; i++) {
            const bool mine = s == 0 ? i < n : i >= n;
            const double e = (double)i / (double)half - (double)(i - s * n) / (double)n;
            ff[s * half + i] = mine ? (float)pow(QV_ROPE_BASE, -e) : INFINITY;
        }
}

clip_qwen2vl *clip_qwen2vl_load(gguf_file *f, const char *path, const char *projector, int32_t n_embd_text) {
    clip_qwen2vl *q = calloc(1, sizeof *q);
    if (!q) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    q->f = f;
    snprintf(q->path, sizeof q->path, "%s", path);
    snprintf(q->projector, sizeof q->projector, "%s", projector);
    q->v25 = !strcmp(projector, "qwen2.5vl_merger");
    int32_t merge = QV_MERGE;
    if (key_int(q, "clip.vision.patch_size", false, 1, 256, &q->patch) ||
        key_int(q, "clip.vision.embedding_length", false, 1, 16384, &q->n_embd) ||
        key_int(q, "clip.vision.feed_forward_length", false, 1, 65536, &q->n_ff) ||
        key_int(q, "clip.vision.attention.head_count", false, 1, 256, &q->n_head) ||
        key_int(q, "clip.vision.block_count", false, 1, QV_MAX_LAYERS, &q->n_layer) ||
        key_int(q, "clip.vision.spatial_merge_size", true, 1, 16, &merge) ||
        key_f32x3(q, "clip.vision.image_mean", q->mean) || key_f32x3(q, "clip.vision.image_std", q->std))
        goto fail;
    if (merge != QV_MERGE) {
        error_set("%s: key clip.vision.spatial_merge_size = %d: only 2 (2x2 patches a row) is supported", path,
                  merge);
        goto fail;
    }
    if (gguf_get_f32(f, "clip.vision.attention.layer_norm_epsilon", &q->eps) != 0 || !(q->eps > 0) || q->eps > 1) {
        error_set("%s: key clip.vision.attention.layer_norm_epsilon is missing or not in (0, 1]", path);
        goto fail;
    }
    for (int i = 0; i < 3; i++)
        if (!(q->std[i] > 0)) {
            error_set("%s: key clip.vision.image_std: %g is not positive", path, (double)q->std[i]);
            goto fail;
        }
    /* the 2-D rope turns a quarter of each head's dims by the row, a quarter by the column */
    if (q->n_embd % q->n_head || (q->n_embd / q->n_head) % 4) {
        error_set("%s: key clip.vision.embedding_length (%d) over the head count (%d) is not a multiple of 4", path,
                  q->n_embd, q->n_head);
        goto fail;
    }
    if (q->v25) {
        q->window = 112;
        if (key_int(q, "clip.vision.n_wa_pattern", false, 1, QV_MAX_LAYERS, &q->wa_pattern) ||
            key_int(q, "clip.vision.window_size", true, 1, 1 << 16, &q->window))
            goto fail;
        if (q->window % (q->patch * QV_MERGE)) {
            error_set("%s: key clip.vision.window_size (%d) is not a multiple of 2 patches (%d)", path, q->window,
                      q->patch * QV_MERGE);
            goto fail;
        }
    }
    const int64_t D = q->n_embd, p = q->patch;
    if (tensor(q, "v.patch_embd.weight", false, true, p, p, 3, D, &q->patch_w0) ||
        tensor(q, "v.patch_embd.weight.1", true, true, p, p, 3, D, &q->patch_w1) ||
        tensor(q, "v.patch_embd.bias", true, false, D, 1, 1, 1, &q->patch_b))
        goto fail;
    q->layers = calloc((size_t)q->n_layer, sizeof *q->layers);
    if (!q->layers) {
        error_set("%s: out of memory", path);
        goto fail;
    }
    for (int il = 0; il < q->n_layer; il++) {
        qv_layer *L = &q->layers[il];
        char n[64];
#define LIN(field, name, in, out)                                     \
    snprintf(n, sizeof n, "v.blk.%d.%s", il, name);                   \
    if (linear(q, n, in, out, &L->field) != 0) goto fail;
        LIN(q, "attn_q", D, D)
        LIN(k, "attn_k", D, D)
        LIN(v, "attn_v", D, D)
        LIN(o, "attn_out", D, D)
        if (q->v25) {
            LIN(gate, "ffn_gate", D, q->n_ff)
        }
        LIN(up, "ffn_up", D, q->n_ff)
        LIN(down, "ffn_down", q->n_ff, D)
#undef LIN
        snprintf(n, sizeof n, "v.blk.%d.ln1", il);
        if (norm(q, n, !q->v25, D, &L->ln1) != 0) goto fail;
        snprintf(n, sizeof n, "v.blk.%d.ln2", il);
        if (norm(q, n, !q->v25, D, &L->ln2) != 0) goto fail;
    }
    if (norm(q, "v.post_ln", !q->v25, D, &q->post_ln) != 0) goto fail;
    const gguf_tensor_info *mm0 = gguf_find_tensor(f, "mm.0.weight"), *mm2 = gguf_find_tensor(f, "mm.2.weight");
    if (!mm0 || !mm2) {
        error_set("%s: tensor %s is missing", path, !mm0 ? "mm.0.weight" : "mm.2.weight");
        goto fail;
    }
    if (linear(q, "mm.0", 4 * D, mm0->ne[1], &q->mm0) || linear(q, "mm.2", mm0->ne[1], mm2->ne[1], &q->mm2))
        goto fail;
    q->n_out = (int32_t)mm2->ne[1];
    if (clip_file_check_width(path, "mm.2.weight", q->n_out, n_embd_text) != 0) goto fail;
    if (!(q->rope_ff = malloc((size_t)(D / q->n_head) * sizeof *q->rope_ff))) {
        error_set("%s: out of memory", path);
        goto fail;
    }
    rope_factors(D / q->n_head, q->rope_ff);
    return q;
fail:
    clip_qwen2vl_free(q);
    return NULL;
}

void clip_qwen2vl_free(clip_qwen2vl *q) {
    if (!q) return;
    if (q->s) sched_free(q->s);
    free(q->layers);
    free(q->rope_ff);
    free(q);
}

int32_t clip_qwen2vl_n_embd_out(const clip_qwen2vl *q) { return q->n_out; }

/* Qwen2-VL's smart resize in cells of c = 28 pixels: each side rounded to
 * the nearest multiple, then, past the bounds, both scaled by one factor
 * (down: floor, up: ceil) to bring the area inside them. */
void clip_qwen2vl_grid(const clip_qwen2vl *q, int32_t nx, int32_t ny, int32_t *gx, int32_t *gy) {
    const double c = (double)q->patch * QV_MERGE, area = (double)nx * ny;
    const double lo = QV_MIN_CELLS * c * c, hi = QV_MAX_CELLS * c * c;
    double w = fmax(1, round(nx / c)), h = fmax(1, round(ny / c));
    if (w * h * c * c > hi) {
        const double beta = sqrt(area / hi);
        w = fmax(1, floor(nx / beta / c));
        h = fmax(1, floor(ny / beta / c));
    } else if (w * h * c * c < lo) {
        const double beta = sqrt(lo / area);
        w = ceil(nx * beta / c);
        h = ceil(ny * beta / c);
    }
    *gx = (int32_t)w;
    *gy = (int32_t)h;
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

static graph_tensor *lin(graph *g, const qv_lin *l, graph_tensor *x) {
    graph_tensor *y = graph_mul_mat(g, weight(g, l->w, 2, l->w->ne), x);
    return l->b ? graph_add(g, y, w1(g, l->b)) : y;
}

static graph_tensor *norm_of(const clip_qwen2vl *q, graph *g, const qv_lin *n, graph_tensor *x) {
    if (!n->b) return graph_mul(g, graph_rms_norm(g, x, q->eps), w1(g, n->w));
    return graph_add(g, graph_mul(g, graph_norm(g, x, q->eps), w1(g, n->w)), w1(g, n->b));
}

/* The 2-D rope of x [hd, H, N]: NeoX pairs (i, i + hd/2), those in [0, hd/4)
 * turned by the row, those in [hd/4, hd/2) by the column, each quarter
 * with frequencies 10000^(-j / (hd/4)) counted from its own first pair
 * (HF's VisionRotaryEmbedding of hd/2 dims, its angles for h then w).
 * Two ROPEs over the whole head (n_dims hd), one per position: each one's
 * frequency factors (ff_h, ff_w) bring its pairs' frequencies from
 * 10000^(-i / (hd/2)) to the quarter's and are infinite on the other
 * quarter, whose pairs then turn by 0 (cos 1, sin 0: the values pass
 * unchanged). Two nodes where splitting the quarters out and joining them
 * back took seven, each a step the CPU threads meet at. */
static graph_tensor *rope_2d(graph *g, graph_tensor *x, graph_tensor *pos_h, graph_tensor *pos_w,
                             graph_tensor *ff_h, graph_tensor *ff_w) {
    if (!x) return NULL;
    const graph_rope_params rp = {.n_dims = (int32_t)x->t.ne[0], .mode = TSR_ROPE_NEOX, .freq_base = QV_ROPE_BASE,
                                  .freq_scale = 1.0f, .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    return graph_rope(g, graph_rope(g, x, pos_h, ff_h, &rp), pos_w, ff_w, &rp);
}

/* Whether block il attends within windows (Qwen2.5-VL: all but every
 * wa_pattern-th). */
static bool windowed(const clip_qwen2vl *q, int il) { return q->v25 && (il + 1) % q->wa_pattern != 0; }

typedef struct qv_inputs {
    graph_tensor *patches, *pos_h, *pos_w, *out;
} qv_inputs;

/* The windows of an image's cells (Qwen2.5-VL's get_window_index): squares
 * of wc x wc cells from the top left, the last ones cut short. The encoder
 * takes the cells window by window (each window's cells in row order), so
 * a window's patches are contiguous: cell[j] is the j-th cell taken (its
 * index in row order), window w's patches start at 4 * first[w] and number
 * 4 * (first[w + 1] - first[w]). One window (wc at least the grid) is row
 * order. */
typedef struct qv_windows {
    int32_t n, *first, *cell;
} qv_windows;

static int windows_make(int32_t gx, int32_t gy, int32_t wc, qv_windows *w) {
    const int32_t nwx = (gx + wc - 1) / wc, nwy = (gy + wc - 1) / wc;
    w->n = nwx * nwy;
    w->first = malloc(((size_t)w->n + 1) * sizeof *w->first);
    w->cell = malloc((size_t)gx * gy * sizeof *w->cell);
    if (!w->first || !w->cell) return -1;
    int32_t j = 0;
    for (int32_t wy = 0; wy < nwy; wy++)
        for (int32_t wx = 0; wx < nwx; wx++) {
            w->first[wy * nwx + wx] = j;
            for (int32_t cy = wy * wc; cy < gy && cy < (wy + 1) * wc; cy++)
                for (int32_t cx = wx * wc; cx < gx && cx < (wx + 1) * wc; cx++) w->cell[j++] = cy * gx + cx;
        }
    w->first[w->n] = j;
    return 0;
}

/* Attention within each window: q, k, v [hd, N, H] with each window's
 * patches contiguous -> [hd, H, N], one FLASH_ATTN per window, joined in a
 * balanced tree of CONCATs (so each row is copied log2(windows) times, and
 * nothing is N x N: the mask this replaces was N^2 floats, 1 GiB at 16k
 * patches). */
static graph_tensor *window_attn(graph *g, graph_tensor *qq, graph_tensor *kk, graph_tensor *vv,
                                 const qv_windows *w, int32_t lo, int32_t hi, float kq_scale) {
    if (!qq || !kk || !vv) return NULL;
    if (hi - lo > 1) {
        const int32_t mid = lo + (hi - lo) / 2;
        return graph_concat(g, window_attn(g, qq, kk, vv, w, lo, mid, kq_scale),
                            window_attn(g, qq, kk, vv, w, mid, hi, kq_scale), 2);
    }
    const int64_t hd = qq->t.ne[0], H = qq->t.ne[2], at = 4 * (int64_t)w->first[lo];
    const int64_t n = 4 * (int64_t)(w->first[lo + 1] - w->first[lo]);
    graph_tensor *v3[3] = {qq, kk, vv};
    for (int i = 0; i < 3; i++)
        v3[i] = graph_view_3d(g, v3[i], hd, n, H, v3[i]->t.nb[1], v3[i]->t.nb[2], (uint64_t)at * v3[i]->t.nb[1]);
    return graph_flash_attn(g, v3[0], v3[1], v3[2], NULL, kq_scale);
}

/* N patches, each cell's 2x2 block in row order, the cells window by
 * window (w) -> out [n_out, N/4], the cells in the same order. */
static graph *build(const clip_qwen2vl *q, int64_t N, const qv_windows *w, qv_inputs *io) {
    const int64_t D = q->n_embd, P = (int64_t)q->patch * q->patch * 3, H = q->n_head, hd = D / H;
    int n_win_layers = 0;
    for (int il = 0; il < q->n_layer; il++) n_win_layers += windowed(q, il) && w->n > 1;
    graph *g = graph_new((int32_t)(64 + 96 * (int64_t)q->n_layer + (int64_t)n_win_layers * w->n * 6));
    if (!g) return NULL;
    io->patches = graph_set_input(graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, P, N), "patches"));
    io->pos_h = graph_set_input(graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_I32, N), "pos_h"));
    io->pos_w = graph_set_input(graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_I32, N), "pos_w"));
    const int64_t pne[2] = {P, D};
    /* an image is two equal frames: the Conv3d is the sum of its two slices' products */
    graph_tensor *x = graph_mul_mat(g, weight(g, q->patch_w0, 2, pne), io->patches); /* [D, N] */
    if (q->patch_w1) x = graph_add(g, x, graph_mul_mat(g, weight(g, q->patch_w1, 2, pne), io->patches));
    if (q->patch_b) x = graph_add(g, x, w1(g, q->patch_b));
    graph_tensor *ff[2];
    for (int s = 0; s < 2; s++) {
        ff[s] = graph_tensor_new_1d(g, TSR_DTYPE_F32, hd / 2);
        if (ff[s]) {
            graph_tensor_set_name(ff[s], "rope-2d-factors-%c", s ? 'w' : 'h');
            graph_tensor_bind(ff[s], GRAPH_WEIGHT, -1, NULL, 0, q->rope_ff + s * (hd / 2));
        }
    }
    const float kq_scale = 1.0f / sqrtf((float)hd);
    for (int il = 0; il < q->n_layer; il++) {
        const qv_layer *L = &q->layers[il];
        graph_tensor *h = norm_of(q, g, &L->ln1, x);
        graph_tensor *qq = rope_2d(g, graph_reshape_3d(g, lin(g, &L->q, h), hd, H, N), io->pos_h, io->pos_w, ff[0], ff[1]);
        graph_tensor *kk = rope_2d(g, graph_reshape_3d(g, lin(g, &L->k, h), hd, H, N), io->pos_h, io->pos_w, ff[0], ff[1]);
        graph_tensor *vv = graph_reshape_3d(g, lin(g, &L->v, h), hd, H, N);
        qq = graph_permute(g, qq, 0, 2, 1, 3); /* [hd, N, H] */
        kk = graph_permute(g, kk, 0, 2, 1, 3);
        vv = graph_permute(g, vv, 0, 2, 1, 3);
        graph_tensor *a = windowed(q, il) && w->n > 1 ? window_attn(g, qq, kk, vv, w, 0, w->n, kq_scale)
                                                       : graph_flash_attn(g, qq, kk, vv, NULL, kq_scale); /* [hd, H, N] */
        x = graph_add(g, x, lin(g, &L->o, graph_reshape_2d(g, a, D, N)));
        h = norm_of(q, g, &L->ln2, x);
        if (q->v25) {
            h = lin(g, &L->down, graph_swiglu(g, lin(g, &L->gate, h), lin(g, &L->up, h)));
        } else { /* quick GELU, x * sigmoid(1.702 x) */
            h = lin(g, &L->up, h);
            h = graph_scale(g, graph_silu(g, graph_scale(g, h, 1.702f, 0.0f)), 1.0f / 1.702f, 0.0f);
            h = lin(g, &L->down, h);
        }
        x = graph_tensor_set_name(graph_add(g, x, h), "vit-out-%d", il);
    }
    /* the merger: each patch normalised, each 2x2 block of patches one row */
    x = norm_of(q, g, &q->post_ln, x);
    x = graph_reshape_2d(g, x, 4 * D, N / 4);
    x = lin(g, &q->mm2, graph_gelu(g, lin(g, &q->mm0, x)));
    io->out = graph_set_output(graph_tensor_set_name(x, "mm-out"));
    if (graph_check(g) != 0) {
        error_wrap("%s: the encoder graph", q->path);
        graph_free(g);
        return NULL;
    }
    return g;
}

/* img into W x H pixels as libmtmd does it (measured on a 300x180 image
 * sized 308x168: worst row cosine 0.9999999 against 0.24 for a stretch):
 * scaled to fit keeping its aspect, each side truncated (Pillow's bicubic;
 * 0.99985 with the kernel not widened, 0.9993 bilinear), centred, the rest
 * black. */
static int fit_pad(const media_image *img, uint8_t *rs, int W, int H) {
    const double sc = fmin((double)W / img->nx, (double)H / img->ny);
    int rw = (int)(img->nx * sc), rh = (int)(img->ny * sc);
    rw = rw < 1 ? 1 : rw > W ? W : rw;
    rh = rh < 1 ? 1 : rh > H ? H : rh;
    static const uint8_t black[3] = {0, 0, 0};
    return clip_fit_pad(img, rs, W, H, rw, rh, black, CLIP_RESIZE_BICUBIC);
}

int clip_qwen2vl_encode(clip_qwen2vl *q, clip_run *run, const media_image *img, float *out) {
    int32_t gx, gy;
    clip_qwen2vl_grid(q, img->nx, img->ny, &gx, &gy);
    const int p = q->patch, c = p * QV_MERGE, W = gx * c, Hh = gy * c, px_w = gx * QV_MERGE;
    const int64_t N = (int64_t)gx * gy * 4, P = (int64_t)p * p * 3;
    int rc = -1;
    graph *g = NULL;
    qv_windows win = {0};
    clip_timing tm;
    clip_timing_mark(&tm, CLIP_T_START);
    uint8_t *rs = malloc((size_t)W * Hh * 3);
    if (!rs) return error_set("%s: out of memory for a %dx%d image", q->path, W, Hh);
    if (fit_pad(img, rs, W, Hh) != 0) goto done;
    /* windows of window_size pixels over the cells (Qwen2-VL: one window,
     * no block attends within windows) */
    const int wc = q->v25 ? q->window / c : (gx > gy ? gx : gy);
    if (windows_make(gx, gy, wc, &win) != 0) {
        error_set("%s: out of memory for the windows of %dx%d cells", q->path, gx, gy);
        goto done;
    }
    clip_timing_mark(&tm, CLIP_T_PREPROCESS);
    qv_inputs io;
    if (!(g = build(q, N, &win, &io))) goto done;
    clip_timing_mark(&tm, CLIP_T_BUILD);
    bool same = q->s && q->s_n == run->n_devices && run->n_devices <= 8;
    for (int i = 0; same && i < run->n_devices; i++) same = q->s_devs[i] == run->devices[i];
    if (!same) {
        if (q->s) sched_free(q->s);
        q->s = sched_new(run->devices, run->n_devices, &(sched_params){.n_threads = run->n_threads});
        q->s_n = run->n_devices > 8 ? 8 : run->n_devices;
        for (int i = 0; i < q->s_n; i++) q->s_devs[i] = run->devices[i];
    } else {
        sched_set_n_threads(q->s, run->n_threads);
    }
    if (!q->s || sched_alloc(q->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_ALLOC);
    if (run->explain && host_log_wanted()) {
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        if (fp) {
            fprintf(fp, "tessera: placement of the image encoder graph (%s, %dx%d cells):\n", q->projector, gx, gy);
            sched_explain(q->s, fp);
            if (fclose(fp) == 0) host_log_text(TESSERA_LOG_INFO, text);
            free(text);
        }
    }
    /* patch k of the j-th cell taken (k = dy * 2 + dx, the 2x2 block in row
     * order) is column j * 4 + k; its elements (ch, ky, kx) normalised */
    float *dst = io.patches->t.data;
    int32_t *ph = io.pos_h->t.data, *pw = io.pos_w->t.data;
    for (int64_t i = 0; i < N; i++) {
        const int64_t cell = win.cell[i / 4], k = i % 4;
        const int py = (int)(cell / gx) * QV_MERGE + (int)(k / 2), pxx = (int)(cell % gx) * QV_MERGE + (int)(k % 2);
        ph[i] = py;
        pw[i] = pxx;
        float *col = dst + (size_t)i * (size_t)P;
        for (int ch = 0; ch < 3; ch++)
            for (int ky = 0; ky < p; ky++)
                for (int kx = 0; kx < p; kx++) {
                    const uint8_t v = rs[((size_t)(py * p + ky) * (size_t)(px_w * p) + (size_t)(pxx * p + kx)) * 3 + ch];
                    col[(ch * p + ky) * p + kx] = ((float)v / 255.0f - q->mean[ch]) / q->std[ch];
                }
    }
    clip_timing_mark(&tm, CLIP_T_PATCHIFY);
    if (sched_compute(q->s, g) != 0) goto done;
    clip_timing_mark(&tm, CLIP_T_COMPUTE);
    run->encode_ms = clip_timing_end(&tm);
    /* the rows back in row order of the cells */
    const float *r = io.out->t.data;
    for (int64_t j = 0; j < (int64_t)gx * gy; j++)
        for (int64_t e = 0; e < q->n_out; e++) {
            const float v = r[j * q->n_out + e];
            if (!isfinite(v)) {
                error_set("%s: the encoder produced a non-finite value (row %d)", q->path, win.cell[j]);
                goto done;
            }
            out[(int64_t)win.cell[j] * q->n_out + e] = v;
        }
    rc = 0;
done:
    graph_free(g);
    free(win.first);
    free(win.cell);
    free(rs);
    return rc;
}
