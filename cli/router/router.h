/*
 * tessera serve's router mode (--models-dir DIR, --models-preset FILE): an
 * HTTP front that owns no model. Each model runs as its own child
 * `tessera serve -m FILE --host 127.0.0.1 --port N` (its own engine: a crash
 * or an out-of-memory in one leaves the others), started on first use or by
 * POST /models/load, stopped by /models/unload or when --models-max children
 * are running and another is wanted (the least recently used idle one goes).
 * Requests go to the child their "model" names, streamed both ways.
 *
 *   catalog.c  the models: a directory's GGUF files and a preset's sections
 *   pool.c     the children: start, wait until ready, the load queue, stop
 *   front.c    the HTTP front: /models, /props, proxying; serve_router_main
 */
#ifndef TESSERA_CLI_ROUTER_H
#define TESSERA_CLI_ROUTER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

typedef enum { ROUTER_UNLOADED, ROUTER_LOADING, ROUTER_LOADED } router_state;

/* One model the router can serve. Never freed while the router runs (a
 * request may hold it): a model a reload no longer finds is marked removed. */
typedef struct router_model {
    char name[256];
    char path[PATH_MAX]; /* "" when the preset names a model we do not have */
    char **args;         /* the preset's flags for its child */
    int n_args;
    bool removed, hidden; /* hidden: dedup-cache-models, served but not listed */
    bool load_on_startup;
    /* under router.mu */
    router_state state;
    pid_t pid;
    int port;
    unsigned gen;       /* bumped when an instance is started or stopped */
    int busy;           /* requests being proxied to it */
    int waiters;        /* requests waiting for it to be loaded */
    bool queued;        /* in router.queue */
    long long last_used; /* ms, monotonic */
    int failures;       /* instances that ended without being asked */
    bool failed;        /* the last one did */
    int exit_code;
} router_model;

typedef struct router {
    const char *models_dir, *preset, *api_key, *host;
    int port, models_max;
    int load_timeout_s; /* a child not healthy by then is stopped (0: wait forever) */
    bool autoload;
    const char *self_exe;
    char **child_args; /* the command line's flags that are the children's */
    int n_child_args;
    int hold_ms; /* TESSERA_ROUTER_DEBUG_HOLD_MS: a test hook, see front.c */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    router_model **models;
    int n_models, cap_models;
    router_model **queue; /* FIFO: models waiting for an instance */
    int n_queue;
    int watchers; /* live watch threads */
    bool closing; /* SIGTERM: nothing new starts, waiting requests give up */
} router;

/* catalog.c: (re)reads the directory and the preset into r->models; under
 * r->mu. 0, or -1 with the error printed (a preset that cannot be read
 * lists none of its models; a running one of them is stopped). */
int router_catalog_load(router *r);
router_model *router_find(router *r, const char *name);

/* pool.c, all under r->mu */
long long router_now_ms(void);
void router_enqueue(router *r, router_model *m);
void router_dequeue(router *r, router_model *m);
void router_schedule(router *r);
void router_stop(router *r, router_model *m);
int router_active(router *r);

int serve_router_main(int argc, char **argv);

#endif
