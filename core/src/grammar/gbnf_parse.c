/*
 * gbnf_parse — GBNF text to the flat element array of grammar.h.
 *
 * The syntax (llama.cpp's):
 *   rule     ::= name "::=" alternatives      (ends at a newline outside
 *                                              parentheses; a next line
 *                                              starting with '|' continues)
 *   alternatives ::= sequence ("|" sequence)*
 *   sequence ::= (primary repeat?)*
 *   primary  ::= "literal" | [class] | [^class] | name | "(" alternatives ")" | "."
 *   repeat   ::= "*" | "+" | "?" | "{" m "}" | "{" m "," "}" | "{" m "," n "}"
 * Comments run from '#' to the end of the line. Escapes in literals and
 * classes: \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH.
 *
 * The input is hostile: every limit of grammar.h is checked, and the first
 * error is reported with its line and column.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"
#include "util/grow.h"

#define REPEAT_UNBOUNDED UINT32_MAX

typedef struct evec {
    grammar_elem *data;
    size_t n, cap;
} evec;

typedef struct prule {
    char *name;
    evec body;
    bool defined;
    size_t def_pos; /* where it was defined (or first referenced) */
    size_t ref_pos; /* first reference, for "undefined rule" */
    bool referenced;
    uint32_t owner; /* the user rule a generated rule belongs to */
    uint32_t n_generated;
} prule;

typedef struct parser {
    const char *src;
    size_t len, pos;
    prule *rules;
    size_t n_rules, rules_cap;
    uint32_t *names; /* open addressing over user rules: index + 1, 0 empty */
    size_t names_cap, n_names;
    size_t total; /* elements in all rules */
    char msg[256];
    size_t err_pos;
    bool failed;
} parser;

/* ------------------------------------------------------------ errors */

static int fail_at(parser *p, size_t pos, const char *fmt, ...) TSR_PRINTF(3, 4);
static int fail_at(parser *p, size_t pos, const char *fmt, ...) {
    if (p->failed) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->msg, sizeof p->msg, fmt, ap);
    va_end(ap);
    p->err_pos = pos;
    p->failed = true;
    return -1;
}

