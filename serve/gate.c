/*
 * gate — the door of `tessera serve`: it owns the listening socket, and no
 * connection reaches libmicrohttpd before passing it.
 *
 * One thread accepts, holds each new socket until its request line has
 * arrived (peeked, not read, so MHD later parses it whole) and then:
 *   - a malformed request line: 400 (505 for an HTTP version other than 1.x)
 *     at once, and the connection closed;
 *   - within the limits (all connections, connections per client address):
 *     handed to MHD;
 *   - over a limit: GET /health and GET /metrics are answered here, so that
 *     clients holding every connection cannot hide the server from its
 *     health checks; anything else gets 503 (all connections taken) or 429
 *     (this address has too many), with Retry-After.
 * The same thread enforces deadlines on connections MHD holds, which MHD
 * itself has no notion of (its timeout is per read, so a client sending a
 * byte a second stays forever): the request line and headers must arrive
 * within header_timeout of the connection's start (or, on a kept-alive
 * connection, of the previous answer: then it is closed without a word),
 * and a body within body_timeout of its headers. Past a deadline the client
 * gets 408 and its socket is shut down, which ends MHD's thread for it.
 *
 * Sockets are only written or shut down here while the gate's mutex is
 * held, and MHD tells the gate (gate_conn_closed) before it closes one, so
 * the gate never touches a descriptor number that was reused.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "format.h" /* serve_api_error_json: refusals in OpenAI's shape */
#include "gate.h"

enum {
    PEEK_MAX = 2048,     /* a request line longer than this is refused (414) */
    PENDING_MAX = 128,   /* sockets waiting for their request line */
    CLOSING_MAX = 64,    /* answered sockets being drained before close */
    CLOSING_MS = 1000,   /* how long an answered socket is drained */
    REPEEK_MS = 50,      /* a partial request line is looked at again after this */
    TICK_MS = 100,       /* deadline checks */
    ACCEPT_BURST = 64
};

typedef struct gate_sock {
    int fd;              /* -1: unused */
    unsigned char ip[16];
    double t0;           /* accepted / answered */
    double next_peek;    /* pending: when to look again at a partial line */
    struct sockaddr_storage sa; /* pending: the client's address */
    socklen_t salen;
} gate_sock;

struct gate_conn {
    int fd;              /* -1: unused */
    unsigned char ip[16];
    gate_phase phase;
    bool kept;           /* an earlier request on it was answered */
    double t_phase;
};

struct serve_gate {
    serve_gate_params p;
    int lfd, port;
    int wake[2];
    pthread_t thread;
    bool started, stop, closed_listener, draining;
    pthread_mutex_t mu;
    gate_conn *conns; /* max_conns entries */
    gate_sock pending[PENDING_MAX];
    gate_sock closing[CLOSING_MAX];
    serve_gate_stats stats;
};

/* The client address as 16 bytes (IPv4 mapped into IPv6). */
static void ip_key(const struct sockaddr_storage *sa, unsigned char out[16]) {
    memset(out, 0, 16);
    if (sa->ss_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->ss_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

/* ------------------------------------------------------------ answers */

static void send_all(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k <= 0) return; /* a full buffer or a gone client: the answer is best effort */
        s += k;
        n -= (size_t)k;
    }
}

static const char *reason_of(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* A whole response with Connection: close; body NULL: an error JSON. */
static void send_response(int fd, int status, const char *ctype, const char *body, const char *message,
                          const char *code) {
    char *own = NULL;
    if (!body) {
        own = serve_api_error_json(message, status >= 500 ? "server_error" : "invalid_request_error", NULL,
                                   code);
        body = own ? own : "{}";
        ctype = "application/json";
    }
    char head[320];
    size_t n = strlen(body);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                      status, reason_of(status), ctype, n,
                      status == 429 || status == 503 ? "Retry-After: 1\r\n" : "");
    send_all(fd, head, (size_t)hl);
    send_all(fd, body, n);
    free(own);
}

/* After an answer: stop writing, read what the client still sends for a
 * moment (closing with unread data would reset the connection and could
 * destroy the answer in flight), then close. */
