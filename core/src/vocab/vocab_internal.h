/*
 * vocab_internal — the vocabulary's layout, shared by the files of the
 * vocab module only.
 */
#ifndef TESSERA_VOCAB_INTERNAL_H
#define TESSERA_VOCAB_INTERNAL_H

#include "vocab/strmap.h"
#include "vocab/vocab.h"

typedef struct vocab_token_data {
    const char *text; /* NUL-terminated, in the vocabulary's arena */
    uint32_t len;
    uint32_t attr; /* VOCAB_ATTR_* */
    float score;
} vocab_token_data;

typedef struct pretok pretok; /* compiled pre-tokenizer regexes (pretok.c) */

struct vocab {
    vocab_type type;
    char model_name[16];
    char *pre_name;

    int32_t n_tokens;
    vocab_token_data *tokens;
    char *text_arena;
    strmap token_ids; /* text -> id */

    /* BPE: "left right" merge strings -> rank (first occurrence wins). */
    char *merge_arena;
    strmap merge_ranks;
    pretok *pre;

    /* Pieces (special = true) of every token, for detokenization. */
    char *piece_arena;
    uint64_t *piece_off; /* n_tokens + 1 offsets into piece_arena */

    /* Control, user-defined and unknown tokens, longest text first: the
     * order in which the text is split on them. */
    int32_t *special_order;
    size_t n_special;

    uint8_t *eog; /* n_tokens flags */

    /* SPM byte fallback: the <0xXX> token (or the 1-byte token) per byte. */
    int32_t byte_token[256];
    /* SPM: bit (a << 8 | b) set when bytes a, b appear next to each other in
     * some token's text. Where they do not, no merge can ever join the
     * symbols around them, so the text is cut there and each piece merged
     * on its own: same result, far smaller work queues. */
    uint8_t pair_seen[256 * 256 / 8];

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;

    bool add_bos, add_eos, add_sep;
    bool add_space_prefix;
    bool ignore_merges;  /* BPE: a word that is a token is not merged */
    bool escape_spaces;  /* BPE, SPM-style (gemma4): ' ' -> U+2581, no GPT-2 bytes */
    bool force_bos;
    bool newline_words;
    bool clean_spaces;   /* clean_up_tokenization_spaces on detokenize */
    bool wpm_lowercase;  /* WPM normalizer */
    bool wpm_strip_accents;
    int max_token_len;
};

/* Pre-tokenizers (pretok.c). */
typedef struct pretok_info {
    bool clean_spaces;
    bool ignore_merges;
    bool add_bos;
    bool no_bos; /* the family has no BOS by default (chatglm) */
    bool spm_style;     /* escaped spaces, raw UTF-8 words, <0xXX> bytes */
    bool force_bos;     /* add_bos whatever the file says (gemma4) */
    bool newline_words; /* a run of newlines that is a token stays whole */
} pretok_info;

/* Look up a pre-tokenizer by its tokenizer.ggml.pre name and compile its
 * regexes (PCRE2, JIT when available). NULL with an error listing the known
 * names. */
pretok *pretok_new(const char *name, pretok_info *info);
void pretok_free(pretok *p);

/* Split UTF-8 text into words as the pre-tokenizer's regexes do, each word
 * appended to words with its end offset in ends: as GPT-2 byte characters,
 * or raw UTF-8 for SPM-style families. Invalid UTF-8 bytes become U+FFFD
 * first. 0 or -1 with an error. */
typedef struct vocab_words {
    char *buf; /* concatenated words */
    size_t len, cap;
    size_t *ends; /* ends[i]: end of word i in buf */
    size_t n, ends_cap;
} vocab_words;

int pretok_split(const pretok *p, const char *text, size_t len, vocab_words *words);
void vocab_words_free(vocab_words *w);

/* Tokenizer sessions: tokenize one raw-text fragment, appending to out. */
int spm_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out);
int bpe_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out);
int wpm_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out);

/* Build every token's piece (detok.c), at load time. */
int vocab_build_pieces(vocab *v);

static inline int32_t vocab_lookup(const vocab *v, const char *text, size_t len) {
    return strmap_get(&v->token_ids, text, len);
}

#endif
