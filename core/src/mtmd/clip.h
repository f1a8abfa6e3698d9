/*
 * clip — the vision encoder and projector of an mmproj file (llama.cpp's
 * multimodal projector format), run as a Tessera graph on the scheduler so
 * every plugin can take it.
 *
 * The file is read with the same validation as every GGUF (gguf/), then its
 * `clip.*` keys and `v.*`/`mm.*` tensors are checked against each other:
 * every shape follows from the keys, and an error names the key or tensor.
 *
 * Families (clip.projector_type):
 *   mlp   LLaVA-1.5 / MobileVLM style: CLIP ViT (patch convolution, class
 *         token, learned positions, pre-norm, quick-GELU or GELU FFN), the
 *         class token dropped, then mm.0 -> GELU -> mm.2 onto the text model.
 *   gemma3 Gemma 3: SigLIP ViT (patch convolution, learned positions, no
 *         class token, GELU FFN, every block, post-layernorm), a 4x4
 *         average pool of the patch grid, Gemma's RMS norm
 *         (mm.soft_emb_norm) and mm.input_projection onto the text model.
 *   qwen2vl_merger, qwen2.5vl_merger  Qwen2-VL / Qwen2.5-VL: dynamic
 *         resolution, 2-D rope, the 2x2 patch merger (clip_qwen2vl.h).
 *   idefics3 SmolVLM / Idefics3: the same SigLIP ViT, a pixel shuffle and
 *         mm.model.fc; images split into tiles plus a global view
 *         (clip_idefics3.h).
 *
 * Preprocessing follows the file: the image is padded to a square (mlp: the
 * mean colour, bicubic; gemma3: black, bilinear, as measured against
 * llama.cpp), resized to clip.vision.image_size and normalised with
 * clip.vision.image_mean / image_std.
 */
#ifndef TESSERA_MTMD_CLIP_H
#define TESSERA_MTMD_CLIP_H

#include <time.h>

#include <stdbool.h>
#include <stdint.h>

#include "host/host.h"
#include "media/media.h"

typedef struct clip_model clip_model;

/* Load and validate path. n_embd_text (0: unchecked) must equal the
 * projection's output width. NULL with error_get() naming the key or tensor. */
clip_model *clip_model_load(const char *path, int32_t n_embd_text);
void clip_model_free(clip_model *c);

const char *clip_projector_type(const clip_model *c);
int32_t clip_n_embd_out(const clip_model *c);
int32_t clip_image_size(const clip_model *c);

/* Text around each image as llama.cpp's libmtmd puts it (tokenized apart
 * from the prompt's text, special tokens parsed), "" for none: gemma3's
 * <start_of_image> and <end_of_image>, measured on its tokenized chunks. */
const char *clip_media_begin(const clip_model *c);
const char *clip_media_end(const clip_model *c);
/* The image's rows attend to each other both ways in the text model
 * (gemma3, as libmtmd's mtmd_decode_use_non_causal says). */
bool clip_non_causal(const clip_model *c);

/* The embedding rows an image costs, all its tiles together (independent
 * of its size for fixed resolution families). */
int32_t clip_n_tokens(const clip_model *c, int32_t nx, int32_t ny);

/* The grid of those rows (across, down; row order): a dynamic-resolution
 * family's (qwen2vl), else n_tokens x 1. */
void clip_grid(const clip_model *c, int32_t nx, int32_t ny, int32_t *gx, int32_t *gy);


/* Tiles: libmtmd cuts some families' images into several (idefics3), each
 * its own media chunk with text around it; others are one tile, with
 * clip_media_begin / clip_media_end around it. */
int32_t clip_n_tiles(const clip_model *c, int32_t nx, int32_t ny);
/* The embedding rows tile t costs. */
int32_t clip_tile_n_tokens(const clip_model *c, int32_t nx, int32_t ny, int32_t t);
/* The text around tile t: pieces tokenized apart (special tokens parsed),
 * or where lookup is set, one token named exactly. */
typedef struct clip_text {
    int n;
    char piece[4][64];
    bool lookup[4];
} clip_text;
void clip_tile_text(const clip_model *c, int32_t nx, int32_t ny, int32_t t, clip_text *before, clip_text *after);

/* The normalised input the encoder sees: F32 [3][size][size] planes, from
 * an RGB8 image (fitted into a square keeping its aspect, padded, (x/255 -
 * mean) / std). */
int clip_preprocess(const clip_model *c, const media_image *img, float *out);

/* Resample RGB8 src nx x ny to dst ox x oy as Pillow does for 8-bit images:
 * a pass per axis (horizontal first) in fixed point rounded to 8 bits, the
 * kernel widened by the scale when shrinking: bicubic (Keys, a = -0.5),
 * bilinear or Lanczos-3 (which family takes which: tests/data/mm/README.md). */
typedef enum clip_resize_kind { CLIP_RESIZE_BICUBIC, CLIP_RESIZE_BILINEAR, CLIP_RESIZE_LANCZOS } clip_resize_kind;
int clip_resample_rgb(const uint8_t *src, int nx, int ny, uint8_t *dst, int ox, int oy, clip_resize_kind kind);

/* img resized to rw x rh (at most W x H) and centred in W x H (offsets
 * rounded down), the rest fill; an image of W x H is copied as it is. */
int clip_fit_pad(const media_image *img, uint8_t *out, int W, int H, int rw, int rh, const uint8_t fill[3],
                 clip_resize_kind kind);

/* Encode img on the devices (tried in order): writes clip_n_tokens rows of
 * clip_n_embd_out floats to out (clip_encode_tile: tile t's rows). */
typedef struct clip_run {
    host_device *const *devices;
    int n_devices;
    int32_t n_threads;
    bool explain;       /* log the placement of the encoder graph */
    double encode_ms;   /* set by clip_encode: the graph's time */
} clip_run;
int clip_encode(clip_model *c, clip_run *run, const media_image *img, float *out);
int clip_encode_tile(clip_model *c, clip_run *run, const media_image *img, int32_t t, float *out);

/* An encode's phases (wall clock), and the process's CPU time over the
 * compute: clip_timing_mark at the end of each phase (at CLIP_T_START
 * first), then clip_timing_end, which returns the compute's wall ms and
 * with TESSERA_CLIP_TIMING=1 prints them all on stderr (the CPU time is
 * what a busy machine does not inflate as it does the wall time). */
enum { CLIP_T_START, CLIP_T_PREPROCESS, CLIP_T_BUILD, CLIP_T_ALLOC, CLIP_T_PATCHIFY, CLIP_T_COMPUTE, CLIP_T_N };
typedef struct clip_timing {
    struct timespec t[CLIP_T_N], cpu[2];
} clip_timing;
void clip_timing_mark(clip_timing *tm, int phase);
double clip_timing_end(const clip_timing *tm);

#endif
