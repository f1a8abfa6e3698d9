/*
 * test_robust — hostile and extreme input on the real vocabularies
 * (llama-spm and gpt-2 from shared/vocab, stories260K's):
 *   - empty text; add_special on empty text;
 *   - random bytes (mostly invalid UTF-8): no failure, ids in range; SPM
 *     round-trips them exactly (byte fallback), BPE gives back the text with
 *     each invalid byte replaced by U+FFFD;
 *   - random valid UTF-8 from many scripts: exact round trip;
 *   - long runs (one 200 KB word, 200 KB of spaces / newlines / CJK);
 *   - special-token parsing on and off;
 *   - one vocabulary shared by 4 threads tokenizing at once gives each the
 *     same ids as a single thread (the vocabulary is immutable).
 */
#include <pthread.h>

#include "test_util.h"
#include "vocab/utf8.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static bool ids_in_range(const vocab *v, const vocab_tokens *t) {
    for (size_t i = 0; i < t->n; i++)
        if (t->ids[i] < 0 || t->ids[i] >= vocab_n_tokens(v)) return false;
    return true;
}

/* The text as the BPE pipeline sees it: invalid bytes as U+FFFD. */
static char *sanitize(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    for (size_t off = 0; off < n;) k += utf8_encode(utf8_decode(s, n, &off), o + k);
    *out_n = k;
    return o;
}

static bool contains(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

/* detokenize(tokenize(text)) against want[0..want_n). */
static bool round_trip(const vocab *v, const char *text, size_t n, const char *want,
                       size_t want_n, unsigned flags) {
    vocab_tokens t = {0};
    bool ok = vocab_tokenize(v, text, n, false, false, &t) == 0 && ids_in_range(v, &t);
    char *out = NULL;
    size_t out_n = 0;
    ok = ok && vocab_detokenize(v, t.ids, t.n, flags, &out, &out_n) == 0;
    ok = ok && out_n == want_n && memcmp(out, want, want_n) == 0;
    free(out);
    vocab_tokens_free(&t);
    return ok;
}

static void test_empty(const vocab *v, const char *name) {
    vocab_tokens t = {0};
    EXPECT(vocab_tokenize(v, "", 0, false, false, &t) == 0 && t.n == 0, "%s: empty -> []", name);
    EXPECT(vocab_tokenize(v, NULL, 0, true, true, &t) == 0, "%s: NULL, 0", name);
    size_t want = vocab_add_bos(v) ? 1 : 0;
    EXPECT(t.n == want && (!want || t.ids[0] == vocab_bos(v)), "%s: empty + special -> [BOS?]",
           name);
    char *text = NULL;
    size_t len = 1;
    EXPECT(vocab_detokenize(v, NULL, 0, 0, &text, &len) == 0 && len == 0 && text[0] == '\0',
           "%s: detokenize([]) == \"\"", name);
    free(text);
    vocab_tokens_free(&t);
}

static void test_random_bytes(const vocab *v, const char *name) {
    bool spm = vocab_get_type(v) == VOCAB_TYPE_SPM;
    int bad = 0, checked = 0;
    for (int iter = 0; iter < 300; iter++) {
        size_t n = next_u32() % 600;
        char *s = malloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = next_u32();
            /* a mix of ASCII, spaces and high bytes */
            s[i] = (char)(r % 4 == 0 ? ' ' : r % 4 == 1 ? 'a' + (r >> 8) % 26 : (r >> 8) & 0xFF);
            /* SPM escapes ' ' to U+2581 before splitting into UTF-8
             * sequences: a lead byte just before a space would swallow part
             * of it and come back as raw bytes (llama.cpp does the same).
             * Keep such lead bytes away from spaces for the exact check. */
            if (spm && s[i] == ' ')
                for (size_t k = 1; k <= 3 && k <= i; k++)
                    if ((uint8_t)s[i - k] >= 0xC0) s[i] = 'a';
        }
        if (spm) {
            /* Exact, unless the bytes spell U+2581 (SPM's escaped space) */
            if (contains(s, n, "\xe2\x96\x81")) {
                free(s);
                continue;
            }
            bad += !round_trip(v, s, n, s, n, VOCAB_DETOK_UNPARSE_SPECIAL);
        } else {
            size_t want_n;
            char *want = sanitize(s, n, &want_n);
            bad += !round_trip(v, s, n, want, want_n,
                               VOCAB_DETOK_NO_CLEANUP | VOCAB_DETOK_UNPARSE_SPECIAL);
            free(want);
        }
        checked++;
        free(s);
    }
    EXPECT(bad == 0, "%s: %d of %d random byte strings did not round-trip", name, bad, checked);
    printf("%s: %d random byte strings round-trip\n", name, checked);
}

