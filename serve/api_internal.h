/* What the request-side files of the API share (api_json.c, api.c,
 * prompt.c, response.c); not used outside cli/serve. */
#ifndef TESSERA_SERVE_API_INTERNAL_H
#define TESSERA_SERVE_API_INTERNAL_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "format.h"
#include "tools.h"

/* Absent or JSON null. */
bool api_is_null(const cJSON *v);
/* Typed fields of obj: absent or null leaves *out; a wrong type or a value
 * outside [lo, hi] is a 400 naming key (returns -1). */
int api_get_number(const cJSON *obj, const char *key, double lo, double hi, double *out, serve_error *err);
int api_get_int(const cJSON *obj, const char *key, double lo, double hi, long long *out, serve_error *err);
int api_get_bool(const cJSON *obj, const char *key, bool *out, serve_error *err);
/* The 400 of a prompt over a slot's n_ctx positions (both llama-server's
 * and OpenAI's error fields); returns -1. */
int api_fail_context(serve_error *err, const char *param, long long n_prompt, int32_t n_ctx);
/* A NUL-terminated valid UTF-8 copy of s[0..n): bad bytes become U+FFFD. */
char *api_utf8_clean(const char *s, size_t n);
/* Add s[0..n) to obj as a cleaned string. */
cJSON *api_add_text(cJSON *obj, const char *key, const char *s, size_t n);

/* The prompt of each kind into r (prompt.c): the conversation (and the
 * grammar tool_choice forces, NULL if none), the index-th prompt of
 * "prompt", /infill's parts. 0, or -1 with *err filled. */
int api_parse_messages(const serve_api *api, const cJSON *root, serve_request *r, tessera_grammar **grammar,
                       serve_error *err);
int api_parse_prompt(const serve_api *api, const cJSON *root, int index, serve_request *r, serve_error *err);
int api_parse_infill(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err);

#endif
