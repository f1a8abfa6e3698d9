/* clip_idefics3: SmolVLM / Idefics3's projector, tiles and their text. */
#include "mtmd/clip_idefics3.h"
#include "mtmd/clip_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "util/error.h"

int idefics3_load(idefics3 *p, const gguf_file *f, const char *path, int32_t image_size, int32_t patch,
                  int32_t n_embd, int32_t n_embd_text) {
    int64_t v;
    memset(p, 0, sizeof *p);
    p->image_size = image_size;
    p->side = image_size / patch;
    if (gguf_get_int(f, "clip.vision.projector.scale_factor", &v) != 0) return error_wrap("%s", path);
    if (v < 1 || v > p->side || p->side % v)
        return error_set("%s: key clip.vision.projector.scale_factor = %lld does not divide the %d patches a side",
                         path, (long long)v, p->side);
    p->scale = (int32_t)v;
    /* the longest side before tiling; without the key, no tiling beyond one */
    p->preproc = image_size;
    if (gguf_find_key(f, "clip.vision.preproc_image_size") >= 0) {
        if (gguf_get_int(f, "clip.vision.preproc_image_size", &v) != 0) return error_wrap("%s", path);
        if (v < image_size || v > 16 * (int64_t)image_size)
            return error_set("%s: key clip.vision.preproc_image_size = %lld is not in [%d, %d] (the encoder's "
                             "size to 16 tiles a side)",
                             path, (long long)v, image_size, 16 * image_size);
        p->preproc = (int32_t)v;
    }
    const gguf_tensor_info *fc = gguf_find_tensor(f, "mm.model.fc.weight");
    if (!fc) return error_set("%s: tensor mm.model.fc.weight is missing", path);
    const int64_t in = (int64_t)n_embd * p->scale * p->scale;
    if (fc->ne[0] != in || fc->ne[1] < 1 || fc->ne[2] != 1 || fc->ne[3] != 1)
        return error_set("%s: tensor mm.model.fc.weight has shape [%lld, %lld, %lld, %lld], expected [%lld, n_out] "
                         "(width %d x scale factor %d squared)",
                         path, (long long)fc->ne[0], (long long)fc->ne[1], (long long)fc->ne[2],
                         (long long)fc->ne[3], (long long)in, n_embd, p->scale);
    if (fc->dtype != TSR_DTYPE_F32 && fc->dtype != TSR_DTYPE_F16)
        return error_set("%s: tensor mm.model.fc.weight has type %s, expected F32 or F16", path,
                         tsr_dtype_name(fc->dtype));
    if (gguf_find_tensor(f, "mm.model.fc.bias"))
        return error_set("%s: tensor mm.model.fc.bias: idefics3's projector has no bias", path);
    p->fc = fc;
    p->n_out = (int32_t)fc->ne[1];
    if (clip_file_check_width(path, "mm.model.fc.weight", p->n_out, n_embd_text) != 0) return -1;
    return 0;
}

/* An nx x ny image with its longer side L, the other in proportion,
 * truncated, then rounded up to even, as HF's Idefics3 processor and
 * llama.cpp do (measured: 300x180 fits 192 as 192x116, 100x170 as 112x192;
 * rounding to nearest gives a worst row cosine of 0.9992). */
static void fit(int32_t nx, int32_t ny, int32_t L, int32_t *w, int32_t *h) {
    const double aspect = (double)nx / ny;
    *w = nx >= ny ? L : (int32_t)(L * aspect);
    *h = nx >= ny ? (int32_t)(L / aspect) : L;
    if (nx >= ny) *h += *h % 2;
    else *w += *w % 2;
    if (*w < 1) *w = 1;
    if (*h < 1) *h = 1;
}

/* The grid: the image fitted to preproc, each side rounded up to a
 * multiple of the encoder's size, gx x gy tiles of it. */
static void grid(const idefics3 *p, int32_t nx, int32_t ny, int32_t *gx, int32_t *gy) {
    int32_t w, h;
    fit(nx, ny, p->preproc, &w, &h);
    *gx = (w + p->image_size - 1) / p->image_size;
    *gy = (h + p->image_size - 1) / p->image_size;
}

/* img fitted to L, then stretched to w x h: two resizes (Lanczos, widened
 * when shrinking, as Pillow's), as llama.cpp does: one resize straight to
 * w x h gives a worst row cosine of 0.9908 against its embeddings, two
 * 0.9999998 (a 300x180 image to a 64x64 tile). */
static int fit_then_stretch(const media_image *img, int32_t L, int32_t w, int32_t h, uint8_t *out) {
    int32_t fw, fh;
    fit(img->nx, img->ny, L, &fw, &fh);
    uint8_t *mid = malloc((size_t)fw * fh * 3);
    int rc = !mid ? error_set("image: out of memory resizing to %dx%d", fw, fh)
                  : clip_resample_rgb(img->rgb, img->nx, img->ny, mid, fw, fh, CLIP_RESIZE_LANCZOS) != 0 ||
                            clip_resample_rgb(mid, fw, fh, out, w, h, CLIP_RESIZE_LANCZOS) != 0
                        ? -1
                        : 0;
    free(mid);
    return rc;
}

