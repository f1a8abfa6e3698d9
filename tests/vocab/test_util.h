/*
 * test_util — what the vocab tests share besides harness.h: loading a
 * vocabulary, printing token ids and text.
 */
#ifndef TESSERA_TESTS_VOCAB_UTIL_H
#define TESSERA_TESTS_VOCAB_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "util/error.h"
#include "vocab/vocab.h"

/* The vocabulary of the GGUF at path; NULL (a failure recorded) when it
 * does not open or load. */
static inline vocab *load_vocab_file(const char *path) {
    gguf_file *f = gguf_open(path);
    if (!EXPECT(f != NULL, "cannot open %s: %s", path, error_get())) return NULL;
    vocab *v = vocab_load(f);
    EXPECT(v != NULL, "cannot load vocabulary of %s: %s", path, error_get());
    gguf_close(f);
    return v;
}

/* The vocabulary of $TESSERA_SHARED/rel: skips the test when the file is
 * absent, NULL (a failure recorded) when it does not load. */
static inline vocab *load_shared_vocab(const char *rel) {
    return load_vocab_file(harness_shared_file(rel).s);
}

static inline void print_ids(FILE *fp, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(fp, " %d", ids[i]);
}

static inline void print_escaped(FILE *fp, const char *s, size_t n) {
    fputc('\'', fp);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", fp);
        else if (c == '\t') fputs("\\t", fp);
        else if (c < 0x20) fprintf(fp, "\\x%02x", c);
        else fputc(c, fp);
    }
    fputc('\'', fp);
}

/* got (rc: vocab_tokenize's status) are the tokens want of text; else a
 * failure named by what, with the text and both id lists. */
static inline bool expect_tokens(const char *what, const char *text, size_t len, int rc, const vocab_tokens *got,
                                 const int32_t *want, size_t n_want) {
    bool same = rc == 0 && got->n == n_want && (n_want == 0 || memcmp(got->ids, want, n_want * 4) == 0);
    if (!same) {
        ADD_FAILURE("%s: the tokens differ", what);
        printf("  text ");
        print_escaped(stdout, text, len);
        printf("\n  want:");
        print_ids(stdout, want, n_want);
        printf("\n  got: ");
        print_ids(stdout, got->ids, got->n);
        printf("\n");
    }
    return same;
}

#endif
