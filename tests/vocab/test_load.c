/*
 * test_load — vocabularies built by hand in memory:
 *   - broken tokenizer data is one clear error naming the key at fault;
 *   - BPE merges apply by rank, ignore_merges takes whole-word tokens;
 *   - SPM merges by score with byte fallback;
 *   - defaults and overrides of BOS/EOS/add_* keys, EOG detection by text,
 *     user-defined tokens split even without parse_special.
 */
#include "gguf_mini.h"
#include "test_util.h"

/* SPM vocabulary: specials, U+2581, a few merges with scores, bytes for
 * 'x' and '\n'. */
static const char *const spm_tokens[] = {
    "<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab",
    "\xe2\x96\x81" "ab", "<0x78>", "<0x0A>", "<|user|>", "<|eot_id|>",
};
#define SPM_N (sizeof spm_tokens / sizeof spm_tokens[0])
static const float spm_scores[SPM_N] = {0, 0, 0, -1, -2, -2, -3, -1.5f, -0.5f, 0, 0, 0, 0};
static const int32_t spm_types[SPM_N] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 4, 3};

enum { NO_TOKENS = 1, SHORT_SCORES = 2, SHORT_TYPES = 4, FLOAT_TYPES = 8 };

static void spm_base(mini *m, unsigned omit) {
    mini_begin(m);
    kv_str(m, "general.architecture", "llama");
    kv_str(m, "tokenizer.ggml.model", "llama");
    if (!(omit & NO_TOKENS)) kv_arr_str(m, "tokenizer.ggml.tokens", spm_tokens, SPM_N);
    kv_arr_f32(m, "tokenizer.ggml.scores", spm_scores, (omit & SHORT_SCORES) ? SPM_N - 1 : SPM_N);
    if (omit & FLOAT_TYPES)
        kv_arr_f32(m, "tokenizer.ggml.token_type", spm_scores, SPM_N);
    else
        kv_arr_i32(m, "tokenizer.ggml.token_type", spm_types, (omit & SHORT_TYPES) ? 3 : SPM_N);
}

/* Load m's vocabulary; on failure the error must mention every needle. */
static vocab *load_expect(mini *m, bool ok, const char *what, const char *needle1,
                          const char *needle2) {
    gguf_file *f = mini_open(m);
    EXPECT(f != NULL, "%s: image does not open: %s", what, error_get());
    vocab *v = f ? vocab_load(f) : NULL;
    if (ok) {
        EXPECT(v != NULL, "%s: should load: %s", what, error_get());
    } else {
        EXPECT(v == NULL, "%s: should fail", what);
        EXPECT(!needle1 || strstr(error_get(), needle1), "%s: error lacks '%s': %s", what, needle1,
               error_get());
        EXPECT(!needle2 || strstr(error_get(), needle2), "%s: error lacks '%s': %s", what, needle2,
               error_get());
        if (!v) printf("  %-28s -> %s\n", what, error_get());
    }
    gguf_close(f);
    mini_free(m);
    return v;
}

static bool ids_are(const vocab_tokens *t, const int32_t *want, size_t n) {
    return t->n == n && (n == 0 || memcmp(t->ids, want, n * sizeof *want) == 0);
}

