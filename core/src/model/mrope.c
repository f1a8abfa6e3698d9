/* M-RoPE's positions beside the cache's (see mrope.h). */
#include "model/mrope.h"

#include <stdlib.h>

#include "util/error.h"

int32_t mrope_delta(const mrope_state *s, int32_t seq, int32_t pos) {
    int32_t best = -1, delta = 0;
    for (int32_t i = 0; i < s->n; i++) {
        const mrope_mark *m = &s->marks[i];
        if (m->seq == seq && m->from <= pos && m->from > best) best = m->from, delta = m->delta;
    }
    return delta;
}

int mrope_add_grid(mrope_state *s, int32_t seq, int32_t pos, int32_t nx, int32_t ny) {
    const int32_t n = nx * ny, span = nx > ny ? nx : ny;
    if (span == n) return 0; /* a 1 x n grid moves text on as far as its rows */
    mrope_forget(s, seq, pos + n);
    if (s->n == s->cap) {
        const int32_t cap = s->cap ? 2 * s->cap : 8;
        mrope_mark *m = realloc(s->marks, (size_t)cap * sizeof *m);
        if (!m) return error_set("M-RoPE positions: out of memory");
        s->marks = m;
        s->cap = cap;
    }
    s->marks[s->n++] = (mrope_mark){seq, pos + n, mrope_delta(s, seq, pos) + span - n};
    return 0;
}

void mrope_forget(mrope_state *s, int32_t seq, int32_t pos) {
    int32_t k = 0;
    for (int32_t i = 0; i < s->n; i++)
        if (!((seq < 0 || s->marks[i].seq == seq) && s->marks[i].from > pos)) s->marks[k++] = s->marks[i];
    s->n = k;
}

int mrope_has_marks(const mrope_state *s, int32_t seq) {
    for (int32_t i = 0; i < s->n; i++)
        if (seq < 0 || s->marks[i].seq == seq) return 1;
    return 0;
}

void mrope_fill(const mrope_state *s, const int32_t *pos, const int32_t *seq, int32_t n, int32_t *out) {
    const int32_t t0 = s->grid_nx > 0 ? s->grid_pos0 + mrope_delta(s, s->grid_seq, s->grid_pos0) : 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t t, h, w;
        if (s->grid_nx > 0) {
            const int32_t r = pos[i] - s->grid_pos0;
            t = t0;
            h = t0 + r / s->grid_nx;
            w = t0 + r % s->grid_nx;
        } else {
            t = h = w = pos[i] + mrope_delta(s, seq[i], pos[i]);
        }
        out[i] = t;
        out[n + i] = h;
        out[2 * n + i] = w;
        out[3 * n + i] = 0;
    }
}

void mrope_free(mrope_state *s) {
    free(s->marks);
    *s = (mrope_state){0};
}
