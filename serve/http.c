/*
 * http — the HTTP side of `tessera serve` on libmicrohttpd, one thread per
 * connection.
 *
 * A request body is collected up to max_body bytes (more is read and dropped,
 * then answered 413). Generation requests are parsed (api.c), handed to the
 * engine and waited for; while waiting the connection's socket is checked
 * every few milliseconds so that a client that hangs up frees its slot at
 * once. Streams are server-sent events written by a content reader that
 * blocks until the engine has more text.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "embed_api.h"
#include "format.h"
#include "gate.h"
#include "gcp.h"
#include "http.h"
#include "log.h"
#include "route.h"

/* Bodies beyond this are not even read: the connection is answered and closed. */
#define SERVE_DISCARD_LIMIT ((uint64_t)64 << 20)
enum { WAIT_SLICE_MS = 20 };

struct serve_http {
    serve_http_params p;
    serve_engine *e;    /* set once the model is loaded (ready) */
    const serve_api *api;
    int ready;          /* atomic: 0 while the model loads (503s), 1 after */
    struct MHD_Daemon *d;
    serve_gate *gate;
};

typedef struct conn_state {
    char *body;
    size_t len, cap;
    uint64_t seen; /* body bytes received, kept or not */
    bool too_large;
    char origin[256];    /* the request's Origin header, for CORS ("" if none) */
    serve_log_entry log; /* the request's log line (log.c) */
    const serve_format *format; /* the route's (format.h): its errors in its shape; NULL: OpenAI's */
} conn_state;

/* The connection this thread serves (one thread per connection), so the
 * response helpers can note the status and token counts for the log line. */
static _Thread_local conn_state *tl_conn;

/* ------------------------------------------------------------ helpers */

/* Whether origin is a loopback one (http(s)://localhost, 127.0.0.1 or
 * [::1], any port): what --cors-origin localhost allows. */
static bool origin_is_local(const char *origin) {
    const char *host = strstr(origin, "://");
    if (!host) return false;
    host += 3;
    static const char *const local[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(local[i]);
        if (!strncmp(host, local[i], n) && (host[n] == '\0' || host[n] == ':' || host[n] == '/')) return true;
    }
    return false;
}

/* Whether --cors-origin (comma-separated: "*", "localhost" or origins)
 * lets this Origin read the response. */
static bool origin_allowed(const char *allowed, const char *origin) {
    if (!allowed || !origin[0]) return false;
    char list[512];
    snprintf(list, sizeof list, "%s", allowed);
    char *save = NULL;
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        while (*a == ' ') a++;
        if (!strcmp(a, "*") || !strcmp(a, origin) || (!strcmp(a, "localhost") && origin_is_local(origin)))
            return true;
    }
    return false;
}

/* CORS headers on every response, as llama-server sends them: the
 * request's Origin reflected when allowed, with credentials. */
static void add_cors(serve_http *h, struct MHD_Response *resp) {
    const char *origin = tl_conn ? tl_conn->origin : "";
    if (!origin_allowed(h->p.cors_origin, origin)) return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(resp, "Access-Control-Allow-Credentials", "true");
    MHD_add_response_header(resp, "Vary", "Origin");
}

static enum MHD_Result send_body(serve_http *h, struct MHD_Connection *c, int status, char *body,
                                 const char *ctype) {
    if (!body) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        body = serve_api_error_json("out of memory", "server_error", NULL, NULL);
        if (!body) return MHD_NO;
    }
    if (status >= 400 && tl_conn && tl_conn->format && tl_conn->format->error_body)
        body = tl_conn->format->error_body(status, body);
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    add_cors(h, resp);
    /* After an error the request's framing may be wrong (a Content-Length
     * shorter than the body): never read what follows as a new request. */
    if (status >= 400) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    if (h->e) serve_engine_count_status(h->e, status); /* none while the model loads */
    if (tl_conn) tl_conn->log.status = status;
    return rc;
}

static enum MHD_Result send_json(serve_http *h, struct MHD_Connection *c, int status, char *body) {
    return send_body(h, c, status, body, "application/json");
}

static enum MHD_Result send_error(serve_http *h, struct MHD_Connection *c, int status, const char *msg,
                                  const char *type, const char *code) {
    return send_json(h, c, status, serve_api_error_json(msg, type, NULL, code));
}

/* Whether the peer closed the connection (EOF or an error on its socket). */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) <= 0) return false;
    if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Compare without an early exit, so timing does not reveal the key. */
