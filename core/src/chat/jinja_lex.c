/* jinja_lex — template text to tokens, with jinja2's whitespace control as
 * Hugging Face configures it: trim_blocks (one newline after a block or
 * comment tag is dropped), lstrip_blocks (spaces and tabs from the start of
 * a line up to a block or comment tag are dropped), '-' strips all
 * whitespace on that side of a tag, '+' keeps it. Newlines are normalised
 * to "\n" and one trailing newline of the template is dropped
 * (keep_trailing_newline off). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "util/error.h"

typedef struct lexer {
    jarena *a;
    jparse_err *err;
    const char *s;
    size_t len, pos;
    int line;
    jtok *toks;
    size_t n, cap;
    int balance; /* open ( [ { inside a tag */
} lexer;

_Noreturn static void lex_fail(lexer *L, const char *fmt, const char *arg) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, arg);
    error_set("template line %d: %s", L->line, msg);
    longjmp(L->err->jmp, 1);
}

static void *lex_alloc(lexer *L, size_t size) {
    void *p = jarena_alloc(L->a, size);
    if (!p) lex_fail(L, "%s", "template too large");
    return p;
}

static jtok *push(lexer *L, int kind, const char *s, size_t len) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        jtok *t = lex_alloc(L, cap * sizeof *t);
        if (L->n) memcpy(t, L->toks, L->n * sizeof *t);
        L->toks = t;
        L->cap = cap;
    }
    jtok *t = &L->toks[L->n++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->line = L->line;
    t->s = s;
    t->len = len;
    return t;
}

static void count_lines(lexer *L, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        if (L->s[i] == '\n') L->line++;
}

static bool is_ws(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' ||
           (ch >= 0x1C && ch <= 0x1F);
}

/* Length of text after rstrip(). */
static size_t rstrip_len(const char *s, size_t len) {
    while (len && is_ws(s[len - 1])) len--;
    return len;
}

static size_t skip_ws(const char *s, size_t len, size_t pos) {
    while (pos < len && is_ws(s[pos])) pos++;
    return pos;
}

/* The text before a tag, whitespace control applied. */
static void emit_text(lexer *L, size_t from, size_t to, char sign, bool variable,
                      bool line_starting) {
    const char *t = L->s + from;
    size_t len = to - from;
    if (sign == '-') {
        len = rstrip_len(t, len);
    } else if (sign != '+' && !variable) {
        size_t l_pos = 0;
        for (size_t i = len; i > 0; i--)
            if (t[i - 1] == '\n') {
                l_pos = i;
                break;
            }
        if (l_pos > 0 || line_starting) {
            bool only_blank = true;
            for (size_t i = l_pos; i < len; i++)
                if (t[i] != ' ' && t[i] != '\t') only_blank = false;
            if (only_blank) len = l_pos;
        }
    }
    if (len) push(L, T_TEXT, t, len);
    count_lines(L, from, to);
}

/* Decode a string literal body as Python's "unicode-escape" does. */
static void lex_string(lexer *L, char q) {
    size_t start = ++L->pos;
    while (L->pos < L->len && L->s[L->pos] != q) {
        if (L->s[L->pos] == '\\' && L->pos + 1 < L->len) L->pos++;
        L->pos++;
    }
    if (L->pos >= L->len) lex_fail(L, "%s", "unterminated string literal");
    const char *s = L->s + start;
    size_t n = L->pos - start;
    char *out = lex_alloc(L, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[o++] = s[i];
            continue;
        }
        char e = s[++i];
        int32_t cp = -1;
        size_t digits = 0;
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case '\\': out[o++] = '\\'; break;
        case '\'': out[o++] = '\''; break;
        case '"': out[o++] = '"'; break;
        case 'a': out[o++] = '\a'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'v': out[o++] = '\v'; break;
        case '\n': break; /* line continuation */
        case 'N': lex_fail(L, "%s", "named \\N{...} escapes are not supported");
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                cp = 0;
                size_t k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (s[i] - '0');
                    i++;
                    k++;
                }
                i--;
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
        }
        if (digits) {
            cp = 0;
            for (size_t k = 0; k < digits; k++) {
                char h = i + 1 + k < n ? s[i + 1 + k] : 0;
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0) lex_fail(L, "%s", "truncated \\x/\\u escape in string literal");
                cp = cp * 16 + v;
                /* checked per digit: eight digits overflow an int */
                if (cp > 0x10FFFF) lex_fail(L, "%s", "bad \\U escape in string literal");
            }
            i += digits;
        }
        if (cp >= 0) {
            /* out has room: an escape is never shorter than its UTF-8 */
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;
            o += utf8_encode(cp, out + o);
        }
    }
    out[o] = 0;
    jtok *t = push(L, T_STRING, out, o);
    count_lines(L, start, L->pos);
    (void)t;
    L->pos++;
}

