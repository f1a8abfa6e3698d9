/* tessera_chat.h: the tool-call parser (chat/tool_parse) behind the public
 * API. The parsed calls move into a public array of their own, so the two
 * structs may differ. */
#include <tessera/tessera_chat.h>

#include <stdlib.h>
#include <string.h>

#include "chat/tool_parse.h"
#include "util/error.h"

_Static_assert((int)TESSERA_TOOLS_GENERIC == (int)CHAT_TOOLS_GENERIC &&
                   (int)TESSERA_TOOLS_HERMES == (int)CHAT_TOOLS_HERMES &&
                   (int)TESSERA_TOOLS_LLAMA3 == (int)CHAT_TOOLS_LLAMA3 &&
                   (int)TESSERA_TOOLS_MISTRAL == (int)CHAT_TOOLS_MISTRAL &&
                   (int)TESSERA_TOOLS_QWEN3_CODER == (int)CHAT_TOOLS_QWEN3_CODER &&
                   (int)TESSERA_TOOLS_HARMONY == (int)CHAT_TOOLS_HARMONY,
               "the public tool formats are the parser's, number for number");

tessera_tool_format tessera_tool_format_detect(const char *template_text) {
    return (tessera_tool_format)chat_tool_format_detect(template_text);
}

const char *tessera_tool_format_name(tessera_tool_format format) {
    return chat_tool_format_name((chat_tool_format)format);
}

int tessera_tool_parse(tessera_tool_format format, const char *text, size_t len, const char *const *known,
                       size_t n_known, tessera_tool_reply *out) {
    memset(out, 0, sizeof *out);
    chat_parsed parsed;
    if (chat_tool_parse((chat_tool_format)format, text, len, known, n_known, &parsed) != 0) return -1;
    tessera_tool_call *calls = parsed.n_calls ? calloc(parsed.n_calls, sizeof *calls) : NULL;
    if (parsed.n_calls && !calls) {
        chat_parsed_free(&parsed);
        return error_set("tool calls: out of memory");
    }
    for (size_t i = 0; i < parsed.n_calls; i++) {
        calls[i].name = parsed.calls[i].name;
        calls[i].arguments = parsed.calls[i].arguments;
        calls[i].id = parsed.calls[i].id;
    }
    free(parsed.calls); /* the strings now belong to calls */
    out->content = parsed.content;
    out->reasoning = parsed.reasoning;
    out->calls = calls;
    out->n_calls = parsed.n_calls;
    return 0;
}

void tessera_tool_reply_free(tessera_tool_reply *reply) {
    if (!reply) return;
    for (size_t i = 0; i < reply->n_calls; i++) {
        free(reply->calls[i].name);
        free(reply->calls[i].arguments);
        free(reply->calls[i].id);
    }
    free(reply->calls);
    free(reply->content);
    free(reply->reasoning);
    memset(reply, 0, sizeof *reply);
}

size_t tessera_tool_hold_from(tessera_tool_format format, const char *text, size_t len) {
    return chat_tool_hold_from((chat_tool_format)format, text, len);
}
