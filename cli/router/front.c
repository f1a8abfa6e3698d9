/* The router's HTTP front (router.h): its own routes, and every other
 * request proxied to the child of the model it names.
 *
 *   GET  /health                 {"status": "ok"} (no API key needed)
 *   GET  /models, /v1/models     every model and its status; ?reload=1 re-reads the directory and preset
 *   POST /models/load {"model"}  start it (answers at once; /models says when it is loaded)
 *   POST /models/unload {"model"}
 *   GET  /props                  the router's own: role "router", max_instances, models_autoload
 *   anything else                the child of the "model" in the JSON body (GET: ?model=), started
 *                                first unless --no-models-autoload; the answer streams back as it comes
 *
 * A request for a model that is not running waits in the load queue (FIFO)
 * while its connection stays open; a client that leaves gives up its place. */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <tessera/tessera.h>

#include "../cli_util.h"
#include "router.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

enum { MAX_BODY = 64 << 20 };

typedef struct request {
    char *body;
    size_t len, cap;
    bool too_big;
} request;

static MHD_RESULT reply_raw(struct MHD_Connection *c, unsigned status, const char *type, const char *text) {
    struct MHD_Response *res =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!res) return MHD_NO;
    MHD_add_response_header(res, "Content-Type", type);
    MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
    MHD_RESULT rc = MHD_queue_response(c, status, res);
    MHD_destroy_response(res);
    return rc;
}

static MHD_RESULT reply_json(struct MHD_Connection *c, unsigned status, cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return MHD_NO;
    MHD_RESULT rc = reply_raw(c, status, "application/json; charset=utf-8", s);
    free(s);
    return rc;
}

/* OpenAI's error shape. */
static MHD_RESULT reply_error(struct MHD_Connection *c, unsigned status, const char *type, const char *fmt,
                              const char *arg) {
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg ? arg : "");
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    return reply_json(c, status, j);
}

static const char *state_name(const router_model *m) {
    if (m->state == ROUTER_LOADED) return "loaded";
    if (m->state == ROUTER_LOADING) return "loading";
    return "unloaded";
}

static MHD_RESULT list_models(router *r, struct MHD_Connection *c) {
    const char *reload = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "reload");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(j, "data");
    pthread_mutex_lock(&r->mu);
    if (reload && strcmp(reload, "0") && strcmp(reload, "false")) {
        router_catalog_load(r);
        router_schedule(r);
    }
    for (int i = 0; i < r->n_models; i++) {
        router_model *m = r->models[i];
        if (m->removed || m->hidden) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", m->name);
        cJSON_AddStringToObject(o, "object", "model");
        cJSON_AddStringToObject(o, "owned_by", "tessera");
        struct stat st = {0};
        stat(m->path, &st);
        cJSON_AddNumberToObject(o, "created", (double)st.st_mtime);
        cJSON_AddStringToObject(o, "path", m->path);
        cJSON *s = cJSON_AddObjectToObject(o, "status");
        cJSON_AddStringToObject(s, "value", state_name(m));
        cJSON *args = cJSON_AddArrayToObject(s, "args");
        for (int k = 0; k < m->n_args; k++) cJSON_AddItemToArray(args, cJSON_CreateString(m->args[k]));
        if (m->state == ROUTER_UNLOADED && m->failed) {
            cJSON_AddBoolToObject(s, "failed", 1);
            cJSON_AddNumberToObject(s, "exit_code", m->exit_code);
        }
        cJSON_AddItemToArray(data, o);
    }
    pthread_mutex_unlock(&r->mu);
    return reply_json(c, 200, j);
}

static MHD_RESULT router_props(router *r, struct MHD_Connection *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "role", "router");
    cJSON_AddNumberToObject(j, "max_instances", r->models_max);
    cJSON_AddBoolToObject(j, "models_autoload", r->autoload);
    /* llama-server's shape is b<build>-<commit>; we have no build number */
    char build[128];
    snprintf(build, sizeof build, "b0-tessera-%s", tessera_version());
    cJSON_AddStringToObject(j, "build_info", build);
    return reply_json(c, 200, j);
}

