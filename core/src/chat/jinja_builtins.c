/* jinja_builtins — jinja2's filters and tests, the Python str/list/dict
 * methods templates call, and the globals (range, dict, namespace, and
 * transformers' raise_exception and strftime_now). Each follows the Python
 * original's behaviour, including what it does with undefined values and
 * when it raises. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "chat/jinja.h"

#define SANDBOX_MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

/* --------------------------------------------------------- arguments */

/* Argument idx (positional) or name (keyword); has=false when absent. */
static jv arg(const jargs *a, size_t idx, const char *name, bool *has) {
    if (idx < a->n) {
        if (has) *has = true;
        return a->pos[idx];
    }
    for (size_t i = 0; i < a->nk; i++)
        if (name && !strcmp(a->kname[i], name)) {
            if (has) *has = true;
            return a->kval[i];
        }
    if (has) *has = false;
    return jv_undef(name);
}

static jv arg_or(const jargs *a, size_t idx, const char *name, jv def) {
    bool has;
    jv v = arg(a, idx, name, &has);
    return has ? v : def;
}

static void check_args(jctx *c, const jargs *a, size_t max_pos, const char *const *names,
                       const char *what) {
    if (a->n > max_pos) jerr(c, "%s takes at most %zu positional argument(s)", what, max_pos);
    for (size_t i = 0; i < a->nk; i++) {
        bool ok = false;
        for (const char *const *n = names; n && *n; n++)
            if (!strcmp(*n, a->kname[i])) ok = true;
        if (!ok) jerr(c, "%s got an unexpected keyword argument '%s'", what, a->kname[i]);
    }
}

static jv need_str(jctx *c, jv v, const char *what) {
    if (v.kind != JV_STR) jerr(c, "%s: expected a string, got %s", what, jv_type_name(v));
    return v;
}

static int64_t need_int(jctx *c, jv v, const char *what) {
    if (v.kind == JV_INT) return v.i;
    if (v.kind == JV_BOOL) return v.b;
    jerr(c, "%s: expected an integer, got %s", what, jv_type_name(v));
}

/* soft_str(): str() of anything, Markup kept. */
static jv soft_str(jctx *c, jv v) { return jv_stringify(c, v); }

static jv with_flags(jv v, uint8_t flags) {
    v.flags = flags;
    return v;
}

/* ------------------------------------------------------ code points */

typedef struct cps {
    size_t n;
    int32_t *cp;
    size_t *off; /* n + 1 byte offsets */
} cps;

static cps decode(jctx *c, const jstr *s) {
    cps r;
    r.n = utf8_count(s->s, s->len);
    r.cp = jalloc(c, (r.n + 1) * sizeof *r.cp);
    r.off = jalloc(c, (r.n + 1) * sizeof *r.off);
    size_t pos = 0;
    for (size_t i = 0; i < r.n; i++) {
        r.off[i] = pos;
        pos += jutf8_decode(s->s + pos, s->len - pos, &r.cp[i]);
    }
    r.off[r.n] = s->len;
    return r;
}

static bool cp_in(int32_t cp, const cps *set) {
    for (size_t i = 0; i < set->n; i++)
        if (set->cp[i] == cp) return true;
    return false;
}

static bool is_cased(int32_t cp) {
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

static void put_cp(jctx *c, jbuf *b, int32_t cp) {
    char tmp[4];
    jbuf_put(c, b, tmp, utf8_encode(cp, tmp));
}

enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_SWAP };

