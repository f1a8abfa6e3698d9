/* jinja_filters — jinja2's filters, a row each ({name, fn, min_args},
 * jinja_builtins.h), with transformers' tojson (non-ASCII kept). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "chat/jinja_builtins.h"

/* jinja's |title: words start after -, whitespace, ( { [ <. */
static jv title_words(jctx *c, jv s) {
    jcps d = jb_decode(c, s.s);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    bool start = true;
    for (size_t i = 0; i < d.n; i++) {
        int32_t cp = d.cp[i];
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
        if (sep) {
            jb_put_cp(c, &b, cp);
            start = true;
        } else {
            jb_put_cp(c, &b, start ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
            start = false;
        }
    }
    return jb_with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

/* ------------------------------------------------------------- escape */

jv jinja_escape(jctx *c, jv v) {
    if (v.kind == JV_STR && (v.flags & JV_SAFE)) return v;
    jv s = jv_stringify(c, v);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    for (size_t i = 0; i < s.s->len; i++) {
        char ch = s.s->s[i];
        switch (ch) {
        case '&': jbuf_put(c, &b, "&amp;", 5); break;
        case '<': jbuf_put(c, &b, "&lt;", 4); break;
        case '>': jbuf_put(c, &b, "&gt;", 4); break;
        case '"': jbuf_put(c, &b, "&#34;", 5); break;
        case '\'': jbuf_put(c, &b, "&#39;", 5); break;
        default: jbuf_putc(c, &b, ch);
        }
    }
    return jb_with_flags(jbuf_take(c, &b), JV_SAFE);
}

/* ------------------------------------------------------------ filters */

static int64_t length_of(jctx *c, jv v) {
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)utf8_count(v.s->s, v.s->len);
    case JV_LIST: return (int64_t)v.l->n;
    case JV_DICT: return (int64_t)v.d->n;
    default: jerr(c, "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* jinja's make_attrgetter: "a.b.0" through getitem. */
static jv attr_path(jctx *c, jv obj, jv attribute) {
    if (attribute.kind == JV_INT) return jinja_getitem(c, obj, attribute);
    jb_need_str(c, attribute, "attribute");
    const char *p = attribute.s->s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++)
            if (p[i] < '0' || p[i] > '9') digits = false;
        jv key = digits ? jv_int(strtoll(p, NULL, 10)) : jv_str(c, p, n);
        obj = jinja_getitem(c, obj, key);
        if (!dot) return obj;
        p = dot + 1;
    }
}

static jv apply_filter_args(jctx *c, const char *name, jv v, const jargs *a, size_t skip) {
    jargs rest = *a;
    rest.n = a->n > skip ? a->n - skip : 0;
    rest.pos = a->pos + (a->n > skip ? skip : a->n);
    return jinja_filter(c, name, v, &rest);
}

/* select/reject(test, args...), selectattr/rejectattr(attr, test, args...) */
static jv f_select(jctx *c, jv v, const char *name, const jargs *a) {
    bool by_attr = strstr(name, "attr") != NULL, keep = name[0] == 's';
    jbuf out = {0};
    /* jinja2 yields nothing for a false value (none, undefined, ""), so
     * "tools | selectattr(...)" works on tools = none (functionary v3.1) */
    if (!jv_truthy(v)) return jb_list_from(c, &out);
    jv items = jinja_iterable(c, v);
    size_t first = by_attr ? 1 : 0;
    jv attrv = by_attr ? jb_arg(a, 0, NULL, NULL) : jv_none();
    if (by_attr && attrv.kind == JV_UNDEF) jerr(c, "Missing parameter for attribute name");
    const char *test = NULL;
    if (a->n > first) test = jb_need_str(c, a->pos[first], "select test").s->s;
    if (test && !jinja_has_test(test))
        jerr(c, "No test named '%s'%s%s%s", test, JINJA_DID_YOU_MEAN(jinja_test_closest(test)));
    jargs targs = {0};
    if (a->n > first + 1) {
        targs.n = a->n - first - 1;
        targs.pos = a->pos + first + 1;
    }
    targs.nk = a->nk;
    targs.kname = a->kname;
    targs.kval = a->kval;
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        jv subject = by_attr ? attr_path(c, it, attrv) : it;
        bool r = test ? jinja_test(c, test, subject, &targs) : jv_truthy(subject);
        if (r == keep) jb_list_push(c, &out, it);
    }
    return jb_list_from(c, &out);
}