/* Line and column (1-based, counting code points) of a byte offset. */
static void line_col(const char *s, size_t len, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < len; i++) {
        if (s[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)s[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* A printable form of the character at pos for messages. */
static const char *char_desc(const parser *p, size_t pos, char buf[16]) {
    if (pos >= p->len) return "end of input";
    unsigned char c = (unsigned char)p->src[pos];
    if (c == '\n') return "end of line";
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

/* ------------------------------------------------------------ building */

static int evec_push(parser *p, evec *v, uint32_t op, uint32_t value) {
    if (p->total >= GRAMMAR_MAX_ELEMS)
        return fail_at(p, p->pos, "the grammar is too large (more than %d elements)", GRAMMAR_MAX_ELEMS);
    if (ARRAY_GROW(v->data, v->cap, v->n + 1, 16) < 0) return fail_at(p, p->pos, "out of memory");
    v->data[v->n++] = (grammar_elem){op, value};
    p->total++;
    return 0;
}

static int evec_append(parser *p, evec *v, const grammar_elem *e, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (evec_push(p, v, e[i].op, e[i].value) < 0) return -1;
    return 0;
}

static void evec_truncate(parser *p, evec *v, size_t n) {
    p->total -= v->n - n;
    v->n = n;
}

/* A new rule; returns its index or -1. */
static int64_t rule_add(parser *p, const char *name, size_t name_len, size_t pos, uint32_t owner) {
    if (p->n_rules >= GRAMMAR_MAX_ELEMS / 2) return fail_at(p, pos, "the grammar has too many rules");
    if (ARRAY_GROW(p->rules, p->rules_cap, p->n_rules + 1, 32) < 0) return fail_at(p, pos, "out of memory");
    prule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(name_len + 1);
    if (!r->name) return fail_at(p, pos, "out of memory");
    memcpy(r->name, name, name_len);
    r->name[name_len] = '\0';
    r->def_pos = pos;
    r->owner = owner == UINT32_MAX ? (uint32_t)p->n_rules : owner;
    return (int64_t)p->n_rules++;
}

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The user rule named name (created undefined when new), or -1. */
static int64_t rule_find(parser *p, const char *name, size_t n, size_t pos) {
    if (p->n_names * 2 >= p->names_cap) {
        size_t cap = p->names_cap ? p->names_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return fail_at(p, pos, "out of memory");
        for (size_t i = 0; i < p->names_cap; i++) {
            if (!p->names[i]) continue;
            const char *nm = p->rules[p->names[i] - 1].name;
            size_t j = name_hash(nm, strlen(nm)) & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = p->names[i];
        }
        free(p->names);
        p->names = t;
        p->names_cap = cap;
    }
    size_t j = name_hash(name, n) & (p->names_cap - 1);
    for (; p->names[j]; j = (j + 1) & (p->names_cap - 1)) {
        const char *nm = p->rules[p->names[j] - 1].name;
        if (strlen(nm) == n && !memcmp(nm, name, n)) return p->names[j] - 1;
    }
    int64_t r = rule_add(p, name, n, pos, UINT32_MAX);
    if (r < 0) return -1;
    p->names[j] = (uint32_t)r + 1;
    p->n_names++;
    return r;
}

/* A generated rule (group or repetition) belonging to user rule owner. */
static int64_t rule_generate(parser *p, uint32_t owner) {
    char name[64];
    snprintf(name, sizeof name, "%.40s-%u", p->rules[owner].name, ++p->rules[owner].n_generated);
    int64_t r = rule_add(p, name, strlen(name), p->pos, owner);
    if (r >= 0) p->rules[r].defined = true;
    return r;
}

/* ------------------------------------------------------------ lexing */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skip blanks and comments; newlines too when newline_ok. */
static void skip_space(parser *p, bool newline_ok) {
    while (p->pos < p->len) {
        char c = p->src[p->pos];
        if (c == ' ' || c == '\t' || c == '\r') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->src[p->pos] != '\n')
                p->pos++;
        } else if (c == '\n' && newline_ok) {
            p->pos++;
        } else {
            break;
        }
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 code point of the source at p->pos. */
static int read_utf8(parser *p, uint32_t *out) {
    const unsigned char *s = (const unsigned char *)p->src + p->pos;
    size_t left = p->len - p->pos;
    unsigned char c = s[0];
    size_t n = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (n == 0 || n > left) return fail_at(p, p->pos, "invalid UTF-8 (byte 0x%02X)", c);
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1Fu : n == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return fail_at(p, p->pos, "invalid UTF-8 (byte 0x%02X)", c);
        cp = cp << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail_at(p, p->pos, "invalid UTF-8 (byte 0x%02X)", c);
    p->pos += n;
    *out = cp;
    return 0;
}

/* One character of a literal or class: an escape or a UTF-8 code point. */
static int read_char(parser *p, uint32_t *out) {
    if (p->src[p->pos] != '\\') return read_utf8(p, out);
    size_t at = p->pos;
    if (at + 1 >= p->len) return fail_at(p, at, "unterminated escape at the end of input");
    char e = p->src[at + 1];
    p->pos += 2;
    int digits = 0;
    switch (e) {
    case 'n': *out = '\n'; return 0;
    case 'r': *out = '\r'; return 0;
    case 't': *out = '\t'; return 0;
    case '\\':
    case '"':
    case '\'':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/': *out = (uint32_t)(unsigned char)e; return 0;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
        if ((unsigned char)e >= 0x20 && (unsigned char)e < 0x7F)
            return fail_at(p, at, "unknown escape '\\%c'", e);
        return fail_at(p, at, "unknown escape (backslash before byte 0x%02X)", (unsigned char)e);
    }
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int h = p->pos < p->len ? hex_value(p->src[p->pos]) : -1;
        if (h < 0) return fail_at(p, at, "escape '\\%c' needs %d hex digits", e, digits);
        v = v << 4 | (uint32_t)h;
        p->pos++;
    }
    if (v > 0x10FFFF) return fail_at(p, at, "escape '\\%c' gives 0x%X, beyond U+10FFFF", e, v);
    *out = v;
    return 0;
}

/* ------------------------------------------------------------ grammar */

static int parse_alternates(parser *p, uint32_t rule, uint32_t owner, int depth);

/* "..." appended as one class per character; *n_chars counts them. */
static int parse_literal(parser *p, evec *v, size_t *n_chars) {
    size_t start = p->pos++;
    *n_chars = 0;
    for (;;) {
        if (p->pos >= p->len || p->src[p->pos] == '\n')
            return fail_at(p, start, "unterminated string literal");
        if (p->src[p->pos] == '"') break;
        uint32_t cp;
        if (read_char(p, &cp) < 0 || evec_push(p, v, GRAMMAR_CHAR, cp) < 0) return -1;
        (*n_chars)++;
    }
    p->pos++;
    return 0;
}

/* [...] or [^...]. */
static int parse_class(parser *p, evec *v) {
    size_t start = p->pos++;
    bool neg = p->pos < p->len && p->src[p->pos] == '^';
    if (neg) p->pos++;
    size_t first = v->n;
    for (;;) {
        if (p->pos >= p->len || p->src[p->pos] == '\n')
            return fail_at(p, start, "unterminated character class");
        if (p->src[p->pos] == ']') break;
        size_t at = p->pos;
        uint32_t lo, hi;
        if (read_char(p, &lo) < 0) return -1;
        uint32_t op = v->n == first ? (neg ? GRAMMAR_CHAR_NOT : GRAMMAR_CHAR) : GRAMMAR_CHAR_ALT;
        if (evec_push(p, v, op, lo) < 0) return -1;
        if (p->pos + 1 < p->len && p->src[p->pos] == '-' && p->src[p->pos + 1] != ']') {
            p->pos++;
            if (p->pos >= p->len || p->src[p->pos] == '\n')
                return fail_at(p, start, "unterminated character class");
            if (read_char(p, &hi) < 0) return -1;
            if (hi < lo) return fail_at(p, at, "character range is backwards (U+%04X > U+%04X)", lo, hi);
            if (evec_push(p, v, GRAMMAR_CHAR_HI, hi) < 0) return -1;
        }
    }
    if (v->n == first) return fail_at(p, start, "empty character class");
    p->pos++;
    return 0;
}

/* A decimal count in {m,n}. */
static int parse_count(parser *p, uint32_t *out) {
    size_t at = p->pos;
    uint64_t v = 0;
    if (p->pos >= p->len || p->src[p->pos] < '0' || p->src[p->pos] > '9')
        return fail_at(p, at, "expected a number in the repetition, got %s", char_desc(p, at, (char[16]){0}));
    while (p->pos < p->len && p->src[p->pos] >= '0' && p->src[p->pos] <= '9') {
        v = v * 10 + (uint64_t)(p->src[p->pos++] - '0');
        if (v > GRAMMAR_MAX_REPEAT)
            return fail_at(p, at, "repetition count is over the limit of %d", GRAMMAR_MAX_REPEAT);
    }
    *out = (uint32_t)v;
    return 0;
}

/* Rewrite the atom at the end of rule's body (from `start`) as
 * atom{min,max}. A multi-element atom that is not one class (a literal)
 * becomes its own rule first so that copies of it are single units. */
static int apply_repeat(parser *p, uint32_t rule, size_t start, bool single, uint32_t owner, uint32_t min,
                        uint32_t max) {
    enum { MAX_ATOM = 64 };
    if (!single || p->rules[rule].body.n - start > MAX_ATOM) {
        int64_t r = rule_generate(p, owner);
        if (r < 0) return -1;
        evec *v = &p->rules[rule].body, *body = &p->rules[r].body;
        if (evec_append(p, body, v->data + start, v->n - start) < 0 || evec_push(p, body, GRAMMAR_END, 0) < 0)
            return -1;
        evec_truncate(p, v, start);
        if (evec_push(p, v, GRAMMAR_REF, (uint32_t)r) < 0) return -1;
    }
    evec *v = &p->rules[rule].body;
    size_t n_atom = v->n - start;
    grammar_elem atom[MAX_ATOM]; /* one class or one reference */
    memcpy(atom, v->data + start, n_atom * sizeof *atom);
    evec_truncate(p, v, start);
    for (uint32_t i = 0; i < min; i++)
        if (evec_append(p, &p->rules[rule].body, atom, n_atom) < 0) return -1;
    if (max == REPEAT_UNBOUNDED) {
        /* r ::= atom r | */
        int64_t r = rule_generate(p, owner);
        if (r < 0) return -1;
        evec *body = &p->rules[r].body;
        if (evec_append(p, body, atom, n_atom) < 0 || evec_push(p, body, GRAMMAR_REF, (uint32_t)r) < 0 ||
            evec_push(p, body, GRAMMAR_ALT, 0) < 0 || evec_push(p, body, GRAMMAR_END, 0) < 0)
            return -1;
        return evec_push(p, &p->rules[rule].body, GRAMMAR_REF, (uint32_t)r);
    }
    /* r_1 ::= atom | ;  r_k ::= atom r_{k-1} | */
    int64_t prev = -1;
    for (uint32_t k = min; k < max; k++) {
        int64_t r = rule_generate(p, owner);
        if (r < 0) return -1;
        evec *body = &p->rules[r].body;
        if (evec_append(p, body, atom, n_atom) < 0) return -1;
        if (prev >= 0 && evec_push(p, body, GRAMMAR_REF, (uint32_t)prev) < 0) return -1;
        if (evec_push(p, body, GRAMMAR_ALT, 0) < 0 || evec_push(p, body, GRAMMAR_END, 0) < 0) return -1;
        prev = r;
    }
    if (prev >= 0) return evec_push(p, &p->rules[rule].body, GRAMMAR_REF, (uint32_t)prev);
    return 0;
}

/* The repetition operator at p->pos (*, +, ?, {m}, {m,}, {m,n}) as its
 * bounds; max REPEAT_UNBOUNDED for none. */
static int parse_repeat(parser *p, int depth, uint32_t *min_out, uint32_t *max_out) {
    const size_t at = p->pos;
    const char c = p->src[p->pos++];
    uint32_t min = c == '+' ? 1 : 0, max = c == '?' ? 1 : REPEAT_UNBOUNDED;
    if (c == '{') {
        skip_space(p, depth > 0);
        if (parse_count(p, &min) < 0) return -1;
        skip_space(p, depth > 0);
        max = min;
        if (p->pos < p->len && p->src[p->pos] == ',') {
            p->pos++;
            skip_space(p, depth > 0);
            max = REPEAT_UNBOUNDED;
            if (p->pos < p->len && p->src[p->pos] != '}' && parse_count(p, &max) < 0) return -1;
            skip_space(p, depth > 0);
        }
        if (p->pos >= p->len || p->src[p->pos] != '}')
            return fail_at(p, at, "unclosed '{': expected '}' before %s", char_desc(p, p->pos, (char[16]){0}));
        p->pos++;
        if (max < min) return fail_at(p, at, "repetition {%u,%u} has its maximum below its minimum", min, max);
    }
    *min_out = min;
    *max_out = max;
    return 0;
}

/* Elements of one alternative into rule's body. */
static int parse_sequence(parser *p, uint32_t rule, uint32_t owner, int depth) {
    size_t last = SIZE_MAX; /* start of the last primary */
    bool last_single = false;
    for (;;) {
        skip_space(p, depth > 0);
        if (p->pos >= p->len) return 0;
        evec *v = &p->rules[rule].body;
        char c = p->src[p->pos];
        size_t at = p->pos;
        if (c == '"') {
            size_t n_chars;
            last = v->n;
            if (parse_literal(p, &p->rules[rule].body, &n_chars) < 0) return -1;
            last_single = n_chars == 1;
            if (n_chars == 0) last = SIZE_MAX; /* "" matches empty text: nothing to repeat */
        } else if (c == '[') {
            last = v->n;
            last_single = true;
            if (parse_class(p, v) < 0) return -1;
        } else if (c == '.') {
            p->pos++;
            last = v->n;
            last_single = true;
            if (evec_push(p, v, GRAMMAR_ANY, 0) < 0) return -1;
        } else if (is_name_char(c)) {
            size_t s = p->pos;
            while (p->pos < p->len && is_name_char(p->src[p->pos]))
                p->pos++;
            int64_t r = rule_find(p, p->src + s, p->pos - s, s);
            if (r < 0) return -1;
            if (!p->rules[r].referenced) {
                p->rules[r].referenced = true;
                p->rules[r].ref_pos = s;
            }
            v = &p->rules[rule].body; /* rule_find may move the rules */
            last = v->n;
            last_single = true;
            if (evec_push(p, v, GRAMMAR_REF, (uint32_t)r) < 0) return -1;
        } else if (c == '(') {
            if (depth + 1 > GRAMMAR_MAX_NEST)
                return fail_at(p, at, "parentheses nested deeper than %d levels", GRAMMAR_MAX_NEST);
            p->pos++;
            int64_t r = rule_generate(p, owner);
            if (r < 0 || parse_alternates(p, (uint32_t)r, owner, depth + 1) < 0) return -1;
            if (p->pos >= p->len || p->src[p->pos] != ')')
                return fail_at(p, at, "unclosed '(': expected ')' before %s",
                               char_desc(p, p->pos, (char[16]){0}));
            p->pos++;
            if (evec_push(p, &p->rules[r].body, GRAMMAR_END, 0) < 0) return -1;
            v = &p->rules[rule].body;
            last = v->n;
            last_single = true;
            if (evec_push(p, v, GRAMMAR_REF, (uint32_t)r) < 0) return -1;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == SIZE_MAX) return fail_at(p, at, "'%c' has nothing before it to repeat", c);
            uint32_t min = 0, max = REPEAT_UNBOUNDED;
            if (parse_repeat(p, depth, &min, &max) < 0) return -1;
            if (apply_repeat(p, rule, last, last_single, owner, min, max) < 0) return -1;
            last = SIZE_MAX; /* x** is an error, as in llama.cpp */
        } else {
            return 0; /* '|', ')', newline or something the caller reports */
        }
    }
}

static int parse_alternates(parser *p, uint32_t rule, uint32_t owner, int depth) {
    if (parse_sequence(p, rule, owner, depth) < 0) return -1;
    for (;;) {
        size_t save = p->pos;
        if (depth == 0) skip_space(p, true); /* a line starting with '|' continues */
        if (p->pos < p->len && p->src[p->pos] == '|') {
            p->pos++;
            skip_space(p, true);
            if (evec_push(p, &p->rules[rule].body, GRAMMAR_ALT, 0) < 0 ||
                parse_sequence(p, rule, owner, depth) < 0)
                return -1;
            continue;
        }
        p->pos = save;
        return 0;
    }
}

static int parse_rule(parser *p) {
    size_t at = p->pos;
    if (!is_name_char(p->src[p->pos]))
        return fail_at(p, at, "expected a rule name, got %s", char_desc(p, at, (char[16]){0}));
    while (p->pos < p->len && is_name_char(p->src[p->pos]))
        p->pos++;
    int64_t r = rule_find(p, p->src + at, p->pos - at, at);
    if (r < 0) return -1;
    skip_space(p, false);
    if (p->len - p->pos < 3 || memcmp(p->src + p->pos, "::=", 3) != 0)
        return fail_at(p, p->pos, "expected '::=' after the rule name '%s'", p->rules[r].name);
    if (p->rules[r].defined) return fail_at(p, at, "rule '%s' is defined twice", p->rules[r].name);
    p->rules[r].defined = true;
    p->rules[r].def_pos = at;
    p->pos += 3;
    skip_space(p, true);
    if (parse_alternates(p, (uint32_t)r, (uint32_t)r, 0) < 0) return -1;
    if (evec_push(p, &p->rules[r].body, GRAMMAR_END, 0) < 0) return -1;
    skip_space(p, false);
    if (p->pos < p->len && p->src[p->pos] != '\n') {
        char c = p->src[p->pos];
        if (c == ')') return fail_at(p, p->pos, "')' without a matching '('");
        return fail_at(p, p->pos, "unexpected %s in rule '%s'", char_desc(p, p->pos, (char[16]){0}),
                       p->rules[r].name);
    }
    return 0;
}

/* ------------------------------------------------------------ checks */

/* Which rules can match empty text: an alternative of only nullable
 * references is nullable. Worklist over reference counts, linear time. */
static bool *nullable_rules(const grammar *g) {
    uint32_t n_alts = g->alt_first[g->n_rules];
    bool *nullable = calloc(g->n_rules, sizeof *nullable);
    uint32_t *pending = calloc(n_alts ? n_alts : 1, sizeof *pending);
    uint32_t *alt_rule = malloc((n_alts ? n_alts : 1) * sizeof *alt_rule);
    uint32_t *occ_first = calloc(g->n_rules + 1, sizeof *occ_first);
    uint32_t *queue = malloc(g->n_rules * sizeof *queue + 1);
    uint32_t *occ = NULL, *fill = NULL;
    size_t n_occ = 0;
    if (!nullable || !pending || !alt_rule || !occ_first || !queue) goto oom;
    /* Reference occurrences in all-reference alternatives, grouped by rule. */
    for (uint32_t r = 0; r < g->n_rules; r++) {
        for (uint32_t a = g->alt_first[r]; a < g->alt_first[r + 1]; a++) {
            alt_rule[a] = r;
            bool refs_only = true;
            uint32_t refs = 0;
            for (uint32_t i = g->alt_start[a]; g->elems[i].op != GRAMMAR_END && g->elems[i].op != GRAMMAR_ALT;
                 i++) {
                if (g->elems[i].op != GRAMMAR_REF) {
                    refs_only = false;
                    break;
                }
                refs++;
            }
            pending[a] = refs_only ? refs : UINT32_MAX;
            if (refs_only)
                for (uint32_t i = g->alt_start[a]; g->elems[i].op == GRAMMAR_REF; i++) {
                    occ_first[g->elems[i].value + 1]++;
                    n_occ++;
                }
        }
    }
    for (uint32_t r = 0; r < g->n_rules; r++)
        occ_first[r + 1] += occ_first[r];
    occ = malloc((n_occ ? n_occ : 1) * sizeof *occ);
    fill = malloc((g->n_rules + 1) * sizeof *fill);
    if (!occ || !fill) goto oom;
    memcpy(fill, occ_first, (g->n_rules + 1) * sizeof *fill);
    for (uint32_t a = 0; a < n_alts; a++)
        if (pending[a] != UINT32_MAX)
            for (uint32_t i = g->alt_start[a]; g->elems[i].op == GRAMMAR_REF; i++)
                occ[fill[g->elems[i].value]++] = a;
    size_t head = 0, tail = 0;
    for (uint32_t a = 0; a < n_alts; a++)
        if (pending[a] == 0 && !nullable[alt_rule[a]]) {
            nullable[alt_rule[a]] = true;
            queue[tail++] = alt_rule[a];
        }
    while (head < tail) {
        uint32_t r = queue[head++];
        for (uint32_t k = occ_first[r]; k < occ_first[r + 1]; k++) {
            uint32_t a = occ[k];
            if (--pending[a] == 0 && !nullable[alt_rule[a]]) {
                nullable[alt_rule[a]] = true;
                queue[tail++] = alt_rule[a];
            }
        }
    }
    goto done;
oom:
    free(nullable);
    nullable = NULL;
    error_set("grammar: out of memory");
done:
    free(pending);
    free(alt_rule);
    free(occ_first);
    free(queue);
    free(occ);
    free(fill);
    return nullable;
}

/* The next rule r can start with, from the iterator (alternative *a,
 * element *i): references at the start of an alternative, or after
 * references that can match empty text. -1 when there are no more. */
static int64_t next_left_edge(const grammar *g, const bool *nullable, uint32_t r, uint32_t *a, uint32_t *i) {
    while (*a < g->alt_first[r + 1]) {
        const grammar_elem *e = *i == UINT32_MAX ? NULL : &g->elems[*i];
        if (e && e->op == GRAMMAR_REF) {
            if (nullable[e->value])
                (*i)++;
            else
                *i = UINT32_MAX; /* the alternative ends here for this walk */
            return e->value;
        }
        (*a)++;
        if (*a < g->alt_first[r + 1]) *i = g->alt_start[*a];
    }
    return -1;
}

/* Reject left recursion: a cycle of references each at the start of an
 * alternative or after references that can match empty text. Iterative DFS
 * over those edges; the message names the user rules on the cycle. */
static int check_left_recursion(parser *p, const grammar *g) {
    bool *nullable = nullable_rules(g);
    if (!nullable) return fail_at(p, 0, "out of memory");
    uint32_t n = g->n_rules;
    uint8_t *color = calloc(n, 1); /* 0 new, 1 on the path, 2 done */
    uint32_t *path = malloc(n * sizeof *path + 1);
    uint32_t *alt_it = malloc(n * sizeof *alt_it + 1); /* alternative being walked */
    uint32_t *el_it = malloc(n * sizeof *el_it + 1);   /* element within it */
    int rc = 0;
    if (!color || !path || !alt_it || !el_it) {
        rc = fail_at(p, 0, "out of memory");
        goto done;
    }
    for (uint32_t s = 0; s < n && rc == 0; s++) {
        if (color[s]) continue;
        size_t depth = 0;
        path[depth] = s;
        alt_it[depth] = g->alt_first[s];
        el_it[depth] = g->alt_start[g->alt_first[s]];
        color[s] = 1;
        depth++;
        while (depth > 0 && rc == 0) {
            uint32_t r = path[depth - 1];
            int64_t next = next_left_edge(g, nullable, r, &alt_it[depth - 1], &el_it[depth - 1]);
            if (next < 0) {
                color[r] = 2;
                depth--;
                continue;
            }
            if (color[next] == 1) {
                /* The cycle: path from next to r, then next again. */
                size_t from = 0;
                while (path[from] != (uint32_t)next)
                    from++;
                char msg[200];
                size_t off = 0;
                uint32_t prev_owner = UINT32_MAX;
                for (size_t k = from; k <= depth && off + 48 < sizeof msg; k++) {
                    uint32_t ow = p->rules[k < depth ? path[k] : (uint32_t)next].owner;
                    if (ow == prev_owner) continue;
                    off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                                            prev_owner == UINT32_MAX ? "" : " -> ", p->rules[ow].name);
                    prev_owner = ow;
                }
                uint32_t ow = p->rules[next].owner;
                if (off == strlen(p->rules[ow].name))
                    rc = fail_at(p, p->rules[ow].def_pos,
                                 "rule '%s' is left-recursive: it can reach itself without matching "
                                 "a character",
                                 p->rules[ow].name);
                else
                    rc = fail_at(p, p->rules[ow].def_pos, "left recursion: %s", msg);
                break;
            }
            if (color[next] == 0) {
                color[next] = 1;
                path[depth] = (uint32_t)next;
                alt_it[depth] = g->alt_first[next];
                el_it[depth] = g->alt_start[g->alt_first[next]];
                depth++;
            }
        }
    }
done:
    free(nullable);
    free(color);
    free(path);
    free(alt_it);
    free(el_it);
    return rc;
}

/* ------------------------------------------------------------ assembly */

/* Concatenate the rule bodies into g and index the alternatives. */
static grammar *flatten(parser *p) {
    grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n_rules = (uint32_t)p->n_rules;
    g->n_elems = (uint32_t)p->total;
    g->elems = malloc((p->total ? p->total : 1) * sizeof *g->elems);
    g->rule_start = malloc(p->n_rules * sizeof *g->rule_start + 1);
    g->alt_first = malloc((p->n_rules + 1) * sizeof *g->alt_first);
    size_t n_alts = 0;
    for (size_t r = 0; r < p->n_rules; r++) {
        n_alts++;
        for (size_t i = 0; i < p->rules[r].body.n; i++)
            n_alts += p->rules[r].body.data[i].op == GRAMMAR_ALT;
    }
    g->alt_start = malloc(n_alts * sizeof *g->alt_start + 1);
    if (!g->elems || !g->rule_start || !g->alt_first || !g->alt_start) {
        grammar_free(g);
        return NULL;
    }
    uint32_t at = 0, a = 0;
    for (size_t r = 0; r < p->n_rules; r++) {
        const evec *b = &p->rules[r].body;
        g->rule_start[r] = at;
        g->alt_first[r] = a;
        g->alt_start[a++] = at;
        for (size_t i = 0; i < b->n; i++)
            if (b->data[i].op == GRAMMAR_ALT) g->alt_start[a++] = at + (uint32_t)i + 1;
        memcpy(g->elems + at, b->data, b->n * sizeof *b->data);
        at += (uint32_t)b->n;
    }
    g->alt_first[p->n_rules] = a;
    return g;
}

static void parser_free(parser *p) {
    for (size_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].name);
        free(p->rules[i].body.data);
    }
    free(p->rules);
    free(p->names);
}

