/*
 * The server's generated-text rules (serve/text.c): a stop string is cut
 * off even when it arrives over several tokens, the earliest of several
 * wins, a tail that may begin a stop string or is an unfinished UTF-8
 * character is held back from streaming, and nothing is held back wrongly.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "engine.h"

/* Append a piece; returns whether a stop string ended the text. */
static bool feed(serve_request *r, const char *piece) {
    serve_choice *c = &r->choices[0];
    size_t from = c->len;
    if (serve_text_append(c, piece, strlen(piece)) != 0) {
        ADD_FAILURE("out of memory");
        return false;
    }
    return serve_text_check_stop(c, from);
}

static serve_request *with_stops(const char *a, const char *b) {
    serve_request *r = serve_request_new(1);
    if (!r) return NULL;
    if (a) r->stop[r->n_stop++] = strdup(a);
    if (b) r->stop[r->n_stop++] = strdup(b);
    return r;
}

TEST(test_utf8) {
    static const struct {
        const char *s;
        size_t want;
    } cases[] = {
        {"abc", 3},           {"a\xC3", 1},        {"a\xC3\xA9", 3},        {"\xE2\x82", 0},
        {"x\xE2\x82\xAC", 4}, {"\xF0\x9F\x98", 0}, {"\xF0\x9F\x98\x80", 4}, {"", 0},
        {"\x80\x80", 2}, /* stray continuation bytes: nothing to wait for */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got = serve_utf8_complete(cases[i].s, strlen(cases[i].s));
        EXPECT(got == cases[i].want, "utf8_complete case %zu: %zu, want %zu", i, got, cases[i].want);
    }
}

TEST(test_stop_over_pieces) {
    serve_request *r = with_stops("END", NULL);
    EXPECT(!feed(r, "hello E"), "stopped early");
    EXPECT(r->choices[0].n_ready == 6, "ready %zu, want 6 ('E' may start END)", r->choices[0].n_ready);
    EXPECT(!feed(r, "N"), "stopped early");
    EXPECT(r->choices[0].n_ready == 6, "ready %zu, want 6 ('EN' may start END)", r->choices[0].n_ready);
    EXPECT(feed(r, "D and more"), "END not found");
    EXPECT(r->choices[0].len == 6 && !strcmp(r->choices[0].text, "hello "), "text '%s', want 'hello '", r->choices[0].text);
    serve_request_free(r);
}

TEST(test_earliest_stop) {
    serve_request *r = with_stops("cd", "b");
    EXPECT(feed(r, "abcd"), "no stop found");
    EXPECT(!strcmp(r->choices[0].text, "a"), "text '%s', want 'a'", r->choices[0].text);
    serve_request_free(r);
}

TEST(test_false_start) {
    serve_request *r = with_stops("abc", NULL);
    EXPECT(!feed(r, "xab"), "stopped early");
    EXPECT(r->choices[0].n_ready == 1, "ready %zu, want 1", r->choices[0].n_ready);
    EXPECT(!feed(r, "x"), "abx is no stop");
    EXPECT(r->choices[0].n_ready == 4, "ready %zu, want 4 after the false start", r->choices[0].n_ready);
    serve_request_free(r);
}

TEST(test_utf8_held) {
    serve_request *r = with_stops(NULL, NULL);
    EXPECT(!feed(r, "caf\xC3"), "stopped");
    EXPECT(r->choices[0].n_ready == 3, "ready %zu, want 3 (half an e-acute)", r->choices[0].n_ready);
    EXPECT(!feed(r, "\xA9!"), "stopped");
    EXPECT(r->choices[0].n_ready == 6, "ready %zu, want 6", r->choices[0].n_ready);
    serve_request_free(r);
}

TEST(test_stop_in_one_piece_and_prefix) {
    serve_request *r = with_stops("\n\n", NULL);
    EXPECT(feed(r, "\n\nrest"), "stop at the very start not found");
    EXPECT(r->choices[0].len == 0, "text not empty");
    serve_request_free(r);
}

HARNESS_MAIN("serve text", HARNESS_TEST(test_utf8), HARNESS_TEST(test_stop_over_pieces),
             HARNESS_TEST(test_earliest_stop), HARNESS_TEST(test_false_start), HARNESS_TEST(test_utf8_held),
             HARNESS_TEST(test_stop_in_one_piece_and_prefix))
