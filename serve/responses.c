/*
 * responses — OpenAI's Responses API on the chat path: POST /v1/responses,
 * streamed or not.
 *
 * The request becomes a chat request: `instructions` a system message,
 * `input` (a string, or message, function_call and function_call_output
 * items) the conversation, function `tools` and tool_choice as they are,
 * text.format (json_schema, json_object) response_format, max_output_tokens
 * max_tokens. The chat path's reply comes back as output items (reasoning,
 * a message with output_text, function_call items) and, streamed, as the
 * Responses event sequence. Nothing is stored: store, previous_response_id
 * and conversation are refused. POST /v1/responses/input_tokens counts the
 * prompt of such a body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dialect.h"
#include "media_part.h"

static const char *const KNOWN[] = {
    "model",   "input",       "instructions", "tools",        "tool_choice",        "parallel_tool_calls",
    "text",    "max_output_tokens", "temperature", "top_p",   "stream",             "stream_options",
    "store",   "previous_response_id", "conversation", "background", "include",     "reasoning",
    "metadata", "user",       "safety_identifier", "prompt_cache_key", "service_tier", "truncation",
    "top_logprobs", "max_tool_calls", "prompt",
    /* llama-server's stream telemetry, as on its chat path */
    "timings_per_token", "return_progress", NULL};

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

static const char *str_of(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ------------------------------------------------------------ request */

/* Message content: a string, or input_text / output_text parts. */
static cJSON *item_content(const cJSON *v, const char *param, serve_error *err) {
    if (cJSON_IsString(v)) return cJSON_CreateString(v->valuestring);
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, param, NULL, "'%s' must be a string or an array of content parts", param), NULL;
    cJSON *parts = cJSON_CreateArray();
    int j = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, v) {
        const char *type = str_of(p, "type"), *text = str_of(p, "text");
        if (type && !strcmp(type, "input_image")) { /* {"image_url": URL}: an OpenAI image_url part, checked on
                                                       * the chat path under this part's name */
            char where[96];
            snprintf(where, sizeof where, "%s[%d]", param, j++);
            const char *url = str_of(p, "image_url");
            cJSON *part = cJSON_CreateObject();
            cJSON *iu = part ? cJSON_AddObjectToObject(part, "image_url") : NULL;
            int bad = 0;
            if (!url)
                bad = serve_fail(err, 400, param, NULL, "'%s' (input_image) needs a string 'image_url' (a data: URL)",
                                 where);
            else if (!iu || !cJSON_AddStringToObject(part, "type", "image_url") ||
                     !cJSON_AddStringToObject(iu, "url", url) || serve_media_part_mark(part, where, param) != 0)
                bad = serve_fail(err, 500, NULL, NULL, "out of memory");
            if (bad) {
                cJSON_Delete(part);
                cJSON_Delete(parts);
                return NULL;
            }
            cJSON_AddItemToArray(parts, part);
            continue;
        }
        if (!type || !text || (strcmp(type, "input_text") && strcmp(type, "output_text") && strcmp(type, "text"))) {
            serve_fail(err, 400, param, "unsupported_parameter",
                       "'%s[%d]' is a '%.40s' part; this server reads input_text, output_text and input_image "
                       "parts", param, j, type ? type : "?");
            cJSON_Delete(parts);
            return NULL;
        }
        cJSON *part = cJSON_CreateObject();
        cJSON_AddStringToObject(part, "type", "text");
        cJSON_AddStringToObject(part, "text", text);
        cJSON_AddItemToArray(parts, part);
        j++;
    }
    return parts;
}

/* A function_call item: a call on the last assistant message (a new one
 * unless the previous item made it). */
