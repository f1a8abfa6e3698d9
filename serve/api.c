/*
 * api — the request schema: the OpenAI (and llama-server) request JSON into
 * a serve_request.
 *
 * Requests: /v1/chat/completions (messages), /v1/completions (prompt) and
 * llama-server's /completion and /infill, with the fields of FIELDS below.
 * A field not in that table is ignored and named in the request log (clients
 * send many); one whose value asks for something Tessera does not do, or
 * that belongs to another endpoint, is a 400 naming it (the "param" of
 * OpenAI's error shape); so is a known field of the wrong type. The prompt
 * itself is made by prompt.c, responses by response.c and native.c.
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
    if (api_is_null(v)) return 0;
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
    if (api_is_null(v)) return 0;
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

/* llama-server's "samplers": the samplers to run, in order, as an array of
 * llama.cpp's names (or a string of --sampling-seq letters). */
static int get_samplers(const cJSON *root, serve_request *r, tessera_sampler_params *sp, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "samplers");
    if (api_is_null(v)) return 0;
    char names[512];
    size_t len = 0;
    if (cJSON_IsString(v)) {
        if (tessera_sampler_order(v->valuestring, true, r->samplers_text, sizeof r->samplers_text) < 0)
            return serve_fail(err, 400, "samplers", NULL, "'samplers': %s", tessera_last_error());
        sp->samplers = r->samplers_text;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, "samplers", NULL, "'samplers' must be an array of sampler names");
    names[0] = '\0';
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || !*e->valuestring || strpbrk(e->valuestring, ";,"))
            return serve_fail(err, 400, "samplers", NULL, "'samplers' must be an array of sampler names");
        size_t nl = strlen(e->valuestring);
        if (len + nl + 2 > sizeof names) return serve_fail(err, 400, "samplers", NULL, "'samplers' is too long");
        if (len) names[len++] = ';';
        memcpy(names + len, e->valuestring, nl + 1);
        len += nl;
    }
    if (tessera_sampler_order(names, false, r->samplers_text, sizeof r->samplers_text) < 0)
        return serve_fail(err, 400, "samplers", NULL, "'samplers': %s", tessera_last_error());
    sp->samplers = r->samplers_text;
    return 0;
}

/* llama-server's dry_sequence_breakers: a JSON array of strings (kept in r). */
static int get_breakers(const cJSON *root, serve_request *r, tessera_sampler_params *sp, serve_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "dry_sequence_breakers");
    if (api_is_null(v)) return 0;
    const char *bad = "'dry_sequence_breakers' must be an array of non-empty strings (at most 64)";
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > 64) return serve_fail(err, 400, "dry_sequence_breakers", NULL, "%s", bad);
    int n = cJSON_GetArraySize(v);
    r->dry_breakers = calloc(n > 0 ? (size_t)n : 1, sizeof *r->dry_breakers);
    if (!r->dry_breakers) return serve_fail(err, 500, NULL, NULL, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e) || !*e->valuestring) return serve_fail(err, 400, "dry_sequence_breakers", NULL, "%s", bad);
        r->dry_breakers[r->n_dry_breakers] = strdup(e->valuestring);
        if (!r->dry_breakers[r->n_dry_breakers]) return serve_fail(err, 500, NULL, NULL, "out of memory");
        r->n_dry_breakers++;
    }
    sp->dry_sequence_breakers = (const char *const *)r->dry_breakers;
    sp->n_dry_sequence_breakers = r->n_dry_breakers;
    return 0;
}

/* llama-server's ignore_eos: every end-of-generation token of the
 * vocabulary banned (bias -inf), so that only the length or a stop string
 * ends the reply. Appended to bias[*n..cap). */
static int add_eog_bans(const serve_api *api, tessera_logit_bias *bias, int32_t *n, int32_t cap, serve_error *err) {
    int32_t n_vocab = tessera_model_n_vocab(api->model);
    for (tessera_token t = 0; t < n_vocab; t++) {
        if (!tessera_token_is_eog(api->model, t)) continue;
        if (*n == cap)
            return serve_fail(err, 400, "ignore_eos", NULL, "'ignore_eos' and 'logit_bias' give more than %d biases",
                              cap);
        bias[(*n)++] = (tessera_logit_bias){t, -INFINITY};
    }
    return 0;
}

/* One sampler per choice from sp plus the request's logit_bias (and
 * ignore_eos's bans), which r keeps for generation_settings; with a seed,
 * choice i draws from seed + i so that the choices differ and the request
 * is reproducible (seed LLONG_MIN: random). */
