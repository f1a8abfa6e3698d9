/*
 * api — the OpenAI request and response JSON.
 *
 * Requests: /v1/chat/completions (messages) and /v1/completions (prompt),
 * with the fields of FIELDS below. A field not in that table, or one whose
 * value asks for something Tessera does not do, is a 400 naming it (the
 * "param" of OpenAI's error shape); so is a known field of the wrong type.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "chat/tool_parse.h"
#include "serve.h"

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

/* ------------------------------------------------------------ UTF-8 */

static cJSON *add_text(cJSON *obj, const char *key, const char *s, size_t n);

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
static char *utf8_clean(const char *s, size_t n) {
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

cJSON *serve_json_add_text(cJSON *obj, const char *key, const char *s, size_t n) { return add_text(obj, key, s, n); }

static cJSON *add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *clean = utf8_clean(s ? s : "", s ? n : 0);
    cJSON *item = cJSON_AddStringToObject(obj, key, clean ? clean : "");
    free(clean);
    return item;
}

/* ------------------------------------------------------------ fields */

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* A number field in [lo, hi]; absent or null leaves *out. */
static int get_number(const cJSON *root, const char *key, double lo, double hi, double *out,
                      serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (is_null(v)) return 0;
    if (!cJSON_IsNumber(v)) return serve_fail(err, 400, key, NULL, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return serve_fail(err, 400, key, NULL, "'%s' is %g, expected %g..%g", key, d, lo, hi);
    *out = d;
    return 0;
}

static int get_int(const cJSON *root, const char *key, double lo, double hi, long long *out,
                   serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (is_null(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return serve_fail(err, 400, key, NULL, "'%s' must be an integer", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return serve_fail(err, 400, key, NULL, "'%s' is %.0f, expected %.0f..%.0f", key, d, lo, hi);
    *out = (long long)d;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, bool *out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (is_null(v)) return 0;
    if (!cJSON_IsBool(v)) return serve_fail(err, 400, key, NULL, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int add_stop(serve_request *r, const char *stop, serve_error *err) {
    size_t n = strlen(stop);
    if (n == 0) return 0; /* an empty stop string never matches */
    if (n > 1024) return serve_fail(err, 400, "stop", NULL, "a 'stop' string is over 1024 bytes");
    r->stop[r->n_stop] = strdup(stop);
    if (!r->stop[r->n_stop]) return serve_fail(err, 500, NULL, NULL, "out of memory");
    r->n_stop++;
    return 0;
}

static int get_stop(const cJSON *root, serve_request *r, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (is_null(v)) return 0;
    if (cJSON_IsString(v)) return add_stop(r, v->valuestring, err);
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, "stop", NULL, "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(v) > SERVE_MAX_STOP)
        return serve_fail(err, 400, "stop", NULL, "'stop' has %d strings, at most %d", cJSON_GetArraySize(v),
                    SERVE_MAX_STOP);
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s)) return serve_fail(err, 400, "stop", NULL, "'stop' must hold strings only");
        if (add_stop(r, s->valuestring, err) != 0) return -1;
    }
    return 0;
}

/* One logit_bias entry: key is a token id, or (llama-server) a text whose
 * tokens all get the bias; value a number in -100..100 (-100 bans, as
 * OpenAI documents), or false (bans). */
static int add_bias(const serve_api *api, const cJSON *key, const cJSON *value, tessera_logit_bias *bias,
                    int32_t *n, serve_error *err) {
    int32_t n_vocab = tessera_model_n_vocab(api->model);
    float b;
    if (cJSON_IsFalse(value)) b = -INFINITY;
    else if (cJSON_IsNumber(value) && value->valuedouble >= -100.0 && value->valuedouble <= 100.0)
        b = value->valuedouble <= -100.0 ? -INFINITY : (float)value->valuedouble;
    else return serve_fail(err, 400, "logit_bias", NULL, "a 'logit_bias' must be a number in -100..100 or false");
    tessera_token ids[64];
    int32_t k = 0;
    char *end = NULL;
    long id = cJSON_IsString(key) ? strtol(key->valuestring, &end, 10) : 0;
    if (cJSON_IsNumber(key) || (end && end != key->valuestring && !*end)) {
        if (cJSON_IsNumber(key)) id = key->valuedouble == floor(key->valuedouble) ? (long)key->valuedouble : -1;
        if (id < 0 || id >= n_vocab)
            return serve_fail(err, 400, "logit_bias", NULL, "'logit_bias' token %ld is not in 0..%d", id, n_vocab - 1);
        ids[k++] = (tessera_token)id;
    } else if (cJSON_IsString(key)) { /* a text: each of its tokens */
        k = tessera_tokenize(api->model, key->valuestring, strlen(key->valuestring), ids, 64, false, false);
        if (k < 0)
            return serve_fail(err, 400, "logit_bias", NULL, "a 'logit_bias' text must be under 64 tokens");
    } else {
        return serve_fail(err, 400, "logit_bias", NULL, "a 'logit_bias' key must be a token id or a text");
    }
    for (int32_t i = 0; i < k; i++) {
        if (*n == SERVE_MAX_BIAS)
            return serve_fail(err, 400, "logit_bias", NULL, "'logit_bias' has more than %d entries", SERVE_MAX_BIAS);
        bias[(*n)++] = (tessera_logit_bias){ids[i], b};
    }
    return 0;
}

/* logit_bias: OpenAI's {"id": bias} or llama-server's [[id or text, bias]]. */
static int get_logit_bias(const serve_api *api, const cJSON *root, tessera_logit_bias *bias, int32_t *n,
                          serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    *n = 0;
    if (is_null(v)) return 0;
    const cJSON *b;
    if (cJSON_IsObject(v)) {
        cJSON_ArrayForEach(b, v) {
            cJSON *key = cJSON_CreateString(b->string);
            int rc = key ? add_bias(api, key, b, bias, n, err) : serve_fail(err, 500, NULL, NULL, "out of memory");
            cJSON_Delete(key);
            if (rc != 0) return -1;
        }
        return 0;
    }
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, "logit_bias", NULL,
                          "'logit_bias' must be an object of token id: bias, or an array of [token, bias]");
    cJSON_ArrayForEach(b, v) {
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
            return serve_fail(err, 400, "logit_bias", NULL, "'logit_bias' array entries must be [token or text, bias]");
        if (add_bias(api, cJSON_GetArrayItem(b, 0), cJSON_GetArrayItem(b, 1), bias, n, err) != 0) return -1;
    }
    return 0;
}

/* llama-server's "samplers": the names of those to use; the others are
 * turned off in sp. Tessera applies them in its own fixed order (penalties,
 * top_k, typical, top_p, min_p, temperature), which is llama.cpp's default. */
static int apply_samplers(const cJSON *root, tessera_sampler_params *sp, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "samplers");
    if (is_null(v)) return 0;
    static const char *const names[] = {"penalties", "top_k", "typ_p", "top_p", "min_p", "temperature",
                                        "dry", "top_n_sigma", "xtc", "typical_p"};
    bool on[10] = {0};
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, "samplers", NULL, "'samplers' must be an array of sampler names");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        size_t i = 0;
        while (i < 10 && !(cJSON_IsString(e) && !strcmp(e->valuestring, names[i]))) i++;
        if (i == 10)
            return serve_fail(err, 400, "samplers", NULL,
                              "'samplers' knows penalties, top_k, typ_p, top_p, min_p, temperature (and dry, "
                              "top_n_sigma, xtc, which are off)");
        on[i] = true;
    }
    if (!on[0]) sp->penalty_repeat = 1.0f, sp->penalty_freq = 0.0f, sp->penalty_present = 0.0f;
    if (!on[1]) sp->top_k = 0;
    if (!on[2] && !on[9]) sp->typical_p = 1.0f;
    if (!on[3]) sp->top_p = 1.0f;
    if (!on[4]) sp->min_p = 0.0f;
    if (!on[5] && sp->temp > 0.0f) sp->temp = 1.0f;
    return 0;
}

/* One sampler per choice from sp plus the request's logit_bias; with a
 * seed, choice i draws from seed + i so that the choices differ and the
 * request is reproducible (seed LLONG_MIN: random). */
static int make_samplers(const serve_api *api, const cJSON *root, serve_request *r, tessera_sampler_params *sp,
                         long long seed, serve_error *err) {
    static const tessera_logit_bias bias_none[1];
    tessera_logit_bias *bias = malloc(SERVE_MAX_BIAS * sizeof *bias);
    if (!bias) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int32_t n_bias = 0;
    if (get_logit_bias(api, root, bias, &n_bias, err) != 0) {
        free(bias);
        return -1;
    }
    sp->seed = seed == LLONG_MIN ? TESSERA_SEED_RANDOM : (uint32_t)((unsigned long long)seed % 0xFFFFFFFFull);
    sp->logit_bias = n_bias ? bias : bias_none;
    sp->n_logit_bias = n_bias;
    for (int32_t c = 0; c < r->n_choices; c++) {
        if (seed != LLONG_MIN)
            sp->seed = (uint32_t)(((unsigned long long)seed + (unsigned long long)c) % 0xFFFFFFFFull);
        r->choices[c].sampler = tessera_sampler_new(tessera_model_n_vocab(api->model), sp);
        if (!r->choices[c].sampler) {
            free(bias);
            return serve_fail(err, 400, NULL, NULL, "%s", tessera_last_error());
        }
    }
    free(bias);
    return 0;
}

