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

#include "serve.h"

/* Bodies beyond this are not even read: the connection is answered and closed. */
#define SERVE_DISCARD_LIMIT ((uint64_t)64 << 20)
enum { WAIT_SLICE_MS = 20 };

struct serve_http {
    serve_http_params p;
    serve_engine *e;
    const serve_api *api;
    struct MHD_Daemon *d;
    int port;
};

typedef struct conn_state {
    char *body;
    size_t len, cap;
    uint64_t seen; /* body bytes received, kept or not */
    bool too_large;
} conn_state;

/* ------------------------------------------------------------ helpers */

static enum MHD_Result send_body(serve_http *h, struct MHD_Connection *c, int status, char *body,
                                 const char *ctype) {
    if (!body) {
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        body = serve_api_error_json("out of memory", "server_error", NULL, NULL);
        if (!body) return MHD_NO;
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    serve_engine_count_status(h->e, status);
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
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncmp(auth, "Bearer ", 7) != 0) return false;
    return key_matches(auth + 7, h->p.api_key);
}

/* ------------------------------------------------------------ streams */

typedef struct stream_state {
    serve_http *h;
    serve_request *r;
    serve_call call;
    int fd;
    char *pending; /* SSE bytes not yet handed to MHD */
    size_t pend_len, pend_off;
    uint64_t seen; /* the request's progress already turned into events */
    bool opened;   /* the first events are out */
    bool finished; /* the final events are in pending */
} stream_state;

/* The next events (lock not held). Returns false when nothing is ready yet. */
static bool stream_produce(stream_state *st) {
    if (st->opened && !serve_engine_wait(st->h->e, st->r, st->seen, WAIT_SLICE_MS)) return false;
    st->opened = true;
    serve_engine_lock(st->h->e);
    st->pending = serve_api_stream_next(st->h->api, &st->call, st->r, &st->seen, &st->finished);
    serve_engine_unlock(st->h->e);
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
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!stream_produce(st)) {
            if (client_gone(st->fd)) return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        st->pend_len = st->pending ? strlen(st->pending) : 0;
    }
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    serve_engine_release(st->h->e, st->r); /* cancels the slot if still generating */
    free(st->pending);
    free(st);
}

/* ------------------------------------------------------------ generation */

static enum MHD_Result handle_generate(serve_http *h, struct MHD_Connection *c, serve_kind kind,
                                       const conn_state *cs) {
    serve_call call;
    serve_request *r = NULL;
    serve_error err = {0, NULL};
    if (serve_api_parse(h->api, kind, cs->body ? cs->body : "", cs->len, &call, &r, &err) != 0)
        return send_json(h, c, err.status, err.body);
    if (serve_engine_submit(h->e, r) != 0) {
        serve_request_free(r);
        char msg[160];
        snprintf(msg, sizeof msg, "all %d slots are busy and the queue is full; retry later",
                 serve_engine_n_slots(h->e));
        return send_error(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, msg, "server_error", "server_busy");
    }
    int fd = connection_fd(c);
    if (call.stream) {
        stream_state *st = calloc(1, sizeof *st);
        struct MHD_Response *resp =
            st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free)
               : NULL;
        if (!resp) {
            if (st) free(st);
            serve_engine_release(h->e, r);
            return send_error(h, c, 500, "out of memory", "server_error", NULL);
        }
        *st = (stream_state){.h = h, .r = r, .call = call, .fd = fd};
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp); /* stream_free runs when MHD is done with it */
        serve_engine_count_status(h->e, MHD_HTTP_OK);
        return rc;
    }
    while (!serve_engine_wait(h->e, r, SIZE_MAX, WAIT_SLICE_MS))
        if (client_gone(fd)) {
            serve_engine_release(h->e, r);
            return MHD_NO; /* closes the connection */
        }
    serve_engine_lock(h->e);
    char *body = r->error[0] ? serve_api_error_json(r->error, "server_error", NULL, NULL)
                             : serve_api_response(h->api, &call, r);
    int status = r->error[0] ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_OK;
    serve_engine_unlock(h->e);
    serve_engine_release(h->e, r);
    return send_json(h, c, status, body);
}

/* ------------------------------------------------------------ routing */

static enum MHD_Result route(serve_http *h, struct MHD_Connection *c, const char *url, const char *method,
                             conn_state *cs) {
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(h, c, 405, "use GET /health", "invalid_request_error", NULL);
        return send_json(h, c, 200, strdup("{\"status\":\"ok\"}"));
    }
    if (!authorized(h, c))
        return send_error(h, c, 401, "missing or wrong API key (Authorization: Bearer KEY)",
                          "invalid_request_error", "invalid_api_key");
    if (cs->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body of %llu bytes is over the limit of %zu bytes",
                 (unsigned long long)cs->seen, h->p.max_body);
        return send_error(h, c, 413, msg, "invalid_request_error", "request_too_large");
    }
    serve_kind kind;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions"))
        kind = SERVE_CHAT;
    else if (!strcmp(url, "/v1/completions") || !strcmp(url, "/completions"))
        kind = SERVE_COMPLETION;
    else if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!get) return send_error(h, c, 405, "use GET /v1/models", "invalid_request_error", NULL);
        return send_json(h, c, 200, serve_api_models(h->api));
    } else if (!strcmp(url, "/metrics")) {
        if (!get) return send_error(h, c, 405, "use GET /metrics", "invalid_request_error", NULL);
        serve_metrics m;
        double up;
        serve_engine_metrics(h->e, &m, &up);
        size_t len;
        return send_body(h, c, 200, serve_metrics_render(&m, up, serve_engine_n_slots(h->e), &len),
                         "text/plain; version=0.0.4");
    } else {
        char msg[160];
        snprintf(msg, sizeof msg, "no endpoint %.100s", url);
        return send_error(h, c, 404, msg, "invalid_request_error", "not_found");
    }
    if (!post) return send_error(h, c, 405, "use POST", "invalid_request_error", NULL);
    return handle_generate(h, c, kind, cs);
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
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
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
    return route(h, c, url, method, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode t) {
    (void)cls;
    (void)c;
    (void)t;
    conn_state *cs = *con_cls;
    if (!cs) return;
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ------------------------------------------------------------ daemon */

serve_http *serve_http_start(const serve_http_params *p, serve_engine *e, const serve_api *api) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "tessera serve: --host '%s': %s\n", p->host, gai_strerror(gai));
        return NULL;
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return NULL;
    }
    h->p = *p;
    h->e = e;
    h->api = api;
    /* ITC: lets serve_http_stop quiesce (stop accepting) while streams drain. */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)p->port, NULL, NULL, on_access, h, MHD_OPTION_SOCK_ADDR,
                            ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        fprintf(stderr,
                "tessera serve: cannot listen on %s port %d (in use, or not an address of this machine)\n",
                p->host, p->port);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : p->port;
    return h;
}

int serve_http_port(const serve_http *h) { return h->port; }

void serve_http_stop(serve_http *h) {
    if (!h) return;
    /* Stop accepting, then give open responses (streams the engine has just
     * ended) a moment to send their last bytes before connections close. */
    MHD_quiesce_daemon(h->d);
    for (int waited_ms = 0; waited_ms < 3000; waited_ms += 10) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!di || di->num_connections == 0) break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(h->d);
    free(h);
}
