/*
 * tools — the request side of tool calling: `tools`, `tool_choice`,
 * `parallel_tool_calls`, and how tools, earlier calls and tool results are
 * written into the prompt.
 *
 * Until the Jinja engine renders a template's own tool syntax, tools are
 * written the way Hermes / Qwen 2.5 templates write them (a <tools> block in
 * the system message, <tool_call> JSON in assistant turns, <tool_response>
 * in a user turn), and the reply is parsed in that format
 * (tessera_tool_parse, with the generic JSON fallback).
 *
 * tool_choice "required" or a named function constrains the output: the
 * reply starts with the opening of a call (serve_tools_prefill) and a GBNF
 * grammar (serve_tools_grammar) allows only a call to an offered tool whose
 * arguments follow its JSON Schema, then the end of the output.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tools.h"

void serve_tools_free(serve_tools *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->json[i]);
        free(t->names[i]);
    }
    free(t->json);
    free(t->names);
    free(t->named);
    memset(t, 0, sizeof *t);
}

static int parse_choice(const cJSON *root, serve_tools *t, serve_error *err) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    t->choice = t->n > 0 ? SERVE_TOOLS_AUTO : SERVE_TOOLS_NONE;
    if (!c || cJSON_IsNull(c)) return 0;
    if (cJSON_IsString(c)) {
        if (!strcmp(c->valuestring, "auto")) return 0;
        if (!strcmp(c->valuestring, "none")) t->choice = SERVE_TOOLS_NONE;
        else if (!strcmp(c->valuestring, "required")) t->choice = SERVE_TOOLS_REQUIRED;
        else
            return serve_fail(
                err, 400, "tool_choice", NULL,
                "'tool_choice' is '%.40s' (auto, none, required, or {\"type\": \"function\", ...})",
                c->valuestring);
    } else {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(c) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name))
            return serve_fail(err, 400, "tool_choice", NULL,
                              "'tool_choice' must be a string or {\"type\": \"function\", \"function\": "
                              "{\"name\": ...}}");
        t->choice = SERVE_TOOLS_NAMED;
        t->named = strdup(name->valuestring);
        if (!t->named) return serve_fail(err, 500, NULL, NULL, "out of memory");
    }
    if (t->choice == SERVE_TOOLS_NONE) return 0;
    if (t->n == 0)
        return serve_fail(err, 400, "tool_choice", NULL,
                          "'tool_choice' asks for a tool but 'tools' is empty");
    if (t->choice == SERVE_TOOLS_NAMED) {
        for (int i = 0; i < t->n; i++)
            if (!strcmp(t->names[i], t->named)) return 0;
        return serve_fail(err, 400, "tool_choice", NULL,
                          "'tool_choice' names '%.64s', which is not in 'tools'", t->named);
    }
    return 0;
}

int serve_tools_parse(const cJSON *root, serve_tools *t, serve_error *err) {
    memset(t, 0, sizeof *t);
    t->parallel = true;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (p && !cJSON_IsNull(p)) {
        if (!cJSON_IsBool(p))
            return serve_fail(err, 400, "parallel_tool_calls", NULL,
                              "'parallel_tool_calls' must be true or false");
        t->parallel = cJSON_IsTrue(p);
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) return serve_fail(err, 400, "tools", NULL, "'tools' must be an array");
        int n = cJSON_GetArraySize(tools);
        if (n > 128) return serve_fail(err, 400, "tools", NULL, "'tools' has %d entries, at most 128", n);
        t->json = calloc((size_t)n + 1, sizeof *t->json);
        t->names = calloc((size_t)n + 1, sizeof *t->names);
        if (!t->json || !t->names) return serve_fail(err, 500, NULL, NULL, "out of memory");
        const cJSON *tool;
        cJSON_ArrayForEach(tool, tools) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
            if (!cJSON_IsObject(tool) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
                !cJSON_IsObject(fn) || !cJSON_IsString(name) || !name->valuestring[0])
                return serve_fail(err, 400, "tools", NULL,
                                  "tool %d must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                                  t->n);
            if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
                return serve_fail(err, 400, "tools", NULL,
                                  "tool '%.64s': 'parameters' must be a JSON Schema object",
                                  name->valuestring);
            t->names[t->n] = strdup(name->valuestring);
            t->json[t->n] = cJSON_PrintUnformatted(tool);
            t->n++;
            if (!t->names[t->n - 1] || !t->json[t->n - 1])
                return serve_fail(err, 500, NULL, NULL, "out of memory");
        }
    }
    return parse_choice(root, t, err);
}

static char *join3(const char *a, const char *b, const char *c) {
    size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
    char *s = malloc(na + nb + nc + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb);
    memcpy(s + na + nb, c, nc + 1);
    return s;
}

char *serve_tools_system_text(const serve_tools *t) {
    size_t len = 0;
    for (int i = 0; i < t->n; i++) len += strlen(t->json[i]) + 1;
    char *list = malloc(len + 1), *p = list;
    if (!list) return NULL;
    for (int i = 0; i < t->n; i++) p += sprintf(p, "\n%s", t->json[i]);
    *p = '\0';
    char *s = join3("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
                    list,
                    "\n</tools>\n\nFor each function call, return a json object with function name and "
                    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
    free(list);
    return s;
}

char *serve_tools_calls_text(const cJSON *calls, serve_error *err) {
    char *out = strdup(""), *piece = NULL;
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name) || (args && !cJSON_IsString(args) && !cJSON_IsObject(args))) {
            free(out);
            serve_fail(err, 400, "messages", NULL,
                       "tool call %d of an assistant message needs function.name and function.arguments", i);
            return NULL;
        }
        char *a = !args                  ? strdup("{}")
                  : cJSON_IsString(args) ? strdup(args->valuestring)
                                         : cJSON_PrintUnformatted(args);
        cJSON *nm = cJSON_CreateString(name->valuestring);
        char *nj = nm ? cJSON_PrintUnformatted(nm) : NULL;
        cJSON_Delete(nm);
        size_t need = (a ? strlen(a) : 0) + (nj ? strlen(nj) : 0) + 64;
        piece = a && nj && out ? malloc(need) : NULL;
        if (piece) snprintf(piece, need, "%s<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>",
                            i ? "\n" : "", nj, a[0] ? a : "{}");
        free(a);
        free(nj);
        char *joined = piece ? join3(out, piece, "") : NULL;
        free(piece);
        free(out);
        out = joined;
        if (!out) {
            serve_fail(err, 500, NULL, NULL, "out of memory");
            return NULL;
        }
        i++;
    }
    return out;
}

char *serve_tools_prefill(const serve_tools *t, int format) {
    (void)format; /* every format is written Hermes style until the Jinja engine lands */
    if (t->choice == SERVE_TOOLS_REQUIRED) return strdup("<tool_call>\n{\"name\": \"");
    if (t->choice != SERVE_TOOLS_NAMED) return NULL;
    cJSON *nm = cJSON_CreateString(t->named);
    char *nj = nm ? cJSON_PrintUnformatted(nm) : NULL;
    cJSON_Delete(nm);
    char *s = nj ? join3("<tool_call>\n{\"name\": ", nj, ", \"arguments\": ") : NULL;
    free(nj);
    return s;
}