/* The sampler from the request's fields; what a request leaves out comes
 * from the server's defaults (--temp, --top-k, ... in api->sampling). */
static int parse_sampling(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    tessera_sampler_params sp = api->sampling ? *api->sampling : tessera_sampler_default_params();
    double temp = sp.temp, top_p = sp.top_p, min_p = sp.min_p, typ = sp.typical_p, rep = sp.penalty_repeat;
    double pres = sp.penalty_present, freq = sp.penalty_freq;
    long long top_k = sp.top_k, last_n = sp.penalty_last_n;
    long long seed = sp.seed == TESSERA_SEED_RANDOM ? LLONG_MIN : (long long)sp.seed; /* LLONG_MIN: none */
    if (get_number(root, "temperature", 0.0, 1e6, &temp, err) || get_number(root, "top_p", 0.0, 1.0, &top_p, err) ||
        get_number(root, "min_p", 0.0, 1.0, &min_p, err) || get_int(root, "top_k", -1, INT32_MAX, &top_k, err) ||
        get_number(root, "typical_p", 0.0, 1.0, &typ, err) ||
        get_number(root, "repeat_penalty", 0.0, 1e6, &rep, err) ||
        get_int(root, "repeat_last_n", -1, INT32_MAX, &last_n, err) ||
        get_number(root, "presence_penalty", -2.0, 2.0, &pres, err) ||
        get_number(root, "frequency_penalty", -2.0, 2.0, &freq, err) ||
        get_int(root, "seed", -9.2e18, 9.2e18, &seed, err))
        return -1;
    if (seed == -1 || seed == 0xFFFFFFFFll) seed = LLONG_MIN; /* llama.cpp's "random" */
    sp.temp = (float)temp;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.top_k = top_k < 0 ? 0 : (int32_t)top_k;
    sp.typical_p = (float)typ;
    sp.penalty_repeat = (float)rep;
    sp.penalty_last_n = last_n < 0 ? api->slot_ctx : (int32_t)last_n;
    sp.penalty_present = (float)pres;
    sp.penalty_freq = (float)freq;
    if (apply_samplers(root, &sp, err) != 0) return -1;
    return make_samplers(api, root, r, &sp, seed, err);
}

/* response_format {"type": "text" | "json_object" | "json_schema"} (with
 * json_schema.schema; llama-server's json_object "schema" too) and
 * llama-server's "grammar" (GBNF). *out: the grammar, NULL for none;
 * *param_out: the field it came from, which a later failure names. */
static int get_grammar(const cJSON *root, tessera_grammar **out, const char **param_out, serve_error *err) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (!is_null(gbnf)) {
        if (!cJSON_IsString(gbnf))
            return serve_fail(err, 400, "grammar", NULL, "'grammar' must be a GBNF string");
        if (!is_null(rf) || !is_null(cJSON_GetObjectItemCaseSensitive(root, "json_schema")))
            return serve_fail(err, 400, "grammar", NULL,
                              "give one of 'grammar', 'json_schema' and 'response_format'");
        *out = tessera_grammar_parse(gbnf->valuestring, strlen(gbnf->valuestring), NULL);
        *param_out = "grammar";
        return *out ? 0 : serve_fail(err, 400, "grammar", NULL, "%s", tessera_last_error());
    }
    const cJSON *js_top = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
    if (!is_null(js_top)) { /* llama-server's: the schema itself */
        if (!is_null(rf))
            return serve_fail(err, 400, "json_schema", NULL, "give 'json_schema' or 'response_format', not both");
        char *text = cJSON_PrintUnformatted(js_top);
        if (!text) return serve_fail(err, 500, NULL, NULL, "out of memory");
        *out = tessera_grammar_from_json_schema(text, strlen(text));
        *param_out = "json_schema";
        free(text);
        return *out ? 0 : serve_fail(err, 400, "json_schema", NULL, "'json_schema': %s", tessera_last_error());
    }
    if (is_null(rf)) return 0;
    const char *bad_type =
        "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"";
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return serve_fail(err, 400, "response_format", NULL, "%s", bad_type);
    const cJSON *schema = NULL;
    const char *param = "response_format.json_schema.schema";
    if (!strcmp(type->valuestring, "text")) return 0;
    if (!strcmp(type->valuestring, "json_object")) {
        schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
        param = "response_format.schema";
        if (is_null(schema)) {
            *param_out = "response_format";
            *out = tessera_grammar_json_object();
            return *out ? 0 : serve_fail(err, 500, NULL, NULL, "%s", tessera_last_error());
        }
    } else if (!strcmp(type->valuestring, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        if (!cJSON_IsObject(js))
            return serve_fail(err, 400, "response_format.json_schema", NULL,
                              "'response_format.json_schema' must be an object");
        schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (is_null(schema)) return serve_fail(err, 400, param, NULL, "'%s' is required", param);
    } else {
        return serve_fail(err, 400, "response_format.type", NULL, "%s", bad_type);
    }
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return serve_fail(err, 500, NULL, NULL, "out of memory");
    *out = tessera_grammar_from_json_schema(text, strlen(text));
    *param_out = param;
    free(text);
    return *out ? 0 : serve_fail(err, 400, param, NULL, "'%s': %s", param, tessera_last_error());
}

/* ------------------------------------------------------------ prompts */

static int tokenize_text(const serve_api *api, const char *text, size_t len, bool add_special,
                         serve_request *r, const char *param, serve_error *err) {
    int32_t n = tessera_tokenize(api->model, text, len, NULL, 0, add_special, true);
    if (n == INT32_MIN)
        return serve_fail(err, 400, param, NULL, "cannot tokenize '%s': %s", param, tessera_last_error());
    if (n < 0) n = -n;
    if (n == 0) return serve_fail(err, 400, param, NULL, "'%s' gives no tokens", param);
    if (n >= api->slot_ctx)
        return serve_fail(err, 400, param, "context_length_exceeded",
                    "the prompt has %d tokens, a slot's context holds %d (-c / --parallel)", n,
                    api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) return serve_fail(err, 500, NULL, NULL, "out of memory");
    r->n_prompt = tessera_tokenize(api->model, text, len, r->prompt, n, add_special, true);
    if (r->n_prompt != n) return serve_fail(err, 500, param, NULL, "tokenization changed between calls");
    return 0;
}

/* Message content: a string, null, or an array of {"type": "text", "text"}
 * parts, joined with a newline as llama-server joins them (measured: its
 * prompt for ["What is", "the best book"] has the two tokens of "\n" and
 * the unspaced "the" more than "What is the best book"). */
static int message_text(const cJSON *content, char **out, serve_error *err) {
    if (is_null(content)) {
        *out = strdup("");
    } else if (cJSON_IsString(content)) {
        *out = strdup(content->valuestring);
    } else if (cJSON_IsArray(content)) {
        size_t len = 0;
        const cJSON *part;
        cJSON_ArrayForEach(part, content) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
                return serve_fail(err, 400, "messages", NULL,
                            "message content parts must be {\"type\": \"text\", \"text\": ...}");
            len += strlen(text->valuestring) + 1;
        }
        *out = malloc(len + 1);
        if (*out) {
            size_t o = 0;
            cJSON_ArrayForEach(part, content) {
                const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
                if (o > 0) (*out)[o++] = '\n';
                memcpy(*out + o, t, strlen(t));
                o += strlen(t);
            }
            (*out)[o] = '\0';
        }
    } else {
        return serve_fail(err, 400, "messages", NULL,
                    "message 'content' must be a string or an array of text parts");
    }
    return *out ? 0 : serve_fail(err, 500, NULL, NULL, "out of memory");
}

/* Append s to a malloc'd string (NULL stays NULL: out of memory). */
static char *append(char *acc, const char *s) {
    if (!acc) return NULL;
    size_t a = strlen(acc), n = strlen(s);
    char *out = realloc(acc, a + n + 1);
    if (!out) {
        free(acc);
        return NULL;
    }
    memcpy(out + a, s, n + 1);
    return out;
}

/* The reply rules of a chat request: reasoning markers when the model's
 * template uses them, tool-call parsing when tools are offered. */
static void reply_rules(const serve_api *api, const cJSON *root, const serve_tools *tools, const char *prompt_text,
                        bool native_tools, serve_reply_rules *rules) {
    const char *tmpl = tessera_chat_template_source(api->tmpl);
    /* reasoning_format "none" (the request's, else --reasoning-format) leaves it in content */
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "reasoning_format");
    const char *format = cJSON_IsString(rf) ? rf->valuestring : api->reasoning_format;
    if (format && !strcmp(format, "none")) tmpl = NULL;
    if (tmpl && strstr(tmpl, "<think>")) {
        rules->think_open = "<think>";
        rules->think_close = "</think>";
    } else if (tmpl && strstr(tmpl, "[THINK]")) {
        rules->think_open = "[THINK]";
        rules->think_close = "[/THINK]";
    }
    if (rules->think_open) { /* a generation prompt that opens the reasoning */
        size_t n = strlen(prompt_text), k = strlen(rules->think_open);
        while (n > 0 && strchr(" \n", prompt_text[n - 1])) n--;
        rules->starts_in_think = n >= k && !memcmp(prompt_text + n - k, rules->think_open, k);
    }
    rules->tools = tools->choice != SERVE_TOOLS_NONE;
    /* A template that renders the tools itself asks for its own call
     * syntax; else the tools were offered Hermes style. */
    rules->tool_format = native_tools ? chat_tool_format_detect(tessera_chat_template_source(api->tmpl))
                                      : CHAT_TOOLS_HERMES;
}

