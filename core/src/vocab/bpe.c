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
#include "util/heap.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

typedef struct bpe_symbol {
    int prev, next;
    size_t start, n;
} bpe_symbol;

typedef struct bpe_bigram {
    int left, right;
    int32_t rank;
    size_t size;
} bpe_bigram;

/* a comes out before b: lower rank, then smaller left index. */
static bool bpe_before(const void *pa, const void *pb) {
    const bpe_bigram *a = pa, *b = pb;
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct bpe_session {
    const vocab *v;
    const char *word;
    bpe_symbol *sym;
    size_t sym_cap;
    tsr_heap heap;
    char *key; /* "left right" scratch */
    size_t key_cap;
} bpe_session;

static int add_bigram(bpe_session *s, int left, int right) {
    if (left < 0 || right < 0) return 0;
    const bpe_symbol *l = &s->sym[left], *r = &s->sym[right];
    size_t klen = l->n + 1 + r->n;
    if (klen > s->key_cap) {
        size_t cap = klen * 2;
        char *k = realloc(s->key, cap);
        if (!k) return -1;
        s->key = k;
        s->key_cap = cap;
    }
    memcpy(s->key, s->word + l->start, l->n);
    s->key[l->n] = ' ';
    memcpy(s->key + l->n + 1, s->word + r->start, r->n);
    int32_t rank = strmap_get(&s->v->merge_ranks, s->key, klen);
    if (rank < 0) return 0;
    bpe_bigram b = {left, right, rank, l->n + r->n};
    return heap_push(&s->heap, &b);
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
    if (len > s->sym_cap) {
        bpe_symbol *p = realloc(s->sym, len * sizeof *p);
        if (!p) return -1;
        s->sym = p;
        s->sym_cap = len;
    }
    int n = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = utf8_len_lead((uint8_t)word[off]);
        if (cl > len - off) cl = len - off;
        s->sym[n] = (bpe_symbol){n - 1, off + cl == len ? -1 : n + 1, off, cl};
        off += cl;
        n++;
    }
    s->heap.n = 0;
    for (int i = 1; i < n; i++)
        if (add_bigram(s, i - 1, i)) return -1;
    while (s->heap.n > 0) {
        bpe_bigram b;
        heap_pop(&s->heap, &b);
        bpe_symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        /* Stale: a side was merged away or grew since it was queued (the
         * texts are fixed slices, so equal sizes mean equal text). */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (add_bigram(s, l->prev, b.left) || add_bigram(s, b.left, l->next)) return -1;
    }
    for (int i = 0; i != -1; i = s->sym[i].next)
        if (emit(s, s->sym[i].start, s->sym[i].n, out)) return -1;
    return 0;
}

int bpe_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out) {
    vocab_words words = {0};
    bpe_session s = {.v = v, .heap = heap_make(sizeof(bpe_bigram), bpe_before)};
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
    free(s.sym);
    heap_free(&s.heap);
    free(s.key);
    return rc;
}
