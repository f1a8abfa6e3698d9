/* jinja_methods — the Python str, list and dict methods templates call, and
 * the loop object's cycle() and changed(): one table per type, a row each
 * ({name, fn, min_args}, jinja_builtins.h). */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "chat/jinja_builtins.h"

static bool starts_or_ends(jctx *c, jv s, jv affix, bool ends) {
    if (affix.kind == JV_LIST && (affix.flags & JV_TUPLE)) {
        for (size_t i = 0; i < affix.l->n; i++)
            if (starts_or_ends(c, s, affix.l->v[i], ends)) return true;
        return false;
    }
    if (affix.kind != JV_STR)
        jerr(c, "%s first arg must be str or a tuple of str, not %s", ends ? "endswith" : "startswith",
             jv_type_name(affix));
    if (affix.s->len > s.s->len) return false;
    const char *at = ends ? s.s->s + s.s->len - affix.s->len : s.s->s;
    return memcmp(at, affix.s->s, affix.s->len) == 0;
}

/* '{} {0} {name}'.format(...) with str() of each value (no format specs). */
static jv str_format(jctx *c, jv fmt, const jargs *a) {
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    const char *p = fmt.s->s;
    size_t n = fmt.s->len, auto_idx = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '{' && i + 1 < n && p[i + 1] == '{') {
            jbuf_putc(c, &b, '{');
            i++;
            continue;
        }
        if (p[i] == '}' && i + 1 < n && p[i + 1] == '}') {
            jbuf_putc(c, &b, '}');
            i++;
            continue;
        }
        if (p[i] == '}') jerr(c, "Single '}' encountered in format string");
        if (p[i] != '{') {
            jbuf_putc(c, &b, p[i]);
            continue;
        }
        size_t j = i + 1;
        while (j < n && p[j] != '}') j++;
        if (j >= n) jerr(c, "Single '{' encountered in format string");
        const char *field = p + i + 1;
        size_t fl = j - i - 1;
        if (memchr(field, ':', fl) || memchr(field, '!', fl) || memchr(field, '.', fl) ||
            memchr(field, '[', fl))
            jerr(c, "format specs in str.format() are not supported");
        jv v;
        if (fl == 0) {
            if (auto_idx >= a->n) jerr(c, "Replacement index %zu out of range", auto_idx);
            v = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            size_t idx = (size_t)strtoul(field, NULL, 10);
            if (idx >= a->n) jerr(c, "Replacement index %zu out of range", idx);
            v = a->pos[idx];
        } else {
            bool found = false;
            for (size_t k = 0; k < a->nk; k++)
                if (strlen(a->kname[k]) == fl && !memcmp(a->kname[k], field, fl)) {
                    v = a->kval[k];
                    found = true;
                }
            if (!found) jerr(c, "KeyError: '%.*s'", (int)fl, field);
        }
        jv_to_str(c, &b, v);
        i = j;
    }
    return jbuf_take(c, &b);
}

static int64_t str_find(jctx *c, jv s, jv sub, bool from_right) {
    jb_need_str(c, sub, "find");
    const char *hit = from_right ? jb_rfind_bytes(s.s->s, sub.s->s, sub.s->len, s.s->len)
                                 : jb_find_bytes(s.s->s, s.s->len, sub.s->s, sub.s->len, 0);
    if (!hit) return -1;
    return (int64_t)utf8_count(s.s->s, (size_t)(hit - s.s->s));
}

typedef bool (*cp_pred)(int32_t cp);
static bool p_digit(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; }
static bool p_space(int32_t cp) { return py_isspace(cp); }

static bool all_cp(jctx *c, jv s, cp_pred pred) {
    jcps d = jb_decode(c, s.s);
    if (d.n == 0) return false;
    for (size_t i = 0; i < d.n; i++)
        if (!pred(d.cp[i])) return false;
    return true;
}

/* ------------------------------------------------------ str methods */

