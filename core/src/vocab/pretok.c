/*
 * pretok — BPE pre-tokenization: split text into words with the regexes of
 * the family tokenizer.ggml.pre names (pretok_table.h), as llama.cpp's
 * unicode_regex_split does:
 *
 *   - the text is decoded to code points (invalid bytes -> U+FFFD);
 *   - each regex runs over every piece the previous regex produced, on its
 *     own (lookarounds do not see past the piece); the matches and the text
 *     between them both become pieces;
 *   - each final piece is one word, handed to BPE as its UTF-8 bytes mapped
 *     to GPT-2's byte characters.
 *
 * llama.cpp runs std::regex over a "collapsed" text (each non-ASCII
 * character replaced by its category) or its own code for the gpt2 / llama3
 * patterns; PCRE2 (UTF + UCP) matches the real text. The few places where
 * the two would differ are spelled out in pretok_table.h. \s is pinned to
 * Unicode White_Space, the set llama.cpp uses (PCRE2's own \s adds U+180E).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/grow.h"
#include "vocab/pretok_table.h"
#include "vocab/utf8.h"
#include "vocab/vocab_internal.h"

struct pretok {
    const char *name;
    bool byte_encode; /* words as GPT-2 byte characters (else raw UTF-8) */
    size_t n;
    pcre2_code *code[PRETOK_MAX_REGEX];
};

/* ------------------------------------------------------------ compile */

#define WS_CLASS_BODY                                                                      \
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}" \
    "\\x{205F}\\x{3000}"

/* Replace \s and \S by explicit White_Space classes. Returns a malloc'd
 * pattern or NULL. */
static char *rewrite_whitespace(const char *src) {
    tsr_buf b = {0};
    bool in_class = false;
    size_t n = strlen(src);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        char c = src[i];
        if (c == '\\' && i + 1 < n) {
            char d = src[i + 1];
            if (d == 's') {
                rc = in_class ? buf_puts(&b, WS_CLASS_BODY) : buf_puts(&b, "[" WS_CLASS_BODY "]");
            } else if (d == 'S') {
                if (in_class) rc = -1; /* no pattern of ours has [\S]: keep it simple */
                else rc = buf_puts(&b, "[^" WS_CLASS_BODY "]");
            } else {
                rc = buf_put(&b, src + i, 2);
            }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            rc = buf_put(&b, "[", 1);
            i++;
            in_class = true;
            if (i < n && src[i] == '^') rc |= buf_put(&b, src + i++, 1);
            if (i < n && src[i] == ']') rc |= buf_put(&b, src + i++, 1); /* literal ] */
            continue;
        }
        if (in_class && c == ']') in_class = false;
        rc = buf_put(&b, &c, 1);
        i++;
    }
    if (rc != 0) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static void known_names(char *out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof pretok_names / sizeof pretok_names[0]; i++) {
        int w = snprintf(out + used, size - used, "%s%s", i ? ", " : "", pretok_names[i].name);
        if (w < 0 || (size_t)w >= size - used) break;
        used += (size_t)w;
    }
}

pretok *pretok_new(const char *name, pretok_info *info) {
    const pretok_name *entry = NULL;
    for (size_t i = 0; i < sizeof pretok_names / sizeof pretok_names[0]; i++) {
        if (strcmp(pretok_names[i].name, name) == 0) {
            entry = &pretok_names[i];
            break;
        }
    }
    if (!entry) {
        char list[1024];
        known_names(list, sizeof list);
        error_set("tokenizer.ggml.pre: unknown pre-tokenizer '%s' (known: %s)", name, list);
        return NULL;
    }
    info->clean_spaces = !(entry->flags & PN_NO_CLEAN);
    info->ignore_merges = (entry->flags & PN_IGNORE_MERGES) != 0;
    info->add_bos = (entry->flags & PN_ADD_BOS) != 0;
    info->no_bos = (entry->flags & PN_NO_BOS) != 0;
    info->spm_style = (entry->flags & PN_SPM_STYLE) != 0;
    info->force_bos = (entry->flags & PN_FORCE_BOS) != 0;
    info->newline_words = (entry->flags & PN_NEWLINE_WORDS) != 0;

    pretok *p = calloc(1, sizeof *p);
    if (!p) {
        error_set("tokenizer.ggml.pre: out of memory");
        return NULL;
    }
    p->name = entry->name;
    p->byte_encode = !info->spm_style;
    const char *const *rx = pretok_regexes[entry->family];
    for (size_t i = 0; i < PRETOK_MAX_REGEX && rx[i]; i++) {
        char *pattern = rewrite_whitespace(rx[i]);
        if (!pattern) {
            error_set("tokenizer.ggml.pre '%s': cannot rewrite regex %zu", name, i);
            goto fail;
        }
        int err = 0;
        PCRE2_SIZE err_off = 0;
        p->code[i] = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off,
                                   NULL);
        free(pattern);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            error_set("tokenizer.ggml.pre '%s': regex %zu does not compile at offset %zu: %s",
                      name, i, (size_t)err_off, (const char *)msg);
            goto fail;
        }
        p->n = i + 1;
        /* JIT is an optimisation: without it (unsupported CPU) the
         * interpreter gives the same matches. */
        (void)pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE);
    }
    return p;
fail:
    pretok_free(p);
    return NULL;
}

void pretok_free(pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) pcre2_code_free(p->code[i]);
    free(p);
}

/* -------------------------------------------------------------- split */

/* A piece of the text: byte range [start, end) of the decoded text. */
typedef struct piece {
    size_t start, end;
} piece;

typedef struct piece_list {
    piece *p;
    size_t n, cap;
} piece_list;

static int pieces_push(piece_list *l, size_t start, size_t end) {
    if (ARRAY_GROW(l->p, l->cap, l->n + 1, 64) < 0) return -1;
    l->p[l->n++] = (piece){start, end};
    return 0;
}

