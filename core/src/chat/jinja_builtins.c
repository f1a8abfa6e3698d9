/* jinja_builtins — what the tables of builtins share (jinja_builtins.h):
 * argument access, row lookup and the closest known name, code points, and
 * the string operations that are both a filter and a str method. Each
 * follows the Python original's behaviour, including what it does with
 * undefined values and when it raises. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "chat/jinja_builtins.h"

/* --------------------------------------------------------- arguments */

jv jb_arg(const jargs *a, size_t idx, const char *name, bool *has) {
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

jv jb_arg_or(const jargs *a, size_t idx, const char *name, jv def) {
    bool has;
    jv v = jb_arg(a, idx, name, &has);
    return has ? v : def;
}

void jb_check_args(jctx *c, const jargs *a, size_t max_pos, const char *const *names, const char *what) {
    if (a->n > max_pos) jerr(c, "%s takes at most %zu positional argument(s)", what, max_pos);
    for (size_t i = 0; i < a->nk; i++) {
        bool ok = false;
        for (const char *const *n = names; n && *n; n++)
            if (!strcmp(*n, a->kname[i])) ok = true;
        if (!ok) jerr(c, "%s got an unexpected keyword argument '%s'", what, a->kname[i]);
    }
}

jv jb_need_str(jctx *c, jv v, const char *what) {
    if (v.kind != JV_STR) jerr(c, "%s: expected a string, got %s", what, jv_type_name(v));
    return v;
}

int64_t jb_need_int(jctx *c, jv v, const char *what) {
    if (v.kind == JV_INT) return v.i;
    if (v.kind == JV_BOOL) return v.b;
    jerr(c, "%s: expected an integer, got %s", what, jv_type_name(v));
}

void jb_check_min_args(jctx *c, const char *what, int min_args, const jargs *a) {
    if (a->n + a->nk < (size_t)min_args)
        jerr(c, "%s() takes at least %d argument(s) (%zu given)", what, min_args, a->n + a->nk);
}

/* ------------------------------------------------------------- tables */

const jbuiltin *jb_find(const char *name, const jbuiltin *table, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

jv jb_call(jctx *c, const char *kind, const jbuiltin *table, size_t n, const char *name, jv subject,
           const jargs *a) {
    const jbuiltin *row = jb_find(name, table, n);
    if (!row) jerr(c, "No %s named '%s'%s%s%s", kind, name, JINJA_DID_YOU_MEAN(jb_closest(name, table, n)));
    jb_check_min_args(c, row->name, row->min_args, a);
    return row->fn(c, subject, row->name, a);
}

/* Levenshtein distance of a and b, or more than max (then max + 1). */
static size_t edit_distance(const char *a, const char *b, size_t max) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32) return max + 1;
    if ((la > lb ? la - lb : lb - la) > max) return max + 1;
    size_t row[33];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            if (up + 1 < best) best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *jb_closest(const char *name, const jbuiltin *table, size_t n) {
    size_t len = strlen(name), max = len <= 2 ? 0 : len <= 4 ? 1 : 2, best = max + 1;
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(name, table[i].name, max);
        if (d < best) {
            best = d;
            found = table[i].name;
        }
    }
    return found;
}

/* ------------------------------------------------------ code points */

