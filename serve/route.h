/*
 * route — every endpoint of `tessera serve` in one table: its method, its
 * path (or the prefix of its paths), whether it needs the API key and the
 * loaded model, and which handler answers it. http.c looks each request up
 * here, answers what the table says (405, 503, 401, 501) and hands the rest
 * to the handler; nothing else in the server matches URLs.
 */
#ifndef TESSERA_SERVE_ROUTE_H
#define TESSERA_SERVE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

struct serve_format;

typedef enum serve_handler {
    SERVE_H_HEALTH = 0,  /* 200 once the model is loaded, 503 before */
    SERVE_H_PAGE,        /* the chat page (page.html) */
    SERVE_H_GENERATE,    /* requests for the engine in route->format */
    SERVE_H_ANSWER,      /* a body answered at once by route->format */
    SERVE_H_PREDICT,     /* Vertex AI's prediction route (gcp.h): instances of several formats */
    SERVE_H_MODELS,      /* the model list */
    SERVE_H_MODEL,       /* one model by id (the rest of the path) */
    SERVE_H_PROPS,
    SERVE_H_SLOTS,
    SERVE_H_LORA_LIST,
    SERVE_H_LORA_SET,
    SERVE_H_SLOT_ACTION, /* save / restore / erase a slot (the rest of the path is its id) */
    SERVE_H_METRICS
} serve_handler;

typedef struct serve_route {
    const char *method;  /* "GET" or "POST" */
    const char *path;    /* the URL, or with prefix its start (the handler reads the rest);
                            NULL: set by the environment (Vertex AI) */
    bool prefix;
    bool auth;           /* needs the API key when the server has one */
    bool needs_ready;    /* 503 "Loading model" until the model is loaded */
    serve_handler handler;
    const struct serve_format *format; /* GENERATE, ANSWER: the shape of its bodies and errors */
    const char *usage;   /* how a 405 names the endpoint; NULL: the URL asked */
} serve_route;

/* What the server was started with that changes the table. */
typedef struct serve_route_options {
    bool no_webui;                 /* GET / is not served (404) */
    bool no_slots, no_metrics;     /* GET /slots, GET /metrics answer 501 */
    bool embeddings;               /* an embedding server: generations answer 501, embeddings run */
    const char *gcp_predict_route; /* Vertex AI's routes (AIP_MODE=PREDICTION); NULL: none */
    const char *gcp_health_route;
} serve_route_options;

/* The route of url; NULL: no endpoint (404). A known url asked with another
 * method returns its route with *wrong_method set (405). */
const serve_route *serve_route_find(const serve_route_options *o, const char *method, const char *url,
                                    bool *wrong_method);
/* Why route r is turned off on this server (the 501 message), or NULL. */
const char *serve_route_off(const serve_route_options *o, const serve_route *r);
/* The 405 message for r asked at url ("use GET /v1/models") into buf. */
void serve_route_usage(const serve_route *r, const char *url, char *buf, size_t size);

#endif