/* The template variables a request adds beside messages and tools:
 * add_generation_prompt (the request's, default true), date_string (today,
 * as "28 Nov 2026"; date-aware templates print it) and each key of
 * chat_template_kwargs (enable_thinking...), which may override both.
 * 0, or -1 with *err filled. */
static int add_template_extras(cJSON *vars, const cJSON *root, serve_error *err) {
    const cJSON *agp = cJSON_GetObjectItemCaseSensitive(root, "add_generation_prompt");
    if (!is_null(agp) && !cJSON_IsBool(agp))
        return serve_fail(err, 400, "add_generation_prompt", NULL, "'add_generation_prompt' must be true or false");
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%d %b %Y", &tm);
    if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", is_null(agp) || cJSON_IsTrue(agp)) ||
        !cJSON_AddStringToObject(vars, "date_string", date))
        return serve_fail(err, 500, NULL, NULL, "out of memory");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (is_null(kw)) return 0;
    if (!cJSON_IsObject(kw))
        return serve_fail(err, 400, "chat_template_kwargs", NULL, "'chat_template_kwargs' must be an object");
    const cJSON *v;
    cJSON_ArrayForEach(v, kw) {
        if (!strcmp(v->string, "messages") || !strcmp(v->string, "tools"))
            return serve_fail(err, 400, "chat_template_kwargs", NULL,
                              "'chat_template_kwargs' may not set '%s' (the request's own field)", v->string);
        cJSON *copy = cJSON_Duplicate(v, 1);
        if (!copy) return serve_fail(err, 500, NULL, NULL, "out of memory");
        cJSON_DeleteItemFromObjectCaseSensitive(vars, v->string);
        cJSON_AddItemToObject(vars, v->string, copy);
    }
    return 0;
}

/* Render the template with messages m[0..k) as plain role/content and the
 * request's extras (add_template_extras). */
static char *render_plain(const serve_api *api, const cJSON *root, const tessera_chat_message *m, int k,
                          size_t *len, serve_error *err) {
    cJSON *vars = cJSON_CreateObject();
    cJSON *list = vars ? cJSON_AddArrayToObject(vars, "messages") : NULL;
    char *json = NULL, *text = NULL;
    bool ok = list != NULL;
    for (int i = 0; ok && i < k; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddStringToObject(o, "role", m[i].role) && cJSON_AddStringToObject(o, "content", m[i].content);
        if (o) cJSON_AddItemToArray(list, o);
    }
    if (!ok) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
    } else if (add_template_extras(vars, root, err) == 0) {
        json = cJSON_PrintUnformatted(vars);
        text = json ? tessera_chat_template_apply(api->tmpl, json, len) : NULL;
        if (!json) serve_fail(err, 500, NULL, NULL, "out of memory");
        else if (!text)
            serve_fail(err, 400, "messages", NULL, "the chat template refuses the conversation: %s",
                       tessera_last_error());
    }
    free(json);
    cJSON_Delete(vars);
    return text;
}

/* The request's messages through the chat template as the template's own
 * variables: each message object as given (tool_calls, tool_call_id, name,
 * reasoning_content reach the template), its role checked ("developer" read
 * as "system") and its content reduced to text; the request's tools;
 * add_generation_prompt on. Returns the malloc'd prompt text, or NULL with
 * *err filled. */
static char *render_messages(const serve_api *api, const cJSON *root, size_t *len, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (is_null(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' is required"), NULL;
    if (!cJSON_IsArray(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' must be an array"), NULL;
    if (cJSON_GetArraySize(msgs) == 0) return serve_fail(err, 400, "messages", NULL, "'messages' is empty"), NULL;
    cJSON *vars = cJSON_CreateObject();
    cJSON *list = vars ? cJSON_AddArrayToObject(vars, "messages") : NULL;
    char *json = NULL, *text = NULL;
    if (!list) goto oom;
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            serve_fail(err, 400, "messages", NULL, "message %d must be an object with a string 'role'", i);
            goto done;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool")) {
            serve_fail(err, 400, "messages", NULL,
                       "message %d has role '%.32s' (system, developer, user, assistant or tool)", i, rs);
            goto done;
        }
        char *content = NULL;
        if (message_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), &content, err) != 0) goto done;
        cJSON *copy = cJSON_Duplicate(msg, 1);
        cJSON *rv = cJSON_CreateString(rs), *cv = cJSON_CreateString(content);
        free(content);
        if (!copy || !rv || !cv) {
            cJSON_Delete(copy);
            cJSON_Delete(rv);
            cJSON_Delete(cv);
            goto oom;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "role");
        cJSON_DeleteItemFromObjectCaseSensitive(copy, "content");
        cJSON_AddItemToObject(copy, "role", rv);
        cJSON_AddItemToObject(copy, "content", cv);
        cJSON_AddItemToArray(list, copy);
        i++;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!is_null(tools)) {
        cJSON *t = cJSON_Duplicate(tools, 1);
        if (!t) goto oom;
        cJSON_AddItemToObject(vars, "tools", t);
    }
    if (add_template_extras(vars, root, err) != 0) goto done;
    json = cJSON_PrintUnformatted(vars);
    if (!json) goto oom;
    text = tessera_chat_template_apply(api->tmpl, json, len);
    if (!text)
        serve_fail(err, 400, "messages", NULL, "the chat template refuses the conversation: %s", tessera_last_error());
    goto done;
oom:
    serve_fail(err, 500, NULL, NULL, "out of memory");
done:
    free(json);
    cJSON_Delete(vars);
    return text;
}

char *serve_api_apply_template(const serve_api *api, const char *body, size_t len, serve_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object with 'messages'");
        return NULL;
    }
    size_t n = 0;
    char *text = render_messages(api, root, &n, err);
    cJSON_Delete(root);
    if (!text) return NULL;
    cJSON *out = cJSON_CreateObject();
    char *json = out && add_text(out, "prompt", text, n) ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    free(text);
    if (!json) serve_fail(err, 500, NULL, NULL, "out of memory");
    return json;
}

/* The conversation into r's prompt; *grammar: the constraint tool_choice
 * asks for (NULL: none). */
static int parse_messages(const serve_api *api, const cJSON *root, serve_request *r,
                          tessera_grammar **grammar, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (is_null(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' is required");
    if (!cJSON_IsArray(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return serve_fail(err, 400, "messages", NULL, "'messages' is empty");
    serve_tools tools;
    if (serve_tools_parse(root, &tools, err) != 0) {
        serve_tools_free(&tools);
        return -1;
    }
    /* One extra slot: a system message carrying the tools. */
    tessera_chat_message *m = calloc((size_t)n + 1, sizeof *m);
    char **texts = calloc((size_t)n + 1, sizeof *texts);
    char *text = NULL;
    int rc = -1, k = 0;
    size_t len = 0;
    if (!m || !texts) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    /* A template that writes the tools itself gets them (and the messages
     * as given); else they are offered Hermes style in the system message,
     * calls and results as text, through the same template. */
    bool native_tools = tools.choice != SERVE_TOOLS_NONE && strstr(tessera_chat_template_source(api->tmpl), "tools");
    if (native_tools) {
        text = render_messages(api, root, &len, err);
        if (!text) goto done;
        goto rendered;
    }
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            serve_fail(err, 400, "messages", NULL, "message %d must be an object with a string 'role'", i);
            goto done;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        bool tool = !strcmp(rs, "tool");
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && !tool) {
            serve_fail(err, 400, "messages", NULL,
                       "message %d has role '%.32s' (system, developer, user, assistant or tool)", i, rs);
            goto done;
        }
        char *content = NULL;
        if (message_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), &content, err) != 0) goto done;
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
        if (!is_null(calls) && (strcmp(rs, "assistant") || !cJSON_IsArray(calls))) {
            free(content);
            serve_fail(err, 400, "messages", NULL,
                       "message %d: 'tool_calls' must be an array on an assistant message", i);
            goto done;
        }
        if (!is_null(calls) && cJSON_GetArraySize(calls) > 0) {
            char *ct = serve_tools_calls_text(calls, err);
            if (!ct) {
                free(content);
                goto done;
            }
            if (content[0]) content = append(content, "\n");
            content = append(content, ct);
            free(ct);
        }
        if (tool) { /* tool results: a user turn of <tool_response> blocks, consecutive ones merged */
            char *t = append(strdup("<tool_response>\n"), content);
            free(content);
            content = append(t, "\n</tool_response>");
            if (content && k > 0 && !strcmp(m[k - 1].role, "tool")) {
                texts[k - 1] = append(append(texts[k - 1], "\n"), content);
                free(content);
                if (!texts[k - 1]) {
                    serve_fail(err, 500, NULL, NULL, "out of memory");
                    goto done;
                }
                m[k - 1].content = texts[k - 1];
                i++;
                continue;
            }
        }
        if (!content) {
            serve_fail(err, 500, NULL, NULL, "out of memory");
            goto done;
        }
        texts[k] = content;
        m[k].role = tool ? "tool" : rs;
        m[k].content = content;
        k++;
        i++;
    }
    for (int j = 0; j < k; j++)
        if (!strcmp(m[j].role, "tool")) m[j].role = "user";
    if (tools.choice != SERVE_TOOLS_NONE) { /* the tools go into the system message */
        char *sys = serve_tools_system_text(&tools);
        if (k > 0 && !strcmp(m[0].role, "system")) {
            texts[0] = append(append(texts[0], "\n\n"), sys ? sys : "");
            m[0].content = texts[0];
            free(sys);
        } else {
            memmove(m + 1, m, (size_t)k * sizeof *m);
            memmove(texts + 1, texts, (size_t)k * sizeof *texts);
            m[0] = (tessera_chat_message){.role = "system", .content = sys};
            texts[0] = sys;
            k++;
        }
        if (!texts[0]) {
            serve_fail(err, 500, NULL, NULL, "out of memory");
            goto done;
        }
    }
    text = render_plain(api, root, m, k, &len, err);
    if (!text) goto done;
rendered:
    reply_rules(api, root, &tools, text, native_tools, &r->rules);
    char *prefill = serve_tools_prefill(&tools, r->rules.tool_format);
    if (prefill) { /* the reply starts with it: prompt and generated text both get it */
        text = append(text, prefill);
        for (int32_t c = 0; c < r->n_choices; c++)
            if (serve_text_append(&r->choices[c], prefill, strlen(prefill)) != 0) text = NULL;
        free(prefill);
        if (!text) {
            serve_fail(err, 500, NULL, NULL, "out of memory");
            goto done;
        }
        len = strlen(text);
    }
    char *gbnf = serve_tools_grammar(&tools, err);
    if (!gbnf && err->status) goto done;
    if (gbnf) {
        *grammar = tessera_grammar_parse(gbnf, strlen(gbnf), NULL);
        free(gbnf);
        if (!*grammar) {
            serve_fail(err, 500, "tool_choice", NULL, "the tool-call grammar does not parse: %s",
                       tessera_last_error());
            goto done;
        }
    }
    if (r->rules.tools) {
        r->rules.tool_names = tools.names;
        r->rules.n_tool_names = tools.n;
        tools.names = NULL;
        for (int j = 0; j < tools.n; j++) free(tools.json[j]);
        tools.n = 0;
    }
    rc = tokenize_text(api, text, len, !tessera_chat_template_text_has_bos(api->tmpl, text, len), r, "messages",
                       err);
done:
    free(text);
    if (texts)
        for (int j = 0; j < n + 1; j++) free(texts[j]);
    free(texts);
    free(m);
    serve_tools_free(&tools);
    return rc;
}