typedef struct matcher {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
} matcher;

/* One match of code in subj[0..len) at or after start. 1 found, 0 none,
 * -1 error. */
static int match_at(matcher *m, const pcre2_code *code, const char *subj, size_t len,
                    size_t start, uint32_t options, size_t *ms, size_t *me) {
    int rc = pcre2_match(code, (PCRE2_SPTR)subj, len, start, options | PCRE2_NO_UTF_CHECK, m->md,
                         m->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        /* Pathologically long match: let the interpreter (heap frames) try. */
        rc = pcre2_match(code, (PCRE2_SPTR)subj, len, start,
                         options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, m->md, m->mctx);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return error_set("pre-tokenizer regex failed: %s", (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

/* Split piece [ps, pe) of text by code: matches and gaps between them. */
static int split_piece(matcher *m, const pcre2_code *code, const char *text, size_t ps, size_t pe,
                       piece_list *out) {
    const char *subj = text + ps;
    size_t len = pe - ps;
    size_t pos = 0, last = 0;
    uint32_t options = 0;
    while (pos <= len) {
        size_t ms = 0, me = 0;
        int rc = match_at(m, code, subj, len, pos, options, &ms, &me);
        if (rc < 0) return -1;
        if (rc == 0) {
            if (options == 0) break;
            /* No non-empty match right here after an empty one: step one
             * character and search normally (Perl's /g rule). */
            if (pos >= len) break;
            pos += utf8_len_lead((uint8_t)subj[pos]);
            options = 0;
            continue;
        }
        if (me == ms) { /* empty match: contributes no piece */
            pos = me;
            options = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
            continue;
        }
        if (ms > last && pieces_push(out, ps + last, ps + ms)) goto oom;
        if (pieces_push(out, ps + ms, ps + me)) goto oom;
        last = pos = me;
        options = 0;
    }
    if (last < len && pieces_push(out, ps + last, pe)) goto oom;
    return 0;
oom:
    return error_set("pre-tokenizer: out of memory");
}

/* Decode text leniently and re-encode: enc is what llama.cpp's words are
 * made of (surrogates kept), san the same with surrogates as U+FFFD so PCRE2
 * sees valid UTF-8. Both encodings take 3 bytes, so offsets agree. */
static int decode_text(const char *text, size_t len, char **enc_out, char **san_out,
                       size_t *n_out) {
    char *enc = malloc(len * 3 + 1);
    char *san = malloc(len * 3 + 1);
    if (!enc || !san) {
        free(enc);
        free(san);
        return error_set("pre-tokenizer: out of memory for %zu bytes of text", len);
    }
    size_t off = 0, n = 0;
    while (off < len) {
        uint32_t cpt = utf8_decode(text, len, &off);
        size_t w = utf8_encode(cpt, enc + n);
        if (cpt >= 0xD800 && cpt <= 0xDFFF) utf8_encode(UTF8_REPLACEMENT, san + n);
        else memcpy(san + n, enc + n, w);
        n += w;
    }
    *enc_out = enc;
    *san_out = san;
    *n_out = n;
    return 0;
}

static int words_reserve(vocab_words *w, size_t extra_bytes) {
    if (ARRAY_GROW(w->buf, w->cap, w->len + extra_bytes, 256) < 0) return -1;
    return ARRAY_GROW(w->ends, w->ends_cap, w->n + 1, 64);
}

/* Append bytes [s, s+n) as one word: GPT-2 byte characters, or as is. */
static int words_push(vocab_words *w, const char *s, size_t n, bool byte_encode) {
    if (words_reserve(w, n * 2)) return -1; /* every byte maps to <= 2 bytes */
    if (byte_encode) {
        for (size_t i = 0; i < n; i++)
            w->len += utf8_encode(gpt2_byte_to_cpt((uint8_t)s[i]), w->buf + w->len);
    } else {
        memcpy(w->buf + w->len, s, n);
        w->len += n;
    }
    w->ends[w->n++] = w->len;
    return 0;
}

int pretok_split(const pretok *p, const char *text, size_t len, vocab_words *words) {
    char *enc = NULL, *san = NULL;
    size_t n = 0;
    piece_list cur = {0}, next = {0};
    matcher m = {0};
    int rc = -1;

    if (decode_text(text, len, &enc, &san, &n)) return -1;
    m.md = pcre2_match_data_create(1, NULL);
    m.mctx = pcre2_match_context_create(NULL);
    m.jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!m.md || !m.mctx || !m.jit_stack) {
        error_set("pre-tokenizer: out of memory for regex match data");
        goto done;
    }
    pcre2_jit_stack_assign(m.mctx, NULL, m.jit_stack);

    if (n > 0 && pieces_push(&cur, 0, n)) goto oom;
    for (size_t r = 0; r < p->n; r++) {
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            if (split_piece(&m, p->code[r], san, cur.p[i].start, cur.p[i].end, &next)) goto done;
        }
        piece_list t = cur;
        cur = next;
        next = t;
    }
    for (size_t i = 0; i < cur.n; i++) {
        if (words_push(words, enc + cur.p[i].start, cur.p[i].end - cur.p[i].start, p->byte_encode))
            goto oom;
    }
    rc = 0;
    goto done;
oom:
    error_set("pre-tokenizer: out of memory");
done:
    pcre2_jit_stack_free(m.jit_stack);
    pcre2_match_context_free(m.mctx);
    pcre2_match_data_free(m.md);
    free(cur.p);
    free(next.p);
    free(enc);
    free(san);
    return rc;
}

void vocab_words_free(vocab_words *w) {
    free(w->buf);
    free(w->ends);
    memset(w, 0, sizeof *w);
}