static void start_closing(serve_gate *g, int fd) {
    shutdown(fd, SHUT_WR);
    double t = serve_now_ms();
    int oldest = 0;
    for (int i = 0; i < CLOSING_MAX; i++) {
        if (g->closing[i].fd < 0) {
            g->closing[i] = (gate_sock){.fd = fd, .t0 = t};
            return;
        }
        if (g->closing[i].t0 < g->closing[oldest].t0) oldest = i;
    }
    close(g->closing[oldest].fd);
    g->closing[oldest] = (gate_sock){.fd = fd, .t0 = t};
}

/* ------------------------------------------------------------ request lines */

static bool is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Check "METHOD SP TARGET SP HTTP/1.x" (line without its CR LF). Returns 0
 * when well formed, else the status to answer. */
int serve_gate_check_request_line(const char *line, size_t n) {
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)line[i])) i++;
    if (i == 0 || i >= n || line[i] != ' ') return 400;
    size_t t0 = ++i;
    while (i < n && (unsigned char)line[i] > 0x20 && (unsigned char)line[i] < 0x7f) i++;
    if (i == t0 || i >= n || line[i] != ' ') return 400;
    i++;
    if (n - i != 8 || memcmp(line + i, "HTTP/", 5) != 0 || line[i + 5] < '0' || line[i + 5] > '9' ||
        line[i + 6] != '.' || line[i + 7] < '0' || line[i + 7] > '9')
        return 400;
    return line[i + 5] == '1' ? 0 : 505;
}

/* The path of "GET /path[?query] HTTP/1.x" into out, or "" for another method. */
static void get_path(const char *line, size_t n, char *out, size_t size) {
    out[0] = '\0';
    if (n < 4 || memcmp(line, "GET ", 4) != 0) return;
    size_t i = 4, k = 0;
    while (i < n && line[i] != ' ' && line[i] != '?' && k + 1 < size) out[k++] = line[i++];
    out[k] = '\0';
}

/* ------------------------------------------------------------ admission */

static int count_ip(const serve_gate *g, const unsigned char ip[16]) {
    int n = 0;
    for (int i = 0; i < g->p.max_conns; i++)
        if (g->conns[i].fd >= 0 && !memcmp(g->conns[i].ip, ip, 16)) n++;
    return n;
}

/* The request line of a pending socket is complete: answer it or hand it on
 * (lock held). */
static void admit(serve_gate *g, gate_sock *ps, const char *line, size_t n) {
    int fd = ps->fd;
    ps->fd = -1;
    int bad = serve_gate_check_request_line(line, n);
    if (bad) {
        g->stats.bad_request_lines++;
        send_response(fd, bad, NULL, NULL,
                      bad == 505 ? "only HTTP/1.x is spoken here" : "malformed HTTP request line",
                      "bad_request_line");
        start_closing(g, fd);
        return;
    }
    int slot = -1;
    for (int i = 0; i < g->p.max_conns; i++) {
        /* The kernel reuses a number only once it is closed: a record with
         * it is stale (MHD dropped the connection without telling us). */
        if (g->conns[i].fd == fd) {
            g->conns[i].fd = -1;
            g->stats.open--;
        }
        if (g->conns[i].fd < 0 && slot < 0) slot = i;
    }
    bool per_ip = g->p.max_conns_per_ip > 0 && count_ip(g, ps->ip) >= g->p.max_conns_per_ip;
    if (slot >= 0 && !per_ip && !g->draining) {
        gate_conn *c = &g->conns[slot];
        *c = (gate_conn){.fd = fd, .phase = GATE_HEADERS, .t_phase = ps->t0};
        memcpy(c->ip, ps->ip, 16);
        g->stats.open++;
        /* MHD calls back into the gate from its own threads: unlock. */
        pthread_mutex_unlock(&g->mu);
        int ok = g->p.admit(g->p.cls, fd, (const struct sockaddr *)&ps->sa, ps->salen);
        pthread_mutex_lock(&g->mu);
        if (ok != 0 && c->fd == fd) { /* MHD closed the socket and never saw it */
            c->fd = -1;
            g->stats.open--;
        }
        return;
    }
    char path[64];
    get_path(line, n, path, sizeof path);
    if ((!strcmp(path, "/health") || !strcmp(path, "/metrics")) && g->p.quick) {
        int status = 200;
        const char *ctype = "application/json";
        pthread_mutex_unlock(&g->mu); /* /metrics reads the gate's counters */
        char *body = g->p.quick(g->p.cls, path, &status, &ctype);
        pthread_mutex_lock(&g->mu);
        send_response(fd, body ? status : 500, ctype, body, "out of memory", NULL);
        free(body);
    } else {
        g->stats.refused++;
        if (g->draining)
            send_response(fd, 503, NULL, NULL, "the server is shutting down", "shutting_down");
        else if (per_ip)
            send_response(fd, 429, NULL, NULL, "too many connections from this address; retry later",
                          "too_many_connections");
        else
            send_response(fd, 503, NULL, NULL, "every connection is taken; retry later", "server_busy");
    }
    start_closing(g, fd);
}