/* A prompt field holds one prompt (a string, token ids, a flat mix of
 * both, or llama-server's {"prompt_string": ...}) or a list of them (OpenAI's
 * batch: strings or token-id arrays). Returns the k-th and sets *count. */
static const cJSON *prompt_at(const cJSON *p, int k, int *count) {
    *count = 1;
    if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0) return p;
    const cJSON *e;
    cJSON_ArrayForEach(e, p)
        if (cJSON_IsNumber(e)) return p; /* token ids (maybe mixed with text): one prompt */
    *count = cJSON_GetArraySize(p);
    return cJSON_GetArrayItem(p, k < *count ? k : 0);
}

int serve_api_count_prompts(serve_kind kind, const char *body, size_t len) {
    if (kind == SERVE_CHAT || kind == SERVE_INFILL) return 1;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int count = 1;
    const cJSON *p = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "prompt") : NULL;
    if (p) prompt_at(p, 0, &count);
    cJSON_Delete(root);
    return count;
}

/* Append tokens to r->prompt (capacity *cap), refusing more than a slot holds. */
static int prompt_push(const serve_api *api, serve_request *r, int32_t *cap, const tessera_token *t, int32_t n,
                       const char *param, serve_error *err) {
    if ((int64_t)r->n_prompt + n >= api->slot_ctx)
        return serve_fail(err, 400, param, "context_length_exceeded",
                          "the prompt has %lld tokens, a slot's context holds %d (-c / --parallel)",
                          (long long)r->n_prompt + n, api->slot_ctx);
    if (r->n_prompt + n > *cap) {
        int32_t c = *cap ? *cap : 64;
        while (c < r->n_prompt + n) c *= 2;
        tessera_token *grown = realloc(r->prompt, (size_t)c * sizeof *grown);
        if (!grown) return serve_fail(err, 500, NULL, NULL, "out of memory");
        r->prompt = grown;
        *cap = c;
    }
    memcpy(r->prompt + r->n_prompt, t, (size_t)n * sizeof *t);
    r->n_prompt += n;
    return 0;
}

/* Tokenize text (special tokens written as text are parsed) onto r->prompt. */
static int prompt_push_text(const serve_api *api, serve_request *r, int32_t *cap, const char *text, bool add_special,
                            const char *param, serve_error *err) {
    size_t len = strlen(text);
    int32_t n = tessera_tokenize(api->model, text, len, NULL, 0, add_special, true);
    if (n == INT32_MIN)
        return serve_fail(err, 400, param, NULL, "cannot tokenize '%s': %s", param, tessera_last_error());
    if (n < 0) n = -n;
    if (n == 0) return 0;
    if (n >= api->slot_ctx)
        return serve_fail(err, 400, param, "context_length_exceeded",
                          "the prompt has %d tokens, a slot's context holds %d (-c / --parallel)", n, api->slot_ctx);
    tessera_token *t = malloc((size_t)n * sizeof *t);
    if (!t) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int rc = tessera_tokenize(api->model, text, len, t, n, add_special, true) == n
                 ? prompt_push(api, r, cap, t, n, param, err)
                 : serve_fail(err, 500, param, NULL, "tokenization changed between calls");
    free(t);
    return rc;
}

/* One prompt (see prompt_at) into r->prompt. Text gets the model's BOS when
 * it starts the prompt, as llama-server does. */
static int prompt_tokens(const serve_api *api, const cJSON *p, serve_request *r, serve_error *err) {
    int32_t cap = 0, n_vocab = tessera_model_n_vocab(api->model);
    if (cJSON_IsObject(p)) {
        if (!is_null(cJSON_GetObjectItemCaseSensitive(p, "multimodal_data")))
            return serve_fail(err, 400, "prompt", "unsupported_parameter",
                              "'prompt.multimodal_data': this server has no vision or audio input");
        p = cJSON_GetObjectItemCaseSensitive(p, "prompt_string");
        if (!cJSON_IsString(p))
            return serve_fail(err, 400, "prompt", NULL, "a prompt object needs a 'prompt_string'");
    }
    if (cJSON_IsString(p)) {
        if (prompt_push_text(api, r, &cap, p->valuestring, true, "prompt", err) != 0) return -1;
    } else if (cJSON_IsArray(p)) {
        const cJSON *t;
        cJSON_ArrayForEach(t, p) {
            if (cJSON_IsString(t)) {
                if (prompt_push_text(api, r, &cap, t->valuestring, r->n_prompt == 0, "prompt", err) != 0) return -1;
                continue;
            }
            if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
                t->valuedouble >= n_vocab)
                return serve_fail(err, 400, "prompt", NULL,
                                  "'prompt' items must be strings or token ids in 0..%d", n_vocab - 1);
            tessera_token id = (tessera_token)t->valuedouble;
            if (prompt_push(api, r, &cap, &id, 1, "prompt", err) != 0) return -1;
        }
    } else {
        return serve_fail(err, 400, "prompt", NULL,
                          "'prompt' must be a string, token ids, or a list of strings or token-id arrays");
    }
    if (r->n_prompt == 0) return serve_fail(err, 400, "prompt", NULL, "'prompt' is empty");
    return 0;
}

static int parse_prompt(const serve_api *api, const cJSON *root, int index, serve_request *r, serve_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (is_null(p)) return serve_fail(err, 400, "prompt", NULL, "'prompt' is required");
    int count;
    return prompt_tokens(api, prompt_at(p, index, &count), r, err);
}

/* The id of the first of names[] that is one special token of the
 * vocabulary, or -1. */
static tessera_token special_token(const serve_api *api, const char *const *names) {
    for (; *names; names++) {
        tessera_token t[2];
        if (tessera_tokenize(api->model, *names, strlen(*names), t, 2, false, true) == 1) {
            char piece[64];
            int32_t n = tessera_token_to_piece(api->model, t[0], piece, sizeof piece - 1, true);
            if (n == (int32_t)strlen(*names) && !memcmp(piece, *names, (size_t)n)) return t[0];
        }
    }
    return -1;
}

/* A string field of /infill ("" when absent). */
static int infill_text(const cJSON *root, const char *key, const char **out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    *out = "";
    if (is_null(v)) return 0;
    if (!cJSON_IsString(v)) return serve_fail(err, 400, key, NULL, "'%s' must be a string", key);
    *out = v->valuestring;
    return 0;
}

/* /infill: fill-in-the-middle with the vocabulary's FIM tokens, as
 * [BOS] {FILE_SEP filename \n text}... FIM_PRE prefix FIM_SUF suffix FIM_MID prompt
 * (input_extra chunks without a file-separator token are plain text before
 * the prefix). A model without FIM tokens is a 400. */
