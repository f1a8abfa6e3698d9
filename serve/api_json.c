/*
 * api_json — what the request and response writers share: OpenAI's error
 * body, UTF-8-safe strings, and the typed getters of request fields (a
 * wrong type or a value out of range is a 400 naming the field).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "api_internal.h"

/* ------------------------------------------------------------ errors */

char *serve_api_error_json(const char *message, const char *type, const char *param, const char *code) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    if (param)
        cJSON_AddStringToObject(e, "param", param);
    else
        cJSON_AddNullToObject(e, "param");
    if (code)
        cJSON_AddStringToObject(e, "code", code);
    else
        cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

int serve_fail(serve_error *err, int status, const char *param, const char *code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err->status = status;
    err->body =
        serve_api_error_json(msg, status >= 500 ? "server_error" : "invalid_request_error", param, code);
    return -1;
}

/* A prompt longer than a slot: llama-server's error type and numbers
 * (exceed_context_size_error, n_prompt_tokens, n_ctx), which its clients
 * read, with OpenAI's code (context_length_exceeded), which the openai
 * clients read; both fit one error object. */
int api_fail_context(serve_error *err, const char *param, long long n_prompt, int32_t n_ctx) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "the request exceeds the available context size: the prompt has %lld tokens, a slot's context "
             "holds %d (-c / --parallel)",
             n_prompt, (int)n_ctx);
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "exceed_context_size_error");
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    cJSON_AddStringToObject(e, "code", "context_length_exceeded");
    cJSON_AddNumberToObject(e, "n_prompt_tokens", (double)n_prompt);
    cJSON_AddNumberToObject(e, "n_ctx", n_ctx);
    err->status = 400;
    err->body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return -1;
}

/* ------------------------------------------------------------ UTF-8 */


