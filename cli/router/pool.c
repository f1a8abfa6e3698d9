/* The router's children (router.h): one `tessera serve` process per loaded
 * model, the FIFO queue of models waiting for one, and the least-recently-
 * used eviction past --models-max. Everything here runs under router.mu,
 * except each child's watch thread between its locks.
 *
 * A child is started on a free loopback port; its watch thread copies its
 * output to our stderr, each line prefixed with [model], polls its /health
 * until 200 (then the model is loaded), and reaps it: a child that ends
 * without being asked leaves the model unloaded with failed and exit_code
 * set, and the next request for it starts a new one. */

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "router.h"

long long router_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int router_active(router *r) {
    int n = 0;
    for (int i = 0; i < r->n_models; i++) n += r->models[i]->state != ROUTER_UNLOADED;
    return n;
}

void router_enqueue(router *r, router_model *m) {
    if (m->queued || m->state != ROUTER_UNLOADED) return;
    router_model **grown = realloc(r->queue, (size_t)(r->n_queue + 1) * sizeof *grown);
    if (!grown) return;
    r->queue = grown;
    r->queue[r->n_queue++] = m;
    m->queued = true;
}

void router_dequeue(router *r, router_model *m) {
    for (int i = 0; i < r->n_queue; i++)
        if (r->queue[i] == m) {
            memmove(r->queue + i, r->queue + i + 1, (size_t)(r->n_queue - i - 1) * sizeof *r->queue);
            r->n_queue--;
            break;
        }
    m->queued = false;
}

/* A port the kernel has free now on 127.0.0.1, or 0. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* GET /health on the child answers 200. */
static bool healthy(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = false;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        char buf[64] = {0};
        if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1) &&
            recv(fd, buf, sizeof buf - 1, 0) > 12)
            ok = !strncmp(buf + 8, " 200", 4);
    }
    close(fd);
    return ok;
}

typedef struct watch {
    router *r;
    router_model *m;
    char **argv;
    pid_t pid;
    int fd, port;
    unsigned gen;
} watch;

/* Our stderr gets the child's lines as "[model] line". */
static void copy_lines(const router_model *m, char *buf, size_t *len, bool flush) {
    char *start = buf, *nl;
    while ((nl = memchr(start, '\n', *len - (size_t)(start - buf)))) {
        fprintf(stderr, "[%s] %.*s\n", m->name, (int)(nl - start), start);
        start = nl + 1;
    }
    size_t rest = *len - (size_t)(start - buf);
    if (flush && rest) {
        fprintf(stderr, "[%s] %.*s\n", m->name, (int)rest, start);
        rest = 0;
    }
    memmove(buf, start, rest);
    *len = rest;
    fflush(stderr);
}

/* Fork the child from this thread, which lives as long as the child: the
 * kernel's parent-death signal follows the thread that forked, not the
 * process. -1 when it could not be started. */
static pid_t spawn(watch *w) {
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) { /* async-signal-safe calls only until exec */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* the router gone: so are its children */
        if (getppid() != parent) _exit(127);
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        execv(w->r->self_exe, w->argv);
        _exit(127);
    }
    close(pipefd[1]);
    if (pid < 0) close(pipefd[0]);
    else w->fd = pipefd[0];
    return pid;
}

static void *watch_main(void *arg) {
    watch *w = arg;
    router *r = w->r;
    router_model *m = w->m;
    w->pid = spawn(w);
    int status = 0;
    pthread_mutex_lock(&r->mu);
    bool mine = m->gen == w->gen;
    if (mine && w->pid > 0) m->pid = w->pid;
    if (!mine && w->pid > 0) kill(w->pid, SIGTERM); /* stopped before it started */
    pthread_mutex_unlock(&r->mu);
    if (w->pid < 0) {
        fprintf(stderr, "tessera serve: router: cannot start %s: %s\n", m->name, strerror(errno));
        status = 127 << 8;
        goto ended;
    }
    char buf[8192];
    size_t len = 0;
    bool loading = true;
    const long long started = router_now_ms();
    long long stopped_at = 0; /* when a child too slow to load was sent SIGTERM */
    for (;;) {
        struct pollfd p = {.fd = w->fd, .events = POLLIN};
        int n = poll(&p, 1, 50);
        if (n > 0) {
            ssize_t got = read(w->fd, buf + len, sizeof buf - 1 - len);
            if (got <= 0) break;
            len += (size_t)got;
            copy_lines(m, buf, &len, len == sizeof buf - 1);
        }
        /* A child that neither answers nor ends (a hung load, a stalled
         * disk) would hold its queue forever: stopped, then killed. */
        if (loading && r->load_timeout_s > 0 && router_now_ms() - started > r->load_timeout_s * 1000LL) {
            if (!stopped_at) {
                fprintf(stderr, "tessera serve: router: %s did not answer /health within %d s "
                                "(--models-load-timeout): stopping it\n", m->name, r->load_timeout_s);
                kill(w->pid, SIGTERM);
                stopped_at = router_now_ms();
            } else if (router_now_ms() - stopped_at > 5000) {
                kill(w->pid, SIGKILL);
            }
        }
        if (loading && !stopped_at && healthy(w->port)) {
            loading = false;
            pthread_mutex_lock(&r->mu);
            if (m->gen == w->gen && m->state == ROUTER_LOADING) {
                m->state = ROUTER_LOADED;
                m->last_used = router_now_ms();
                fprintf(stderr, "tessera serve: router: %s loaded (port %d)\n", m->name, w->port);
                pthread_cond_broadcast(&r->cv);
                router_schedule(r);
            }
            pthread_mutex_unlock(&r->mu);
        }
    }
    copy_lines(m, buf, &len, true);
    while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR) {}
    close(w->fd);