/* strip, lstrip, rstrip */
static jv m_strip(jctx *c, jv self, const char *name, const jargs *a) {
    return jb_strip(c, self, jb_arg(a, 0, NULL, NULL), name[0] != 'r', name[0] != 'l');
}

/* split, rsplit */
static jv m_split(jctx *c, jv self, const char *name, const jargs *a) {
    return jb_split(c, self, jb_arg(a, 0, "sep", NULL), jb_arg(a, 1, "maxsplit", NULL), name[0] == 'r');
}

static jv m_splitlines(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    return jb_splitlines(c, self, jv_truthy(jb_arg(a, 0, "keepends", NULL)));
}

/* startswith, endswith */
static jv m_startswith(jctx *c, jv self, const char *name, const jargs *a) {
    return jv_bool(starts_or_ends(c, self, jb_arg(a, 0, NULL, NULL), name[0] == 'e'));
}

static jv m_replace(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    jv cnt = jb_arg(a, 2, "count", NULL);
    jv r = jb_replace(c, self, jb_arg(a, 0, NULL, NULL), jb_arg(a, 1, NULL, NULL), cnt.kind == JV_INT ? cnt.i : -1);
    return jb_with_flags(r, self.flags & JV_SAFE);
}

/* upper, lower, title, capitalize, swapcase */
static jv m_case(jctx *c, jv self, const char *name, const jargs *a) {
    (void)a;
    int mode = name[0] == 'u' ? JB_CASE_UPPER : name[0] == 'l' ? JB_CASE_LOWER : name[0] == 't' ? JB_CASE_TITLE
               : name[0] == 'c' ? JB_CASE_CAPITALIZE : JB_CASE_SWAP;
    return jb_change_case(c, self, mode);
}

/* find, rfind */
static jv m_find(jctx *c, jv self, const char *name, const jargs *a) {
    return jv_int(str_find(c, self, jb_arg(a, 0, NULL, NULL), name[0] == 'r'));
}

/* index, rindex: find that raises */
static jv m_index(jctx *c, jv self, const char *name, const jargs *a) {
    int64_t r = str_find(c, self, jb_arg(a, 0, NULL, NULL), name[0] == 'r');
    if (r < 0) jerr(c, "substring not found");
    return jv_int(r);
}

static jv m_count(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    jv a0 = jb_need_str(c, jb_arg(a, 0, NULL, NULL), "count");
    if (a0.s->len == 0) return jv_int((int64_t)utf8_count(self.s->s, self.s->len) + 1);
    int64_t n = 0;
    size_t pos = 0;
    const char *hit;
    while ((hit = jb_find_bytes(self.s->s, self.s->len, a0.s->s, a0.s->len, pos))) {
        n++;
        pos = (size_t)(hit - self.s->s) + a0.s->len;
    }
    return jv_int(n);
}

static jv m_join(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    jv items = jinja_iterable(c, jb_arg(a, 0, NULL, NULL));
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        if (it.kind != JV_STR) jerr(c, "sequence item %zu: expected str instance, %s found", i, jv_type_name(it));
        if (i) jbuf_put(c, &b, self.s->s, self.s->len);
        jbuf_put(c, &b, it.s->s, it.s->len);
    }
    return jbuf_take(c, &b);
}

static jv m_format(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    return str_format(c, self, a);
}

/* isdigit, isnumeric, isdecimal, isalpha, isalnum, isspace */
static jv m_is_class(jctx *c, jv self, const char *name, const jargs *a) {
    (void)a;
    cp_pred pred = !strcmp(name, "isalpha") ? jb_is_alpha : !strcmp(name, "isalnum") ? jb_is_alnum
                   : !strcmp(name, "isspace") ? p_space : p_digit;
    return jv_bool(all_cp(c, self, pred));
}

/* islower, isupper */
static jv m_is_case(jctx *c, jv self, const char *name, const jargs *a) {
    (void)a;
    return jv_bool(jb_case_test(c, self, name[2] == 'l'));
}

