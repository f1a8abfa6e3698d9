/*
 * merge — see merge.h.
 */
#include "vocab/merge.h"

#include <stdlib.h>

#include "util/grow.h"
#include "vocab/utf8.h"

typedef struct merge_pair {
    int left, right;
    double prio;
    size_t size; /* bytes of the pair when it was queued */
} merge_pair;

/* a comes out before b: lower priority, then smaller left index. */
static bool pair_before(const void *pa, const void *pb) {
    const merge_pair *a = pa, *b = pb;
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

void merge_init(merge_session *m, merge_pair_fn pair, void *ctx) {
    *m = (merge_session){.pair = pair, .ctx = ctx, .heap = heap_make(sizeof(merge_pair), pair_before)};
}

void merge_free(merge_session *m) {
    free(m->sym);
    heap_free(&m->heap);
}

static int queue_pair(merge_session *m, int left, int right) {
    if (left < 0 || right < 0) return 0;
    const merge_symbol *l = &m->sym[left], *r = &m->sym[right];
    double prio;
    int ok = m->pair(m->ctx, m->text, l, r, &prio);
    if (ok <= 0) return ok;
    merge_pair p = {left, right, prio, l->n + r->n};
    return heap_push(&m->heap, &p);
}

int merge_text(merge_session *m, const char *text, size_t len) {
    if (ARRAY_GROW(m->sym, m->sym_cap, len, 64) < 0) return -1;
    m->text = text;
    m->heap.n = 0;
    int n = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = utf8_len_lead((uint8_t)text[off]);
        if (cl > len - off) cl = len - off;
        m->sym[n] = (merge_symbol){n - 1, off + cl == len ? -1 : n + 1, off, cl};
        off += cl;
        n++;
    }
    for (int i = 1; i < n; i++)
        if (queue_pair(m, i - 1, i)) return -1;
    while (m->heap.n > 0) {
        merge_pair b;
        heap_pop(&m->heap, &b);
        merge_symbol *l = &m->sym[b.left], *r = &m->sym[b.right];
        /* Stale: a side was merged away or grew since it was queued (the
         * texts are fixed slices, so equal sizes mean equal text). */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) m->sym[r->next].prev = b.left;
        if (queue_pair(m, l->prev, b.left) || queue_pair(m, b.left, l->next)) return -1;
    }
    return 0;
}
