#include "util/heap.h"

#include <stdlib.h>
#include <string.h>

#include "util/grow.h"

static unsigned char *at(const tsr_heap *h, size_t i) { return h->items + i * h->item_size; }

int heap_push(tsr_heap *h, const void *item) {
    /* one spare slot past the items: scratch for the sift in heap_pop */
    if (grow_array(&h->items, &h->cap, h->n + 2, h->item_size, 64) < 0) return -1;
    size_t i = h->n++;
    while (i > 0) { /* sift up: move parents down until item fits */
        size_t parent = (i - 1) / 2;
        if (!h->before(item, at(h, parent))) break;
        memcpy(at(h, i), at(h, parent), h->item_size);
        i = parent;
    }
    memcpy(at(h, i), item, h->item_size);
    return 0;
}

void heap_pop(tsr_heap *h, void *out) {
    memcpy(out, at(h, 0), h->item_size);
    unsigned char *last = at(h, h->cap - 1); /* the spare slot */
    memcpy(last, at(h, --h->n), h->item_size);
    size_t i = 0;
    for (;;) { /* sift down: move the smaller child up until last fits */
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->before(at(h, c + 1), at(h, c))) c++;
        if (!h->before(at(h, c), last)) break;
        memcpy(at(h, i), at(h, c), h->item_size);
        i = c;
    }
    if (h->n > 0) memcpy(at(h, i), last, h->item_size);
}

void heap_free(tsr_heap *h) {
    free(h->items);
    h->items = NULL;
    h->n = h->cap = 0;
}
