/*
 * A reader's copy of a request's output (serve/view.c): the view follows
 * the request's text (also when a stop string cuts it back), its tokens,
 * logprobs and prompt marks, and keeps the reader's own send cursors.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "harness.h"

static void add(serve_request *r, const char *piece, tessera_token t) {
    serve_choice *c = &r->choices[0];
    size_t from = c->len;
    REQUIRE(serve_text_append(c, piece, strlen(piece)) == 0, "out of memory");
    serve_text_check_stop(c, from);
    c->toks = realloc(c->toks, (size_t)(c->n_toks + 1) * sizeof *c->toks);
    c->toks[c->n_toks++] = t;
    c->lp = realloc(c->lp, (c->n_lp + 1) * sizeof *c->lp);
    c->lp[c->n_lp++] = (serve_logprob){.token = t, .logprob = -0.5f, .offset = from, .len = (uint32_t)strlen(piece)};
    r->progress++;
}

TEST(test_view_follows) {
    serve_request *r = serve_request_new(1);
    REQUIRE(r != NULL, "out of memory");
    r->stop[r->n_stop++] = strdup("END");
    serve_request *v = NULL;
    add(r, "Once", 10);
    REQUIRE(serve_request_view_sync(&v, r) == 0, "sync");
    EXPECT(v->choices[0].len == 4 && !strcmp(v->choices[0].text, "Once"), "text '%s'", v->choices[0].text);
    EXPECT(v->progress == r->progress && v->choices[0].req == v, "progress, owner");
    /* the reader sends what it has: its cursor stays its own */
    v->choices[0].sent_content = 4;
    v->choices[0].sent_lp = 1;
    v->choices[0].opened = true;
    add(r, " upon E", 11);
    add(r, "ND", 12); /* the stop string cuts the text back to "Once upon " */
    REQUIRE(serve_request_view_sync(&v, r) == 0, "sync");
    const serve_choice *c = &v->choices[0];
    EXPECT_STR(c->text, "Once upon ", "text after the stop string");
    EXPECT(c->len == r->choices[0].len && c->n_ready == r->choices[0].n_ready, "len %zu, ready %zu", c->len,
           c->n_ready);
    EXPECT(c->n_toks == 3 && c->toks[0] == 10 && c->toks[2] == 12, "tokens");
    EXPECT(c->n_lp == 3 && c->lp[1].token == 11 && c->lp[1].offset == 4, "logprobs");
    EXPECT(c->sent_content == 4 && c->sent_lp == 1 && c->opened, "the reader's cursors were overwritten");
    EXPECT(r->choices[0].sent_content == 0, "the request's own cursor moved");
    EXPECT(c->text != r->choices[0].text && c->lp != r->choices[0].lp, "the view shares the engine's buffers");
    serve_request_view_free(v);
    serve_request_free(r);
}

TEST(test_view_marks) {
    serve_request *r = serve_request_new(2);
    REQUIRE(r != NULL, "out of memory");
    serve_request *v = NULL;
    REQUIRE(serve_request_view_sync(&v, r) == 0, "an empty request");
    EXPECT(v->n_choices == 2 && v->choices[1].len == 0 && v->choices[1].text[0] == '\0', "empty choices");
    r->marks = calloc(3, sizeof *r->marks);
    r->cap_marks = 3;
    r->marks[r->n_marks++] = (serve_prompt_mark){.processed = 5, .ms = 1.0};
    REQUIRE(serve_request_view_sync(&v, r) == 0, "sync");
    v->sent_marks = 1;
    r->marks[r->n_marks++] = (serve_prompt_mark){.processed = 9, .ms = 2.0};
    REQUIRE(serve_request_view_sync(&v, r) == 0, "sync");
    EXPECT(v->n_marks == 2 && v->marks[1].processed == 9 && v->marks != r->marks, "marks");
    EXPECT(v->sent_marks == 1, "the reader's mark cursor");
    serve_request_view_free(v);
    serve_request_free(r);
}

HARNESS_MAIN("serve view", HARNESS_TEST(test_view_follows), HARNESS_TEST(test_view_marks))
