/* Helpers the grammar unit tests share (on harness.h). */
#ifndef TESSERA_TESTS_GRAMMAR_TEST_H
#define TESSERA_TESTS_GRAMMAR_TEST_H

#include <string.h>

#include "grammar/grammar.h"
#include "harness.h"

/* A NULL-terminated list of strings. */
#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

/* 1: text is a complete match of g, 0: a proper prefix of one, -1:
 * rejected. */
static inline int grammar_test_match(const grammar *g, const char *text) {
    grammar_matcher m;
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    int rc = grammar_matcher_accept(&m, text, strlen(text));
    assert_true(rc >= 0);
    int out = rc != 0 ? -1 : grammar_matcher_complete(&m) ? 1 : 0;
    grammar_matcher_free(&m);
    return out;
}

#endif