static int add_function_call(const cJSON *item, const char *param, cJSON *list, serve_error *err) {
    const char *call_id = str_of(item, "call_id"), *name = str_of(item, "name"), *args = str_of(item, "arguments");
    if (!call_id || !name || !args)
        return serve_fail(err, 400, param, NULL, "'%s' (function_call) needs string 'call_id', 'name' and 'arguments'",
                          param);
    cJSON *last = cJSON_GetArrayItem(list, cJSON_GetArraySize(list) - 1);
    const char *role = str_of(last, "role");
    if (!role || strcmp(role, "assistant")) last = serve_dialect_add_message(list, "assistant", cJSON_CreateNull());
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
    if (!calls) calls = cJSON_AddArrayToObject(last, "tool_calls");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(calls, c);
    cJSON_AddStringToObject(c, "id", call_id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", name);
    cJSON_AddStringToObject(fn, "arguments", args);
    return 0;
}

/* One input item into chat messages. */
static int add_item(const cJSON *item, int i, cJSON *list, serve_error *err) {
    char param[48];
    snprintf(param, sizeof param, "input[%d]", i);
    if (!cJSON_IsObject(item)) return serve_fail(err, 400, param, NULL, "'%s' must be an object", param);
    const char *type = str_of(item, "type"), *role = str_of(item, "role");
    if (!type && role) type = "message";
    if (!type) return serve_fail(err, 400, param, NULL, "'%s' has no 'type'", param);
    if (!strcmp(type, "message")) {
        if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") &&
                      strcmp(role, "developer")))
            return serve_fail(err, 400, param, NULL, "'%s.role' must be user, assistant, system or developer", param);
        char p[64];
        snprintf(p, sizeof p, "%s.content", param);
        cJSON *content = item_content(cJSON_GetObjectItemCaseSensitive(item, "content"), p, err);
        if (!content) return -1;
        serve_dialect_add_message(list, role, content);
        return 0;
    }
    if (!strcmp(type, "function_call")) return add_function_call(item, param, list, err);
    if (!strcmp(type, "function_call_output")) {
        const char *call_id = str_of(item, "call_id");
        char p[64];
        snprintf(p, sizeof p, "%s.output", param);
        if (!call_id) return serve_fail(err, 400, param, NULL, "'%s' (function_call_output) needs 'call_id'", param);
        cJSON *content = item_content(cJSON_GetObjectItemCaseSensitive(item, "output"), p, err);
        if (!content) return -1;
        cJSON_AddStringToObject(serve_dialect_add_message(list, "tool", content), "tool_call_id", call_id);
        return 0;
    }
    if (!strcmp(type, "reasoning")) return 0; /* earlier reasoning: not shown to the model again */
    return serve_fail(err, 400, param, "unsupported_parameter",
                      "'%s' is a '%.40s' item; this server reads message, function_call and function_call_output "
                      "items (nothing is stored to refer to)",
                      param, type);
}

static int add_input(const cJSON *root, cJSON *chat, serve_error *err) {
    cJSON *list = cJSON_AddArrayToObject(chat, "messages");
    const cJSON *instr = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    if (!is_null(instr)) {
        if (!cJSON_IsString(instr))
            return serve_fail(err, 400, "instructions", NULL, "'instructions' must be a string");
        serve_dialect_add_message(list, "system", cJSON_CreateString(instr->valuestring));
    }
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (cJSON_IsString(input)) {
        serve_dialect_add_message(list, "user", cJSON_CreateString(input->valuestring));
        return 0;
    }
    if (!cJSON_IsArray(input) || cJSON_GetArraySize(input) == 0)
        return serve_fail(err, 400, "input", NULL, "'input' must be a string or a non-empty array of items");
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, input)
        if (add_item(item, i++, list, err) != 0) return -1;
    return 0;
}

/* A function tool {type, name, description, parameters, strict} as chat's. */
static int add_tool(const cJSON *t, const char *param, cJSON *list, serve_error *err) {
    const char *type = str_of(t, "type"), *name = str_of(t, "name");
    if (!type || strcmp(type, "function"))
        return serve_fail(err, 400, param, "unsupported_parameter",
                          "'%s' is a '%.40s' tool; this server runs function tools only", param, type ? type : "?");
    if (!name) return serve_fail(err, 400, param, NULL, "'%s' needs a string 'name'", param);
    serve_dialect_add_function(list, name, str_of(t, "description"), cJSON_GetObjectItemCaseSensitive(t, "parameters"));
    return 0;
}

static int add_tool_choice(const cJSON *root, cJSON *chat, serve_error *err) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (is_null(tc)) return 0;
    if (cJSON_IsString(tc)) {
        cJSON_AddStringToObject(chat, "tool_choice", tc->valuestring); /* auto, none, required: chat checks */
        return 0;
    }
    const char *type = str_of(tc, "type"), *name = str_of(tc, "name");
    if (!type || strcmp(type, "function") || !name)
        return serve_fail(err, 400, "tool_choice", NULL,
                          "'tool_choice' must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    serve_dialect_force_function(chat, name);
    return 0;
}