/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t len = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (len == 0 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (len == 3 && s[0] == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (len == 3 && s[0] == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (len == 4 && s[0] == 0xF0 && s[1] < 0x90) return 0;
    if (len == 4 && s[0] == 0xF4 && s[1] >= 0x90) return 0;
    return len;
}

/* A NUL-terminated valid UTF-8 copy of s[0..n): bad bytes become U+FFFD. */
char *api_utf8_clean(const char *s, size_t n) {
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0 || (k == 1 && s[i] == '\0')) {
            if (s[i] == '\0') {
                i++;
                continue;
            }
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return out;
}

bool serve_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

cJSON *serve_json_add_text(cJSON *obj, const char *key, const char *s, size_t n) { return api_add_text(obj, key, s, n); }
cJSON *api_add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *clean = api_utf8_clean(s ? s : "", s ? n : 0);
    cJSON *item = cJSON_AddStringToObject(obj, key, clean ? clean : "");
    free(clean);
    return item;
}

/* ------------------------------------------------------------ fields */

bool api_is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* A number field in [lo, hi]; absent or null leaves *out. */
int api_get_number(const cJSON *root, const char *key, double lo, double hi, double *out,
                      serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (api_is_null(v)) return 0;
    if (!cJSON_IsNumber(v)) return serve_fail(err, 400, key, NULL, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return serve_fail(err, 400, key, NULL, "'%s' is %g, expected %g..%g", key, d, lo, hi);
    *out = d;
    return 0;
}

int api_get_int(const cJSON *root, const char *key, double lo, double hi, long long *out,
                   serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (api_is_null(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return serve_fail(err, 400, key, NULL, "'%s' must be an integer", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return serve_fail(err, 400, key, NULL, "'%s' is %.0f, expected %.0f..%.0f", key, d, lo, hi);
    *out = (long long)d;
    return 0;
}

int api_get_bool(const cJSON *root, const char *key, bool *out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (api_is_null(v)) return 0;
    if (!cJSON_IsBool(v)) return serve_fail(err, 400, key, NULL, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* serve.h: one clock for every timing of the server. */
double serve_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A server-sent event: "data: TEXT\n\n" appended (serve.h). */
char *serve_sse_append_text(char *acc, const char *text) {
    size_t a = acc ? strlen(acc) : 0, n = strlen(text);
    char *out = realloc(acc, a + n + 9);
    if (!out) return acc;
    memcpy(out + a, "data: ", 6);
    memcpy(out + a + 6, text, n);
    memcpy(out + a + 6 + n, "\n\n", 3);
    return out;
}

char *serve_sse_append(char *acc, cJSON *root) {
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js) return acc;
    char *out = serve_sse_append_text(acc, js);
    free(js);
    return out;
}

/* ------------------------------------------------------------ llama-server fields */

/* Whether a medium's span starts at prompt entry k. */
static bool media_starts_at(const serve_request *r, int32_t k) {
    for (int32_t i = 0; i < r->n_spans; i++)
        if (r->spans[i].start == k) return true;
    return false;
}

/* The prompt as text with its special tokens written out ("<s> Once..."),
 * each medium as its marker (<__media__>). */
void serve_json_add_prompt(const serve_api *api, struct cJSON *o, const char *key, const serve_request *r) {
    size_t cap = 64, len = 0;
    char *buf = malloc(cap);
    for (int32_t i = 0; buf && i < r->n_prompt;) {
        int32_t j = i;
        while (j < r->n_prompt && (r->prompt[j] < 0) == (r->prompt[i] < 0)) j++;
        if (r->prompt[i] < 0) { /* one marker per medium: its rows share one entry value */
            for (int32_t k = i; k < j; k++)
                if (media_starts_at(r, k)) {
                    const size_t ml = strlen(TESSERA_MEDIA_MARKER);
                    if (len + ml + 1 > cap) {
                        char *g = realloc(buf, cap = 2 * (len + ml + 1));
                        if (!g) goto fail;
                        buf = g;
                    }
                    memcpy(buf + len, TESSERA_MEDIA_MARKER, ml);
                    len += ml;
                }
        } else {
            int32_t n = tessera_detokenize(api->model, r->prompt + i, j - i, NULL, 0, false, true);
            if (n == INT32_MIN) goto fail;
            if (n < 0) n = -n;
            if (len + (size_t)n + 1 > cap) {
                char *g = realloc(buf, cap = 2 * (len + (size_t)n + 1));
                if (!g) goto fail;
                buf = g;
            }
            int32_t got = tessera_detokenize(api->model, r->prompt + i, j - i, buf + len, n + 1, false, true);
            if (got < 0) goto fail;
            len += (size_t)got;
        }
        i = j;
    }
    if (buf) serve_json_add_text(o, key, buf, len);
fail:
    free(buf);
}

static void timings_put(cJSON *t, int32_t cached, int32_t prompt_n, double prompt_ms, int32_t gen_n, double gen_ms) {
    /* the first token comes from the prompt's last batch: the generation
     * rate is over the decode steps after it, as llama-server's */
    int32_t steps = gen_n > 1 ? gen_n - 1 : 0;
    cJSON_AddNumberToObject(t, "cache_n", cached);
    cJSON_AddNumberToObject(t, "prompt_n", prompt_n);
    cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0.0);
    cJSON_AddNumberToObject(t, "prompt_per_second", prompt_ms > 0 ? 1e3 * prompt_n / prompt_ms : 0.0);
    cJSON_AddNumberToObject(t, "predicted_n", gen_n);
    cJSON_AddNumberToObject(t, "predicted_ms", gen_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", steps > 0 ? gen_ms / steps : 0.0);
    cJSON_AddNumberToObject(t, "predicted_per_second", steps > 0 && gen_ms > 0 ? 1e3 * steps / gen_ms : 0.0);
}

/* Prompt: from the slot's start to the first token; generation: from
 * there to the end (or now, for a stream chunk). */
void serve_json_add_timings(struct cJSON *o, const serve_request *r, const serve_choice *ch) {
    double now = r->t_done_ms > 0 ? r->t_done_ms : serve_now_ms();
    double start = r->t_start_ms > 0 ? r->t_start_ms : r->t_submit_ms;
    double first = r->t_first_ms > 0 ? r->t_first_ms : now;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    timings_put(t, r->n_cached, r->n_prompt - r->n_cached, first > start ? first - start : 0.0, ch->n_gen,
                r->t_first_ms > 0 ? now - r->t_first_ms : 0.0);
    /* speculative decoding, as llama-server: when the choice had drafts */
    if (t && ch->draft_n > 0) {
        cJSON_AddNumberToObject(t, "draft_n", ch->draft_n);
        cJSON_AddNumberToObject(t, "draft_n_accepted", ch->draft_n_accepted);
    }
}

/* The next unsent prompt mark of r as llama-server's "prompt_progress"
 * (and its "timings" when timed) into o; false when none is left. Call
 * under the engine lock. */
bool serve_json_add_progress(struct cJSON *o, serve_request *r, bool timed) {
    if (r->sent_marks >= r->n_marks) return false;
    const serve_prompt_mark *m = &r->marks[r->sent_marks++];
    cJSON *p = cJSON_AddObjectToObject(o, "prompt_progress");
    cJSON_AddNumberToObject(p, "total", r->n_prompt);
    cJSON_AddNumberToObject(p, "cache", r->n_cached);
    cJSON_AddNumberToObject(p, "processed", m->processed);
    cJSON_AddNumberToObject(p, "time_ms", m->ms);
    if (timed) timings_put(cJSON_AddObjectToObject(o, "timings"), r->n_cached, m->processed - r->n_cached, m->ms, 0, 0.0);
    return true;
}
