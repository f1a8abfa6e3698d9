/* jinja_value — the arena, the value model, and Python's str(), repr() and
 * json.dumps()/json.loads() of values, byte for byte. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

/* ------------------------------------------------------------- arena */

struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

#define JCHUNK_SIZE (64 * 1024)

void *jarena_alloc(jarena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0) size = 16;
    struct jchunk *h = a->head;
    if (h && h->cap - h->used >= size) {
        void *p = h->data + h->used;
        h->used += size;
        return p;
    }
    size_t cap = size > JCHUNK_SIZE / 4 ? size : JCHUNK_SIZE;
    if (a->limit && (a->used + cap > a->limit || cap > a->limit)) return NULL;
    struct jchunk *nc = malloc(sizeof *nc + cap);
    if (!nc) return NULL;
    a->used += cap;
    nc->cap = cap;
    nc->used = size;
    if (h && cap != JCHUNK_SIZE) {
        /* a big block: keep the current chunk on top for small ones */
        nc->next = h->next;
        h->next = nc;
    } else {
        nc->next = h;
        a->head = nc;
    }
    return nc->data;
}

void jarena_free(jarena *a) {
    struct jchunk *h = a->head;
    while (h) {
        struct jchunk *next = h->next;
        free(h);
        h = next;
    }
    a->head = NULL;
    a->used = 0;
}

void *jalloc(jctx *c, size_t size) {
    void *p = jarena_alloc(&c->arena, size);
    if (!p) jerr(c, "template uses more than %zu MiB of memory", c->lim.max_memory >> 20);
    return p;
}

/* ------------------------------------------------------------- UTF-8 */

/* Code points as jutf8_decode steps through them (valid or not). */
size_t utf8_count(const char *s, size_t len) {
    size_t n = 0;
    int32_t cp;
    for (size_t i = 0; i < len; n++) i += jutf8_decode(s + i, len - i, &cp);
    return n;
}

/* str.isspace() / str.split() / str.strip() whitespace. */
bool py_isspace(int32_t cp) {
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
    if (cp < 0x85) return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ------------------------------------------------------------ values */

jv jv_undef(const char *what) { return (jv){.kind = JV_UNDEF, .undef = what}; }
jv jv_none(void) { return (jv){.kind = JV_NONE}; }
jv jv_bool(bool b) { return (jv){.kind = JV_BOOL, .b = b}; }
jv jv_int(int64_t i) { return (jv){.kind = JV_INT, .i = i}; }
jv jv_float(double f) { return (jv){.kind = JV_FLOAT, .f = f}; }

int64_t jv_float_to_int(jctx *c, double f) {
    if (isnan(f) || isinf(f)) jerr(c, "cannot convert float %s to integer", isnan(f) ? "NaN" : "infinity");
    double t = trunc(f);
    /* [-2^63, 2^63): both bounds are exact doubles */
    if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
        jerr(c, "integer %.0f is out of range (64 bits)", t);
    return (int64_t)t;
}

jv jv_str(jctx *c, const char *s, size_t len) {
    jstr *js = jalloc(c, sizeof *js + len + 1);
    js->len = len;
    if (len) memcpy(js->s, s, len);
    js->s[len] = 0;
    return (jv){.kind = JV_STR, .s = js};
}

jv jv_cstr(jctx *c, const char *s) { return jv_str(c, s, strlen(s)); }

jv jv_list(jctx *c, size_t n) {
    jlist *l = jalloc(c, sizeof *l);
    if (n > SIZE_MAX / sizeof(jv) / 2) jerr(c, "list too long");
    l->n = n;
    l->v = n ? jalloc(c, n * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n; i++) l->v[i] = jv_none();
    return (jv){.kind = JV_LIST, .l = l};
}

jv jv_dict(jctx *c) {
    jdict *d = jalloc(c, sizeof *d);
    memset(d, 0, sizeof *d);
    return (jv){.kind = JV_DICT, .d = d};
}

jv *jdict_get(const jdict *d, const char *k, size_t klen) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i]->len == klen && memcmp(d->k[i]->s, k, klen) == 0) return &d->v[i];
    return NULL;
}