/* The body's "model", or ?model=, into out. */
static bool model_of(struct MHD_Connection *c, const request *q, char *out, size_t size) {
    out[0] = '\0';
    if (q->len) {
        cJSON *j = cJSON_ParseWithLength(q->body, q->len);
        cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
        if (cJSON_IsString(m)) snprintf(out, size, "%s", m->valuestring);
        cJSON_Delete(j);
    }
    const char *arg = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "model");
    if (!out[0] && arg) snprintf(out, size, "%s", arg);
    return out[0] != '\0';
}

static MHD_RESULT load_unload(router *r, struct MHD_Connection *c, const request *q, bool load) {
    char name[256];
    if (!model_of(c, q, name, sizeof name))
        return reply_error(c, 400, "invalid_request_error", "\"model\" is required%s", NULL);
    pthread_mutex_lock(&r->mu);
    router_model *m = router_find(r, name);
    if (!m) {
        pthread_mutex_unlock(&r->mu);
        return reply_error(c, 404, "not_found_error", "model '%s' not found", name);
    }
    if (load) {
        router_enqueue(r, m);
        router_schedule(r);
    } else if (m->state == ROUTER_UNLOADED && !m->queued) {
        pthread_mutex_unlock(&r->mu);
        return reply_error(c, 400, "invalid_request_error", "model '%s' is not loaded", name);
    } else {
        if (m->queued) router_dequeue(r, m);
        router_stop(r, m);
        router_schedule(r);
    }
    pthread_mutex_unlock(&r->mu);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddBoolToObject(j, "success", 1);
    return reply_json(c, 200, j);
}

/* The client has closed its connection. */
static bool client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char b;
    return recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

typedef enum { GOT_IT, NOT_FOUND, NOT_LOADED, LOAD_FAILED, CLIENT_GONE } acquire_rc;

/* The model's child for one request (busy counted), waiting for it to load. */
static acquire_rc acquire(router *r, struct MHD_Connection *c, const char *name, router_model **out) {
    pthread_mutex_lock(&r->mu);
    router_model *m = router_find(r, name);
    if (!m) {
        pthread_mutex_unlock(&r->mu);
        return NOT_FOUND;
    }
    int failures = m->failures;
    acquire_rc rc = GOT_IT;
    while (m->state != ROUTER_LOADED) {
        if (m->failures != failures || r->closing) {
            rc = LOAD_FAILED;
            break;
        }
        if (m->state == ROUTER_UNLOADED && !m->queued) {
            if (!r->autoload) {
                rc = NOT_LOADED;
                break;
            }
            router_enqueue(r, m);
            router_schedule(r);
            continue;
        }
        m->waiters++;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000;
        if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&r->cv, &r->mu, &until);
        m->waiters--;
        if (m->state != ROUTER_LOADED && client_gone(c)) {
            if (m->waiters == 0 && m->queued) router_dequeue(r, m);
            rc = CLIENT_GONE;
            break;
        }
    }
    if (rc == GOT_IT) {
        m->busy++;
        m->last_used = router_now_ms();
        *out = m;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static void release(router *r, router_model *m) {
    pthread_mutex_lock(&r->mu);
    m->busy--;
    m->last_used = router_now_ms();
    router_schedule(r);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

typedef struct proxy {
    router *r;
    router_model *m;
    int fd;
    char *pending; /* the body bytes read with the headers */
    size_t n_pending, off;
} proxy;

static ssize_t proxy_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    proxy *p = cls;
    if (p->off < p->n_pending) {
        size_t n = p->n_pending - p->off < max ? p->n_pending - p->off : max;
        memcpy(buf, p->pending + p->off, n);
        p->off += n;
        return (ssize_t)n;
    }
    ssize_t n;
    while ((n = recv(p->fd, buf, max, 0)) < 0 && errno == EINTR) {}
    if (n == 0) return MHD_CONTENT_READER_END_OF_STREAM;
    if (n < 0) return MHD_CONTENT_READER_END_WITH_ERROR;
    return n;
}

static void proxy_free(void *cls) {
    proxy *p = cls;
    close(p->fd);
    release(p->r, p->m);
    free(p->pending);
    free(p);
}

typedef struct head_buf {
    char *s;
    size_t len, cap;
    bool bad;
} head_buf;

static void put(head_buf *b, const char *s, size_t n) {
    if (b->bad) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->bad = true;
            return;
        }
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void puts_(head_buf *b, const char *s) { put(b, s, strlen(s)); }

static MHD_RESULT add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    head_buf *b = cls;
    static const char *const skip[] = {"host", "connection", "content-length", "transfer-encoding",
                                       "authorization", "keep-alive", "expect", NULL};
    for (int i = 0; skip[i]; i++)
        if (!strcasecmp(key, skip[i])) return MHD_YES;
    puts_(b, key);
    puts_(b, ": ");
    puts_(b, value ? value : "");
    puts_(b, "\r\n");
    return MHD_YES;
}