static int parse_infill(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    static const char *const pre_n[] = {"<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>", "<PRE>", "▁<PRE>", NULL};
    static const char *const suf_n[] = {"<|fim_suffix|>", "<fim_suffix>", "<fim-suffix>", "<SUF>", "▁<SUF>", NULL};
    static const char *const mid_n[] = {"<|fim_middle|>", "<fim_middle>", "<fim-middle>", "<MID>", "▁<MID>", NULL};
    static const char *const sep_n[] = {"<|file_sep|>", "<file_sep>", NULL};
    tessera_token pre = special_token(api, pre_n), suf = special_token(api, suf_n), mid = special_token(api, mid_n);
    tessera_token sep = special_token(api, sep_n), bos = tessera_token_bos(api->model);
    if (pre < 0 || suf < 0 || mid < 0)
        return serve_fail(err, 400, "input_prefix", "unsupported_parameter",
                          "this model's vocabulary has no fill-in-the-middle tokens (<fim_prefix>...)");
    const char *prefix, *suffix, *prompt;
    if (infill_text(root, "input_prefix", &prefix, err) || infill_text(root, "input_suffix", &suffix, err) ||
        infill_text(root, "prompt", &prompt, err))
        return -1;
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(root, "input_extra");
    if (!is_null(extra) && !cJSON_IsArray(extra))
        return serve_fail(err, 400, "input_extra", NULL, "'input_extra' must be an array of {filename, text}");
    int32_t cap = 0;
    if (bos >= 0 && prompt_push(api, r, &cap, &bos, 1, "input_prefix", err) != 0) return -1;
    const cJSON *chunk;
    cJSON_ArrayForEach(chunk, extra) {
        const char *name, *text;
        if (!cJSON_IsObject(chunk) || infill_text(chunk, "filename", &name, err) || infill_text(chunk, "text", &text, err))
            return err->status ? -1
                               : serve_fail(err, 400, "input_extra", NULL, "'input_extra' items must be {filename, text}");
        if (sep >= 0 && (prompt_push(api, r, &cap, &sep, 1, "input_extra", err) ||
                         prompt_push_text(api, r, &cap, name, false, "input_extra", err) ||
                         prompt_push_text(api, r, &cap, "\n", false, "input_extra", err)))
            return -1;
        if (prompt_push_text(api, r, &cap, text, false, "input_extra", err) != 0) return -1;
    }
    if (prompt_push(api, r, &cap, &pre, 1, "input_prefix", err) ||
        prompt_push_text(api, r, &cap, prefix, false, "input_prefix", err) ||
        prompt_push(api, r, &cap, &suf, 1, "input_suffix", err) ||
        prompt_push_text(api, r, &cap, suffix, false, "input_suffix", err) ||
        prompt_push(api, r, &cap, &mid, 1, "prompt", err) || prompt_push_text(api, r, &cap, prompt, false, "prompt", err))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ requests */

enum { FOR_CHAT = 1, FOR_COMPLETION = 2, FOR_BOTH = 3, FOR_NATIVE = 4, FOR_ALL = 7 };

/* Every request field Tessera reads. A field not in this table is ignored
 * and named in the request log (clients send many: llama.cpp and vLLM do
 * the same); a field in it whose value asks for something Tessera does not
 * do is a 400 naming it (see check_restricted). FOR_NATIVE: llama-server's
 * /completion and /infill. */
static const struct field {
    const char *name;
    int kinds;
    const char *what; /* for the docs and the reader */
} FIELDS[] = {
    {"model", FOR_ALL, "accepted; the server has one model"},
    {"messages", FOR_CHAT,
     "the conversation (roles system, developer, user, assistant with tool_calls, tool)"},
    {"prompt", FOR_COMPLETION | FOR_NATIVE, "a string, token ids, a mix, or a list of prompts"},
    {"max_tokens", FOR_ALL, "tokens to generate per choice"},
    {"max_completion_tokens", FOR_CHAT, "the same, newer name"},
    {"n_predict", FOR_ALL, "llama.cpp's name of max_tokens (-1: no limit)"},
    {"temperature", FOR_ALL, "0 is greedy"},
    {"top_p", FOR_ALL, NULL},
    {"top_k", FOR_ALL, "extension"},
    {"min_p", FOR_ALL, "extension"},
    {"typical_p", FOR_ALL, "extension"},
    {"repeat_penalty", FOR_ALL, "extension"},
    {"repeat_last_n", FOR_ALL, "extension: tokens the penalties look back (-1: the context)"},
    {"samplers", FOR_ALL, "extension: the samplers to use (llama.cpp's names); their order is Tessera's"},
    {"n", FOR_COMPLETION | FOR_CHAT, "choices, each its own sequence in its own slot; at most --parallel"},
    {"best_of", FOR_COMPLETION, "only 1 or equal to n"},
    {"stream", FOR_ALL, NULL},
    {"stream_options", FOR_ALL, "include_usage"},
    {"stop", FOR_ALL, "up to 4 strings, cut from the output"},
    {"seed", FOR_ALL, "choice i samples with seed + i"},
    {"presence_penalty", FOR_ALL, NULL},
    {"frequency_penalty", FOR_ALL, NULL},
    {"logit_bias", FOR_ALL, "token id -> bias; -100 bans (llama.cpp's [[id or text, bias]] too)"},
    {"logprobs", FOR_COMPLETION | FOR_CHAT, "chat: true/false; completions: 0..20 alternatives"},
    {"top_logprobs", FOR_CHAT, "0..20 alternatives per token"},
    {"n_probs", FOR_ALL, "llama.cpp's: alternatives per token in completion_probabilities"},
    {"post_sampling_probs", FOR_NATIVE, "only false"},
    {"tools", FOR_CHAT, "functions the model may call"},
    {"tool_choice", FOR_CHAT, "auto, none, required or a named function"},
    {"parallel_tool_calls", FOR_CHAT, "false keeps the first call only"},
    {"response_format", FOR_ALL, "text, json_object, json_schema: a grammar constrains the output"},
    {"grammar", FOR_ALL, "llama-server's GBNF grammar"},
    {"json_schema", FOR_ALL, "llama-server's: a JSON Schema the output follows"},
    {"echo", FOR_COMPLETION, "only false"},
    {"suffix", FOR_COMPLETION, "only null or empty"},
    {"user", FOR_ALL, "accepted and ignored (an end-user id for abuse tracking)"},
    {"store", FOR_ALL, "accepted and ignored (Tessera stores nothing)"},
    {"metadata", FOR_ALL, "accepted and ignored (tags for stored completions)"},
    {"cache_prompt", FOR_ALL, "extension: reuse a slot's cached prompt prefix"},
    {"id_slot", FOR_ALL, "extension: the slot to run in (-1: any)"},
    {"return_tokens", FOR_NATIVE, "the generated token ids in 'tokens'"},
    {"response_fields", FOR_NATIVE, "only these fields of the response ('a/b' reaches into objects)"},
    {"ignore_eos", FOR_ALL, "extension: only false"},
    {"add_generation_prompt", FOR_CHAT, "the template's add_generation_prompt (default true)"},
    {"chat_template_kwargs", FOR_CHAT, "extension: extra variables of the chat template (enable_thinking...)"},
    {"reasoning_format", FOR_CHAT, "extension: none keeps <think> in content; else reasoning_content"},
    {"input_prefix", FOR_NATIVE, "/infill: the code before the cursor"},
    {"input_suffix", FOR_NATIVE, "/infill: the code after it"},
    {"input_extra", FOR_NATIVE, "/infill: other files, [{filename, text}]"},
    {"functions", FOR_CHAT, "OpenAI's deprecated function calling: only null (use tools)"},
    {"function_call", FOR_CHAT, "the same: only null (use tool_choice)"},
    /* llama.cpp samplers Tessera does not have: accepted only when off */
    {"mirostat", FOR_ALL, "only 0"},
    {"dry_multiplier", FOR_ALL, "only 0"},
    {"xtc_probability", FOR_ALL, "only 0"},
    {"dynatemp_range", FOR_ALL, "only 0"},
};

/* Known fields whose only accepted value is "off" (0 or null). */
static int check_off(const cJSON *root, serve_error *err) {
    static const char *const off[] = {"mirostat", "dry_multiplier", "xtc_probability", "dynatemp_range",
                                      "functions", "function_call"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, off[i]);
        if (!is_null(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0.0))
            return serve_fail(err, 400, off[i], "unsupported_parameter", "'%s' is not implemented%s", off[i],
                              off[i][0] == 'f' ? " (use 'tools' and 'tool_choice')" : " (give 0 or leave it out)");
    }
    return 0;
}

/* A field not in FIELDS for this kind: named (comma-separated, as many as
 * fit) in *ignored for the request log. */
static void note_ignored(char *ignored, size_t cap, const char *name) {
    size_t n = strlen(ignored);
    if (n + strlen(name) + 2 >= cap) return;
    snprintf(ignored + n, cap - n, "%s%s", n ? "," : "", name);
}