static bool key_matches(const char *got, const char *want) {
    size_t gl = strlen(got), wl = strlen(want);
    unsigned diff = (unsigned)(gl != wl);
    for (size_t i = 0; i < wl; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < gl ? got[i] : 0);
    return diff == 0;
}

static bool authorized(serve_http *h, struct MHD_Connection *c) {
    if (!h->p.api_key) return true;
    const char *x_key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"); /* Anthropic's clients */
    if (x_key && key_matches(x_key, h->p.api_key)) return true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncmp(auth, "Bearer ", 7) != 0) return false;
    return key_matches(auth + 7, h->p.api_key);
}

/* ------------------------------------------------------------ streams */

typedef struct stream_state {
    serve_http *h;
    /* The requests (one, or a list of prompts on /completion): all run at
     * once and are streamed one after the other (each event names its
     * prompt's index); cur is the one being streamed. */
    serve_request **reqs;
    serve_call *calls;
    int n, cur;
    const serve_format *format;
    void *format_state; /* the format's, across its events */
    int fd;
    /* The request being streamed as this stream has seen it (engine.h:
     * serve_request_view_sync): copied under the engine's lock, rendered
     * without it; its send cursors are this stream's. */
    serve_request *view;
    char *pending; /* SSE bytes not yet handed to MHD */
    size_t pend_len, pend_off;
    uint64_t seen; /* the request's progress already turned into events */
    bool opened;   /* the first events are out */
    bool finished; /* the final events are in pending */
    serve_log_entry log; /* written when the stream ends */
} stream_state;

