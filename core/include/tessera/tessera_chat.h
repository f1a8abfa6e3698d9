/*
 * tessera_chat.h — tool calls in a model's output, for a server or an app
 * that streams replies: which call syntax a chat template asks for, where a
 * streamed text may start a call (so that part is held back), and a
 * finished reply split into content, reasoning and calls.
 *
 * tessera_chat_parse_reply (tessera.h) does the whole split from a template
 * in one call and returns JSON; these are its parts, for callers that keep
 * the format between calls and want the calls as C strings.
 */
#ifndef TESSERA_TESSERA_CHAT_H
#define TESSERA_TESSERA_CHAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The call syntaxes a model may use. */
typedef enum tessera_tool_format {
    TESSERA_TOOLS_GENERIC = 0, /* a bare JSON object {"name", "arguments"} naming an offered tool */
    TESSERA_TOOLS_HERMES,      /* <tool_call>{...}</tool_call> */
    TESSERA_TOOLS_LLAMA3,      /* Llama 3's JSON (and <|python_tag|>) */
    TESSERA_TOOLS_MISTRAL,     /* [TOOL_CALLS] [...] */
    TESSERA_TOOLS_QWEN3_CODER, /* <tool_call><function=...> XML */
    TESSERA_TOOLS_HARMONY      /* gpt-oss channels */
} tessera_tool_format;

/* The format a chat template's Jinja text asks for (tessera_chat_template_source);
 * NULL, or a text with none of the formats' markers: GENERIC. */
tessera_tool_format tessera_tool_format_detect(const char *template_text);
/* "generic", "hermes", "llama3", "mistral", "qwen3-coder", "harmony";
 * "generic" for a value outside the enum. Never NULL. */
const char *tessera_tool_format_name(tessera_tool_format format);

typedef struct tessera_tool_call {
    char *name;      /* the function's name */
    char *arguments; /* a JSON object, as text */
    char *id;        /* the model's own call id (mistral), else NULL */
} tessera_tool_call;

/* A reply split by tessera_tool_parse. Every string is malloc'd and freed
 * by tessera_tool_reply_free. */
typedef struct tessera_tool_reply {
    char *content;   /* the text outside the calls; never NULL after a parse */
    char *reasoning; /* harmony's analysis channel; NULL when none */
    tessera_tool_call *calls;
    size_t n_calls;
} tessera_tool_reply;

/* Split a complete reply text[0..len) in format into *out. known[0..n_known)
 * are the tools offered (n_known may be 0); the GENERIC fallback accepts
 * only a call naming one of them, so JSON an app asked for is not taken for
 * a call. A call that does not parse stays in the content. 0, or -1 with an
 * error when out of memory (*out then needs no free). */
int tessera_tool_parse(tessera_tool_format format, const char *text, size_t len, const char *const *known,
                       size_t n_known, tessera_tool_reply *out);
/* Free what tessera_tool_parse put in *reply and zero it; a zeroed reply is
 * fine. */
void tessera_tool_reply_free(tessera_tool_reply *reply);

/* For streaming: the offset in text[0..len) from which the text is, or may
 * become, a tool call and must be held back until the output ends (a start
 * marker, a tail that could begin one, or for formats whose calls are bare
 * JSON a '{' or '[' as the first non-space character); len when all of it
 * may be sent as content. */
size_t tessera_tool_hold_from(tessera_tool_format format, const char *text, size_t len);

#ifdef __cplusplus
}
#endif

#endif
