/*
 * chat_reply — tessera_chat_parse_reply: a model's reply split by the
 * tool-call parser (tool_parse.h) and written out as one JSON object, so
 * that bindings (Python, Java) get content, reasoning and calls without
 * mirroring the parser's structs.
 */

#include <stddef.h>

#include <tessera/tessera.h>

#include "chat/tool_parse.h"
#include "util/grow.h"

/* A JSON string literal of s, or null for NULL. The text is the model's
 * bytes: control characters are escaped, other bytes pass as they are. */
static void buf_json_str(tsr_buf *b, const char *s) {
    if (!s) {
        buf_puts(b, "null");
        return;
    }
    buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': buf_puts(b, "\\\""); break;
        case '\\': buf_puts(b, "\\\\"); break;
        case '\n': buf_puts(b, "\\n"); break;
        case '\r': buf_puts(b, "\\r"); break;
        case '\t': buf_puts(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                buf_printf(b, "\\u%04x", *p);
            } else {
                buf_putc(b, (char)*p);
            }
        }
    }
    buf_putc(b, '"');
}

char *tessera_chat_parse_reply(const tessera_chat_template *tmpl, const char *text, size_t len,
                               const char *const *tool_names, size_t n_tool_names) {
    chat_tool_format format = chat_tool_format_detect(tmpl ? tessera_chat_template_source(tmpl) : NULL);
    chat_parsed parsed = {0};
    if (chat_tool_parse(format, text ? text : "", text ? len : 0, tool_names, n_tool_names, &parsed) != 0)
        return NULL;
    tsr_buf b = {0};
    buf_puts(&b, "{\"content\": ");
    buf_json_str(&b, parsed.content);
    buf_puts(&b, ", \"reasoning_content\": ");
    buf_json_str(&b, parsed.reasoning);
    buf_puts(&b, ", \"tool_calls\": [");
    for (size_t i = 0; i < parsed.n_calls; i++) {
        const chat_tool_call *c = &parsed.calls[i];
        buf_puts(&b, i ? ", {\"id\": " : "{\"id\": ");
        buf_json_str(&b, c->id);
        buf_puts(&b, ", \"name\": ");
        buf_json_str(&b, c->name);
        buf_puts(&b, ", \"arguments\": ");
        buf_json_str(&b, c->arguments ? c->arguments : "{}");
        buf_puts(&b, "}");
    }
    buf_puts(&b, "]}");
    chat_parsed_free(&parsed);
    if (b.oom) {
        buf_free(&b);
        return NULL;
    }
    return b.p;
}
