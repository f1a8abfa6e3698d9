/*
 * media: every image format to the same pixels (lossless files match the
 * pattern exactly, JPEG within its error), sounds written by libsndfile in
 * WAV, FLAC and MP3 back as 16 kHz mono, and the hostile cases: every
 * truncation of every file, headers that lie about the size, images over the
 * limits, one kind given for the other. Each is an error naming the part.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "media/media.h"
#include "media/media_config.h"
#include "util/error.h"

#if TSR_HAVE_SNDFILE
#include <sndfile.h>
#endif

static const char *data_dir(void) { return MEDIA_DATA_DIR; }

static int load(const char *name, void **data, size_t *size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", data_dir(), name);
    return media_read_file(path, 1 << 20, data, size);
}

/* The pattern tests/data/media/grad.* hold (made by Pillow, see README). */
static void expect_pattern(const media_image *im, int tol, const char *what) {
    EXPECT(im->nx == 24 && im->ny == 16, "%s: %dx%d", what, im->nx, im->ny);
    if (im->nx != 24 || im->ny != 16) return;
    int worst = 0;
    for (int y = 0; y < 16; y++)
        for (int x = 0; x < 24; x++) {
            int want[3] = {x * 10, y * 15, (x / 4 + y / 4) % 2 ? 128 : 20};
            for (int c = 0; c < 3; c++) {
                int d = abs(im->rgb[(y * 24 + x) * 3 + c] - want[c]);
                if (d > worst) worst = d;
            }
        }
    EXPECT(worst <= tol, "%s: worst pixel error %d > %d", what, worst, tol);
}

/* A build without one of the image libraries refuses its format (tested
 * by media_formats()'s users); these tests need them all. */
static bool all_image_formats(void) {
    const char *want[] = {"jpeg", "png", "webp", "bmp"};
    for (int i = 0; i < 4; i++)
        if (!strstr(media_formats(), want[i])) {
            harness_skip("built without %s support (scripts/setup.sh installs the libraries)", want[i]);
            return false;
        }
    return true;
}

TEST(images_decode) {
    if (!all_image_formats()) return;
    static const struct { const char *file; int tol; } cases[] = {
        {"grad.png", 0}, {"grad-rgba.png", 0}, {"grad.bmp", 0}, {"grad.webp", 0}, {"grad.jpg", 12},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *d;
        size_t n;
        REQUIRE(load(cases[i].file, &d, &n) == 0, "%s", error_get());
        media_image im;
        int rc = media_image_decode(d, n, cases[i].file, NULL, &im);
        EXPECT(rc == 0, "%s: %s", cases[i].file, error_get());
        if (rc == 0) expect_pattern(&im, cases[i].tol, cases[i].file);
        media_image_free(&im);
        free(d);
    }
    /* GIF is palette-quantised and grey is one channel: the shape, and grey's R=G=B */
    const char *more[] = {"grad.gif", "grad-grey.png"};
    for (int i = 0; i < 2; i++) {
        void *d;
        size_t n;
        REQUIRE(load(more[i], &d, &n) == 0, "%s", error_get());
        media_image im;
        EXPECT(media_image_decode(d, n, more[i], NULL, &im) == 0, "%s: %s", more[i], error_get());
        EXPECT(im.nx == 24 && im.ny == 16, "%s: %dx%d", more[i], im.nx, im.ny);
        if (i == 1 && im.rgb) EXPECT(im.rgb[30] == im.rgb[31] && im.rgb[31] == im.rgb[32], "grey");
        media_image_free(&im);
        free(d);
    }
}

/* Every prefix of every file is refused or decodes, and never crashes; a
 * prefix cut inside the pixels is an error (never grey filler). */
TEST(images_truncated) {
    if (!all_image_formats()) return;
    const char *files[] = {"grad.png", "grad.jpg", "grad.webp", "grad.bmp", "grad.gif"};
    for (int f = 0; f < 5; f++) {
        void *d;
        size_t n;
        REQUIRE(load(files[f], &d, &n) == 0, "%s", error_get());
        int refused = 0;
        for (size_t cut = 0; cut < n; cut++) {
            uint8_t *copy = malloc(cut ? cut : 1);
            memcpy(copy, d, cut);
            media_image im;
            if (media_image_decode(copy, cut, "cut", NULL, &im) != 0) {
                refused++;
                EXPECT_HAS(error_get(), "cut: ", "%s at %zu", files[f], cut);
            }
            media_image_free(&im);
            free(copy);
        }
        /* everything but trailing bytes a decoder never needs (PNG's IEND,
         * JPEG's EOI, a GIF's trailer) */
        EXPECT(refused + 16 >= (int)n, "%s: only %d of %zu prefixes refused", files[f], refused, n);
        media_image im;
        EXPECT_ERROR(media_image_decode(d, n / 2, "half", NULL, &im) != 0, error_get(), "half:",
                     "%s cut in half", files[f]);
        free(d);
    }
}

