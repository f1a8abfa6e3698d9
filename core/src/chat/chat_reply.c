/*
 * chat_reply — tessera_chat_parse_reply: a model's reply split by the
 * tool-call parser (tool_parse.h) and written out as one JSON object, so
 * that bindings (Python, Java) get content, reasoning and calls without
 * mirroring the parser's structs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "chat/tool_parse.h"

typedef struct json_buf {
    char *data;
    size_t len, cap;
    bool failed;
} json_buf;

static void buf_put(json_buf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown) {
            b->failed = true;
            return;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_cstr(json_buf *b, const char *s) { buf_put(b, s, strlen(s)); }

/* A JSON string literal of s, or null for NULL. The text is the model's
 * bytes: control characters are escaped, other bytes pass as they are. */
static void buf_json_str(json_buf *b, const char *s) {
    if (!s) {
        buf_cstr(b, "null");
        return;
    }
    buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': buf_cstr(b, "\\\""); break;
        case '\\': buf_cstr(b, "\\\\"); break;
        case '\n': buf_cstr(b, "\\n"); break;
        case '\r': buf_cstr(b, "\\r"); break;
        case '\t': buf_cstr(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                buf_cstr(b, esc);
            } else {
                buf_put(b, (const char *)p, 1);
            }
        }
    }
    buf_put(b, "\"", 1);
}

char *tessera_chat_parse_reply(const tessera_chat_template *tmpl, const char *text, size_t len,
                               const char *const *tool_names, size_t n_tool_names) {
    chat_tool_format format = chat_tool_format_detect(tmpl ? tessera_chat_template_source(tmpl) : NULL);
    chat_parsed parsed = {0};
    if (chat_tool_parse(format, text ? text : "", text ? len : 0, tool_names, n_tool_names, &parsed) != 0)
        return NULL;
    json_buf b = {0};
    buf_cstr(&b, "{\"content\": ");
    buf_json_str(&b, parsed.content);
    buf_cstr(&b, ", \"reasoning_content\": ");
    buf_json_str(&b, parsed.reasoning);
    buf_cstr(&b, ", \"tool_calls\": [");
    for (size_t i = 0; i < parsed.n_calls; i++) {
        const chat_tool_call *c = &parsed.calls[i];
        buf_cstr(&b, i ? ", {\"id\": " : "{\"id\": ");
        buf_json_str(&b, c->id);
        buf_cstr(&b, ", \"name\": ");
        buf_json_str(&b, c->name);
        buf_cstr(&b, ", \"arguments\": ");
        buf_json_str(&b, c->arguments ? c->arguments : "{}");
        buf_cstr(&b, "}");
    }
    buf_cstr(&b, "]}");
    chat_parsed_free(&parsed);
    if (b.failed) {
        free(b.data);
        return NULL;
    }
    return b.data;
}
