/*
 * heap — a binary min-heap of fixed-size items ordered by a caller's
 * `before` (a comes out before b). The BPE and SentencePiece tokenizers
 * both merge the best-ranked pair first with it.
 */
#ifndef TESSERA_UTIL_HEAP_H
#define TESSERA_UTIL_HEAP_H

#include <stdbool.h>
#include <stddef.h>

typedef bool (*heap_before_fn)(const void *a, const void *b);

typedef struct tsr_heap {
    unsigned char *items;
    size_t n, cap, item_size;
    heap_before_fn before;
} tsr_heap;

static inline tsr_heap heap_make(size_t item_size, heap_before_fn before) {
    return (tsr_heap){.item_size = item_size, .before = before};
}
int heap_push(tsr_heap *h, const void *item); /* 0, or -1 out of memory */
void heap_pop(tsr_heap *h, void *out);        /* the first item; h->n must be > 0 */
void heap_free(tsr_heap *h);

#endif
