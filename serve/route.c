/* The endpoint table of `tessera serve` (route.h). */
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "route.h"

#define GET "GET"
#define POST "POST"
/* Open: answered without the API key, before the model is loaded. Keyed: neither. */
#define OPEN false, false
#define KEYED true, true

#define GENERATE(path, format) {POST, path, false, KEYED, SERVE_H_GENERATE, &format, NULL}
#define ANSWER(path, format) {POST, path, false, KEYED, SERVE_H_ANSWER, &format, NULL}
#define SERVER(method, path, handler) {method, path, false, KEYED, handler, NULL, NULL}

static const serve_route routes[] = {
    {GET, "/health", false, OPEN, SERVE_H_HEALTH, NULL, NULL},
    {GET, "/", false, OPEN, SERVE_H_PAGE, NULL, NULL},
    {GET, "/index.html", false, OPEN, SERVE_H_PAGE, NULL, NULL},
    /* OpenAI's and llama-server's generations */
    GENERATE("/v1/chat/completions", serve_format_chat),
    GENERATE("/chat/completions", serve_format_chat),
    GENERATE("/v1/completions", serve_format_completion),
    GENERATE("/completion", serve_format_native),
    GENERATE("/completions", serve_format_native),
    GENERATE("/infill", serve_format_infill),
    /* the chat path in Anthropic's and the Responses API's shapes */
    GENERATE("/v1/messages", serve_anthropic_messages),
    GENERATE("/messages", serve_anthropic_messages),
    ANSWER("/v1/messages/count_tokens", serve_anthropic_count_tokens),
    ANSWER("/messages/count_tokens", serve_anthropic_count_tokens),
    GENERATE("/v1/responses", serve_responses),
    GENERATE("/responses", serve_responses),
    ANSWER("/v1/responses/input_tokens", serve_responses_input_tokens),
    ANSWER("/responses/input_tokens", serve_responses_input_tokens),
    /* text in, text out */
    ANSWER("/apply-template", serve_format_apply_template),
    ANSWER("/tokenize", serve_format_tokenize),
    ANSWER("/detokenize", serve_format_detokenize),
    ANSWER("/v1/chat/completions/input_tokens", serve_format_input_tokens),
    ANSWER("/chat/completions/input_tokens", serve_format_input_tokens),
    /* embeddings and reranking (--embeddings, --reranking) */
    ANSWER("/v1/embeddings", serve_format_embeddings_oai),
    ANSWER("/embeddings", serve_format_embeddings),
    ANSWER("/embedding", serve_format_embeddings),
    ANSWER("/v1/rerank", serve_format_rerank),
    ANSWER("/rerank", serve_format_rerank),
    ANSWER("/reranking", serve_format_rerank),
    ANSWER("/v1/reranking", serve_format_rerank),
    /* the server and its model */
    SERVER(GET, "/v1/models", SERVE_H_MODELS),
    SERVER(GET, "/models", SERVE_H_MODELS),
    {GET, "/v1/models/", true, KEYED, SERVE_H_MODEL, NULL, "/v1/models/{id}"},
    {GET, "/models/", true, KEYED, SERVE_H_MODEL, NULL, "/models/{id}"},
    SERVER(GET, "/props", SERVE_H_PROPS),
    SERVER(GET, "/slots", SERVE_H_SLOTS),
    {POST, "/slots/", true, KEYED, SERVE_H_SLOT_ACTION, NULL, "/slots/{id}?action=save|restore|erase"},
    SERVER(GET, "/metrics", SERVE_H_METRICS),
    /* llama-server's LoRA adapters (--lora): the list and the server's scales */
    SERVER(GET, "/lora-adapters", SERVE_H_LORA_LIST),
    {POST, "/lora-adapters", false, KEYED, SERVE_H_LORA_SET, NULL, NULL},
};

/* Vertex AI's routes, at the paths its environment names (AIP_HEALTH_ROUTE, AIP_PREDICT_ROUTE). */
static const serve_route gcp_health = {GET, "/health", false, OPEN, SERVE_H_HEALTH, NULL, NULL};
static const serve_route gcp_predict = {POST, NULL, false, KEYED, SERVE_H_PREDICT, NULL, NULL};

static bool matches(const serve_route *r, const char *url) {
    return r->prefix ? !strncmp(url, r->path, strlen(r->path)) : !strcmp(url, r->path);
}

const serve_route *serve_route_find(const serve_route_options *o, const char *method, const char *url,
                                    bool *wrong_method) {
    const serve_route *found = NULL;
    if (o->gcp_health_route && !strcmp(url, o->gcp_health_route)) found = &gcp_health;
    else if (o->gcp_predict_route && !strcmp(url, o->gcp_predict_route)) found = &gcp_predict;
    /* a path may have a route per method (/lora-adapters): the method's
     * own first, else the path's for the 405 */
    for (size_t i = 0; !found && i < sizeof routes / sizeof *routes; i++)
        if (matches(&routes[i], url) && !strcmp(method, routes[i].method)) found = &routes[i];
    for (size_t i = 0; !found && i < sizeof routes / sizeof *routes; i++)
        if (matches(&routes[i], url)) found = &routes[i];
    if (found && found->handler == SERVE_H_PAGE && o->no_webui) found = NULL;
    *wrong_method = found && strcmp(method, found->method) != 0;
    return found;
}

static bool is_embedding(const serve_format *f) {
    return f == &serve_format_embeddings_oai || f == &serve_format_embeddings || f == &serve_format_rerank;
}

const char *serve_route_off(const serve_route_options *o, const serve_route *r) {
    if (r->handler == SERVE_H_SLOTS && o->no_slots) return "the slots endpoint is off (--no-slots)";
    if (r->handler == SERVE_H_METRICS && o->no_metrics) return "the metrics endpoint is off (--no-metrics)";
    /* llama-server's answers: an embedding server generates nothing, and
     * a generating one embeds nothing */
    if (is_embedding(r->format) && !o->embeddings)
        return r->format == &serve_format_rerank
                   ? "This server does not support reranking. Start it with `--reranking`"
                   : "This server does not support embeddings. Start it with `--embeddings`";
    if (o->embeddings && r->handler == SERVE_H_GENERATE &&
        (r->format == &serve_format_chat || r->format == &serve_format_completion ||
         r->format == &serve_format_native || r->format == &serve_format_infill))
        return "This server does not support completions. Start it without `--embeddings`";
    return NULL;
}

void serve_route_usage(const serve_route *r, const char *url, char *buf, size_t size) {
    snprintf(buf, size, "use %s %.100s", r->method, r->usage ? r->usage : url);
}
