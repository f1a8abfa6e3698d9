#include "util/grow.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int grow_array(void *items_ptr, size_t *cap, size_t need, size_t item_size, size_t first_cap) {
    if (need <= *cap) return 0;
    size_t new_cap = *cap ? *cap : (first_cap ? first_cap : 1);
    while (new_cap < need) {
        if (new_cap > SIZE_MAX / 2) return -1;
        new_cap *= 2;
    }
    size_t bytes;
    if (__builtin_mul_overflow(new_cap, item_size, &bytes)) return -1;
    /* items_ptr points at a T *; read and write it as bytes, since a T * may
     * not be accessed through a void * lvalue. */
    void *items;
    memcpy(&items, items_ptr, sizeof items);
    void *grown = realloc(items, bytes);
    if (!grown) return -1;
    memcpy(items_ptr, &grown, sizeof grown);
    *cap = new_cap;
    return 0;
}

int buf_put(tsr_buf *b, const void *bytes, size_t n) {
    if (b->oom) return -1;
    if (n > SIZE_MAX - 1 - b->len || ARRAY_GROW(b->p, b->cap, b->len + n + 1, 64) < 0) {
        b->oom = true;
        return -1;
    }
    if (n) memcpy(b->p + b->len, bytes, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int buf_puts(tsr_buf *b, const char *s) { return buf_put(b, s, strlen(s)); }

int buf_putc(tsr_buf *b, char c) { return buf_put(b, &c, 1); }

int buf_printf(tsr_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || b->oom) return -1;
    /* room for the text and its NUL, then print in place */
    if (buf_put(b, "", 0) < 0 || ARRAY_GROW(b->p, b->cap, b->len + (size_t)n + 1, 64) < 0) {
        b->oom = true;
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void buf_free(tsr_buf *b) {
    free(b->p);
    *b = (tsr_buf){0};
}