TEST(test_errors) {
    mini m;
    printf("errors:\n");
    spm_base(&m, NO_TOKENS);
    load_expect(&m, false, "no tokens", "tokenizer.ggml.tokens", "not found");
    spm_base(&m, SHORT_SCORES);
    load_expect(&m, false, "short scores", "tokenizer.ggml.scores", "12");
    spm_base(&m, SHORT_TYPES);
    load_expect(&m, false, "short token types", "tokenizer.ggml.token_type", "3");
    spm_base(&m, FLOAT_TYPES);
    load_expect(&m, false, "float token types", "tokenizer.ggml.token_type", "float32");

    spm_base(&m, 0);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 99);
    load_expect(&m, false, "bos out of range", "tokenizer.ggml.bos_token_id", "99");

    spm_base(&m, 0);
    kv_u32(&m, "tokenizer.ggml.eos_token_id", 0xFFFFFFFFu);
    kv_bool(&m, "tokenizer.ggml.add_eos_token", true);
    load_expect(&m, false, "add_eos without eos", "tokenizer.ggml.add_eos_token", "eos_token_id");

    mini_begin(&m);
    kv_arr_str(&m, "tokenizer.ggml.tokens", spm_tokens, SPM_N);
    load_expect(&m, false, "no model", "tokenizer.ggml.model", "not found");

    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "t5");
    kv_arr_str(&m, "tokenizer.ggml.tokens", spm_tokens, SPM_N);
    load_expect(&m, false, "unsupported model", "tokenizer.ggml.model", "t5");

    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "llama");
    kv_arr_f32(&m, "tokenizer.ggml.tokens", spm_scores, SPM_N);
    load_expect(&m, false, "tokens not strings", "tokenizer.ggml.tokens", "float32");

    static const char *const dup[] = {"a", "b", "a"};
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "llama");
    kv_arr_str(&m, "tokenizer.ggml.tokens", dup, 3);
    load_expect(&m, false, "duplicate token", "tokenizer.ggml.tokens", "duplicate");

    static const char *const bpe_tokens[] = {"a", "b", "c"};
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_str(&m, "tokenizer.ggml.pre", "gpt-2");
    kv_arr_str(&m, "tokenizer.ggml.tokens", bpe_tokens, 3);
    load_expect(&m, false, "gpt2 without merges", "tokenizer.ggml.merges", "not found");

    static const char *const merges[] = {"a b"};
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_str(&m, "tokenizer.ggml.pre", "klingon-bpe");
    kv_arr_str(&m, "tokenizer.ggml.tokens", bpe_tokens, 3);
    kv_arr_str(&m, "tokenizer.ggml.merges", merges, 1);
    load_expect(&m, false, "unknown pre-tokenizer", "klingon-bpe", "qwen2");
}

TEST(test_spm) {
    mini m;
    spm_base(&m, 0);
    vocab *v = load_expect(&m, true, "spm base", NULL, NULL);
    if (!v) return;
    EXPECT(vocab_get_type(v) == VOCAB_TYPE_SPM, "type");
    EXPECT(vocab_bos(v) == 1 && vocab_eos(v) == 2 && vocab_unk(v) == 0, "llama defaults");
    EXPECT(vocab_add_bos(v) && !vocab_add_eos(v) && vocab_add_space_prefix(v), "spm flags");
    EXPECT(vocab_eot(v) == 12 && vocab_is_eog(v, 12) && vocab_is_eog(v, 2), "eot by text");
    EXPECT(vocab_nl(v) == 10, "newline is <0x0A>, got %d", vocab_nl(v));

    vocab_tokens t = {0};
    /* "ab" -> "▁ab": best-score merges ("▁ab" -0.5 beats "ab" -1.5) */
    EXPECT(vocab_tokenize(v, "ab", 2, false, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){8}, 1), "'ab' -> [8], got %zu ids, first %d", t.n,
           t.n ? t.ids[0] : -1);
    t.n = 0;
    /* "ax\n" -> ▁a, <0x78>, <0x0A>; 'y' has no byte token -> <unk> */
    EXPECT(vocab_tokenize(v, "ax\ny", 4, true, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){1, 6, 9, 10, 0}, 5), "'ax\\ny' byte fallback");
    t.n = 0;
    /* user-defined tokens split even without parse_special; the text after
     * one gets the space prefix again */
    EXPECT(vocab_tokenize(v, "a<|user|>b", 10, false, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){6, 11, 3, 5}, 4), "user-defined split");
    t.n = 0;
    /* control tokens only with parse_special */
    EXPECT(vocab_tokenize(v, "</s>", 4, false, true, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){2}, 1), "parse_special </s>");
    t.n = 0;

    char *text;
    size_t len;
    int32_t ids[] = {1, 6, 3, 5, 2};
    EXPECT(vocab_detokenize(v, ids, 5, 0, &text, &len) == 0, "%s", error_get());
    EXPECT(strcmp(text, " a b") == 0, "detok keeps space after BOS: '%s'", text);
    free(text);
    EXPECT(vocab_detokenize(v, ids + 1, 3, 0, &text, &len) == 0, "%s", error_get());
    EXPECT(strcmp(text, "a b") == 0, "detok strips the prefix space: '%s'", text);
    free(text);
    EXPECT(vocab_detokenize(v, ids, 5, VOCAB_DETOK_UNPARSE_SPECIAL, &text, &len) == 0, "x");
    EXPECT(strcmp(text, "<s> a b</s>") == 0, "unparse special: '%s'", text);
    free(text);
    int32_t bad[] = {6, 13};
    EXPECT(vocab_detokenize(v, bad, 2, 0, &text, &len) == -1 && strstr(error_get(), "13"),
           "bad id is an error naming it: %s", error_get());
    char small[2];
    EXPECT(vocab_token_to_piece(v, 8, small, 2, 0, false) == -3, "needs 3 bytes");
    EXPECT(vocab_token_to_piece(v, 8, small, 2, 1, false) == 2 && memcmp(small, "ab", 2) == 0,
           "lstrip 1");
    EXPECT(vocab_token_to_piece(v, 99, small, 2, 0, false) == INT32_MIN, "bad id");
    int32_t buf[2];
    EXPECT(vocab_tokenize_buf(v, "ax\n", 3, true, false, buf, 2) == -4, "buf too small");
    vocab_tokens_free(&t);
    vocab_free(v);
}