/* text.format {type: text | json_object | json_schema (name, schema, strict)}. */
static int add_format(const cJSON *root, cJSON *chat, serve_error *err) {
    const cJSON *format;
    if (serve_dialect_get_format(root, "text", &format, err) != 0) return -1;
    const char *type = str_of(format, "type");
    if (!format || (type && !strcmp(type, "text"))) return 0;
    if (type && !strcmp(type, "json_object")) {
        cJSON_AddStringToObject(cJSON_AddObjectToObject(chat, "response_format"), "type", "json_object");
        return 0;
    }
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(format, "schema");
    if (!type || strcmp(type, "json_schema"))
        return serve_fail(err, 400, "text.format.type", NULL,
                          "'text.format.type' must be text, json_object or json_schema");
    if (!cJSON_IsObject(schema))
        return serve_fail(err, 400, "text.format.schema", NULL, "'text.format.schema' must be a JSON Schema object");
    serve_dialect_json_schema(chat, str_of(format, "name") ? str_of(format, "name") : "response", schema);
    return 0;
}

/* Fields the Responses API defines that ask for what this server cannot do. */
static int refuse_unhonoured(const cJSON *root, serve_error *err) {
    static const char *const stored[] = {"previous_response_id", "conversation", "prompt", "top_logprobs",
                                         "max_tool_calls", NULL};
    for (int i = 0; stored[i]; i++)
        if (!is_null(cJSON_GetObjectItemCaseSensitive(root, stored[i])))
            return serve_fail(err, 400, stored[i], "unsupported_parameter",
                              "'%s' is not implemented (this server stores no responses, prompts or logprobs)",
                              stored[i]);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "store")))
        return serve_fail(err, 400, "store", "unsupported_parameter", "'store' true: this server stores nothing");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "background")))
        return serve_fail(err, 400, "background", "unsupported_parameter", "'background' true is not implemented");
    const cJSON *inc;
    cJSON_ArrayForEach(inc, cJSON_GetObjectItemCaseSensitive(root, "include"))
        if (cJSON_IsString(inc) && strstr(inc->valuestring, "logprobs"))
            return serve_fail(err, 400, "include", "unsupported_parameter", "'include' of logprobs is not implemented");
    return 0;
}

static cJSON *to_chat(const cJSON *root, serve_error *err) {
    static const char *const copied[] = {"model", "temperature", "top_p", "stream", "parallel_tool_calls",
                                         "timings_per_token", "return_progress", NULL};
    if (refuse_unhonoured(root, err) != 0) return NULL;
    cJSON *chat = cJSON_CreateObject();
    if (!chat) return serve_fail(err, 500, NULL, NULL, "out of memory"), NULL;
    for (int i = 0; copied[i]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, copied[i]);
        if (v) cJSON_AddItemToObject(chat, copied[i], cJSON_Duplicate(v, 1));
    }
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(root, "max_output_tokens");
    if (max) cJSON_AddItemToObject(chat, "max_tokens", cJSON_Duplicate(max, 1));
    if (add_input(root, chat, err) || serve_dialect_add_tools(root, chat, err, add_tool) ||
        add_tool_choice(root, chat, err) ||
        add_format(root, chat, err)) {
        cJSON_Delete(chat);
        return NULL;
    }
    return chat;
}

/* A number as the JSON a person would write (a float's 0.8, not 0.800000011920929). */
static cJSON *short_number(double v) {
    char text[32];
    snprintf(text, sizeof text, "%.6g", v);
    return cJSON_CreateNumber(strtod(text, NULL));
}

/* The request's settings as the response object repeats them (OpenAI's
 * Response has them all): what was asked, else what was used, else the
 * API's default. */