static void test_random_utf8(const vocab *v, const char *name) {
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0x24F},    {0x370, 0x3FF},
        {0x400, 0x4FF},   {0x590, 0x6FF},   {0x900, 0x97F},   {0xE00, 0xE7F},
        {0x1780, 0x17FF}, {0x2000, 0x206F}, {0x3000, 0x30FF}, {0x4E00, 0x9FFF},
        {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF},
    };
    size_t n_ranges = sizeof ranges / sizeof ranges[0];
    int bad = 0;
    for (int iter = 0; iter < 300; iter++) {
        char s[4 * 200];
        size_t n = 0, cps = 1 + next_u32() % 150;
        for (size_t i = 0; i < cps; i++) {
            const uint32_t *r = ranges[next_u32() % n_ranges];
            uint32_t c = r[0] + next_u32() % (r[1] - r[0] + 1);
            if (c >= 0xD800 && c <= 0xDFFF) c = 'x';
            n += utf8_encode(c, s + n);
        }
        if (contains(s, n, "\xe2\x96\x81")) continue; /* U+2581 is SPM's space */
        unsigned flags = VOCAB_DETOK_NO_CLEANUP | VOCAB_DETOK_UNPARSE_SPECIAL;
        if (!round_trip(v, s, n, s, n, flags)) {
            if (bad++ < 3) {
                fprintf(stderr, "no round trip (%s): ", name);
                print_escaped(stderr, s, n);
                fprintf(stderr, "\n");
            }
        }
    }
    EXPECT(bad == 0, "%s: %d random UTF-8 strings did not round-trip", name, bad);
}

static void test_long(const vocab *v, const char *name) {
    static const char *const units[] = {"a", " ", "\n", "\xe4\xb8\xad", "ab ", "\xff"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = strlen(units[u]), n = 0, want = 200 * 1000;
        char *s = malloc(want + 8);
        while (n + ul <= want) {
            memcpy(s + n, units[u], ul);
            n += ul;
        }
        vocab_tokens t = {0};
        int rc = vocab_tokenize(v, s, n, false, false, &t);
        EXPECT(rc == 0 && t.n > 0 && ids_in_range(v, &t), "%s: long run of '%s' fails: %s", name,
               units[u], error_get());
        if (units[u][0] != '\xff') {
            char *out = NULL;
            size_t out_n = 0;
            unsigned flags = VOCAB_DETOK_NO_CLEANUP;
            EXPECT(vocab_detokenize(v, t.ids, t.n, flags, &out, &out_n) == 0 && out_n == n &&
                      memcmp(out, s, n) == 0,
                   "%s: long run %zu does not round-trip", name, u);
            free(out);
        }
        vocab_tokens_free(&t);
        free(s);
    }
}

static void test_specials(const vocab *v, const char *name) {
    vocab_tokens on = {0}, off = {0}, plain = {0};
    int32_t eos = vocab_eos(v);
    size_t eos_len = 0;
    const char *eos_text = vocab_token_text(v, eos, &eos_len);
    EXPECT(eos_text != NULL, "%s: eos has text", name);
    if (!eos_text) return;
    char s[256];
    int n = snprintf(s, sizeof s, "Hi%.*s", (int)eos_len, eos_text);
    EXPECT(vocab_tokenize(v, s, (size_t)n, false, true, &on) == 0, "x");
    EXPECT(vocab_tokenize(v, s, (size_t)n, false, false, &off) == 0, "x");
    EXPECT(vocab_tokenize(v, "Hi", 2, false, false, &plain) == 0, "x");
    EXPECT(on.n == plain.n + 1 && memcmp(on.ids, plain.ids, plain.n * 4) == 0 &&
              on.ids[on.n - 1] == eos,
           "%s: parse_special: 'Hi' + EOS text -> tokens('Hi') + [EOS]", name);
    bool has_eos = false;
    for (size_t i = 0; i < off.n; i++) has_eos |= off.ids[i] == eos;
    EXPECT(!has_eos || vocab_get_type(v) == VOCAB_TYPE_SPM,
           "%s: without parse_special the EOS text stays text", name);
    EXPECT(vocab_is_eog(v, eos), "%s: EOS ends generation", name);
    vocab_tokens_free(&on);
    vocab_tokens_free(&off);
    vocab_tokens_free(&plain);
}

typedef struct job {
    const vocab *v;
    const char *text;
    size_t len;
    vocab_tokens out;
    int rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->rc = 0;
    for (int rep = 0; rep < 20 && j->rc == 0; rep++) {
        j->out.n = 0;
        j->rc = vocab_tokenize(j->v, j->text, j->len, true, true, &j->out);
    }
    return NULL;
}

static void test_threads(const vocab *v, const char *name) {
    const char *text = "Hello, y'all! How are you \xf0\x9f\x98\x81 ?\xe6\x88\x91 1314151 "
                       "don't  \n\n  stop";
    vocab_tokens ref = {0};
    EXPECT(vocab_tokenize(v, text, strlen(text), true, true, &ref) == 0, "x");
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){.v = v, .text = text, .len = strlen(text)};
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        EXPECT(jobs[i].rc == 0 && jobs[i].out.n == ref.n &&
                  memcmp(jobs[i].out.ids, ref.ids, ref.n * sizeof *ref.ids) == 0,
               "%s: thread %d differs", name, i);
        vocab_tokens_free(&jobs[i].out);
    }
    vocab_tokens_free(&ref);
}

static void check_vocab(const char *rel) {
    vocab *v = load_shared_vocab(rel);
    if (!v) return;
    test_empty(v, rel);
    test_random_bytes(v, rel);
    test_random_utf8(v, rel);
    test_long(v, rel);
    test_specials(v, rel);
    test_threads(v, rel);
    vocab_free(v);
}

TEST(test_llama_spm) {
    check_vocab("vocab/ggml-vocab-llama-spm.gguf");
}

TEST(test_gpt2) {
    check_vocab("vocab/ggml-vocab-gpt-2.gguf");
}

TEST(test_stories260K) {
    check_vocab("models/stories260K.gguf");
}

HARNESS_MAIN("vocab robustness", HARNESS_TEST(test_llama_spm), HARNESS_TEST(test_gpt2),
             HARNESS_TEST(test_stories260K))