static vocab *bpe_vocab(const char *pre, const char *const *merges, size_t n_merges) {
    static const char *const tokens[] = {"a", "b", "c", "ab", "bc", "abc", "\xc4\xa0", "<|end|>"};
    static const int32_t types[] = {1, 1, 1, 1, 1, 1, 1, 3};
    mini m;
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "gpt2");
    kv_str(&m, "tokenizer.ggml.pre", pre);
    kv_arr_str(&m, "tokenizer.ggml.tokens", tokens, 8);
    kv_arr_i32(&m, "tokenizer.ggml.token_type", types, 8);
    kv_arr_str(&m, "tokenizer.ggml.merges", merges, n_merges);
    kv_u32(&m, "tokenizer.ggml.eos_token_id", 7);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 7);
    return load_expect(&m, true, pre, NULL, NULL);
}

/* "abc" (after BOS when bos) through pre's BPE vocabulary with merges is want. */
static void expect_abc(const char *pre, const char *const *merges, bool bos, const int32_t *want, size_t n,
                       const char *what) {
    vocab *v = bpe_vocab(pre, merges, 3);
    if (!v) return;
    vocab_tokens t = {0};
    EXPECT(vocab_tokenize(v, "abc", 3, bos, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, want, n), "%s", what);
    vocab_tokens_free(&t);
    vocab_free(v);
}