typedef struct sort_key {
    jv key, item;
} sort_key;

static void sort_items(jctx *c, sort_key *k, size_t n, bool ci, bool reverse) {
    /* merge sort: stable like Python's */
    if (n < 2) return;
    sort_key *tmp = jalloc(c, n * sizeof *tmp);
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                int cmp = jv_compare(c, k[j].key, k[i].key, ci);
                bool take_right = reverse ? cmp > 0 : cmp < 0;
                tmp[o++] = take_right ? k[j++] : k[i++];
            }
            while (i < mid) tmp[o++] = k[i++];
            while (j < hi) tmp[o++] = k[j++];
        }
        memcpy(k, tmp, n * sizeof *k);
    }
}

/* The items of k sorted by key (stably, as Python's sorted). */
static jv sorted_items(jctx *c, sort_key *k, size_t n, bool reverse) {
    sort_items(c, k, n, false, reverse);
    jv r = jv_list(c, n);
    for (size_t i = 0; i < n; i++) r.l->v[i] = k[i].item;
    return r;
}

static jv lower_if_str(jctx *c, jv v, bool ci) {
    return ci && v.kind == JV_STR ? jb_change_case(c, v, JB_CASE_LOWER) : v;
}

static jv f_tojson(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jb_check_args(c, a, 4, names, "tojson");
    bool ascii = jv_truthy(jb_arg_or(a, 0, "ensure_ascii", jv_bool(false)));
    jv indent = jb_arg_or(a, 1, "indent", jv_none());
    jv seps = jb_arg_or(a, 2, "separators", jv_none());
    bool sort_keys = jv_truthy(jb_arg_or(a, 3, "sort_keys", jv_bool(false)));
    int ind = -1;
    const char *ind_str = NULL;
    if (indent.kind == JV_INT || indent.kind == JV_BOOL) {
        int64_t i = indent.kind == JV_INT ? indent.i : indent.b;
        ind = i < 0 ? 0 : i > 64 ? 64 : (int)i;
    } else if (indent.kind == JV_STR) {
        ind_str = indent.s->s;
    } else if (indent.kind != JV_NONE) {
        jerr(c, "tojson: indent must be an integer or a string");
    }
    const char *item_sep = NULL, *key_sep = NULL;
    if (seps.kind == JV_LIST) {
        if (seps.l->n != 2 || seps.l->v[0].kind != JV_STR || seps.l->v[1].kind != JV_STR)
            jerr(c, "tojson: separators must be two strings");
        item_sep = seps.l->v[0].s->s;
        key_sep = seps.l->v[1].s->s;
    } else if (seps.kind != JV_NONE) {
        jerr(c, "tojson: separators must be a tuple of two strings");
    }
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    jv_to_json(c, &b, v, ind, ind_str, item_sep, key_sep, sort_keys);
    if (!ascii) return jbuf_take(c, &b);
    jbuf e = {0};
    jbuf_put(c, &e, "", 0);
    for (size_t i = 0; i < b.len;) {
        int32_t cp;
        size_t n = jutf8_decode(b.p + i, b.len - i, &cp);
        if (cp < 0x80) {
            jbuf_putc(c, &e, b.p[i]);
        } else if (cp < 0x10000) {
            jbuf_printf(c, &e, "\\u%04x", (unsigned)cp);
        } else {
            int32_t v2 = cp - 0x10000;
            jbuf_printf(c, &e, "\\u%04x\\u%04x", (unsigned)(0xD800 + (v2 >> 10)),
                        (unsigned)(0xDC00 + (v2 & 0x3FF)));
        }
        i += n;
    }
    return jbuf_take(c, &e);
}

/* Python int(str): optional sign, digits with single underscores, spaces. */
static bool parse_py_int(const char *s, int64_t *out) {
    while (*s && py_isspace((unsigned char)*s)) s++;
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!(*s >= '0' && *s <= '9')) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s == '_' && s[1] >= '0' && s[1] <= '9') continue;
        if (*s < '0' || *s > '9') break;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v)) return false;
    }
    while (*s && py_isspace((unsigned char)*s)) s++;
    if (*s) return false;
    *out = neg ? -v : v;
    return true;
}

