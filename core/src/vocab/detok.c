/*
 * detok — token ids back to text: every token's piece is computed once at
 * load (llama.cpp's cache_token_to_piece), detokenization concatenates them
 * and applies llama.cpp's leading-space and clean-up rules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/grow.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

/* Append bytes to b; an allocation failure is an error. */
static int put(tsr_buf *b, const char *s, size_t n) {
    return buf_put(b, s, n) ? error_set("vocab: out of memory") : 0;
}

/* <0xXX>: the byte in hex at offset 3 (llama.cpp's token_to_byte). */
static char byte_of(const vocab_token_data *t) {
    unsigned v = 0;
    for (uint32_t i = 3; i < 5 && i < t->len; i++) {
        char c = t->text[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else break;
        v = v * 16 + d;
    }
    return (char)v;
}

/* U+2581 -> ' ' */
static int put_unescaped(tsr_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            if (put(b, " ", 1)) return -1;
            i += 3;
        } else {
            if (put(b, s + i, 1)) return -1;
            i++;
        }
    }
    return 0;
}

/* GPT-2 byte characters -> bytes; a character outside the mapping becomes
 * "[UNK_BYTE_0x<its utf-8 in hex><token text>]" exactly as llama.cpp's
 * llama_decode_text writes it. */
static int put_gpt2_decoded(tsr_buf *b, const char *s, size_t n) {
    for (size_t off = 0; off < n;) {
        uint32_t cpt = utf8_decode(s, n, &off);
        int byte = gpt2_cpt_to_byte(cpt);
        if (byte >= 0) {
            char c = (char)byte;
            if (put(b, &c, 1)) return -1;
            continue;
        }
        char u[4], hex[16];
        size_t w = utf8_encode(cpt, u);
        if (put(b, "[UNK_BYTE_0x", 12)) return -1;
        for (size_t i = 0; i < w; i++) {
            snprintf(hex, sizeof hex, "%02x", (uint8_t)u[i]);
            if (put(b, hex, 2)) return -1;
        }
        if (put(b, s, n) || put(b, "]", 1)) return -1;
    }
    return 0;
}

static int build_piece(const vocab *v, const vocab_token_data *t, tsr_buf *b) {
    const uint32_t shown = VOCAB_ATTR_UNKNOWN | VOCAB_ATTR_CONTROL | VOCAB_ATTR_USER_DEFINED;
    if (t->attr & shown) return put(b, t->text, t->len);
    if (t->attr & VOCAB_ATTR_NORMAL) {
        if (v->type == VOCAB_TYPE_BPE && !v->escape_spaces)
            return put_gpt2_decoded(b, t->text, t->len);
        return put_unescaped(b, t->text, t->len);
    }
    if (t->attr & VOCAB_ATTR_BYTE) {
        char c = byte_of(t);
        return put(b, &c, 1);
    }
    return 0; /* unused / undefined: nothing */
}

int vocab_build_pieces(vocab *v) {
    tsr_buf b = {0};
    v->piece_off = malloc(((size_t)v->n_tokens + 1) * sizeof *v->piece_off);
    if (!v->piece_off) return error_set("vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++) {
        v->piece_off[i] = b.len;
        if (build_piece(v, &v->tokens[i], &b)) {
            free(b.p);
            return -1;
        }
    }
    v->piece_off[v->n_tokens] = b.len;
    if (!b.p && put(&b, "", 0)) return -1;
    v->piece_arena = b.p;
    return 0;
}

const char *vocab_token_piece(const vocab *v, int32_t id, bool special, size_t *len) {
    if (id < 0 || id >= v->n_tokens) return NULL;
    const char *p = v->piece_arena + v->piece_off[id];
    size_t n = v->piece_off[id + 1] - v->piece_off[id];
    if (!special && (v->tokens[id].attr & (VOCAB_ATTR_UNKNOWN | VOCAB_ATTR_CONTROL))) n = 0;
    if (len) *len = n;
    return p;
}

int32_t vocab_token_to_piece(const vocab *v, int32_t id, char *buf, int32_t size, int32_t lstrip,
                             bool special) {
    size_t n;
    const char *p = vocab_token_piece(v, id, special, &n);
    if (!p) return INT32_MIN;
    for (int32_t i = 0; i < lstrip && n > 0 && *p == ' '; i++) p++, n--;
    if (n > (size_t)INT32_MAX) return INT32_MIN;
    if (size < 0 || (size_t)size < n) return -(int32_t)n;
    if (n > 0) memcpy(buf, p, n);
    return (int32_t)n;
}

/* llama.cpp's clean_up_tokenization_spaces, three in-place passes. */
static size_t clean_spaces(char *text, size_t total) {
    /* " ?", " !", " .", " ," lose the space */
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; ++i) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    /* " ' " -> "'" */
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) {
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space */
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (i + 2 < total3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

int vocab_detokenize(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char **out,
                     size_t *out_len) {
    tsr_buf b = {0};
    bool remove_special = flags & VOCAB_DETOK_REMOVE_SPECIAL;
    bool special = flags & VOCAB_DETOK_UNPARSE_SPECIAL;
    bool remove_space = v->add_space_prefix;

    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
        remove_space = false; /* as llama.cpp: the space after BOS stays */
        ids++;
        n--;
    }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;

    if (put(&b, "", 0)) return -1;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = vocab_token_piece(v, ids[i], special, &len);
        if (!p) {
            free(b.p);
            return error_set("detokenize: token id %d at position %zu is out of range (vocabulary "
                             "of %d tokens)",
                             ids[i], i, v->n_tokens);
        }
        if (remove_space && len > 0 && *p == ' ') p++, len--;
        remove_space = false;
        if (put(&b, p, len)) {
            free(b.p);
            return -1;
        }
    }
    if (v->clean_spaces && !(flags & VOCAB_DETOK_NO_CLEANUP)) {
        b.len = clean_spaces(b.p, b.len);
        b.p[b.len] = '\0';
    }
    *out = b.p;
    if (out_len) *out_len = b.len;
    return 0;
}

int32_t vocab_detokenize_buf(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char *buf, int32_t size) {
    char *text = NULL;
    size_t len = 0;
    if (vocab_detokenize(v, ids, n, flags, &text, &len) != 0) return INT32_MIN;
    if (len >= (size_t)INT32_MAX) {
        free(text);
        error_set("detokenize: text too long");
        return INT32_MIN;
    }
    int32_t m = (int32_t)len;
    if (!buf || size < m + 1) {
        free(text);
        return -(m + 1);
    }
    memcpy(buf, text, len + 1);
    free(text);
    return m;
}