int32_t idefics3_n_tiles(const idefics3 *p, int32_t nx, int32_t ny) {
    int32_t gx, gy;
    grid(p, nx, ny, &gx, &gy);
    return gx * gy + 1;
}

int32_t idefics3_tile_rows(const idefics3 *p) {
    const int32_t t = p->side / p->scale;
    return t * t;
}

static void piece(clip_text *t, bool lookup, const char *text) {
    if (t->n == 4) return;
    snprintf(t->piece[t->n], sizeof t->piece[t->n], "%s", text);
    t->lookup[t->n++] = lookup;
}

void idefics3_tile_text(const idefics3 *p, int32_t nx, int32_t ny, int32_t t, clip_text *before,
                        clip_text *after) {
    int32_t gx, gy;
    grid(p, nx, ny, &gx, &gy);
    memset(before, 0, sizeof *before);
    memset(after, 0, sizeof *after);
    if (t >= gx * gy) { /* the global view */
        piece(before, true, "\n\n");
        piece(before, true, "<fake_token_around_image>");
        piece(before, true, "<global-img>");
        piece(after, true, "<fake_token_around_image>");
        return;
    }
    char s[64];
    snprintf(s, sizeof s, "<fake_token_around_image><row_%d_col_%d>", t / gx + 1, t % gx + 1);
    piece(before, false, s);
    if (t % gx == gx - 1 && t / gx < gy - 1) piece(after, true, "\n");
}

/* The resized image's key: FNV-1a's step over an image's size and its
 * pixels taken 8 bytes at a time (each tile asks for it: byte by byte,
 * a chain of dependent multiplies per byte, it cost 1.5 ms per encode of
 * a 300x180 image and most of a second for a 12-megapixel photo's 17). */
static uint64_t image_key(const media_image *img) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)img->nx << 32 ^ (uint64_t)img->ny;
    const size_t n = (size_t)img->nx * (size_t)img->ny * 3;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, img->rgb + i, sizeof v);
        h = (h ^ v) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ img->rgb[i]) * 0x100000001b3ull;
    return h;
}

int idefics3_tile_image(idefics3 *p, const media_image *img, int32_t t, uint8_t *out) {
    const int32_t S = p->image_size;
    int32_t gx, gy;
    grid(p, img->nx, img->ny, &gx, &gy);
    if (t < 0 || t > gx * gy) return error_set("image: tile %d of %d does not exist", t, gx * gy + 1);
    const int32_t w = gx * S, h = gy * S;
    const uint64_t key = image_key(img);
    if (!p->big || p->big_key != key || p->big_w != w || p->big_h != h) { /* once for all the tiles */
        free(p->big);
        p->big = malloc((size_t)w * h * 3);
        if (!p->big) return error_set("image: out of memory resizing to %dx%d", w, h);
        if (fit_then_stretch(img, p->preproc, w, h, p->big) != 0) {
            free(p->big);
            p->big = NULL;
            return -1;
        }
        p->big_key = key, p->big_w = w, p->big_h = h;
    }
    /* the global view: the tiles' image resized whole (worst row cosine
     * 0.9999998 against llama.cpp's; 0.990 from the image itself) */
    if (t == gx * gy) return clip_resample_rgb(p->big, w, h, out, S, S, CLIP_RESIZE_LANCZOS);
    const int32_t x0 = (t % gx) * S, y0 = (t / gx) * S;
    for (int32_t y = 0; y < S; y++)
        memcpy(out + (size_t)y * S * 3, p->big + ((size_t)(y0 + y) * w + x0) * 3, (size_t)S * 3);
    return 0;
}

void idefics3_free(idefics3 *p) {
    if (p) free(p->big);
    free(p);
}

graph_tensor *idefics3_project(const idefics3 *p, graph *g, graph_tensor *x, graph_tensor *fc) {
    /* x [D, side * side], patch (py, px) at column py * side + px. With
     * px = j s + a and py = i s + b, x is [D s, ts, s, ts] = (a D + d, j, b,
     * i); swapping j and b gives row (i, j) of ts x ts the features
     * (b s + a) D + d, the square's patches in row order, as HF's
     * pixel_shuffle lays them out. */
    const int64_t s = p->scale, ts = p->side / p->scale, D = x ? x->t.ne[0] : 0;
    x = graph_reshape_4d(g, x, D * s, ts, s, ts);
    x = graph_cont(g, graph_permute(g, x, 0, 2, 1, 3));
    x = graph_reshape_2d(g, x, D * s * s, ts * ts);
    return graph_mul_mat(g, fc, x); /* [n_out, ts * ts] */
}