static cJSON *echo_settings(const serve_api *api, const cJSON *root) {
    static const char *const as_given[][2] = {
        {"instructions", "null"},       {"max_output_tokens", "null"},   {"parallel_tool_calls", "true"},
        {"previous_response_id", "null"}, {"tool_choice", "\"auto\""},  {"tools", "[]"},
        {"truncation", "\"disabled\""}, {"user", "null"},               {"metadata", "{}"},
        {"reasoning", "{\"effort\":null,\"summary\":null}"},          {"text", "{\"format\":{\"type\":\"text\"}}"},
        {"service_tier", "\"default\""}, {"prompt_cache_key", "null"},   {"safety_identifier", "null"}};
    cJSON *e = cJSON_CreateObject();
    for (size_t i = 0; e && i < sizeof as_given / sizeof *as_given; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, as_given[i][0]);
        cJSON_AddItemToObject(e, as_given[i][0], is_null(v) ? cJSON_Parse(as_given[i][1]) : cJSON_Duplicate(v, 1));
    }
    tessera_sampler_params d = api->sampling ? *api->sampling : tessera_sampler_default_params();
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "temperature");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "top_p");
    cJSON_AddItemToObject(e, "temperature", short_number(cJSON_IsNumber(t) ? t->valuedouble : d.temp));
    cJSON_AddItemToObject(e, "top_p", short_number(cJSON_IsNumber(p) ? p->valuedouble : d.top_p));
    return e;
}

/* The chat path names its own fields in errors: give them ours. */
static void rename_param(serve_error *err) {
    static const char *const names[][2] = {{"max_tokens", "max_output_tokens"}, {"messages", "input"},
                                           {"response_format", "text.format"}};
    cJSON *o = err->body ? cJSON_Parse(err->body) : NULL;
    cJSON *param = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "error"), "param");
    for (size_t i = 0; cJSON_IsString(param) && i < sizeof names / sizeof *names; i++)
        if (!strncmp(param->valuestring, names[i][0], strlen(names[i][0]))) {
            cJSON_SetValuestring(param, names[i][1]);
            char *s = cJSON_PrintUnformatted(o);
            if (s) {
                free(err->body);
                err->body = s;
            }
            break;
        }
    cJSON_Delete(o);
}

static int responses_parse(const serve_api *api, const char *body, size_t len, int index, serve_call *call,
                           serve_request **out, serve_error *err) {
    (void)index; /* one request per body */
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object");
    }
    char ignored[sizeof call->ignored];
    serve_dialect_ignore_unknown(root, KNOWN, ignored, sizeof ignored);
    cJSON *chat = to_chat(root, err);
    cJSON *echo = chat ? echo_settings(api, root) : NULL;
    cJSON_Delete(root);
    if (!chat) return -1;
    int rc = serve_dialect_parse_chat(api, chat, call, out, err);
    if (rc != 0) {
        rename_param(err);
    } else {
        snprintf(call->ignored, sizeof call->ignored, "%s", ignored); /* for the request log */
        (*out)->dialect_echo = echo ? cJSON_PrintUnformatted(echo) : NULL;
    }
    cJSON_Delete(echo);
    return rc;
}

/* POST /v1/responses/input_tokens: {"object": "response.input_tokens",
 * "input_tokens": N}, the prompt tokens the same body would have on
 * /v1/responses (instructions, input, tools, text.format), generating
 * nothing. */
static char *input_tokens(const serve_api *api, const char *body, size_t len, serve_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object"), NULL;
    }
    cJSON *chat = to_chat(root, err);
    cJSON_Delete(root);
    serve_call call;
    serve_request *r = NULL;
    if (!chat) return NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(chat, "stream"); /* counting answers at once */
    if (serve_dialect_parse_chat(api, chat, &call, &r, err) != 0) {
        rename_param(err);
        return NULL;
    }
    char out[80];
    snprintf(out, sizeof out, "{\"object\":\"response.input_tokens\",\"input_tokens\":%d}", (int)r->n_prompt);
    serve_request_free(r);
    return strdup(out);
}

/* ------------------------------------------------------------ response */

/* Our ids from the chat path's id (chatcmpl-X): resp_X, msg_X, rs_X; a
 * function call's item fc_Y for its call_Y. */
static void make_id(char *out, size_t n, const char *prefix, const char *id) {
    const char *dash = strchr(id, '-'), *under = strchr(id, '_');
    const char *rest = !strncmp(id, "chatcmpl-", 9) ? dash + 1 : !strncmp(id, "call_", 5) ? under + 1 : id;
    snprintf(out, n, "%s_%s", prefix, rest);
}