static MHD_RESULT add_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    head_buf *b = cls;
    puts_(b, b->s[b->len - 1] == '?' ? "" : "&");
    puts_(b, key); /* MHD gives them decoded: encode what HTTP cannot carry */
    if (value) {
        puts_(b, "=");
        for (const unsigned char *v = (const unsigned char *)value; *v; v++) {
            char e[4];
            if (*v <= ' ' || *v >= 0x7f || strchr("&#%+", *v)) snprintf(e, sizeof e, "%%%02X", *v);
            else e[0] = (char)*v, e[1] = '\0';
            puts_(b, e);
        }
    }
    return MHD_YES;
}

/* Send the request to the child (HTTP/1.0: its answer ends when it closes)
 * and stream its answer back. */
static MHD_RESULT forward(router *r, struct MHD_Connection *c, router_model *m, const char *method,
                          const char *url, const request *q) {
    if (r->hold_ms > 0) { /* the test hook: every request keeps its model busy this long */
        struct timespec t = {r->hold_ms / 1000, (long)(r->hold_ms % 1000) * 1000000};
        nanosleep(&t, NULL);
    }
    head_buf h = {0};
    puts_(&h, method);
    puts_(&h, " ");
    puts_(&h, url);
    puts_(&h, "?");
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query, &h);
    if (h.s && h.s[h.len - 1] == '?') h.s[--h.len] = '\0';
    puts_(&h, " HTTP/1.0\r\nHost: 127.0.0.1\r\n");
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n\r\n", q->len);
    puts_(&h, cl);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)m->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = !h.bad && fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              send(fd, h.s, h.len, MSG_NOSIGNAL) == (ssize_t)h.len &&
              (q->len == 0 || send(fd, q->body, q->len, MSG_NOSIGNAL) == (ssize_t)q->len);
    free(h.s);
    /* the answer's status line and headers */
    char *head = NULL;
    size_t len = 0, cap = 0;
    char *end = NULL;
    while (ok && !end) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *g = cap <= (1 << 20) ? realloc(head, cap) : NULL;
            if (!g) {
                ok = false;
                break;
            }
            head = g;
        }
        ssize_t n = recv(fd, head + len, 4096, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = false;
            break;
        }
        len += (size_t)n;
        head[len] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    unsigned status = 0;
    if (ok && sscanf(head, "HTTP/%*s %u", &status) != 1) ok = false;
    proxy *p = ok ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        free(head);
        if (fd >= 0) close(fd);
        release(r, m);
        return reply_error(c, 502, "server_error", "the child serving model '%s' did not answer", m->name);
    }
    *p = (proxy){.r = r, .m = m, .fd = fd};
    size_t body_at = (size_t)(end + 4 - head);
    p->n_pending = len - body_at;
    p->pending = malloc(p->n_pending + 1);
    if (p->pending) memcpy(p->pending, head + body_at, p->n_pending);
    else p->n_pending = 0;
    struct MHD_Response *res = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, proxy_read, p, proxy_free);
    if (!res) {
        free(head);
        proxy_free(p);
        return MHD_NO;
    }
    *end = '\0';
    char *save = NULL;
    strtok_r(head, "\r\n", &save); /* the status line */
    for (char *line = strtok_r(NULL, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        *colon = '\0';
        char *value = colon + 1;
        while (*value == ' ') value++;
        if (!strcasecmp(line, "connection") || !strcasecmp(line, "content-length") ||
            !strcasecmp(line, "transfer-encoding") || !strcasecmp(line, "date") || !strcasecmp(line, "keep-alive"))
            continue;
        MHD_add_response_header(res, line, value);
    }
    free(head);
    MHD_RESULT rc = MHD_queue_response(c, status, res);
    MHD_destroy_response(res);
    return rc;
}