grammar *grammar_parse(const char *text, size_t len, const char *root) {
    if (!root) root = "root";
    parser p = {.src = text ? text : "", .len = text ? len : 0};
    grammar *g = NULL;
    for (;;) {
        skip_space(&p, true);
        if (p.pos >= p.len || parse_rule(&p) < 0) break;
    }
    if (!p.failed) {
        for (size_t i = 0; i < p.n_rules; i++)
            if (!p.rules[i].defined) {
                fail_at(&p, p.rules[i].ref_pos, "undefined rule '%s'", p.rules[i].name);
                break;
            }
    }
    int64_t root_rule = -1;
    if (!p.failed) {
        for (size_t i = 0; i < p.n_rules; i++)
            if (p.rules[i].owner == i && !strcmp(p.rules[i].name, root)) root_rule = (int64_t)i;
        if (root_rule < 0) {
            if (p.n_rules == 0)
                fail_at(&p, p.len, "the grammar has no rules");
            else
                fail_at(&p, p.len, "no rule named '%s' (the start rule)", root);
        }
    }
    if (!p.failed) {
        g = flatten(&p);
        if (!g) fail_at(&p, 0, "out of memory");
    }
    if (g) {
        g->root = (uint32_t)root_rule;
        if (check_left_recursion(&p, g) < 0) {
            grammar_free(g);
            g = NULL;
        }
    }
    if (p.failed) {
        int line, col;
        line_col(p.src, p.len, p.err_pos, &line, &col);
        error_set("grammar: line %d, column %d: %s", line, col, p.msg);
    }
    parser_free(&p);
    return g;
}

grammar *grammar_copy(const grammar *src) {
    grammar *g = calloc(1, sizeof *g);
    if (!g) goto oom;
    *g = *src;
    uint32_t n_alts = src->alt_first[src->n_rules];
    g->elems = malloc(src->n_elems * sizeof *g->elems + 1);
    g->rule_start = malloc(src->n_rules * sizeof *g->rule_start + 1);
    g->alt_first = malloc((src->n_rules + 1) * sizeof *g->alt_first);
    g->alt_start = malloc(n_alts * sizeof *g->alt_start + 1);
    if (!g->elems || !g->rule_start || !g->alt_first || !g->alt_start) goto oom;
    memcpy(g->elems, src->elems, src->n_elems * sizeof *g->elems);
    memcpy(g->rule_start, src->rule_start, src->n_rules * sizeof *g->rule_start);
    memcpy(g->alt_first, src->alt_first, (src->n_rules + 1) * sizeof *g->alt_first);
    memcpy(g->alt_start, src->alt_start, n_alts * sizeof *g->alt_start);
    return g;
oom:
    grammar_free(g);
    error_set("grammar: out of memory");
    return NULL;
}

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->rule_start);
    free(g->alt_first);
    free(g->alt_start);
    free(g);
}
