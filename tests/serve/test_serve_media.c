/*
 * The server's media content parts (serve/media_part.c): base64, data:
 * URLs of images, input_audio, and the refusals: a remote URL (never
 * fetched), a data URL that is not base64 or not an image, and hostile
 * files (truncated, not what they say) — each a 400 naming the part.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "media/media.h"
#include "media_part.h"

static char *b64(const unsigned char *p, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8), *q = o;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *q++ = a[v >> 18 & 63];
        *q++ = a[v >> 12 & 63];
        *q++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? a[v & 63] : '=';
    }
    *q = 0;
    return o;
}

static int part(const char *json, tessera_media **m, serve_error *err) {
    cJSON *j = cJSON_Parse(json);
    if (!j) return ADD_FAILURE("bad JSON in the test: %s", json), -1;
    EXPECT(serve_media_part_is(j), "is a media part: %.60s", json);
    int rc = serve_media_part_decode(j, "content part 0", false, m, err);
    cJSON_Delete(j);
    return rc;
}

static char *json_image(const char *url_prefix, const unsigned char *p, size_t n) {
    char *e = b64(p, n);
    char *j = malloc(strlen(e) + 200);
    sprintf(j, "{\"type\": \"image_url\", \"image_url\": {\"url\": \"%s%s\"}}", url_prefix, e);
    free(e);
    return j;
}

TEST(base64) {
    unsigned char *o;
    size_t n;
    REQUIRE(serve_base64_decode("aGVsbG8=", 8, &o, &n) == 0, "decode");
    EXPECT(n == 5 && !memcmp(o, "hello", 5), "hello");
    free(o);
    EXPECT(serve_base64_decode("a*b=", 4, &o, &n) != 0, "bad character");
    EXPECT(serve_base64_decode("a", 1, &o, &n) != 0, "one character");
}

TEST(image_parts) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng");
    void *png;
    size_t n;
    REQUIRE(media_read_file(MEDIA_DATA_DIR "/grad.png", 1 << 20, &png, &n) == 0, "grad.png");
    serve_error err = {0};
    tessera_media *m = NULL;
    char *j = json_image("data:image/png;base64,", png, n);
    EXPECT(part(j, &m, &err) == 0, "data URL: %s", err.body ? err.body : "");
    EXPECT(m && tessera_media_nx(m) == 24 && tessera_media_ny(m) == 16, "decoded 24x16");
    tessera_media_free(m);
    free(j);
    static const struct { const char *prefix; size_t cut; const char *needle; } bad[] = {
        {"data:image/png;base64,", 40, "png data"},             /* truncated */
        {"data:text/plain;base64,", 0, "not an image"},         /* wrong media type */
        {"data:image/png,", 0, "must be base64"},              /* not base64 */
        {"https://example.com/cat.png#", 0, "not fetched"},     /* remote */
        {"file:///etc/passwd#", 0, "data: URL"},                /* neither */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = json_image(bad[i].prefix, png, bad[i].cut ? bad[i].cut : n);
        free(err.body);
        err.body = NULL;
        m = NULL;
        EXPECT(part(j, &m, &err) != 0 && err.status == 400, "case %zu refused", i);
        EXPECT(err.body && strstr(err.body, bad[i].needle) && strstr(err.body, "content part 0"),
               "case %zu: %s", i, err.body ? err.body : "(none)");
        tessera_media_free(m);
        free(j);
    }
    free(err.body);
    err.body = NULL;
    EXPECT(part("{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:image/png;base64,@@@@\"}}", &m, &err) != 0 &&
               err.body && strstr(err.body, "not base64"), "bad base64");
    free(err.body);
    free(png);
}

TEST(audio_parts) {
    serve_error err = {0};
    tessera_media *m = NULL;
    /* a WAV of 160 samples of silence at 16 kHz, mono, 16 bits */
    unsigned char wav[44 + 320] = {0};
    memcpy(wav, "RIFF", 4);
    uint32_t v = sizeof wav - 8;
    memcpy(wav + 4, &v, 4);
    memcpy(wav + 8, "WAVEfmt ", 8);
    v = 16;
    memcpy(wav + 16, &v, 4);
    uint16_t fmt[] = {1, 1};
    memcpy(wav + 20, fmt, 4);
    v = 16000;
    memcpy(wav + 24, &v, 4);
    v = 32000;
    memcpy(wav + 28, &v, 4);
    uint16_t ba[] = {2, 16};
    memcpy(wav + 32, ba, 4);
    memcpy(wav + 36, "data", 4);
    v = 320;
    memcpy(wav + 40, &v, 4);
    char *e = b64(wav, sizeof wav);
    char *j = malloc(strlen(e) + 200);
    sprintf(j, "{\"type\": \"input_audio\", \"input_audio\": {\"data\": \"%s\", \"format\": \"wav\"}}", e);
    EXPECT(part(j, &m, &err) == 0, "wav: %s", err.body ? err.body : "");
    EXPECT(m && tessera_media_get_kind(m) == TESSERA_MEDIA_AUDIO, "a sound");
    tessera_media_free(m);
    m = NULL;
    free(e);
    /* the same header over half the data: a lying file */
    e = b64(wav, 44 + 100);
    sprintf(j, "{\"type\": \"input_audio\", \"input_audio\": {\"data\": \"%s\", \"format\": \"wav\"}}", e);
    EXPECT(part(j, &m, &err) != 0 && err.body && strstr(err.body, "truncated"), "cut WAV: %s",
           err.body ? err.body : "");
    free(err.body);
    err.body = NULL;
    sprintf(j, "{\"type\": \"input_audio\", \"input_audio\": {\"data\": \"%s\", \"format\": \"ogg\"}}", e);
    EXPECT(part(j, &m, &err) != 0 && err.body && strstr(err.body, "not wav"), "format ogg");
    free(err.body);
    free(e);
    free(j);
}

HARNESS_MAIN("serve_media", HARNESS_TEST(base64), HARNESS_TEST(image_parts), HARNESS_TEST(audio_parts))