static int check_fields(const cJSON *root, serve_kind kind, serve_call *call, serve_error *err) {
    int want = kind == SERVE_CHAT ? FOR_CHAT : kind == SERVE_COMPLETION ? FOR_COMPLETION : FOR_NATIVE;
    const cJSON *f;
    cJSON_ArrayForEach(f, root) {
        size_t i = 0;
        while (i < sizeof FIELDS / sizeof *FIELDS && strcmp(FIELDS[i].name, f->string)) i++;
        if (i == sizeof FIELDS / sizeof *FIELDS)
            note_ignored(call->ignored, sizeof call->ignored, f->string);
        else if (!(FIELDS[i].kinds & want) && !is_null(f)) /* known, but not here: it would be lost */
            return serve_fail(err, 400, f->string, "unsupported_parameter", "'%.64s' is not a field of %s",
                              f->string,
                              want == FOR_CHAT ? "/v1/chat/completions" : want == FOR_COMPLETION ? "/v1/completions"
                                                                                                 : "/completion");
    }
    if (check_off(root, err) != 0) return -1;
    /* Fields accepted only with the values that ask for nothing missing. */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (want == FOR_COMPLETION && !is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "echo", "unsupported_parameter", "'echo' true is not implemented");
    v = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (want == FOR_COMPLETION && !is_null(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return serve_fail(err, 400, "suffix", "unsupported_parameter",
                          "'suffix' (insertion) is not implemented on /v1/completions; use /infill");
    v = cJSON_GetObjectItemCaseSensitive(root, "post_sampling_probs");
    if (want == FOR_NATIVE && !is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "post_sampling_probs", "unsupported_parameter",
                          "'post_sampling_probs' true is not implemented (probabilities are the model's, "
                          "before sampling)");
    v = cJSON_GetObjectItemCaseSensitive(root, "ignore_eos");
    if (!is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "ignore_eos", "unsupported_parameter", "'ignore_eos' true is not implemented");
    v = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (!is_null(v) && !cJSON_IsString(v))
        return serve_fail(err, 400, "user", NULL, "'user' must be a string");
    v = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!is_null(v) && !cJSON_IsObject(v))
        return serve_fail(err, 400, "metadata", NULL, "'metadata' must be an object");
    return 0;
}

/* logprobs / top_logprobs into r->top_logprobs (-1: none). */
static int parse_logprobs(const cJSON *root, serve_kind kind, serve_request *r, serve_error *err) {
    long long top = -1;
    if (kind == SERVE_NATIVE || kind == SERVE_INFILL) return 0; /* n_probs (parse_options) */
    if (kind == SERVE_COMPLETION) {
        if (get_int(root, "logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &top, err)) return -1;
    } else {
        bool on = false;
        if (get_bool(root, "logprobs", &on, err)) return -1;
        long long k = -1;
        if (get_int(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &k, err)) return -1;
        if (k >= 0 && !on)
            return serve_fail(err, 400, "top_logprobs", NULL, "'top_logprobs' needs 'logprobs': true");
        top = on ? (k < 0 ? 0 : k) : -1;
    }
    r->top_logprobs = (int32_t)top;
    return 0;
}

/* max_tokens (or its other names), n, best_of and id_slot into r (made
 * here, with n choices). llama-server's n_predict is capped by the server's
 * -n, as llama-server does; an OpenAI max_tokens is not. */
static int parse_limits(const serve_api *api, const cJSON *root, serve_kind kind, serve_request **out,
                        serve_error *err) {
    long long max_tokens = -1, n = 1, best_of = 0, id_slot = -1;
    const char *mt_key = kind == SERVE_CHAT && cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    bool n_predict = is_null(cJSON_GetObjectItemCaseSensitive(root, mt_key));
    if (n_predict) mt_key = "n_predict";
    if (get_int(root, mt_key, n_predict ? -1 : 1, INT32_MAX, &max_tokens, err) ||
        get_int(root, "n", 1, 1e9, &n, err) || get_int(root, "best_of", 1, 1e9, &best_of, err) ||
        get_int(root, "id_slot", -1, api->n_slots - 1, &id_slot, err))
        return -1;
    if (n_predict && max_tokens == 0)
        return serve_fail(err, 400, "n_predict", NULL, "'n_predict' 0 asks for nothing; give -1 or >= 1");
    if (n > api->n_slots)
        return serve_fail(err, 400, "n", NULL, "'n' is %lld, more than the %d slots (--parallel)", n, api->n_slots);
    if (best_of && best_of != 1 && best_of != n)
        return serve_fail(err, 400, "best_of", "unsupported_parameter",
                          "'best_of' other than 1 or n is not implemented");
    if (id_slot >= 0 && n > 1)
        return serve_fail(err, 400, "id_slot", NULL, "'id_slot' names one slot; 'n' %lld needs %lld", n, n);
    if (max_tokens < 0 && api->default_max_tokens > 0) max_tokens = api->default_max_tokens;
    if (n_predict && api->default_max_tokens > 0 && max_tokens > api->default_max_tokens)
        max_tokens = api->default_max_tokens;
    *out = serve_request_new((int32_t)n);
    if (!*out) return serve_fail(err, 500, NULL, NULL, "out of memory");
    (*out)->max_tokens = (int32_t)max_tokens;
    (*out)->id_slot = (int32_t)id_slot;
    return 0;
}

/* stream, stream_options, cache_prompt and llama-server's return_tokens,
 * n_probs, response_fields. */
static int parse_options(const cJSON *root, serve_kind kind, serve_call *call, serve_request *r, serve_error *err) {
    if (get_bool(root, "stream", &call->stream, err)) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!is_null(so)) {
        if (!cJSON_IsObject(so))
            return serve_fail(err, 400, "stream_options", NULL, "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &call->include_usage, err)) return -1;
    }
    r->cache_prompt = true; /* llama-server's default: reuse a slot's cached prefix */
    long long n_probs = 0;
    if (get_bool(root, "cache_prompt", &r->cache_prompt, err) || get_bool(root, "return_tokens", &call->return_tokens, err) ||
        get_int(root, "n_probs", 0, SERVE_MAX_TOP_LOGPROBS, &n_probs, err))
        return -1;
    call->n_probs = (int32_t)n_probs;
    if (kind == SERVE_NATIVE || kind == SERVE_INFILL) {
        if (n_probs > 0) r->top_logprobs = (int32_t)n_probs;
        const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_fields");
        if (!is_null(rf)) {
            char *text = cJSON_IsArray(rf) ? cJSON_PrintUnformatted(rf) : NULL;
            bool fits = text && strlen(text) < sizeof call->response_fields;
            if (fits) snprintf(call->response_fields, sizeof call->response_fields, "%s", text);
            free(text);
            if (!fits)
                return serve_fail(err, 400, "response_fields", NULL,
                                  "'response_fields' must be an array of field names (under %zu bytes)",
                                  sizeof call->response_fields);
        }
    }
    return 0;
}

/* After the prompt is known: every choice's sampler gets it (for the
 * penalties) and the grammar. */
static int samplers_start(const serve_api *api, serve_request *r, const tessera_grammar *grammar, serve_error *err) {
    for (int32_t c = 0; c < r->n_choices; c++) {
        for (int32_t i = 0; i < r->n_prompt; i++) tessera_sampler_accept(r->choices[c].sampler, r->prompt[i]);
        if (grammar && tessera_sampler_set_grammar(r->choices[c].sampler, api->model, grammar) != 0) {
            /* a grammar too ambiguous to start matching is the request's */
            const char *why = tessera_last_error();
            return serve_fail(err, serve_grammar_failure_status(why), r->grammar_param, NULL, "%s", why);
        }
    }
    return 0;
}

/* The prompt of any kind into r; *grammar may be replaced by the one
 * tool_choice forces. */
static int parse_input(const serve_api *api, const cJSON *root, serve_kind kind, int index, serve_request *r,
                       tessera_grammar **grammar, serve_error *err) {
    if (kind == SERVE_CHAT) {
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
        bool forced = cJSON_IsObject(tc) || (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required"));
        if (*grammar && forced)
            return serve_fail(
                err, 400, "tool_choice", NULL,
                "'tool_choice' forces a tool call; it cannot be combined with 'response_format' or 'grammar'");
        tessera_grammar *tool_grammar = NULL;
        if (parse_messages(api, root, r, &tool_grammar, err) != 0) return -1;
        if (tool_grammar) { /* the conflict with `grammar` was refused above */
            tessera_grammar_free(*grammar);
            *grammar = tool_grammar;
            r->grammar_param = "tool_choice";
        }
        return 0;
    }
    if (kind == SERVE_INFILL) return parse_infill(api, root, r, err);
    return parse_prompt(api, root, index, r, err);
}

int serve_api_parse(const serve_api *api, serve_kind kind, const char *body, size_t len, serve_call *call,
                    serve_request **out, serve_error *err) {
    return serve_api_parse_at(api, kind, body, len, 0, call, out, err);
}

int serve_api_parse_at(const serve_api *api, serve_kind kind, const char *body, size_t len, int index,
                       serve_call *call, serve_request **out, serve_error *err) {
    *out = NULL;
    memset(call, 0, sizeof *call);
    call->kind = kind;
    call->prompt_index = index;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= body && at <= body + len ? (long)(at - body) : -1;
        return serve_fail(err, 400, NULL, NULL, "the request body is not valid JSON (at byte %ld)", off);
    }
    serve_request *r = NULL;
    tessera_grammar *grammar = NULL;
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object");
        goto done;
    }
    if (check_fields(root, kind, call, err) != 0) goto done;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!is_null(model) && !cJSON_IsString(model)) {
        serve_fail(err, 400, "model", NULL, "'model' must be a string");
        goto done;
    }
    if (parse_limits(api, root, kind, &r, err) || parse_options(root, kind, call, r, err) ||
        get_stop(root, r, err) || parse_logprobs(root, kind, r, err) || parse_sampling(api, root, r, err) ||
        get_grammar(root, &grammar, &r->grammar_param, err) ||
        parse_input(api, root, kind, index, r, &grammar, err) || samplers_start(api, r, grammar, err))
        goto done;
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    call->single_tool_call = cJSON_IsFalse(ptc);

    /* Response ids only need to differ: seconds plus a process-wide count. */
    static unsigned long long counter;
    unsigned long long id = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    snprintf(call->id, sizeof call->id, "%s-%llx%04llx", kind == SERVE_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)time(NULL), id);
    call->created = (long long)time(NULL);
    *out = r;
    r = NULL;
    rc = 0;
done:
    tessera_grammar_free(grammar);
    serve_request_free(r);
    cJSON_Delete(root);
    return rc;
}