static MHD_RESULT route(router *r, struct MHD_Connection *c, const char *url, const char *method,
                        const request *q) {
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *res = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(res, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        MHD_add_response_header(res, "Access-Control-Allow-Headers", "*");
        MHD_RESULT rc = MHD_queue_response(c, 204, res);
        MHD_destroy_response(res);
        return rc;
    }
    if (!strcmp(url, "/health") || !strcmp(url, "/v1/health"))
        return reply_raw(c, 200, "application/json; charset=utf-8", "{\"status\":\"ok\"}");
    if (r->api_key) {
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Api-Key");
        if (auth && !strncasecmp(auth, "Bearer ", 7)) key = auth + 7;
        if (!key || strcmp(key, r->api_key) != 0)
            return reply_error(c, 401, "authentication_error", "Invalid API Key%s", NULL);
    }
    bool get = !strcmp(method, "GET");
    if (get && (!strcmp(url, "/models") || !strcmp(url, "/v1/models"))) return list_models(r, c);
    if (!strcmp(method, "POST") && !strcmp(url, "/models/load")) return load_unload(r, c, q, true);
    if (!strcmp(method, "POST") && !strcmp(url, "/models/unload")) return load_unload(r, c, q, false);
    if ((!strcmp(method, "POST") || !strcmp(method, "DELETE")) && !strcmp(url, "/models"))
        return reply_error(c, 501, "not_supported_error",
                           "downloading and deleting models is not supported: put GGUF files in --models-dir%s",
                           NULL);
    char name[256];
    bool named = model_of(c, q, name, sizeof name);
    if (get && !strcmp(url, "/props") && !named) return router_props(r, c);
    if (q->too_big) return reply_error(c, 413, "invalid_request_error", "the request body is too large%s", NULL);
    if (!named)
        return reply_error(c, 400, "invalid_request_error",
                           "\"model\" is required (the router serves several; GET /models lists them)%s", NULL);
    router_model *m = NULL;
    switch (acquire(r, c, name, &m)) {
    case NOT_FOUND:
        return reply_error(c, 404, "not_found_error", "model '%s' not found (GET /models lists them)", name);
    case NOT_LOADED:
        return reply_error(c, 400, "invalid_request_error",
                           "model '%s' is not loaded (POST /models/load; autoload is off)", name);
    case LOAD_FAILED:
        return reply_error(c, 503, "unavailable_error",
                           r->closing ? "the router is stopping; model '%s' is not served"
                                      : "model '%s' failed to load",
                           name);
    case CLIENT_GONE: return MHD_NO;
    case GOT_IT: break;
    }
    return forward(r, c, m, method, url, q);
}

