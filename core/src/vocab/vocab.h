/*
 * vocab — tokenizers: text to token ids and back, as llama.cpp does it.
 *
 * A vocabulary is loaded from a GGUF file's tokenizer.ggml.* keys:
 *   model "llama"  SentencePiece (SPM): spaces escaped to U+2581, a space
 *                  prefix, bigram merges by score, <0xXX> byte fallback;
 *   model "gpt2"   byte-level BPE: a pre-tokenizer (regexes named by
 *                  tokenizer.ggml.pre) splits the text into words, each
 *                  word's bytes are mapped to GPT-2's printable characters
 *                  and merged by the rank of tokenizer.ggml.merges;
 *   model "gemma4" BPE in SentencePiece style: spaces escaped to U+2581,
 *                  words kept as raw UTF-8, <0xXX> byte fallback;
 *   model "bert"   WordPiece (WPM): longest-prefix matching per word.
 * An unknown tokenizer.ggml.pre is an error that lists the known names
 * (llama.cpp refuses it too); a missing one means "default".
 *
 * Invalid UTF-8 never crashes: SPM works on bytes and emits byte tokens for
 * them; BPE and WPM replace each invalid byte with U+FFFD, as llama.cpp's
 * unicode_cpts_from_utf8 does.
 *
 * A loaded vocabulary is immutable: every function below may be called from
 * several threads at once.
 */
#ifndef TESSERA_VOCAB_H
#define TESSERA_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

#define VOCAB_TOKEN_NULL (-1)

typedef enum vocab_type {
    VOCAB_TYPE_SPM = 1, /* tokenizer.ggml.model = "llama" */
    VOCAB_TYPE_BPE = 2, /* "gpt2", "gemma4" */
    VOCAB_TYPE_WPM = 3, /* "bert" */
} vocab_type;

/* Token attributes: llama.cpp's llama_token_attr bits. The GGUF token_type
 * array (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
 * is translated into these. */
enum {
    VOCAB_ATTR_UNDEFINED = 0,
    VOCAB_ATTR_UNKNOWN = 1u << 0,
    VOCAB_ATTR_UNUSED = 1u << 1,
    VOCAB_ATTR_NORMAL = 1u << 2,
    VOCAB_ATTR_CONTROL = 1u << 3,
    VOCAB_ATTR_USER_DEFINED = 1u << 4,
    VOCAB_ATTR_BYTE = 1u << 5,
    VOCAB_ATTR_NORMALIZED = 1u << 6,
    VOCAB_ATTR_LSTRIP = 1u << 7,
    VOCAB_ATTR_RSTRIP = 1u << 8,
    VOCAB_ATTR_SINGLE_WORD = 1u << 9,
};

typedef struct vocab vocab;

/* Load the vocabulary of f. NULL with error_get() naming the key at fault
 * (missing tokens array, lengths that disagree, ids out of range, unknown
 * model or pre-tokenizer). f may be closed afterwards: nothing points into
 * it. */
vocab *vocab_load(const gguf_file *f);
void vocab_free(vocab *v);

/* ---------------------------------------------------------- properties */

vocab_type vocab_get_type(const vocab *v);
const char *vocab_model_name(const vocab *v); /* "llama", "gpt2", "gemma4", "bert" */
const char *vocab_pre_name(const vocab *v);   /* e.g. "llama-bpe"; "default" */
int32_t vocab_n_tokens(const vocab *v);

/* Special ids, VOCAB_TOKEN_NULL when the vocabulary has none. */
int32_t vocab_bos(const vocab *v);
int32_t vocab_eos(const vocab *v);
int32_t vocab_eot(const vocab *v);
int32_t vocab_eom(const vocab *v);
int32_t vocab_unk(const vocab *v);
int32_t vocab_sep(const vocab *v);
int32_t vocab_pad(const vocab *v);
int32_t vocab_nl(const vocab *v); /* the newline token */

bool vocab_add_bos(const vocab *v);          /* add_special adds BOS */
bool vocab_add_eos(const vocab *v);          /* add_special adds EOS */
bool vocab_add_sep(const vocab *v);          /* tokenizer.ggml.add_sep_token (rerank pairs) */
bool vocab_add_space_prefix(const vocab *v); /* SPM: " " before the text */

