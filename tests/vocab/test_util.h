/*
 * test_util — small helpers shared by the vocab tests: reading files,
 * locating the shared reference data, loading a vocabulary, reporting.
 */
#ifndef TESSERA_TESTS_VOCAB_UTIL_H
#define TESSERA_TESTS_VOCAB_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/error.h"
#include "vocab/vocab.h"

#define SKIP 77

static int g_failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            g_failures++;                                                 \
        }                                                                 \
    } while (0)

/* Whole file in a malloc'd buffer (NUL-terminated); NULL if unreadable. */
static inline char *read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    fclose(fp);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static inline const char *shared_dir(void) {
    const char *s = getenv("TESSERA_SHARED");
    return s && *s ? s : "../shared";
}

static inline void shared_path(char *out, size_t size, const char *rel) {
    int w = snprintf(out, size, "%s/%s", shared_dir(), rel);
    if (w < 0 || (size_t)w >= size) {
        fprintf(stderr, "path too long: %s/%s\n", shared_dir(), rel);
        exit(1);
    }
}

/* Load the vocabulary of a GGUF under shared/; NULL (and a message) if the
 * file is missing or does not load. */
static inline vocab *load_shared_vocab(const char *rel) {
    char path[4096];
    shared_path(path, sizeof path, rel);
    gguf_file *f = gguf_open(path);
    if (!f) {
        fprintf(stderr, "cannot open %s: %s\n", path, error_get());
        return NULL;
    }
    vocab *v = vocab_load(f);
    if (!v) fprintf(stderr, "cannot load vocabulary of %s: %s\n", path, error_get());
    gguf_close(f);
    return v;
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

static inline int finish(const char *name) {
    if (g_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, g_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif
