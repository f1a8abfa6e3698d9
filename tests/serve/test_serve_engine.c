/*
 * The server's engine as a library, without HTTP (serve/engine.h): over
 * stories260K on two slots, two greedy requests with the same prompt run
 * at once and give the same tokens; a reader's views follow them as they
 * grow (the way a stream reads); a job handed to the engine thread runs
 * between its steps; after the engine stops, jobs and requests are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "harness.h"

static serve_request *request(tessera_model *m, const char *text, int32_t max_tokens) {
    serve_request *r = serve_request_new(1);
    REQUIRE(r != NULL, "out of memory");
    r->prompt = malloc(64 * sizeof *r->prompt);
    REQUIRE(r->prompt != NULL, "out of memory");
    r->n_prompt = tessera_tokenize(m, text, strlen(text), r->prompt, 64, true, false);
    REQUIRE(r->n_prompt > 0, "tokenize: %s", tessera_last_error());
    r->max_tokens = max_tokens;
    r->top_logprobs = 2;
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = 0; /* greedy */
    r->choices[0].sampler = tessera_sampler_new(tessera_model_n_vocab(m), &sp);
    REQUIRE(r->choices[0].sampler != NULL, "sampler: %s", tessera_last_error());
    for (int32_t i = 0; i < r->n_prompt; i++) tessera_sampler_accept(r->choices[0].sampler, r->prompt[i]);
    return r;
}

static void job(void *arg) { ++*(int *)arg; }

/* Tokens each request generates: enough that the engine cannot finish them
 * between two of the reader's wake-ups (24 tokens of stories260K took a
 * couple of milliseconds, and the reader at times saw only the end). */
enum { N_GEN = 160 };

TEST(test_engine) {
    harness_host_start();
    harness_path path = harness_model_file("stories260K");
    tessera_model *m = harness_model_load(path.s, NULL, NULL);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = 2;
    tessera_context *ctx = harness_context(m, &cp);
    serve_engine_params ep = {.model = m, .ctx = ctx, .n_slots = 2, .max_queue = 2, .slot_ctx = 256, .n_keep = -1};
    serve_engine *e = serve_engine_new(&ep);
    REQUIRE(e != NULL && serve_engine_start(e) == 0, "engine");

    serve_request *r[2] = {request(m, "Once upon a time", N_GEN), request(m, "Once upon a time", N_GEN)};
    for (int k = 0; k < 2; k++) REQUIRE(serve_engine_submit(e, r[k]) == 0, "submit %d", k);
    int ran = 0;
    EXPECT(serve_engine_run(e, job, &ran) == 0 && ran == 1, "a job on the engine thread");

    /* r[0] read as a stream reads it: wait for progress, copy, look */
    serve_request *view = NULL;
    uint64_t seen = 0;
    size_t last_len = 0;
    int updates = 0;
    for (int i = 0; i < 2000; i++) {
        serve_engine_wait(e, r[0], seen, 50);
        serve_request_lock(r[0]);
        REQUIRE(serve_request_view_sync(&view, r[0]) == 0, "view");
        serve_request_unlock(r[0]);
        EXPECT(view->choices[0].len >= last_len || view->choices[0].state == SERVE_DONE, "the text went back");
        updates += view->progress != seen;
        seen = view->progress;
        last_len = view->choices[0].len;
        if (view->state == SERVE_DONE) break;
    }
    REQUIRE(view->state == SERVE_DONE, "r[0] not done");
    while (!serve_engine_wait(e, r[1], UINT64_MAX, 50)) {
    }
    serve_request_lock(r[0]);
    serve_request_lock(r[1]);
    const serve_choice *a = &r[0]->choices[0], *b = &r[1]->choices[0];
    EXPECT(!r[0]->error[0] && !r[1]->error[0], "errors: '%s' '%s'", r[0]->error, r[1]->error);
    EXPECT(a->n_gen == N_GEN && !strcmp(a->finish_reason, "length"), "%d tokens, finish %s", a->n_gen,
           a->finish_reason);
    EXPECT(a->n_toks == b->n_toks && !memcmp(a->toks, b->toks, (size_t)a->n_toks * sizeof *a->toks),
           "two greedy runs of one prompt differ");
    EXPECT(a->len == b->len && !memcmp(a->text, b->text, a->len), "texts differ");
    EXPECT(a->n_lp == (size_t)a->n_toks && a->lp[0].n_top == 2 && a->lp[0].top_id[0] == a->toks[0],
           "logprobs: %zu for %d tokens", a->n_lp, a->n_toks);
    EXPECT(view->choices[0].len == a->len && !memcmp(view->choices[0].text, a->text, a->len), "the view's text");
    EXPECT(view->choices[0].n_lp == a->n_lp, "the view's logprobs");
    serve_request_unlock(r[1]);
    serve_request_unlock(r[0]);
    EXPECT(updates > 1, "the reader saw the request grow %d times", updates);
    serve_request_view_free(view);
    for (int k = 0; k < 2; k++) serve_engine_release(e, r[k]);

    serve_engine_stop(e);
    EXPECT(serve_engine_run(e, job, &ran) == -1 && ran == 1, "a job after stop ran");
    serve_request *late = request(m, "Once", 4);
    EXPECT(serve_engine_submit(e, late) == -2, "a request after stop taken");
    serve_request_free(late);
    serve_engine_free(e);
    tessera_context_free(ctx);
    tessera_model_free(m);
}

HARNESS_MAIN("serve engine", HARNESS_TEST(test_engine))