static int make_samplers(const serve_api *api, const cJSON *root, serve_request *r, tessera_sampler_params *sp,
                         long long seed, serve_error *err) {
    static const tessera_logit_bias bias_none[1];
    enum { CAP = SERVE_MAX_BIAS + 64 }; /* room for the end-of-generation tokens */
    bool ignore_eos = false;
    if (api_get_bool(root, "ignore_eos", &ignore_eos, err)) return -1;
    tessera_logit_bias *bias = malloc(CAP * sizeof *bias);
    if (!bias) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int32_t n_bias = 0;
    if (get_logit_bias(api, root, bias, &n_bias, err) != 0 ||
        (ignore_eos && add_eog_bans(api, bias, &n_bias, CAP, err) != 0)) {
        free(bias);
        return -1;
    }
    r->logit_bias = bias; /* freed with r */
    r->n_logit_bias = n_bias;
    r->ignore_eos = ignore_eos;
    sp->seed = seed == LLONG_MIN ? TESSERA_SEED_RANDOM : (uint32_t)((unsigned long long)seed % 0xFFFFFFFFull);
    sp->logit_bias = n_bias ? bias : bias_none;
    sp->n_logit_bias = n_bias;
    for (int32_t c = 0; c < r->n_choices; c++) {
        if (seed != LLONG_MIN)
            sp->seed = (uint32_t)(((unsigned long long)seed + (unsigned long long)c) % 0xFFFFFFFFull);
        r->choices[c].sampler = tessera_sampler_new_model(api->model, sp);
        if (!r->choices[c].sampler) return serve_fail(err, 400, NULL, NULL, "%s", tessera_last_error());
    }
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
    if (api_get_number(root, "temperature", 0.0, 1e6, &temp, err) || api_get_number(root, "top_p", 0.0, 1.0, &top_p, err) ||
        api_get_number(root, "min_p", 0.0, 1.0, &min_p, err) || api_get_int(root, "top_k", -1, INT32_MAX, &top_k, err) ||
        api_get_number(root, "typical_p", 0.0, 1.0, &typ, err) ||
        api_get_number(root, "repeat_penalty", 0.0, 1e6, &rep, err) ||
        api_get_int(root, "repeat_last_n", -1, INT32_MAX, &last_n, err) ||
        api_get_number(root, "presence_penalty", -2.0, 2.0, &pres, err) ||
        api_get_number(root, "frequency_penalty", -2.0, 2.0, &freq, err) ||
        api_get_int(root, "seed", -9.2e18, 9.2e18, &seed, err))
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
    /* llama.cpp's other samplers (DRY, XTC, top-n-sigma, dynamic
     * temperature, mirostat) and their order. */
    double dry_mult = sp.dry_multiplier, dry_base = sp.dry_base, xtc_p = sp.xtc_probability, xtc_t = sp.xtc_threshold;
    double sigma = sp.top_n_sigma, dyn_r = sp.dynatemp_range, dyn_e = sp.dynatemp_exponent;
    double tau = sp.mirostat_tau, eta = sp.mirostat_eta;
    long long dry_len = sp.dry_allowed_length, dry_last = sp.dry_penalty_last_n, miro = sp.mirostat;
    if (api_get_number(root, "dry_multiplier", 0.0, 1e6, &dry_mult, err) ||
        api_get_number(root, "dry_base", 1e-6, 1e6, &dry_base, err) ||
        api_get_int(root, "dry_allowed_length", 0, INT32_MAX, &dry_len, err) ||
        api_get_int(root, "dry_penalty_last_n", -1, INT32_MAX, &dry_last, err) ||
        api_get_number(root, "xtc_probability", 0.0, 1.0, &xtc_p, err) ||
        api_get_number(root, "xtc_threshold", 0.0, 1.0, &xtc_t, err) ||
        api_get_number(root, "top_n_sigma", -1e6, 1e6, &sigma, err) ||
        api_get_number(root, "dynatemp_range", 0.0, 1e6, &dyn_r, err) ||
        api_get_number(root, "dynatemp_exponent", 0.0, 1e6, &dyn_e, err) ||
        api_get_int(root, "mirostat", 0, 2, &miro, err) || api_get_number(root, "mirostat_tau", 0.0, 1e6, &tau, err) ||
        api_get_number(root, "mirostat_eta", 0.0, 1e6, &eta, err))
        return -1;
    sp.dry_multiplier = (float)dry_mult;
    sp.dry_base = (float)dry_base;
    sp.dry_allowed_length = (int32_t)dry_len;
    sp.dry_penalty_last_n = dry_last < 0 ? api->slot_ctx : (int32_t)dry_last;
    sp.xtc_probability = (float)xtc_p;
    sp.xtc_threshold = (float)xtc_t;
    sp.top_n_sigma = (float)sigma;
    sp.dynatemp_range = (float)dyn_r;
    sp.dynatemp_exponent = (float)dyn_e;
    sp.mirostat = (int32_t)miro;
    sp.mirostat_tau = (float)tau;
    sp.mirostat_eta = (float)eta;
    if (sp.samplers) { /* the server's --samplers, copied: r outlives nothing it points at */
        snprintf(r->samplers_text, sizeof r->samplers_text, "%s", sp.samplers);
        sp.samplers = r->samplers_text;
    }
    if (get_samplers(root, r, &sp, err) != 0 || get_breakers(root, r, &sp, err) != 0) return -1;
    if (make_samplers(api, root, r, &sp, seed, err) != 0) return -1;
    r->sampling = sp;
    return 0;
}

