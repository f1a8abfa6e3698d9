/* tessera_vocab.h: the tokenizer (vocab/) loaded from a GGUF file without
 * the weights. */
#include <tessera/tessera_vocab.h>

#include <stdlib.h>

#include "gguf/gguf.h"
#include "util/error.h"
#include "vocab/vocab.h"

struct tessera_vocab {
    gguf_file *file; /* kept open: the vocabulary may point into its mapping */
    vocab *vocab;
};

tessera_vocab *tessera_vocab_load(const char *path) {
    if (!path) {
        error_set("tessera_vocab_load: no path given");
        return NULL;
    }
    tessera_vocab *tv = calloc(1, sizeof *tv);
    if (!tv) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    tv->file = gguf_open(path);
    if (tv->file) tv->vocab = vocab_load(tv->file);
    if (!tv->vocab) {
        if (tv->file) error_wrap("%s", path); /* gguf_open's errors name the file already */
        tessera_vocab_free(tv);
        return NULL;
    }
    return tv;
}

void tessera_vocab_free(tessera_vocab *tv) {
    if (!tv) return;
    vocab_free(tv->vocab);
    gguf_close(tv->file);
    free(tv);
}

int32_t tessera_vocab_n_tokens(const tessera_vocab *tv) { return vocab_n_tokens(tv->vocab); }

int32_t tessera_vocab_tokenize(const tessera_vocab *tv, const char *text, size_t len, tessera_token *tokens,
                               int32_t max_tokens, bool add_special, bool parse_special) {
    int64_t n = vocab_tokenize_buf(tv->vocab, text, len, add_special, parse_special, tokens,
                                   max_tokens > 0 ? max_tokens : 0);
    if (n == INT64_MIN) return INT32_MIN;
    if (n > INT32_MAX || n <= -(int64_t)INT32_MAX) {
        error_set("tessera_vocab_tokenize: %lld tokens are more than one call returns", (long long)(n < 0 ? -n : n));
        return INT32_MIN;
    }
    return (int32_t)n;
}

const char *tessera_vocab_piece(const tessera_vocab *tv, tessera_token token, bool render_special, size_t *len) {
    size_t n = 0;
    const char *p = vocab_token_piece(tv->vocab, token, render_special, &n);
    if (!p) {
        error_set("token id %d out of range (vocabulary of %d)", (int)token, (int)vocab_n_tokens(tv->vocab));
        return NULL;
    }
    if (len) *len = n;
    return p;
}

int32_t tessera_vocab_detokenize(const tessera_vocab *tv, const tessera_token *tokens, int32_t n_tokens, char *buf,
                                 int32_t size, bool remove_special, bool render_special) {
    if (!tv || n_tokens < 0 || (n_tokens > 0 && !tokens)) {
        error_set("tessera_vocab_detokenize: bad arguments");
        return INT32_MIN;
    }
    unsigned flags = (remove_special ? VOCAB_DETOK_REMOVE_SPECIAL : 0) | (render_special ? VOCAB_DETOK_UNPARSE_SPECIAL : 0);
    return vocab_detokenize_buf(tv->vocab, tokens, (size_t)n_tokens, flags, buf, size);
}
