/* What the dialects (anthropic.c, responses.c) share: the chat path's
 * requests and output passed through cJSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dialect.h"

int serve_dialect_parse_chat(const serve_api *api, cJSON *chat, serve_call *call, serve_request **out,
                             serve_error *err) {
    char *body = chat ? cJSON_PrintUnformatted(chat) : NULL;
    cJSON_Delete(chat);
    if (!body) return serve_fail(err, 500, NULL, NULL, "out of memory");
    int rc = serve_api_parse(api, SERVE_CHAT, body, strlen(body), call, out, err);
    free(body);
    return rc;
}

cJSON *serve_dialect_chat_response(const serve_api *api, const serve_call *call, const serve_request *r) {
    char *body = serve_api_response(api, call, r);
    cJSON *root = body ? cJSON_Parse(body) : NULL;
    free(body);
    return root;
}

cJSON *serve_dialect_chat_chunks(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                                 bool *finished) {
    char *events = serve_api_stream_next(api, call, r, seen, finished);
    cJSON *list = cJSON_CreateArray();
    if (!events || !list) {
        free(events);
        return list;
    }
    /* Each event is "data: JSON\n\n" (or "data: [DONE]\n\n"). */
    for (char *at = events; (at = strstr(at, "data: ")) != NULL;) {
        at += 6;
        char *end = strstr(at, "\n\n");
        if (end) *end = '\0';
        if (strcmp(at, "[DONE]")) {
            cJSON *chunk = cJSON_Parse(at);
            if (chunk) cJSON_AddItemToArray(list, chunk);
        }
        if (!end) break;
        at = end + 2;
    }
    free(events);
    return list;
}

char *serve_sse_event(char *out, const char *name, cJSON *obj) {
    char *js = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!js) return out;
    size_t a = out ? strlen(out) : 0, n = strlen(name), m = strlen(js);
    char *grown = realloc(out, a + n + m + 17);
    if (grown) snprintf(grown + a, n + m + 17, "event: %s\ndata: %s\n\n", name, js);
    free(js);
    return grown ? grown : out;
}

cJSON *serve_dialect_add_message(cJSON *list, const char *role, cJSON *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    if (content) cJSON_AddItemToObject(m, "content", content);
    cJSON_AddItemToArray(list, m);
    return m;
}

int serve_dialect_add_tools(const cJSON *root, cJSON *chat, serve_error *err,
                            int (*one)(const cJSON *tool, const char *param, cJSON *list, serve_error *err)) {
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) return serve_fail(err, 400, "tools", NULL, "'tools' must be an array");
    cJSON *list = cJSON_AddArrayToObject(chat, "tools");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        char param[32];
        snprintf(param, sizeof param, "tools[%d]", i++);
        if (one(t, param, list, err) != 0) return -1;
    }
    return 0;
}

void serve_dialect_add_function(cJSON *list, const char *name, const char *description, const cJSON *parameters) {
    cJSON *tool = cJSON_CreateObject();
    cJSON_AddItemToArray(list, tool);
    cJSON_AddStringToObject(tool, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(tool, "function");
    cJSON_AddStringToObject(fn, "name", name);
    if (description) cJSON_AddStringToObject(fn, "description", description);
    if (cJSON_IsObject(parameters)) cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(parameters, 1));
}

void serve_dialect_force_function(cJSON *chat, const char *name) {
    cJSON *c = cJSON_AddObjectToObject(chat, "tool_choice");
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
}

int serve_dialect_get_format(const cJSON *root, const char *key, const cJSON **format, serve_error *err) {
    const cJSON *outer = cJSON_GetObjectItemCaseSensitive(root, key);
    *format = NULL;
    if (!outer || cJSON_IsNull(outer)) return 0;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(outer, "format");
    if (!cJSON_IsObject(outer) || (f && !cJSON_IsNull(f) && !cJSON_IsObject(f)))
        return serve_fail(err, 400, key, NULL, "'%s' must be an object, and its 'format' an object", key);
    *format = cJSON_IsObject(f) ? f : NULL;
    return 0;
}

void serve_dialect_json_schema(cJSON *chat, const char *name, const cJSON *schema) {
    cJSON *rf = cJSON_AddObjectToObject(chat, "response_format");
    cJSON_AddStringToObject(rf, "type", "json_schema");
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    cJSON_AddStringToObject(js, "name", name);
    cJSON_AddItemToObject(js, "schema", cJSON_Duplicate(schema, 1));
}

void serve_dialect_ignore_unknown(const cJSON *root, const char *const *known, char *ignored, size_t cap) {
    const cJSON *f;
    ignored[0] = '\0';
    cJSON_ArrayForEach(f, root) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], f->string)) i++;
        if (known[i]) continue;
        size_t n = strlen(ignored);
        if (n + strlen(f->string) + 2 < cap) snprintf(ignored + n, cap - n, "%s%s", n ? "," : "", f->string);
    }
}

const char *serve_dialect_error_message(const cJSON *openai_error) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(openai_error, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    return cJSON_IsString(m) ? m->valuestring : "";
}
