/* A whole server from a config (server.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct serve_server {
    serve_config *c;
    serve_engine *engine;
    serve_http *http[SERVE_MAX_HOSTS];
    char hosts[SERVE_MAX_HOSTS][128];
    int n;
};

serve_server *serve_server_listen(serve_config *c) {
    serve_server *s = calloc(1, sizeof *s);
    if (!s) {
        fprintf(stderr, "tessera serve: out of memory\n");
        return NULL;
    }
    s->c = c;
    char list[1024];
    snprintf(list, sizeof list, "%s", c->hosts ? c->hosts : "127.0.0.1");
    char *save = NULL;
    for (char *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
        while (*h == ' ') h++;
        size_t n = strlen(h);
        if (n >= 2 && h[0] == '[' && h[n - 1] == ']') h[n - 1] = '\0', h++; /* [::1] */
        if (s->n == SERVE_MAX_HOSTS || !*h) {
            fprintf(stderr, "tessera serve: --host %s: %s\n", c->hosts, *h ? "at most 8 addresses" : "an empty address");
            serve_server_free(s);
            return NULL;
        }
        serve_http_params hp = c->http;
        hp.host = h;
        if (s->n > 0) hp.port = serve_http_port(s->http[0]);
        s->http[s->n] = serve_http_start(&hp, NULL, &c->api);
        if (!s->http[s->n]) {
            serve_server_free(s);
            return NULL;
        }
        snprintf(s->hosts[s->n], sizeof s->hosts[0], "%s", h);
        s->n++;
    }
    return s;
}

int serve_server_start(serve_server *s, tessera_model *model, tessera_context *ctx, serve_embed *embed) {
    serve_engine_params ep = s->c->engine;
    ep.model = model;
    ep.ctx = ctx;
    s->engine = serve_engine_new(&ep);
    if (!s->engine || serve_engine_start(s->engine) != 0) {
        fprintf(stderr, "tessera serve: cannot start the engine (out of memory or threads)\n");
        return -1;
    }
    serve_embed_set_engine(embed, s->engine); /* embeddings decode on the engine's thread */
    for (int i = 0; i < s->n; i++) serve_http_set_ready(s->http[i], s->engine);
    return 0;
}

int serve_server_n_hosts(const serve_server *s) { return s->n; }

const char *serve_server_host(const serve_server *s, int i) { return s->hosts[i]; }

int serve_server_port(const serve_server *s, int i) { return serve_http_port(s->http[i]); }

void serve_server_drain(serve_server *s, int grace_ms, bool (*interrupt)(void *), void *cls) {
    for (int i = 0; i < s->n; i++) serve_http_stop_accepting(s->http[i]);
    if (s->engine) serve_engine_drain(s->engine, grace_ms, interrupt, cls);
}

void serve_server_free(serve_server *s) {
    if (!s) return;
    /* Engine first: it fails what is still waiting, so connections end. */
    if (s->engine) serve_engine_stop(s->engine);
    for (int i = 0; i < s->n; i++) serve_http_stop(s->http[i]);
    serve_engine_free(s->engine);
    free(s);
}
