/*
 * clip_qwen2vl — the Qwen2-VL and Qwen2.5-VL encoders (clip.projector_type
 * qwen2vl_merger, qwen2.5vl_merger), behind clip.c's functions.
 *
 * Dynamic resolution: an image becomes a grid of 28 x 28 pixel cells (2 x 2
 * patches of 14), each side rounded to the nearest count, scaled up to at
 * least 8 and down to at most 4096 cells keeping its aspect, as llama.cpp's
 * libmtmd sizes it; the image is scaled (bicubic) to fit that many pixels
 * keeping its aspect, centred and padded with black, as libmtmd does
 * (measured: tests/data/mm/README.md). The ViT has no
 * learned positions: q and k turn by a 2-D rope (the first half of the
 * rotated pairs by the patch's row, the second by its column); Qwen2.5-VL
 * attends within windows of clip.vision.window_size pixels but in every
 * clip.vision.n_wa_pattern-th block, with RMS norms and a SiLU-gated FFN.
 * The merger normalises each patch (v.post_ln), joins each 2 x 2 block of
 * patches into one row and maps it by mm.0, GELU, mm.2 onto the text model:
 * one row per 28 x 28 cell, in row order.
 */
#ifndef TESSERA_MTMD_CLIP_QWEN2VL_H
#define TESSERA_MTMD_CLIP_QWEN2VL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "mtmd/clip.h"

typedef struct clip_qwen2vl clip_qwen2vl;

/* Whether projector names a family of this file. */
bool clip_qwen2vl_is(const char *projector);
/* Read f's keys and tensors (f stays the caller's). NULL with an error
 * naming the key or tensor. */
clip_qwen2vl *clip_qwen2vl_load(gguf_file *f, const char *path, const char *projector, int32_t n_embd_text);
void clip_qwen2vl_free(clip_qwen2vl *q);
int32_t clip_qwen2vl_n_embd_out(const clip_qwen2vl *q);
/* The grid of rows an nx x ny image becomes (cells across, down). */
void clip_qwen2vl_grid(const clip_qwen2vl *q, int32_t nx, int32_t ny, int32_t *gx, int32_t *gy);
int clip_qwen2vl_encode(clip_qwen2vl *q, clip_run *run, const media_image *img, float *out);

#endif