/* response_format {"type": "text" | "json_object" | "json_schema"} (with
 * json_schema.schema; llama-server's json_object "schema" too) and
 * llama-server's "grammar" (GBNF). *out: the grammar, NULL for none;
 * *param_out: the field it came from, which a later failure names. */
static int get_grammar(const cJSON *root, tessera_grammar **out, const char **param_out, serve_error *err) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    const cJSON *gbnf = cJSON_GetObjectItemCaseSensitive(root, "grammar");
    if (!api_is_null(gbnf)) {
        if (!cJSON_IsString(gbnf))
            return serve_fail(err, 400, "grammar", NULL, "'grammar' must be a GBNF string");
        if (!api_is_null(rf) || !api_is_null(cJSON_GetObjectItemCaseSensitive(root, "json_schema")))
            return serve_fail(err, 400, "grammar", NULL,
                              "give one of 'grammar', 'json_schema' and 'response_format'");
        *out = tessera_grammar_parse(gbnf->valuestring, strlen(gbnf->valuestring), NULL);
        *param_out = "grammar";
        return *out ? 0 : serve_fail(err, 400, "grammar", NULL, "%s", tessera_last_error());
    }
    const cJSON *js_top = cJSON_GetObjectItemCaseSensitive(root, "json_schema");
    if (!api_is_null(js_top)) { /* llama-server's: the schema itself */
        if (!api_is_null(rf))
            return serve_fail(err, 400, "json_schema", NULL, "give 'json_schema' or 'response_format', not both");
        char *text = cJSON_PrintUnformatted(js_top);
        if (!text) return serve_fail(err, 500, NULL, NULL, "out of memory");
        *out = tessera_grammar_from_json_schema(text, strlen(text));
        *param_out = "json_schema";
        free(text);
        return *out ? 0 : serve_fail(err, 400, "json_schema", NULL, "'json_schema': %s", tessera_last_error());
    }
    if (api_is_null(rf)) return 0;
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
        if (api_is_null(schema)) {
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
        if (api_is_null(schema)) return serve_fail(err, 400, param, NULL, "'%s' is required", param);
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
    {"samplers", FOR_ALL, "extension: the samplers in order (llama.cpp's names, or its letters as a string)"},
    {"dynatemp_range", FOR_ALL, "extension: dynamic temperature range (0: off)"},
    {"dynatemp_exponent", FOR_ALL, "extension: dynamic temperature exponent"},
    {"top_n_sigma", FOR_ALL, "extension: top-n-sigma (<= 0: off)"},
    {"xtc_probability", FOR_ALL, "extension: XTC's chance (0: off)"},
    {"xtc_threshold", FOR_ALL, "extension: XTC's threshold (> 0.5: off)"},
    {"dry_multiplier", FOR_ALL, "extension: DRY's multiplier (0: off)"},
    {"dry_base", FOR_ALL, "extension: DRY's base"},
    {"dry_allowed_length", FOR_ALL, "extension: DRY's allowed repeat length"},
    {"dry_penalty_last_n", FOR_ALL, "extension: tokens DRY looks back (-1: the context, 0: off)"},
    {"dry_sequence_breakers", FOR_ALL, "extension: DRY's sequence breakers (strings)"},
    {"mirostat", FOR_ALL, "extension: 0 off, 1 Mirostat, 2 Mirostat 2.0"},
    {"mirostat_tau", FOR_ALL, "extension: Mirostat's target entropy"},
    {"mirostat_eta", FOR_ALL, "extension: Mirostat's learning rate"},
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
    {"post_sampling_probs", FOR_CHAT | FOR_NATIVE,
     "n_probs (chat: logprobs) as the sampler's probabilities after its filters: prob, top_probs"},
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
    {"lora", FOR_ALL, "llama-server's: [{id, scale}] LoRA scales of this request (unlisted adapters: 0)"},
    {"return_tokens", FOR_NATIVE, "the generated token ids in 'tokens'"},
    {"response_fields", FOR_NATIVE, "only these fields of the response ('a/b' reaches into objects)"},
    {"ignore_eos", FOR_ALL, "extension: end-of-generation tokens banned (bias -inf), as llama-server"},
    {"add_generation_prompt", FOR_CHAT, "the template's add_generation_prompt (default true)"},
    {"continue_final_message", FOR_CHAT, "vLLM's: continue the final assistant message (the default prefill)"},
    {"verbose", FOR_ALL, "llama-server's: __verbose in the response (the prompt as the model saw it)"},
    {"timings_per_token", FOR_ALL, "llama-server's: timings in every stream chunk"},
    {"return_progress", FOR_ALL, "llama-server's: prompt_progress stream events while the prompt is read"},
    {"chat_template_kwargs", FOR_CHAT, "extension: extra variables of the chat template (enable_thinking...)"},
    {"reasoning_format", FOR_CHAT, "extension: none keeps <think> in content; else reasoning_content"},
    {"input_prefix", FOR_NATIVE, "/infill: the code before the cursor"},
    {"input_suffix", FOR_NATIVE, "/infill: the code after it"},
    {"input_extra", FOR_NATIVE, "/infill: other files, [{filename, text}]"},
    {"functions", FOR_CHAT, "OpenAI's deprecated function calling: only null (use tools)"},
    {"function_call", FOR_CHAT, "the same: only null (use tool_choice)"},
};