/* Look at what a pending socket has sent (lock held). */
static void peek_pending(serve_gate *g, gate_sock *ps, double t) {
    char buf[PEEK_MAX];
    ssize_t k = recv(ps->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        close(ps->fd); /* gone before saying anything */
        ps->fd = -1;
        return;
    }
    if (k < 0) return;
    char *nl = memchr(buf, '\n', (size_t)k);
    if (nl) {
        size_t n = (size_t)(nl - buf);
        if (n > 0 && buf[n - 1] == '\r') n--;
        admit(g, ps, buf, n);
        return;
    }
    if ((size_t)k == sizeof buf) {
        int fd = ps->fd;
        ps->fd = -1;
        g->stats.bad_request_lines++;
        send_response(fd, 414, NULL, NULL, "the request line is too long", "bad_request_line");
        start_closing(g, fd);
        return;
    }
    /* A partial line: poll would report it readable at once again. */
    ps->next_peek = t + REPEEK_MS;
}

static void take_new(serve_gate *g, int fd, const struct sockaddr_storage *sa, socklen_t salen, double t) {
    unsigned char ip[16];
    ip_key(sa, ip);
    /* Full: the oldest waiting socket of this address goes, else the oldest of all. */
    int slot = -1, oldest = -1, oldest_same = -1;
    for (int i = 0; i < PENDING_MAX; i++) {
        gate_sock *ps = &g->pending[i];
        if (ps->fd < 0) {
            if (slot < 0) slot = i;
            continue;
        }
        if (oldest < 0 || ps->t0 < g->pending[oldest].t0) oldest = i;
        if (!memcmp(ps->ip, ip, 16) && (oldest_same < 0 || ps->t0 < g->pending[oldest_same].t0)) oldest_same = i;
    }
    if (slot < 0) {
        slot = oldest_same >= 0 ? oldest_same : oldest;
        g->stats.timeouts++;
        send_response(g->pending[slot].fd, 408, NULL, NULL, "no request line in time", "request_timeout");
        start_closing(g, g->pending[slot].fd);
    }
    g->pending[slot] = (gate_sock){.fd = fd, .t0 = t, .sa = *sa, .salen = salen};
    memcpy(g->pending[slot].ip, ip, 16);
}

/* ------------------------------------------------------------ deadlines */