TEST(test_bpe) {
    vocab_tokens t = {0};
    static const char *const bc_first[] = {"b c", "a b", "a bc"};
    vocab *v = bpe_vocab("gpt-2", bc_first, 3);
    if (v) {
        EXPECT(vocab_tokenize(v, "abc", 3, true, false, &t) == 0, "%s", error_get());
        EXPECT(ids_are(&t, (int32_t[]){5}, 1), "b+c (rank 0) then a+bc -> abc");
        EXPECT(!vocab_add_bos(v) && vocab_bos(v) == 7, "gpt-2 adds no BOS");
        EXPECT(vocab_is_eog(v, 7), "eos is eog");
        t.n = 0;
        /* " a": the space is its own byte char, and "Ġa" is no token: the
         * merge-less symbols Ġ and a come out one by one. */
        EXPECT(vocab_tokenize(v, " a", 2, false, false, &t) == 0, "%s", error_get());
        EXPECT(ids_are(&t, (int32_t[]){6, 0}, 2), "' a' -> [6 0], got %zu", t.n);
        t.n = 0;
        vocab_free(v);
    }
    static const char *const ab_first[] = {"a b", "b c", "a bc"};
    expect_abc("gpt-2", ab_first, false, (int32_t[]){3, 2}, 2, "a+b (rank 0) blocks bc -> ab c");
    /* llama-bpe ignores merges for words that are tokens */
    expect_abc("llama-bpe", ab_first, true, (int32_t[]){7, 5}, 2, "llama-bpe adds BOS; ignore_merges: abc whole");
    vocab_tokens_free(&t);
}

static vocab *bert_vocab(int lowercase);

TEST(test_wpm) {
    vocab *v = bert_vocab(-1);
    if (!v) return;
    /* words: hello , world ! unaffable 中 x zz (accents stripped, lowered,
     * punctuation and CJK split off); ',', 'x', 'zz' have no tokens: UNK */
    const char *text = "H\xc3\xa9llo, WORLD! unaffable \xe4\xb8\xadx zz";
    vocab_tokens t = {0};
    EXPECT(vocab_tokenize(v, text, strlen(text), true, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){2, 4, 1, 5, 9, 6, 7, 8, 10, 1, 1, 3}, 12),
           "wordpiece ids (got %zu)", t.n);
    char *out = NULL;
    size_t n = 0;
    EXPECT(vocab_detokenize(v, (int32_t[]){2, 4, 5, 3}, 4, 0, &out, &n) == 0 &&
              strcmp(out, " hello world") == 0,
           "wpm detokenize: '%s'", out ? out : "");
    free(out);
    vocab_free(v);

    /* normalizer.lowercase = false: "WORLD" stays upper case, no token */
    v = bert_vocab(0);
    if (v) {
        t.n = 0;
        EXPECT(vocab_tokenize(v, "WORLD world", 11, false, false, &t) == 0, "%s", error_get());
        EXPECT(ids_are(&t, (int32_t[]){1, 5}, 2), "no lowercasing when the key says so");
        vocab_free(v);
    }
    vocab_tokens_free(&t);
}

/* gemma4: BPE over raw UTF-8 with spaces escaped to U+2581, <0xXX> byte
 * fallback, runs of newlines whole, BOS forced on. */
TEST(test_gemma4) {
    static const char *const tokens[] = {
        "<pad>", "<eos>", "<bos>", "<unk>", "\xe2\x96\x81", "h", "i", "\xe2\x96\x81h",
        "\xe2\x96\x81hi", "\n", "\n\n", "<0x21>", "<0xC3>", "<0xA9>"};
    static const int32_t types[] = {3, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6};
    static const char *const merges[] = {"\xe2\x96\x81 h", "\xe2\x96\x81h i"};
    mini m;
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "gemma4");
    kv_arr_str(&m, "tokenizer.ggml.tokens", tokens, 14);
    kv_arr_i32(&m, "tokenizer.ggml.token_type", types, 14);
    kv_arr_str(&m, "tokenizer.ggml.merges", merges, 2);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&m, "tokenizer.ggml.eos_token_id", 1);
    kv_bool(&m, "tokenizer.ggml.add_bos_token", false);
    vocab *v = load_expect(&m, true, "gemma4", NULL, NULL);
    if (!v) return;
    EXPECT(strcmp(vocab_pre_name(v), "gemma4") == 0 && vocab_add_bos(v), "gemma4 flags");
    /* words "hi▁hi!", "\n\n", "é": h i ▁hi <0x21> | \n\n | <0xC3> <0xA9> */
    const char *text = "hi hi!\n\n\xc3\xa9";
    vocab_tokens t = {0};
    EXPECT(vocab_tokenize(v, text, strlen(text), true, false, &t) == 0, "%s", error_get());
    EXPECT(ids_are(&t, (int32_t[]){2, 5, 6, 8, 11, 10, 12, 13}, 8), "gemma4 ids (got %zu)", t.n);
    char *out = NULL;
    size_t n = 0;
    EXPECT(vocab_detokenize(v, t.ids, t.n, VOCAB_DETOK_REMOVE_SPECIAL, &out, &n) == 0 &&
              n == strlen(text) && memcmp(out, text, n) == 0,
           "gemma4 round trip: '%s'", out ? out : "");
    free(out);
    vocab_tokens_free(&t);
    vocab_free(v);
}

