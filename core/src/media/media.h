/*
 * media — decoding the images and sounds a multimodal prompt carries.
 *
 * Every input is hostile: a file that is truncated, larger than the limits,
 * or whose header lies about what follows is one error naming the file and
 * the part at fault, never a crash. Decoding is done by the libraries every
 * distribution keeps patched (libjpeg-turbo, libpng, libwebp; stb_image for
 * the two legacy formats, BMP and the first frame of a GIF; libsndfile for
 * WAV, FLAC, MP3 and Ogg; libsamplerate to resample). A library missing at
 * build time turns its format into an error saying so (media_formats()).
 *
 * Images come out as packed RGB8 (alpha dropped, as llama.cpp's loader
 * does); sounds as 16 kHz mono float in [-1, 1].
 */
#ifndef TESSERA_MEDIA_H
#define TESSERA_MEDIA_H

#include <stddef.h>
#include <stdint.h>

typedef enum media_kind {
    MEDIA_UNKNOWN = 0,
    MEDIA_IMAGE,
    MEDIA_AUDIO
} media_kind;

typedef struct media_limits {
    int32_t max_side;      /* pixels per side (default 8192)             */
    int64_t max_pixels;    /* width * height (default 8192 * 8192)       */
    double max_seconds;    /* audio duration (default 600)               */
} media_limits;

/* The defaults above. */
media_limits media_limits_default(void);

typedef struct media_image {
    int32_t nx, ny;
    uint8_t *rgb; /* nx * ny * 3 bytes, rows top to bottom */
} media_image;

typedef struct media_audio {
    int64_t n_samples;
    float *pcm;       /* n_samples at MEDIA_AUDIO_RATE, mono */
} media_audio;

enum { MEDIA_AUDIO_RATE = 16000 };

/* What the first bytes say the data is; format (may be NULL) gets its name
 * ("jpeg", "png", "webp", "bmp", "gif", "wav", "flac", "mp3", "ogg"). */
media_kind media_sniff(const void *data, size_t size, const char **format);

/* Decode an image. label names the data in errors (a path, "image 2").
 * limits may be NULL (the defaults). 0, or -1 with error_get() set. */
int media_image_decode(const void *data, size_t size, const char *label,
                       const media_limits *limits, media_image *out);
void media_image_free(media_image *img);

/* Decode a sound, mix it to mono and resample it to 16 kHz. */
int media_audio_decode(const void *data, size_t size, const char *label,
                       const media_limits *limits, media_audio *out);
void media_audio_free(media_audio *a);

/* Read a whole file (at most max_bytes) into *data (free()). */
int media_read_file(const char *path, size_t max_bytes, void **data, size_t *size);

/* The formats this build decodes, e.g. "jpeg png webp bmp gif wav flac mp3". */
const char *media_formats(void);

#endif
