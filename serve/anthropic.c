/*
 * anthropic — Anthropic's Messages API on the chat path: POST /v1/messages
 * (streamed or not) and POST /v1/messages/count_tokens.
 *
 * The request becomes an OpenAI chat request: `system` a system message,
 * text blocks content parts, `tool_use` blocks an assistant's tool_calls,
 * `tool_result` blocks tool messages, `tools` functions with input_schema as
 * their parameters, tool_choice auto/any/tool/none as auto/required/a named
 * function/none. The chat path's reply comes back as content blocks
 * (thinking, text, tool_use), its finish reason as stop_reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dialect.h"
#include "media_part.h"

static const char *const KNOWN[] = {"model",       "messages",   "system",         "max_tokens",
                                    "temperature", "top_p",      "top_k",          "stop_sequences",
                                    "stream",      "tools",      "tool_choice",    "metadata",
                                    "thinking",    "mcp_servers", "container",     "service_tier",
                                    "output_config", "cache_control", NULL};

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* ------------------------------------------------------------ request */

/* One text block's text (cache_control and citations ignored). */
static int text_block(const cJSON *b, const char *param, cJSON *parts, serve_error *err) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
    if (!cJSON_IsString(text)) return serve_fail(err, 400, param, NULL, "'%s' is a text block without 'text'", param);
    cJSON *part = cJSON_CreateObject();
    cJSON_AddItemToArray(parts, part);
    cJSON_AddStringToObject(part, "type", "text");
    cJSON_AddStringToObject(part, "text", text->valuestring);
    return 0;
}

/* An image block ({"source": {"type": "base64", "media_type", "data"}} or
 * {"type": "url", "url"}) as an OpenAI image_url part, marked with the
 * block's name (the chat path checks it: a bad image is a 400 naming the
 * block). */
static int image_block(const cJSON *b, const char *param, cJSON *parts, serve_error *err) {
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(b, "source");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(src, "type");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(src, "media_type");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(src, "data");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(src, "url");
    char *u = NULL;
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "base64") && cJSON_IsString(mt) && cJSON_IsString(data)) {
        size_t n = strlen(mt->valuestring) + strlen(data->valuestring) + 16;
        if ((u = malloc(n))) snprintf(u, n, "data:%s;base64,%s", mt->valuestring, data->valuestring);
    } else if (cJSON_IsString(type) && !strcmp(type->valuestring, "url") && cJSON_IsString(url)) {
        u = strdup(url->valuestring);
    } else {
        return serve_fail(err, 400, param, NULL,
                          "'%s' is an image block whose 'source' is not {\"type\": \"base64\", \"media_type\", "
                          "\"data\"} or {\"type\": \"url\", \"url\"}", param);
    }
    cJSON *part = cJSON_CreateObject();
    cJSON *iu = part ? cJSON_AddObjectToObject(part, "image_url") : NULL;
    if (!u || !iu || !cJSON_AddStringToObject(part, "type", "image_url") || !cJSON_AddStringToObject(iu, "url", u)) {
        free(u);
        cJSON_Delete(part);
        return serve_fail(err, 500, NULL, NULL, "out of memory");
    }
    free(u);
    if (serve_media_part_mark(part, param, param) != 0) {
        cJSON_Delete(part);
        return serve_fail(err, 500, NULL, NULL, "out of memory");
    }
    cJSON_AddItemToArray(parts, part);
    return 0;
}

static const char *block_type(const cJSON *b) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "type");
    return cJSON_IsObject(b) && cJSON_IsString(t) ? t->valuestring : NULL;
}

/* A block the model cannot read (image, document, ...) or does not know.
 * Media say so in llama-server's words ("image input is not supported"),
 * which clients and people search for; a 400 here, where llama-server
 * without a projector answers 500: the request asks what this server lacks. */
static int block_refused(const char *type, const char *param, serve_error *err) {
    if (!type) return serve_fail(err, 400, param, NULL, "'%s' must be a content block with a string 'type'", param);
    if (!strcmp(type, "image") || !strcmp(type, "document"))
        return serve_fail(err, 400, param, "unsupported_parameter",
                          "%s input is not supported: '%s' is %s %s block; this server reads text, tool_use, "
                          "tool_result and (in user messages) image blocks",
                          type, param, type[0] == 'i' ? "an" : "a", type);
    return serve_fail(err, 400, param, "unsupported_parameter",
                      "'%s' is a '%.40s' block; this server reads text, tool_use and tool_result blocks", param,
                      type);
}