static cJSON *response_head(const serve_api *api, const serve_call *call, const serve_request *r,
                            const char *status) {
    char id[64];
    make_id(id, sizeof id, "resp", call->id);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)call->created);
    cJSON_AddStringToObject(o, "status", status);
    cJSON_AddNullToObject(o, "error");
    cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", api->model_id);
    cJSON_AddArrayToObject(o, "output");
    cJSON_AddFalseToObject(o, "store");
    cJSON_AddFalseToObject(o, "background");
    cJSON *echo = r->dialect_echo ? cJSON_Parse(r->dialect_echo) : NULL;
    for (cJSON *f = echo ? echo->child : NULL, *next; f; f = next) {
        next = f->next;
        cJSON_AddItemToObject(o, f->string, cJSON_DetachItemViaPointer(echo, f));
    }
    cJSON_Delete(echo);
    cJSON_AddNullToObject(o, "usage"); /* until the end */
    return o;
}

static cJSON *text_part(const char *type, const char *text) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", type);
    cJSON_AddStringToObject(p, "text", text);
    if (!strcmp(type, "output_text")) {
        cJSON_AddArrayToObject(p, "annotations");
        cJSON_AddArrayToObject(p, "logprobs");
    }
    return p;
}

/* A message or reasoning item; text NULL: begun, no content yet. */
static cJSON *text_item(const serve_call *call, bool reasoning, const char *text, const char *status) {
    char id[64];
    make_id(id, sizeof id, reasoning ? "rs" : "msg", call->id);
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", reasoning ? "reasoning" : "message");
    cJSON_AddStringToObject(it, "status", status);
    if (reasoning) cJSON_AddArrayToObject(it, "summary");
    else cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *content = cJSON_AddArrayToObject(it, "content");
    if (text) cJSON_AddItemToArray(content, text_part(reasoning ? "reasoning_text" : "output_text", text));
    return it;
}

/* A chat tool call as a function_call item; args NULL: begun, "" so far. */
static cJSON *call_item(const cJSON *tc, const char *args, const char *status) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const char *call_id = str_of(tc, "id") ? str_of(tc, "id") : "call_";
    char id[128];
    make_id(id, sizeof id, "fc", call_id);
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "status", status);
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", str_of(fn, "name") ? str_of(fn, "name") : "");
    cJSON_AddStringToObject(it, "arguments", args ? args : "");
    return it;
}

/* The whole response object of a finished request. */
static cJSON *response_object(const serve_api *api, const serve_call *call, const serve_request *r) {
    cJSON *chat = serve_dialect_chat_response(api, call, r);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
    if (!msg) {
        cJSON_Delete(chat);
        return NULL;
    }
    const char *finish = str_of(choice, "finish_reason");
    bool cut = finish && !strcmp(finish, "length");
    const char *status = cut ? "incomplete" : "completed";
    cJSON *o = response_head(api, call, r, status), *output = cJSON_GetObjectItemCaseSensitive(o, "output");
    if (cut) {
        cJSON_DeleteItemFromObjectCaseSensitive(o, "incomplete_details");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    }
    const char *reasoning = str_of(msg, "reasoning_content"), *text = str_of(msg, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *tc;
    if (reasoning) cJSON_AddItemToArray(output, text_item(call, true, reasoning, "completed"));
    /* an empty message only where there is nothing else, as a stream opens one */
    if (text && (text[0] || (!calls && !reasoning))) cJSON_AddItemToArray(output, text_item(call, false, text, status));
    cJSON_ArrayForEach(tc, calls) {
        const char *args = str_of(cJSON_GetObjectItemCaseSensitive(tc, "function"), "arguments");
        cJSON_AddItemToArray(output, call_item(tc, args ? args : "", "completed"));
    }
    int32_t gen = serve_request_n_gen(r);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "usage");
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", r->n_prompt);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", r->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", gen);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", r->n_prompt + gen);
    cJSON_Delete(chat);
    return o;
}

static char *responses_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs,
                                int n) {
    (void)n;
    cJSON *o = response_object(api, &calls[0], reqs[0]);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------ streams */

/* What a stream has opened: the output item now open (a message or
 * reasoning, index n_items - 1) and its text so far. */
typedef struct resp_stream {
    bool started;
    int seq;          /* sequence_number of the next event */
    int n_items;
    int open;         /* 0 none, 1 message, 2 reasoning */
    char *text;
    size_t len;
    bool failed;
    bool cut;         /* the reply ended at max_output_tokens: the message is incomplete */
} resp_stream;

/* An event {type, sequence_number, ...fields of body (taken)}. */
static char *emit(char *out, resp_stream *st, const char *type, cJSON *body) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNumberToObject(e, "sequence_number", st->seq++);
    cJSON *f = body ? body->child : NULL;
    while (f) {
        cJSON *next = f->next;
        cJSON_AddItemToObject(e, f->string, cJSON_DetachItemViaPointer(body, f));
        f = next;
    }
    cJSON_Delete(body);
    return serve_sse_event(out, type, e);
}

