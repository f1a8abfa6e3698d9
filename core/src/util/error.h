/*
 * error — the last error message of the calling thread.
 *
 * Every fallible internal function returns a status (0 / -1, or NULL) and, on
 * failure, records one line saying what went wrong and naming the thing at
 * fault (file and offset, key, tensor, flag, device). tessera_last_error()
 * returns it to users of the public API.
 */
#ifndef TESSERA_UTIL_ERROR_H
#define TESSERA_UTIL_ERROR_H

#include <stdarg.h>

#if defined(__GNUC__)
#define TSR_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define TSR_PRINTF(fmt_idx, arg_idx)
#endif

/* Record an error message (printf-style) for this thread. Always returns -1 so
 * callers can write `return error_set("...")`. */
int error_set(const char *fmt, ...) TSR_PRINTF(1, 2);
int error_setv(const char *fmt, va_list ap);

/* Prefix the current message with more context: "ctx: previous message". */
int error_wrap(const char *fmt, ...) TSR_PRINTF(1, 2);

/* The message of the last error on this thread ("" if none). */
const char *error_get(void);
void error_clear(void);

#endif
