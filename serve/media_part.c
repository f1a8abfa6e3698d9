/* media_part: image_url and input_audio content parts (media_part.h). */
#include "media_part.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { MEDIA_PART_MAX_BYTES = 64 << 20 };

bool serve_media_part_is(const cJSON *part) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    return cJSON_IsString(type) &&
           (!strcmp(type->valuestring, "image_url") || !strcmp(type->valuestring, "input_audio"));
}

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

int serve_base64_decode(const char *s, size_t n, unsigned char **out, size_t *len) {
    while (n > 0 && s[n - 1] == '=') n--;
    if (n % 4 == 1) return -1;
    unsigned char *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(buf);
            return -1;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out = buf;
    *len = o;
    return 0;
}

static int decode_b64_media(const char *b64, size_t n, const char *where, const char *param, tessera_media **out,
                            serve_error *err) {
    *out = NULL;
    if (n / 4 * 3 > MEDIA_PART_MAX_BYTES)
        return serve_fail(err, 400, param, NULL, "%s: larger than %d MiB", where, MEDIA_PART_MAX_BYTES >> 20);
    unsigned char *bytes;
    size_t len;
    if (serve_base64_decode(b64, n, &bytes, &len) != 0)
        return serve_fail(err, 400, param, NULL, "%s: the data is not base64", where);
    *out = tessera_media_from_buffer(bytes, len, where);
    free(bytes);
    if (!*out) return serve_fail(err, 400, param, NULL, "%s", tessera_last_error());
    return 0;
}

int serve_media_from_base64(const char *b64, const char *where, tessera_media **out, serve_error *err) {
    return decode_b64_media(b64, strlen(b64), where, "prompt", out, err);
}

int serve_media_part_decode(const cJSON *part, const char *where, bool allow_remote, tessera_media **out,
                            serve_error *err) {
    *out = NULL;
    const char *param = serve_media_part_param(part);
    const char *type = cJSON_GetObjectItemCaseSensitive(part, "type")->valuestring;
    if (!strcmp(type, "input_audio")) {
        const cJSON *ia = cJSON_GetObjectItemCaseSensitive(part, "input_audio");
        const cJSON *data = cJSON_GetObjectItemCaseSensitive(ia, "data");
        const cJSON *format = cJSON_GetObjectItemCaseSensitive(ia, "format");
        if (!cJSON_IsString(data) || !cJSON_IsString(format))
            return serve_fail(err, 400, param, NULL,
                              "%s: input_audio must be {\"data\": BASE64, \"format\": \"wav\"|\"mp3\"|\"flac\"}", where);
        const char *f = format->valuestring;
        if (strcmp(f, "wav") && strcmp(f, "mp3") && strcmp(f, "flac"))
            return serve_fail(err, 400, param, NULL, "%s: audio format '%.20s' is not wav, mp3 or flac", where, f);
        if (decode_b64_media(data->valuestring, strlen(data->valuestring), where, param, out, err) != 0) return -1;
        if (tessera_media_get_kind(*out) != TESSERA_MEDIA_AUDIO) {
            tessera_media_free(*out);
            *out = NULL;
            return serve_fail(err, 400, param, NULL, "%s: input_audio holds an image, not a sound", where);
        }
        return 0;
    }
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(part, "image_url");
    const cJSON *url = cJSON_IsString(iu) ? iu : cJSON_GetObjectItemCaseSensitive(iu, "url");
    if (!cJSON_IsString(url))
        return serve_fail(err, 400, param, NULL, "%s: image_url must be {\"url\": \"data:image/...;base64,...\"}",
                          where);
    const char *u = url->valuestring;
    if ((!strncasecmp(u, "http:", 5) || !strncasecmp(u, "https:", 6)) && !allow_remote)
        return serve_fail(err, 400, param, NULL,
                          "%s: remote image URLs are not fetched (a server must not fetch what a client names; "
                          "--allow-remote-media): send the image as a data: URL (data:image/png;base64,...)", where);
    if (!strncasecmp(u, "http:", 5) || !strncasecmp(u, "https:", 6))
        return serve_fail(err, 400, param, NULL,
                          "%s: remote image URLs are not fetched: --allow-remote-media is set, but fetching is not "
                          "built into tessera serve; send the image as a data: URL (data:image/png;base64,...)",
                          where);
    if (strncasecmp(u, "data:", 5) != 0)
        return serve_fail(err, 400, param, NULL, "%s: the image URL must be a data: URL", where);
    const char *comma = strchr(u, ',');
    if (!comma) return serve_fail(err, 400, param, NULL, "%s: a data: URL without a comma", where);
    size_t mlen = (size_t)(comma - (u + 5));
    const char *meta = u + 5;
    if (mlen < 7 || strncasecmp(meta + mlen - 7, ";base64", 7) != 0)
        return serve_fail(err, 400, param, NULL, "%s: the data: URL must be base64 (data:image/...;base64,...)",
                          where);
    if (mlen > 7 && strncasecmp(meta, "image/", 6) != 0)
        return serve_fail(err, 400, param, NULL, "%s: media type '%.*s' is not an image", where,
                          (int)(mlen - 7 > 40 ? 40 : mlen - 7), meta);
    if (decode_b64_media(comma + 1, strlen(comma + 1), where, param, out, err) != 0) return -1;
    if (tessera_media_get_kind(*out) != TESSERA_MEDIA_IMAGE) {
        tessera_media_free(*out);
        *out = NULL;
        return serve_fail(err, 400, param, NULL, "%s: image_url holds a sound, not an image", where);
    }
    return 0;
}

const char *serve_media_part_param(const cJSON *part) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(part, "tessera_param");
    return cJSON_IsString(p) ? p->valuestring : "messages";
}

const char *serve_media_part_where(const cJSON *part, const char *fallback) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(part, "tessera_where");
    return cJSON_IsString(w) ? w->valuestring : fallback;
}

int serve_media_part_mark(cJSON *part, const char *where, const char *param) {
    const bool ok = cJSON_AddStringToObject(part, "tessera_where", where) &&
                    cJSON_AddStringToObject(part, "tessera_param", param);
    return ok ? 0 : -1;
}