static void check_deadlines(serve_gate *g, double t) {
    double hdr = g->p.header_timeout_ms, body = g->p.body_timeout_ms;
    for (int i = 0; i < PENDING_MAX; i++) {
        gate_sock *ps = &g->pending[i];
        if (ps->fd < 0 || t - ps->t0 < hdr) continue;
        g->stats.timeouts++;
        send_response(ps->fd, 408, NULL, NULL, "the request line did not arrive in time", "request_timeout");
        start_closing(g, ps->fd);
        ps->fd = -1;
    }
    for (int i = 0; i < g->p.max_conns; i++) {
        gate_conn *c = &g->conns[i];
        if (c->fd < 0) continue;
        bool idle = c->phase == GATE_HEADERS && c->kept;
        bool late = (c->phase == GATE_HEADERS && t - c->t_phase >= hdr) ||
                    (c->phase == GATE_BODY && t - c->t_phase >= body) || (idle && g->draining);
        if (!late) continue;
        if (!idle) {
            g->stats.timeouts++;
            send_response(c->fd, 408, NULL, NULL,
                          c->phase == GATE_BODY ? "the request body did not arrive in time"
                                                : "the request headers did not arrive in time",
                          "request_timeout");
        }
        shutdown(c->fd, SHUT_RDWR); /* MHD's thread sees the end and closes it */
        c->phase = GATE_CUT;
    }
    for (int i = 0; i < CLOSING_MAX; i++) {
        gate_sock *cs = &g->closing[i];
        if (cs->fd >= 0 && t - cs->t0 >= CLOSING_MS) {
            close(cs->fd);
            cs->fd = -1;
        }
    }
}

/* ------------------------------------------------------------ thread */

