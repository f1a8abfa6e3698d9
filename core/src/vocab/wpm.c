/*
 * wpm — WordPiece (BERT) tokenization of one text fragment, llama.cpp's
 * llm_tokenizer_wpm_session:
 *
 *   1. normalise: decompose and drop accents, lowercase, drop controls,
 *      split on whitespace, make each punctuation mark, ASCII symbol and CJK
 *      ideograph a word of its own;
 *   2. per word, prefix U+2581 and take the longest vocabulary match from
 *      the left again and again; a word with a position no token matches
 *      becomes a single UNK.
 *
 * Unicode data from utf8proc. Lowercasing and accent stripping follow
 * tokenizer.ggml.normalizer.{lowercase,strip_accents} (default on).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/error.h"
#include "util/grow.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

static bool is_chinese(uint32_t c) {
    return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool valid_cpt(uint32_t c) { return c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF); }

static utf8proc_category_t category(uint32_t c) {
    return valid_cpt(c) ? utf8proc_category((utf8proc_int32_t)c) : UTF8PROC_CATEGORY_CS;
}

typedef struct words {
    tsr_buf text;
    size_t *ends; /* end of each finished word in text */
    size_t n_words, ends_cap;
} words;

static int w_put(words *w, const char *s, size_t n) { return buf_put(&w->text, s, n); }

/* Finish the current word if it is not empty. */
static int w_end(words *w) {
    size_t start = w->n_words ? w->ends[w->n_words - 1] : 0;
    if (w->text.len == start) return 0;
    if (ARRAY_GROW(w->ends, w->ends_cap, w->n_words + 1, 32) < 0) return -1;
    w->ends[w->n_words++] = w->text.len;
    return 0;
}

static int add_cpt(const vocab *v, words *w, uint32_t c) {
    if (utf8_is_whitespace(c)) return w_end(w);
    utf8proc_category_t cat = category(c);
    bool control = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
                   cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS ||
                   cat == UTF8PROC_CATEGORY_CN;
    if (c == 0 || c == UTF8_REPLACEMENT || control) return 0;
    if (v->wpm_strip_accents && cat == UTF8PROC_CATEGORY_MN) return 0; /* accent mark */
    uint32_t lc = c;
    if (v->wpm_lowercase && valid_cpt(c)) lc = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    char u[4];
    size_t n = utf8_encode(lc, u);
    bool punct = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
    bool symbol = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
    if (punct || (c < 0x7F && symbol) || is_chinese(c)) {
        if (w_end(w) || w_put(w, u, n) || w_end(w)) return -1;
        return 0;
    }
    return w_put(w, u, n);
}

static int preprocess(const vocab *v, const char *text, size_t len, words *w) {
    for (size_t off = 0; off < len;) {
        uint32_t c = utf8_decode(text, len, &off);
        utf8proc_int32_t parts[8];
        utf8proc_ssize_t np = 0;
        if (v->wpm_strip_accents && valid_cpt(c)) {
            int boundclass = 0;
            np = utf8proc_decompose_char((utf8proc_int32_t)c, parts, 8, UTF8PROC_DECOMPOSE,
                                         &boundclass);
        }
        if (np <= 0 || np > 8) {
            if (add_cpt(v, w, c)) return -1;
            continue;
        }
        for (utf8proc_ssize_t i = 0; i < np; i++)
            if (add_cpt(v, w, (uint32_t)parts[i])) return -1;
    }
    return w_end(w);
}

static int wpm_word(const vocab *v, const char *word, size_t len, vocab_tokens *out) {
    char *w1 = malloc(len + 3);
    if (!w1) return -1;
    memcpy(w1, "\xe2\x96\x81", 3);
    memcpy(w1 + 3, word, len);
    size_t n = len + 3;
    size_t before = out->n;
    for (size_t i = 0; i < n; i++) {
        bool match = false;
        size_t hi = i + (size_t)v->max_token_len + 1;
        for (size_t j = hi < n ? hi : n; j > i; j--) {
            int32_t id = vocab_lookup(v, w1 + i, j - i);
            if (id >= 0) {
                if (vocab_tokens_push(out, id)) {
                    free(w1);
                    return -1;
                }
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = before; /* discard the word's tokens */
            break;
        }
    }
    free(w1);
    if (out->n == before && v->unk >= 0) return vocab_tokens_push(out, v->unk);
    return 0;
}

int wpm_tokenize(const vocab *v, const char *text, size_t len, vocab_tokens *out) {
    words w = {0};
    int rc = -1;
    if (preprocess(v, text, len, &w)) {
        error_set("wpm: out of memory");
        goto done;
    }
    size_t start = 0;
    for (size_t i = 0; i < w.n_words; i++) {
        if (wpm_word(v, w.text.p + start, w.ends[i] - start, out)) {
            error_set("wpm: out of memory");
            goto done;
        }
        start = w.ends[i];
    }
    rc = 0;
done:
    buf_free(&w.text);
    free(w.ends);
    return rc;
}
