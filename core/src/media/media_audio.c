/*
 * media_audio: WAV, FLAC, MP3 and Ogg through libsndfile (read from memory
 * by its virtual I/O), mixed to mono by averaging the channels, resampled to
 * 16 kHz by libsamplerate (SRC_SINC_MEDIUM_QUALITY).
 *
 * A header that promises more frames than the data holds is an error (a
 * lying or truncated file), not silently shorter audio.
 */
#include "media/media.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "media/media_config.h"
#include "util/error.h"

#if TSR_HAVE_SNDFILE
#include <samplerate.h>
#include <sndfile.h>

typedef struct mem_io {
    const uint8_t *p;
    sf_count_t n, at;
} mem_io;

static sf_count_t mem_len(void *u) { return ((mem_io *)u)->n; }
static sf_count_t mem_tell(void *u) { return ((mem_io *)u)->at; }

static sf_count_t mem_seek(sf_count_t off, int whence, void *u) {
    mem_io *m = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->at : m->n;
    sf_count_t to;
    if (__builtin_add_overflow(base, off, &to) || to < 0) return -1;
    m->at = to > m->n ? m->n : to;
    return m->at;
}

static sf_count_t mem_read(void *dst, sf_count_t count, void *u) {
    mem_io *m = u;
    if (count <= 0 || m->at >= m->n) return 0;
    sf_count_t k = m->n - m->at < count ? m->n - m->at : count;
    memcpy(dst, m->p + m->at, (size_t)k);
    m->at += k;
    return k;
}

static sf_count_t mem_write(const void *src, sf_count_t count, void *u) {
    (void)src;
    (void)count;
    (void)u;
    return 0;
}

/* libsndfile reads a WAV whose data chunk is cut short as a shorter sound:
 * check the chunk's declared size against the bytes there. */
static int check_wav(const uint8_t *p, size_t n, const char *label) {
    size_t at = 12;
    while (at + 8 <= n) {
        uint32_t len = (uint32_t)p[at + 4] | (uint32_t)p[at + 5] << 8 | (uint32_t)p[at + 6] << 16 |
                       (uint32_t)p[at + 7] << 24;
        if (!memcmp(p + at, "data", 4)) {
            /* 0 and 0xFFFFFFFF: a stream that did not know its length */
            if (len != 0 && len != 0xFFFFFFFFu && len > n - at - 8)
                return error_set("%s: wav data: truncated: the data chunk says %u bytes, the "
                                 "file holds %zu", label, len, n - at - 8);
            return 0;
        }
        if (len > n - at - 8) break;
        at += 8 + (size_t)len + (len & 1);
    }
    return 0; /* no data chunk: libsndfile says so */
}