/* A string, or text blocks only (system, tool_result content): OpenAI
 * content (a string or text parts). */
static cJSON *text_content(const cJSON *v, const char *param, serve_error *err) {
    if (cJSON_IsString(v)) return cJSON_CreateString(v->valuestring);
    if (is_null(v)) return cJSON_CreateString("");
    if (!cJSON_IsArray(v))
        return serve_fail(err, 400, param, NULL, "'%s' must be a string or text blocks", param), NULL;
    cJSON *parts = cJSON_CreateArray();
    int j = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, v) {
        char p[96];
        snprintf(p, sizeof p, "%s[%d]", param, j++);
        const char *type = block_type(b);
        if (!type || strcmp(type, "text") ? block_refused(type, p, err) : text_block(b, p, parts, err)) {
            cJSON_Delete(parts);
            return NULL;
        }
    }
    return parts;
}

/* A tool_use block as an OpenAI tool call. */
static int tool_use_call(const cJSON *b, const char *param, cJSON *calls, serve_error *err) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "name");
    const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !cJSON_IsObject(input))
        return serve_fail(err, 400, param, NULL, "'%s' (tool_use) needs a string 'id' and 'name' and an object 'input'",
                          param);
    char *args = cJSON_PrintUnformatted(input);
    if (!args) return serve_fail(err, 500, NULL, NULL, "out of memory");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(calls, c);
    cJSON_AddStringToObject(c, "id", id->valuestring);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", name->valuestring);
    cJSON_AddStringToObject(fn, "arguments", args);
    free(args);
    return 0;
}

/* A tool_result block as an OpenAI tool message. */
static int tool_result_message(const cJSON *b, const char *param, cJSON *list, serve_error *err) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
    if (!cJSON_IsString(id))
        return serve_fail(err, 400, param, NULL, "'%s' (tool_result) needs a string 'tool_use_id'", param);
    char p[112];
    snprintf(p, sizeof p, "%s.content", param);
    cJSON *content = text_content(cJSON_GetObjectItemCaseSensitive(b, "content"), p, err);
    if (!content) return -1;
    cJSON_AddStringToObject(serve_dialect_add_message(list, "tool", content), "tool_call_id", id->valuestring);
    return 0;
}

/* A thinking block of an earlier assistant turn: its text appended to
 * reasoning (the message's reasoning_content, which templates that reason,
 * Qwen3's for one, show between the tool calls of an agent's turn). */
static int thinking_block(const cJSON *b, const char *param, char **reasoning, serve_error *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "thinking");
    if (!cJSON_IsString(t))
        return serve_fail(err, 400, param, NULL, "'%s' is a thinking block without a string 'thinking'", param);
    size_t have = *reasoning ? strlen(*reasoning) : 0, n = strlen(t->valuestring);
    char *grown = realloc(*reasoning, have + n + 2);
    if (!grown) return serve_fail(err, 500, NULL, NULL, "out of memory");
    if (have) grown[have++] = '\n';
    memcpy(grown + have, t->valuestring, n + 1);
    *reasoning = grown;
    return 0;
}

/* One Anthropic message as OpenAI messages: a user message's tool_result
 * blocks become tool messages (before its text), an assistant's tool_use
 * blocks its tool_calls and its thinking blocks its reasoning_content. */
