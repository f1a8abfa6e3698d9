/*
 * media_part — the media content parts of a request, decoded and checked:
 * OpenAI's {"type": "image_url", "image_url": {"url": "data:...;base64,..."}}
 * (or the url as a string) and {"type": "input_audio", "input_audio":
 * {"data": BASE64, "format": "wav"|"mp3"|"flac"}}. A remote URL (http:,
 * https:) is refused: a server must not fetch what a client names. Bad
 * base64, a media type that is not an image, or a truncated, oversized or
 * lying file is a 400 naming the part ("messages[1].content[0]: ...").
 */
#ifndef TESSERA_SERVE_MEDIA_PART_H
#define TESSERA_SERVE_MEDIA_PART_H

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <tessera/tessera_mtmd.h>

#include "format.h"

/* Whether part is a media part (its type image_url, input_audio). */
bool serve_media_part_is(const cJSON *part);

/* Decode media part `part` (named `where` in errors) into *out. 0, or -1
 * with err filled (400). */
int serve_media_part_decode(const cJSON *part, const char *where, tessera_media **out, serve_error *err);

/* Standard base64 (padding optional, no whitespace) into *out (malloc'd,
 * *len bytes); -1 at the first character that is not base64. */
int serve_base64_decode(const char *s, size_t n, unsigned char **out, size_t *len);

#endif
