/*
 * spm — SentencePiece tokenization of one text fragment, llama.cpp's
 * llm_tokenizer_spm_session:
 *
 *   1. split the (already space-escaped) text into UTF-8 characters;
 *   2. queue every adjacent pair whose concatenation is a token, best score
 *      first (ties: leftmost first);
 *   3. repeatedly merge the best pair still valid and queue the new pairs it
 *      forms with its neighbours;
 *   4. emit each final symbol's token, or its bytes as <0xXX> tokens when the
 *      symbol is not in the vocabulary.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/heap.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

typedef struct spm_symbol {
    int prev, next; /* -1 at the ends */
    size_t start;   /* byte offset in the text */
    size_t n;       /* bytes; 0 once merged into its left neighbour */
} spm_symbol;

typedef struct spm_bigram {
    int left, right;
    float score;
    size_t size; /* bytes of the pair when it was queued */
} spm_bigram;

/* a comes out before b: higher score, then smaller left index. */
static bool spm_before(const void *pa, const void *pb) {
    const spm_bigram *a = pa, *b = pb;
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_session {
    const vocab *v;
    const char *text;
    spm_symbol *sym;
    tsr_heap heap;
} spm_session;

static int try_add_bigram(spm_session *s, int left, int right) {
    if (left < 0 || right < 0) return 0;
    size_t size = s->sym[left].n + s->sym[right].n;
    int32_t id = vocab_lookup(s->v, s->text + s->sym[left].start, size);
    if (id < 0) return 0;
    spm_bigram b = {left, right, s->v->tokens[id].score, size};
    return heap_push(&s->heap, &b);
}

static int emit_symbol(spm_session *s, const spm_symbol *sym, vocab_tokens *out) {
    int32_t id = vocab_lookup(s->v, s->text + sym->start, sym->n);
    if (id >= 0) return vocab_tokens_push(out, id);
    /* Not a token: its bytes, as byte tokens. A vocabulary without a token
     * for some byte (llama.cpp would throw) gets UNK, or nothing. */
    for (size_t j = 0; j < sym->n; j++) {
        int32_t b = s->v->byte_token[(uint8_t)s->text[sym->start + j]];
        if (b < 0) b = s->v->unk;
        if (b >= 0 && vocab_tokens_push(out, b)) return -1;
    }
    return 0;
}

/* Merge one region of the text (no token spans its ends). */
static int spm_region(spm_session *s, const char *text, size_t len, vocab_tokens *out) {
    s->text = text;
    s->heap.n = 0;
    int n = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = utf8_len_lead((uint8_t)text[off]);
        if (cl > len - off) cl = len - off;
        s->sym[n] = (spm_symbol){n - 1, off + cl == len ? -1 : n + 1, off, cl};
        off += cl;
        n++;
    }
    for (int i = 1; i < n; i++)
        if (try_add_bigram(s, i - 1, i)) return -1;

    while (s->heap.n > 0) {
        spm_bigram b;
        heap_pop(&s->heap, &b);
        spm_symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        /* Stale: one side was merged away or grew since it was queued. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (try_add_bigram(s, l->prev, b.left) || try_add_bigram(s, b.left, l->next)) return -1;
    }

    for (int i = 0; i != -1; i = s->sym[i].next)
        if (emit_symbol(s, &s->sym[i], out)) return -1;
    return 0;
}

static bool pair_seen(const vocab *v, uint8_t a, uint8_t b) {
    unsigned pair = (unsigned)a << 8 | b;
    return v->pair_seen[pair >> 3] & (1u << (pair & 7));
}

int spm_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out) {
    if (len == 0) return 0;
    if (len > (size_t)INT32_MAX) return error_set("spm: text of %zu bytes is too long", len);
    spm_session s = {.v = v, .heap = heap_make(sizeof(spm_bigram), spm_before)};
    s.sym = malloc(len * sizeof *s.sym);
    if (!s.sym) return error_set("spm: out of memory for %zu bytes of text", len);
    int rc = 0;
    /* Cut between characters whose boundary bytes never meet in a token. */
    size_t start = 0;
    for (size_t off = 0; off < len && rc == 0;) {
        size_t cl = utf8_len_lead((uint8_t)text[off]);
        if (cl > len - off) cl = len - off;
        size_t next = off + cl;
        if (next == len || !pair_seen(v, (uint8_t)text[next - 1], (uint8_t)text[next])) {
            rc = spm_region(&s, text + start, next - start, out);
            start = next;
        }
        off = next;
    }
    if (rc) error_set("spm: out of memory");
    heap_free(&s.heap);
    free(s.sym);
    return rc;
}