static bool parse_py_float(const char *s, double *out) {
    char *end;
    while (*s && py_isspace((unsigned char)*s)) s++;
    if (!*s) return false;
    double d = strtod(s, &end);
    while (*end && py_isspace((unsigned char)*end)) end++;
    if (*end) return false;
    *out = d;
    return true;
}

static jv f_int(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv def = jb_arg_or(a, 0, "default", jv_int(0));
    if (v.kind == JV_INT) return v;
    if (v.kind == JV_BOOL) return jv_int(v.b);
    if (v.kind == JV_FLOAT) return jv_int(jv_float_to_int(c, v.f));
    if (v.kind == JV_STR) {
        int64_t i;
        double d;
        if (parse_py_int(v.s->s, &i)) return jv_int(i);
        if (parse_py_float(v.s->s, &d) && !isnan(d) && !isinf(d)) return jv_int(jv_float_to_int(c, d));
    }
    if (v.kind == JV_UNDEF) jerr(c, "'%s' is undefined", v.undef ? v.undef : "value");
    return def;
}

static jv f_float(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv def = jb_arg_or(a, 0, "default", jv_float(0.0));
    if (v.kind == JV_FLOAT) return v;
    if (v.kind == JV_INT) return jv_float((double)v.i);
    if (v.kind == JV_BOOL) return jv_float(v.b);
    double d;
    if (v.kind == JV_STR && parse_py_float(v.s->s, &d)) return jv_float(d);
    if (v.kind == JV_UNDEF) jerr(c, "'%s' is undefined", v.undef ? v.undef : "value");
    return def;
}

static jv f_join(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv sep = jb_arg_or(a, 0, "d", jv_str(c, "", 0));
    jv attribute = jb_arg(a, 1, "attribute", NULL);
    jv items = jinja_iterable(c, v);
    jv sep_s = jv_stringify(c, sep);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    for (size_t i = 0; i < items.l->n; i++) {
        if (i) jbuf_put(c, &b, sep_s.s->s, sep_s.s->len);
        jv it = items.l->v[i];
        if (attribute.kind != JV_UNDEF) it = attr_path(c, it, attribute);
        jv_to_str(c, &b, it);
    }
    return jbuf_take(c, &b);
}

static jv f_map(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    if (!jv_truthy(v)) return jv_list(c, 0); /* as select_items: jinja2 maps a false value to nothing */
    jv items = jinja_iterable(c, v);
    bool has_attr;
    jv attribute = jb_arg(a, (size_t)-1, "attribute", &has_attr);
    jv r = jv_list(c, items.l->n);
    if (has_attr) {
        bool has_def;
        jv def = jb_arg(a, (size_t)-1, "default", &has_def);
        for (size_t i = 0; i < items.l->n; i++) {
            jv x = attr_path(c, items.l->v[i], attribute);
            r.l->v[i] = x.kind == JV_UNDEF && has_def ? def : x;
        }
        return r;
    }
    if (a->n == 0) jerr(c, "map requires a filter argument");
    const char *filter = jb_need_str(c, a->pos[0], "map").s->s;
    if (!jinja_has_filter(filter))
        jerr(c, "No filter named '%s'%s%s%s", filter, JINJA_DID_YOU_MEAN(jinja_filter_closest(filter)));
    for (size_t i = 0; i < items.l->n; i++) r.l->v[i] = apply_filter_args(c, filter, items.l->v[i], a, 1);
    return r;
}