void *jarena_grow(jctx *c, const void *items, size_t n, size_t cap, size_t item_size) {
    void *grown = jalloc(c, cap * item_size);
    if (n) memcpy(grown, items, n * item_size);
    return grown;
}

void jdict_set(jctx *c, jdict *d, const char *k, size_t klen, jv v) {
    jv *old = jdict_get(d, k, klen);
    if (old) {
        *old = v;
        return;
    }
    JARENA_GROW_PAIRS(c, d);
    d->k[d->n] = jv_str(c, k, klen).s;
    d->v[d->n] = v;
    d->n++;
}

bool jv_truthy(jv v) {
    switch (v.kind) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0.0;
    case JV_STR: return v.s->len != 0;
    case JV_LIST: return v.l->n != 0;
    case JV_DICT: return v.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double num_f(jv v) {
    return v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : (double)v.b;
}
static int64_t num_i(jv v) { return v.kind == JV_INT ? v.i : v.kind == JV_BOOL ? v.b : 0; }

/* Python ==. */
bool jv_equal(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) return num_f(a) == num_f(b);
        return num_i(a) == num_i(b);
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.s->len == b.s->len && memcmp(a.s->s, b.s->s, a.s->len) == 0;
    case JV_LIST:
        if ((a.flags & JV_TUPLE) != (b.flags & JV_TUPLE) || a.l->n != b.l->n) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jv *o = jdict_get(b.d, a.d->k[i]->s, a.d->k[i]->len);
            if (!o || !jv_equal(a.d->v[i], *o)) return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_MACRO: return a.m == b.m;
    case JV_FUNC: return a.fn == b.fn;
    case JV_LOOP: return a.loop == b.loop;
    default: return false;
    }
}

