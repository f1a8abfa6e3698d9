/*
 * clip_audio — the audio encoders of mmproj files, run as Tessera graphs on
 * the scheduler (as clip.h's vision encoders).
 *
 * Families (clip.projector_type, or clip.audio.projector_type):
 *   ultravox  Whisper's encoder (two 1-D convolutions of width 3 with GELU,
 *             the second of stride 2; learned positions; pre-norm blocks;
 *             a final layer norm) and Ultravox's projector: frames stacked
 *             clip.audio.projector.stack_factor at a time (zero padded),
 *             RMS norm, linear, SwiGLU, RMS norm, linear onto the text model.
 *   voxtral   the same Whisper encoder, its frames averaged in pairs before
 *             the final norm (1500 -> 750 a window), and Voxtral's
 *             projector: frames stacked (zero padded), linear, GELU,
 *             linear; "[BEGIN_AUDIO]" before the sound in the prompt.
 *
 * Sound (16 kHz mono) becomes Whisper's log-mel features (mel.h), padded
 * with silence to a multiple of 30 s and cut into 30 s windows (3000
 * frames) as llama.cpp's libmtmd cuts it: each window is one chunk of the
 * prompt and costs the same number of rows (1500 frames after the
 * convolutions, or 750 pooled, stacked).
 */
#ifndef TESSERA_MTMD_CLIP_AUDIO_H
#define TESSERA_MTMD_CLIP_AUDIO_H

#include <stdbool.h>
#include <stdint.h>

#include "mtmd/clip.h"

typedef struct clip_audio clip_audio;

/* 1 when path is an mmproj with an audio encoder and no vision encoder, 0
 * when not (or not readable: clip_model_load then says why). */
int clip_audio_probe(const char *path);

/* Load and validate path; n_embd_text (0: unchecked) must equal the
 * projector's output width. NULL with error_get() naming the key or tensor. */
clip_audio *clip_audio_load(const char *path, int32_t n_embd_text);
void clip_audio_free(clip_audio *a);

const char *clip_audio_projector_type(const clip_audio *a);
int32_t clip_audio_n_embd_out(const clip_audio *a);
int32_t clip_audio_n_mel(const clip_audio *a);

/* The text libmtmd puts before a sound's first window (tokenized with
 * special tokens parsed), or NULL. */
const char *clip_audio_text_before(const clip_audio *a);

/* The 30 s windows n_samples (16 kHz) is cut into (at least 1). */
int32_t clip_audio_n_chunks(const clip_audio *a, int64_t n_samples);
/* The embedding rows one window costs. */
int32_t clip_audio_n_tokens(const clip_audio *a);

/* Window `chunk`'s log-mel features [n_mel][frames] (malloc'd): cut from
 * the whole sound's, which are kept for the next window. */
float *clip_audio_mel(clip_audio *a, const float *pcm, int64_t n_samples, int32_t chunk, int64_t *n_frames);

/* Encode window `chunk` of pcm: clip_audio_n_tokens rows of
 * clip_audio_n_embd_out floats into out. */
int clip_audio_encode(clip_audio *a, clip_run *run, const float *pcm, int64_t n_samples, int32_t chunk, float *out);

#endif
