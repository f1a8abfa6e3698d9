/*
 * tool_parse — a model's generated text split into plain content, reasoning
 * and tool calls, for the tool-call formats of the chat templates Tessera
 * knows (../shared/templates):
 *
 *   hermes       <tool_call>{"name": N, "arguments": {...}}</tool_call>  (Hermes, Qwen 2.5/3, SmolLM3)
 *   llama3       {"name": N, "parameters": {...}}, optionally after <|python_tag|>,
 *                several separated by ';' (Llama 3.1/3.2)
 *   mistral      [TOOL_CALLS]N[ARGS]{...} (Ministral 3) or [TOOL_CALLS][{"name", "arguments"}, ...]
 *   qwen3-coder  <tool_call><function=N><parameter=P>value</parameter>...</function></tool_call>
 *   harmony      <|channel|>commentary to=functions.N [<|constrain|>json]<|message|>{...}<|call|>
 *                (gpt-oss; the analysis channel is reasoning, final is content)
 *   generic      the whole output one JSON object: {"tool_call": {"name", "arguments"}},
 *                {"tool_calls": [...]} or {"name", "arguments"}; every other format
 *                falls back to it when its own markers are absent
 *
 * The text is untrusted: every JSON value is checked by a strict scanner
 * (bounded depth) before it becomes a call. A call that does not parse is
 * not dropped: its text stays in the content.
 */
#ifndef TESSERA_CHAT_TOOL_PARSE_H
#define TESSERA_CHAT_TOOL_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera_chat.h>

/* The formats, a call and a parsed reply are the public API's types
 * (tessera_chat.h, TESSERA_TOOLS_*), so tessera_tool_parse hands the
 * parser's result on as it is; these are the parser's names for them. */
typedef tessera_tool_format chat_tool_format;
typedef tessera_tool_call chat_tool_call;
typedef tessera_tool_reply chat_parsed;

/* The format a chat template's text asks for (NULL or none of the markers:
 * generic). */
chat_tool_format chat_tool_format_detect(const char *template_text);
/* "hermes", "llama3", ... as in the table above. */
const char *chat_tool_format_name(chat_tool_format f);

/* Parse a complete output. 0, or -1 (error_get() set) when out of memory.
 * known/n_known (may be 0): the tool names offered; the generic fallback
 * only accepts a call whose name is one of them (so JSON an app asked for
 * is not mistaken for a call). */
int chat_tool_parse(chat_tool_format f, const char *text, size_t len, const char *const *known,
                    size_t n_known, chat_parsed *out);
void chat_parsed_free(chat_parsed *p);

/* For streaming: the offset in text[0..len) from which the text may be (or
 * may become) a tool call, so must be held back until the output ends:
 * a start marker, a tail that could begin one, or, for formats whose calls
 * are bare JSON, a '{' or '[' as the first non-space character. len when
 * everything may be sent as content. */
size_t chat_tool_hold_from(chat_tool_format f, const char *text, size_t len);

/* The length of the JSON value at s[0..n) after leading white space (the
 * offset just past it), or 0 when no valid value starts there. Nesting is
 * bounded; deeper input is rejected. */
size_t chat_json_value_end(const char *s, size_t n);

#endif
