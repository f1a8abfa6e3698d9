/*
 * dialect — the APIs served on the chat path in other shapes:
 *
 *   anthropic.c  POST /v1/messages and /v1/messages/count_tokens
 *   responses.c  POST /v1/responses (OpenAI's Responses API) and /v1/responses/input_tokens
 *
 * Each turns its request into an OpenAI chat request that serve_api_parse
 * reads, and the chat path's own output (serve_api_response,
 * serve_api_stream_next) into its shapes. So the chat template, tools,
 * grammars, stop strings and streaming are the chat path's, not copies.
 *
 * Field policy: a field a dialect knows but cannot honour is a 400 naming
 * it; a field it does not know is ignored and named in the request log.
 */
#ifndef TESSERA_SERVE_DIALECT_H
#define TESSERA_SERVE_DIALECT_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"

struct cJSON;

/* The dialects are formats (format.h): serve_anthropic_messages,
 * serve_anthropic_count_tokens, serve_responses, serve_responses_input_tokens;
 * the route table (route.c) names their paths. */

/* ---- shared by the dialects (dialect.c) */

/* Hand a translated OpenAI chat request (taken) to serve_api_parse. */
int serve_dialect_parse_chat(const serve_api *api, struct cJSON *chat, serve_call *call, serve_request **out,
                             serve_error *err);
/* The chat path's non-streamed response, parsed; NULL when out of memory. */
struct cJSON *serve_dialect_chat_response(const serve_api *api, const serve_call *call, const serve_request *r);
/* The chat path's next stream chunks, each parsed, as one array ("[DONE]"
 * dropped; an error chunk is an object with "error"). Never NULL unless
 * out of memory. */
struct cJSON *serve_dialect_chat_chunks(const serve_api *api, const serve_call *call, serve_request *r,
                                        uint64_t *seen, bool *finished);
/* Append "event: NAME\ndata: JSON\n\n" for obj (taken) to a malloc'd string. */
char *serve_sse_event(char *out, const char *name, struct cJSON *obj);
/* Append a chat message {role, content (taken)} to list; returns it. */
struct cJSON *serve_dialect_add_message(struct cJSON *list, const char *role, struct cJSON *content);
/* Each of root's `tools` through one (param: "tools[i]"), which appends
 * chat's tools to list; absent tools: nothing. */
int serve_dialect_add_tools(const struct cJSON *root, struct cJSON *chat, serve_error *err,
                            int (*one)(const struct cJSON *tool, const char *param, struct cJSON *list,
                                       serve_error *err));
/* Append a chat function tool to list (description, parameters optional). */
void serve_dialect_add_function(struct cJSON *list, const char *name, const char *description,
                                const struct cJSON *parameters);
/* chat's tool_choice forcing the function name. */
void serve_dialect_force_function(struct cJSON *chat, const char *name);
/* root[key].format (NULL when absent or null); a 400 naming key when
 * either is not an object. */
int serve_dialect_get_format(const struct cJSON *root, const char *key, const struct cJSON **format,
                             serve_error *err);
/* chat's response_format constraining the reply to a JSON schema. */
void serve_dialect_json_schema(struct cJSON *chat, const char *name, const struct cJSON *schema);
/* The fields of root that known[] (NULL-ended) lacks, comma-separated in
 * ignored (the request log names them; whole names only, as many as fit). */
void serve_dialect_ignore_unknown(const struct cJSON *root, const char *const *known, char *ignored, size_t cap);
/* The message of an OpenAI error body (static "" when it has none). */
const char *serve_dialect_error_message(const struct cJSON *openai_error);

#endif