/* {item_id, output_index[, content_index]} of the open item. */
static cJSON *where(const serve_call *call, const resp_stream *st, bool content) {
    char id[64];
    make_id(id, sizeof id, st->open == 2 ? "rs" : "msg", call->id);
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "item_id", id);
    cJSON_AddNumberToObject(b, "output_index", st->n_items - 1);
    if (content) cJSON_AddNumberToObject(b, "content_index", 0);
    return b;
}

static char *item_event(char *out, resp_stream *st, const char *type, cJSON *item) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "output_index", st->n_items - 1);
    cJSON_AddItemToObject(b, "item", item);
    return emit(out, st, type, b);
}

/* The open message or reasoning item's closing events. */
static char *close_item(char *out, const serve_call *call, resp_stream *st) {
    if (!st->open) return out;
    bool reasoning = st->open == 2;
    const char *text = st->text ? st->text : "";
    cJSON *b = where(call, st, true);
    cJSON_AddStringToObject(b, "text", text);
    out = emit(out, st, reasoning ? "response.reasoning_text.done" : "response.output_text.done", b);
    if (!reasoning) {
        b = where(call, st, true);
        cJSON_AddItemToObject(b, "part", text_part("output_text", text));
        out = emit(out, st, "response.content_part.done", b);
    }
    const char *status = !reasoning && st->cut ? "incomplete" : "completed";
    out = item_event(out, st, "response.output_item.done", text_item(call, reasoning, text, status));
    free(st->text);
    st->text = NULL;
    st->len = 0;
    st->open = 0;
    return out;
}

/* Text (kind 1) or reasoning (kind 2): into the open item of that kind;
 * "" opens an empty message only when there is no item (a reply with nothing).
 * timings (timings_per_token: the chat chunk's), when not NULL, go on the delta. */
static char *text_delta(char *out, const serve_call *call, resp_stream *st, int kind, const char *text,
                        const cJSON *timings) {
    size_t n = strlen(text);
    if (n == 0 && st->n_items > 0) return out;
    if (st->open != kind) {
        out = close_item(out, call, st);
        st->open = kind;
        st->n_items++;
        out = item_event(out, st, "response.output_item.added", text_item(call, kind == 2, NULL, "in_progress"));
        if (kind == 1) {
            cJSON *b = where(call, st, true);
            cJSON_AddItemToObject(b, "part", text_part("output_text", ""));
            out = emit(out, st, "response.content_part.added", b);
        }
    }
    if (n == 0) return out;
    char *grown = realloc(st->text, st->len + n + 1);
    if (grown) {
        memcpy(grown + st->len, text, n + 1);
        st->text = grown;
        st->len += n;
    }
    cJSON *b = where(call, st, true);
    cJSON_AddStringToObject(b, "delta", text);
    if (kind == 1) cJSON_AddArrayToObject(b, "logprobs");
    if (timings) cJSON_AddItemToObject(b, "timings", cJSON_Duplicate(timings, 1));
    return emit(out, st, kind == 1 ? "response.output_text.delta" : "response.reasoning_text.delta", b);
}

/* A whole tool call: added, its arguments, done. */
static char *call_events(char *out, const serve_call *call, resp_stream *st, const cJSON *tc) {
    out = close_item(out, call, st);
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const char *args = str_of(fn, "arguments") ? str_of(fn, "arguments") : "";
    st->n_items++;
    out = item_event(out, st, "response.output_item.added", call_item(tc, NULL, "in_progress"));
    const char *kinds[] = {"response.function_call_arguments.delta", "response.function_call_arguments.done"};
    for (int k = 0; k < 2; k++) {
        cJSON *item = call_item(tc, args, "completed");
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "item_id", str_of(item, "id"));
        cJSON_AddNumberToObject(b, "output_index", st->n_items - 1);
        cJSON_AddStringToObject(b, k ? "arguments" : "delta", args);
        if (k) cJSON_AddStringToObject(b, "name", str_of(item, "name"));
        cJSON_Delete(item);
        out = emit(out, st, kinds[k], b);
    }
    return item_event(out, st, "response.output_item.done", call_item(tc, args, "completed"));
}

