/* jinja_globals — the global functions: range, dict and namespace as jinja2
 * has them, and transformers' raise_exception and strftime_now; a row each
 * ({name, fn, min_args}, jinja_builtins.h). */
#include <math.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_builtins.h"

#define SANDBOX_MAX_RANGE 100000 /* jinja2.sandbox.MAX_RANGE */

static jv g_range(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)name;
    if (a->nk) jerr(c, "range() takes no keyword arguments");
    if (a->n < 1 || a->n > 3) jerr(c, "range expected 1 to 3 arguments, got %zu", a->n);
    int64_t start = 0, stop, stp = 1;
    if (a->n == 1) {
        stop = jb_need_int(c, a->pos[0], "range");
    } else {
        start = jb_need_int(c, a->pos[0], "range");
        stop = jb_need_int(c, a->pos[1], "range");
        if (a->n == 3) stp = jb_need_int(c, a->pos[2], "range");
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
    jv msg = jb_arg(a, 0, "message", NULL);
    jbuf b = {0};
    jv_to_str(c, &b, msg);
    jerr(c, "%s", b.p ? b.p : "");
}

static jv g_strftime_now(jctx *c, jv self, const char *name, const jargs *a) {
    (void)self;
    (void)name;
    jv fmt = jb_need_str(c, jb_arg(a, 0, "format", NULL), "strftime_now");
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char out[512];
    size_t n = fmt.s->len ? strftime(out, sizeof out, fmt.s->s, &tm) : 0;
    if (fmt.s->len && n == 0) jerr(c, "strftime_now: format too long or empty result");
    return jv_str(c, out, n);
}

static const jbuiltin globals[] = {
    {"range", g_range, 1},
    {"dict", g_dict, 0},
    {"namespace", g_namespace, 0},
    {"raise_exception", g_raise, 1},
    {"strftime_now", g_strftime_now, 1},
};

void jinja_add_globals(jctx *c, jscope *g) {
    for (size_t i = 0; i < sizeof globals / sizeof *globals; i++) {
        jfunc *f = jalloc(c, sizeof *f);
        f->fn = globals[i].fn;
        f->self = jv_none();
        f->name = globals[i].name;
        f->min_args = globals[i].min_args;
        jinja_scope_set(c, g, f->name, (jv){.kind = JV_FUNC, .fn = f});
    }
}