/* ------------------------------------------------------------ responses */

static cJSON *response_head(const serve_api *api, const serve_call *call, const char *object) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", call->id);
    cJSON_AddStringToObject(root, "object", object);
    cJSON_AddNumberToObject(root, "created", (double)call->created);
    cJSON_AddStringToObject(root, "model", api->model_id);
    cJSON_AddStringToObject(root, "system_fingerprint", "tessera");
    return root;
}

/* usage over requests (several for a list of prompts). */
static void add_usage_list(cJSON *root, const serve_request *const *reqs, int n) {
    long long prompt = 0, gen = 0, cached = 0;
    for (int k = 0; k < n; k++) {
        prompt += reqs[k]->n_prompt;
        gen += serve_request_n_gen(reqs[k]);
        cached += reqs[k]->n_cached;
    }
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt + gen));
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", (double)cached);
}

static void add_usage(cJSON *root, const serve_request *r) { add_usage_list(root, &r, 1); }

/* ---- logprobs */

/* The bytes of token t (up to cap); its length. */
size_t serve_token_piece(const serve_api *api, tessera_token t, char *buf, size_t cap) {
    int32_t n = tessera_token_to_piece(api->model, t, buf, (int32_t)cap, false);
    if (n == INT32_MIN) return 0;
    return n < 0 ? 0 : (size_t)n;
}

static void add_token(cJSON *o, const char *piece, size_t n, bool bytes) {
    add_text(o, "token", piece, n);
    if (!bytes) return;
    cJSON *b = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)piece[i]));
}

/* The text of logprob entry lp within ch (cut where a stop string cut it). */
static size_t entry_text(const serve_choice *ch, const serve_logprob *lp, const char **s) {
    *s = ch->text + lp->offset;
    if (lp->offset >= ch->len) return 0;
    return lp->offset + lp->len > ch->len ? ch->len - lp->offset : lp->len;
}

/* Entries of ch that may be sent: until final, those whose text is ready. */
static size_t entries_ready(const serve_choice *ch, bool final) {
    size_t k = ch->n_lp;
    while (k > 0 && (final ? ch->lp[k - 1].offset >= ch->len && ch->lp[k - 1].len > 0
                           : ch->lp[k - 1].offset + ch->lp[k - 1].len > ch->n_ready))
        k--;
    return k;
}

/* Chat: {"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}. */
static cJSON *chat_logprobs(const serve_api *api, const serve_choice *ch, size_t from, size_t to) {
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "content");
    for (size_t i = from; i < to; i++) {
        const serve_logprob *lp = &ch->lp[i];
        const char *s;
        size_t n = entry_text(ch, lp, &s);
        cJSON *e = cJSON_CreateObject();
        add_token(e, s, n, true);
        cJSON_AddNumberToObject(e, "logprob", lp->logprob);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int32_t k = 0; k < lp->n_top; k++) {
            char buf[256];
            size_t pn = serve_token_piece(api, lp->top_id[k], buf, sizeof buf);
            cJSON *t = cJSON_CreateObject();
            add_token(t, buf, pn, true);
            cJSON_AddNumberToObject(t, "logprob", lp->top_lp[k]);
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddNullToObject(o, "refusal");
    return o;
}

/* Completions (legacy): tokens, token_logprobs, top_logprobs, text_offset. */
static cJSON *legacy_logprobs(const serve_api *api, const serve_choice *ch, size_t from, size_t to) {
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (size_t i = from; i < to; i++) {
        const serve_logprob *lp = &ch->lp[i];
        const char *s;
        size_t n = entry_text(ch, lp, &s);
        char *clean = utf8_clean(s, n);
        cJSON_AddItemToArray(toks, cJSON_CreateString(clean ? clean : ""));
        free(clean);
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp->logprob));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)lp->offset));
        cJSON *top = cJSON_CreateObject();
        for (int32_t k = 0; k < lp->n_top; k++) {
            char buf[256];
            size_t pn = serve_token_piece(api, lp->top_id[k], buf, sizeof buf);
            char *key = utf8_clean(buf, pn);
            if (key && !cJSON_GetObjectItemCaseSensitive(top, key))
                cJSON_AddNumberToObject(top, key, lp->top_lp[k]);
            free(key);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

static cJSON *logprobs_json(const serve_api *api, const serve_call *call, const serve_choice *ch, size_t from,
                            size_t to) {
    return call->kind == SERVE_CHAT ? chat_logprobs(api, ch, from, to) : legacy_logprobs(api, ch, from, to);
}

/* ---- the reply of a finished chat choice */

typedef struct reply {
    const char *content;
    size_t content_len;
    const char *reasoning;
    size_t reasoning_len;
    chat_parsed parsed; /* tool calls (and harmony's reasoning) */
    size_t n_calls;
} reply;

/* Split a finished choice into content, reasoning and tool calls. */
static int reply_final(const serve_call *call, const serve_request *r, const serve_choice *ch, reply *out) {
    memset(out, 0, sizeof *out);
    serve_split sp;
    const char *text = ch->text ? ch->text : "";
    serve_reply_split(&r->rules, text, ch->len, true, &sp);
    out->reasoning = text + sp.reasoning_at;
    out->reasoning_len = sp.reasoning_end - sp.reasoning_at;
    out->content = text + sp.content_at;
    out->content_len = sp.content_end - sp.content_at;
    if (!r->rules.tools) return 0;
    if (chat_tool_parse((chat_tool_format)r->rules.tool_format, out->content, out->content_len,
                        (const char *const *)r->rules.tool_names, (size_t)r->rules.n_tool_names,
                        &out->parsed) != 0)
        return -1;
    out->n_calls = out->parsed.n_calls;
    if (call->single_tool_call && out->n_calls > 1) out->n_calls = 1;
    if (out->n_calls > 0) {
        out->content = out->parsed.content;
        out->content_len = strlen(out->parsed.content);
    }
    if (out->parsed.reasoning && !out->reasoning_len) {
        out->reasoning = out->parsed.reasoning;
        out->reasoning_len = strlen(out->parsed.reasoning);
    }
    return 0;
}

static const char *finish_of(const serve_choice *ch, const reply *rp) {
    if (rp && rp->n_calls > 0) return "tool_calls";
    return ch->finish_reason ? ch->finish_reason : "stop";
}

static void add_tool_calls(cJSON *obj, const serve_call *call, const serve_choice *ch, const reply *rp,
                           bool delta) {
    cJSON *arr = cJSON_AddArrayToObject(obj, "tool_calls");
    for (size_t k = 0; k < rp->n_calls; k++) {
        const chat_tool_call *tc = &rp->parsed.calls[k];
        cJSON *c = cJSON_CreateObject();
        if (delta) cJSON_AddNumberToObject(c, "index", (double)k);
        char id[96];
        snprintf(id, sizeof id, "call_%s_%d_%zu",
                 strchr(call->id, '-') ? strchr(call->id, '-') + 1 : call->id, (int)ch->index, k);
        cJSON_AddStringToObject(c, "id", tc->id ? tc->id : id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(c, "function");
        add_text(fn, "name", tc->name, strlen(tc->name));
        add_text(fn, "arguments", tc->arguments, strlen(tc->arguments));
        cJSON_AddItemToArray(arr, c);
    }
}

/* One finished choice of a response. NULL when its tool calls cannot be parsed. */
static cJSON *choice_json(const serve_api *api, const serve_call *call, const serve_request *r,
                          const serve_choice *ch) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddNumberToObject(choice, "index", ch->index);
    reply rp;
    if (chat) {
        if (reply_final(call, r, ch, &rp) != 0) {
            cJSON_Delete(choice);
            return NULL;
        }
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        if (rp.n_calls > 0 && rp.content_len == 0) cJSON_AddNullToObject(msg, "content");
        else add_text(msg, "content", rp.content, rp.content_len);
        if (rp.reasoning_len > 0) add_text(msg, "reasoning_content", rp.reasoning, rp.reasoning_len);
        if (rp.n_calls > 0) add_tool_calls(msg, call, ch, &rp, false);
    } else {
        add_text(choice, "text", ch->text, ch->len);
    }
    if (r->top_logprobs >= 0)
        cJSON_AddItemToObject(choice, "logprobs", logprobs_json(api, call, ch, 0, entries_ready(ch, true)));
    else cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", finish_of(ch, chat ? &rp : NULL));
    if (chat) chat_parsed_free(&rp.parsed);
    return choice;
}

char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r) {
    return serve_api_response_list(api, call, &r, 1);
}