/* removeprefix, removesuffix */
static jv m_remove_affix(jctx *c, jv self, const char *name, const jargs *a) {
    jv a0 = jb_need_str(c, jb_arg(a, 0, NULL, NULL), name);
    bool suffix = name[6] == 's';
    if (starts_or_ends(c, self, a0, suffix)) {
        size_t n = self.s->len - a0.s->len;
        return jv_str(c, suffix ? self.s->s : self.s->s + a0.s->len, n);
    }
    return self;
}

/* partition, rpartition */
static jv m_partition(jctx *c, jv self, const char *name, const jargs *a) {
    jv a0 = jb_need_str(c, jb_arg(a, 0, NULL, NULL), name);
    if (a0.s->len == 0) jerr(c, "empty separator");
    bool right = name[0] == 'r';
    const char *hit = right ? jb_rfind_bytes(self.s->s, a0.s->s, a0.s->len, self.s->len)
                            : jb_find_bytes(self.s->s, self.s->len, a0.s->s, a0.s->len, 0);
    jv r = jv_list(c, 3);
    r.flags = JV_TUPLE;
    if (!hit) {
        r.l->v[0] = right ? jv_str(c, "", 0) : self;
        r.l->v[1] = jv_str(c, "", 0);
        r.l->v[2] = right ? self : jv_str(c, "", 0);
    } else {
        size_t h = (size_t)(hit - self.s->s);
        r.l->v[0] = jv_str(c, self.s->s, h);
        r.l->v[1] = a0;
        r.l->v[2] = jv_str(c, hit + a0.s->len, self.s->len - h - a0.s->len);
    }
    return r;
}

/* min_args 0 where Python needs an argument: see jinja_builtins.h. */
static const jbuiltin str_methods[] = {
    {"strip", m_strip, 0}, {"lstrip", m_strip, 0}, {"rstrip", m_strip, 0},
    {"split", m_split, 0}, {"rsplit", m_split, 0}, {"splitlines", m_splitlines, 0},
    {"startswith", m_startswith, 1}, {"endswith", m_startswith, 1},
    {"removeprefix", m_remove_affix, 1}, {"removesuffix", m_remove_affix, 1},
    {"upper", m_case, 0}, {"lower", m_case, 0}, {"title", m_case, 0}, {"capitalize", m_case, 0},
    {"swapcase", m_case, 0},
    {"find", m_find, 1}, {"rfind", m_find, 1}, {"index", m_index, 1}, {"rindex", m_index, 1},
    {"count", m_count, 1}, {"replace", m_replace, 2},
    {"partition", m_partition, 1}, {"rpartition", m_partition, 1},
    {"join", m_join, 0 /* Python: 1 */}, {"format", m_format, 0},
    {"isdigit", m_is_class, 0}, {"isnumeric", m_is_class, 0}, {"isdecimal", m_is_class, 0},
    {"isalpha", m_is_class, 0}, {"isalnum", m_is_class, 0}, {"isspace", m_is_class, 0},
    {"islower", m_is_case, 0}, {"isupper", m_is_case, 0},
};

/* ----------------------------------------------------- list methods */

static jv l_index(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    jv a0 = jb_arg(a, 0, NULL, NULL);
    for (size_t i = 0; i < self.l->n; i++)
        if (jv_equal(self.l->v[i], a0)) return jv_int((int64_t)i);
    jerr(c, "value is not in list");
}

static jv l_count(jctx *c, jv self, const char *name, const jargs *a) {
    (void)c;
    (void)name;
    jv a0 = jb_arg(a, 0, NULL, NULL);
    int64_t n = 0;
    for (size_t i = 0; i < self.l->n; i++) n += jv_equal(self.l->v[i], a0);
    return jv_int(n);
}

static const jbuiltin list_methods[] = {
    {"index", l_index, 0 /* Python: 1 */},
    {"count", l_count, 0 /* Python: 1 */},
};

/* ----------------------------------------------------- dict methods */