/* A GBNF literal for s (quoted, escaped) appended to b, or false when out of
 * room. */
static bool gbnf_literal(char *b, size_t cap, size_t *len, const char *s) {
    if (*len + 1 >= cap) return false;
    b[(*len)++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*len + 5 >= cap) return false;
        if (*p == '"' || *p == '\\') {
            b[(*len)++] = '\\';
            b[(*len)++] = (char)*p;
        } else if (*p < 0x20) {
            *len += (size_t)snprintf(b + *len, cap - *len, "\\x%02X", *p);
        } else {
            b[(*len)++] = (char)*p;
        }
    }
    b[(*len)++] = '"';
    b[*len] = '\0';
    return true;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* gbnf with every rule name prefixed by pre, so that several converted
 * schemas live in one grammar (literals, classes, repetition counts and
 * comments are copied as they are). */
static char *gbnf_prefixed(const char *g, const char *pre) {
    size_t n = strlen(g), np = strlen(pre), o = 0;
    char *out = malloc(n * (np + 1) + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        char c = g[i];
        if (c == '"' || c == '[') { /* literal or class, with escapes */
            char end = c == '"' ? '"' : ']';
            out[o++] = g[i++];
            while (i < n && g[i] != end) {
                if (g[i] == '\\' && i + 1 < n) out[o++] = g[i++];
                out[o++] = g[i++];
            }
            if (i < n) out[o++] = g[i++];
        } else if (c == '{' || c == '#') { /* {m,n} or a comment */
            char end = c == '{' ? '}' : '\n';
            while (i < n && g[i] != end) out[o++] = g[i++];
        } else if (is_name_char(c)) {
            memcpy(out + o, pre, np);
            o += np;
            while (i < n && is_name_char(g[i])) out[o++] = g[i++];
        } else {
            out[o++] = g[i++];
        }
    }
    out[o] = '\0';
    return out;
}