TEST(images_limits_and_lies) {
    if (!all_image_formats()) return;
    void *d;
    size_t n;
    REQUIRE(load("grad.png", &d, &n) == 0, "%s", error_get());
    media_limits l = media_limits_default();
    l.max_side = 20;
    media_image im;
    EXPECT_ERROR(media_image_decode(d, n, "big.png", &l, &im) != 0, error_get(), "over the limit",
                 "24 px over a 20 px limit");
    /* the IHDR says 60000 x 60000: over the default limit, refused before allocating */
    uint8_t *lie = malloc(n);
    memcpy(lie, d, n);
    lie[16] = 0, lie[17] = 0, lie[18] = 0xEA, lie[19] = 0x60;
    lie[20] = 0, lie[21] = 0, lie[22] = 0xEA, lie[23] = 0x60;
    EXPECT_ERROR(media_image_decode(lie, n, "lie.png", NULL, &im) != 0, error_get(), "lie.png",
                 "lying PNG header");
    free(lie);
    free(d);
    /* a BMP whose header says it is 30000 px wide */
    REQUIRE(load("grad.bmp", &d, &n) == 0, "%s", error_get());
    lie = malloc(n);
    memcpy(lie, d, n);
    lie[18] = 0x30, lie[19] = 0x75;
    EXPECT_ERROR(media_image_decode(lie, n, "lie.bmp", NULL, &im) != 0, error_get(), "lie.bmp",
                 "lying BMP header");
    free(lie);
    free(d);
    EXPECT_ERROR(media_image_decode("hello", 5, "text.txt", NULL, &im) != 0, error_get(),
                 "not an image", "text");
    EXPECT_ERROR(media_image_decode(NULL, 0, "empty", NULL, &im) != 0, error_get(), "empty",
                 "empty");
}

#if TSR_HAVE_SNDFILE
/* A 440 Hz tone, rate Hz, 2 channels (left tone, right silence), written by
 * libsndfile in format fmt. */
static int write_tone(const char *path, int fmt, int rate, double seconds) {
    SF_INFO info = {0};
    info.samplerate = rate;
    info.channels = 2;
    info.format = fmt;
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    if (!sf) return error_set("%s: %s", path, sf_strerror(NULL));
    int n = (int)(rate * seconds);
    float *buf = calloc((size_t)n * 2, sizeof(float));
    for (int i = 0; i < n; i++) buf[2 * i] = 0.5f * (float)sin(2 * M_PI * 440.0 * i / rate);
    sf_writef_float(sf, buf, n);
    free(buf);
    sf_close(sf);
    return 0;
}

TEST(audio_decode) {
    static const struct { const char *name; int fmt; int rate; } cases[] = {
        {"tone.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 44100},
        {"tone16k.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000},
        {"tone.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 48000},
#ifdef SF_FORMAT_MPEG_LAYER_III
        {"tone.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 44100},
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", harness_tmpdir(), cases[i].name);
        if (write_tone(path, cases[i].fmt, cases[i].rate, 0.5) != 0) {
            ADD_FAILURE("writing %s: %s", cases[i].name, error_get());
            continue;
        }
        void *d;
        size_t n;
        REQUIRE(media_read_file(path, 1 << 24, &d, &n) == 0, "%s", error_get());
        media_audio a;
        int rc = media_audio_decode(d, n, cases[i].name, NULL, &a);
        EXPECT(rc == 0, "%s: %s", cases[i].name, error_get());
        if (rc == 0) {
            /* 0.5 s at 16 kHz (MP3 adds encoder padding) */
            EXPECT(a.n_samples >= 7900 && a.n_samples <= 9800, "%s: %lld samples", cases[i].name,
                   (long long)a.n_samples);
            /* mono mix of a 0.5-amplitude tone and silence: RMS 0.25/sqrt(2) */
            double ss = 0;
            int64_t from = a.n_samples / 4, to = 3 * a.n_samples / 4;
            for (int64_t j = from; j < to; j++) ss += (double)a.pcm[j] * a.pcm[j];
            double rms = sqrt(ss / (double)(to - from));
            EXPECT_NEAR(rms, 0.25 / sqrt(2.0), 0.02, "%s: RMS", cases[i].name);
        }
        media_audio_free(&a);
        /* truncated: cut at every 97th byte */
        for (size_t cut = 0; cut < n; cut += 97) {
            if (media_audio_decode(d, cut, "cut", NULL, &a) != 0)
                EXPECT_HAS(error_get(), "cut: ", "%s", cases[i].name);
            media_audio_free(&a);
        }
        free(d);
    }
}

TEST(audio_lies) {
    char path[1024];
    snprintf(path, sizeof path, "%s/lie.wav", harness_tmpdir());
    REQUIRE(write_tone(path, SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 0.25) == 0, "%s", error_get());
    void *d;
    size_t n;
    REQUIRE(media_read_file(path, 1 << 24, &d, &n) == 0, "%s", error_get());
    media_audio a;
    /* the data is cut but the header still claims all of it */
    EXPECT_ERROR(media_audio_decode(d, n - 1000, "short.wav", NULL, &a) != 0, error_get(),
                 "truncated", "cut WAV");
    media_limits l = media_limits_default();
    l.max_seconds = 0.1;
    EXPECT_ERROR(media_audio_decode(d, n, "long.wav", &l, &a) != 0, error_get(), "limit",
                 "over the duration limit");
    EXPECT_ERROR(media_audio_decode(d, 44, "empty.wav", NULL, &a) != 0, error_get(), "empty.wav",
                 "no samples");
    free(d);
    REQUIRE(load("grad.png", &d, &n) == 0, "%s", error_get());
    EXPECT_ERROR(media_audio_decode(d, n, "grad.png", NULL, &a) != 0, error_get(), "not a sound",
                 "an image given as sound");
    free(d);
}
#else
TEST(audio_decode) { harness_skip("built without libsndfile/libsamplerate"); }
TEST(audio_lies) { harness_skip("built without libsndfile/libsamplerate"); }
#endif

HARNESS_MAIN("media", HARNESS_TEST(images_decode), HARNESS_TEST(images_truncated),
             HARNESS_TEST(images_limits_and_lies), HARNESS_TEST(audio_decode),
             HARNESS_TEST(audio_lies))
