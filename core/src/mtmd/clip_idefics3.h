/*
 * clip_idefics3 — SmolVLM / Idefics3 (clip.projector_type "idefics3"), the
 * parts clip.c does not share with the other SigLIP family:
 *
 *   - the projector: a pixel shuffle (each s x s square of patches, s =
 *     clip.vision.projector.scale_factor, becomes one row s*s times as
 *     wide, its patches in row order) and one linear map mm.model.fc (no
 *     bias) onto the text model;
 *   - image splitting as llama.cpp's libmtmd does it: the image resized so
 *     its longer side is clip.vision.preproc_image_size, each side then
 *     rounded up to a multiple of the encoder's size, cut into a grid of
 *     tiles of the encoder's size (row order), then the whole image resized
 *     to the encoder's size (the global view) as the last tile;
 *   - the text libmtmd puts around each tile, measured on its chunks:
 *     "<fake_token_around_image><row_R_col_C>" before tile (R, C) (text,
 *     tokenized), the token "\n" after each row but the last (one token: an
 *     SPM vocabulary's byte token, no space prefix), the tokens "\n\n",
 *     "<fake_token_around_image>", "<global-img>" before the global view
 *     and "<fake_token_around_image>" after it.
 */
#ifndef TESSERA_MTMD_CLIP_IDEFICS3_H
#define TESSERA_MTMD_CLIP_IDEFICS3_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "graph/graph.h"
#include "media/media.h"
#include "mtmd/clip.h"

typedef struct idefics3 {
    int32_t image_size; /* the encoder's side in pixels (a tile's) */
    int32_t side;       /* patches a side */
    int32_t scale;      /* the pixel shuffle's side in patches */
    int32_t preproc;    /* the longer side an image is resized to before tiling */
    int32_t n_out;      /* the text model's width */
    const gguf_tensor_info *fc; /* mm.model.fc.weight [n_embd * scale^2, n_out] */
    uint8_t *big;       /* the last image resized for its tiles, keyed by its content */
    uint64_t big_key;
    int32_t big_w, big_h;
} idefics3;

/* Read the keys and the projector of f (path names it in errors) for an
 * encoder of n_embd; n_embd_text (0: unchecked) must be the output width. */
int idefics3_load(idefics3 *p, const gguf_file *f, const char *path, int32_t image_size, int32_t patch,
                  int32_t n_embd, int32_t n_embd_text);

/* The tiles of an nx x ny image: the grid's, then the global view. */
int32_t idefics3_n_tiles(const idefics3 *p, int32_t nx, int32_t ny);
/* The rows one tile costs: (side / scale)^2. */
int32_t idefics3_tile_rows(const idefics3 *p);

/* The text around tile t (clip_text in clip.h). */
void idefics3_tile_text(const idefics3 *p, int32_t nx, int32_t ny, int32_t t, clip_text *before,
                        clip_text *after);

/* Tile t of img as the encoder sees it: out (image_size^2 RGB8, the
 * caller's). The image resized for the grid is kept for the next tile. */
int idefics3_tile_image(idefics3 *p, const media_image *img, int32_t t, uint8_t *out);
/* Free p and what it keeps (p was malloc'd; NULL is fine). */
void idefics3_free(idefics3 *p);

/* The projector on the encoder's output x [n_embd, side * side]: the pixel
 * shuffle, then fc (its graph tensor) -> [n_out, tile rows]. */
graph_tensor *idefics3_project(const idefics3 *p, graph *g, graph_tensor *x, graph_tensor *fc);

#endif
