/* media: sniffing, limits, reading files, the list of built formats. */
#include "media/media.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/media_config.h"
#include "util/error.h"

media_limits media_limits_default(void) {
    media_limits l = {8192, (int64_t)8192 * 8192, 600.0};
    return l;
}

static int starts(const uint8_t *p, size_t n, const char *magic, size_t at) {
    size_t m = strlen(magic);
    return n >= at + m && memcmp(p + at, magic, m) == 0;
}

media_kind media_sniff(const void *data, size_t size, const char **format) {
    const uint8_t *p = data;
    const char *f = NULL;
    media_kind k = MEDIA_UNKNOWN;
    if (!p) size = 0;
    if (size >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF) f = "jpeg", k = MEDIA_IMAGE;
    else if (starts(p, size, "\x89PNG\r\n\x1a\n", 0)) f = "png", k = MEDIA_IMAGE;
    else if (starts(p, size, "RIFF", 0) && starts(p, size, "WEBP", 8)) f = "webp", k = MEDIA_IMAGE;
    else if (starts(p, size, "BM", 0)) f = "bmp", k = MEDIA_IMAGE;
    else if (starts(p, size, "GIF87a", 0) || starts(p, size, "GIF89a", 0)) f = "gif", k = MEDIA_IMAGE;
    else if (starts(p, size, "RIFF", 0) && starts(p, size, "WAVE", 8)) f = "wav", k = MEDIA_AUDIO;
    else if (starts(p, size, "fLaC", 0)) f = "flac", k = MEDIA_AUDIO;
    else if (starts(p, size, "OggS", 0)) f = "ogg", k = MEDIA_AUDIO;
    else if (starts(p, size, "ID3", 0) || (size >= 2 && p[0] == 0xFF && (p[1] & 0xE0) == 0xE0))
        f = "mp3", k = MEDIA_AUDIO;
    if (format) *format = f;
    return k;
}

int media_read_file(const char *path, size_t max_bytes, void **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return error_set("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 0, n = 0;
    uint8_t *buf = NULL;
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) {
                free(buf);
                fclose(fp);
                return error_set("%s: larger than %zu bytes", path, max_bytes);
            }
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > max_bytes) ncap = max_bytes;
            uint8_t *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                fclose(fp);
                return error_set("%s: out of memory reading it", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return error_set("%s: read error", path);
    }
    *data = buf;
    *size = n;
    return 0;
}

const char *media_formats(void) {
    return ""
#if TSR_HAVE_LIBJPEG
           "jpeg "
#endif
#if TSR_HAVE_LIBPNG
           "png "
#endif
#if TSR_HAVE_LIBWEBP
           "webp "
#endif
#if TSR_HAVE_STB
           "bmp gif "
#endif
#if TSR_HAVE_SNDFILE
           "wav flac mp3 ogg "
#endif
        ;
}