static jv change_case(jctx *c, jv s, int mode) {
    cps d = decode(c, s.s);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    bool prev_cased = false;
    for (size_t i = 0; i < d.n; i++) {
        int32_t cp = d.cp[i], o = cp;
        switch (mode) {
        case CASE_UPPER:
            if (cp == 0xDF) { /* the one full mapping templates meet: ß -> SS */
                jbuf_put(c, &b, "SS", 2);
                continue;
            }
            o = utf8proc_toupper(cp);
            break;
        case CASE_LOWER: o = utf8proc_tolower(cp); break;
        case CASE_CAPITALIZE: o = i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case CASE_SWAP:
            o = utf8proc_category(cp) == UTF8PROC_CATEGORY_LU ? utf8proc_tolower(cp) : utf8proc_toupper(cp);
            break;
        case CASE_TITLE:
            o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
            prev_cased = is_cased(cp);
            break;
        }
        put_cp(c, &b, o);
    }
    return with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

/* jinja's |title: words start after -, whitespace, ( { [ <. */
static jv jinja_title(jctx *c, jv s) {
    cps d = decode(c, s.s);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    bool start = true;
    for (size_t i = 0; i < d.n; i++) {
        int32_t cp = d.cp[i];
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || py_isspace(cp);
        if (sep) {
            put_cp(c, &b, cp);
            start = true;
        } else {
            put_cp(c, &b, start ? utf8proc_toupper(cp) : utf8proc_tolower(cp));
            start = false;
        }
    }
    return with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

/* str.strip/lstrip/rstrip(chars=None) */
static jv strip(jctx *c, jv s, jv chars, bool left, bool right) {
    cps d = decode(c, s.s);
    cps set = {0};
    bool ws = chars.kind == JV_NONE || chars.kind == JV_UNDEF;
    if (!ws) set = decode(c, need_str(c, chars, "strip").s);
    size_t a = 0, b = d.n;
    if (left)
        while (a < b && (ws ? py_isspace(d.cp[a]) : cp_in(d.cp[a], &set))) a++;
    if (right)
        while (b > a && (ws ? py_isspace(d.cp[b - 1]) : cp_in(d.cp[b - 1], &set))) b--;
    return with_flags(jv_str(c, s.s->s + d.off[a], d.off[b] - d.off[a]), s.flags & JV_SAFE);
}

static const char *find_bytes(const char *h, size_t hl, const char *n, size_t nl, size_t from) {
    if (nl == 0) return from <= hl ? h + from : NULL;
    for (size_t i = from; i + nl <= hl; i++)
        if (memcmp(h + i, n, nl) == 0) return h + i;
    return NULL;
}

static const char *rfind_bytes(const char *h, const char *n, size_t nl, size_t end) {
    if (nl > end) return NULL;
    for (size_t i = end - nl + 1; i-- > 0;)
        if (memcmp(h + i, n, nl) == 0) return h + i;
    return NULL;
}

static void list_push(jctx *c, jbuf *b, jv v) { jbuf_put(c, b, (const char *)&v, sizeof v); }
static jv list_from(jctx *c, jbuf *b) {
    size_t n = b->len / sizeof(jv);
    jv r = jv_list(c, n);
    if (n) memcpy(r.l->v, b->p, n * sizeof(jv));
    return r;
}
/* The items pushed to b, last first (rsplit collects from the right). */
static jv list_from_reversed(jctx *c, jbuf *b) {
    jv r = list_from(c, b);
    for (size_t k = 0; k < r.l->n / 2; k++) {
        jv t = r.l->v[k];
        r.l->v[k] = r.l->v[r.l->n - 1 - k];
        r.l->v[r.l->n - 1 - k] = t;
    }
    return r;
}

/* split(None) / rsplit(None): runs of whitespace separate, none at the
 * ends; after max splits the rest is one part (its outer space trimmed). */
static jv split_on_space(jctx *c, jv s, int64_t max, bool from_right) {
    jbuf parts = {0};
    const char *p = s.s->s;
    const uint8_t fl = s.flags & JV_SAFE;
    cps d = decode(c, s.s);
    int64_t done = 0;
    if (!from_right) {
        size_t i = 0;
        for (;;) {
            while (i < d.n && py_isspace(d.cp[i])) i++;
            if (i >= d.n) break;
            if (max >= 0 && done >= max) {
                size_t e = d.n;
                while (e > i && py_isspace(d.cp[e - 1])) e--;
                list_push(c, &parts, with_flags(jv_str(c, p + d.off[i], d.off[e] - d.off[i]), fl));
                break;
            }
            size_t j = i;
            while (j < d.n && !py_isspace(d.cp[j])) j++;
            list_push(c, &parts, with_flags(jv_str(c, p + d.off[i], d.off[j] - d.off[i]), fl));
            done++;
            i = j;
        }
        return list_from(c, &parts);
    }
    /* from the right: collect backwards, then reverse */
    size_t i = d.n;
    for (;;) {
        while (i > 0 && py_isspace(d.cp[i - 1])) i--;
        if (i == 0) break;
        if (max >= 0 && done >= max) {
            size_t a = 0;
            while (a < i && py_isspace(d.cp[a])) a++;
            list_push(c, &parts, with_flags(jv_str(c, p + d.off[a], d.off[i] - d.off[a]), fl));
            break;
        }
        size_t j = i;
        while (j > 0 && !py_isspace(d.cp[j - 1])) j--;
        list_push(c, &parts, with_flags(jv_str(c, p + d.off[j], d.off[i] - d.off[j]), fl));
        done++;
        i = j;
    }
    return list_from_reversed(c, &parts);
}

/* split(sep) / rsplit(sep): at most max splits (-1: all), empty parts kept. */
static jv split_on_sep(jctx *c, jv s, jv sep, int64_t max, bool from_right) {
    need_str(c, sep, "split");
    if (sep.s->len == 0) jerr(c, "empty separator");
    jbuf parts = {0};
    const char *p = s.s->s, *sp = sep.s->s;
    const size_t len = s.s->len, sl = sep.s->len;
    const uint8_t fl = s.flags & JV_SAFE;
    int64_t done = 0;
    if (!from_right) {
        size_t pos = 0;
        for (;;) {
            const char *hit = (max < 0 || done < max) ? find_bytes(p, len, sp, sl, pos) : NULL;
            if (!hit) {
                list_push(c, &parts, with_flags(jv_str(c, p + pos, len - pos), fl));
                break;
            }
            list_push(c, &parts, with_flags(jv_str(c, p + pos, (size_t)(hit - p) - pos), fl));
            pos = (size_t)(hit - p) + sl;
            done++;
        }
        return list_from(c, &parts);
    }
    size_t end = len;
    for (;;) {
        const char *hit = (max < 0 || done < max) ? rfind_bytes(p, sp, sl, end) : NULL;
        if (!hit) {
            list_push(c, &parts, with_flags(jv_str(c, p, end), fl));
            break;
        }
        size_t h = (size_t)(hit - p);
        list_push(c, &parts, with_flags(jv_str(c, p + h + sl, end - h - sl), fl));
        end = h;
        done++;
    }
    return list_from_reversed(c, &parts);
}

/* str.split / str.rsplit */
static jv split(jctx *c, jv s, jv sep, jv maxv, bool from_right) {
    int64_t max = maxv.kind == JV_INT ? maxv.i : -1;
    if (sep.kind == JV_NONE || sep.kind == JV_UNDEF) return split_on_space(c, s, max, from_right);
    return split_on_sep(c, s, sep, max, from_right);
}

static bool is_line_break(int32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static jv splitlines(jctx *c, jv s, bool keepends) {
    cps d = decode(c, s.s);
    jbuf parts = {0};
    size_t start = 0;
    for (size_t i = 0; i < d.n; i++) {
        if (!is_line_break(d.cp[i])) continue;
        size_t end = i, next = i + 1;
        if (d.cp[i] == '\r' && i + 1 < d.n && d.cp[i + 1] == '\n') next = i + 2;
        size_t stop = keepends ? next : end;
        list_push(c, &parts, with_flags(jv_str(c, s.s->s + d.off[start], d.off[stop] - d.off[start]),
                                         s.flags & JV_SAFE));
        start = next;
        i = next - 1;
    }
    if (start < d.n)
        list_push(c, &parts, with_flags(jv_str(c, s.s->s + d.off[start], d.off[d.n] - d.off[start]),
                                         s.flags & JV_SAFE));
    return list_from(c, &parts);
}

static jv replace(jctx *c, jv s, jv old, jv new_, int64_t count) {
    need_str(c, old, "replace");
    need_str(c, new_, "replace");
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    const char *p = s.s->s;
    size_t len = s.s->len, pos = 0;
    int64_t done = 0;
    if (old.s->len == 0) {
        /* Python inserts new between every code point and at both ends */
        cps d = decode(c, s.s);
        for (size_t i = 0; i <= d.n; i++) {
            if (count < 0 || done < count) {
                jbuf_put(c, &b, new_.s->s, new_.s->len);
                done++;
            }
            if (i < d.n) jbuf_put(c, &b, p + d.off[i], d.off[i + 1] - d.off[i]);
        }
        return jbuf_take(c, &b);
    }
    for (;;) {
        const char *hit = (count < 0 || done < count) ? find_bytes(p, len, old.s->s, old.s->len, pos) : NULL;
        if (!hit) break;
        jbuf_put(c, &b, p + pos, (size_t)(hit - p) - pos);
        jbuf_put(c, &b, new_.s->s, new_.s->len);
        pos = (size_t)(hit - p) + old.s->len;
        done++;
    }
    jbuf_put(c, &b, p + pos, len - pos);
    return jbuf_take(c, &b);
}

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
    need_str(c, sub, "find");
    const char *hit = from_right ? rfind_bytes(s.s->s, sub.s->s, sub.s->len, s.s->len)
                                 : find_bytes(s.s->s, s.s->len, sub.s->s, sub.s->len, 0);
    if (!hit) return -1;
    return (int64_t)utf8_count(s.s->s, (size_t)(hit - s.s->s));
}

typedef bool (*cp_pred)(int32_t cp);
static bool p_digit(int32_t cp) { return utf8proc_category(cp) == UTF8PROC_CATEGORY_ND; }
static bool p_alpha(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static bool p_alnum(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return p_alpha(cp) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}
static bool p_space(int32_t cp) { return py_isspace(cp); }

static bool all_cp(jctx *c, jv s, cp_pred pred) {
    cps d = decode(c, s.s);
    if (d.n == 0) return false;
    for (size_t i = 0; i < d.n; i++)
        if (!pred(d.cp[i])) return false;
    return true;
}

/* str.islower()/isupper(): some cased character, none of the other case. */
static bool case_test(jctx *c, jv s, bool lower) {
    cps d = decode(c, s.s);
    bool any = false;
    for (size_t i = 0; i < d.n; i++) {
        utf8proc_category_t k = utf8proc_category(d.cp[i]);
        if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT) {
            if (lower) return false;
            any = true;
        } else if (k == UTF8PROC_CATEGORY_LL) {
            if (!lower) return false;
            any = true;
        }
    }
    return any;
}

/* Python's str methods by name: one short branch each (~90 lines as a
 * table). */
static jv str_method(jctx *c, jv self, const char *name, const jargs *a) {
    jv a0 = arg(a, 0, NULL, NULL), a1 = arg(a, 1, NULL, NULL);
    if (!strcmp(name, "strip")) return strip(c, self, a0, true, true);
    if (!strcmp(name, "lstrip")) return strip(c, self, a0, true, false);
    if (!strcmp(name, "rstrip")) return strip(c, self, a0, false, true);
    if (!strcmp(name, "split") || !strcmp(name, "rsplit"))
        return split(c, self, arg(a, 0, "sep", NULL), arg(a, 1, "maxsplit", NULL), name[0] == 'r');
    if (!strcmp(name, "splitlines")) return splitlines(c, self, jv_truthy(arg(a, 0, "keepends", NULL)));
    if (!strcmp(name, "startswith")) return jv_bool(starts_or_ends(c, self, a0, false));
    if (!strcmp(name, "endswith")) return jv_bool(starts_or_ends(c, self, a0, true));
    if (!strcmp(name, "replace")) {
        jv cnt = arg(a, 2, "count", NULL);
        jv r = replace(c, self, a0, a1, cnt.kind == JV_INT ? cnt.i : -1);
        return with_flags(r, self.flags & JV_SAFE);
    }
    if (!strcmp(name, "upper")) return change_case(c, self, CASE_UPPER);
    if (!strcmp(name, "lower")) return change_case(c, self, CASE_LOWER);
    if (!strcmp(name, "title")) return change_case(c, self, CASE_TITLE);
    if (!strcmp(name, "capitalize")) return change_case(c, self, CASE_CAPITALIZE);
    if (!strcmp(name, "swapcase")) return change_case(c, self, CASE_SWAP);
    if (!strcmp(name, "find")) return jv_int(str_find(c, self, a0, false));
    if (!strcmp(name, "rfind")) return jv_int(str_find(c, self, a0, true));
    if (!strcmp(name, "index") || !strcmp(name, "rindex")) {
        int64_t r = str_find(c, self, a0, name[0] == 'r');
        if (r < 0) jerr(c, "substring not found");
        return jv_int(r);
    }
    if (!strcmp(name, "count")) {
        need_str(c, a0, "count");
        if (a0.s->len == 0) return jv_int((int64_t)utf8_count(self.s->s, self.s->len) + 1);
        int64_t n = 0;
        size_t pos = 0;
        const char *hit;
        while ((hit = find_bytes(self.s->s, self.s->len, a0.s->s, a0.s->len, pos))) {
            n++;
            pos = (size_t)(hit - self.s->s) + a0.s->len;
        }
        return jv_int(n);
    }
    if (!strcmp(name, "join")) {
        jv items = jinja_iterable(c, a0);
        jbuf b = {0};
        jbuf_put(c, &b, "", 0);
        for (size_t i = 0; i < items.l->n; i++) {
            jv it = items.l->v[i];
            if (it.kind != JV_STR)
                jerr(c, "sequence item %zu: expected str instance, %s found", i, jv_type_name(it));
            if (i) jbuf_put(c, &b, self.s->s, self.s->len);
            jbuf_put(c, &b, it.s->s, it.s->len);
        }
        return jbuf_take(c, &b);
    }
    if (!strcmp(name, "format")) return str_format(c, self, a);
    if (!strcmp(name, "isdigit") || !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal"))
        return jv_bool(all_cp(c, self, p_digit));
    if (!strcmp(name, "isalpha")) return jv_bool(all_cp(c, self, p_alpha));
    if (!strcmp(name, "isalnum")) return jv_bool(all_cp(c, self, p_alnum));
    if (!strcmp(name, "isspace")) return jv_bool(all_cp(c, self, p_space));
    if (!strcmp(name, "islower")) return jv_bool(case_test(c, self, true));
    if (!strcmp(name, "isupper")) return jv_bool(case_test(c, self, false));
    if (!strcmp(name, "removeprefix") || !strcmp(name, "removesuffix")) {
        need_str(c, a0, name);
        bool suffix = name[6] == 's';
        if (starts_or_ends(c, self, a0, suffix)) {
            size_t n = self.s->len - a0.s->len;
            return jv_str(c, suffix ? self.s->s : self.s->s + a0.s->len, n);
        }
        return self;
    }
    if (!strcmp(name, "partition") || !strcmp(name, "rpartition")) {
        need_str(c, a0, name);
        if (a0.s->len == 0) jerr(c, "empty separator");
        bool right = name[0] == 'r';
        const char *hit = right ? rfind_bytes(self.s->s, a0.s->s, a0.s->len, self.s->len)
                                : find_bytes(self.s->s, self.s->len, a0.s->s, a0.s->len, 0);
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
    jerr(c, "str has no method '%s'", name);
}

static jv list_method(jctx *c, jv self, const char *name, const jargs *a) {
    jv a0 = arg(a, 0, NULL, NULL);
    if (!strcmp(name, "index")) {
        for (size_t i = 0; i < self.l->n; i++)
            if (jv_equal(self.l->v[i], a0)) return jv_int((int64_t)i);
        jerr(c, "value is not in list");
    }
    if (!strcmp(name, "count")) {
        int64_t n = 0;
        for (size_t i = 0; i < self.l->n; i++) n += jv_equal(self.l->v[i], a0);
        return jv_int(n);
    }
    jerr(c, "list has no method '%s'", name);
}

static jv dict_items(jctx *c, jv d) {
    jv r = jv_list(c, d.d->n);
    for (size_t i = 0; i < d.d->n; i++) {
        jv pair = jv_list(c, 2);
        pair.flags = JV_TUPLE;
        pair.l->v[0] = (jv){.kind = JV_STR, .s = d.d->k[i]};
        pair.l->v[1] = d.d->v[i];
        r.l->v[i] = pair;
    }
    return r;
}

static jv dict_method(jctx *c, jv self, const char *name, const jargs *a) {
    if (!strcmp(name, "items")) return dict_items(c, self);
    if (!strcmp(name, "keys")) return jinja_iterable(c, self);
    if (!strcmp(name, "values")) {
        jv r = jv_list(c, self.d->n);
        for (size_t i = 0; i < self.d->n; i++) r.l->v[i] = self.d->v[i];
        return r;
    }
    if (!strcmp(name, "get")) {
        jv k = arg(a, 0, NULL, NULL);
        jv def = arg_or(a, 1, NULL, jv_none());
        if (k.kind != JV_STR) return def;
        jv *v = jdict_get(self.d, k.s->s, k.s->len);
        return v ? *v : def;
    }
    if (!strcmp(name, "copy")) {
        jv r = jv_dict(c);
        for (size_t i = 0; i < self.d->n; i++)
            jdict_set(c, r.d, self.d->k[i]->s, self.d->k[i]->len, self.d->v[i]);
        return r;
    }
    jerr(c, "access to attribute '%s' of 'dict' object is unsafe", name);
}

static jv loop_method(jctx *c, jv self, const char *name, const jargs *a) {
    jloop *L = self.loop;
    if (!strcmp(name, "cycle")) {
        if (a->n == 0) jerr(c, "no items for cycling given");
        return a->pos[L->i % a->n];
    }
    /* changed(*values): whether the values differ from the last call */
    jv now = jv_list(c, a->n);
    for (size_t i = 0; i < a->n; i++) now.l->v[i] = a->pos[i];
    bool changed = !L->changed_set || !jv_equal(L->last_changed, now);
    L->last_changed = now;
    L->changed_set = true;
    return jv_bool(changed);
}

static jv call_method(jctx *c, jv self, const char *name, const jargs *a) {
    switch (self.kind) {
    case JV_STR: return str_method(c, self, name, a);
    case JV_LIST: return list_method(c, self, name, a);
    case JV_DICT: return dict_method(c, self, name, a);
    case JV_LOOP: return loop_method(c, self, name, a);
    default: jerr(c, "'%s' object has no method '%s'", jv_type_name(self), name);
    }
}

static const char *const str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
    "replace", "upper", "lower", "title", "capitalize", "swapcase", "find", "rfind", "index",
    "rindex", "count", "join", "format", "isdigit", "isnumeric", "isdecimal", "isalpha",
    "isalnum", "isspace", "islower", "isupper", "removeprefix", "removesuffix", "partition",
    "rpartition", NULL};
static const char *const list_methods[] = {"index", "count", NULL};
/* dict attributes: the mutating ones exist (and are unsafe to call) */
static const char *const dict_methods[] = {"items", "keys", "values", "get", "copy", "update",
                                           "pop", "popitem", "setdefault", "clear", NULL};
static const char *const loop_methods[] = {"cycle", "changed", NULL};

static bool in_names(const char *const *names, const char *name) {
    for (; *names; names++)
        if (!strcmp(*names, name)) return true;
    return false;
}

jv jinja_method(jctx *c, jv obj, const char *name) {
    const char *const *names = obj.kind == JV_STR ? str_methods : obj.kind == JV_LIST ? list_methods
                               : obj.kind == JV_DICT ? dict_methods : obj.kind == JV_LOOP ? loop_methods
                               : NULL;
    if (!names || !in_names(names, name)) return jv_undef(name);
    jfunc *f = jalloc(c, sizeof *f);
    f->fn = call_method;
    f->self = obj;
    f->name = name;
    return (jv){.kind = JV_FUNC, .fn = f};
}

/* ------------------------------------------------------------ globals */

static jv g_range(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)name;
    if (a->nk) jerr(c, "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3) jerr(c, "range expected 1 to 3 arguments, got %zu", a->n);
    int64_t start = 0, stop, stp = 1;
    if (a->n == 1) {
        stop = need_int(c, a->pos[0], "range");
    } else {
        start = need_int(c, a->pos[0], "range");
        stop = need_int(c, a->pos[1], "range");
        if (a->n == 3) stp = need_int(c, a->pos[2], "range");
    }
    if (stp == 0) jerr(c, "range() arg 3 must not be zero");
    double count = stp > 0 ? ceil(((double)stop - (double)start) / (double)stp)
                           : ceil(((double)start - (double)stop) / (double)-stp);
    if (count < 0) count = 0;
    if (count > SANDBOX_MAX_RANGE)
        jerr(c, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", SANDBOX_MAX_RANGE);
    jv r = jv_list(c, (size_t)count);
    for (size_t i = 0; i < (size_t)count; i++) r.l->v[i] = jv_int(start + (int64_t)i * stp);
    return r;
}

static jv kwargs_dict(jctx *c, const jargs *a, jv into) {
    for (size_t i = 0; i < a->nk; i++) jdict_set(c, into.d, a->kname[i], strlen(a->kname[i]), a->kval[i]);
    return into;
}

static jv g_dict(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    jv d = jv_dict(c);
    if (a->n > 1) jerr(c, "%s expected at most 1 argument, got %zu", name, a->n);
    if (a->n == 1) {
        jv src = a->pos[0];
        if (src.kind == JV_DICT || src.kind == JV_NS) {
            for (size_t i = 0; i < src.d->n; i++)
                jdict_set(c, d.d, src.d->k[i]->s, src.d->k[i]->len, src.d->v[i]);
        } else {
            jv items = jinja_iterable(c, src);
            for (size_t i = 0; i < items.l->n; i++) {
                jv pair = items.l->v[i];
                if (pair.kind != JV_LIST || pair.l->n != 2 || pair.l->v[0].kind != JV_STR)
                    jerr(c, "%s: cannot convert sequence element %zu to a (key, value) pair", name, i);
                jdict_set(c, d.d, pair.l->v[0].s->s, pair.l->v[0].s->len, pair.l->v[1]);
            }
        }
    }
    return kwargs_dict(c, a, d);
}

static jv g_namespace(jctx *c, jv self, const char *name, const jargs *a) {
    jv d = g_dict(c, self, name, a);
    d.kind = JV_NS;
    return d;
}

static jv g_raise(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)name;
    jv msg = arg(a, 0, "message", NULL);
    jbuf b = {0};
    jv_to_str(c, &b, msg);
    jerr(c, "%s", b.p ? b.p : "");
}

static jv g_strftime_now(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)name;
    jv fmt = need_str(c, arg(a, 0, "format", NULL), "strftime_now");
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char out[512];
    size_t n = fmt.s->len ? strftime(out, sizeof out, fmt.s->s, &tm) : 0;
    if (fmt.s->len && n == 0) jerr(c, "strftime_now: format too long or empty result");
    return jv_str(c, out, n);
}

static void add_func(jctx *c, jscope *g, const char *name, jfunc_impl fn) {
    jfunc *f = jalloc(c, sizeof *f);
    f->fn = fn;
    f->self = jv_none();
    f->name = name;
    jv v = {.kind = JV_FUNC, .fn = f};
    jinja_scope_set(c, g, name, v);
}

void jinja_add_globals(jctx *c, jscope *g) {
    add_func(c, g, "range", g_range);
    add_func(c, g, "dict", g_dict);
    add_func(c, g, "namespace", g_namespace);
    add_func(c, g, "raise_exception", g_raise);
    add_func(c, g, "strftime_now", g_strftime_now);
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
    return with_flags(jbuf_take(c, &b), JV_SAFE);
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
    need_str(c, attribute, "attribute");
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
static jv select_items(jctx *c, jv v, const jargs *a, bool by_attr, bool keep) {
    jbuf out = {0};
    /* jinja2 yields nothing for a false value (none, undefined, ""), so
     * "tools | selectattr(...)" works on tools = none (functionary v3.1) */
    if (!jv_truthy(v)) return list_from(c, &out);
    jv items = jinja_iterable(c, v);
    size_t first = by_attr ? 1 : 0;
    jv attrv = by_attr ? arg(a, 0, NULL, NULL) : jv_none();
    if (by_attr && attrv.kind == JV_UNDEF) jerr(c, "Missing parameter for attribute name");
    const char *test = NULL;
    if (a->n > first) test = need_str(c, a->pos[first], "select test").s->s;
    if (test && !jinja_has_test(test)) jerr(c, "No test named '%s'", test);
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
        if (r == keep) list_push(c, &out, it);
    }
    return list_from(c, &out);
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

static jv lower_if_str(jctx *c, jv v, bool ci) {
    return ci && v.kind == JV_STR ? change_case(c, v, CASE_LOWER) : v;
}

static jv f_tojson(jctx *c, jv v, const jargs *a) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    check_args(c, a, 4, names, "tojson");
    bool ascii = jv_truthy(arg_or(a, 0, "ensure_ascii", jv_bool(false)));
    jv indent = arg_or(a, 1, "indent", jv_none());
    jv seps = arg_or(a, 2, "separators", jv_none());
    bool sort_keys = jv_truthy(arg_or(a, 3, "sort_keys", jv_bool(false)));
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

static jv f_int(jctx *c, jv v, const jargs *a) {
    jv def = arg_or(a, 0, "default", jv_int(0));
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

static jv f_float(jctx *c, jv v, const jargs *a) {
    jv def = arg_or(a, 0, "default", jv_float(0.0));
    if (v.kind == JV_FLOAT) return v;
    if (v.kind == JV_INT) return jv_float((double)v.i);
    if (v.kind == JV_BOOL) return jv_float(v.b);
    double d;
    if (v.kind == JV_STR && parse_py_float(v.s->s, &d)) return jv_float(d);
    if (v.kind == JV_UNDEF) jerr(c, "'%s' is undefined", v.undef ? v.undef : "value");
    return def;
}

static jv f_join(jctx *c, jv v, const jargs *a) {
    jv sep = arg_or(a, 0, "d", jv_str(c, "", 0));
    jv attribute = arg(a, 1, "attribute", NULL);
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

static jv f_map(jctx *c, jv v, const jargs *a) {
    if (!jv_truthy(v)) return jv_list(c, 0); /* as select_items: jinja2 maps a false value to nothing */
    jv items = jinja_iterable(c, v);
    bool has_attr;
    jv attribute = arg(a, (size_t)-1, "attribute", &has_attr);
    jv r = jv_list(c, items.l->n);
    if (has_attr) {
        bool has_def;
        jv def = arg(a, (size_t)-1, "default", &has_def);
        for (size_t i = 0; i < items.l->n; i++) {
            jv x = attr_path(c, items.l->v[i], attribute);
            r.l->v[i] = x.kind == JV_UNDEF && has_def ? def : x;
        }
        return r;
    }
    if (a->n == 0) jerr(c, "map requires a filter argument");
    const char *name = need_str(c, a->pos[0], "map").s->s;
    if (!jinja_has_filter(name)) jerr(c, "No filter named '%s'", name);
    for (size_t i = 0; i < items.l->n; i++) r.l->v[i] = apply_filter_args(c, name, items.l->v[i], a, 1);
    return r;
}

static jv f_sort(jctx *c, jv v, const jargs *a) {
    bool reverse = jv_truthy(arg_or(a, 0, "reverse", jv_bool(false)));
    bool cs = jv_truthy(arg_or(a, 1, "case_sensitive", jv_bool(false)));
    jv attribute = arg(a, 2, "attribute", NULL);
    jv items = jinja_iterable(c, v);
    size_t n = items.l->n;
    sort_key *k = jalloc(c, (n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) {
        jv it = items.l->v[i];
        jv key = it;
        if (attribute.kind == JV_STR && strchr(attribute.s->s, ',')) {
            /* "a,b": a tuple of keys */
            jv parts = split(c, attribute, jv_cstr(c, ","), jv_none(), false);
            key = jv_list(c, parts.l->n);
            for (size_t p = 0; p < parts.l->n; p++)
                key.l->v[p] = lower_if_str(c, attr_path(c, it, strip(c, parts.l->v[p], jv_none(), true, true)), !cs);
        } else if (attribute.kind != JV_UNDEF && attribute.kind != JV_NONE) {
            key = lower_if_str(c, attr_path(c, it, attribute), !cs);
        } else {
            key = lower_if_str(c, it, !cs);
        }
        k[i] = (sort_key){key, it};
    }
    sort_items(c, k, n, false, reverse);
    jv r = jv_list(c, n);
    for (size_t i = 0; i < n; i++) r.l->v[i] = k[i].item;
    return r;
}

static jv f_unique(jctx *c, jv v, const jargs *a) {
    bool cs = jv_truthy(arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv attribute = arg(a, 1, "attribute", NULL);
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
        list_push(c, &seen, key);
        list_push(c, &out, it);
    }
    return list_from(c, &out);
}

static jv f_minmax(jctx *c, jv v, const jargs *a, bool want_max) {
    bool cs = jv_truthy(arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv attribute = arg(a, 1, "attribute", NULL);
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

static jv f_indent(jctx *c, jv v, const jargs *a) {
    jv width = arg_or(a, 0, "width", jv_int(4));
    bool first = jv_truthy(arg_or(a, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(arg_or(a, 2, "blank", jv_bool(false)));
    jv ind;
    if (width.kind == JV_STR) {
        ind = width;
    } else {
        int64_t w = need_int(c, width, "indent");
        if (w < 0) w = 0;
        if (w > 1024) jerr(c, "indent: width too large");
        char *sp = jalloc(c, (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind = jv_str(c, sp, (size_t)w);
    }
    jv s = soft_str(c, v);
    jv s2 = jinja_binop(c, OP_ADD, with_flags(s, 0), jv_cstr(c, "\n"));
    jv lines = splitlines(c, s2, false);
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
    return with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

static jv f_round(jctx *c, jv v, const jargs *a) {
    int64_t prec = need_int(c, arg_or(a, 0, "precision", jv_int(0)), "round");
    jv method = arg_or(a, 1, "method", jv_cstr(c, "common"));
    if (v.kind != JV_INT && v.kind != JV_FLOAT && v.kind != JV_BOOL)
        jerr(c, "round: expected a number, got %s", jv_type_name(v));
    double x = v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : v.b;
    double m = pow(10.0, (double)prec);
    const char *how = need_str(c, method, "round").s->s;
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

static jv f_sum(jctx *c, jv v, const jargs *a) {
    jv attribute = arg(a, 0, "attribute", NULL);
    jv total = arg_or(a, 1, "start", jv_int(0));
    jv items = jinja_iterable(c, v);
    for (size_t i = 0; i < items.l->n; i++) {
        jv it = items.l->v[i];
        if (attribute.kind != JV_UNDEF) it = attr_path(c, it, attribute);
        total = jinja_binop(c, OP_ADD, total, it);
    }
    return total;
}

static jv f_dictsort(jctx *c, jv v, const jargs *a) {
    bool cs = jv_truthy(arg_or(a, 0, "case_sensitive", jv_bool(false)));
    jv by = arg_or(a, 1, "by", jv_cstr(c, "key"));
    bool reverse = jv_truthy(arg_or(a, 2, "reverse", jv_bool(false)));
    if (v.kind != JV_DICT) jerr(c, "dictsort: expected a mapping, got %s", jv_type_name(v));
    int pos = !strcmp(need_str(c, by, "dictsort").s->s, "value") ? 1 : 0;
    jv items = dict_items(c, v);
    size_t n = items.l->n;
    sort_key *k = jalloc(c, (n ? n : 1) * sizeof *k);
    for (size_t i = 0; i < n; i++) k[i] = (sort_key){lower_if_str(c, items.l->v[i].l->v[pos], !cs), items.l->v[i]};
    sort_items(c, k, n, false, reverse);
    jv r = jv_list(c, n);
    for (size_t i = 0; i < n; i++) r.l->v[i] = k[i].item;
    return r;
}

static const char *const filter_names[] = {
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list",
    "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe",
    "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper",
    "wordcount", NULL};

bool jinja_has_filter(const char *name) { return in_names(filter_names, name); }

/* Filters by name: one short branch each (~105 lines as a table; the
 * larger ones call their own functions). */
jv jinja_filter(jctx *c, const char *name, jv v, const jargs *a) {
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jv def = arg_or(a, 0, "default_value", jv_str(c, "", 0));
        bool boolean = jv_truthy(arg_or(a, 1, "boolean", jv_bool(false)));
        if (v.kind == JV_UNDEF || (boolean && !jv_truthy(v))) return def;
        return v;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int(length_of(c, v));
    if (!strcmp(name, "tojson")) return f_tojson(c, v, a);
    if (!strcmp(name, "safe")) return with_flags(soft_str(c, v), JV_SAFE);
    if (!strcmp(name, "escape") || !strcmp(name, "e")) return jinja_escape(c, v);
    if (!strcmp(name, "forceescape")) return jinja_escape(c, with_flags(soft_str(c, v), 0));
    if (!strcmp(name, "string")) return soft_str(c, v);
    if (!strcmp(name, "trim")) return strip(c, soft_str(c, v), arg(a, 0, "chars", NULL), true, true);
    if (!strcmp(name, "upper")) return change_case(c, soft_str(c, v), CASE_UPPER);
    if (!strcmp(name, "lower")) return change_case(c, soft_str(c, v), CASE_LOWER);
    if (!strcmp(name, "capitalize")) return change_case(c, soft_str(c, v), CASE_CAPITALIZE);
    if (!strcmp(name, "title")) return jinja_title(c, soft_str(c, v));
    if (!strcmp(name, "replace")) {
        jv s = with_flags(soft_str(c, v), 0);
        jv cnt = arg(a, 2, "count", NULL);
        return replace(c, s, soft_str(c, arg(a, 0, "old", NULL)), soft_str(c, arg(a, 1, "new", NULL)),
                       cnt.kind == JV_INT ? cnt.i : -1);
    }
    if (!strcmp(name, "join")) return f_join(c, v, a);
    if (!strcmp(name, "first")) {
        jv items = jinja_iterable(c, v);
        return items.l->n ? items.l->v[0] : jv_undef("No first item, sequence was empty.");
    }
    if (!strcmp(name, "last")) {
        jv items = jinja_iterable(c, v);
        return items.l->n ? items.l->v[items.l->n - 1] : jv_undef("No last item, sequence was empty.");
    }
    if (!strcmp(name, "list")) {
        jv items = jinja_iterable(c, v);
        jv r = jv_list(c, items.l->n);
        if (items.l->n) memcpy(r.l->v, items.l->v, items.l->n * sizeof(jv));
        return r;
    }
    if (!strcmp(name, "items")) {
        if (v.kind == JV_UNDEF) return jv_list(c, 0);
        if (v.kind != JV_DICT) jerr(c, "Can only get item pairs from a mapping.");
        return dict_items(c, v);
    }
    if (!strcmp(name, "reverse")) {
        if (v.kind == JV_STR) {
            cps d = decode(c, v.s);
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
    if (!strcmp(name, "int")) return f_int(c, v, a);
    if (!strcmp(name, "float")) return f_float(c, v, a);
    if (!strcmp(name, "abs")) {
        if (v.kind == JV_INT) {
            if (v.i == INT64_MIN) jerr(c, "integer overflow");
            return jv_int(v.i < 0 ? -v.i : v.i);
        }
        if (v.kind == JV_FLOAT) return jv_float(fabs(v.f));
        if (v.kind == JV_BOOL) return jv_int(v.b);
        jerr(c, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    if (!strcmp(name, "round")) return f_round(c, v, a);
    if (!strcmp(name, "map")) return f_map(c, v, a);
    if (!strcmp(name, "select")) return select_items(c, v, a, false, true);
    if (!strcmp(name, "reject")) return select_items(c, v, a, false, false);
    if (!strcmp(name, "selectattr")) return select_items(c, v, a, true, true);
    if (!strcmp(name, "rejectattr")) return select_items(c, v, a, true, false);
    if (!strcmp(name, "sort")) return f_sort(c, v, a);
    if (!strcmp(name, "unique")) return f_unique(c, v, a);
    if (!strcmp(name, "max")) return f_minmax(c, v, a, true);
    if (!strcmp(name, "min")) return f_minmax(c, v, a, false);
    if (!strcmp(name, "sum")) return f_sum(c, v, a);
    if (!strcmp(name, "dictsort")) return f_dictsort(c, v, a);
    if (!strcmp(name, "indent")) return f_indent(c, v, a);
    if (!strcmp(name, "attr")) {
        jv an = need_str(c, arg(a, 0, "name", NULL), "attr");
        if (v.kind == JV_DICT) return jinja_method(c, v, an.s->s);
        return jinja_getattr(c, v, an.s->s);
    }
    if (!strcmp(name, "format")) {
        jv args = jv_list(c, a->n);
        args.flags = JV_TUPLE;
        for (size_t i = 0; i < a->n; i++) args.l->v[i] = a->pos[i];
        return jinja_binop(c, OP_MOD, soft_str(c, v), args);
    }
    if (!strcmp(name, "wordcount")) {
        jv s = soft_str(c, v);
        cps d = decode(c, s.s);
        int64_t n = 0;
        bool in_word = false;
        for (size_t i = 0; i < d.n; i++) {
            bool w = p_alnum(d.cp[i]) || d.cp[i] == '_';
            if (w && !in_word) n++;
            in_word = w;
        }
        return jv_int(n);
    }
    jerr(c, "No filter named '%s'", name);
}

/* -------------------------------------------------------------- tests */

static const char *const test_names[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "escaped", "even",
    "false", "filter", "float", "ge", ">=", "gt", ">", "greaterthan", "in", "integer", "iterable",
    "le", "<=", "lower", "lt", "<", "lessthan", "mapping", "ne", "!=", "none", "number", "odd",
    "sameas", "sequence", "string", "test", "true", "undefined", "upper", NULL};

bool jinja_has_test(const char *name) { return in_names(test_names, name); }

static int cmp_op(const char *name) {
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return OP_EQ;
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return OP_NE;
    if (!strcmp(name, "lt") || !strcmp(name, "<") || !strcmp(name, "lessthan")) return OP_LT;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return OP_LE;
    if (!strcmp(name, "gt") || !strcmp(name, ">") || !strcmp(name, "greaterthan")) return OP_GT;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return OP_GE;
    return 0;
}

bool jinja_test(jctx *c, const char *name, jv v, const jargs *a) {
    jv a0 = arg(a, 0, NULL, NULL);
    int op = cmp_op(name);
    if (op) {
        if (op == OP_EQ) return jv_equal(v, a0);
        if (op == OP_NE) return !jv_equal(v, a0);
        if (v.kind == JV_UNDEF || a0.kind == JV_UNDEF) jerr(c, "undefined value in comparison");
        int r = jv_compare(c, v, a0, false);
        return op == OP_LT ? r < 0 : op == OP_LE ? r <= 0 : op == OP_GT ? r > 0 : r >= 0;
    }
    if (!strcmp(name, "defined")) return v.kind != JV_UNDEF;
    if (!strcmp(name, "undefined")) return v.kind == JV_UNDEF;
    if (!strcmp(name, "none")) return v.kind == JV_NONE;
    if (!strcmp(name, "boolean")) return v.kind == JV_BOOL;
    if (!strcmp(name, "true")) return v.kind == JV_BOOL && v.b;
    if (!strcmp(name, "false")) return v.kind == JV_BOOL && !v.b;
    if (!strcmp(name, "integer")) return v.kind == JV_INT;
    if (!strcmp(name, "float")) return v.kind == JV_FLOAT;
    if (!strcmp(name, "number")) return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL;
    if (!strcmp(name, "string")) return v.kind == JV_STR;
    if (!strcmp(name, "mapping")) return v.kind == JV_DICT;
    if (!strcmp(name, "iterable"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF ||
               v.kind == JV_LOOP;
    if (!strcmp(name, "sequence"))
        return v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF;
    if (!strcmp(name, "callable"))
        return v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_UNDEF;
    if (!strcmp(name, "escaped")) return v.kind == JV_STR && (v.flags & JV_SAFE);
    if (!strcmp(name, "sameas")) {
        if (v.kind != a0.kind) return false;
        switch (v.kind) {
        case JV_NONE:
        case JV_UNDEF: return v.kind == JV_NONE || v.undef == a0.undef;
        case JV_BOOL: return v.b == a0.b;
        case JV_INT: return v.i == a0.i && v.i >= -5 && v.i <= 256; /* CPython's small ints */
        case JV_STR: return v.s == a0.s;
        case JV_LIST: return v.l == a0.l;
        case JV_DICT:
        case JV_NS: return v.d == a0.d;
        default: return jv_equal(v, a0);
        }
    }
    if (!strcmp(name, "in")) return jinja_contains(c, a0, v);
    if (!strcmp(name, "lower") || !strcmp(name, "upper"))
        return case_test(c, soft_str(c, v), name[0] == 'l');
    if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        jv d = name[0] == 'd' ? a0 : jv_int(2);
        jv r = jinja_binop(c, OP_MOD, v, d);
        bool zero = !jv_truthy(r);
        return name[0] == 'o' ? !zero : zero;
    }
    if (!strcmp(name, "filter")) return v.kind == JV_STR && jinja_has_filter(v.s->s);
    if (!strcmp(name, "test")) return v.kind == JV_STR && jinja_has_test(v.s->s);
    jerr(c, "No test named '%s'", name);
}
