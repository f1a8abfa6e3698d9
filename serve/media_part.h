/*
 * media_part — the media content parts of a request, decoded and checked:
 * OpenAI's {"type": "image_url", "image_url": {"url": "data:...;base64,..."}}
 * (or the url as a string) and {"type": "input_audio", "input_audio":
 * {"data": BASE64, "format": "wav"|"mp3"|"flac"}}. A remote URL (http:,
 * https:) is refused: a server must not fetch what a client names (with
 * --allow-remote-media too: fetching is not built, and the 400 says so). Bad
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

/* Decode media part `part` (named `where` in errors) into *out.
 * allow_remote (--allow-remote-media) changes only what the 400 of a remote
 * URL says. 0, or -1 with err filled (400). */
int serve_media_part_decode(const cJSON *part, const char *where, bool allow_remote, tessera_media **out,
                            serve_error *err);

/* A dialect (Anthropic's image blocks, Responses' input_image) makes an
 * OpenAI part of its own and marks it with the name of the request's field
 * (where: "messages[1].content[0]", param: the error's param), so that the
 * chat path's errors about it name what the client sent. */
int serve_media_part_mark(cJSON *part, const char *where, const char *param);
/* A part's marked name, else fallback; its error param, else "messages". */
const char *serve_media_part_where(const cJSON *part, const char *fallback);
const char *serve_media_part_param(const cJSON *part);

/* A medium from base64 text (llama-server's multimodal_data items), named
 * `where` in errors. 0, or -1 with err filled (400). */
int serve_media_from_base64(const char *b64, const char *where, tessera_media **out, serve_error *err);

/* Standard base64 (padding optional, no whitespace) into *out (malloc'd,
 * *len bytes); -1 at the first character that is not base64. */
int serve_base64_decode(const char *s, size_t n, unsigned char **out, size_t *len);

#endif
