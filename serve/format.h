/*
 * format — one interface for every shape the server speaks: OpenAI's chat
 * and completions, llama-server's /completion and /infill, Anthropic's
 * messages, OpenAI's Responses, embeddings, reranking, and the endpoints
 * that turn text into text (tokenize, apply-template, token counts).
 *
 * A generation format parses a body into requests (a list of prompts makes
 * several), renders their whole response, or their stream event by event;
 * an answer format (answer set) replies at once without the engine. The
 * route table (route.h) names each endpoint's format; http.c moves bytes
 * and calls these, and knows no shape.
 */
#ifndef TESSERA_SERVE_FORMAT_H
#define TESSERA_SERVE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve.h"

typedef struct serve_format {
    const char *name;
    /* How many requests the body makes (a list of prompts); NULL: one. */
    int (*count)(const char *body, size_t len);
    /* The index-th of them: 0 with *call and *out (not submitted), or -1
     * with *err (OpenAI-shaped; error_body turns it into the format's). */
    int (*parse)(const serve_api *api, const char *body, size_t len, int index, serve_call *call,
                 serve_request **out, serve_error *err);
    /* The whole response of reqs[0..n) (engine lock held). */
    char *(*response)(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n);
    /* The next server-sent events of r (as serve_api_stream_next); *state
     * starts NULL and is the format's (free_state frees it, may be NULL). */
    char *(*stream_next)(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                         bool *finished, void **state);
    void (*free_state)(void *state);
    /* An endpoint answered at once: JSON, or NULL with *err. */
    char *(*answer)(const serve_api *api, const char *body, size_t len, serve_error *err);
    /* An OpenAI-shaped error body (taken) in the format's shape; NULL:
     * errors stay OpenAI's. */
    char *(*error_body)(int status, char *openai_body);
} serve_format;

/* OpenAI's and llama-server's generations (format.c). */
extern const serve_format serve_format_chat, serve_format_completion, serve_format_native, serve_format_infill;
/* The chat path in other shapes (anthropic.c, responses.c; dialect.h). */
extern const serve_format serve_anthropic_messages, serve_anthropic_count_tokens, serve_responses,
    serve_responses_input_tokens;
/* Answered without the engine (format.c): embeddings in OpenAI's and
 * llama-server's shapes, reranking, and the text endpoints. */
extern const serve_format serve_format_embeddings_oai, serve_format_embeddings, serve_format_rerank,
    serve_format_apply_template, serve_format_tokenize, serve_format_detokenize, serve_format_input_tokens;

#endif
