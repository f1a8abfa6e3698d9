/*
 * grow — the one way core grows a heap-allocated array or byte string.
 *
 * Code that appends to an array keeps (items, count, cap) and calls
 * ARRAY_GROW(items, cap, need, first) before writing item need-1: the array
 * is reallocated to the next capacity of first, 2*first, 4*first, ... that
 * holds `need` items. Sizes are overflow-checked; on failure the array is
 * left as it was and the call returns -1 (the caller says what ran out).
 *
 * Text is built in a tsr_buf: append bytes, it stays NUL-terminated.
 */
#ifndef TESSERA_UTIL_GROW_H
#define TESSERA_UTIL_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* Grow the array *items_ptr (a T **, passed as void *) of item_size-byte
 * items to hold at least `need` items; *cap is its capacity in items. */
int grow_array(void *items_ptr, size_t *cap, size_t need, size_t item_size, size_t first_cap);

#define ARRAY_GROW(items, cap, need, first) \
    grow_array(&(items), &(cap), (need), sizeof *(items), (first))

/* A growable byte string. Zero-initialise; p is NULL until the first byte.
 * After a failed append `oom` stays set and later appends do nothing, so a
 * builder may append freely and check once at the end. */
typedef struct tsr_buf {
    char *p;
    size_t len, cap;
    bool oom;
} tsr_buf;

int buf_put(tsr_buf *b, const void *bytes, size_t n); /* 0, or -1 out of memory */
int buf_puts(tsr_buf *b, const char *s);
int buf_putc(tsr_buf *b, char c);
int buf_printf(tsr_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void buf_free(tsr_buf *b);

#endif