static void *gate_main(void *arg) {
    serve_gate *g = arg;
    struct pollfd pfd[2 + PENDING_MAX + CLOSING_MAX];
    gate_sock *who[2 + PENDING_MAX + CLOSING_MAX];
    pthread_mutex_lock(&g->mu);
    double last_tick = 0;
    while (!g->stop) {
        double t = serve_now_ms();
        int n = 0, wait_ms = TICK_MS;
        pfd[n] = (struct pollfd){.fd = g->wake[0], .events = POLLIN};
        who[n++] = NULL;
        if (g->lfd >= 0) {
            pfd[n] = (struct pollfd){.fd = g->lfd, .events = POLLIN};
            who[n++] = NULL;
        }
        for (int i = 0; i < PENDING_MAX; i++) {
            gate_sock *ps = &g->pending[i];
            if (ps->fd < 0) continue;
            if (ps->next_peek > t) {
                if (ps->next_peek - t < wait_ms) wait_ms = (int)(ps->next_peek - t) + 1;
                continue;
            }
            pfd[n] = (struct pollfd){.fd = ps->fd, .events = POLLIN};
            who[n++] = ps;
        }
        for (int i = 0; i < CLOSING_MAX; i++) {
            if (g->closing[i].fd < 0) continue;
            pfd[n] = (struct pollfd){.fd = g->closing[i].fd, .events = POLLIN};
            who[n++] = &g->closing[i];
        }
        pthread_mutex_unlock(&g->mu);
        int rc = poll(pfd, (nfds_t)n, wait_ms);
        pthread_mutex_lock(&g->mu);
        t = serve_now_ms();
        if (rc > 0) {
            for (int k = 0; k < n; k++) {
                if (!pfd[k].revents) continue;
                if (pfd[k].fd == g->wake[0] && !who[k]) {
                    char b[64];
                    while (read(g->wake[0], b, sizeof b) > 0) {}
                } else if (pfd[k].fd == g->lfd && !who[k]) {
                    for (int a = 0; a < ACCEPT_BURST; a++) {
                        struct sockaddr_storage sa;
                        socklen_t len = sizeof sa;
                        int fd = accept4(g->lfd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
                        if (fd < 0) break; /* EAGAIN, or out of descriptors: try again next round */
                        take_new(g, fd, &sa, len, t);
                    }
                } else if (who[k] >= g->closing && who[k] < g->closing + CLOSING_MAX) {
                    char b[4096];
                    ssize_t r = recv(pfd[k].fd, b, sizeof b, MSG_DONTWAIT);
                    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
                        close(who[k]->fd);
                        who[k]->fd = -1;
                    }
                } else if (who[k]->fd == pfd[k].fd) {
                    peek_pending(g, who[k], t);
                }
            }
        }
        if (g->closed_listener && g->lfd >= 0) {
            close(g->lfd);
            g->lfd = -1;
        }
        if (t - last_tick >= TICK_MS / 2) {
            check_deadlines(g, t);
            last_tick = t;
        }
    }
    for (int i = 0; i < PENDING_MAX; i++)
        if (g->pending[i].fd >= 0) close(g->pending[i].fd);
    for (int i = 0; i < CLOSING_MAX; i++)
        if (g->closing[i].fd >= 0) close(g->closing[i].fd);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static void wake(serve_gate *g) {
    char b = 1;
    if (write(g->wake[1], &b, 1) < 0) { /* full: it is awake anyway */
    }
}

/* ------------------------------------------------------------ API */

serve_gate *serve_gate_new(const serve_gate_params *p) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai != 0) {
        fprintf(stderr, "tessera serve: --host '%s': %s\n", p->host, gai_strerror(gai));
        return NULL;
    }
    serve_gate *g = calloc(1, sizeof *g);
    if (!g) goto fail;
    g->p = *p;
    g->lfd = g->wake[0] = g->wake[1] = -1;
    g->conns = calloc((size_t)p->max_conns, sizeof *g->conns);
    if (!g->conns) goto fail;
    for (int i = 0; i < p->max_conns; i++) g->conns[i].fd = -1;
    for (int i = 0; i < PENDING_MAX; i++) g->pending[i].fd = -1;
    for (int i = 0; i < CLOSING_MAX; i++) g->closing[i].fd = -1;
    g->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (g->lfd < 0 || setsockopt(g->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(g->lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(g->lfd, 256) != 0) {
        fprintf(stderr, "tessera serve: cannot listen on %s port %d: %s\n", p->host, p->port,
                strerror(errno));
        goto fail;
    }
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    getsockname(g->lfd, (struct sockaddr *)&sa, &len);
    g->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    if (pipe2(g->wake, O_CLOEXEC | O_NONBLOCK) != 0 || pthread_mutex_init(&g->mu, NULL) != 0) goto fail;
    freeaddrinfo(ai);
    return g;
fail:
    freeaddrinfo(ai);
    if (g) {
        if (g->lfd >= 0) close(g->lfd);
        if (g->wake[0] >= 0) close(g->wake[0]);
        if (g->wake[1] >= 0) close(g->wake[1]);
        free(g->conns);
        free(g);
    }
    return NULL;
}

int serve_gate_port(const serve_gate *g) { return g->port; }

int serve_gate_start(serve_gate *g) {
    if (pthread_create(&g->thread, NULL, gate_main, g) != 0) return -1;
    g->started = true;
    return 0;
}

void serve_gate_stop_accepting(serve_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->closed_listener = true;
    g->draining = true;
    pthread_mutex_unlock(&g->mu);
    wake(g);
}

void serve_gate_free(serve_gate *g) {
    if (!g) return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_mutex_unlock(&g->mu);
        wake(g);
        pthread_join(g->thread, NULL);
    }
    if (g->lfd >= 0) close(g->lfd);
    close(g->wake[0]);
    close(g->wake[1]);
    pthread_mutex_destroy(&g->mu);
    free(g->conns);
    free(g);
}

gate_conn *serve_gate_find(serve_gate *g, int fd) {
    gate_conn *found = NULL;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->p.max_conns && !found; i++)
        if (g->conns[i].fd == fd) found = &g->conns[i];
    pthread_mutex_unlock(&g->mu);
    return found;
}

void serve_gate_phase(serve_gate *g, gate_conn *c, gate_phase phase) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->phase != GATE_CUT) {
        if (phase == GATE_HEADERS) c->kept = true;
        c->phase = phase;
        c->t_phase = serve_now_ms();
    }
    pthread_mutex_unlock(&g->mu);
}

void serve_gate_closed(serve_gate *g, gate_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->fd >= 0) g->stats.open--;
    c->fd = -1;
    pthread_mutex_unlock(&g->mu);
}

void serve_gate_stats_get(serve_gate *g, serve_gate_stats *out) {
    pthread_mutex_lock(&g->mu);
    *out = g->stats;
    pthread_mutex_unlock(&g->mu);
}
