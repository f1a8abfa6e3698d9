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

static int get_logit_bias(const cJSON *root, int32_t n_vocab, tessera_logit_bias *bias, int32_t *n,
                          serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    *n = 0;
    if (is_null(v)) return 0;
    if (!cJSON_IsObject(v))
        return serve_fail(err, 400, "logit_bias", NULL, "'logit_bias' must be an object of token id: bias");
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        char *end;
        long id = strtol(b->string, &end, 10);
        if (end == b->string || *end || id < 0 || id >= n_vocab)
            return serve_fail(err, 400, "logit_bias", NULL,
                              "'logit_bias' key '%.40s' is not a token id in 0..%d", b->string, n_vocab - 1);
        if (!cJSON_IsNumber(b) || !(b->valuedouble >= -100.0 && b->valuedouble <= 100.0))
            return serve_fail(err, 400, "logit_bias", NULL,
                        "'logit_bias' of token %ld must be a number in -100..100", id);
        if (*n == SERVE_MAX_BIAS)
            return serve_fail(err, 400, "logit_bias", NULL, "'logit_bias' has more than %d entries",
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
    if (!bias) return serve_fail(err, 500, NULL, NULL, "out of memory");
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
    /* One sampler per choice; with a seed, choice i draws from seed + i so
     * that the choices differ and the request is reproducible. */
    for (int32_t c = 0; c < r->n_choices; c++) {
        if (seed != LLONG_MIN)
            sp.seed = (uint32_t)(((unsigned long long)seed + (unsigned long long)c) % 0xFFFFFFFFull);
        r->choices[c].sampler = tessera_sampler_new(tessera_model_n_vocab(api->model), &sp);
        if (!r->choices[c].sampler) {
            free(bias);
            return serve_fail(err, 400, NULL, NULL, "%s", tessera_last_error());
        }
    }
    free(bias);
    return 0;
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
        if (!is_null(rf))
            return serve_fail(err, 400, "grammar", NULL, "give 'grammar' or 'response_format', not both");
        *out = tessera_grammar_parse(gbnf->valuestring, strlen(gbnf->valuestring), NULL);
        *param_out = "grammar";
        return *out ? 0 : serve_fail(err, 400, "grammar", NULL, "%s", tessera_last_error());
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
                return serve_fail(err, 400, "messages", NULL,
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
static void reply_rules(const serve_api *api, const serve_tools *tools, const char *prompt_text,
                        bool native_tools, serve_reply_rules *rules) {
    const char *tmpl = tessera_chat_template_source(api->tmpl);
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
    if (!cJSON_AddBoolToObject(vars, "add_generation_prompt", 1)) goto oom;
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
    text = tessera_chat_template_render(api->tmpl, m, (size_t)k, true, &len);
    if (!text) {
        serve_fail(err, 400, "messages", NULL, "the chat template refuses the conversation: %s",
                   tessera_last_error());
        goto done;
    }
rendered:
    reply_rules(api, &tools, text, native_tools, &r->rules);
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

static int parse_prompt(const serve_api *api, const cJSON *root, serve_request *r, serve_error *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (is_null(p)) return serve_fail(err, 400, "prompt", NULL, "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p))
        return tokenize_text(api, p->valuestring, strlen(p->valuestring), true, r, "prompt", err);
    if (!cJSON_IsArray(p))
        return serve_fail(err, 400, "prompt", NULL, "'prompt' must be a string or an array of token ids");
    int n = cJSON_GetArraySize(p);
    if (n == 0) return serve_fail(err, 400, "prompt", NULL, "'prompt' is empty");
    if (n >= api->slot_ctx)
        return serve_fail(err, 400, "prompt", "context_length_exceeded",
                    "the prompt has %d tokens, a slot's context holds %d (-c / --parallel)", n,
                    api->slot_ctx);
    r->prompt = malloc((size_t)n * sizeof *r->prompt);
    if (!r->prompt) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int32_t n_vocab = tessera_model_n_vocab(api->model);
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= n_vocab)
            return serve_fail(err, 400, "prompt", NULL, "'prompt' must be one string or token ids in 0..%d",
                        n_vocab - 1);
        r->prompt[r->n_prompt++] = (tessera_token)t->valuedouble;
    }
    return 0;
}

/* ------------------------------------------------------------ requests */

enum { FOR_CHAT = 1, FOR_COMPLETION = 2, FOR_BOTH = 3 };

/* Every request field Tessera reads; anything else is a 400 naming it.
 * `checked` fields accept only the values that ask for nothing Tessera
 * lacks (see check_restricted). */
static const struct field {
    const char *name;
    int kinds;
    const char *what; /* for the docs and the reader */
} FIELDS[] = {
    {"model", FOR_BOTH, "accepted; the server has one model"},
    {"messages", FOR_CHAT,
     "the conversation (roles system, developer, user, assistant with tool_calls, tool)"},
    {"prompt", FOR_COMPLETION, "a string, or an array of token ids"},
    {"max_tokens", FOR_BOTH, "tokens to generate per choice"},
    {"max_completion_tokens", FOR_CHAT, "the same, newer name"},
    {"temperature", FOR_BOTH, "0 is greedy"},
    {"top_p", FOR_BOTH, NULL},
    {"top_k", FOR_BOTH, "extension"},
    {"min_p", FOR_BOTH, "extension"},
    {"n", FOR_BOTH, "choices, each its own sequence in its own slot; at most --parallel"},
    {"best_of", FOR_COMPLETION, "only 1 or equal to n"},
    {"stream", FOR_BOTH, NULL},
    {"stream_options", FOR_BOTH, "include_usage"},
    {"stop", FOR_BOTH, "up to 4 strings, cut from the output"},
    {"seed", FOR_BOTH, "choice i samples with seed + i"},
    {"presence_penalty", FOR_BOTH, NULL},
    {"frequency_penalty", FOR_BOTH, NULL},
    {"logit_bias", FOR_BOTH, "token id -> bias; -100 bans"},
    {"logprobs", FOR_BOTH, "chat: true/false; completions: 0..20 alternatives"},
    {"top_logprobs", FOR_CHAT, "0..20 alternatives per token"},
    {"tools", FOR_CHAT, "functions the model may call"},
    {"tool_choice", FOR_CHAT, "auto, none, required or a named function"},
    {"parallel_tool_calls", FOR_CHAT, "false keeps the first call only"},
    {"response_format", FOR_BOTH, "text, json_object, json_schema: a grammar constrains the output"},
    {"grammar", FOR_BOTH, "llama-server's GBNF grammar"},
    {"echo", FOR_COMPLETION, "only false"},
    {"suffix", FOR_COMPLETION, "only null or empty"},
    {"user", FOR_BOTH, "accepted and ignored (an end-user id for abuse tracking)"},
    {"store", FOR_BOTH, "only false (nothing is stored)"},
    {"metadata", FOR_BOTH, "accepted and ignored (tags for stored completions)"},
    {"cache_prompt", FOR_BOTH, "extension: reuse a slot's cached prompt prefix"},
};

static int check_fields(const cJSON *root, serve_kind kind, serve_error *err) {
    int want = kind == SERVE_CHAT ? FOR_CHAT : FOR_COMPLETION;
    const cJSON *f;
    cJSON_ArrayForEach(f, root) {
        size_t i = 0;
        while (i < sizeof FIELDS / sizeof *FIELDS && strcmp(FIELDS[i].name, f->string)) i++;
        if (i == sizeof FIELDS / sizeof *FIELDS || !(FIELDS[i].kinds & want))
            return serve_fail(err, 400, f->string, "unsupported_parameter",
                              "'%.64s' is not a field Tessera implements for %s (see docs/serve.md)",
                              f->string, kind == SERVE_CHAT ? "/v1/chat/completions" : "/v1/completions");
    }
    /* Fields accepted only with the values that ask for nothing missing. */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (!is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "echo", "unsupported_parameter", "'echo' true is not implemented");
    v = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (!is_null(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return serve_fail(err, 400, "suffix", "unsupported_parameter",
                          "'suffix' (insertion) is not implemented");
    v = cJSON_GetObjectItemCaseSensitive(root, "store");
    if (!is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "store", "unsupported_parameter", "'store' true: Tessera stores nothing");
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

int serve_api_parse(const serve_api *api, serve_kind kind, const char *body, size_t len, serve_call *call,
                    serve_request **out, serve_error *err) {
    *out = NULL;
    memset(call, 0, sizeof *call);
    call->kind = kind;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= body && at <= body + len ? (long)(at - body) : -1;
        return serve_fail(err, 400, NULL, NULL, "the request body is not valid JSON (at byte %ld)", off);
    }
    serve_request *r = NULL;
    tessera_grammar *grammar = NULL, *tool_grammar = NULL;
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object");
        goto done;
    }
    if (check_fields(root, kind, err) != 0) goto done;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!is_null(model) && !cJSON_IsString(model)) {
        serve_fail(err, 400, "model", NULL, "'model' must be a string");
        goto done;
    }
    long long max_tokens = -1, n = 1, best_of = 0;
    const char *mt_key = kind == SERVE_CHAT && cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (get_int(root, mt_key, 1, INT32_MAX, &max_tokens, err) || get_int(root, "n", 1, 1e9, &n, err) ||
        get_int(root, "best_of", 1, 1e9, &best_of, err))
        goto done;
    if (n > api->n_slots) {
        serve_fail(err, 400, "n", NULL, "'n' is %lld, more than the %d slots (--parallel)", n, api->n_slots);
        goto done;
    }
    if (best_of && best_of != 1 && best_of != n) {
        serve_fail(err, 400, "best_of", "unsupported_parameter",
                   "'best_of' other than 1 or n is not implemented");
        goto done;
    }
    r = serve_request_new((int32_t)n);
    if (!r) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
        goto done;
    }
    if (get_bool(root, "stream", &call->stream, err)) goto done;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!is_null(so)) {
        if (!cJSON_IsObject(so)) {
            serve_fail(err, 400, "stream_options", NULL, "'stream_options' must be an object");
            goto done;
        }
        if (get_bool(so, "include_usage", &call->include_usage, err)) goto done;
    }
    r->cache_prompt = true; /* llama-server's default: reuse a slot's cached prefix */
    if (get_bool(root, "cache_prompt", &r->cache_prompt, err)) goto done;
    if (max_tokens < 0 && api->default_max_tokens > 0) max_tokens = api->default_max_tokens;
    r->max_tokens = (int32_t)max_tokens;
    if (get_stop(root, r, err) || parse_logprobs(root, kind, r, err) || parse_sampling(api, root, r, err) ||
        get_grammar(root, &grammar, &r->grammar_param, err))
        goto done;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    bool forced = cJSON_IsObject(tc) || (cJSON_IsString(tc) && !strcmp(tc->valuestring, "required"));
    if (grammar && kind == SERVE_CHAT && forced) {
        serve_fail(
            err, 400, "tool_choice", NULL,
            "'tool_choice' forces a tool call; it cannot be combined with 'response_format' or 'grammar'");
        goto done;
    }
    if ((kind == SERVE_CHAT ? parse_messages(api, root, r, &tool_grammar, err)
                            : parse_prompt(api, root, r, err)) != 0)
        goto done;
    if (tool_grammar) { /* the conflict with `grammar` was refused above */
        grammar = tool_grammar;
        tool_grammar = NULL;
        r->grammar_param = "tool_choice";
    }
    const cJSON *ptc = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    call->single_tool_call = cJSON_IsFalse(ptc);
    for (int32_t c = 0; c < r->n_choices; c++) {
        for (int32_t i = 0; i < r->n_prompt; i++) tessera_sampler_accept(r->choices[c].sampler, r->prompt[i]);
        if (grammar && tessera_sampler_set_grammar(r->choices[c].sampler, api->model, grammar) != 0) {
            /* a grammar too ambiguous to start matching is the request's */
            const char *why = tessera_last_error();
            serve_fail(err, serve_grammar_failure_status(why), r->grammar_param, NULL, "%s", why);
            goto done;
        }
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
    tessera_grammar_free(tool_grammar);
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
    int32_t gen = serve_request_n_gen(r);
    cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", gen);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + gen);
    cJSON *details = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(details, "cached_tokens", r->n_cached);
}

/* ---- logprobs */

/* The bytes of token t (up to cap); its length. */
static size_t token_piece(const serve_api *api, tessera_token t, char *buf, size_t cap) {
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
            size_t pn = token_piece(api, lp->top_id[k], buf, sizeof buf);
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
            size_t pn = token_piece(api, lp->top_id[k], buf, sizeof buf);
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

char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r) {
    bool chat = call->kind == SERVE_CHAT;
    cJSON *root = response_head(api, call, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    for (int32_t i = 0; i < r->n_choices; i++) {
        const serve_choice *ch = &r->choices[i];
        cJSON *choice = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, choice);
        cJSON_AddNumberToObject(choice, "index", i);
        reply rp;
        if (chat) {
            if (reply_final(call, r, ch, &rp) != 0) {
                cJSON_Delete(root);
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
            cJSON_AddItemToObject(choice, "logprobs",
                                  logprobs_json(api, call, ch, 0, entries_ready(ch, true)));
        else cJSON_AddNullToObject(choice, "logprobs");
        cJSON_AddStringToObject(choice, "finish_reason", finish_of(ch, chat ? &rp : NULL));
        if (chat) chat_parsed_free(&rp.parsed);
    }
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

char *serve_api_models(const serve_api *api) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "data"), m);
    cJSON_AddStringToObject(m, "id", api->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)api->created);
    cJSON_AddStringToObject(m, "owned_by", api->owned_by[0] ? api->owned_by : "tessera");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "description", tessera_model_desc(api->model));
    cJSON_AddNumberToObject(meta, "n_ctx_slot", api->slot_ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", tessera_model_n_vocab(api->model));
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
