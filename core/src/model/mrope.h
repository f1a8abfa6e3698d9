/*
 * mrope — M-RoPE's positions (qwen2vl) beside the cache's.
 *
 * The cache counts one position per token or medium row, as for every
 * model. M-RoPE turns a text token by (p, p, p) and an image's rows by
 * (t0, t0 + row, t0 + col), after which text goes on at t0 + max(rows,
 * cols), as llama.cpp's libmtmd places them (its chunk's n_pos): so past an
 * image the rope position of a text token is its cache position plus a
 * delta. A context keeps, per sequence, the cache positions from which the
 * delta changes (marks); forgetting positions drops the marks past them.
 */
#ifndef TESSERA_MODEL_MROPE_H
#define TESSERA_MODEL_MROPE_H

#include <stdint.h>

typedef struct mrope_mark {
    int32_t seq, from, delta; /* from cache position `from` on, text turns at position + delta */
} mrope_mark;

typedef struct mrope_state {
    mrope_mark *marks;
    int32_t n, cap;
    /* during a decode of a grid's rows (tessera_decode_embd_grid): its
     * columns (0: none), its first row's cache position and sequence */
    int32_t grid_nx, grid_pos0, grid_seq;
} mrope_state;

/* The delta at cache position pos of seq. */
int32_t mrope_delta(const mrope_state *s, int32_t seq, int32_t pos);
/* After a grid of nx x ny rows decoded at pos: text from pos + nx*ny on
 * turns max(nx, ny) past the grid's first position. */
int mrope_add_grid(mrope_state *s, int32_t seq, int32_t pos, int32_t nx, int32_t ny);
/* Positions >= pos of seq forgotten (seq < 0: every sequence). */
void mrope_forget(mrope_state *s, int32_t seq, int32_t pos);
/* Whether seq (< 0: any) holds a grid. */
int mrope_has_marks(const mrope_state *s, int32_t seq);
/* Rows of positions for n tokens: out [4 * n] (t row, h row, w row, e row). */
void mrope_fill(const mrope_state *s, const int32_t *pos, const int32_t *seq, int32_t n, int32_t *out);
void mrope_free(mrope_state *s);

#endif