/* The next events (lock not held). Returns false when nothing is ready yet. */
static bool stream_produce(stream_state *st) {
    serve_request *r = st->reqs[st->cur];
    if (st->opened && !serve_engine_wait(st->h->e, r, st->seen, WAIT_SLICE_MS)) return false;
    st->opened = true;
    serve_request_lock(r);
    int synced = serve_request_view_sync(&st->view, r);
    serve_request_unlock(r);
    if (synced != 0) { /* the stream cannot go on: it ends with an error event */
        st->pending = strdup("data: {\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n");
        st->finished = true;
        return true;
    }
    /* A stream cut by a shutdown says how far it got even unasked. */
    serve_call call = st->calls[st->cur];
    if (st->view->cut) call.include_usage = true;
    st->pending =
        st->format->stream_next(st->h->api, &call, st->view, &st->seen, &st->finished, &st->format_state);
    return st->pending != NULL || st->finished;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    for (;;) {
        if (st->pending && st->pend_off < st->pend_len) {
            size_t n = st->pend_len - st->pend_off < max ? st->pend_len - st->pend_off : max;
            memcpy(buf, st->pending + st->pend_off, n);
            st->pend_off += n;
            return (ssize_t)n;
        }
        free(st->pending);
        st->pending = NULL;
        st->pend_len = st->pend_off = 0;
        if (st->finished) {
            if (st->cur + 1 >= st->n) return MHD_CONTENT_READER_END_OF_STREAM;
            st->cur++; /* the next prompt's events, from its start */
            serve_request_view_free(st->view);
            st->view = NULL;
            st->seen = 0;
            st->opened = st->finished = false;
        }
        if (!stream_produce(st)) {
            if (client_gone(st->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        st->pend_len = st->pending ? strlen(st->pending) : 0;
    }
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    st->log.n_in = st->log.n_out = 0;
    for (int k = 0; k < st->n; k++) {
        serve_request_lock(st->reqs[k]);
        st->log.n_in += st->reqs[k]->n_prompt;
        st->log.n_out += serve_request_n_gen(st->reqs[k]);
        serve_request_unlock(st->reqs[k]);
    }
    serve_log_write(st->h->p.log_format, &st->log);
    for (int k = 0; k < st->n; k++) serve_engine_release(st->h->e, st->reqs[k]); /* cancels what still runs */
    if (st->format_state && st->format->free_state) st->format->free_state(st->format_state);
    serve_request_view_free(st->view);
    free(st->pending);
    free(st->reqs);
    free(st->calls);
    free(st);
}

/* ------------------------------------------------------------ generation */

static bool request_queued(serve_request *r) {
    serve_request_lock(r);
    bool q = r->state == SERVE_QUEUED;
    serve_request_unlock(r);
    return q;
}

enum { MAX_PROMPTS = 64 }; /* prompts one /v1/completions or /completion request may list */

/* The answer to a request the engine did not take (-1 full, -2 stopping). */
static enum MHD_Result send_not_submitted(serve_http *h, struct MHD_Connection *c, int sub) {
    if (sub == -2)
        return send_error(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is shutting down", "server_error",
                          "shutting_down");
    char msg[160];
    snprintf(msg, sizeof msg, "all %d slots are busy and the queue is full; retry later", serve_engine_n_slots(h->e));
    return send_error(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, msg, "server_error", "server_busy");
}

static void release_all(serve_http *h, serve_request **reqs, int n) {
    for (int k = 0; k < n; k++) serve_engine_release(h->e, reqs[k]);
}

/* A stream's response (st takes reqs[0..n), which run at once and are
 * streamed in turn). The status goes out with the first event: wait for a
 * slot first, so that a request that never starts (shutdown) still gets
 * its 503, and one whose grammar failed before anything was streamed its
 * 400. */
static enum MHD_Result start_stream(serve_http *h, struct MHD_Connection *c, const serve_format *format,
                                    const serve_call *calls, serve_request **reqs, int n, int fd) {
    serve_request *r = reqs[0];
    while (request_queued(r)) {
        serve_engine_wait(h->e, r, SIZE_MAX, WAIT_SLICE_MS);
        if (client_gone(fd)) {
            release_all(h, reqs, n);
            return MHD_NO;
        }
    }
    serve_request_lock(r);
    bool failed_early = r->state == SERVE_DONE && r->error_status;
    char *body = failed_early ? serve_request_error_json(r) : NULL;
    int status = r->error_status;
    serve_request_unlock(r);
    if (failed_early) {
        release_all(h, reqs, n);
        return send_json(h, c, status, body);
    }
    stream_state *st = calloc(1, sizeof *st);
    serve_request **all = malloc((size_t)n * sizeof *all);
    serve_call *all_calls = malloc((size_t)n * sizeof *all_calls);
    struct MHD_Response *resp = st && all && all_calls ? MHD_create_response_from_callback(
                                                             MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free)
                                                       : NULL;
    if (!resp) {
        free(st);
        free(all);
        free(all_calls);
        release_all(h, reqs, n);
        return send_error(h, c, 500, "out of memory", "server_error", NULL);
    }
    memcpy(all, reqs, (size_t)n * sizeof *all);
    memcpy(all_calls, calls, (size_t)n * sizeof *all_calls);
    *st = (stream_state){.h = h, .reqs = all, .calls = all_calls, .n = n,
                         .format = format, .fd = fd};
    if (tl_conn) {
        st->log = tl_conn->log;
        st->log.status = MHD_HTTP_OK;
        tl_conn->log.handed_off = true;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    add_cors(h, resp);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp); /* stream_free runs when MHD is done with it */
    serve_engine_count_status(h->e, MHD_HTTP_OK);
    return rc;
}

/* Wait for every request, then answer with all of them (one response in
 * format; NULL: Vertex AI's predictions). */
static enum MHD_Result finish_all(serve_http *h, struct MHD_Connection *c, const serve_format *format,
                                  serve_call *calls, serve_request **reqs, int n, int fd) {
    for (int k = 0; k < n; k++)
        while (!serve_engine_wait(h->e, reqs[k], SIZE_MAX, WAIT_SLICE_MS))
            if (client_gone(fd)) {
                for (int j = 0; j < n; j++) serve_engine_release(h->e, reqs[j]);
                return MHD_NO; /* closes the connection */
            }
    /* Done, each of them; their locks for the copies (the engine never
     * holds two requests' locks, so holding several cannot deadlock). */
    for (int k = 0; k < n; k++) serve_request_lock(reqs[k]);
    int failed = -1, status = MHD_HTTP_OK;
    int32_t n_in = 0, n_out = 0;
    for (int k = 0; k < n; k++) {
        if (reqs[k]->error[0] && failed < 0) failed = k;
        n_in += reqs[k]->n_prompt;
        n_out += serve_request_n_gen(reqs[k]);
    }
    char *body = NULL;
    serve_request *views[MAX_PROMPTS] = {0};
    bool viewed = failed < 0;
    for (int k = 0; viewed && k < n; k++) viewed = serve_request_view_sync(&views[k], reqs[k]) == 0;
    if (failed >= 0) {
        body = serve_request_error_json(reqs[failed]);
        status = serve_request_error_status(reqs[failed]);
    } else if (!viewed) { /* no memory for copies: rendered under the locks */
        body = format ? format->response(h->api, calls, reqs, n) : serve_gcp_response(h->api, calls, reqs, n);
    }
    if (tl_conn) {
        tl_conn->log.n_in = n_in;
        tl_conn->log.n_out = n_out;
    }
    for (int k = 0; k < n; k++) serve_request_unlock(reqs[k]);
    if (failed < 0 && viewed) /* the JSON is made without the locks */
        body = format ? format->response(h->api, calls, views, n) : serve_gcp_response(h->api, calls, views, n);
    for (int k = 0; k < n; k++) serve_request_view_free(views[k]);
    for (int k = 0; k < n; k++) serve_engine_release(h->e, reqs[k]);
    return send_json(h, c, status, body);
}

/* Parse the body's prompts (one, or each of a list) into reqs; choice i of
 * prompt k gets index k * n + i, as OpenAI numbers them. */
static int parse_all(serve_http *h, const serve_format *format, const conn_state *cs, serve_call *calls,
                     serve_request **reqs, int n, serve_error *err) {
    const char *body = cs->body ? cs->body : "";
    for (int k = 0; k < n; k++) {
        if (format->parse(h->api, body, cs->len, k, &calls[k], &reqs[k], err) != 0) {
            for (int j = 0; j < k; j++) serve_request_free(reqs[j]);
            return -1;
        }
        for (int32_t i = 0; i < reqs[k]->n_choices; i++) reqs[k]->choices[i].index = k * reqs[k]->n_choices + i;
    }
    if (n > 1 && calls[0].stream && calls[0].kind != SERVE_NATIVE) { /* OpenAI's would need one [DONE] for all */
        for (int j = 0; j < n; j++) serve_request_free(reqs[j]);
        return serve_fail(err, 400, "stream", "unsupported_parameter",
                          "'stream' with a list of %d prompts is not implemented on /v1/completions; send them one "
                         "by one (/completion streams a list)", n);
    }
    if (tl_conn) snprintf(tl_conn->log.ignored, sizeof tl_conn->log.ignored, "%s", calls[0].ignored);
    return 0;
}

/* Hand reqs[0..n) to the engine: 0, or what serve_engine_submit said of the
 * one it refused (then none is left to the caller: the refused and later
 * ones are freed, the earlier ones released). */
static int submit_all(serve_http *h, serve_request **reqs, int n) {
    for (int k = 0; k < n; k++) {
        int sub = serve_engine_submit(h->e, reqs[k]);
        if (sub != 0) {
            for (int j = k; j < n; j++) serve_request_free(reqs[j]);
            for (int j = 0; j < k; j++) serve_engine_release(h->e, reqs[j]);
            return sub;
        }
    }
    return 0;
}

static enum MHD_Result handle_generate(serve_http *h, struct MHD_Connection *c, const serve_format *format,
                                       const conn_state *cs) {
    int n = format->count ? format->count(cs->body ? cs->body : "", cs->len) : 1;
    if (n > MAX_PROMPTS) {
        char msg[128];
        snprintf(msg, sizeof msg, "'prompt' lists %d prompts, at most %d", n, MAX_PROMPTS);
        return send_json(h, c, 400, serve_api_error_json(msg, "invalid_request_error", "prompt", NULL));
    }
    serve_call calls[MAX_PROMPTS];
    serve_request *reqs[MAX_PROMPTS];
    serve_error err = {0, NULL};
    if (parse_all(h, format, cs, calls, reqs, n, &err) != 0) return send_json(h, c, err.status, err.body);
    int sub = submit_all(h, reqs, n);
    if (sub != 0) return send_not_submitted(h, c, sub);
    int fd = connection_fd(c);
    if (calls[0].stream) return start_stream(h, c, format, calls, reqs, n, fd);
    return finish_all(h, c, format, calls, reqs, n, fd);
}

/* POST AIP_PREDICT_ROUTE (Vertex AI, gcp.h): every instance submitted, then
 * all their responses as predictions. */
static enum MHD_Result handle_predict(serve_http *h, struct MHD_Connection *c, conn_state *cs) {
    serve_call calls[MAX_PROMPTS];
    serve_request *reqs[MAX_PROMPTS];
    serve_error err = {0, NULL};
    int n = 0;
    if (serve_gcp_parse(h->api, cs->body ? cs->body : "", cs->len, calls, reqs, MAX_PROMPTS, &n, &err) != 0)
        return send_json(h, c, err.status, err.body);
    if (tl_conn) snprintf(tl_conn->log.ignored, sizeof tl_conn->log.ignored, "%s", calls[0].ignored);
    int sub = submit_all(h, reqs, n);
    if (sub != 0) return send_not_submitted(h, c, sub);
    return finish_all(h, c, NULL, calls, reqs, n, connection_fd(c));
}

/* ------------------------------------------------------------ routing */

static char *render_metrics(serve_http *h) {
    if (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE)) return strdup("# loading\n");
    serve_metrics m;
    double up;
    serve_engine_metrics(h->e, &m, &up);
    serve_embed_metrics_add(h->api->embed, &m);
    serve_gate_stats gs;
    serve_gate_stats_get(h->gate, &gs);
    m.conn_open = gs.open;
    m.conn_refused = gs.refused;
    m.conn_timeouts = gs.timeouts;
    m.bad_request_lines = gs.bad_request_lines;
    size_t len;
    return serve_metrics_render(&m, up, serve_engine_n_slots(h->e), h->api->model_id, &len);
}

/* GET /metrics: the Prometheus text, with llama-server's
 * Process-Start-Time-Unix header (the engine's start: scrapers see restarts). */
static enum MHD_Result send_metrics(serve_http *h, struct MHD_Connection *c) {
    char *body = render_metrics(h);
    if (!body) return send_body(h, c, 500, NULL, "application/json");
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    char start[32];
    snprintf(start, sizeof start, "%lld", h->e ? serve_engine_start_unix(h->e) : (long long)time(NULL));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    MHD_add_response_header(resp, "Process-Start-Time-Unix", start);
    add_cors(h, resp);
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    if (h->e) serve_engine_count_status(h->e, MHD_HTTP_OK);
    if (tl_conn) tl_conn->log.status = MHD_HTTP_OK;
    return rc;
}

static gate_conn *conn_gate(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* A CORS preflight (OPTIONS, no API key needed): 200 with what the
 * allowed origin may send. Access-Control-Allow-Headers names the
 * requested headers (a browser does not let "*" cover Authorization). */
static enum MHD_Result preflight(serve_http *h, struct MHD_Connection *c) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    if (origin_allowed(h->p.cors_origin, tl_conn ? tl_conn->origin : "")) {
        add_cors(h, resp);
        const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", want && want[0] ? want : "*");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    if (tl_conn) tl_conn->log.status = MHD_HTTP_OK;
    return rc;
}

/* GET /v1/models/{id}: the model when id is its name or an alias. */
static enum MHD_Result model_by_id(serve_http *h, struct MHD_Connection *c, const char *id) {
    char *one = serve_api_model(h->api, id);
    if (one) return send_json(h, c, 200, one);
    char msg[256];
    snprintf(msg, sizeof msg, "the model '%.100s' does not exist; this server has '%.60s'", id, h->api->model_id);
    return send_json(h, c, 404, serve_api_error_json(msg, "invalid_request_error", "model", "model_not_found"));
}

/* Run the handler of route r (its method, key and readiness checked). */
static enum MHD_Result dispatch(serve_http *h, struct MHD_Connection *c, const serve_route *r, const char *url,
                               conn_state *cs) {
    const char *body = cs->body ? cs->body : "";
    const char *rest = url + (r->prefix ? strlen(r->path) : strlen(url));
    int status = 500;
    char *out;
    switch (r->handler) {
    case SERVE_H_HEALTH:
        if (!__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE))
            return send_error(h, c, 503, "Loading model", "unavailable_error", NULL);
        return send_json(h, c, 200, strdup("{\"status\":\"ok\"}"));
    case SERVE_H_PAGE:
        return send_body(h, c, 200, strdup(serve_page_html), "text/html; charset=utf-8");
    case SERVE_H_GENERATE:
        return handle_generate(h, c, r->format, cs);
    case SERVE_H_ANSWER: {
        serve_error err = {0, NULL};
        out = r->format->answer(h->api, body, cs->len, &err);
        return out ? send_json(h, c, 200, out) : send_json(h, c, err.status, err.body);
    }
    case SERVE_H_PREDICT:
        return handle_predict(h, c, cs);
    case SERVE_H_MODELS:
        return send_json(h, c, 200, serve_api_models(h->api));
    case SERVE_H_MODEL:
        return model_by_id(h, c, rest);
    case SERVE_H_PROPS:
        return send_json(h, c, 200, serve_api_props(h->api, h->e));
    case SERVE_H_SLOTS:
        return send_json(h, c, 200, serve_api_slots(h->api, h->e));
    case SERVE_H_SLOT_ACTION: {
        const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
        out = serve_slots_post(h->e, h->p.slot_save_path, rest, action, cs->body, cs->len, &status);
        return send_json(h, c, status, out);
    }
    case SERVE_H_METRICS:
        return send_metrics(h, c);
    case SERVE_H_LORA_LIST:
        return send_json(h, c, 200, serve_lora_list(h->e));
    case SERVE_H_LORA_SET:
        out = serve_lora_post(h->e, cs->body, cs->len, &status);
        return send_json(h, c, status, out);
    }
    return send_error(h, c, 500, "no handler for this endpoint", "server_error", NULL);
}

/* A request in full: the route table (route.h) says what answers it and
 * what it needs; the checks run in this order for every endpoint. */
static enum MHD_Result route(serve_http *h, struct MHD_Connection *c, const char *url, const char *method,
                             conn_state *cs) {
    /* api's model fields are filled before ready is set (release) */
    const bool ready = __atomic_load_n(&h->ready, __ATOMIC_ACQUIRE) != 0;
    const serve_route_options o = {
        .no_webui = h->p.no_webui, .no_slots = h->p.no_slots, .no_metrics = h->p.no_metrics,
        .embeddings = ready && h->api->embed, .gcp_predict_route = h->p.gcp_predict_route,
        .gcp_health_route = h->p.gcp_health_route};
    bool wrong_method = false;
    const serve_route *r = serve_route_find(&o, method, url, &wrong_method);
    cs->format = r ? r->format : NULL; /* its errors in its shape */
    if (!strcmp(method, "OPTIONS")) return preflight(h, c);
    char msg[160];
    const bool open = r && !r->needs_ready && !r->auth;
    if (open && wrong_method) {
        serve_route_usage(r, url, msg, sizeof msg);
        return send_error(h, c, 405, msg, "invalid_request_error", NULL);
    }
    if (!open) {
        if (!ready) return send_error(h, c, 503, "Loading model", "unavailable_error", NULL);
        if (!authorized(h, c))
            return send_error(h, c, 401, "missing or wrong API key (Authorization: Bearer KEY, or x-api-key: KEY)",
                              "authentication_error", "invalid_api_key");
        if (cs->too_large) {
            snprintf(msg, sizeof msg, "the request body of %llu bytes is over the limit of %zu bytes",
                     (unsigned long long)cs->seen, h->p.max_body);
            return send_error(h, c, 413, msg, "invalid_request_error", "request_too_large");
        }
    }
    if (!r) {
        snprintf(msg, sizeof msg, "no endpoint %.100s", url);
        return send_error(h, c, 404, msg, "invalid_request_error", "not_found");
    }
    const char *off = serve_route_off(&o, r);
    if (off) return send_error(h, c, 501, off, "not_supported_error", NULL);
    if (wrong_method) {
        serve_route_usage(r, url, msg, sizeof msg);
        return send_error(h, c, 405, msg, "invalid_request_error", NULL);
    }
    return dispatch(h, c, r, url, cs);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size,
                                 void **con_cls) {
    (void)version;
    serve_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        *con_cls = cs;
        serve_log_begin(&cs->log, method, url);
        tl_conn = cs;
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        snprintf(cs->origin, sizeof cs->origin, "%s", origin ? origin : "");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        bool has_body = (cl && strtoull(cl, NULL, 10) > 0) ||
                        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
        serve_gate_phase(h->gate, conn_gate(c), has_body ? GATE_BODY : GATE_BUSY);
        if (cl) {
            unsigned long long n = strtoull(cl, NULL, 10);
            if (n > h->p.max_body) cs->too_large = true;
            /* Answer before the body when it is huge, or when the client
             * waits for "100 Continue" before sending it (curl does). */
            const char *ex = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
            if (n > SERVE_DISCARD_LIMIT || (cs->too_large && ex && !strcasecmp(ex, "100-continue"))) {
                cs->seen = n;
                return route(h, c, url, method, cs);
            }
        }
        return MHD_YES;
    }
    tl_conn = cs;
    if (*upload_size > 0) {
        size_t n = *upload_size;
        cs->seen += n;
        *upload_size = 0;
        if (cs->seen > SERVE_DISCARD_LIMIT) return MHD_NO;
        if (cs->len + n > h->p.max_body) cs->too_large = true;
        if (cs->too_large) {
            free(cs->body);
            cs->body = NULL;
            cs->len = cs->cap = 0;
            return MHD_YES;
        }
        if (cs->len + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : 4096;
            while (cap < cs->len + n + 1) cap *= 2;
            char *b = realloc(cs->body, cap);
            if (!b) return MHD_NO;
            cs->body = b;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->len, upload, n);
        cs->len += n;
        cs->body[cs->len] = '\0';
        return MHD_YES;
    }
    serve_gate_phase(h->gate, conn_gate(c), GATE_BUSY);
    return route(h, c, url, method, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode t) {
    serve_http *h = cls;
    /* Kept alive: the next request's headers have a deadline again. */
    if (t == MHD_REQUEST_TERMINATED_COMPLETED_OK) serve_gate_phase(h->gate, conn_gate(c), GATE_HEADERS);
    conn_state *cs = *con_cls;
    if (!cs) return;
    if (tl_conn == cs) tl_conn = NULL;
    if (!cs->log.handed_off && cs->log.status) serve_log_write(h->p.log_format, &cs->log);
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ------------------------------------------------------------ daemon */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    serve_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        *socket_context = serve_gate_find(h->gate, connection_fd(c));
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        serve_gate_closed(h->gate, *socket_context);
}

static int gate_admit(void *cls, int fd, const struct sockaddr *sa, socklen_t len) {
    serve_http *h = cls;
    return MHD_add_connection(h->d, fd, sa, len) == MHD_YES ? 0 : -1;
}

/* /health and /metrics for connections over the limits (the gate's thread). */
static char *gate_quick(void *cls, const char *path, int *status, const char **ctype) {
    serve_http *h = cls;
    *status = 200;
    if (!strcmp(path, "/health")) {
        *ctype = "application/json";
        if (__atomic_load_n(&h->ready, __ATOMIC_ACQUIRE)) return strdup("{\"status\":\"ok\"}");
        *status = 503;
        return serve_api_error_json("Loading model", "unavailable_error", NULL, NULL);
    }
    *ctype = "text/plain; version=0.0.4";
    return render_metrics(h);
}

serve_http *serve_http_start(const serve_http_params *p, serve_engine *e, const serve_api *api) {
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->p = *p;
    h->e = e;
    h->api = api;
    serve_gate_params gp = {.host = p->host,
                            .port = p->port,
                            .max_conns = p->max_connections,
                            .max_conns_per_ip = p->max_conns_per_ip,
                            .header_timeout_ms = p->header_timeout_ms,
                            .body_timeout_ms = p->body_timeout_ms,
                            .admit = gate_admit,
                            .quick = gate_quick,
                            .cls = h};
    h->gate = serve_gate_new(&gp);
    if (!h->gate) {
        free(h);
        return NULL;
    }
    /* The gate accepts; MHD gets sockets through MHD_add_connection (ITC
     * wakes its thread for them). Its own limit is above the gate's, so
     * that it never refuses one silently. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_NO_LISTEN_SOCKET;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_access, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)p->max_connections + 16, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                            MHD_OPTION_END);
    if (!h->d || serve_gate_start(h->gate) != 0) {
        fprintf(stderr, "tessera serve: cannot start the HTTP server (out of memory or threads)\n");
        if (h->d) MHD_stop_daemon(h->d);
        serve_gate_free(h->gate);
        free(h);
        return NULL;
    }
    return h;
}

int serve_http_port(const serve_http *h) { return serve_gate_port(h->gate); }

void serve_http_set_ready(serve_http *h, serve_engine *e) {
    h->e = e;
    __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
}

void serve_http_stop_accepting(serve_http *h) {
    if (h) serve_gate_stop_accepting(h->gate);
}

void serve_http_stop(serve_http *h) {
    if (!h) return;
    /* Stop accepting, then give open responses (streams the engine has just
     * ended) a moment to send their last bytes before connections close. */
    serve_gate_stop_accepting(h->gate);
    for (int waited_ms = 0; waited_ms < 3000; waited_ms += 10) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!di || di->num_connections == 0) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    serve_gate_free(h->gate);
    free(h);
}
