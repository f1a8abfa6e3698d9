/*
 * log.c — the engine's log lines into Python's logging, on the logger
 * "tessera" (ERROR, WARNING, INFO, DEBUG as the line's level).
 *
 * The engine logs from whatever thread it is on, plugins' worker threads
 * included, often while a Python thread waits for that work with the GIL
 * released, and sometimes with it held. Taking the GIL in the callback could
 * therefore deadlock, so the callback never touches Python: it copies the
 * line into a bounded queue and asks the interpreter, with Py_AddPendingCall
 * (callable from any thread without the GIL), to drain the queue on the main
 * thread at its next chance. Lines reach logging in the order they were
 * logged; when more than QUEUE_LINES wait, the oldest go and a line says how
 * many. detach() (atexit) stops the callback before the interpreter ends.
 */
#include "pytessera.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { QUEUE_LINES = 512 };

static struct {
    pthread_mutex_t lock;
    struct {
        int32_t level;
        char *text;
    } line[QUEUE_LINES];
    int head, count;   /* ring of count lines from head */
    long dropped;      /* lines that found the queue full since the last drain */
    int drain_pending; /* a pending call is scheduled */
    int attached;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER};

static PyObject *logger; /* logging.getLogger("tessera"), set on attach */

static int python_level(int32_t level) {
    switch (level) {
    case TESSERA_LOG_ERROR: return 40;
    case TESSERA_LOG_WARN: return 30;
    case TESSERA_LOG_INFO: return 20;
    default: return 10;
    }
}

static void emit(int level, const char *text) {
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) n--;
    PyObject *r = PyObject_CallMethod(logger, "log", "is#", level, text, (Py_ssize_t)n);
    if (!r) PyErr_WriteUnraisable(logger); /* a handler's failure must not surface in an unrelated call */
    Py_XDECREF(r);
}

/* The pending call: runs on the main thread with the GIL held. */
static int drain(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&q.lock);
        long dropped = q.dropped;
        q.dropped = 0;
        int32_t level = 0;
        char *text = NULL;
        if (q.count > 0) {
            level = q.line[q.head].level;
            text = q.line[q.head].text;
            q.head = (q.head + 1) % QUEUE_LINES;
            q.count--;
        }
        if (!text && !dropped) q.drain_pending = 0;
        pthread_mutex_unlock(&q.lock);
        if (dropped) {
            char note[96];
            snprintf(note, sizeof note, "tessera: %ld log lines dropped (more than %d waited)", dropped, QUEUE_LINES);
            if (logger) emit(30, note);
        }
        if (!text) {
            if (!dropped) return 0;
            continue;
        }
        if (logger) emit(python_level(level), text);
        free(text);
    }
}

/* tessera_log_fn: any thread, GIL or not; never calls into Python. */
static void on_log(int32_t level, const char *text, void *user) {
    (void)user;
    char *copy = strdup(text ? text : "");
    pthread_mutex_lock(&q.lock);
    if (!q.attached) {
        pthread_mutex_unlock(&q.lock);
        free(copy);
        return;
    }
    if (!copy || q.count == QUEUE_LINES) {
        q.dropped++;
        if (q.count == QUEUE_LINES && copy) { /* drop the oldest, keep the newest */
            free(q.line[q.head].text);
            q.head = (q.head + 1) % QUEUE_LINES;
            q.count--;
        }
    }
    if (copy && q.count < QUEUE_LINES) {
        const int tail = (q.head + q.count) % QUEUE_LINES;
        q.line[tail].level = level;
        q.line[tail].text = copy;
        q.count++;
        copy = NULL;
    }
    const int schedule = !q.drain_pending;
    q.drain_pending = 1;
    pthread_mutex_unlock(&q.lock);
    free(copy);
    /* -1: the interpreter's own queue is full; the lines wait for the
     * next line's call or for drain_now */
    if (schedule && Py_AddPendingCall(drain, NULL) != 0) {
        pthread_mutex_lock(&q.lock);
        q.drain_pending = 0;
        pthread_mutex_unlock(&q.lock);
    }
}

int pyt_log_attach(void) {
    PyObject *logging = PyImport_ImportModule("logging");
    if (!logging) return -1;
    logger = PyObject_CallMethod(logging, "getLogger", "s", "tessera");
    Py_DECREF(logging);
    if (!logger) return -1;
    pthread_mutex_lock(&q.lock);
    q.attached = 1;
    pthread_mutex_unlock(&q.lock);
    tessera_log_set(on_log, NULL);
    return 0;
}

/* log_flush() — hand every waiting line to logging now (the pending call
 * does so at the interpreter's next chance; tests and atexit want it now). */
PyObject *pyt_log_flush(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pthread_mutex_lock(&q.lock);
    q.drain_pending = 1; /* drain clears it when the queue is empty */
    pthread_mutex_unlock(&q.lock);
    drain(NULL);
    Py_RETURN_NONE;
}

/* log_detach() — no more lines (atexit): the callback goes, waiting lines
 * are handed over. */
PyObject *pyt_log_detach(PyObject *self, PyObject *unused) {
    tessera_log_set(NULL, NULL);
    pthread_mutex_lock(&q.lock);
    q.attached = 0;
    pthread_mutex_unlock(&q.lock);
    return pyt_log_flush(self, unused);
}