/* lowercase: -1 key absent, 0/1 tokenizer.ggml.normalizer.lowercase */
static vocab *bert_vocab(int lowercase) {
    static const char *const tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                         "\xe2\x96\x81hello", "\xe2\x96\x81world",
                                         "\xe2\x96\x81un", "aff", "able", "\xe2\x96\x81!",
                                         "\xe2\x96\x81\xe4\xb8\xad"};
    static const int32_t types[] = {3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    mini m;
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "bert");
    kv_arr_str(&m, "tokenizer.ggml.tokens", tokens, 11);
    kv_arr_i32(&m, "tokenizer.ggml.token_type", types, 11);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&m, "tokenizer.ggml.unknown_token_id", 1);
    kv_u32(&m, "tokenizer.ggml.seperator_token_id", 3);
    kv_u32(&m, "tokenizer.ggml.padding_token_id", 0);
    if (lowercase >= 0) kv_bool(&m, "tokenizer.ggml.normalizer.lowercase", lowercase);
    return load_expect(&m, true, "bert", NULL, NULL);
}

/* Corrupt bytes of a real file's metadata (stories260K) at random: the GGUF
 * reader or the vocabulary loader must refuse it with a message, or load
 * something that tokenizes without trouble. Never a crash (ASan run). */
TEST(test_fuzz) {
    harness_path path = harness_model_file("stories260K");
    size_t size;
    char *orig = harness_read_file(path.s, &size);
    REQUIRE(orig != NULL, "cannot read %s", path.s);
    gguf_file *f = gguf_open_memory(orig, size, "stories260K");
    EXPECT(f != NULL, "stories260K does not open");
    size_t meta = f ? (size_t)gguf_data_offset(f) : 0;
    gguf_close(f);
    char *img = malloc(size);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    int loaded = 0, refused = 0;
    for (int iter = 0; iter < 300 && meta > 0; iter++) {
        memcpy(img, orig, size);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            img[x % meta] = (char)(x >> 24);
        }
        gguf_file *g = gguf_open_memory(img, size, "fuzz.gguf");
        vocab *v = g ? vocab_load(g) : NULL;
        if (!v) {
            refused++;
            EXPECT(error_get()[0] != '\0', "refused without a message");
        } else {
            loaded++;
            vocab_tokens t = {0};
            const char *text = "Once upon a time, <s> there was \xff\xfe a dog.";
            EXPECT(vocab_tokenize(v, text, strlen(text), true, true, &t) == 0, "fuzzed tokenize");
            char *out = NULL;
            EXPECT(vocab_detokenize(v, t.ids, t.n, VOCAB_DETOK_UNPARSE_SPECIAL, &out, NULL) == 0,
                   "fuzzed detokenize");
            free(out);
            vocab_tokens_free(&t);
            vocab_free(v);
        }
        gguf_close(g);
    }
    printf("fuzz: %d corrupted files loaded, %d refused with a message\n", loaded, refused);
    free(img);
    free(orig);
}

HARNESS_MAIN("vocab load", HARNESS_TEST(test_fuzz), HARNESS_TEST(test_errors), HARNESS_TEST(test_wpm),
             HARNESS_TEST(test_gemma4), HARNESS_TEST(test_spm), HARNESS_TEST(test_bpe))

