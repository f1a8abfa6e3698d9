/*
 * clip_file — the checks every mmproj family's loader makes on its file
 * (clip.c, clip_qwen2vl.c, clip_audio.c): an integer key within a range, a
 * key of three floats, a tensor of the expected shape and type. Each error
 * names the file and the key or tensor, as every GGUF error does.
 */
#ifndef TESSERA_MTMD_CLIP_FILE_H
#define TESSERA_MTMD_CLIP_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"

/* Integer key in [lo, hi] into *out; an absent optional key leaves *out. */
int clip_file_key_int(const gguf_file *f, const char *path, const char *key, bool optional, int32_t lo, int32_t hi,
                      int32_t *out);
/* Three finite float32 values (an image mean or std). */
int clip_file_key_f32x3(const gguf_file *f, const char *path, const char *key, float *out);
/* Tensor name of shape ne (unused dims 1), F32 (or F16 where f16_ok);
 * *out NULL when an optional one is absent. */
int clip_file_tensor(const gguf_file *f, const char *path, const char *name, bool optional, bool f16_ok, int64_t ne0,
                     int64_t ne1, int64_t ne2, int64_t ne3, const gguf_tensor_info **out);

/* The projector's output width n_out (from tensor name) against the text
 * model's n_embd_text (0: unchecked): another model's mmproj is an error. */
int clip_file_check_width(const char *path, const char *name, int32_t n_out, int32_t n_embd_text);

#endif