/* One chat chunk as Responses events. llama-server's telemetry rides along:
 * a prompt_progress chunk (return_progress) is a response.in_progress event
 * with prompt_progress beside the response, and a chunk's timings
 * (timings_per_token) go on its deltas. */
static char *chunk_events(const serve_api *api, char *out, const serve_call *call, serve_request *r,
                          resp_stream *st, const cJSON *chunk) {
    const cJSON *progress = cJSON_GetObjectItemCaseSensitive(chunk, "prompt_progress");
    const cJSON *timings = cJSON_GetObjectItemCaseSensitive(chunk, "timings");
    if (progress) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddItemToObject(b, "response", response_head(api, call, r, "in_progress"));
        cJSON_AddItemToObject(b, "prompt_progress", cJSON_Duplicate(progress, 1));
        if (timings) cJSON_AddItemToObject(b, "timings", cJSON_Duplicate(timings, 1));
        out = emit(out, st, "response.in_progress", b);
    }
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    const char *reasoning = str_of(delta, "reasoning_content"), *content = str_of(delta, "content");
    const char *finish = str_of(choice, "finish_reason");
    if (finish && !strcmp(finish, "length")) st->cut = true;
    if (reasoning && reasoning[0]) out = text_delta(out, call, st, 2, reasoning, timings);
    if (content && content[0]) out = text_delta(out, call, st, 1, content, timings);
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(delta, "tool_calls")) out = call_events(out, call, st, tc);
    return out;
}

static char *whole_response_event(char *out, resp_stream *st, const char *type, cJSON *response) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddItemToObject(b, "response", response);
    return emit(out, st, type, b);
}

static char *responses_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                                   bool *finished, void **state) {
    resp_stream *st = *state ? *state : (*state = calloc(1, sizeof(resp_stream)));
    cJSON *chunks = st ? serve_dialect_chat_chunks(api, call, r, seen, finished) : NULL;
    if (!chunks) *finished = true;
    if (!st) return NULL;
    char *out = NULL;
    if (!st->started) {
        out = whole_response_event(out, st, "response.created", response_head(api, call, r, "in_progress"));
        out = whole_response_event(out, st, "response.in_progress", response_head(api, call, r, "in_progress"));
        st->started = true;
    }
    const cJSON *chunk;
    cJSON_ArrayForEach(chunk, chunks) {
        if (st->failed) break;
        if (!cJSON_GetObjectItemCaseSensitive(chunk, "error")) {
            out = chunk_events(api, out, call, r, st, chunk);
            continue;
        }
        cJSON *b = cJSON_CreateObject();
        bool theirs = serve_request_error_status(r) < 500;
        cJSON_AddStringToObject(b, "code", theirs ? "invalid_request_error" : "server_error");
        cJSON_AddStringToObject(b, "message", serve_dialect_error_message(chunk));
        cJSON_AddNullToObject(b, "param");
        out = emit(out, st, "error", b);
        st->failed = true;
    }
    cJSON_Delete(chunks);
    if (*finished && !st->failed) {
        out = close_item(text_delta(out, call, st, 1, "", NULL), call, st);
        cJSON *o = response_object(api, call, r);
        bool cut = o && !strcmp(str_of(o, "status"), "incomplete");
        cJSON *b = cJSON_CreateObject();
        cJSON_AddItemToObject(b, "response", o);
        /* timings_per_token: the whole reply's timings beside it, as llama-server */
        if (call->timings_per_token && r->n_choices > 0) serve_json_add_timings(b, r, &r->choices[0]);
        out = emit(out, st, cut ? "response.incomplete" : "response.completed", b);
    }
    return out;
}

static void free_stream(void *state) {
    resp_stream *st = state;
    free(st->text);
    free(st);
}

const serve_format serve_responses = {
    .name = "responses",
    .parse = responses_parse,
    .response = responses_response,
    .stream_next = responses_stream_next,
    .free_state = free_stream,
};

const serve_format serve_responses_input_tokens = {
    .name = "responses input_tokens",
    .answer = input_tokens,
};
