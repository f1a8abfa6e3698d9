/*
 * api — the OpenAI request and response JSON.
 *
 * Requests: /v1/chat/completions (messages) and /v1/completions (prompt),
 * with max_tokens, temperature, top_p, top_k, min_p, stop, seed,
 * presence_penalty, frequency_penalty, logit_bias, stream, stream_options,
 * response_format (text, json_object, json_schema) and grammar (GBNF).
 * Unknown fields are ignored; a known field of the wrong type is a 400
 * naming it (the "param" of OpenAI's error shape).
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "chat/chat.h"
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

/* Fill err with a 400 (or status) about param; returns -1. */
static int fail(serve_error *err, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(serve_error *err, int status, const char *param, const char *code, const char *fmt, ...) {
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
    if (!cJSON_IsNumber(v)) return fail(err, 400, key, NULL, "'%s' must be a number", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return fail(err, 400, key, NULL, "'%s' is %g, expected %g..%g", key, d, lo, hi);
    *out = d;
    return 0;
}

static int get_int(const cJSON *root, const char *key, double lo, double hi, long long *out,
                   serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (is_null(v)) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return fail(err, 400, key, NULL, "'%s' must be an integer", key);
    double d = v->valuedouble;
    if (!(d >= lo && d <= hi))
        return fail(err, 400, key, NULL, "'%s' is %.0f, expected %.0f..%.0f", key, d, lo, hi);
    *out = (long long)d;
    return 0;
}

static int get_bool(const cJSON *root, const char *key, bool *out, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (is_null(v)) return 0;
    if (!cJSON_IsBool(v)) return fail(err, 400, key, NULL, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int add_stop(serve_request *r, const char *stop, serve_error *err) {
    size_t n = strlen(stop);
    if (n == 0) return 0; /* an empty stop string never matches */
    if (n > 1024) return fail(err, 400, "stop", NULL, "a 'stop' string is over 1024 bytes");
    r->stop[r->n_stop] = strdup(stop);
    if (!r->stop[r->n_stop]) return fail(err, 500, NULL, NULL, "out of memory");
    r->n_stop++;
    return 0;
}

static int get_stop(const cJSON *root, serve_request *r, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (is_null(v)) return 0;
    if (cJSON_IsString(v)) return add_stop(r, v->valuestring, err);
    if (!cJSON_IsArray(v))
        return fail(err, 400, "stop", NULL, "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(v) > SERVE_MAX_STOP)
        return fail(err, 400, "stop", NULL, "'stop' has %d strings, at most %d", cJSON_GetArraySize(v),
                    SERVE_MAX_STOP);
    const cJSON *s;
    cJSON_ArrayForEach(s, v) {
        if (!cJSON_IsString(s)) return fail(err, 400, "stop", NULL, "'stop' must hold strings only");
        if (add_stop(r, s->valuestring, err) != 0) return -1;
    }
    return 0;
}

static int get_logit_bias(const cJSON *root, int32_t n_vocab, tessera_logit_bias *bias, int32_t *n,
                          serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    *n = 0;
    if (is_null(v)) return 0;
    if (!cJSON_IsObject(v))
        return fail(err, 400, "logit_bias", NULL, "'logit_bias' must be an object of token id: bias");
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        char *end;
        long id = strtol(b->string, &end, 10);
        if (end == b->string || *end || id < 0 || id >= n_vocab)
            return fail(err, 400, "logit_bias", NULL, "'logit_bias' key '%.40s' is not a token id in 0..%d",
                        b->string, n_vocab - 1);
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100.0 && b->valuedouble <= 100.0))
            return fail(err, 400, "logit_bias", NULL,
                        "'logit_bias' of token %ld must be a number in -100..100", id);
        if (*n == SERVE_MAX_BIAS)
            return fail(err, 400, "logit_bias", NULL, "'logit_bias' has more than %d entries",
                        SERVE_MAX_BIAS);
        /* -100 bans the token, as OpenAI documents. */
        bias[*n] = (tessera_logit_bias){(tessera_token)id,
                                        b->valuedouble <= -100.0 ? -INFINITY : (float)b->valuedouble};
        (*n)++;
    }
    return 0;
}

/* The sampler from the request's fields. */
static int parse_sampling(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    tessera_sampler_params sp = tessera_sampler_default_params();
    double temp = sp.temp, top_p = sp.top_p, min_p = sp.min_p, pres = 0.0, freq = 0.0;
    long long top_k = sp.top_k, seed = LLONG_MIN; /* LLONG_MIN: not given */
    if (get_number(root, "temperature", 0.0, 1e6, &temp, err) ||
        get_number(root, "top_p", 0.0, 1.0, &top_p, err) ||
        get_number(root, "min_p", 0.0, 1.0, &min_p, err) ||
        get_int(root, "top_k", 0, INT32_MAX, &top_k, err) ||
        get_number(root, "presence_penalty", -2.0, 2.0, &pres, err) ||
        get_number(root, "frequency_penalty", -2.0, 2.0, &freq, err) ||
        get_int(root, "seed", -9.2e18, 9.2e18, &seed, err))
        return -1;
    static const tessera_logit_bias bias_none[1];
    tessera_logit_bias *bias = malloc(SERVE_MAX_BIAS * sizeof *bias);
    if (!bias) return fail(err, 500, NULL, NULL, "out of memory");
    int32_t n_bias = 0;
    if (get_logit_bias(root, tessera_model_n_vocab(api->model), bias, &n_bias, err) != 0) {
        free(bias);
        return -1;
    }
    sp.temp = (float)temp;
    sp.top_p = (float)top_p;
    sp.min_p = (float)min_p;
    sp.top_k = (int32_t)top_k;
    sp.penalty_present = (float)pres;
    sp.penalty_freq = (float)freq;
    sp.seed = seed == LLONG_MIN ? TESSERA_SEED_RANDOM : (uint32_t)((unsigned long long)seed % 0xFFFFFFFFull);
    sp.logit_bias = n_bias ? bias : bias_none;
    sp.n_logit_bias = n_bias;
    r->sampler = tessera_sampler_new(tessera_model_n_vocab(api->model), &sp);
    free(bias);
    if (!r->sampler) return fail(err, 400, NULL, NULL, "%s", tessera_last_error());
    return 0;
}

/* response_format {"type": "text" | "json_object" | "json_schema"} (with
 * json_schema.schema; llama-server's json_object "schema" too) and
 * llama-server's "grammar" (GBNF). *out: the grammar, NULL for none. */
static int get_grammar(const cJSON *root, tessera_grammar **out, serve_error *err) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (!is_null(gbnf)) {
        if (!cJSON_IsString(gbnf)) return fail(err, 400, "grammar", NULL, "'grammar' must be a GBNF string");
        if (!is_null(rf))
            return fail(err, 400, "grammar", NULL, "give 'grammar' or 'response_format', not both");
        *out = tessera_grammar_parse(gbnf->valuestring, strlen(gbnf->valuestring), NULL);
        return *out ? 0 : fail(err, 400, "grammar", NULL, "%s", tessera_last_error());
    }
    if (is_null(rf)) return 0;
    const char *bad_type =
        "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"";
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return fail(err, 400, "response_format", NULL, "%s", bad_type);
    const cJSON *schema = NULL;
    const char *param = "response_format.json_schema.schema";
    if (!strcmp(type->valuestring, "text")) return 0;
    if (!strcmp(type->valuestring, "json_object")) {
        schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
        param = "response_format.schema";
        if (is_null(schema)) {
            *out = tessera_grammar_json_object();
            return *out ? 0 : fail(err, 500, NULL, NULL, "%s", tessera_last_error());
        }
    } else if (!strcmp(type->valuestring, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        if (!cJSON_IsObject(js))
            return fail(err, 400, "response_format.json_schema", NULL,
                        "'response_format.json_schema' must be an object");
        schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
        if (is_null(schema)) return fail(err, 400, param, NULL, "'%s' is required", param);
    } else {
        return fail(err, 400, "response_format.type", NULL, "%s", bad_type);
    }
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return fail(err, 500, NULL, NULL, "out of memory");
    *out = tessera_grammar_from_json_schema(text, strlen(text));
    free(text);
    return *out ? 0 : fail(err, 400, param, NULL, "'%s': %s", param, tessera_last_error());
}

/* ------------------------------------------------------------ prompts */

static int tokenize_text(const serve_api *api, const char *text, size_t len, bool add_special,
                         serve_request *r, const char *param, serve_error *err) {
    int32_t n = tessera_tokenize(api->model, text, len, NULL, 0, add_special, true);
    if (n == INT32_MIN)
        return fail(err, 400, param, NULL, "cannot tokenize '%s': %s", param, tessera_last_error());
    if (n < 0) n = -n;
    if (n == 0) return fail(err, 400, param, NULL, "'%s' gives no tokens", param);
    if (n >= api->slot_ctx)
        return fail(err, 400, param, "context_length_exceeded",
                    "the prompt has %d tokens, a slot's context holds %d (-c / --parallel)", n,
                    api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) return fail(err, 500, NULL, NULL, "out of memory");
    r->n_prompt = tessera_tokenize(api->model, text, len, r->prompt, n, add_special, true);
    if (r->n_prompt != n) return fail(err, 500, param, NULL, "tokenization changed between calls");
    return 0;
}

/* Message content: a string, null, or an array of {"type": "text", "text"}. */
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
                return fail(err, 400, "messages", NULL,
                            "message content parts must be {\"type\": \"text\", \"text\": ...}");
            len += strlen(text->valuestring);
        }
        *out = malloc(len + 1);
        if (*out) {
            (*out)[0] = '\0';
            cJSON_ArrayForEach(part, content)
                strcat(*out, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
        }
    } else {
        return fail(err, 400, "messages", NULL,
                    "message 'content' must be a string or an array of text parts");
    }
    return *out ? 0 : fail(err, 500, NULL, NULL, "out of memory");
}