static int add_message(const cJSON *msg, int i, cJSON *list, serve_error *err) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role");
    if (!cJSON_IsObject(msg) || !cJSON_IsString(role) ||
        (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
        return serve_fail(err, 400, param, NULL, "'%s' must be an object with 'role' user or assistant", param);
    bool user = !strcmp(role->valuestring, "user");
    int n_before = cJSON_GetArraySize(list); /* tool results add messages before this one */
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    cJSON *out = cJSON_CreateObject(), *parts = cJSON_CreateArray(), *calls = cJSON_CreateArray();
    cJSON_AddStringToObject(out, "role", role->valuestring);
    char *reasoning = NULL;
    int rc = 0;
    if (cJSON_IsString(content)) {
        cJSON_AddStringToObject(out, "content", content->valuestring);
    } else if (!cJSON_IsArray(content)) {
        rc = serve_fail(err, 400, param, NULL, "'%s.content' must be a string or an array of blocks", param);
    } else {
        int j = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, content) {
            char p[96];
            snprintf(p, sizeof p, "%s.content[%d]", param, j++);
            const char *type = block_type(b);
            if (type && !strcmp(type, "text")) rc = text_block(b, p, parts, err);
            else if (type && user && !strcmp(type, "tool_result")) rc = tool_result_message(b, p, list, err);
            else if (type && user && !strcmp(type, "image")) rc = image_block(b, p, parts, err);
            else if (type && !user && !strcmp(type, "tool_use")) rc = tool_use_call(b, p, calls, err);
            else if (type && !user && !strcmp(type, "thinking")) rc = thinking_block(b, p, &reasoning, err);
            else if (type && !user && !strcmp(type, "redacted_thinking")) rc = 0; /* encrypted: nothing to show */
            else rc = block_refused(type, p, err);
            if (rc) break;
        }
        cJSON_AddItemToObject(out, "content", parts);
        parts = NULL;
    }
    if (reasoning) cJSON_AddStringToObject(out, "reasoning_content", reasoning);
    free(reasoning);
    bool has_text = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(out, "content")) ||
                    cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(out, "content")) > 0;
    if (cJSON_GetArraySize(calls) > 0) {
        cJSON_AddItemToObject(out, "tool_calls", calls);
        calls = NULL;
    } else if (!has_text && rc == 0 && cJSON_GetArraySize(list) > n_before) {
        cJSON_Delete(out); /* only tool results: those are the turn */
        out = NULL;
    }
    if (out && rc == 0) cJSON_AddItemToArray(list, out);
    else cJSON_Delete(out);
    cJSON_Delete(parts);
    cJSON_Delete(calls);
    return rc;
}

/* system and messages into chat's messages. */
static int add_conversation(const cJSON *root, cJSON *chat, serve_error *err) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(msgs)) return serve_fail(err, 400, "messages", NULL, "'messages' must be an array of messages");
    cJSON *list = cJSON_AddArrayToObject(chat, "messages");
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
    if (!is_null(sys)) {
        cJSON *content = text_content(sys, "system", err);
        if (!content) return -1;
        serve_dialect_add_message(list, "system", content);
    }
    /* none: one empty user turn, as llama-server answers it (Anthropic's
     * own API refuses it; clients probing a server send it) */
    if (cJSON_GetArraySize(msgs) == 0) serve_dialect_add_message(list, "user", cJSON_CreateString(""));
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs)
        if (add_message(msg, i++, list, err) != 0) return -1;
    return 0;
}

/* A custom tool (name, description, input_schema) as a function. */
static int add_tool(const cJSON *t, const char *param, cJSON *list, serve_error *err) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
    if (!is_null(type) && !(cJSON_IsString(type) && !strcmp(type->valuestring, "custom")))
        return serve_fail(err, 400, param, "unsupported_parameter",
                          "'%s' is a server tool ('type'); only custom tools (name, input_schema) are served", param);
    if (!cJSON_IsString(name) || !cJSON_IsObject(schema))
        return serve_fail(err, 400, param, NULL, "'%s' needs a string 'name' and an object 'input_schema'", param);
    serve_dialect_add_function(list, name->valuestring, cJSON_IsString(desc) ? desc->valuestring : NULL, schema);
    return 0;
}

