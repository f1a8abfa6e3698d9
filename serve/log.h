/*
 * log — the request log (log.c): one line per request on stderr.
 */
#ifndef TESSERA_SERVE_LOG_H
#define TESSERA_SERVE_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------ request log */

typedef enum serve_log_format { SERVE_LOG_TEXT = 0, SERVE_LOG_JSON = 1, SERVE_LOG_OFF = 2 } serve_log_format;

/* One line per request on stderr (log.c): time, method, path, status,
 * tokens in/out, milliseconds. */
typedef struct serve_log_entry {
    char method[8];
    char path[96];
    double t0_ms;        /* CLOCK_MONOTONIC when the request arrived */
    int status;          /* 0 until a response is queued */
    int32_t n_in, n_out; /* prompt and generated tokens; -1: not a generation */
    bool handed_off;     /* a stream writes the line when it ends */
    char ignored[160];   /* request fields not known, ignored (comma-separated) */
} serve_log_entry;

void serve_log_begin(serve_log_entry *e, const char *method, const char *path);
void serve_log_write(serve_log_format f, const serve_log_entry *e);

#endif