static int parse_messages(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (is_null(msgs)) return fail(err, 400, "messages", NULL, "'messages' is required");
    if (!cJSON_IsArray(msgs)) return fail(err, 400, "messages", NULL, "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return fail(err, 400, "messages", NULL, "'messages' is empty");
    tessera_chat_message *m = calloc((size_t)n, sizeof *m);
    char **texts = calloc((size_t)n, sizeof *texts);
    int rc = -1;
    if (!m || !texts) {
        fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            fail(err, 400, "messages", NULL, "message %d must be an object with a string 'role'", i);
            goto done;
        }
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant")) {
            fail(err, 400, "messages", NULL,
                 "message %d has role '%.32s' (system, developer, user or assistant)", i, rs);
            goto done;
        }
        if (message_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), &texts[i], err) != 0) goto done;
        m[i].role = rs;
        m[i].content = texts[i];
        i++;
    }
    size_t len = 0;
    char *text = chat_render_alloc(&api->format, m, (size_t)n, true, api->bos_text, api->eos_text, &len);
    if (!text) {
        fail(err, 400, "messages", NULL, "cannot render the chat template: %s", tessera_last_error());
        goto done;
    }
    rc = tokenize_text(api, text, len, !api->format.bos_in_text, r, "messages", err);
    free(text);