static bool is_name_start(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch >= 0x80;
}
static bool is_name_char(unsigned char ch) { return is_name_start(ch) || (ch >= '0' && ch <= '9'); }
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* digits with '_' separators; returns the end */
static size_t scan_digits(const char *s, size_t len, size_t pos) {
    while (pos < len && (is_digit(s[pos]) || (s[pos] == '_' && pos + 1 < len && is_digit(s[pos + 1]))))
        pos++;
    return pos;
}

static void lex_number(lexer *L) {
    const char *s = L->s;
    size_t start = L->pos, p = scan_digits(s, L->len, L->pos);
    bool is_float = false;
    if (p + 1 < L->len && s[p] == '.' && is_digit(s[p + 1])) {
        is_float = true;
        p = scan_digits(s, L->len, p + 1);
    }
    if (p < L->len && (s[p] == 'e' || s[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->len && (s[q] == '+' || s[q] == '-')) q++;
        if (q < L->len && is_digit(s[q])) {
            is_float = true;
            p = scan_digits(s, L->len, q);
        }
    }
    char tmp[64];
    size_t o = 0;
    for (size_t i = start; i < p && o < sizeof tmp - 1; i++)
        if (s[i] != '_') tmp[o++] = s[i];
    tmp[o] = 0;
    jtok *t = push(L, is_float ? T_FLOAT : T_INT, s + start, p - start);
    if (is_float) {
        t->f = strtod(tmp, NULL);
    } else {
        if (o > 18) lex_fail(L, "%s", "integer literal too large");
        t->i = strtoll(tmp, NULL, 10);
    }
    L->pos = p;
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
static const char ops1[] = "+-/*%~[](){}<>=.:|,;";

/* Tokens inside {{ }} or {% %} up to the end tag (consumed). Returns whether
 * the end tag ended with a newline (for lstrip's line_starting). */
static bool lex_tag(lexer *L, bool block) {
    const char *s = L->s;
    L->balance = 0;
    for (;;) {
        size_t p = L->pos;
        while (p < L->len && is_ws(s[p])) p++;
        count_lines(L, L->pos, p);
        L->pos = p;
        if (p >= L->len)
            lex_fail(L, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
        if (L->balance == 0) {
            char close = block ? '%' : '}';
            size_t rest = L->len - p;
            if (rest >= 3 && (s[p] == '-' || (block && s[p] == '+')) && s[p + 1] == close &&
                s[p + 2] == '}') {
                push(L, block ? T_BLOCK_END : T_VAR_END, s + p, 3);
                size_t q = p + 3;
                if (s[p] == '-') q = skip_ws(s, L->len, q);
                count_lines(L, p, q);
                L->pos = q;
                return q > p + 3 && s[q - 1] == '\n';
            }
            if (rest >= 2 && s[p] == close && s[p + 1] == '}') {
                push(L, block ? T_BLOCK_END : T_VAR_END, s + p, 2);
                size_t q = p + 2;
                if (block && q < L->len && s[q] == '\n') { /* trim_blocks */
                    q++;
                    L->line++;
                }
                L->pos = q;
                return q > p + 2;
            }
        }
        char ch = s[p];
        if (ch == '\'' || ch == '"') {
            lex_string(L, ch);
        } else if (is_digit(ch)) {
            lex_number(L);
        } else if (is_name_start((unsigned char)ch)) {
            size_t q = p;
            while (q < L->len && is_name_char((unsigned char)s[q])) q++;
            push(L, T_NAME, s + p, q - p);
            L->pos = q;
        } else {
            size_t n = 0;
            for (size_t i = 0; i < sizeof ops2 / sizeof ops2[0]; i++)
                if (p + 1 < L->len && s[p] == ops2[i][0] && s[p + 1] == ops2[i][1]) n = 2;
            if (!n && strchr(ops1, ch) && ch) n = 1;
            if (!n) {
                char bad[8] = {ch, 0};
                lex_fail(L, "unexpected character '%s'", bad);
            }
            if (n == 1 && (ch == '(' || ch == '[' || ch == '{')) L->balance++;
            if (n == 1 && (ch == ')' || ch == ']' || ch == '}')) {
                if (L->balance == 0) {
                    char bad[8] = {ch, 0};
                    lex_fail(L, "unexpected '%s'", bad);
                }
                L->balance--;
            }
            push(L, T_OP, s + p, n);
            L->pos = p + n;
        }
    }
}

/* "{% raw %}" at pos (after "{%" and its sign)? Returns the end of the tag. */
static size_t match_word_tag(const char *s, size_t len, size_t pos, const char *word, char *end_sign) {
    size_t p = skip_ws(s, len, pos), wl = strlen(word);
    if (len - p < wl || memcmp(s + p, word, wl) != 0) return 0;
    p = skip_ws(s, len, p + wl);
    *end_sign = 0;
    if (p < len && (s[p] == '-' || s[p] == '+')) *end_sign = s[p++];
    if (len - p >= 2 && s[p] == '%' && s[p + 1] == '}') return p + 2;
    return 0;
}

static bool lex_raw(lexer *L, size_t after_raw, char raw_end_sign) {
    const char *s = L->s;
    size_t p = after_raw;
    if (raw_end_sign == '-') p = skip_ws(s, L->len, p);
    count_lines(L, L->pos, p);
    for (size_t q = p; q + 1 < L->len; q++) {
        if (s[q] != '{' || s[q + 1] != '%') continue;
        size_t r = q + 2;
        char sign = 0, end_sign;
        if (r < L->len && (s[r] == '-' || s[r] == '+')) sign = s[r++];
        size_t end = match_word_tag(s, L->len, r, "endraw", &end_sign);
        if (!end) continue;
        size_t tlen = q - p;
        if (sign == '-') tlen = rstrip_len(s + p, tlen);
        if (tlen) push(L, T_TEXT, s + p, tlen);
        count_lines(L, p, end);
        if (end_sign == '-') {
            size_t e2 = skip_ws(s, L->len, end);
            count_lines(L, end, e2);
            end = e2;
        } else if (end_sign != '+' && end < L->len && s[end] == '\n') {
            end++;
            L->line++;
        }
        L->pos = end;
        return s[end - 1] == '\n';
    }
    lex_fail(L, "%s", "missing {% endraw %}");
}

/* The lexer's main loop (~80 lines): text, then the tag, expression and
 * comment openers with their whitespace control, one state machine. */
size_t jinja_lex(jarena *a, const char *src, size_t len, jtok **out, jparse_err *err) {
    lexer L = {.a = a, .err = err, .line = 1};
    /* jinja2 gets a Python str: reject what is not UTF-8 up front */
    for (size_t i = 0; i < len;) {
        int32_t cp;
        size_t k = jutf8_decode(src + i, len - i, &cp);
        if ((k == 1 && (unsigned char)src[i] >= 0x80) || (cp >= 0xD800 && cp < 0xE000)) {
            for (size_t j = 0; j < i; j++) L.line += src[j] == '\n';
            char at[32];
            snprintf(at, sizeof at, "%zu", i);
            lex_fail(&L, "invalid UTF-8 at byte %s", at);
        }
        i += k;
    }
    /* normalise newlines, drop one trailing newline */
    char *s = jarena_alloc(a, len + 1);
    if (!s) lex_fail(&L, "%s", "template too large");
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = 0;
    L.s = s;
    L.len = n;
    bool line_starting = true;
    while (L.pos < L.len) {
        size_t q = L.pos;
        while (q + 1 < L.len && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')))
            q++;
        if (q + 1 >= L.len) {
            push(&L, T_TEXT, s + L.pos, L.len - L.pos);
            count_lines(&L, L.pos, L.len);
            break;
        }
        char kind = s[q + 1];
        char sign = q + 2 < L.len && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        size_t after = q + 2 + (sign ? 1 : 0);
        emit_text(&L, L.pos, q, sign, kind == '{', line_starting);
        L.pos = after;
        if (kind == '#') {
            size_t i = after;
            for (; i + 1 < L.len; i++) {
                if ((s[i] == '-' || s[i] == '+') && i + 2 < L.len && s[i + 1] == '#' && s[i + 2] == '}')
                    break;
                if (s[i] == '#' && s[i + 1] == '}') break;
            }
            if (i + 1 >= L.len) lex_fail(&L, "%s", "missing end of comment tag");
            size_t end;
            if (s[i] == '#') {
                end = i + 2;
                if (end < L.len && s[end] == '\n') end++;
            } else {
                end = i + 3;
                if (s[i] == '-') end = skip_ws(s, L.len, end);
            }
            count_lines(&L, after, end);
            L.pos = end;
            line_starting = s[end - 1] == '\n';
            continue;
        }
        if (kind == '%') {
            char raw_sign;
            size_t raw_end = match_word_tag(s, L.len, after, "raw", &raw_sign);
            if (raw_end) {
                line_starting = lex_raw(&L, raw_end, raw_sign);
                continue;
            }
        }
        push(&L, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, s + q, after - q);
        line_starting = lex_tag(&L, kind == '%');
    }
    push(&L, T_EOF, s + L.len, 0);
    *out = L.toks;
    return L.n;
}
