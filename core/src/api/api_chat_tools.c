/* tessera_chat.h: the tool-call parser (chat/tool_parse) behind the public
 * API. The parser's format, call and reply types are the public ones
 * (tool_parse.h), so each function hands on to the parser as it is. */
#include <tessera/tessera_chat.h>

#include "chat/tool_parse.h"

tessera_tool_format tessera_tool_format_detect(const char *template_text) {
    return chat_tool_format_detect(template_text);
}

const char *tessera_tool_format_name(tessera_tool_format format) { return chat_tool_format_name(format); }

int tessera_tool_parse(tessera_tool_format format, const char *text, size_t len, const char *const *known,
                       size_t n_known, tessera_tool_reply *out) {
    return chat_tool_parse(format, text, len, known, n_known, out);
}

void tessera_tool_reply_free(tessera_tool_reply *reply) { chat_parsed_free(reply); }

size_t tessera_tool_hold_from(tessera_tool_format format, const char *text, size_t len) {
    return chat_tool_hold_from(format, text, len);
}