done:
    if (texts)
        for (int k = 0; k < n; k++) free(texts[k]);
    free(texts);
    free(m);
    return rc;
}

static int parse_prompt(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (is_null(p)) return fail(err, 400, "prompt", NULL, "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p))
        return tokenize_text(api, p->valuestring, strlen(p->valuestring), true, r, "prompt", err);
    if (!cJSON_IsArray(p))
        return fail(err, 400, "prompt", NULL, "'prompt' must be a string or an array of token ids");
    int n = cJSON_GetArraySize(p);
    if (n == 0) return fail(err, 400, "prompt", NULL, "'prompt' is empty");
    if (n >= api->slot_ctx)
        return fail(err, 400, "prompt", "context_length_exceeded",
                    "the prompt has %d tokens, a slot's context holds %d (-c / --parallel)", n,
                    api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) return fail(err, 500, NULL, NULL, "out of memory");
    int32_t n_vocab = tessera_model_n_vocab(api->model);
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= n_vocab)
            return fail(err, 400, "prompt", NULL, "'prompt' must be one string or token ids in 0..%d",
                        n_vocab - 1);
        r->prompt[r->n_prompt++] = (tessera_token)t->valuedouble;
    }
    return 0;
}

/* ------------------------------------------------------------ requests */

int serve_api_parse(const serve_api *api, serve_kind kind, const char *body, size_t len, serve_call *call,
                    serve_request **out, serve_error *err) {
    *out = NULL;
    memset(call, 0, sizeof *call);
    call->kind = kind;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= body && at <= body + len ? (long)(at - body) : -1;
        return fail(err, 400, NULL, NULL, "the request body is not valid JSON (at byte %ld)", off);
    }
    serve_request *r = serve_request_new();
    tessera_grammar *grammar = NULL;
    int rc = -1;
    if (!r) {
        fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        fail(err, 400, NULL, NULL, "the request body must be a JSON object");
        goto done;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!is_null(model) && !cJSON_IsString(model)) {
        fail(err, 400, "model", NULL, "'model' must be a string");
        goto done;
    }
    long long max_tokens = -1, n = 1;
    const char *mt_key = kind == SERVE_CHAT && cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (get_int(root, mt_key, 1, INT32_MAX, &max_tokens, err) || get_int(root, "n", 1, 1, &n, err) ||
        get_bool(root, "stream", &call->stream, err))
        goto done;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!is_null(so)) {
        if (!cJSON_IsObject(so)) {
            fail(err, 400, "stream_options", NULL, "'stream_options' must be an object");
            goto done;
        }
        if (get_bool(so, "include_usage", &call->include_usage, err)) goto done;
    }
    if (get_bool(root, "cache_prompt", &r->cache_prompt, err)) goto done;
    r->max_tokens = (int32_t)max_tokens;
    if (get_stop(root, r, err) || parse_sampling(api, root, r, err) || get_grammar(root, &grammar, err))
        goto done;
    if ((kind == SERVE_CHAT ? parse_messages(api, root, r, err) : parse_prompt(api, root, r, err)) != 0)
        goto done;
    for (int32_t i = 0; i < r->n_prompt; i++) tessera_sampler_accept(r->sampler, r->prompt[i]);
    if (grammar && tessera_sampler_set_grammar(r->sampler, api->model, grammar) != 0) {
        fail(err, 500, NULL, NULL, "%s", tessera_last_error());
        goto done;
    }

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

