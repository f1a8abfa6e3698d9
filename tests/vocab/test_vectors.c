/*
 * test_vectors — llama.cpp's tokenizer test vectors (shared/vocab/X.gguf with
 * X.gguf.inp / X.gguf.out), read exactly as llama.cpp's test-tokenizer-0
 * does: the inputs are the pieces of the .inp file between separators
 * "\n__ggml_vocab_test__\n" (a piece after the last separator counts only if
 * non-empty), the .out file has one line of space-separated ids per input.
 * Each input is tokenized without BOS/EOS and without parsing specials and
 * must give exactly the expected ids.
 *
 * Round trip: detokenize(tokenize(x)) == x for every input (these are valid
 * UTF-8 without special-token text): for SPM with the leading-space removal,
 * for BPE without the clean-up pass (and with it, for inputs the clean-up
 * leaves alone).
 */
#include <dirent.h>

#include "test_util.h"

static const char SEP[] = "\n__ggml_vocab_test__\n";

typedef struct vectors {
    char **inp;
    size_t *inp_len;
    char **out;
    size_t n_inp, n_out;
} vectors;

static void split_inputs(char *raw, size_t len, vectors *t) {
    size_t pos = 0, cap = 16;
    t->inp = malloc(cap * sizeof *t->inp);
    t->inp_len = malloc(cap * sizeof *t->inp_len);
    while (pos < len) {
        if (t->n_inp == cap) {
            cap *= 2;
            t->inp = realloc(t->inp, cap * sizeof *t->inp);
            t->inp_len = realloc(t->inp_len, cap * sizeof *t->inp_len);
        }
        char *next = memmem(raw + pos, len - pos, SEP, sizeof SEP - 1);
        size_t end = next ? (size_t)(next - raw) : len;
        t->inp[t->n_inp] = raw + pos;
        t->inp_len[t->n_inp] = end - pos;
        t->n_inp++;
        if (!next) break;
        pos = end + sizeof SEP - 1;
    }
}

static void split_lines(char *raw, vectors *t) {
    size_t cap = 16;
    t->out = malloc(cap * sizeof *t->out);
    char *p = raw;
    while (*p) {
        if (t->n_out == cap) {
            cap *= 2;
            t->out = realloc(t->out, cap * sizeof *t->out);
        }
        char *nl = strchr(p, '\n');
        t->out[t->n_out++] = p;
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
}

static size_t parse_ids(const char *line, int32_t *ids, size_t cap) {
    size_t n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\r' || *p == '\t') p++;
        if (!*p) break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (n < cap) ids[n] = (int32_t)x;
        n++;
        p = end;
    }
    return n;
}

/* Would llama.cpp's clean-up pass change s? (" ?", " !", " .", " ,", " '") */
static bool cleanup_touches(const char *s, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (s[i - 1] == ' ' && strchr("?!.,'", s[i])) return true;
    return false;
}

static int run_file(const char *name) {
    char rel[4096 + 16], path[8192];
    if (snprintf(rel, sizeof rel, "vocab/%s", name) >= (int)sizeof rel) return 0;
    vocab *v = load_shared_vocab(rel);
    EXPECT(v != NULL, "%s does not load", name);
    if (!v) return 0;

    size_t inp_len = 0;
    snprintf(path, sizeof path, "%s.inp", harness_shared_path(rel).s);
    char *inp = harness_read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s.out", harness_shared_path(rel).s);
    char *out = harness_read_file(path, NULL);
    EXPECT(inp && out, "%s: missing .inp or .out", name);
    if (!inp || !out) {
        vocab_free(v);
        free(inp);
        free(out);
        return 0;
    }
    vectors t = {0};
    split_inputs(inp, inp_len, &t);
    split_lines(out, &t);
    EXPECT(t.n_inp == t.n_out && t.n_inp > 0, "%s: %zu inputs but %zu output lines", name,
           t.n_inp, t.n_out);

    size_t passed = 0, roundtrips = 0;
    for (size_t i = 0; i < t.n_inp && i < t.n_out; i++) {
        int32_t want[4096];
        size_t n_want = parse_ids(t.out[i], want, 4096);
        vocab_tokens got = {0};
        int rc = vocab_tokenize(v, t.inp[i], t.inp_len[i], false, false, &got);
        EXPECT(rc == 0, "%s: input %zu: %s", name, i, error_get());
        char what[16500];
        snprintf(what, sizeof what, "%s input %zu", name, i);
        if (expect_tokens(what, t.inp[i], t.inp_len[i], rc, &got, want, n_want)) passed++;

        /* Round trip. */
        char *text = NULL;
        size_t text_len = 0;
        unsigned flags = vocab_get_type(v) == VOCAB_TYPE_BPE ? VOCAB_DETOK_NO_CLEANUP : 0;
        rc = vocab_detokenize(v, got.ids, got.n, flags, &text, &text_len);
        EXPECT(rc == 0 && text_len == t.inp_len[i] && (text_len == 0 || memcmp(text, t.inp[i], text_len) == 0),
               "%s: input %zu does not round-trip (got %zu bytes)", name, i, text_len);
        if (rc == 0 && text_len == t.inp_len[i] && memcmp(text, t.inp[i], text_len) == 0)
            roundtrips++;
        free(text);
        if (!cleanup_touches(t.inp[i], t.inp_len[i])) {
            rc = vocab_detokenize(v, got.ids, got.n, 0, &text, &text_len);
            EXPECT(rc == 0 && text_len == t.inp_len[i] && memcmp(text, t.inp[i], text_len) == 0,
                   "%s: input %zu does not round-trip with clean-up", name, i);
            free(text);
        }
        vocab_tokens_free(&got);
    }
    printf("%s: %zu/%zu vectors exact, %zu/%zu round-trip\n", name, passed, t.n_inp, roundtrips,
           t.n_inp);
    free(t.inp);
    free(t.inp_len);
    free(t.out);
    free(inp);
    free(out);
    vocab_free(v);
    return 1;
}

TEST(test_vectors) {
    harness_path vocab_dir = harness_shared_file("vocab");
    const char *dir = vocab_dir.s;
    DIR *d = opendir(dir);
    REQUIRE(d != NULL, "cannot list %s", dir);
    int files = 0;
    struct dirent *e;
    char names[64][256];
    int n_names = 0;
    while ((e = readdir(d)) && n_names < 64) {
        size_t n = strlen(e->d_name);
        if (n > 5 && n < 256 && strcmp(e->d_name + n - 5, ".gguf") == 0)
            snprintf(names[n_names++], 256, "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n_names; i++) files += run_file(names[i]);
    EXPECT(files > 0, "no X.gguf vocabularies in %s", dir);
}

HARNESS_MAIN("vocab vectors", HARNESS_TEST(test_vectors))