/* items, keys, values */
static jv d_view(jctx *c, jv self, const char *name, const jargs *a) {
    (void)a;
    if (name[0] == 'i') return jb_dict_items(c, self);
    if (name[0] == 'k') return jinja_iterable(c, self);
    jv r = jv_list(c, self.d->n);
    for (size_t i = 0; i < self.d->n; i++) r.l->v[i] = self.d->v[i];
    return r;
}

static jv d_get(jctx *c, jv self, const char *name, const jargs *a) {
    (void)c;
    (void)name;
    jv k = jb_arg(a, 0, NULL, NULL);
    jv def = jb_arg_or(a, 1, NULL, jv_none());
    if (k.kind != JV_STR) return def;
    jv *v = jdict_get(self.d, k.s->s, k.s->len);
    return v ? *v : def;
}

static jv d_copy(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    (void)a;
    jv r = jv_dict(c);
    for (size_t i = 0; i < self.d->n; i++) jdict_set(c, r.d, self.d->k[i]->s, self.d->k[i]->len, self.d->v[i]);
    return r;
}

/* The mutating methods exist (`d.update is defined`) and are unsafe to call. */
static jv d_unsafe(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)a;
    jerr(c, "access to attribute '%s' of 'dict' object is unsafe", name);
}

static const jbuiltin dict_methods[] = {
    {"items", d_view, 0}, {"keys", d_view, 0}, {"values", d_view, 0},
    {"get", d_get, 0 /* Python: 1 */}, {"copy", d_copy, 0},
    {"update", d_unsafe, 0}, {"pop", d_unsafe, 0}, {"popitem", d_unsafe, 0},
    {"setdefault", d_unsafe, 0}, {"clear", d_unsafe, 0},
};

/* ------------------------------------------------------ loop methods */

static jv loop_cycle(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    if (a->n == 0) jerr(c, "no items for cycling given");
    return a->pos[self.loop->i % a->n];
}

/* changed(*values): whether the values differ from the last call */
static jv loop_changed(jctx *c, jv self, const char *name, const jargs *a) {
    (void)name;
    jloop *L = self.loop;
    jv now = jv_list(c, a->n);
    for (size_t i = 0; i < a->n; i++) now.l->v[i] = a->pos[i];
    bool changed = !L->changed_set || !jv_equal(L->last_changed, now);
    L->last_changed = now;
    L->changed_set = true;
    return jv_bool(changed);
}

static const jbuiltin loop_methods[] = {
    {"cycle", loop_cycle, 0},
    {"changed", loop_changed, 0},
};

/* ------------------------------------------------------------ lookup */

/* The methods of obj's type (n of them), or NULL. */
static const jbuiltin *methods_of(jv obj, size_t *n) {
#define ROWS(t) (*n = sizeof(t) / sizeof *(t), (t))
    switch (obj.kind) {
    case JV_STR: return ROWS(str_methods);
    case JV_LIST: return ROWS(list_methods);
    case JV_DICT: return ROWS(dict_methods);
    case JV_LOOP: return ROWS(loop_methods);
    default: return *n = 0, NULL;
    }
#undef ROWS
}

jv jinja_method(jctx *c, jv obj, const char *name) {
    size_t n;
    const jbuiltin *table = methods_of(obj, &n);
    const jbuiltin *row = table ? jb_find(name, table, n) : NULL;
    if (!row) return jv_undef(name);
    jfunc *f = jalloc(c, sizeof *f);
    f->fn = row->fn;
    f->self = obj;
    f->name = row->name;
    f->min_args = row->min_args;
    return (jv){.kind = JV_FUNC, .fn = f};
}

_Noreturn void jinja_no_method(jctx *c, jv obj, const char *name) {
    size_t n;
    const jbuiltin *table = methods_of(obj, &n);
    const char *near = table ? jb_closest(name, table, n) : NULL;
    jerr(c, "'%s' object has no attribute '%s'%s%s%s", jv_type_name(obj), name, JINJA_DID_YOU_MEAN(near));
}