int media_audio_decode(const void *data, size_t size, const char *label,
                       const media_limits *limits, media_audio *out) {
    media_limits l = limits ? *limits : media_limits_default();
    memset(out, 0, sizeof *out);
    if (!label) label = "audio";
    const char *fmt = NULL;
    media_kind k = media_sniff(data, size, &fmt);
    if (k == MEDIA_IMAGE) return error_set("%s: is an image (%s), not a sound", label, fmt);
    if (k != MEDIA_AUDIO)
        return error_set("%s: not a sound this build can read (formats: %s)", label,
                         media_formats());
    if (!strcmp(fmt, "wav") && check_wav(data, size, label) != 0) return -1;
    mem_io io = {data, (sf_count_t)size, 0};
    SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &io);
    if (!sf) return error_set("%s: %s header: %s", label, fmt, sf_strerror(NULL));
    float *in = NULL, *mono = NULL, *res = NULL;
    if (info.channels < 1 || info.channels > 64) {
        error_set("%s: %s header: %d channels", label, fmt, info.channels);
        goto fail;
    }
    if (info.samplerate < 1000 || info.samplerate > 768000) {
        error_set("%s: %s header: sample rate %d Hz is out of range", label, fmt, info.samplerate);
        goto fail;
    }
    /* MP3 and some streams do not know their length up front: read in
     * chunks, and stop at the duration limit either way */
    int64_t max_frames = (int64_t)(l.max_seconds * info.samplerate) + 1;
    if (info.frames > max_frames && info.frames != SF_COUNT_MAX) {
        error_set("%s: %s header: %.1f s is over the limit of %.0f s", label, fmt,
                  (double)info.frames / info.samplerate, l.max_seconds);
        goto fail;
    }
    int64_t cap = 0, n = 0;
    enum { CHUNK = 16384 };
    for (;;) {
        if (n + CHUNK > cap) {
            int64_t ncap = cap ? cap * 2 : CHUNK * 4;
            float *nb = realloc(in, (size_t)ncap * (size_t)info.channels * sizeof(float));
            if (!nb) {
                error_set("%s: out of memory decoding", label);
                goto fail;
            }
            in = nb;
            cap = ncap;
        }
        sf_count_t got = sf_readf_float(sf, in + (size_t)n * (size_t)info.channels, CHUNK);
        if (sf_error(sf) != SF_ERR_NO_ERROR) {
            error_set("%s: %s data: %s", label, fmt, sf_strerror(sf));
            goto fail;
        }
        if (got <= 0) break;
        n += got;
        if (n > max_frames) {
            error_set("%s: %s data: longer than the limit of %.0f s", label, fmt, l.max_seconds);
            goto fail;
        }
    }
    if (info.frames != SF_COUNT_MAX && info.frames > 0 && n < info.frames &&
        strcmp(fmt, "mp3") != 0) {
        error_set("%s: %s data: truncated: the header says %lld frames, the data holds %lld",
                  label, fmt, (long long)info.frames, (long long)n);
        goto fail;
    }
    if (n == 0) {
        error_set("%s: %s data: no samples", label, fmt);
        goto fail;
    }
    mono = malloc((size_t)n * sizeof(float));
    if (!mono) {
        error_set("%s: out of memory decoding", label);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        double s = 0;
        for (int c = 0; c < info.channels; c++) s += in[(size_t)i * (size_t)info.channels + (size_t)c];
        mono[i] = (float)(s / info.channels);
        if (!isfinite(mono[i])) { /* a float WAV can carry NaN or infinity */
            error_set("%s: %s data: sample %lld is not a finite number", label, fmt, (long long)i);
            goto fail;
        }
    }
    free(in);
    in = NULL;
    int64_t n_out = n;
    if (info.samplerate != MEDIA_AUDIO_RATE) {
        double ratio = (double)MEDIA_AUDIO_RATE / info.samplerate;
        n_out = (int64_t)((double)n * ratio) + 16;
        res = malloc((size_t)n_out * sizeof(float));
        if (!res) {
            error_set("%s: out of memory resampling", label);
            goto fail;
        }
        SRC_DATA sd;
        memset(&sd, 0, sizeof sd);
        sd.data_in = mono;
        sd.input_frames = (long)n;
        sd.data_out = res;
        sd.output_frames = (long)n_out;
        sd.src_ratio = ratio;
        int e = src_simple(&sd, SRC_SINC_MEDIUM_QUALITY, 1);
        if (e) {
            error_set("%s: resampling %d Hz to 16 kHz: %s", label, info.samplerate,
                      src_strerror(e));
            goto fail;
        }
        n_out = sd.output_frames_gen;
        if (n_out < 1) {
            error_set("%s: %s data: %lld samples at %d Hz are less than one at 16 kHz", label, fmt,
                      (long long)n, info.samplerate);
            goto fail;
        }
        free(mono);
        mono = res;
        res = NULL;
    }
    sf_close(sf);
    out->n_samples = n_out;
    out->pcm = mono;
    return 0;
fail:
    free(in);
    free(mono);
    free(res);
    sf_close(sf);
    return -1;
}
#else
int media_audio_decode(const void *data, size_t size, const char *label,
                       const media_limits *limits, media_audio *out) {
    (void)limits;
    memset(out, 0, sizeof *out);
    const char *fmt = NULL;
    media_sniff(data, size, &fmt);
    return error_set("%s: sounds need libsndfile and libsamplerate, which this build was made "
                     "without (%s)", label ? label : "audio", fmt ? fmt : "unknown format");
}
#endif

void media_audio_free(media_audio *a) {
    if (!a) return;
    free(a->pcm);
    a->pcm = NULL;
    a->n_samples = 0;
}
