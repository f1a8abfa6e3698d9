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
#include "vocab/merge.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

typedef struct spm_session {
    const vocab *v;
    merge_session merge;
} spm_session;

/* Two symbols merge when their text is a token; the highest score first. */
static int spm_pair(void *ctx, const char *text, const merge_symbol *l, const merge_symbol *r, double *prio) {
    const spm_session *s = ctx;
    int32_t id = vocab_lookup(s->v, text + l->start, l->n + r->n);
    if (id < 0) return 0;
    *prio = -(double)s->v->tokens[id].score;
    return 1;
}

static int emit_symbol(const spm_session *s, const char *text, const merge_symbol *sym, vocab_tokens *out) {
    int32_t id = vocab_lookup(s->v, text + sym->start, sym->n);
    if (id >= 0) return vocab_tokens_push(out, id);
    /* Not a token: its bytes, as byte tokens. A vocabulary without a token
     * for some byte (llama.cpp would throw) gets UNK, or nothing. */
    for (size_t j = 0; j < sym->n; j++) {
        int32_t b = s->v->byte_token[(uint8_t)text[sym->start + j]];
        if (b < 0) b = s->v->unk;
        if (b >= 0 && vocab_tokens_push(out, b)) return -1;
    }
    return 0;
}

/* Merge one region of the text (no token spans its ends). */
static int spm_region(spm_session *s, const char *text, size_t len, vocab_tokens *out) {
    if (merge_text(&s->merge, text, len)) return -1;
    const merge_symbol *sym = s->merge.sym;
    for (int i = 0; i != -1; i = sym[i].next)
        if (emit_symbol(s, text, &sym[i], out)) return -1;
    return 0;
}

static bool pair_seen(const vocab *v, uint8_t a, uint8_t b) {
    unsigned pair = (unsigned)a << 8 | b;
    return v->pair_seen[pair >> 3] & (1u << (pair & 7));
}

int spm_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out) {
    if (len == 0) return 0;
    if (len > (size_t)INT32_MAX) return error_set("spm: text of %zu bytes is too long", len);
    spm_session s = {.v = v};
    merge_init(&s.merge, spm_pair, &s);
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
    merge_free(&s.merge);
    return rc;
}