static jv f_sort(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    bool reverse = jv_truthy(jb_arg_or(a, 0, "reverse", jv_bool(false)));
    bool cs = jv_truthy(jb_arg_or(a, 1, "case_sensitive", jv_bool(false)));
    jv attribute = jb_arg(a, 2, "attribute", NULL);
    jv items = jinja_iterable(c, v);
    size_t n = items.l->n;
    sort_key *k = jalloc(c, (n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        jv it = items.l->v[i];
        jv key = it;
        if (attribute.kind == JV_STR && strchr(attribute.s->s, ',')) {
            /* "a,b": a tuple of keys */
            jv parts = jb_split(c, attribute, jv_cstr(c, ","), jv_none(), false);
            key = jv_list(c, parts.l->n);
            for (size_t p = 0; p < parts.l->n; p++)
                key.l->v[p] = lower_if_str(c, attr_path(c, it, jb_strip(c, parts.l->v[p], jv_none(), true, true)), !cs);
        } else if (attribute.kind != JV_UNDEF && attribute.kind != JV_NONE) {
            key = lower_if_str(c, attr_path(c, it, attribute), !cs);
        } else {
            key = lower_if_str(c, it, !cs);
        }
        k[i] = (sort_key){key, it};
    }
    return sorted_items(c, k, n, reverse);
}

static jv f_unique(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    bool cs = jv_truthy(jb_arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv attribute = jb_arg(a, 1, "attribute", NULL);
    jv items = jinja_iterable(c, v);
    jbuf seen = {0}, out = {0};
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        jv key = attribute.kind != JV_UNDEF && attribute.kind != JV_NONE ? attr_path(c, it, attribute) : it;
        key = lower_if_str(c, key, !cs);
        if (key.kind == JV_LIST || key.kind == JV_DICT) jerr(c, "unhashable type: '%s'", jv_type_name(key));
        bool dup = false;
        for (size_t s = 0; s < seen.len / sizeof(jv) && !dup; s++) dup = jv_equal(((jv *)(void *)seen.p)[s], key);
        if (dup) continue;
        jb_list_push(c, &seen, key);
        jb_list_push(c, &out, it);
    }
    return jb_list_from(c, &out);
}

/* min, max */
static jv f_minmax(jctx *c, jv v, const char *name, const jargs *a) {
    bool want_max = name[1] == 'a';
    bool cs = jv_truthy(jb_arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv attribute = jb_arg(a, 1, "attribute", NULL);
    jv items = jinja_iterable(c, v);
    if (items.l->n == 0) return jv_undef(want_max ? "max of an empty sequence" : "min of an empty sequence");
    jv best = items.l->v[0], best_key = {0};
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        jv key = attribute.kind != JV_UNDEF && attribute.kind != JV_NONE ? attr_path(c, it, attribute) : it;
        key = lower_if_str(c, key, !cs);
        if (i == 0 || (want_max ? jv_compare(c, key, best_key, false) > 0 : jv_compare(c, key, best_key, false) < 0)) {
            best = it;
            best_key = key;
        }
    }
    return best;
}

static jv f_indent(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv width = jb_arg_or(a, 0, "width", jv_int(4));
    bool first = jv_truthy(jb_arg_or(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(jb_arg_or(a, 2, "blank", jv_bool(false)));
    jv ind;
    if (width.kind == JV_STR) {
        ind = width;
    } else {
        int64_t w = jb_need_int(c, width, "indent");
        if (w < 0) w = 0;
        if (w > 1024) jerr(c, "indent: width too large");
        char *sp = jalloc(c, (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind = jv_str(c, sp, (size_t)w);
    }
    jv s = jb_soft_str(c, v);
    jv s2 = jinja_binop(c, OP_ADD, jb_with_flags(s, 0), jv_cstr(c, "\n"));
    jv lines = jb_splitlines(c, s2, false);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    if (first) jbuf_put(c, &b, ind.s->s, ind.s->len);
    for (size_t i = 0; i < lines.l->n; i++) {
        jv line = lines.l->v[i];
        if (i) {
            jbuf_putc(c, &b, '\n');
            if (blank || line.s->len) jbuf_put(c, &b, ind.s->s, ind.s->len);
        }
        jbuf_put(c, &b, line.s->s, line.s->len);
    }
    return jb_with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

static jv f_round(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    int64_t prec = jb_need_int(c, jb_arg_or(a, 0, "precision", jv_int(0)), "round");
    jv method = jb_arg_or(a, 1, "method", jv_cstr(c, "common"));
    if (v.kind != JV_INT && v.kind != JV_FLOAT && v.kind != JV_BOOL)
        jerr(c, "round: expected a number, got %s", jv_type_name(v));
    double x = v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : v.b;
    double m = pow(10.0, (double)prec);
    const char *how = jb_need_str(c, method, "round").s->s;
    double r;
    if (!strcmp(how, "common"))
        r = nearbyint(x * m) / m; /* Python's round(): half to even */
    else if (!strcmp(how, "floor"))
        r = floor(x * m) / m;
    else if (!strcmp(how, "ceil"))
        r = ceil(x * m) / m;
    else
        jerr(c, "method must be common, ceil or floor");
    return jv_float(r);
}

static jv f_sum(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv attribute = jb_arg(a, 0, "attribute", NULL);
    jv total = jb_arg_or(a, 1, "start", jv_int(0));
    jv items = jinja_iterable(c, v);
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        if (attribute.kind != JV_UNDEF) it = attr_path(c, it, attribute);
        total = jinja_binop(c, OP_ADD, total, it);
    }
    return total;
}

static jv f_dictsort(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    bool cs = jv_truthy(jb_arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv by = jb_arg_or(a, 1, "by", jv_cstr(c, "key"));
    bool reverse = jv_truthy(jb_arg_or(a, 2, "reverse", jv_bool(false)));
    if (v.kind != JV_DICT) jerr(c, "dictsort: expected a mapping, got %s", jv_type_name(v));
    int pos = !strcmp(jb_need_str(c, by, "dictsort").s->s, "value") ? 1 : 0;
    jv items = jb_dict_items(c, v);
    size_t n = items.l->n;
    sort_key *k = jalloc(c, (n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) k[i] = (sort_key){lower_if_str(c, items.l->v[i].l->v[pos], !cs), items.l->v[i]};
    return sorted_items(c, k, n, reverse);
}

static jv f_default(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv def = jb_arg_or(a, 0, "default_value", jv_str(c, "", 0));
    bool boolean = jv_truthy(jb_arg_or(a, 1, "boolean", jv_bool(false)));
    if (v.kind == JV_UNDEF || (boolean && !jv_truthy(v))) return def;
    return v;
}

static jv f_length(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    return jv_int(length_of(c, v));
}

/* string, safe, escape, e, forceescape: str() of the value, marked safe or
 * escaped */
static jv f_markup(jctx *c, jv v, const char *name, const jargs *a) {
    (void)a;
    if (!strcmp(name, "string")) return jb_soft_str(c, v);
    if (!strcmp(name, "safe")) return jb_with_flags(jb_soft_str(c, v), JV_SAFE);
    if (!strcmp(name, "forceescape")) return jinja_escape(c, jb_with_flags(jb_soft_str(c, v), 0));
    return jinja_escape(c, v);
}

static jv f_trim(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    return jb_strip(c, jb_soft_str(c, v), jb_arg(a, 0, "chars", NULL), true, true);
}

/* upper, lower, capitalize */
static jv f_case(jctx *c, jv v, const char *name, const jargs *a) {
    (void)a;
    int mode = name[0] == 'u' ? JB_CASE_UPPER : name[0] == 'l' ? JB_CASE_LOWER : JB_CASE_CAPITALIZE;
    return jb_change_case(c, jb_soft_str(c, v), mode);
}

static jv f_title(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    return title_words(c, jb_soft_str(c, v));
}

static jv f_replace(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv s = jb_with_flags(jb_soft_str(c, v), 0);
    jv cnt = jb_arg(a, 2, "count", NULL);
    return jb_replace(c, s, jb_soft_str(c, jb_arg(a, 0, "old", NULL)), jb_soft_str(c, jb_arg(a, 1, "new", NULL)),
                      cnt.kind == JV_INT ? cnt.i : -1);
}

static jv f_first(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    jv items = jinja_iterable(c, v);
    return items.l->n ? items.l->v[0] : jv_undef("No first item, sequence was empty.");
}

static jv f_last(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    jv items = jinja_iterable(c, v);
    return items.l->n ? items.l->v[items.l->n - 1] : jv_undef("No last item, sequence was empty.");
}

static jv f_list(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    jv items = jinja_iterable(c, v);
    jv r = jv_list(c, items.l->n);
    if (items.l->n) memcpy(r.l->v, items.l->v, items.l->n * sizeof(jv));
    return r;
}

static jv f_items(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    if (v.kind == JV_UNDEF) return jv_list(c, 0);
    if (v.kind != JV_DICT) jerr(c, "Can only get item pairs from a mapping.");
    return jb_dict_items(c, v);
}

static jv f_reverse(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    if (v.kind == JV_STR) {
        jcps d = jb_decode(c, v.s);
        jbuf b = {0};
        jbuf_put(c, &b, "", 0);
        for (size_t i = d.n; i-- > 0;) jbuf_put(c, &b, v.s->s + d.off[i], d.off[i + 1] - d.off[i]);
        return jbuf_take(c, &b);
    }
    jv items = jinja_iterable(c, v);
    jv r = jv_list(c, items.l->n);
    for (size_t i = 0; i < items.l->n; i++) r.l->v[i] = items.l->v[items.l->n - 1 - i];
    return r;
}

static jv f_abs(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    if (v.kind == JV_INT) {
        if (v.i == INT64_MIN) jerr(c, "integer overflow");
        return jv_int(v.i < 0 ? -v.i : v.i);
    }
    if (v.kind == JV_FLOAT) return jv_float(fabs(v.f));
    if (v.kind == JV_BOOL) return jv_int(v.b);
    jerr(c, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jv f_attr(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv an = jb_need_str(c, jb_arg(a, 0, "name", NULL), "attr");
    if (v.kind == JV_DICT) return jinja_method(c, v, an.s->s);
    return jinja_getattr(c, v, an.s->s);
}

static jv f_format(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    jv args = jv_list(c, a->n);
    args.flags = JV_TUPLE;
    for (size_t i = 0; i < a->n; i++) args.l->v[i] = a->pos[i];
    return jinja_binop(c, OP_MOD, jb_soft_str(c, v), args);
}

static jv f_wordcount(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    jv s = jb_soft_str(c, v);
    jcps d = jb_decode(c, s.s);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < d.n; i++) {
        bool w = jb_is_alnum(d.cp[i]) || d.cp[i] == '_';
        if (w && !in_word) n++;
        in_word = w;
    }
    return jv_int(n);
}

/* By what they work on. min_args 0 where Python needs an argument: see
 * jinja_builtins.h. */
static const jbuiltin filters[] = {
    /* any value */
    {"default", f_default, 0}, {"d", f_default, 0}, {"attr", f_attr, 1},
    {"string", f_markup, 0}, {"tojson", f_tojson, 0},
    {"length", f_length, 0}, {"count", f_length, 0},
    /* Markup */
    {"safe", f_markup, 0}, {"escape", f_markup, 0}, {"e", f_markup, 0}, {"forceescape", f_markup, 0},
    /* strings */
    {"upper", f_case, 0}, {"lower", f_case, 0}, {"capitalize", f_case, 0}, {"title", f_title, 0},
    {"trim", f_trim, 0}, {"replace", f_replace, 0 /* Python: 2 */},
    {"indent", f_indent, 0}, {"format", f_format, 0}, {"wordcount", f_wordcount, 0},
    /* numbers */
    {"int", f_int, 0}, {"float", f_float, 0}, {"abs", f_abs, 0}, {"round", f_round, 0},
    /* sequences and mappings */
    {"first", f_first, 0}, {"last", f_last, 0}, {"list", f_list, 0}, {"reverse", f_reverse, 0},
    {"join", f_join, 0}, {"sort", f_sort, 0}, {"unique", f_unique, 0},
    {"max", f_minmax, 0}, {"min", f_minmax, 0}, {"sum", f_sum, 0},
    {"items", f_items, 0}, {"dictsort", f_dictsort, 0},
    {"map", f_map, 0},
    {"select", f_select, 0}, {"reject", f_select, 0},
    {"selectattr", f_select, 1}, {"rejectattr", f_select, 1},
};

bool jinja_has_filter(const char *name) { return JB_FIND(name, filters) != NULL; }
const char *jinja_filter_closest(const char *name) { return JB_CLOSEST(name, filters); }
jv jinja_filter(jctx *c, const char *name, jv v, const jargs *a) { return JB_CALL(c, "filter", filters, name, v, a); }