ended:
    pthread_mutex_lock(&r->mu);
    if (m->gen == w->gen) { /* it ended by itself */
        m->state = ROUTER_UNLOADED;
        m->pid = 0;
        m->gen++;
        m->failed = true;
        m->failures++;
        m->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        fprintf(stderr, "tessera serve: router: %s ended by itself (exit %d)\n", m->name, m->exit_code);
        pthread_cond_broadcast(&r->cv);
        router_schedule(r);
    }
    r->watchers--;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    for (int i = 0; w->argv[i]; i++) free(w->argv[i]);
    free(w->argv);
    free(w);
    return NULL;
}

/* Start `tessera serve -m PATH --alias NAME <router's child flags> <preset
 * flags> --host 127.0.0.1 --port N` (the watch thread forks it). 0, or -1
 * (the model stays unloaded). */
static int start(router *r, router_model *m) {
    int port = free_port();
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    watch *w = calloc(1, sizeof *w);
    int n = 0, cap = 12 + r->n_child_args + m->n_args;
    char **argv = calloc((size_t)cap, sizeof *argv);
    if (!m->path[0] || !port || !argv || !w) {
        fprintf(stderr, "tessera serve: router: cannot start %s: %s\n", m->name,
                !m->path[0] ? "the preset names no model file we have" : "out of memory or ports");
        free(argv);
        free(w);
        return -1;
    }
    const char *fixed[] = {r->self_exe, "serve", "-m", m->path, "--alias", m->name};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) argv[n++] = strdup(fixed[i]);
    for (int i = 0; i < r->n_child_args; i++) argv[n++] = strdup(r->child_args[i]);
    for (int i = 0; i < m->n_args; i++) argv[n++] = strdup(m->args[i]);
    const char *tail[] = {"--host", "127.0.0.1", "--port", port_s};
    for (size_t i = 0; i < 4; i++) argv[n++] = strdup(tail[i]);
    argv[n] = NULL;
    m->gen++;
    *w = (watch){.r = r, .m = m, .argv = argv, .pid = -1, .fd = -1, .port = port, .gen = m->gen};
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, watch_main, w);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        for (int i = 0; argv[i]; i++) free(argv[i]);
        free(argv);
        free(w);
        return -1;
    }
    r->watchers++;
    m->pid = 0;
    m->port = port;
    m->state = ROUTER_LOADING;
    m->failed = false;
    m->exit_code = 0;
    fprintf(stderr, "tessera serve: router: starting %s (%s) on port %d\n", m->name, m->path, port);
    return 0;
}

void router_stop(router *r, router_model *m) {
    (void)r;
    if (m->state == ROUTER_UNLOADED) return;
    if (m->pid > 0) kill(m->pid, SIGTERM); /* its watch thread reaps it */
    fprintf(stderr, "tessera serve: router: stopping %s\n", m->name);
    m->state = ROUTER_UNLOADED;
    m->pid = 0;
    m->gen++;
    m->failed = false;
    pthread_cond_broadcast(&r->cv);
}

/* The idle loaded model used longest ago, or NULL. */
static router_model *lru_idle(router *r) {
    router_model *best = NULL;
    for (int i = 0; i < r->n_models; i++) {
        router_model *m = r->models[i];
        if (m->state == ROUTER_LOADED && m->busy == 0 && m->waiters == 0 &&
            (!best || m->last_used < best->last_used))
            best = m;
    }
    return best;
}

/* Start the queue's models in order while there is room, making room by
 * stopping idle ones; the head waits (and those behind it) when every
 * running model is busy. */
void router_schedule(router *r) {
    while (r->n_queue > 0 && !r->closing) {
        router_model *m = r->queue[0];
        if (r->models_max > 0 && router_active(r) >= r->models_max) {
            router_model *victim = lru_idle(r);
            if (!victim) return;
            fprintf(stderr, "tessera serve: router: --models-max %d: %s makes room for %s\n", r->models_max,
                    victim->name, m->name);
            router_stop(r, victim);
        }
        router_dequeue(r, m);
        if (start(r, m) != 0) {
            m->failed = true;
            m->failures++;
            m->exit_code = -1;
        }
        pthread_cond_broadcast(&r->cv);
    }
}
