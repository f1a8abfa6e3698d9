/*
 * A reader's copy of a request's output (engine.h: serve_request_view_sync).
 * The engine appends to a request under the request's lock; an HTTP
 * thread copies what is new into its view under that lock, a few memcpy,
 * and renders JSON from the view after letting go. Logprobs, tokens and prompt marks
 * only grow, so only their new entries are copied; the text may be cut
 * back at a stop string, so it is copied whole (bytes, not JSON).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* *buf holds at least n elements of size elem; 0, or -1 (unchanged). */
static int reserve(void **buf, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < n) c *= 2;
    void *b = realloc(*buf, c * elem);
    if (!b) return -1;
    *buf = b;
    *cap = c;
    return 0;
}

typedef struct choice_buffers {
    size_t text_cap, lp_cap, toks_cap;
} choice_buffers;

/* The view's own buffers per choice sit after its choices array. */
static choice_buffers *buffers_of(serve_request *v) { return (choice_buffers *)(v->choices + v->n_choices); }

int serve_request_view_sync(serve_request **view, const serve_request *r) {
    serve_request *v = *view;
    if (!v) {
        v = calloc(1, sizeof *v);
        if (!v) return -1;
        v->n_choices = r->n_choices;
        v->choices = calloc(1, (size_t)r->n_choices * (sizeof *v->choices + sizeof(choice_buffers)));
        if (!v->choices) {
            free(v);
            return -1;
        }
        *view = v;
    }
    choice_buffers *cb = buffers_of(v);
    /* Room first, so that running out of memory leaves the view as it was. */
    for (int32_t i = 0; i < r->n_choices; i++) {
        const serve_choice *c = &r->choices[i];
        serve_choice *d = &v->choices[i];
        if (reserve((void **)&d->text, &cb[i].text_cap, c->len + 1, 1) != 0 ||
            reserve((void **)&d->lp, &cb[i].lp_cap, c->n_lp, sizeof *d->lp) != 0 ||
            reserve((void **)&d->toks, &cb[i].toks_cap, (size_t)c->n_toks, sizeof *d->toks) != 0)
            return -1;
    }
    size_t marks_cap = (size_t)v->cap_marks;
    if (reserve((void **)&v->marks, &marks_cap, (size_t)r->n_marks, sizeof *v->marks) != 0) return -1;

    /* Everything of r by value but what other threads share (cancelled,
     * refs: atomic; the lock and condition), then the view's own buffers
     * and cursors back. */
    serve_choice *choices = v->choices;
    serve_prompt_mark *marks = v->marks;
    const int32_t n_marks = v->n_marks, sent_marks = v->sent_marks;
    const size_t shared_at = offsetof(serve_request, cancelled), shared_end = offsetof(serve_request, t_submit_ms);
    _Static_assert(offsetof(serve_request, refs) > offsetof(serve_request, cancelled) &&
                       offsetof(serve_request, cond) < offsetof(serve_request, t_submit_ms) &&
                       offsetof(serve_request, mu) < offsetof(serve_request, t_submit_ms),
                   "serve_request's shared fields lie between cancelled and t_submit_ms");
    memcpy(v, r, shared_at);
    memcpy((char *)v + shared_end, (const char *)r + shared_end, sizeof *v - shared_end);
    v->choices = choices;
    v->marks = marks;
    v->cap_marks = (int32_t)marks_cap;
    v->sent_marks = sent_marks;
    if (r->n_marks > n_marks) memcpy(marks + n_marks, r->marks + n_marks, (size_t)(r->n_marks - n_marks) * sizeof *marks);
    for (int32_t i = 0; i < r->n_choices; i++) {
        const serve_choice *c = &r->choices[i];
        serve_choice *d = &choices[i], was = *d;
        *d = *c;
        d->req = v;
        d->text = was.text;
        d->lp = was.lp;
        d->toks = was.toks;
        d->cap = cb[i].text_cap;
        d->cap_lp = cb[i].lp_cap;
        d->cap_toks = (int32_t)cb[i].toks_cap;
        d->sent_content = was.sent_content;
        d->sent_reasoning = was.sent_reasoning;
        d->sent_lp = was.sent_lp;
        d->sent_toks = was.sent_toks;
        d->opened = was.opened;
        d->closed = was.closed;
        if (c->len) memcpy(d->text, c->text, c->len);
        d->text[c->len] = '\0';
        if (c->n_lp > was.n_lp) memcpy(d->lp + was.n_lp, c->lp + was.n_lp, (c->n_lp - was.n_lp) * sizeof *d->lp);
        if (c->n_toks > was.n_toks)
            memcpy(d->toks + was.n_toks, c->toks + was.n_toks, (size_t)(c->n_toks - was.n_toks) * sizeof *d->toks);
    }
    return 0;
}

void serve_request_view_free(serve_request *v) {
    if (!v) return;
    for (int32_t i = 0; i < v->n_choices; i++) {
        free(v->choices[i].text);
        free(v->choices[i].lp);
        free(v->choices[i].toks);
    }
    free(v->choices);
    free(v->marks);
    free(v);
}
