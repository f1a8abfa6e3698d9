/* The request log of `tessera serve`: one line per request on stderr, as
 * text (default) or JSON (--log-format json). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "log.h"

void serve_log_begin(serve_log_entry *e, const char *method, const char *path) {
    memset(e, 0, sizeof *e);
    snprintf(e->method, sizeof e->method, "%s", method ? method : "?");
    snprintf(e->path, sizeof e->path, "%s", path ? path : "?");
    e->t0_ms = serve_now_ms();
    e->n_in = e->n_out = -1;
}

/* The path as a JSON string body: quotes, backslashes and control bytes
 * escaped (paths come from the client). */
static void json_text(char *out, size_t size, const char *s) {
    size_t o = 0;
    for (; *s && o + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') o += (size_t)snprintf(out + o, size - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, size - o, "\\u%04x", c);
        else out[o++] = (char)c;
    }
    out[o] = '\0';
}

void serve_log_write(serve_log_format f, const serve_log_entry *e) {
    if (f == SERVE_LOG_OFF) return;
    double ms = serve_now_ms() - e->t0_ms;
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char path[6 * sizeof e->path], method[6 * sizeof e->method];
    json_text(path, sizeof path, e->path);
    json_text(method, sizeof method, e->method);
    char ignored[6 * sizeof e->ignored];
    json_text(ignored, sizeof ignored, e->ignored);
    if (f == SERVE_LOG_JSON) {
        fprintf(stderr,
                "{\"time\":\"%s\",\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,\"tokens_in\":%d,"
                "\"tokens_out\":%d,\"ms\":%.1f%s%s%s}\n",
                when, method, path, e->status, (int)(e->n_in > 0 ? e->n_in : 0),
                (int)(e->n_out > 0 ? e->n_out : 0), ms, ignored[0] ? ",\"ignored\":\"" : "", ignored,
                ignored[0] ? "\"" : "");
    } else if (e->n_in >= 0) {
        fprintf(stderr, "%s %s %s %d in=%d out=%d %.1fms%s%s\n", when, method, path, e->status, (int)e->n_in,
                (int)e->n_out, ms, ignored[0] ? " ignored=" : "", ignored);
    } else {
        fprintf(stderr, "%s %s %s %d %.1fms\n", when, method, path, e->status, ms);
    }
}