/* tool_choice {type: auto | any | tool (name) | none, disable_parallel_tool_use}. */
static int add_tool_choice(const cJSON *root, cJSON *chat, serve_error *err) {
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (is_null(tc)) return 0;
    const char *type = block_type(tc);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(tc, "name");
    if (!type) return serve_fail(err, 400, "tool_choice", NULL, "'tool_choice' must be an object with a 'type'");
    if (!strcmp(type, "auto")) cJSON_AddStringToObject(chat, "tool_choice", "auto");
    else if (!strcmp(type, "any")) cJSON_AddStringToObject(chat, "tool_choice", "required");
    else if (!strcmp(type, "none")) cJSON_AddStringToObject(chat, "tool_choice", "none");
    else if (!strcmp(type, "tool") && cJSON_IsString(name)) serve_dialect_force_function(chat, name->valuestring);
    else
        return serve_fail(err, 400, "tool_choice", NULL,
                          "'tool_choice.type' must be auto, any, none, or tool with a 'name'");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(tc, "disable_parallel_tool_use");
    if (cJSON_IsTrue(dp) && strcmp(type, "none")) cJSON_AddFalseToObject(chat, "parallel_tool_calls");
    return 0;
}

/* output_config.format {type: json_schema, schema}: the chat path's
 * response_format (a grammar); effort and task budgets are advice, ignored. */
static int add_output_format(const cJSON *root, cJSON *chat, serve_error *err) {
    const cJSON *format;
    if (serve_dialect_get_format(root, "output_config", &format, err) != 0) return -1;
    if (!format) return 0;
    const char *type = block_type(format);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(format, "schema");
    if (!type || strcmp(type, "json_schema") || !cJSON_IsObject(schema))
        return serve_fail(err, 400, "output_config.format", NULL,
                          "'output_config.format' must be {\"type\": \"json_schema\", \"schema\": {...}}");
    serve_dialect_json_schema(chat, "output", schema);
    return 0;
}

/* Fields Anthropic defines that ask for what this server cannot do. */
static int refuse_unhonoured(const cJSON *root, serve_error *err) {
    const cJSON *mcp = cJSON_GetObjectItemCaseSensitive(root, "mcp_servers");
    if (!is_null(mcp) && !(cJSON_IsArray(mcp) && cJSON_GetArraySize(mcp) == 0))
        return serve_fail(err, 400, "mcp_servers", "unsupported_parameter",
                          "'mcp_servers': this server calls no MCP servers");
    if (!is_null(cJSON_GetObjectItemCaseSensitive(root, "container")))
        return serve_fail(err, 400, "container", "unsupported_parameter",
                          "'container': this server runs no code containers");
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "thinking");
    if (!is_null(th) && !block_type(th))
        return serve_fail(err, 400, "thinking", NULL, "'thinking' must be an object with a 'type'");
    const cJSON *stops = cJSON_GetObjectItemCaseSensitive(root, "stop_sequences");
    if (!is_null(stops) && (!cJSON_IsArray(stops) || cJSON_GetArraySize(stops) > SERVE_MAX_STOP))
        return serve_fail(err, 400, "stop_sequences", NULL, "'stop_sequences' must be an array of at most %d strings",
                          SERVE_MAX_STOP);
    return 0;
}

/* The OpenAI chat request of an Anthropic one; counting: for count_tokens
 * (no max_tokens needed). NULL with *err filled. */
static cJSON *to_chat(const cJSON *root, bool counting, serve_error *err) {
    static const char *const copied[] = {"model", "temperature", "top_p", "top_k", "stream", NULL};
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(root, "max_tokens");
    if (!counting && is_null(max)) return serve_fail(err, 400, "max_tokens", NULL, "'max_tokens' is required"), NULL;
    if (refuse_unhonoured(root, err) != 0) return NULL;
    cJSON *chat = cJSON_CreateObject();
    if (!chat) return serve_fail(err, 500, NULL, NULL, "out of memory"), NULL;
    if (!counting) {
        for (int i = 0; copied[i]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, copied[i]);
            if (v) cJSON_AddItemToObject(chat, copied[i], cJSON_Duplicate(v, 1));
        }
        cJSON_AddItemToObject(chat, "max_tokens", cJSON_Duplicate(max, 1));
        const cJSON *stops = cJSON_GetObjectItemCaseSensitive(root, "stop_sequences");
        if (!is_null(stops)) cJSON_AddItemToObject(chat, "stop", cJSON_Duplicate(stops, 1));
    }
    if (add_conversation(root, chat, err) || serve_dialect_add_tools(root, chat, err, add_tool) ||
        add_tool_choice(root, chat, err) || (!counting && add_output_format(root, chat, err))) {
        cJSON_Delete(chat);
        return NULL;
    }
    return chat;
}