jcps jb_decode(jctx *c, const jstr *s) {
    jcps r;
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

static bool cp_in(int32_t cp, const jcps *set) {
    for (size_t i = 0; i < set->n; i++)
        if (set->cp[i] == cp) return true;
    return false;
}

static bool is_cased(int32_t cp) {
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

void jb_put_cp(jctx *c, jbuf *b, int32_t cp) {
    char tmp[4];
    jbuf_put(c, b, tmp, utf8_encode(cp, tmp));
}

jv jb_change_case(jctx *c, jv s, int mode) {
    jcps d = jb_decode(c, s.s);
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    bool prev_cased = false;
    for (size_t i = 0; i < d.n; i++) {
        int32_t cp = d.cp[i], o = cp;
        switch (mode) {
        case JB_CASE_UPPER:
            if (cp == 0xDF) { /* the one full mapping templates meet: ß -> SS */
                jbuf_put(c, &b, "SS", 2);
                continue;
            }
            o = utf8proc_toupper(cp);
            break;
        case JB_CASE_LOWER: o = utf8proc_tolower(cp); break;
        case JB_CASE_CAPITALIZE: o = i == 0 ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case JB_CASE_SWAP:
            o = utf8proc_category(cp) == UTF8PROC_CATEGORY_LU ? utf8proc_tolower(cp) : utf8proc_toupper(cp);
            break;
        case JB_CASE_TITLE:
            o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
            prev_cased = is_cased(cp);
            break;
        }
        jb_put_cp(c, &b, o);
    }
    return jb_with_flags(jbuf_take(c, &b), s.flags & JV_SAFE);
}

/* str.strip/lstrip/rstrip(chars=None) */
jv jb_strip(jctx *c, jv s, jv chars, bool left, bool right) {
    jcps d = jb_decode(c, s.s);
    jcps set = {0};
    bool ws = chars.kind == JV_NONE || chars.kind == JV_UNDEF;
    if (!ws) set = jb_decode(c, jb_need_str(c, chars, "strip").s);
    size_t a = 0, b = d.n;
    if (left)
        while (a < b && (ws ? py_isspace(d.cp[a]) : cp_in(d.cp[a], &set))) a++;
    if (right)
        while (b > a && (ws ? py_isspace(d.cp[b - 1]) : cp_in(d.cp[b - 1], &set))) b--;
    return jb_with_flags(jv_str(c, s.s->s + d.off[a], d.off[b] - d.off[a]), s.flags & JV_SAFE);
}

const char *jb_find_bytes(const char *h, size_t hl, const char *n, size_t nl, size_t from) {
    if (nl == 0) return from <= hl ? h + from : NULL;
    for (size_t i = from; i + nl <= hl; i++)
        if (memcmp(h + i, n, nl) == 0) return h + i;
    return NULL;
}

const char *jb_rfind_bytes(const char *h, const char *n, size_t nl, size_t end) {
    if (nl > end) return NULL;
    for (size_t i = end - nl + 1; i-- > 0;)
        if (memcmp(h + i, n, nl) == 0) return h + i;
    return NULL;
}

void jb_list_push(jctx *c, jbuf *b, jv v) { jbuf_put(c, b, (const char *)&v, sizeof v); }
jv jb_list_from(jctx *c, jbuf *b) {
    size_t n = b->len / sizeof(jv);
    jv r = jv_list(c, n);
    if (n) memcpy(r.l->v, b->p, n * sizeof(jv));
    return r;
}
/* The items pushed to b, last first (rsplit collects from the right). */
static jv list_from_reversed(jctx *c, jbuf *b) {
    jv r = jb_list_from(c, b);
    for (size_t k = 0; k < r.l->n / 2; k++) {
        jv t = r.l->v[k];
        r.l->v[k] = r.l->v[r.l->n - 1 - k];
        r.l->v[r.l->n - 1 - k] = t;
    }
    return r;
}

/* jb_split(None) / rsplit(None): runs of whitespace separate, none at the
 * ends; after max splits the rest is one part (its outer space trimmed). */
static jv split_on_space(jctx *c, jv s, int64_t max, bool from_right) {
    jbuf parts = {0};
    const char *p = s.s->s;
    const uint8_t fl = s.flags & JV_SAFE;
    jcps d = jb_decode(c, s.s);
    int64_t done = 0;
    if (!from_right) {
        size_t i = 0;
        for (;;) {
            while (i < d.n && py_isspace(d.cp[i])) i++;
            if (i >= d.n) break;
            if (max >= 0 && done >= max) {
                size_t e = d.n;
                while (e > i && py_isspace(d.cp[e - 1])) e--;
                jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + d.off[i], d.off[e] - d.off[i]), fl));
                break;
            }
            size_t j = i;
            while (j < d.n && !py_isspace(d.cp[j])) j++;
            jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + d.off[i], d.off[j] - d.off[i]), fl));
            done++;
            i = j;
        }
        return jb_list_from(c, &parts);
    }
    /* from the right: collect backwards, then reverse */
    size_t i = d.n;
    for (;;) {
        while (i > 0 && py_isspace(d.cp[i - 1])) i--;
        if (i == 0) break;
        if (max >= 0 && done >= max) {
            size_t a = 0;
            while (a < i && py_isspace(d.cp[a])) a++;
            jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + d.off[a], d.off[i] - d.off[a]), fl));
            break;
        }
        size_t j = i;
        while (j > 0 && !py_isspace(d.cp[j - 1])) j--;
        jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + d.off[j], d.off[i] - d.off[j]), fl));
        done++;
        i = j;
    }
    return list_from_reversed(c, &parts);
}

