/*
 * http — the server's transport (http.c) on libmicrohttpd behind the gate
 * (gate.h): the route table (route.h) says what answers a request, formats
 * (format.h) make the bytes, the engine (engine.h) generates; http.c waits
 * for results, sends whole responses and server-sent events, and notices
 * clients that left.
 */
#ifndef TESSERA_SERVE_HTTP_H
#define TESSERA_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "engine.h"
#include "format.h"
#include "log.h"

/* ------------------------------------------------------------ HTTP */

typedef struct serve_http_params {
    const char *host;
    int port;
    const char *api_key;   /* NULL: no key */
    size_t max_body;       /* bytes; larger bodies get 413 */
    int max_connections;
    int max_conns_per_ip;  /* 0: no limit */
    int header_timeout_ms; /* request line and headers, from the connection's start */
    int body_timeout_ms;   /* the body, from its headers */
    serve_log_format log_format;
    const char *slot_save_path; /* NULL: slot save/restore refused (501) */
    const char *cors_origin;    /* --cors-origin: "*", "localhost" or origins, comma-separated; NULL: no CORS */
    bool no_webui, no_slots, no_metrics; /* GET /, GET /slots, GET /metrics answer 404 */
    const char *gcp_predict_route; /* Vertex AI's prediction route (AIP_MODE=PREDICTION, gcp.h); NULL: off */
    const char *gcp_health_route;  /* and its health route, answered as /health; NULL: none */
} serve_http_params;

typedef struct serve_http serve_http;

/* Starts answering at once: until serve_http_set_ready, /health and every
 * other endpoint answer 503 "Loading model" (e may be NULL then, and api's
 * model fields unset). */
serve_http *serve_http_start(const serve_http_params *p, serve_engine *e, const serve_api *api);
/* The model is loaded and e runs: serve everything (api filled before). */
void serve_http_set_ready(serve_http *h, serve_engine *e);
/* The port actually bound (for --port 0). */
int serve_http_port(const serve_http *h);
/* Close the listening socket (connections already open go on). */
void serve_http_stop_accepting(serve_http *h);
void serve_http_stop(serve_http *h);

/* The chat page served at GET / (page.html, embedded at build time). */
extern const char serve_page_html[];

#endif