/* Parse the body, note unknown fields, translate; NULL with *err. */
static cJSON *read_request(const char *body, size_t len, bool counting, char *ignored, size_t cap,
                           serve_error *err) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return serve_fail(err, 400, NULL, NULL, "the request body must be a JSON object"), NULL;
    }
    serve_dialect_ignore_unknown(root, KNOWN, ignored, cap);
    cJSON *chat = to_chat(root, counting, err);
    cJSON_Delete(root);
    return chat;
}

static int messages_parse(const serve_api *api, const char *body, size_t len, int index, serve_call *call,
                          serve_request **out, serve_error *err) {
    (void)index; /* one request per body */
    char ignored[sizeof call->ignored];
    cJSON *chat = read_request(body, len, false, ignored, sizeof ignored, err);
    if (!chat || serve_dialect_parse_chat(api, chat, call, out, err) != 0) return -1;
    snprintf(call->ignored, sizeof call->ignored, "%s", ignored); /* for the request log */
    return 0;
}

/* {"input_tokens": N}: the prompt a /v1/messages request would have. */
static char *count_tokens(const serve_api *api, const char *body, size_t len, serve_error *err) {
    char ignored[160];
    cJSON *chat = read_request(body, len, true, ignored, sizeof ignored, err);
    serve_call call;
    serve_request *r = NULL;
    if (!chat || serve_dialect_parse_chat(api, chat, &call, &r, err) != 0) return NULL;
    char out[48];
    snprintf(out, sizeof out, "{\"input_tokens\":%d}", (int)r->n_prompt);
    serve_request_free(r);
    return strdup(out);
}

/* ------------------------------------------------------------ response */

/* Our ids from the chat path's: msg_X for chatcmpl-X, toolu_X for call_X. */
static void swap_prefix(char *out, size_t n, const char *id, const char *from, const char *to) {
    size_t k = strlen(from);
    snprintf(out, n, "%s%s", to, strncmp(id, from, k) ? id : id + k);
}

static const char *stop_reason(const char *finish, const serve_request *r, const char **sequence) {
    *sequence = NULL;
    if (finish && !strcmp(finish, "tool_calls")) return "tool_use";
    if (finish && !strcmp(finish, "length")) return "max_tokens";
    *sequence = r->choices[0].stopped_by;
    return *sequence ? "stop_sequence" : "end_turn";
}

static cJSON *tool_use_block(const cJSON *call, bool streamed) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(call, "id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    char tid[128];
    swap_prefix(tid, sizeof tid, cJSON_IsString(id) ? id->valuestring : "", "call_", "toolu_");
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", tid);
    cJSON_AddStringToObject(b, "name", cJSON_IsString(name) ? name->valuestring : "");
    cJSON *input = streamed || !cJSON_IsString(args) ? NULL : cJSON_Parse(args->valuestring);
    cJSON_AddItemToObject(b, "input", cJSON_IsObject(input) ? input : (cJSON_Delete(input), cJSON_CreateObject()));
    return b;
}

static cJSON *message_head(const serve_api *api, const serve_call *call) {
    char id[64];
    swap_prefix(id, sizeof id, call->id, "chatcmpl-", "msg_");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", api->model_id);
    return m;
}

/* usage {input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
 * output_tokens}: Anthropic counts the cached prefix apart from input_tokens
 * (their sum is the prompt); nothing is written to a cache on request. */
static void add_usage(cJSON *obj, const serve_request *r, int32_t n_gen) {
    cJSON *u = cJSON_AddObjectToObject(obj, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", r->n_prompt - r->n_cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", r->n_cached);
    cJSON_AddNumberToObject(u, "output_tokens", n_gen);
}

static void add_block(cJSON *content, const char *type, const char *key, const char *text) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", type);
    cJSON_AddStringToObject(b, key, text);
    if (!strcmp(type, "thinking")) cJSON_AddStringToObject(b, "signature", "");
    cJSON_AddItemToArray(content, b);
}

