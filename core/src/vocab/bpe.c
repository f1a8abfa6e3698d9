/*
 * bpe — byte-level BPE of one text fragment, llama.cpp's
 * llm_tokenizer_bpe_session:
 *
 *   1. the pre-tokenizer splits the fragment into words (GPT-2 byte chars);
 *   2. a word that is itself a token is taken whole when the vocabulary
 *      ignores merges (llama3 and friends), or (gemma4) when it is a run of
 *      newlines;
 *   3. otherwise its characters are merged pairwise, lowest merge rank
 *      first (ties: leftmost first), until no adjacent pair has a rank;
 *   4. each final symbol is emitted as its token; a symbol that is not a
 *      token falls back to the tokens of its single bytes where they exist.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "vocab/merge.h"
#include "vocab/vocab_internal.h"

typedef struct bpe_session {
    const vocab *v;
    const char *word;
    merge_session merge;
    char *key; /* "left right" scratch */
    size_t key_cap;
} bpe_session;

/* Two symbols merge when "left right" has a merge rank; the lowest first. */
static int bpe_pair(void *ctx, const char *word, const merge_symbol *l, const merge_symbol *r, double *prio) {
    bpe_session *s = ctx;
    size_t klen = l->n + 1 + r->n;
    if (klen > s->key_cap) {
        size_t cap = klen * 2;
        char *k = realloc(s->key, cap);
        if (!k) return -1;
        s->key = k;
        s->key_cap = cap;
    }
    memcpy(s->key, word + l->start, l->n);
    s->key[l->n] = ' ';
    memcpy(s->key + l->n + 1, word + r->start, r->n);
    int32_t rank = strmap_get(&s->v->merge_ranks, s->key, klen);
    if (rank < 0) return 0;
    *prio = (double)rank;
    return 1;
}

/* A symbol's token; else the tokens of its bytes where they exist: the
 * 1-byte token (GPT-2 style; this looks up the raw byte of the mapped text,
 * as llama.cpp does) or <0xXX> (SentencePiece style). */
static int emit(bpe_session *s, size_t start, size_t n, vocab_tokens *out) {
    static const char hex[] = "0123456789ABCDEF";
    int32_t id = vocab_lookup(s->v, s->word + start, n);
    if (id >= 0) return vocab_tokens_push(out, id);
    for (size_t j = 0; j < n; j++) {
        uint8_t b = (uint8_t)s->word[start + j];
        if (s->v->escape_spaces) {
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            id = vocab_lookup(s->v, name, 6);
        } else {
            id = vocab_lookup(s->v, s->word + start + j, 1);
        }
        if (id >= 0 && vocab_tokens_push(out, id)) return -1;
    }
    return 0;
}

static bool all_newlines(const char *w, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (w[i] != '\n') return false;
    return true;
}

static int bpe_word(bpe_session *s, const char *word, size_t len, vocab_tokens *out) {
    s->word = word;
    if (len == 0) return 0;
    if (s->v->ignore_merges || (s->v->newline_words && all_newlines(word, len))) {
        int32_t id = vocab_lookup(s->v, word, len);
        if (id >= 0) return vocab_tokens_push(out, id);
    }
    if (merge_text(&s->merge, word, len)) return -1;
    const merge_symbol *sym = s->merge.sym;
    for (int i = 0; i != -1; i = sym[i].next)
        if (emit(s, sym[i].start, sym[i].n, out)) return -1;
    return 0;
}

int bpe_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out) {
    vocab_words words = {0};
    bpe_session s = {.v = v};
    merge_init(&s.merge, bpe_pair, &s);
    int rc = -1;
    if (pretok_split(v->pre, text, len, &words)) goto done;
    size_t start = 0;
    for (size_t i = 0; i < words.n; i++) {
        if (bpe_word(&s, words.buf + start, words.ends[i] - start, out)) {
            error_set("bpe: out of memory");
            goto done;
        }
        start = words.ends[i];
    }
    rc = 0;
done:
    vocab_words_free(&words);
    merge_free(&s.merge);
    free(s.key);
    return rc;
}