/* Known fields whose only accepted value is "off" (0 or null). */
static int check_off(const cJSON *root, serve_error *err) {
    static const char *const off[] = {"functions", "function_call"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, off[i]);
        if (!api_is_null(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0.0))
            return serve_fail(err, 400, off[i], "unsupported_parameter",
                              "'%s' is not implemented (use 'tools' and 'tool_choice')", off[i]);
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
        else if (!(FIELDS[i].kinds & want) && !api_is_null(f)) /* known, but not here: it would be lost */
            return serve_fail(err, 400, f->string, "unsupported_parameter", "'%.64s' is not a field of %s",
                              f->string,
                              want == FOR_CHAT ? "/v1/chat/completions" : want == FOR_COMPLETION ? "/v1/completions"
                                                                                                 : "/completion");
    }
    if (check_off(root, err) != 0) return -1;
    /* Fields accepted only with the values that ask for nothing missing. */
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "echo");
    if (want == FOR_COMPLETION && !api_is_null(v) && !cJSON_IsFalse(v))
        return serve_fail(err, 400, "echo", "unsupported_parameter", "'echo' true is not implemented");
    v = cJSON_GetObjectItemCaseSensitive(root, "suffix");
    if (want == FOR_COMPLETION && !api_is_null(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
        return serve_fail(err, 400, "suffix", "unsupported_parameter",
                          "'suffix' (insertion) is not implemented on /v1/completions; use /infill");
    v = cJSON_GetObjectItemCaseSensitive(root, "user");
    if (!api_is_null(v) && !cJSON_IsString(v))
        return serve_fail(err, 400, "user", NULL, "'user' must be a string");
    v = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    if (!api_is_null(v) && !cJSON_IsObject(v))
        return serve_fail(err, 400, "metadata", NULL, "'metadata' must be an object");
    return 0;
}

/* logprobs / top_logprobs into r->top_logprobs (-1: none). */
static int parse_logprobs(const cJSON *root, serve_kind kind, serve_request *r, serve_error *err) {
    long long top = -1;
    if (kind == SERVE_NATIVE || kind == SERVE_INFILL) return 0; /* n_probs (parse_options) */
    if (kind == SERVE_COMPLETION) {
        if (api_get_int(root, "logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &top, err)) return -1;
    } else {
        bool on = false;
        if (api_get_bool(root, "logprobs", &on, err)) return -1;
        long long k = -1;
        if (api_get_int(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &k, err)) return -1;
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
    bool n_predict = api_is_null(cJSON_GetObjectItemCaseSensitive(root, mt_key));
    if (n_predict) mt_key = "n_predict";
    if (api_get_int(root, mt_key, n_predict ? -1 : 1, INT32_MAX, &max_tokens, err) ||
        api_get_int(root, "n", 1, 1e9, &n, err) || api_get_int(root, "best_of", 1, 1e9, &best_of, err) ||
        api_get_int(root, "id_slot", -1, api->n_slots - 1, &id_slot, err))
        return -1;
    if (n_predict && max_tokens == 0)
        return serve_fail(err, 400, "n_predict", NULL, "'n_predict' 0 asks for nothing; give -1 or >= 1");
    if (n > api->n_slots)
        return serve_fail(err, 400, "n", NULL, "'n' is %lld, more than the %d slots (--parallel)", n, api->n_slots);
    if (best_of && best_of != 1 && best_of != n)
        return serve_fail(err, 400, "best_of", "unsupported_parameter",
                          "'best_of' other than 1 or n is not implemented");
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
static int parse_options(const serve_api *api, const cJSON *root, serve_kind kind, serve_call *call, serve_request *r,
                         serve_error *err) {
    if (api_get_bool(root, "stream", &call->stream, err)) return -1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!api_is_null(so)) {
        if (!cJSON_IsObject(so))
            return serve_fail(err, 400, "stream_options", NULL, "'stream_options' must be an object");
        if (api_get_bool(so, "include_usage", &call->include_usage, err)) return -1;
    }
    r->cache_prompt = true; /* llama-server's default: reuse a slot's cached prefix */
    const cJSON *lora = cJSON_GetObjectItemCaseSensitive(root, "lora");
    if (!api_is_null(lora)) {
        if (serve_lora_parse(lora, "lora", api->n_loras, r->lora, err) != 0) return -1;
        r->has_lora = true;
    }
    call->verbose = api->verbose;
    if (api_get_bool(root, "verbose", &call->verbose, err) ||
        api_get_bool(root, "timings_per_token", &call->timings_per_token, err) ||
        api_get_bool(root, "return_progress", &call->return_progress, err))
        return -1;
    long long n_probs = 0;
    if (api_get_bool(root, "cache_prompt", &r->cache_prompt, err) || api_get_bool(root, "return_tokens", &call->return_tokens, err) ||
        api_get_int(root, "n_probs", 0, SERVE_MAX_TOP_LOGPROBS, &n_probs, err))
        return -1;
    call->n_probs = (int32_t)n_probs;
    if (api_get_bool(root, "post_sampling_probs", &r->post_sampling_probs, err)) return -1; /* chat, native */
    if (kind == SERVE_NATIVE || kind == SERVE_INFILL) {
        if (n_probs > 0) r->top_logprobs = (int32_t)n_probs;
        const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_fields");
        if (!api_is_null(rf)) {
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
        for (int32_t i = 0; i < r->n_prompt; i++) /* a medium's rows are no tokens for the penalties */
            if (r->prompt[i] >= 0) tessera_sampler_accept(r->choices[c].sampler, r->prompt[i]);
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
        if (api_parse_messages(api, root, r, &tool_grammar, err) != 0) return -1;
        if (tool_grammar) { /* the conflict with `grammar` was refused above */
            tessera_grammar_free(*grammar);
            *grammar = tool_grammar;
            r->grammar_param = "tool_choice";
        }
        return 0;
    }
    if (kind == SERVE_INFILL) return api_parse_infill(api, root, r, err);
    return api_parse_prompt(api, root, index, r, err);
}

char *serve_api_input_tokens(const serve_api *api, const char *body, size_t len, serve_error *err) {
    serve_call call;
    serve_request *r = NULL;
    if (serve_api_parse(api, SERVE_CHAT, body, len, &call, &r, err) != 0) return NULL;
    char out[64];
    snprintf(out, sizeof out, "{\"input_tokens\":%d}", (int)r->n_prompt);
    serve_request_free(r);
    char *s = strdup(out);
    if (!s) serve_fail(err, 500, NULL, NULL, "out of memory");
    return s;
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
    if (!api_is_null(model) && !cJSON_IsString(model)) {
        serve_fail(err, 400, "model", NULL, "'model' must be a string");
        goto done;
    }
    if (parse_limits(api, root, kind, &r, err) || parse_options(api, root, kind, call, r, err) ||
        get_stop(root, r, err) || parse_logprobs(root, kind, r, err) || parse_sampling(api, root, r, err) ||
        get_grammar(root, &grammar, &r->grammar_param, err) ||
        parse_input(api, root, kind, index, r, &grammar, err) || samplers_start(api, r, grammar, err))
        goto done;
    r->want_progress = call->return_progress && call->stream;
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