static char *messages_response(const serve_api *api, const serve_call *req_calls, serve_request *const *reqs,
                               int n) {
    (void)n;
    const serve_call *call = &req_calls[0];
    const serve_request *r = reqs[0];
    cJSON *chat = serve_dialect_chat_response(api, call, r);
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chat, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(choice, "message");
    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    if (!msg) {
        cJSON_Delete(chat);
        return NULL;
    }
    cJSON *m = message_head(api, call), *content = cJSON_AddArrayToObject(m, "content");
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(msg, "reasoning_content");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(msg, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *tc;
    if (cJSON_IsString(reasoning)) add_block(content, "thinking", "thinking", reasoning->valuestring);
    /* an empty text block only where there is nothing else, as a stream opens one */
    if (cJSON_IsString(text) && (text->valuestring[0] || (!calls && !cJSON_IsString(reasoning))))
        add_block(content, "text", "text", text->valuestring);
    cJSON_ArrayForEach(tc, calls) cJSON_AddItemToArray(content, tool_use_block(tc, false));
    const char *seq;
    const char *reason = stop_reason(cJSON_IsString(finish) ? finish->valuestring : NULL, r, &seq);
    cJSON_AddStringToObject(m, "stop_reason", reason);
    if (seq) cJSON_AddStringToObject(m, "stop_sequence", seq);
    else cJSON_AddNullToObject(m, "stop_sequence");
    add_usage(m, r, serve_request_n_gen(r));
    cJSON_Delete(chat);
    char *s = cJSON_PrintUnformatted(m);
    cJSON_Delete(m);
    return s;
}

/* ------------------------------------------------------------ errors */

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

/* {"type": "error", "error": {"type", "message"}} of a status and message. */
static cJSON *error_object(int status, const char *message) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "type", "error");
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddStringToObject(e, "message", message);
    return root;
}

static char *anthropic_error_body(int status, char *openai_body) {
    cJSON *o = openai_body ? cJSON_Parse(openai_body) : NULL;
    if (!cJSON_GetObjectItemCaseSensitive(o, "error")) { /* not an error body: leave it */
        cJSON_Delete(o);
        return openai_body;
    }
    cJSON *a = error_object(status, serve_dialect_error_message(o));
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    cJSON_Delete(o);
    if (!s) return openai_body;
    free(openai_body);
    return s;
}

/* ------------------------------------------------------------ streams */

/* What a stream has opened: the content block now open (its index is
 * n_blocks - 1) and the finish reason once seen. */
typedef struct msg_stream {
    bool started;
    const char *open; /* "text", "thinking" or NULL */
    int n_blocks;
    char finish[16];
} msg_stream;

static char *block_stop(char *out, msg_stream *st) {
    if (!st->open) return out;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "content_block_stop");
    cJSON_AddNumberToObject(e, "index", st->n_blocks - 1);
    st->open = NULL;
    return serve_sse_event(out, "content_block_stop", e);
}

static char *block_start(char *out, msg_stream *st, cJSON *block) {
    out = block_stop(out, st);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "content_block_start");
    cJSON_AddNumberToObject(e, "index", st->n_blocks++);
    cJSON_AddItemToObject(e, "content_block", block);
    return serve_sse_event(out, "content_block_start", e);
}

/* A delta of kind (text_delta, thinking_delta, input_json_delta) to the open block. */
static char *block_delta(char *out, const msg_stream *st, const char *kind, const char *key, const char *text) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "content_block_delta");
    cJSON_AddNumberToObject(e, "index", st->n_blocks - 1);
    cJSON *d = cJSON_AddObjectToObject(e, "delta");
    cJSON_AddStringToObject(d, "type", kind);
    cJSON_AddStringToObject(d, key, text);
    return serve_sse_event(out, "content_block_delta", e);
}

/* Text or thinking into a block of that type, opened when another is open;
 * "" opens an empty block only when there is none (a reply with nothing). */
static char *text_delta(char *out, msg_stream *st, const char *type, const char *text) {
    if (!text[0] && st->n_blocks > 0) return out;
    if (!st->open || strcmp(st->open, type)) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", type);
        cJSON_AddStringToObject(b, type, "");
        if (!strcmp(type, "thinking")) cJSON_AddStringToObject(b, "signature", "");
        out = block_start(out, st, b);
        st->open = !strcmp(type, "text") ? "text" : "thinking";
    }
    if (!text[0]) return out;
    return block_delta(out, st, !strcmp(type, "text") ? "text_delta" : "thinking_delta", type, text);
}

