/*
 * host_log — where the library's log lines go: the application's callback
 * (tessera_log_set), or nowhere. libtessera never writes to stdout or stderr
 * itself; the tessera CLI's callback writes each line to stderr, so what it
 * prints is what the library used to print there.
 *
 * host_log (host.h) formats "tessera: who: level: message" and honours the
 * verbosity; the functions here pass on lines an option asked for (a
 * context's verbose summary, --explain) whatever the verbosity.
 */
#ifndef TESSERA_HOST_LOG_H
#define TESSERA_HOST_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/tessera.h>

void host_log_set(tessera_log_fn fn, void *user);
/* Whether a callback is set (to skip formatting what would go nowhere). */
bool host_log_wanted(void);
/* Pass one line on as it is (it should end in '\n'). */
void host_log_line(int32_t level, const char *text);
/* printf-style; the result is cut into lines, each passed on with its
 * '\n' (a last line without one gets it). */
void host_log_printf(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for text already formatted (several lines at once). */
void host_log_text(int32_t level, const char *text);

#endif
