/* Fuzz target: the tokenizers. The first byte picks a vocabulary (SPM and
 * BPE from llama.cpp's vocab files, WordPiece and gemma4-style BPE built
 * here), add_special, parse_special and the detokenize flags; the rest is
 * the text. The tokens must detokenize, every piece must be readable, and
 * ids taken from the bytes (some out of range) must be refused cleanly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vocab/gguf_mini.h"
#include "vocab/vocab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_VOCABS = 4 };
static vocab *vocabs[N_VOCABS];

static vocab *load_file(const char *name) {
    const char *dir = getenv("TESSERA_SHARED");
    char path[4096];
    snprintf(path, sizeof path, "%s/vocab/%s", dir ? dir : FUZZ_SHARED_DIR, name);
    gguf_file *f = gguf_open(path);
    vocab *v = f ? vocab_load(f) : NULL;
    if (f) gguf_close(f);
    if (!v) fprintf(stderr, "fuzz_tokenize: %s not loaded (set TESSERA_SHARED)\n", path);
    return v;
}

static vocab *load_mini(mini *m) {
    gguf_file *f = mini_open(m);
    vocab *v = f ? vocab_load(f) : NULL;
    if (f) gguf_close(f);
    mini_free(m);
    return v;
}

static vocab *bert(void) {
    static const char *const tokens[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\xe2\x96\x81the", "\xe2\x96\x81un",
                                         "##aff", "aff", "able", "\xe2\x96\x81!", "\xe2\x96\x81\xe4\xb8\xad", "a"};
    static const int32_t types[] = {3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    mini m;
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "bert");
    kv_arr_str(&m, "tokenizer.ggml.tokens", tokens, 12);
    kv_arr_i32(&m, "tokenizer.ggml.token_type", types, 12);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&m, "tokenizer.ggml.unknown_token_id", 1);
    kv_u32(&m, "tokenizer.ggml.seperator_token_id", 3);
    kv_bool(&m, "tokenizer.ggml.normalizer.lowercase", true);
    return load_mini(&m);
}

static vocab *gemma4(void) {
    static const char *const tokens[] = {"<pad>", "<eos>", "<bos>", "<unk>", "\xe2\x96\x81", "h", "i",
                                         "\xe2\x96\x81h", "\xe2\x96\x81hi", "\n", "\n\n", "<0x21>", "<0xC3>",
                                         "<0xA9>", "<start_of_turn>"};
    static const int32_t types[] = {3, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6, 3};
    static const char *const merges[] = {"\xe2\x96\x81 h", "\xe2\x96\x81h i"};
    mini m;
    mini_begin(&m);
    kv_str(&m, "tokenizer.ggml.model", "gemma4");
    kv_arr_str(&m, "tokenizer.ggml.tokens", tokens, 15);
    kv_arr_i32(&m, "tokenizer.ggml.token_type", types, 15);
    kv_arr_str(&m, "tokenizer.ggml.merges", merges, 2);
    kv_u32(&m, "tokenizer.ggml.bos_token_id", 2);
    kv_u32(&m, "tokenizer.ggml.eos_token_id", 1);
    return load_mini(&m);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vocabs[0] = load_file("ggml-vocab-llama-spm.gguf");
    vocabs[1] = load_file("ggml-vocab-gpt-2.gguf");
    vocabs[2] = bert();
    vocabs[3] = gemma4();
    for (int i = 0; i < N_VOCABS; i++)
        if (!vocabs[i]) abort(); /* a fuzzer without its vocabularies would find nothing */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t ctl = data[0];
    const vocab *v = vocabs[ctl % N_VOCABS];
    bool add_special = ctl & 4, parse_special = ctl & 8;
    unsigned flags = (ctl >> 4) & 7;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;

    vocab_tokens t = {0};
    if (vocab_tokenize(v, text, len, add_special, parse_special, &t) == 0) {
        char *out = NULL;
        size_t n = 0;
        if (vocab_detokenize(v, t.ids, t.n, flags, &out, &n) != 0) {
            fprintf(stderr, "fuzz_tokenize: tokens from the tokenizer do not detokenize\n");
            abort();
        }
        free(out);
        int32_t buf[64];
        int64_t k = vocab_tokenize_buf(v, text, len, add_special, parse_special, buf, 64);
        if (k != INT64_MIN && k >= 0 && (size_t)k != t.n) {
            fprintf(stderr, "fuzz_tokenize: the two tokenize calls disagree (%zu vs %lld)\n", t.n,
                    (long long)k);
            abort();
        }
    }
    vocab_tokens_free(&t);

    /* Ids straight from the bytes: some beyond the vocabulary, some negative. */
    int32_t nv = vocab_n_tokens(v);
    int32_t ids[64];
    size_t n_ids = 0;
    for (size_t i = 0; i + 1 < len && n_ids < 64; i += 2)
        ids[n_ids++] = (int32_t)(((uint8_t)text[i] << 8 | (uint8_t)text[i + 1]) % (uint32_t)(nv + 4)) - 2;
    char piece[16];
    for (size_t i = 0; i < n_ids; i++) {
        vocab_token_to_piece(v, ids[i], piece, sizeof piece, (int32_t)(i & 1), i & 2);
        size_t pl;
        vocab_token_piece(v, ids[i], true, &pl);
    }
    char *out = NULL;
    size_t n = 0;
    if (vocab_detokenize(v, ids, n_ids, flags, &out, &n) == 0) free(out);
    return 0;
}
