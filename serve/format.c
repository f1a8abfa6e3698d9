/* The OpenAI and llama-server formats, and the answered endpoints, behind
 * the one format interface (format.h). The dialects' are in anthropic.c
 * and responses.c. */
#include <stdlib.h>

#include "embed_api.h"
#include "format.h"

/* ---- generations: a kind of serve_api's parser and its writers */

#define KIND_PARSE(name, kind)                                                                                    \
    static int name(const serve_api *api, const char *body, size_t len, int index, serve_call *call,             \
                    serve_request **out, serve_error *err) {                                                     \
        return serve_api_parse_at(api, kind, body, len, index, call, out, err);                                  \
    }
KIND_PARSE(parse_chat, SERVE_CHAT)
KIND_PARSE(parse_completion, SERVE_COMPLETION)
KIND_PARSE(parse_native, SERVE_NATIVE)
KIND_PARSE(parse_infill, SERVE_INFILL)

static int count_completion(const char *body, size_t len) {
    return serve_api_count_prompts(SERVE_COMPLETION, body, len);
}

static int count_native(const char *body, size_t len) { return serve_api_count_prompts(SERVE_NATIVE, body, len); }

static char *openai_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n) {
    return serve_api_response_list(api, &calls[0], (const serve_request *const *)reqs, n);
}

static char *openai_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                                bool *finished, void **state) {
    (void)state;
    return serve_api_stream_next(api, call, r, seen, finished);
}

static char *native_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                                bool *finished, void **state) {
    (void)state;
    return serve_native_stream_next(api, call, r, seen, finished);
}

const serve_format serve_format_chat = {
    .name = "chat", .parse = parse_chat, .response = openai_response, .stream_next = openai_stream_next};
const serve_format serve_format_completion = {.name = "completion",
                                              .count = count_completion,
                                              .parse = parse_completion,
                                              .response = openai_response,
                                              .stream_next = openai_stream_next};
const serve_format serve_format_native = {.name = "native",
                                          .count = count_native,
                                          .parse = parse_native,
                                          .response = serve_native_response,
                                          .stream_next = native_stream_next};
const serve_format serve_format_infill = {
    .name = "infill", .parse = parse_infill, .response = serve_native_response, .stream_next = native_stream_next};

/* ---- answered at once */

/* The embedding endpoints answer with a body and a status, errors too. */
static char *embed_answer(const serve_api *api, const char *body, size_t len, serve_error *err, bool rerank,
                          bool oai) {
    int status = 500;
    char *out = serve_embed_answer(api->embed, rerank, oai, body, len, &status);
    if (out && status == 200) return out;
    if (!out) {
        serve_fail(err, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    err->status = status;
    err->body = out;
    return NULL;
}

static char *answer_embeddings_oai(const serve_api *api, const char *body, size_t len, serve_error *err) {
    return embed_answer(api, body, len, err, false, true);
}

static char *answer_embeddings(const serve_api *api, const char *body, size_t len, serve_error *err) {
    return embed_answer(api, body, len, err, false, false);
}

static char *answer_rerank(const serve_api *api, const char *body, size_t len, serve_error *err) {
    return embed_answer(api, body, len, err, true, false);
}

const serve_format serve_format_embeddings_oai = {.name = "embeddings (OpenAI)", .answer = answer_embeddings_oai};
const serve_format serve_format_embeddings = {.name = "embeddings", .answer = answer_embeddings};
const serve_format serve_format_rerank = {.name = "rerank", .answer = answer_rerank};
const serve_format serve_format_apply_template = {.name = "apply-template", .answer = serve_api_apply_template};
const serve_format serve_format_tokenize = {.name = "tokenize", .answer = serve_native_tokenize};
const serve_format serve_format_detokenize = {.name = "detokenize", .answer = serve_native_detokenize};
const serve_format serve_format_input_tokens = {.name = "input_tokens", .answer = serve_api_input_tokens};