static MHD_RESULT on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                            const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    request *q = *con_cls;
    if (!q) {
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *con_cls = q;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!q->too_big && q->len + *upload_size <= MAX_BODY) {
            if (q->len + *upload_size + 1 > q->cap) {
                size_t cap = (q->len + *upload_size + 1) * 2;
                char *g = realloc(q->body, cap);
                if (!g) return MHD_NO;
                q->body = g;
                q->cap = cap;
            }
            memcpy(q->body + q->len, upload, *upload_size);
            q->len += *upload_size;
        } else {
            q->too_big = true;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(cls, c, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c, (void)t;
    request *q = *con_cls;
    if (q) free(q->body), free(q);
    *con_cls = NULL;
}

/* The router's own flags; every other is its children's. */
static const char *const VALUE_FLAGS[] = {"--models-dir", "--models-preset", "--models-max", "--models-load-timeout",
                                          "--host", "--port", "--api-key", NULL};

static void usage(void) {
    printf("usage: tessera serve --models-dir DIR | --models-preset FILE [options] [child options]\n\n"
           "Router mode: serves every model of DIR (NAME.gguf as NAME, NAME/*.gguf as NAME,\n"
           "ORG/REPO/QUANT.gguf as ORG/REPO:QUANT) and of the preset (llama-server's INI: [NAME]\n"
           "sections of model = FILE or hf-repo = ORG/REPO and child flags without their dashes,\n"
           "[*] for all), each in its own `tessera serve` child started on first use. A request's\n"
           "\"model\" picks it. GET /models lists them with their status; POST /models/load and\n"
           "/models/unload {\"model\"} start and stop them.\n\n"
           "  --models-dir DIR        the models\n"
           "  --models-preset FILE    the preset (GET /models?reload=1 re-reads it)\n"
           "  --models-max N          children at once (default 4; 0: no limit); past it the least\n"
           "                          recently used idle one stops\n"
           "  --no-models-autoload    requests for a model not loaded get 400 (POST /models/load first)\n"
           "  --models-load-timeout N seconds a child may take to answer /health (default 600; 0: no\n"
           "                          limit); past it the child is stopped and its requests get 503\n"
           "  --host ADDR --port N    where the router listens (default 127.0.0.1:8080)\n"
           "  --api-key KEY           require 'Authorization: Bearer KEY' (not for /health)\n"
           "Every other flag (-c, --parallel, --temp, ...) is passed to each child.\n");
}

/* Everything the router holds, once no watch thread is left (one still
 * running holds its model and the lock: left to the process exit). */
static void router_free(router *r) {
    if (r->watchers > 0) return;
    for (int i = 0; i < r->n_models; i++) {
        for (int k = 0; k < r->models[i]->n_args; k++) free(r->models[i]->args[k]);
        free(r->models[i]->args);
        free(r->models[i]);
    }
    free(r->models);
    free(r->queue);
    free(r->child_args);
}

int serve_router_main(int argc, char **argv) {
    router r = {.host = "127.0.0.1", .port = 8080, .models_max = 4, .load_timeout_s = 600, .autoload = true};
    r.child_args = calloc((size_t)argc + 1, sizeof *r.child_args);
    if (!r.child_args) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            free(r.child_args);
            return 0;
        }
        if (!strcmp(a, "--no-models-autoload")) {
            r.autoload = false;
            continue;
        }
        if (!strcmp(a, "--models-autoload")) {
            r.autoload = true;
            continue;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            fprintf(stderr, "tessera serve: %s with --models-dir or --models-preset: the router serves the models "
                            "of those (put the file in the directory, or a [NAME] section with model = FILE)\n", a);
            free(r.child_args);
            return 2;
        }
        bool own = false;
        for (int k = 0; VALUE_FLAGS[k]; k++) own |= !strcmp(a, VALUE_FLAGS[k]);
        if (!own) {
            r.child_args[r.n_child_args++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tessera serve: %s needs a value\n", a);
            free(r.child_args);
            return 2;
        }
        const char *v = argv[++i];
        char *end = NULL;
        if (!strcmp(a, "--models-dir")) r.models_dir = v;
        else if (!strcmp(a, "--models-preset")) r.preset = v;
        else if (!strcmp(a, "--host")) r.host = v;
        else if (!strcmp(a, "--api-key")) r.api_key = v;
        else {
            const long most = !strcmp(a, "--port") ? 65535 : !strcmp(a, "--models-load-timeout") ? 86400 : 1024;
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 0 || n > most) {
                fprintf(stderr, "tessera serve: %s expects an integer (0..%ld), got '%s'\n", a, most, v);
                free(r.child_args);
                return 2;
            }
            if (!strcmp(a, "--port")) r.port = (int)n;
            else if (!strcmp(a, "--models-load-timeout")) r.load_timeout_s = (int)n;
            else r.models_max = (int)n;
        }
    }
    const char *hold = getenv("TESSERA_ROUTER_DEBUG_HOLD_MS");
    r.hold_ms = hold ? atoi(hold) : 0;
    static char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "tessera serve: cannot find our own executable (/proc/self/exe)\n");
        free(r.child_args);
        return 1;
    }
    self[n] = '\0';
    r.self_exe = self;
    if (r.models_dir) {
        struct stat st;
        if (stat(r.models_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "tessera serve: --models-dir %s is not a directory\n", r.models_dir);
            free(r.child_args);
            return 2;
        }
    }
    sigset_t stop_sigs;
    cli_block_stop_signals(&stop_sigs);
    pthread_mutex_init(&r.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&r.cv, &ca);
    pthread_mutex_lock(&r.mu);
    int rc = router_catalog_load(&r);
    for (int i = 0; rc == 0 && i < r.n_models; i++)
        if (!r.models[i]->removed && r.models[i]->load_on_startup) router_enqueue(&r, r.models[i]);
    router_schedule(&r);
    int listed = 0;
    for (int i = 0; i < r.n_models; i++) listed += !r.models[i]->removed;
    pthread_mutex_unlock(&r.mu);
    if (rc != 0) {
        router_free(&r);
        return 2;
    }

    struct sockaddr_storage addr = {0};
    socklen_t alen;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    const char *host = !strcmp(r.host, "localhost") ? "127.0.0.1" : r.host;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)r.port);
        alen = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)r.port);
        alen = sizeof *a6;
    } else {
        fprintf(stderr, "tessera serve: --host %s is not an IPv4 or IPv6 address\n", r.host);
        router_free(&r);
        return 2;
    }
    (void)alen;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)r.port, NULL, NULL, on_access, &r,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, &r,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)0,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "tessera serve: cannot listen on %s port %d: %s\n", r.host, r.port, strerror(errno));
        router_free(&r);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "tessera serve: router on http://%s:%d (%d models, --models-max %d, autoload %s)\n", r.host,
            di ? di->port : r.port, listed, r.models_max, r.autoload ? "on" : "off");
    fflush(stderr);
    int sig = 0;
    sigwait(&stop_sigs, &sig);
    fprintf(stderr, "tessera serve: router %s: stopping the children\n", sig == SIGINT ? "interrupted" : "terminated");
    MHD_socket listener = MHD_quiesce_daemon(d);
    if (listener != MHD_INVALID_SOCKET) close(listener);
    pthread_mutex_lock(&r.mu);
    r.closing = true; /* waiting requests give up (503) */
    for (int i = 0; i < r.n_queue; i++) r.queue[i]->queued = false;
    r.n_queue = 0;
    long long until = router_now_ms() + 10000;
    for (;;) { /* requests being answered finish first, for up to 10 s */
        int busy = 0;
        for (int i = 0; i < r.n_models; i++) busy += r.models[i]->busy;
        if (!busy || router_now_ms() >= until) break;
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        pthread_cond_timedwait(&r.cv, &r.mu, &t);
    }
    for (int i = 0; i < r.n_models; i++) router_stop(&r, r.models[i]);
    until = router_now_ms() + 15000;
    while (r.watchers > 0 && router_now_ms() < until) { /* their children exit */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_sec += 1;
        pthread_cond_timedwait(&r.cv, &r.mu, &t);
    }
    pthread_mutex_unlock(&r.mu);
    MHD_stop_daemon(d);
    router_free(&r);
    return 0;
}