/* One chat chunk's delta as block events. */
static char *chunk_events(char *out, msg_stream *st, const cJSON *chunk) {
    const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
    const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    const cJSON *reasoning = cJSON_GetObjectItemCaseSensitive(delta, "reasoning_content");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(delta, "content");
    const cJSON *finish = cJSON_GetObjectItemCaseSensitive(choice, "finish_reason");
    if (cJSON_IsString(reasoning) && reasoning->valuestring[0])
        out = text_delta(out, st, "thinking", reasoning->valuestring);
    if (cJSON_IsString(content) && content->valuestring[0]) out = text_delta(out, st, "text", content->valuestring);
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(delta, "tool_calls")) {
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tc, "function"),
                                                             "arguments");
        out = block_start(out, st, tool_use_block(tc, true));
        st->open = "tool_use";
        if (cJSON_IsString(args)) out = block_delta(out, st, "input_json_delta", "partial_json", args->valuestring);
    }
    if (cJSON_IsString(finish)) snprintf(st->finish, sizeof st->finish, "%s", finish->valuestring);
    return out;
}

static char *stream_opening(char *out, const serve_api *api, const serve_call *call, const serve_request *r) {
    cJSON *m = message_head(api, call);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    add_usage(m, r, 0);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "message_start");
    cJSON_AddItemToObject(e, "message", m);
    out = serve_sse_event(out, "message_start", e);
    cJSON *ping = cJSON_CreateObject();
    cJSON_AddStringToObject(ping, "type", "ping");
    return serve_sse_event(out, "ping", ping);
}

static char *stream_closing(char *out, msg_stream *st, const serve_request *r) {
    out = block_stop(text_delta(out, st, "text", ""), st);
    const char *seq;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", "message_delta");
    cJSON *d = cJSON_AddObjectToObject(e, "delta");
    cJSON_AddStringToObject(d, "stop_reason", stop_reason(st->finish, r, &seq));
    if (seq) cJSON_AddStringToObject(d, "stop_sequence", seq);
    else cJSON_AddNullToObject(d, "stop_sequence");
    add_usage(e, r, serve_request_n_gen(r));
    out = serve_sse_event(out, "message_delta", e);
    cJSON *stop = cJSON_CreateObject();
    cJSON_AddStringToObject(stop, "type", "message_stop");
    return serve_sse_event(out, "message_stop", stop);
}

static char *messages_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                                  bool *finished, void **state) {
    msg_stream *st = *state ? *state : (*state = calloc(1, sizeof(msg_stream)));
    cJSON *chunks = st ? serve_dialect_chat_chunks(api, call, r, seen, finished) : NULL;
    if (!chunks) {
        *finished = true;
        cJSON_Delete(chunks);
        return serve_sse_event(NULL, "error", error_object(500, "out of memory"));
    }
    char *out = NULL;
    if (!st->started) out = stream_opening(out, api, call, r);
    st->started = true;
    const cJSON *chunk;
    bool failed = false;
    cJSON_ArrayForEach(chunk, chunks) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(chunk, "error");
        if (e) {
            out = serve_sse_event(out, "error",
                                  error_object(serve_request_error_status(r), serve_dialect_error_message(chunk)));
            failed = true;
        } else if (!failed) {
            out = chunk_events(out, st, chunk);
        }
    }
    cJSON_Delete(chunks);
    if (*finished && !failed) out = stream_closing(out, st, r);
    return out;
}

/* ------------------------------------------------------------ routes */

const serve_format serve_anthropic_messages = {
    .name = "anthropic messages",
    .parse = messages_parse,
    .response = messages_response,
    .stream_next = messages_stream_next,
    .free_state = free,
    .error_body = anthropic_error_body,
};

const serve_format serve_anthropic_count_tokens = {
    .name = "anthropic count_tokens",
    .answer = count_tokens,
    .error_body = anthropic_error_body,
};
