/* host_log — see host_log.h. */
#include "host/host_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The callback and its user pointer change together: read both under the
 * lock, call outside it (a slow callback does not hold up other threads). */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static tessera_log_fn sink_fn;
static void *sink_user;

void host_log_set(tessera_log_fn fn, void *user) {
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = fn ? user : NULL;
    pthread_mutex_unlock(&sink_lock);
}

static tessera_log_fn sink(void **user) {
    pthread_mutex_lock(&sink_lock);
    tessera_log_fn fn = sink_fn;
    *user = sink_user;
    pthread_mutex_unlock(&sink_lock);
    return fn;
}

bool host_log_wanted(void) {
    void *user;
    return sink(&user) != NULL;
}

void host_log_line(int32_t level, const char *text) {
    void *user;
    tessera_log_fn fn = sink(&user);
    if (fn && text) fn(level, text, user);
}

void host_log_text(int32_t level, const char *text) {
    void *user;
    tessera_log_fn fn = sink(&user);
    if (!fn || !text) return;
    char small[512];
    while (*text) {
        const char *nl = strchr(text, '\n');
        size_t n = nl ? (size_t)(nl - text) : strlen(text);
        /* the line with its '\n' and a NUL: on the stack when it fits */
        char *line = n + 2 <= sizeof small ? small : malloc(n + 2);
        if (!line) return;
        memcpy(line, text, n);
        line[n] = '\n';
        line[n + 1] = '\0';
        fn(level, line, user);
        if (line != small) free(line);
        text += nl ? n + 1 : n;
    }
}

void host_log_printf(int32_t level, const char *fmt, ...) {
    if (!host_log_wanted()) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof buf) {
        host_log_text(level, buf);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) return;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    host_log_text(level, big);
    free(big);
}