/* End of generation: EOS, EOT, EOM and the tokens llama.cpp recognises by
 * their text (<|eot_id|>, <|im_end|>, <end_of_turn>, ...). */
bool vocab_is_eog(const vocab *v, int32_t id);
/* Control tokens (BOS, EOS, <|im_start|>, ...): not rendered by default. */
bool vocab_is_control(const vocab *v, int32_t id);

/* The token's text as stored in the vocabulary (escaped: U+2581 for spaces
 * in SPM, GPT-2 byte characters in BPE); NULL for an id out of range. */
const char *vocab_token_text(const vocab *v, int32_t id, size_t *len);
float vocab_token_score(const vocab *v, int32_t id);
uint32_t vocab_token_attr(const vocab *v, int32_t id); /* VOCAB_ATTR_* */
/* The id whose text is exactly text[0..len), or VOCAB_TOKEN_NULL. */
int32_t vocab_text_to_token(const vocab *v, const char *text, size_t len);

/* ------------------------------------------------------------ tokenize */

/* A growable list of token ids. Zero-initialise it; free with
 * vocab_tokens_free(). */
typedef struct vocab_tokens {
    int32_t *ids;
    size_t n;
    size_t cap;
} vocab_tokens;

void vocab_tokens_free(vocab_tokens *t);
int vocab_tokens_push(vocab_tokens *t, int32_t id);

/* Tokenize text[0..len) and append the ids to out.
 * add_special: prepend BOS (and append EOS) when the vocabulary says so.
 * parse_special: text equal to a control token's string becomes that token
 *   (user-defined tokens are always matched, as in llama.cpp).
 * Returns 0, or -1 (text over 512 MiB, out of memory, regex failure) with
 * error_get(); out may then hold a partial result. */
int vocab_tokenize(const vocab *v, const char *text, size_t len, bool add_special,
                   bool parse_special, vocab_tokens *out);

/* llama.cpp-style: write at most cap ids to buf. Returns the count, the
 * negated count needed when cap is too small (nothing useful written), or
 * INT64_MIN on error. */
int64_t vocab_tokenize_buf(const vocab *v, const char *text, size_t len, bool add_special,
                           bool parse_special, int32_t *buf, int64_t cap);

/* ---------------------------------------------------------- detokenize */

/* The bytes one token stands for: <0xXX> byte tokens give one byte, U+2581
 * becomes a space, GPT-2 byte characters become their bytes. Control and
 * unknown tokens give "" unless special is true (then their text).
 * Not NUL-terminated; NULL for an id out of range. */
const char *vocab_token_piece(const vocab *v, int32_t id, bool special, size_t *len);

/* llama.cpp's llama_token_to_piece: copy the piece to buf, skipping up to
 * lstrip leading spaces. Returns its length, the negated length when size is
 * too small, INT32_MIN for an id out of range. */
int32_t vocab_token_to_piece(const vocab *v, int32_t id, char *buf, int32_t size, int32_t lstrip,
                             bool special);

enum {
    /* Drop a leading BOS and trailing EOS (when the vocabulary adds them). */
    VOCAB_DETOK_REMOVE_SPECIAL = 1u << 0,
    /* Render control/unknown tokens as their text. */
    VOCAB_DETOK_UNPARSE_SPECIAL = 1u << 1,
    /* Skip llama.cpp's clean_up_tokenization_spaces pass (" ." -> ".",
     * " 's" -> "'s", ...), which some BPE vocabularies enable. */
    VOCAB_DETOK_NO_CLEANUP = 1u << 2,
};

/* Text of ids[0..n) in a malloc'd NUL-terminated buffer (*out, *out_len).
 * As llama.cpp: for SPM the space the tokenizer prefixed is removed from the
 * first token, except after a BOS dropped by VOCAB_DETOK_REMOVE_SPECIAL.
 * Returns 0, or -1 (id out of range, out of memory) with error_get(). */
int vocab_detokenize(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out,
                     size_t *out_len);
/* The same into buf as the public detokenize calls answer: the length
 * (NUL-terminated), the negated length needed plus the NUL when buf is too
 * small, INT32_MIN on error. */
int32_t vocab_detokenize_buf(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char *buf, int32_t size);

#endif
