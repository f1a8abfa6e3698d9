/*
 * tokenize — the entry point: split the text on special-token strings
 * (llama.cpp's tokenizer_st_partition), run the model's tokenizer on each
 * remaining raw fragment, add BOS/EOS.
 *
 * Special tokens are tried longest first; each one splits every raw
 * fragment at all its occurrences. Control and unknown tokens are matched
 * only with parse_special; user-defined tokens always (as Hugging Face's
 * tokenizers do).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/grow.h"
#include "vocab/vocab_internal.h"

void vocab_tokens_free(vocab_tokens *t) {
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

int vocab_tokens_push(vocab_tokens *t, int32_t id) {
    if (ARRAY_GROW(t->ids, t->cap, t->n + 1, 64) < 0)
        return error_set("vocab: out of memory for %zu tokens", t->n + 1);
    t->ids[t->n++] = id;
    return 0;
}

/* A fragment: a special token (id >= 0) or raw text [off, off+len). */
typedef struct fragment {
    int32_t id;
    size_t off, len;
} fragment;

typedef struct fragment_list {
    fragment *f;
    size_t n, cap;
} fragment_list;

static int frag_push(fragment_list *l, int32_t id, size_t off, size_t len) {
    if (ARRAY_GROW(l->f, l->cap, l->n + 1, 16) < 0) return error_set("vocab: out of memory");
    l->f[l->n++] = (fragment){id, off, len};
    return 0;
}

/* Split the raw fragment [off, off+len) of text on every occurrence of
 * special token id, appending the pieces to out. */
static int split_on(const vocab *v, int32_t id, const char *text, size_t off, size_t len,
                    fragment_list *out) {
    const vocab_token_data *t = &v->tokens[id];
    size_t end = off + len;
    while (off < end) {
        const char *hit = memmem(text + off, end - off, t->text, t->len);
        if (!hit) break;
        size_t m = (size_t)(hit - text);
        size_t left = m - off;
        if (t->attr & VOCAB_ATTR_LSTRIP)
            while (left > 0 && isspace((unsigned char)text[off + left - 1])) left--;
        if (left > 0 && frag_push(out, -1, off, left)) return -1;
        if (frag_push(out, id, 0, 0)) return -1;
        off = m + t->len;
        if (t->attr & VOCAB_ATTR_RSTRIP)
            while (off < end && isspace((unsigned char)text[off])) off++;
    }
    if (off < end && frag_push(out, -1, off, end - off)) return -1;
    return 0;
}

static int partition(const vocab *v, const char *text, size_t len, bool parse_special,
                     fragment_list *frags) {
    fragment_list next = {0};
    if (len > 0 && frag_push(frags, -1, 0, len)) return -1;
    for (size_t s = 0; s < v->n_special; s++) {
        int32_t id = v->special_order[s];
        const vocab_token_data *t = &v->tokens[id];
        if (!parse_special && (t->attr & (VOCAB_ATTR_CONTROL | VOCAB_ATTR_UNKNOWN))) continue;
        /* Cheap pre-check: skip tokens that occur in no raw fragment. */
        bool any = false;
        for (size_t i = 0; i < frags->n && !any; i++)
            any = frags->f[i].id < 0 &&
                  memmem(text + frags->f[i].off, frags->f[i].len, t->text, t->len) != NULL;
        if (!any) continue;
        next.n = 0;
        for (size_t i = 0; i < frags->n; i++) {
            const fragment *f = &frags->f[i];
            int rc = f->id >= 0 ? frag_push(&next, f->id, 0, 0)
                                : split_on(v, id, text, f->off, f->len, &next);
            if (rc) {
                free(next.f);
                return -1;
            }
        }
        fragment_list tmp = *frags;
        *frags = next;
        next = tmp;
    }
    free(next.f);
    return 0;
}

/* SentencePiece escaping: an optional leading space, then every ' ' as
 * U+2581. Returns a malloc'd buffer (length in *n) or NULL. */
static char *escape_spaces(const char *text, size_t len, bool prefix, size_t *out_n) {
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    char *buf = malloc(len + 2 * spaces + 1);
    if (!buf) {
        error_set("vocab: out of memory for %zu bytes of text", len);
        return NULL;
    }
    size_t n = 0;
    if (prefix) {
        memcpy(buf, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }
    *out_n = n;
    return buf;
}

typedef int (*tokenize_fn)(const vocab *v, const char *text, size_t len, vocab_tokens *out);

/* A fragment through tokenize after escaping its spaces (with a space
 * prefixed when prefix). SPM always escapes, prefixing after a special token
 * or at the start when the vocabulary asks for it; BPE only when the
 * vocabulary says so (escape_spaces). */
static int escaped_fragment(const vocab *v, tokenize_fn tokenize, const char *text, size_t len, bool prefix,
                            vocab_tokens *out) {
    size_t n;
    char *buf = escape_spaces(text, len, prefix, &n);
    if (!buf) return -1;
    int rc = tokenize(v, buf, n, out);
    free(buf);
    return rc;
}

int vocab_tokenize(const vocab *v, const char *text, size_t len, bool add_special,
                   bool parse_special, vocab_tokens *out) {
    fragment_list frags = {0};
    int rc = -1;
    if (!text && len > 0) return error_set("vocab_tokenize: NULL text");
    /* Symbol indices are int and BPE words double in size: stay far below. */
    if (len > ((size_t)1 << 29))
        return error_set("vocab_tokenize: text of %zu bytes is too long (limit 512 MiB)", len);
    if (partition(v, text, len, parse_special, &frags)) goto done;

    bool bos = add_special && (v->type == VOCAB_TYPE_WPM || v->add_bos);
    if (bos && vocab_tokens_push(out, v->bos)) goto done;

    bool prev_special = true; /* SPM: the first fragment gets the prefix too */
    for (size_t i = 0; i < frags.n; i++) {
        const fragment *f = &frags.f[i];
        if (f->id >= 0) {
            if (vocab_tokens_push(out, f->id)) goto done;
            prev_special = true;
            continue;
        }
        int r = 0;
        switch (v->type) {
        case VOCAB_TYPE_SPM:
            r = escaped_fragment(v, spm_tokenize, text + f->off, f->len, v->add_space_prefix && prev_special, out);
            break;
        case VOCAB_TYPE_BPE:
            r = v->escape_spaces ? escaped_fragment(v, bpe_tokenize, text + f->off, f->len, false, out)
                                 : bpe_tokenize(v, text + f->off, f->len, out);
            break;
        case VOCAB_TYPE_WPM: r = wpm_tokenize(v, text + f->off, f->len, out); break;
        }
        if (r) goto done;
        prev_special = false;
    }

    if (add_special) {
        if (v->type == VOCAB_TYPE_WPM) {
            if (v->sep >= 0 && vocab_tokens_push(out, v->sep)) goto done;
        } else if (v->add_eos && vocab_tokens_push(out, v->eos)) {
            goto done;
        }
    }
    rc = 0;
done:
    free(frags.f);
    return rc;
}

int64_t vocab_tokenize_buf(const vocab *v, const char *text, size_t len, bool add_special,
                           bool parse_special, int32_t *buf, int64_t cap) {
    vocab_tokens t = {0};
    if (vocab_tokenize(v, text, len, add_special, parse_special, &t)) {
        vocab_tokens_free(&t);
        return INT64_MIN;
    }
    int64_t n = (int64_t)t.n;
    if (n <= cap && n > 0) memcpy(buf, t.ids, t.n * sizeof *buf);
    vocab_tokens_free(&t);
    return n <= cap ? n : -n;
}
