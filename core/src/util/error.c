#include "util/error.h"

#include <stdio.h>
#include <string.h>

enum { ERROR_MAX = 1024 };

/* Per-thread, like errno: the only way a message can travel with a status
 * without every signature carrying a buffer. */
static _Thread_local char error_message[ERROR_MAX];

int error_setv(const char *fmt, va_list ap) {
    vsnprintf(error_message, sizeof error_message, fmt, ap);
    return -1;
}

int error_set(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_setv(fmt, ap);
    va_end(ap);
    return -1;
}

int error_wrap(const char *fmt, ...) {
    char prefix[ERROR_MAX];
    char previous[ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(previous, error_message, sizeof previous);
    /* Truncation is fine here: the message is for people. */
    size_t n = strlen(prefix);
    if (n > ERROR_MAX - 3) n = ERROR_MAX - 3;
    memcpy(error_message, prefix, n);
    memcpy(error_message + n, ": ", 2);
    size_t rest = strlen(previous);
    if (rest > ERROR_MAX - 1 - (n + 2)) rest = ERROR_MAX - 1 - (n + 2);
    memcpy(error_message + n + 2, previous, rest);
    error_message[n + 2 + rest] = '\0';
    return -1;
}

const char *error_get(void) { return error_message; }

void error_clear(void) { error_message[0] = '\0'; }
