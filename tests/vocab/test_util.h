/*
 * test_util — what the vocab tests share besides harness.h: loading a
 * vocabulary, printing token ids and text.
 */
#ifndef TESSERA_TESTS_VOCAB_UTIL_H
#define TESSERA_TESTS_VOCAB_UTIL_H

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

#endif