char *serve_tools_grammar(const serve_tools *t, serve_error *err) {
    if (t->choice != SERVE_TOOLS_REQUIRED && t->choice != SERVE_TOOLS_NAMED) return NULL;
    size_t cap = 1024;
    for (int i = 0; i < t->n; i++) cap += 64 + 6 * strlen(t->names[i]);
    char *root = malloc(cap), *all = NULL;
    size_t len = 0;
    if (!root) goto oom;
    len = (size_t)snprintf(root, cap, "root ::= (");
    all = strdup("");
    int alt = 0;
    for (int i = 0; i < t->n && all; i++) {
        if (t->choice == SERVE_TOOLS_NAMED && strcmp(t->names[i], t->named)) continue;
        cJSON *tool = cJSON_Parse(t->json[i]);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(tool, "function"), "parameters");
        char *schema =
            cJSON_IsObject(params) ? cJSON_PrintUnformatted(params) : strdup("{\"type\": \"object\"}");
        cJSON_Delete(tool);
        char *g = schema ? tessera_json_schema_to_gbnf(schema, strlen(schema)) : NULL;
        free(schema);
        if (!g) {
            free(root);
            free(all);
            return serve_fail(err, 400, "tools", NULL,
                              "tool '%.64s': its parameters cannot constrain the output: %s", t->names[i],
                              tessera_last_error()),
                   NULL;
        }
        char pre[16];
        snprintf(pre, sizeof pre, "t%d-", i);
        char *pg = gbnf_prefixed(g, pre);
        free(g);
        char *joined = pg ? join3(all, pg, "\n") : NULL;
        free(pg);
        free(all);
        all = joined;
        /* required: the prefill ends in {"name": " and the name follows;
         * named: the prefill holds the name and "arguments": already. */
        if (len + 32 >= cap) goto oom;
        if (alt++) len += (size_t)snprintf(root + len, cap - len, " | ");
        if (t->choice == SERVE_TOOLS_REQUIRED) {
            char lit[512];
            snprintf(lit, sizeof lit, "%.400s\", \"arguments\": ", t->names[i]);
            if (!gbnf_literal(root, cap, &len, lit)) goto oom;
            len += (size_t)snprintf(root + len, cap - len, " ");
        }
        len += (size_t)snprintf(root + len, cap - len, "%sroot", pre);
    }
    if (!all || len + 64 >= cap) goto oom;
    snprintf(root + len, cap - len, ") \"}\\n</tool_call>\"\n");
    char *out = join3(root, all, "");
    free(root);
    free(all);
    if (!out) serve_fail(err, 500, NULL, NULL, "out of memory");
    return out;
oom:
    free(root);
    free(all);
    serve_fail(err, 500, NULL, NULL, "out of memory");
    return NULL;
}
