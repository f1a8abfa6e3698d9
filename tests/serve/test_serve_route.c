/*
 * The server's route table (serve/route.c) without HTTP: each endpoint
 * found by method and path with its format, the key and readiness it
 * needs; prefixes give the rest of the path to the handler; a known path
 * asked with another method is a 405 naming it; the options turn routes
 * off (501) or away (404); Vertex AI's routes follow the environment.
 */
#include <string.h>

#include "format.h"
#include "harness.h"
#include "route.h"

static const serve_route *find(const serve_route_options *o, const char *method, const char *url, bool *wrong) {
    bool w = false;
    const serve_route *r = serve_route_find(o, method, url, &w);
    if (wrong) *wrong = w;
    return r;
}

TEST(test_formats) {
    const serve_route_options o = {0};
    static const struct {
        const char *url;
        const serve_format *format;
        serve_handler handler;
    } cases[] = {
        {"/v1/chat/completions", &serve_format_chat, SERVE_H_GENERATE},
        {"/chat/completions", &serve_format_chat, SERVE_H_GENERATE},
        {"/v1/completions", &serve_format_completion, SERVE_H_GENERATE},
        {"/completion", &serve_format_native, SERVE_H_GENERATE},
        {"/infill", &serve_format_infill, SERVE_H_GENERATE},
        {"/v1/messages", &serve_anthropic_messages, SERVE_H_GENERATE},
        {"/v1/messages/count_tokens", &serve_anthropic_count_tokens, SERVE_H_ANSWER},
        {"/responses", &serve_responses, SERVE_H_GENERATE},
        {"/v1/responses/input_tokens", &serve_responses_input_tokens, SERVE_H_ANSWER},
        {"/v1/chat/completions/input_tokens", &serve_format_input_tokens, SERVE_H_ANSWER},
        {"/tokenize", &serve_format_tokenize, SERVE_H_ANSWER},
        {"/v1/embeddings", &serve_format_embeddings_oai, SERVE_H_ANSWER},
        {"/embedding", &serve_format_embeddings, SERVE_H_ANSWER},
        {"/v1/reranking", &serve_format_rerank, SERVE_H_ANSWER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bool wrong = true;
        const serve_route *r = find(&o, "POST", cases[i].url, &wrong);
        REQUIRE(r != NULL, "%s: no route", cases[i].url);
        EXPECT(r->format == cases[i].format, "%s: format %s", cases[i].url, r->format ? r->format->name : "none");
        EXPECT(r->handler == cases[i].handler, "%s: handler %d", cases[i].url, (int)r->handler);
        EXPECT(!wrong && r->auth && r->needs_ready, "%s: POST refused, or open", cases[i].url);
        EXPECT(serve_route_off(&o, r) == NULL || r->format == &serve_format_embeddings_oai ||
                   r->format == &serve_format_embeddings || r->format == &serve_format_rerank,
               "%s: off", cases[i].url);
    }
}

TEST(test_open_and_methods) {
    const serve_route_options o = {0};
    bool wrong = false;
    const serve_route *r = find(&o, "GET", "/health", &wrong);
    REQUIRE(r != NULL, "no /health");
    EXPECT(r->handler == SERVE_H_HEALTH && !r->auth && !r->needs_ready && !wrong, "/health not open");
    r = find(&o, "POST", "/health", &wrong);
    EXPECT(r && wrong, "POST /health not a 405");
    char msg[160];
    serve_route_usage(r, "/health", msg, sizeof msg);
    EXPECT_STR(msg, "use GET /health", "405 message");
    r = find(&o, "GET", "/v1/chat/completions", &wrong);
    EXPECT(r && wrong, "GET of a generation not a 405");
    r = find(&o, "GET", "/", &wrong);
    EXPECT(r && r->handler == SERVE_H_PAGE && !r->auth, "the page is not open");
    EXPECT(find(&o, "GET", "/nothing", &wrong) == NULL && !wrong, "an unknown path found");
    EXPECT(find(&o, "POST", "/v1/chat/completionsX", &wrong) == NULL, "a longer path matched");
}

TEST(test_prefixes) {
    const serve_route_options o = {0};
    bool wrong = false;
    const serve_route *r = find(&o, "GET", "/v1/models/tiny", &wrong);
    REQUIRE(r != NULL, "no /v1/models/{id}");
    EXPECT(r->handler == SERVE_H_MODEL && r->prefix, "/v1/models/{id}");
    EXPECT_STR("/v1/models/tiny" + strlen(r->path), "tiny", "the id");
    r = find(&o, "GET", "/v1/models", &wrong);
    EXPECT(r && r->handler == SERVE_H_MODELS, "/v1/models");
    r = find(&o, "GET", "/slots/0", &wrong);
    REQUIRE(r && r->handler == SERVE_H_SLOT_ACTION && wrong, "GET /slots/0 not a 405");
    char msg[160];
    serve_route_usage(r, "/slots/0", msg, sizeof msg);
    EXPECT_STR(msg, "use POST /slots/{id}?action=save|restore|erase", "405 message");
}

TEST(test_options) {
    serve_route_options o = {.no_webui = true, .no_slots = true, .no_metrics = true};
    bool wrong;
    EXPECT(find(&o, "GET", "/", &wrong) == NULL, "--no-webui still serves /");
    EXPECT_HAS(serve_route_off(&o, find(&o, "GET", "/slots", &wrong)), "--no-slots", "/slots");
    EXPECT_HAS(serve_route_off(&o, find(&o, "GET", "/metrics", &wrong)), "--no-metrics", "/metrics");
    EXPECT(serve_route_off(&o, find(&o, "POST", "/slots/1", &wrong)) == NULL, "slot actions off");
    /* a generating server embeds nothing, an embedding one generates nothing */
    EXPECT_HAS(serve_route_off(&o, find(&o, "POST", "/v1/embeddings", &wrong)), "--embeddings", "embeddings");
    EXPECT_HAS(serve_route_off(&o, find(&o, "POST", "/rerank", &wrong)), "--reranking", "rerank");
    o.embeddings = true;
    EXPECT(serve_route_off(&o, find(&o, "POST", "/v1/embeddings", &wrong)) == NULL, "embeddings off");
    EXPECT_HAS(serve_route_off(&o, find(&o, "POST", "/completion", &wrong)), "without `--embeddings`",
               "completion on an embedding server");
    EXPECT(serve_route_off(&o, find(&o, "POST", "/v1/messages", &wrong)) == NULL, "messages off");
}

TEST(test_vertex) {
    const serve_route_options o = {.gcp_predict_route = "/v1/endpoints/e:predict", .gcp_health_route = "/ping"};
    bool wrong = true;
    const serve_route *r = find(&o, "POST", "/v1/endpoints/e:predict", &wrong);
    EXPECT(r && r->handler == SERVE_H_PREDICT && !wrong && r->auth, "the predict route");
    r = find(&o, "GET", "/ping", &wrong);
    EXPECT(r && r->handler == SERVE_H_HEALTH && !r->auth, "the health route");
    r = find(&o, "GET", "/v1/endpoints/e:predict", &wrong);
    char msg[160];
    REQUIRE(r && wrong, "GET of predict not a 405");
    serve_route_usage(r, "/v1/endpoints/e:predict", msg, sizeof msg);
    EXPECT_STR(msg, "use POST /v1/endpoints/e:predict", "405 message");
}

HARNESS_MAIN("serve route", HARNESS_TEST(test_formats), HARNESS_TEST(test_open_and_methods),
             HARNESS_TEST(test_prefixes), HARNESS_TEST(test_options), HARNESS_TEST(test_vertex))
