/*
 * server — a whole server from a config (server.c): listeners on every
 * host, answering 503 "Loading model" until the model is in; then the
 * engine over the loaded model, the embedding endpoints on its thread, and
 * every endpoint served; on shutdown the ports close, running requests get
 * their grace and the rest is stopped. A program (cli/cmd_serve.c) turns
 * its flags into a serve_config, loads the model its own way and calls
 * these; errors are printed on stderr after "tessera serve: ".
 */
#ifndef TESSERA_SERVE_SERVER_H
#define TESSERA_SERVE_SERVER_H

#include <stdbool.h>

#include <tessera/tessera.h>

#include "embed_api.h"
#include "engine.h"
#include "format.h"
#include "http.h"

enum { SERVE_MAX_HOSTS = 8 };

typedef struct serve_config {
    const char *hosts;          /* addresses to listen on, comma-separated ("[::1]" too), at most 8 */
    serve_http_params http;     /* host: each of hosts in turn; port 0: any, the first's for all */
    serve_api api;              /* the model's fields are filled before serve_server_start */
    serve_engine_params engine; /* model and ctx are serve_server_start's */
} serve_config;

typedef struct serve_server serve_server;

/* Listen on every host of c (which must outlive the server: the HTTP side
 * reads c->api). NULL after printing the error. */
serve_server *serve_server_listen(serve_config *c);
/* The model is loaded (c->api filled): start the engine over model and
 * ctx, attach embed (may be NULL) to it and serve everything. 0, or -1
 * after printing the error. */
int serve_server_start(serve_server *s, tessera_model *model, tessera_context *ctx, serve_embed *embed);
int serve_server_n_hosts(const serve_server *s);
const char *serve_server_host(const serve_server *s, int i);
int serve_server_port(const serve_server *s, int i);
/* Shutdown: close the ports, give running requests up to grace_ms (ended
 * early when interrupt, may be NULL, returns true). */
void serve_server_drain(serve_server *s, int grace_ms, bool (*interrupt)(void *), void *cls);
/* Stop what runs and free the server (NULL: nothing); the model, context
 * and embedding endpoints stay the caller's. */
void serve_server_free(serve_server *s);

#endif