const char *jv_type_name(jv v) {
    switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.flags & JV_TUPLE ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

/* Python < for sort/min/max/comparisons. */
int jv_compare(jctx *c, jv a, jv b, bool ci) {
    if (is_num(a) && is_num(b)) {
        if (a.kind == JV_FLOAT || b.kind == JV_FLOAT) {
            double x = num_f(a), y = num_f(b);
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = num_i(a), y = num_i(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        if (ci) {
            /* case-insensitive: compare lowercased ASCII (jinja lowercases) */
            size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
            for (size_t i = 0; i < n; i++) {
                unsigned char x = (unsigned char)a.s->s[i], y = (unsigned char)b.s->s[i];
                if (x >= 'A' && x <= 'Z') x = (unsigned char)(x + 32);
                if (y >= 'A' && y <= 'Z') y = (unsigned char)(y + 32);
                if (x != y) return x < y ? -1 : 1;
            }
            return a.s->len < b.s->len ? -1 : a.s->len > b.s->len ? 1 : 0;
        }
        size_t n = a.s->len < b.s->len ? a.s->len : b.s->len;
        int r = memcmp(a.s->s, b.s->s, n);
        if (r) return r < 0 ? -1 : 1;
        return a.s->len < b.s->len ? -1 : a.s->len > b.s->len ? 1 : 0;
    }
    if (a.kind == JV_LIST && b.kind == JV_LIST) {
        size_t n = a.l->n < b.l->n ? a.l->n : b.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return jv_compare(c, a.l->v[i], b.l->v[i], ci);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n ? 1 : 0;
    }
    jerr(c, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
         jv_type_name(b));
}

/* ---------------------------------------------------------- buffers */

void jbuf_put(jctx *c, jbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (n > c->lim.max_output || b->len > c->lim.max_output - n)
        jerr(c, "template output exceeds %zu bytes", c->lim.max_output);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = jalloc(c, cap);
        if (b->len) memcpy(p, b->p, b->len);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jbuf_putc(jctx *c, jbuf *b, char ch) { jbuf_put(c, b, &ch, 1); }

void jbuf_printf(jctx *c, jbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    jbuf_put(c, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

jv jbuf_take(jctx *c, jbuf *b) {
    if (!b->p) return jv_str(c, "", 0);
    jstr *js = jalloc(c, sizeof *js + b->len + 1);
    js->len = b->len;
    memcpy(js->s, b->p, b->len);
    js->s[b->len] = 0;
    return (jv){.kind = JV_STR, .s = js};
}

/* ------------------------------------------------- str() and repr() */

/* Python's repr(float): the shortest digits that read back the same, fixed
 * notation for exponents -4..15, else d.ddde+XX. */
void jfloat_repr(char *out, size_t size, double f) {
    if (isnan(f)) {
        snprintf(out, size, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, size, f < 0 ? "-inf" : "inf");
        return;
    }
    char buf[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    /* buf: [-]d.ddde[+-]XX */
    char digits[32];
    size_t nd = 0;
    const char *p = buf;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    char res[64];
    size_t r = 0;
    if (neg) res[r++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            res[r++] = '0';
            res[r++] = '.';
            for (int i = 0; i < -exp - 1; i++) res[r++] = '0';
            for (size_t i = 0; i < nd; i++) res[r++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) res[r++] = (size_t)i < nd ? digits[i] : '0';
            res[r++] = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++) res[r++] = digits[i];
            else
                res[r++] = '0';
        }
        res[r] = 0;
    } else {
        res[r++] = digits[0];
        if (nd > 1) {
            res[r++] = '.';
            for (size_t i = 1; i < nd; i++) res[r++] = digits[i];
        }
        res[r] = 0;
        snprintf(res + r, sizeof res - r, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(out, size, "%s", res);
}

static void repr_string(jctx *c, jbuf *b, const jstr *s) {
    bool has_sq = memchr(s->s, '\'', s->len) != NULL, has_dq = memchr(s->s, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(c, b, q);
    for (size_t i = 0; i < s->len;) {
        int32_t cp;
        size_t n = jutf8_decode(s->s + i, s->len - i, &cp);
        if (cp == q || cp == '\\') {
            jbuf_putc(c, b, '\\');
            jbuf_putc(c, b, (char)cp);
        } else if (cp == '\n') {
            jbuf_put(c, b, "\\n", 2);
        } else if (cp == '\r') {
            jbuf_put(c, b, "\\r", 2);
        } else if (cp == '\t') {
            jbuf_put(c, b, "\\t", 2);
        } else if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) {
            jbuf_printf(c, b, "\\x%02x", (unsigned)cp);
        } else {
            jbuf_put(c, b, s->s + i, n);
        }
        i += n;
    }
    jbuf_putc(c, b, q);
}

static void put_value(jctx *c, jbuf *b, jv v, bool repr, int depth) {
    if (depth > 200) jerr(c, "value nested too deeply to print");
    char num[64];
    switch (v.kind) {
    case JV_UNDEF:
        if (repr) jbuf_put(c, b, "Undefined", 9);
        return;
    case JV_NONE: jbuf_put(c, b, "None", 4); return;
    case JV_BOOL: v.b ? jbuf_put(c, b, "True", 4) : jbuf_put(c, b, "False", 5); return;
    case JV_INT: jbuf_printf(c, b, "%lld", (long long)v.i); return;
    case JV_FLOAT:
        jfloat_repr(num, sizeof num, v.f);
        jbuf_put(c, b, num, strlen(num));
        return;
    case JV_STR:
        if (repr)
            repr_string(c, b, v.s);
        else
            jbuf_put(c, b, v.s->s, v.s->len);
        return;
    case JV_LIST: {
        bool tuple = v.flags & JV_TUPLE;
        jbuf_putc(c, b, tuple ? '(' : '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jbuf_put(c, b, ", ", 2);
            put_value(c, b, v.l->v[i], true, depth + 1);
        }
        if (tuple && v.l->n == 1) jbuf_putc(c, b, ',');
        jbuf_putc(c, b, tuple ? ')' : ']');
        return;
    }
    case JV_DICT:
    case JV_NS:
        if (v.kind == JV_NS) jbuf_put(c, b, "<Namespace ", 11);
        jbuf_putc(c, b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) jbuf_put(c, b, ", ", 2);
            repr_string(c, b, v.d->k[i]);
            jbuf_put(c, b, ": ", 2);
            put_value(c, b, v.d->v[i], true, depth + 1);
        }
        jbuf_putc(c, b, '}');
        if (v.kind == JV_NS) jbuf_putc(c, b, '>');
        return;
    case JV_MACRO: jbuf_printf(c, b, "<Macro '%s'>", v.m->name); return;
    case JV_FUNC: jbuf_printf(c, b, "<function %s>", v.fn->name); return;
    case JV_LOOP: jbuf_put(c, b, "<LoopContext>", 13); return;
    }
}

void jv_to_str(jctx *c, jbuf *b, jv v) { put_value(c, b, v, false, 0); }
void jv_repr(jctx *c, jbuf *b, jv v) { put_value(c, b, v, true, 0); }

jv jv_stringify(jctx *c, jv v) {
    if (v.kind == JV_STR) return v;
    jbuf b = {0};
    jv_to_str(c, &b, v);
    return jbuf_take(c, &b);
}

/* ---------------------------------------------------------- tojson */

static void json_string(jctx *c, jbuf *b, const char *s, size_t len) {
    jbuf_putc(c, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            }
        }
        if (esc) {
            jbuf_put(c, b, s + run, i - run);
            jbuf_put(c, b, esc, strlen(esc));
            run = i + 1;
        }
    }
    jbuf_put(c, b, s + run, len - run);
    jbuf_putc(c, b, '"');
}

typedef struct json_fmt {
    const char *indent; /* NULL: no newlines */
    const char *item_sep, *key_sep;
    bool sort_keys;
} json_fmt;

static void json_newline(jctx *c, jbuf *b, const json_fmt *f, int level) {
    jbuf_putc(c, b, '\n');
    for (int i = 0; i < level; i++) jbuf_put(c, b, f->indent, strlen(f->indent));
}

static void json_value(jctx *c, jbuf *b, jv v, const json_fmt *f, int level) {
    if (level > 200) jerr(c, "tojson: value nested too deeply");
    char num[64];
    switch (v.kind) {
    case JV_NONE: jbuf_put(c, b, "null", 4); return;
    case JV_BOOL: v.b ? jbuf_put(c, b, "true", 4) : jbuf_put(c, b, "false", 5); return;
    case JV_INT: jbuf_printf(c, b, "%lld", (long long)v.i); return;
    case JV_FLOAT:
        if (isnan(v.f))
            jbuf_put(c, b, "NaN", 3);
        else if (isinf(v.f))
            v.f < 0 ? jbuf_put(c, b, "-Infinity", 9) : jbuf_put(c, b, "Infinity", 8);
        else {
            jfloat_repr(num, sizeof num, v.f);
            jbuf_put(c, b, num, strlen(num));
        }
        return;
    case JV_STR: json_string(c, b, v.s->s, v.s->len); return;
    case JV_LIST:
        if (v.l->n == 0) {
            jbuf_put(c, b, "[]", 2);
            return;
        }
        jbuf_putc(c, b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jbuf_put(c, b, f->item_sep, strlen(f->item_sep));
            if (f->indent) json_newline(c, b, f, level + 1);
            json_value(c, b, v.l->v[i], f, level + 1);
        }
        if (f->indent) json_newline(c, b, f, level);
        jbuf_putc(c, b, ']');
        return;
    case JV_DICT: {
        if (v.d->n == 0) {
            jbuf_put(c, b, "{}", 2);
            return;
        }
        size_t n = v.d->n;
        size_t *order = jalloc(c, n * sizeof *order);
        for (size_t i = 0; i < n; i++) order[i] = i;
        if (f->sort_keys) /* insertion sort: stable, dicts are small */
            for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0; j--) {
                    jv ka = {.kind = JV_STR, .s = v.d->k[order[j - 1]]};
                    jv kb = {.kind = JV_STR, .s = v.d->k[order[j]]};
                    if (jv_compare(c, kb, ka, false) >= 0) break;
                    size_t t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        jbuf_putc(c, b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) jbuf_put(c, b, f->item_sep, strlen(f->item_sep));
            if (f->indent) json_newline(c, b, f, level + 1);
            json_string(c, b, v.d->k[order[i]]->s, v.d->k[order[i]]->len);
            jbuf_put(c, b, f->key_sep, strlen(f->key_sep));
            json_value(c, b, v.d->v[order[i]], f, level + 1);
        }
        if (f->indent) json_newline(c, b, f, level);
        jbuf_putc(c, b, '}');
        return;
    }
    default:
        jerr(c, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

void jv_to_json(jctx *c, jbuf *b, jv v, int indent, const char *indent_str, const char *item_sep,
                const char *key_sep, bool sort_keys) {
    json_fmt f = {.sort_keys = sort_keys};
    if (indent_str) {
        f.indent = indent_str;
    } else if (indent >= 0) {
        char *sp = jalloc(c, (size_t)indent + 1);
        memset(sp, ' ', (size_t)indent);
        sp[indent] = 0;
        f.indent = sp;
    }
    f.item_sep = item_sep ? item_sep : f.indent ? "," : ", ";
    f.key_sep = key_sep ? key_sep : ": ";
    json_value(c, b, v, &f, 0);
}

/* -------------------------------------------------------- json.loads */

typedef struct jparser {
    jctx *c;
    const char *s;
    size_t len, pos;
    int depth;
} jparser;

_Noreturn static void jp_fail(jparser *p, const char *what) {
    jerr(p->c, "JSON variables: %s at byte %zu", what, p->pos);
}

static void jp_ws(jparser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int32_t jp_hex4(jparser *p) {
    if (p->len - p->pos < 4) jp_fail(p, "truncated \\u escape");
    int32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + (size_t)i]);
        if (h < 0) jp_fail(p, "bad \\u escape");
        v = v * 16 + h;
    }
    p->pos += 4;
    return v;
}

static jv jp_string(jparser *p) {
    p->pos++; /* opening quote */
    jbuf b = {0};
    jbuf_put(p->c, &b, "", 0);
    size_t run = p->pos;
    for (;;) {
        if (p->pos >= p->len) jp_fail(p, "unterminated string");
        unsigned char ch = (unsigned char)p->s[p->pos];
        if (ch == '"') break;
        if (ch < 0x20) jp_fail(p, "control character in string");
        if (ch >= 0x80) {
            int32_t cp;
            size_t n = jutf8_decode(p->s + p->pos, p->len - p->pos, &cp);
            if (n == 1 || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) jp_fail(p, "invalid UTF-8");
            p->pos += n;
            continue;
        }
        if (ch != '\\') {
            p->pos++;
            continue;
        }
        jbuf_put(p->c, &b, p->s + run, p->pos - run);
        p->pos++;
        if (p->pos >= p->len) jp_fail(p, "unterminated string");
        char e = p->s[p->pos++];
        char out[4];
        switch (e) {
        case '"': jbuf_putc(p->c, &b, '"'); break;
        case '\\': jbuf_putc(p->c, &b, '\\'); break;
        case '/': jbuf_putc(p->c, &b, '/'); break;
        case 'b': jbuf_putc(p->c, &b, '\b'); break;
        case 'f': jbuf_putc(p->c, &b, '\f'); break;
        case 'n': jbuf_putc(p->c, &b, '\n'); break;
        case 'r': jbuf_putc(p->c, &b, '\r'); break;
        case 't': jbuf_putc(p->c, &b, '\t'); break;
        case 'u': {
            int32_t cp = jp_hex4(p);
            if (cp >= 0xD800 && cp < 0xDC00 && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                p->pos += 2;
                int32_t lo = jp_hex4(p);
                if (lo >= 0xDC00 && lo < 0xE000)
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                else
                    p->pos = save;
            }
            if (cp >= 0xD800 && cp < 0xE000) jp_fail(p, "lone surrogate in \\u escape");
            jbuf_put(p->c, &b, out, utf8_encode(cp, out));
            break;
        }
        default: jp_fail(p, "bad escape");
        }
        run = p->pos;
    }
    jbuf_put(p->c, &b, p->s + run, p->pos - run);
    p->pos++;
    return jbuf_take(p->c, &b);
}

static jv jp_value(jparser *p);

static jv jp_number(jparser *p) {
    size_t start = p->pos;
    bool is_float = false;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') jp_fail(p, "bad number");
    if (p->s[p->pos] == '0')
        p->pos++;
    else
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos < p->len && p->s[p->pos] == '.') {
        is_float = true;
        p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            jp_fail(p, "bad number");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        is_float = true;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            jp_fail(p, "bad number");
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    }
    char tmp[64];
    size_t n = p->pos - start;
    if (n >= sizeof tmp) {
        if (!is_float) jp_fail(p, "integer too large");
        n = sizeof tmp - 1; /* a float this long: digits past 63 do not matter here */
    }
    memcpy(tmp, p->s + start, n);
    tmp[n] = 0;
    if (is_float) return jv_float(strtod(tmp, NULL));
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) jp_fail(p, "integer too large");
    return jv_int(v);
}

/* Past an object's or array's opening bracket: true (and past `close`)
 * when it is empty. */
static bool jp_open(jparser *p, char close) {
    p->pos++;
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return true;
    }
    return false;
}

/* After an item: true past a ',' (another item follows), false past
 * `close`; anything else fails. */
static bool jp_more(jparser *p, char close) {
    jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
        p->pos++;
        return true;
    }
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return false;
    }
    jp_fail(p, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

static jv jp_value(jparser *p) {
    jp_ws(p);
    if (p->pos >= p->len) jp_fail(p, "unexpected end");
    if (++p->depth > 200) jp_fail(p, "nested too deeply");
    char ch = p->s[p->pos];
    jv v;
    if (ch == '"') {
        v = jp_string(p);
    } else if (ch == '{') {
        v = jv_dict(p->c);
        for (bool more = !jp_open(p, '}'); more; more = jp_more(p, '}')) {
            jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') jp_fail(p, "expected a key");
            jv k = jp_string(p);
            jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') jp_fail(p, "expected ':'");
            p->pos++;
            jv val = jp_value(p);
            jdict_set(p->c, v.d, k.s->s, k.s->len, val);
        }
    } else if (ch == '[') {
        jbuf items = {0}; /* jv array built in a buffer */
        size_t n = 0;
        for (bool more = !jp_open(p, ']'); more; more = jp_more(p, ']')) {
            jv item = jp_value(p);
            jbuf_put(p->c, &items, (const char *)&item, sizeof item);
            n++;
        }
        v = jv_list(p->c, n);
        if (n) memcpy(v.l->v, items.p, n * sizeof(jv));
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
        v = jp_number(p);
    } else if (p->len - p->pos >= 4 && memcmp(p->s + p->pos, "true", 4) == 0) {
        p->pos += 4;
        v = jv_bool(true);
    } else if (p->len - p->pos >= 5 && memcmp(p->s + p->pos, "false", 5) == 0) {
        p->pos += 5;
        v = jv_bool(false);
    } else if (p->len - p->pos >= 4 && memcmp(p->s + p->pos, "null", 4) == 0) {
        p->pos += 4;
        v = jv_none();
    } else {
        jp_fail(p, "unexpected character");
    }
    p->depth--;
    return v;
}

jv jv_from_json(jctx *c, const char *text, size_t len) {
    jparser p = {.c = c, .s = text, .len = len};
    jv v = jp_value(&p);
    jp_ws(&p);
    if (p.pos != p.len) jp_fail(&p, "trailing characters");
    return v;
}
