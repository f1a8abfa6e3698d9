/*
 * tessera_vocab.h — a GGUF file's tokenizer alone, without the weights
 * (`tessera tokenize`): works on vocabulary-only files such as llama.cpp's
 * ggml-vocab-*.gguf, and tokenizes exactly as a loaded model does.
 *
 * Conventions as in tessera.h: NULL or a negative status on failure, and
 * tessera_last_error() then names the file or key at fault.
 */
#ifndef TESSERA_TESSERA_VOCAB_H
#define TESSERA_TESSERA_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_vocab tessera_vocab;

/* Read the vocabulary (tokenizer.ggml.*) of the GGUF file at path. NULL with
 * an error naming the file and the key at fault. Free it with
 * tessera_vocab_free. Needs no tessera_init. */
tessera_vocab *tessera_vocab_load(const char *path);
void tessera_vocab_free(tessera_vocab *vocab); /* NULL is fine */

int32_t tessera_vocab_n_tokens(const tessera_vocab *vocab);

/* Tokenize text[0..len) as tessera_tokenize does: add_special adds BOS (and
 * EOS) as the vocabulary says, parse_special recognises special-token
 * strings. Returns the number of tokens written, or when max_tokens is too
 * small the negated number needed (nothing useful written); INT32_MIN on
 * error. */
int32_t tessera_vocab_tokenize(const tessera_vocab *vocab, const char *text, size_t len,
                               tessera_token *tokens, int32_t max_tokens, bool add_special,
                               bool parse_special);

/* The bytes of token (not NUL-terminated, owned by vocab), their number in
 * *len; render_special: control tokens give their text instead of nothing.
 * NULL with an error for an id out of range. */
const char *tessera_vocab_piece(const tessera_vocab *vocab, tessera_token token, bool render_special,
                                size_t *len);

/* Text of tokens[0..n_tokens) as tessera_detokenize gives it (NUL-terminated
 * when it fits). Returns the length, the negated length needed (plus the
 * NUL) when buf is too small, INT32_MIN on error. */
int32_t tessera_vocab_detokenize(const tessera_vocab *vocab, const tessera_token *tokens, int32_t n_tokens,
                                 char *buf, int32_t size, bool remove_special, bool render_special);

#ifdef __cplusplus
}
#endif

#endif