static void add_usage(cJSON *root, const serve_request *r) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + r->n_gen);
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", r->n_cached);
}

char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *root = response_head(api, call, chat ? "chat.completion" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        add_text(msg, "content", r->text, r->len);
    } else {
        add_text(choice, "text", r->text, r->len);
    }
    cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddStringToObject(choice, "finish_reason", r->finish_reason ? r->finish_reason : "stop");
    add_usage(root, r);
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

char *serve_api_chunk(const serve_api *api, const serve_call *call, const char *text, size_t n, bool first,
                      const char *finish, const serve_request *r) {
    bool chat = call->kind == SERVE_CHAT;
    const char *object = chat ? "chat.completion.chunk" : "text_completion";
    cJSON *root = response_head(api, call, object);
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(choice, "delta");
        if (first) cJSON_AddStringToObject(delta, "role", "assistant");
        if (first || n > 0) add_text(delta, "content", text, n);
    } else {
        add_text(choice, "text", text, n);
    }
    cJSON_AddNullToObject(choice, "logprobs");
    if (finish)
        cJSON_AddStringToObject(choice, "finish_reason", finish);
    else
        cJSON_AddNullToObject(choice, "finish_reason");
    char *out = sse_append(NULL, root);
    if (finish && call->include_usage) {
        cJSON *u = response_head(api, call, object);
        cJSON_AddArrayToObject(u, "choices");
        add_usage(u, r);
        out = sse_append(out, u);
    }
    return out;
}

char *serve_api_models(const serve_api *api) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    cJSON_AddStringToObject(m, "id", api->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "tessera");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "description", tessera_model_desc(api->model));
    cJSON_AddNumberToObject(meta, "n_ctx_slot", api->slot_ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", tessera_model_n_vocab(api->model));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