char *serve_api_response_list(const serve_api *api, const serve_call *call, const serve_request *const *reqs,
                              int n) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *root = response_head(api, call, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    for (int k = 0; k < n; k++)
        for (int32_t i = 0; i < reqs[k]->n_choices; i++) {
            cJSON *choice = choice_json(api, call, reqs[k], &reqs[k]->choices[i]);
            if (!choice) {
                cJSON_Delete(root);
                return NULL;
            }
            cJSON_AddItemToArray(choices, choice);
        }
    add_usage_list(root, reqs, n);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* "data: JSON\n\n" appended to a malloc'd string. */
static char *sse_append(char *acc, cJSON *root) {
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!js) return acc;
    size_t a = acc ? strlen(acc) : 0, n = strlen(js);
    char *out = realloc(acc, a + n + 9);
    if (out) {
        memcpy(out + a, "data: ", 6);
        memcpy(out + a + 6, js, n);
        memcpy(out + a + 6 + n, "\n\n", 3);
    }
    free(js);
    return out ? out : acc;
}

/* A chunk for one choice: *delta (chat) to fill; returns the choice object. */
static cJSON *chunk_new(const serve_api *api, const serve_call *call, const serve_choice *ch, cJSON **root,
                        cJSON **delta) {
    bool chat = call->kind == SERVE_CHAT;
    *root = response_head(api, call, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(*root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", ch->index);
    *delta = chat ? cJSON_AddObjectToObject(choice, "delta") : NULL;
    return choice;
}

static char *chunk_finish(char *out, cJSON *root, cJSON *choice, cJSON *logprobs, const char *finish) {
    if (logprobs) cJSON_AddItemToObject(choice, "logprobs", logprobs);
    else cJSON_AddNullToObject(choice, "logprobs");
    if (finish) cJSON_AddStringToObject(choice, "finish_reason", finish);
    else cJSON_AddNullToObject(choice, "finish_reason");
    return sse_append(out, root);
}

/* What of one choice is new since the last call. */
static char *choice_events(const serve_api *api, const serve_call *call, const serve_request *r,
                           serve_choice *ch, char *out) {
    bool chat = call->kind == SERVE_CHAT, final = ch->state == SERVE_DONE;
    cJSON *root, *delta, *choice;
    if (chat && !ch->opened) {
        choice = chunk_new(api, call, ch, &root, &delta);
        cJSON_AddStringToObject(delta, "role", "assistant");
        cJSON_AddStringToObject(delta, "content", "");
        out = chunk_finish(out, root, choice, NULL, NULL);
    }
    ch->opened = true;
    if (ch->closed) return out;
    const char *text = ch->text ? ch->text : "";
    size_t lp_to = r->top_logprobs >= 0 ? entries_ready(ch, final) : 0;
    cJSON *lp = lp_to > ch->sent_lp ? logprobs_json(api, call, ch, ch->sent_lp, lp_to) : NULL;
    if (lp_to > ch->sent_lp) ch->sent_lp = lp_to;
    reply rp = {0};
    if (!chat) {
        size_t to = final ? ch->len : ch->n_ready;
        if (to > ch->sent_content || lp) {
            choice = chunk_new(api, call, ch, &root, &delta);
            add_text(choice, "text", text + ch->sent_content, to - ch->sent_content);
            ch->sent_content = to;
            out = chunk_finish(out, root, choice, lp, NULL);
            lp = NULL;
        }
    } else {
        /* Reasoning and content: what the split shows now, past what was sent. */
        serve_split sp;
        serve_reply_split(&r->rules, text, final ? ch->len : ch->n_ready, final, &sp);
        const char *content = text + sp.content_at;
        size_t content_len = sp.content_end - sp.content_at;
        if (final && reply_final(call, r, ch, &rp) == 0 && rp.n_calls > 0) {
            /* Content beside calls is what the parse kept; send only what
             * extends what was sent. */
            bool extends =
                rp.content_len >= ch->sent_content &&
                !memcmp(rp.content, content, ch->sent_content < content_len ? ch->sent_content : content_len);
            content = rp.content;
            content_len = extends ? rp.content_len : ch->sent_content;
        }
        size_t r_len = sp.reasoning_end - sp.reasoning_at;
        bool new_r = r_len > ch->sent_reasoning, new_c = content_len > ch->sent_content;
        if (new_r || new_c || lp) {
            choice = chunk_new(api, call, ch, &root, &delta);
            if (new_r) add_text(delta, "reasoning_content", text + sp.reasoning_at + ch->sent_reasoning,
                                r_len - ch->sent_reasoning);
            if (new_c) add_text(delta, "content", content + ch->sent_content, content_len - ch->sent_content);
            if (new_r) ch->sent_reasoning = r_len;
            if (new_c) ch->sent_content = content_len;
            out = chunk_finish(out, root, choice, lp, NULL);
            lp = NULL;
        }
        if (final && rp.n_calls > 0) {
            choice = chunk_new(api, call, ch, &root, &delta);
            add_tool_calls(delta, call, ch, &rp, true);
            out = chunk_finish(out, root, choice, NULL, NULL);
        }
    }
    cJSON_Delete(lp);
    if (final) {
        choice = chunk_new(api, call, ch, &root, &delta);
        if (!chat) add_text(choice, "text", "", 0);
        out = chunk_finish(out, root, choice, NULL, finish_of(ch, chat ? &rp : NULL));
        ch->closed = true;
    }
    chat_parsed_free(&rp.parsed);
    return out;
}

static char *concat_free(char *a, char *b) {
    if (!a) return b;
    if (!b) return a;
    size_t na = strlen(a), nb = strlen(b);
    char *s = realloc(a, na + nb + 1);
    if (!s) {
        free(b);
        return a;
    }
    memcpy(s + na, b, nb + 1);
    free(b);
    return s;
}

int serve_grammar_failure_status(const char *error) { return strstr(error, "out of memory") ? 500 : 400; }

int serve_request_error_status(const serve_request *r) { return r->error_status ? r->error_status : 500; }

char *serve_request_error_json(const serve_request *r) {
    const int status = serve_request_error_status(r);
    if (status < 500) return serve_api_error_json(r->error, "invalid_request_error", r->grammar_param, NULL);
    return serve_api_error_json(r->error, "server_error", NULL, status == 503 ? "shutting_down" : NULL);
}

char *serve_api_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                            bool *finished) {
    *seen = r->progress;
    char *out = NULL;
    if (r->state == SERVE_DONE && r->error[0]) {
        char *ej = serve_request_error_json(r);
        size_t n = ej ? strlen(ej) : 0;
        char *ev = ej ? malloc(n + 9) : NULL;
        if (ev) snprintf(ev, n + 9, "data: %s\n\n", ej);
        free(ej);
        *finished = true;
        return concat_free(ev, strdup("data: [DONE]\n\n"));
    }
    for (int32_t i = 0; i < r->n_choices; i++) out = choice_events(api, call, r, &r->choices[i], out);
    if (r->state == SERVE_DONE) {
        if (call->include_usage) {
            cJSON *u = response_head(api, call,
                                     call->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(u, "choices");
            add_usage(u, r);
            out = sse_append(out, u);
        }
        out = concat_free(out, strdup("data: [DONE]\n\n"));
        *finished = true;
    }
    return out;
}

/* A comma-separated list (--alias, --tags) as a JSON array of its names. */
static cJSON *name_list(const char *list, const char *fallback) {
    cJSON *arr = cJSON_CreateArray();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : fallback ? fallback : "");
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) cJSON_AddItemToArray(arr, cJSON_CreateString(t));
    return arr;
}

static cJSON *model_object(const serve_api *api) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", api->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)api->created);
    cJSON_AddStringToObject(m, "owned_by", api->owned_by[0] ? api->owned_by : "tessera");
    cJSON_AddItemToObject(m, "aliases", name_list(api->aliases, api->model_id));
    cJSON_AddItemToObject(m, "tags", name_list(api->tags, NULL));
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "description", tessera_model_desc(api->model));
    cJSON_AddNumberToObject(meta, "n_ctx_slot", api->slot_ctx);
    cJSON_AddNumberToObject(meta, "n_ctx_train", tessera_model_n_ctx_train(api->model));
    cJSON_AddNumberToObject(meta, "n_embd", tessera_model_n_embd(api->model));
    cJSON_AddNumberToObject(meta, "n_params", (double)tessera_model_n_params(api->model));
    cJSON_AddNumberToObject(meta, "size", (double)tessera_model_size_bytes(api->model));
    cJSON_AddNumberToObject(meta, "n_vocab", tessera_model_n_vocab(api->model));
    return m;
}

char *serve_api_models(const serve_api *api) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), model_object(api));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_api_model(const serve_api *api, const char *id) {
    cJSON *m = model_object(api);
    const cJSON *alias;
    bool found = !strcmp(id, api->model_id);
    cJSON_ArrayForEach(alias, cJSON_GetObjectItemCaseSensitive(m, "aliases"))
        found = found || !strcmp(alias->valuestring, id);
    char *s = found ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(m);
    return s;
}