/* jb_split(sep) / rsplit(sep): at most max splits (-1: all), empty parts kept. */
static jv split_on_sep(jctx *c, jv s, jv sep, int64_t max, bool from_right) {
    jb_need_str(c, sep, "split");
    if (sep.s->len == 0) jerr(c, "empty separator");
    jbuf parts = {0};
    const char *p = s.s->s, *sp = sep.s->s;
    const size_t len = s.s->len, sl = sep.s->len;
    const uint8_t fl = s.flags & JV_SAFE;
    int64_t done = 0;
    if (!from_right) {
        size_t pos = 0;
        for (;;) {
            const char *hit = (max < 0 || done < max) ? jb_find_bytes(p, len, sp, sl, pos) : NULL;
            if (!hit) {
                jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + pos, len - pos), fl));
                break;
            }
            jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + pos, (size_t)(hit - p) - pos), fl));
            pos = (size_t)(hit - p) + sl;
            done++;
        }
        return jb_list_from(c, &parts);
    }
    size_t end = len;
    for (;;) {
        const char *hit = (max < 0 || done < max) ? jb_rfind_bytes(p, sp, sl, end) : NULL;
        if (!hit) {
            jb_list_push(c, &parts, jb_with_flags(jv_str(c, p, end), fl));
            break;
        }
        size_t h = (size_t)(hit - p);
        jb_list_push(c, &parts, jb_with_flags(jv_str(c, p + h + sl, end - h - sl), fl));
        end = h;
        done++;
    }
    return list_from_reversed(c, &parts);
}

/* str.split / str.rsplit */
jv jb_split(jctx *c, jv s, jv sep, jv maxv, bool from_right) {
    int64_t max = maxv.kind == JV_INT ? maxv.i : -1;
    if (sep.kind == JV_NONE || sep.kind == JV_UNDEF) return split_on_space(c, s, max, from_right);
    return split_on_sep(c, s, sep, max, from_right);
}

static bool is_line_break(int32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
           cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

jv jb_splitlines(jctx *c, jv s, bool keepends) {
    jcps d = jb_decode(c, s.s);
    jbuf parts = {0};
    size_t start = 0;
    for (size_t i = 0; i < d.n; i++) {
        if (!is_line_break(d.cp[i])) continue;
        size_t end = i, next = i + 1;
        if (d.cp[i] == '\r' && i + 1 < d.n && d.cp[i + 1] == '\n') next = i + 2;
        size_t stop = keepends ? next : end;
        jb_list_push(c, &parts, jb_with_flags(jv_str(c, s.s->s + d.off[start], d.off[stop] - d.off[start]),
                                         s.flags & JV_SAFE));
        start = next;
        i = next - 1;
    }
    if (start < d.n)
        jb_list_push(c, &parts, jb_with_flags(jv_str(c, s.s->s + d.off[start], d.off[d.n] - d.off[start]),
                                         s.flags & JV_SAFE));
    return jb_list_from(c, &parts);
}

jv jb_replace(jctx *c, jv s, jv old, jv new_, int64_t count) {
    jb_need_str(c, old, "replace");
    jb_need_str(c, new_, "replace");
    jbuf b = {0};
    jbuf_put(c, &b, "", 0);
    const char *p = s.s->s;
    size_t len = s.s->len, pos = 0;
    int64_t done = 0;
    if (old.s->len == 0) {
        /* Python inserts new between every code point and at both ends */
        jcps d = jb_decode(c, s.s);
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
        const char *hit = (count < 0 || done < count) ? jb_find_bytes(p, len, old.s->s, old.s->len, pos) : NULL;
        if (!hit) break;
        jbuf_put(c, &b, p + pos, (size_t)(hit - p) - pos);
        jbuf_put(c, &b, new_.s->s, new_.s->len);
        pos = (size_t)(hit - p) + old.s->len;
        done++;
    }
    jbuf_put(c, &b, p + pos, len - pos);
    return jbuf_take(c, &b);
}

bool jb_is_alpha(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

bool jb_is_alnum(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return jb_is_alpha(cp) || (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* str.islower()/isupper(): some cased character, none of the other case. */
bool jb_case_test(jctx *c, jv s, bool lower) {
    jcps d = jb_decode(c, s.s);
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

jv jb_dict_items(jctx *c, jv d) {
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
