/* jinja_eval — statements and expressions with jinja2's semantics: Python
 * operators on the value model, scopes (a for loop, a macro and a with
 * block each get one; if does not), attribute/item lookup as the sandbox
 * does it, and the render entry point with its limits. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja_builtins.h"
#include "util/error.h"

jinja_limits jinja_default_limits(void) {
    return (jinja_limits){
        .max_output = 16u << 20,
        .max_memory = 256u << 20,
        .max_loop_iters = 1000000,
        .max_steps = 50000000,
        .max_call_depth = 64,
        .max_seconds = 5.0,
    };
}

_Noreturn void jerr(jctx *c, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->line > 0)
        error_set("template line %d: %s", c->line, msg);
    else
        error_set("%s", msg);
    longjmp(c->jmp, 1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void step(jctx *c, const jnode *n) {
    c->line = n->line;
    if (++c->steps > c->lim.max_steps)
        jerr(c, "template takes more than %llu steps", (unsigned long long)c->lim.max_steps);
    if ((c->steps & 0x3FF) == 0 && now_s() - c->t_start > c->lim.max_seconds)
        jerr(c, "template takes longer than %.1f s", c->lim.max_seconds);
}

/* ------------------------------------------------------------ scopes */

static jscope *scope_new(jctx *c, jscope *parent) {
    jscope *s = jalloc(c, sizeof *s);
    memset(s, 0, sizeof *s);
    s->parent = parent;
    return s;
}

void jinja_scope_set(jctx *c, jscope *s, const char *k, jv v) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->k[i], k) == 0) {
            s->v[i] = v;
            return;
        }
    JARENA_GROW_PAIRS(c, s);
    s->k[s->n] = k;
    s->v[s->n++] = v;
}

static jv lookup(jctx *c, const char *k) {
    for (jscope *s = c->cur; s; s = s->parent)
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->k[i], k) == 0) return s->v[i];
    return jv_undef(k);
}

_Noreturn static void undefined_error(jctx *c, jv u) {
    if (u.undef && *u.undef) jerr(c, "'%s' is undefined", u.undef);
    jerr(c, "undefined value used");
}

/* ------------------------------------------------------ lookups */

static jv loop_attr(jctx *c, jloop *L, const char *name) {
    size_t n = L->items->n, i = L->i;
    if (!strcmp(name, "index")) return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return jv_int((int64_t)i);
    if (!strcmp(name, "revindex")) return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int((int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(L->depth);
    if (!strcmp(name, "depth0")) return jv_int(L->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? L->items->v[i - 1] : jv_undef("previtem");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? L->items->v[i + 1] : jv_undef("nextitem");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed"))
        return jinja_method(c, (jv){.kind = JV_LOOP, .loop = L}, name);
    return jv_undef(name);
}

jv jinja_getattr(jctx *c, jv obj, const char *name) {
    switch (obj.kind) {
    case JV_UNDEF: undefined_error(c, obj);
    case JV_DICT: {
        jv m = jinja_method(c, obj, name);
        if (m.kind != JV_UNDEF) return m;
        jv *v = jdict_get(obj.d, name, strlen(name));
        return v ? *v : jv_undef(name);
    }
    case JV_NS: {
        jv *v = jdict_get(obj.d, name, strlen(name));
        return v ? *v : jv_undef(name);
    }
    case JV_LOOP: return loop_attr(c, obj.loop, name);
    case JV_STR:
    case JV_LIST: return jinja_method(c, obj, name);
    default: return jv_undef(name);
    }
}

jv jinja_getitem(jctx *c, jv obj, jv key) {
    if (obj.kind == JV_UNDEF) undefined_error(c, obj);
    if (key.kind == JV_STR) {
        if (obj.kind == JV_DICT) {
            jv *v = jdict_get(obj.d, key.s->s, key.s->len);
            if (v) return *v;
        }
        return jinja_getattr(c, obj, key.s->s);
    }
    if ((obj.kind == JV_LIST || obj.kind == JV_STR) && (key.kind == JV_INT || key.kind == JV_BOOL)) {
        int64_t i = key.kind == JV_INT ? key.i : key.b;
        if (obj.kind == JV_LIST) {
            int64_t n = (int64_t)obj.l->n;
            if (i < 0) i += n;
            if (i < 0 || i >= n) return jv_undef("index out of range");
            return obj.l->v[i];
        }
        /* code point i of the string */
        int64_t n = (int64_t)utf8_count(obj.s->s, obj.s->len);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return jv_undef("index out of range");
        size_t pos = 0;
        int32_t cp;
        for (int64_t k = 0; k < i; k++) pos += jutf8_decode(obj.s->s + pos, obj.s->len - pos, &cp);
        size_t len = jutf8_decode(obj.s->s + pos, obj.s->len - pos, &cp);
        return jv_str(c, obj.s->s + pos, len);
    }
    return jv_undef("item");
}

/* Python slice indices for a sequence of length n. */

/* A slice's start or stop: negative counts from the end, clamped to
 * [lo, hi]; none/undefined keeps the default dflt. */
static int64_t slice_bound(jctx *c, jv x, int64_t n, int64_t lo, int64_t hi, int64_t dflt) {
    if (x.kind == JV_NONE || x.kind == JV_UNDEF) return dflt;
    if (x.kind != JV_INT) jerr(c, "slice indices must be integers");
    int64_t v = x.i < 0 ? x.i + n : x.i;
    return v < lo ? lo : v > hi ? hi : v;
}

static void slice_indices(jctx *c, jv start, jv stop, jv stepv, int64_t n, int64_t *s0, int64_t *s1,
                          int64_t *st) {
    int64_t stp = 1;
    if (stepv.kind == JV_INT) stp = stepv.i;
    else if (stepv.kind != JV_NONE && stepv.kind != JV_UNDEF) jerr(c, "slice indices must be integers");
    if (stp == 0) jerr(c, "slice step cannot be zero");
    int64_t lo, hi;
    if (stp > 0) {
        lo = 0;
        hi = n;
    } else {
        lo = -1;
        hi = n - 1;
    }
    int64_t a = stp > 0 ? lo : hi, b = stp > 0 ? hi : lo;
    a = slice_bound(c, start, n, lo, hi, a);
    b = slice_bound(c, stop, n, lo, hi, b);
    *s0 = a;
    *s1 = b;
    *st = stp;
}

static jv do_slice(jctx *c, jv obj, jv start, jv stop, jv stepv) {
    if (obj.kind == JV_UNDEF) undefined_error(c, obj);
    if (obj.kind == JV_LIST) {
        int64_t a, b, st;
        slice_indices(c, start, stop, stepv, (int64_t)obj.l->n, &a, &b, &st);
        size_t cnt = 0;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) cnt++;
        jv r = jv_list(c, cnt);
        r.flags = obj.flags & JV_TUPLE;
        size_t k = 0;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) r.l->v[k++] = obj.l->v[i];
        return r;
    }
    if (obj.kind == JV_STR) {
        /* index the code points */
        size_t n = utf8_count(obj.s->s, obj.s->len);
        size_t *off = jalloc(c, (n + 1) * sizeof *off);
        size_t pos = 0;
        int32_t cp;
        for (size_t i = 0; i < n; i++) {
            off[i] = pos;
            pos += jutf8_decode(obj.s->s + pos, obj.s->len - pos, &cp);
        }
        off[n] = obj.s->len;
        int64_t a, b, st;
        slice_indices(c, start, stop, stepv, (int64_t)n, &a, &b, &st);
        jbuf buf = {0};
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            jbuf_put(c, &buf, obj.s->s + off[i], off[i + 1] - off[i]);
        jv r = jbuf_take(c, &buf);
        r.flags = obj.flags & JV_SAFE;
        return r;
    }
    jerr(c, "'%s' object is not subscriptable", jv_type_name(obj));
}

jv jinja_iterable(jctx *c, jv v) {
    switch (v.kind) {
    case JV_LIST: return v;
    case JV_UNDEF: return jv_list(c, 0);
    case JV_DICT: {
        jv r = jv_list(c, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) r.l->v[i] = (jv){.kind = JV_STR, .s = v.d->k[i]};
        return r;
    }
    case JV_STR: {
        size_t n = utf8_count(v.s->s, v.s->len), pos = 0;
        jv r = jv_list(c, n);
        for (size_t i = 0; i < n; i++) {
            int32_t cp;
            size_t len = jutf8_decode(v.s->s + pos, v.s->len - pos, &cp);
            r.l->v[i] = jv_str(c, v.s->s + pos, len);
            pos += len;
        }
        return r;
    }
    default: jerr(c, "'%s' object is not iterable", jv_type_name(v));
    }
}

bool jinja_contains(jctx *c, jv container, jv item) {
    switch (container.kind) {
    case JV_UNDEF: return false;
    case JV_STR:
        if (item.kind != JV_STR)
            jerr(c, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (item.s->len == 0) return true;
        if (item.s->len > container.s->len) return false;
        for (size_t i = 0; i + item.s->len <= container.s->len; i++)
            if (memcmp(container.s->s + i, item.s->s, item.s->len) == 0) return true;
        return false;
    case JV_LIST:
        for (size_t i = 0; i < container.l->n; i++)
            if (jv_equal(container.l->v[i], item)) return true;
        return false;
    case JV_DICT:
        if (item.kind == JV_LIST || item.kind == JV_DICT)
            jerr(c, "unhashable type: '%s'", jv_type_name(item));
        return item.kind == JV_STR && jdict_get(container.d, item.s->s, item.s->len);
    default: jerr(c, "argument of type '%s' is not iterable", jv_type_name(container));
    }
}

/* ------------------------------------------------------- operators */

static bool is_num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double to_f(jv v) { return v.kind == JV_FLOAT ? v.f : v.kind == JV_INT ? (double)v.i : v.b; }
static int64_t to_i(jv v) { return v.kind == JV_INT ? v.i : v.kind == JV_BOOL ? v.b : 0; }

static const char *op_sym(int op) {
    static const char *const s[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    return op <= OP_POW ? s[op] : "?";
}

_Noreturn static void bad_operands(jctx *c, int op, jv a, jv b) {
    if (a.kind == JV_UNDEF) undefined_error(c, a);
    if (b.kind == JV_UNDEF) undefined_error(c, b);
    jerr(c, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_type_name(a),
         jv_type_name(b));
}

static jv repeat(jctx *c, jv seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == JV_STR) {
        if (times && seq.s->len > c->lim.max_output / (uint64_t)times)
            jerr(c, "string repetition exceeds %zu bytes", c->lim.max_output);
        jbuf b = {0};
        jbuf_put(c, &b, "", 0);
        for (int64_t i = 0; i < times; i++) jbuf_put(c, &b, seq.s->s, seq.s->len);
        jv r = jbuf_take(c, &b);
        r.flags = seq.flags & JV_SAFE;
        return r;
    }
    if (times && seq.l->n > c->lim.max_loop_iters / (uint64_t)times) jerr(c, "list repetition too large");
    jv r = jv_list(c, seq.l->n * (size_t)times);
    r.flags = seq.flags;
    for (int64_t i = 0; i < times; i++)
        if (seq.l->n) memcpy(r.l->v + (size_t)i * seq.l->n, seq.l->v, seq.l->n * sizeof(jv));
    return r;
}

/* str + str with markupsafe's rules: a Markup operand escapes the other. */
static jv str_add(jctx *c, jv a, jv b) {
    bool safe = (a.flags | b.flags) & JV_SAFE;
    if (safe) {
        if (!(a.flags & JV_SAFE)) a = jinja_escape(c, a);
        if (!(b.flags & JV_SAFE)) b = jinja_escape(c, b);
    }
    jbuf buf = {0};
    jbuf_put(c, &buf, a.s->s, a.s->len);
    jbuf_put(c, &buf, b.s->s, b.s->len);
    jv r = jbuf_take(c, &buf);
    if (safe) r.flags |= JV_SAFE;
    return r;
}

/* One switch over the binary operators and the operand types they take:
 * long (~110 lines) because Jinja's table is; each case is a few lines and
 * reads best beside the others. */
jv jinja_binop(jctx *c, int op, jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        bool fl = a.kind == JV_FLOAT || b.kind == JV_FLOAT;
        int64_t x = to_i(a), y = to_i(b), r;
        double fx = to_f(a), fy = to_f(b);
        switch (op) {
        case OP_ADD:
            if (fl) return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &r)) jerr(c, "integer overflow");
            return jv_int(r);
        case OP_SUB:
            if (fl) return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &r)) jerr(c, "integer overflow");
            return jv_int(r);
        case OP_MUL:
            if (fl) return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &r)) jerr(c, "integer overflow");
            return jv_int(r);
        case OP_DIV:
            if (fy == 0) jerr(c, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV:
            if (fl) {
                if (fy == 0) jerr(c, "float floor division by zero");
                return jv_float(floor(fx / fy));
            }
            if (y == 0) jerr(c, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) jerr(c, "integer overflow");
            r = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) r--;
            return jv_int(r);
        case OP_MOD:
            if (fl) {
                if (fy == 0) jerr(c, "float modulo");
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return jv_float(m);
            }
            if (y == 0) jerr(c, "integer division or modulo by zero");
            if (y == -1) return jv_int(0);
            r = x % y;
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return jv_int(r);
        case OP_POW:
            if (fl || y < 0) return jv_float(pow(fx, fy));
            r = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(r, x, &r)) jerr(c, "integer overflow in **");
                if (r == 0 || r == 1) break;
            }
            if (r == 1 && x == -1 && (y & 1)) r = -1;
            return jv_int(r);
        }
    }
    if (op == OP_ADD && a.kind == JV_STR && b.kind == JV_STR) return str_add(c, a, b);
    if (op == OP_ADD && a.kind == JV_LIST && b.kind == JV_LIST &&
        (a.flags & JV_TUPLE) == (b.flags & JV_TUPLE)) {
        jv r = jv_list(c, a.l->n + b.l->n);
        r.flags = a.flags & JV_TUPLE;
        if (a.l->n) memcpy(r.l->v, a.l->v, a.l->n * sizeof(jv));
        if (b.l->n) memcpy(r.l->v + a.l->n, b.l->v, b.l->n * sizeof(jv));
        return r;
    }
    if (op == OP_MUL) {
        if ((a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL))
            return repeat(c, a, to_i(b));
        if ((b.kind == JV_STR || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
            return repeat(c, b, to_i(a));
    }
    if (op == OP_MOD && a.kind == JV_STR) {
        /* printf-style formatting: %s and %d with one value or a tuple */
        jv args = b.kind == JV_LIST && (b.flags & JV_TUPLE) ? b : (jv){0};
        size_t ai = 0;
        jbuf out = {0};
        jbuf_put(c, &out, "", 0);
        for (size_t i = 0; i < a.s->len; i++) {
            char ch = a.s->s[i];
            if (ch != '%' || i + 1 >= a.s->len) {
                jbuf_putc(c, &out, ch);
                continue;
            }
            char f = a.s->s[++i];
            if (f == '%') {
                jbuf_putc(c, &out, '%');
                continue;
            }
            jv v;
            if (args.kind == JV_LIST) {
                if (ai >= args.l->n) jerr(c, "not enough arguments for format string");
                v = args.l->v[ai++];
            } else {
                if (ai++) jerr(c, "not enough arguments for format string");
                v = b;
            }
            if (f == 's')
                jv_to_str(c, &out, v);
            else if (f == 'r')
                jv_repr(c, &out, v);
            else if ((f == 'd' || f == 'i') && v.kind == JV_FLOAT && isfinite(v.f) && fabs(v.f) >= 0x1p63)
                jbuf_printf(c, &out, "%.0f", trunc(v.f)); /* the exact integer, as Python prints it */
            else if ((f == 'd' || f == 'i') && is_num(v))
                jbuf_printf(c, &out, "%lld", (long long)(v.kind == JV_FLOAT ? jv_float_to_int(c, v.f) : to_i(v)));
            else
                jerr(c, "unsupported format character '%c'", f);
        }
        return jbuf_take(c, &out);
    }
    bad_operands(c, op, a, b);
}

static bool compare(jctx *c, int op, jv a, jv b) {
    switch (op) {
    case OP_EQ: return jv_equal(a, b);
    case OP_NE: return !jv_equal(a, b);
    case OP_IN: return jinja_contains(c, b, a);
    case OP_NOTIN: return !jinja_contains(c, b, a);
    default: break;
    }
    if (a.kind == JV_UNDEF) undefined_error(c, a);
    if (b.kind == JV_UNDEF) undefined_error(c, b);
    if (!((is_num(a) && is_num(b)) || (a.kind == JV_STR && b.kind == JV_STR) ||
          (a.kind == JV_LIST && b.kind == JV_LIST)))
        jerr(c, "'%s' not supported between instances of '%s' and '%s'",
             op == OP_LT ? "<" : op == OP_LE ? "<=" : op == OP_GT ? ">" : ">=", jv_type_name(a),
             jv_type_name(b));
    if ((is_num(a) && (isnan(to_f(a)) || isnan(to_f(b))))) return false;
    int r = jv_compare(c, a, b, false);
    switch (op) {
    case OP_LT: return r < 0;
    case OP_LE: return r <= 0;
    case OP_GT: return r > 0;
    default: return r >= 0;
    }
}

/* ----------------------------------------------------------- calls */

static void exec_body(jctx *c, jnode *const *items, size_t n, int *ctl);

/* Output of a body into a string (macros, set blocks, filter blocks). */
static jv capture(jctx *c, jnode *const *items, size_t n) {
    jbuf buf = {0}, *saved = c->out;
    c->out = &buf;
    int ctl = 0;
    exec_body(c, items, n, &ctl);
    c->out = saved;
    return jbuf_take(c, &buf);
}

static jv call_macro(jctx *c, jmacro *m, const jargs *args) {
    const jnode *d = m->def;
    if (c->call_depth >= c->lim.max_call_depth)
        jerr(c, "macro calls nested deeper than %d", c->lim.max_call_depth);
    if (args->n > d->nn)
        jerr(c, "macro '%s' takes not more than %zu argument(s)", m->name, d->nn);
    jscope *s = scope_new(c, m->closure);
    for (size_t i = 0; i < args->nk; i++) {
        bool known = !strcmp(args->kname[i], "caller");
        for (size_t p = 0; p < d->nn && !known; p++)
            if (!strcmp(d->names[p], args->kname[i])) {
                if (p < args->n) jerr(c, "macro '%s' got multiple values for argument '%s'", m->name, d->names[p]);
                known = true;
            }
        if (!known) jerr(c, "macro '%s' takes no keyword argument '%s'", m->name, args->kname[i]);
        jinja_scope_set(c, s, args->kname[i], args->kval[i]);
    }
    jscope *saved = c->cur;
    int saved_line = c->line;
    c->cur = s;
    c->call_depth++;
    for (size_t p = 0; p < d->nn; p++) {
        if (p < args->n) {
            jinja_scope_set(c, s, d->names[p], args->pos[p]);
            continue;
        }
        bool given = false;
        for (size_t i = 0; i < args->nk; i++)
            if (!strcmp(args->kname[i], d->names[p])) given = true;
        if (given) continue;
        jinja_scope_set(c, s, d->names[p], d->items2[p] ? jinja_eval(c, d->items2[p]) : jv_undef(d->names[p]));
    }
    jv r = capture(c, d->items, d->n);
    c->call_depth--;
    c->cur = saved;
    c->line = saved_line;
    return r;
}

jv jinja_call(jctx *c, jv callee, const jargs *args) {
    switch (callee.kind) {
    case JV_MACRO: return call_macro(c, callee.m, args);
    case JV_FUNC:
        jb_check_min_args(c, callee.fn->name, callee.fn->min_args, args);
        return callee.fn->fn(c, callee.fn->self, callee.fn->name, args);
    case JV_UNDEF: undefined_error(c, callee);
    default: jerr(c, "'%s' object is not callable", jv_type_name(callee));
    }
}

static jargs eval_args(jctx *c, const jnode *n) {
    jargs a = {.n = n->n, .nk = n->n2, .kname = n->names};
    a.pos = n->n ? jalloc(c, n->n * sizeof(jv)) : NULL;
    a.kval = n->n2 ? jalloc(c, n->n2 * sizeof(jv)) : NULL;
    for (size_t i = 0; i < n->n; i++) a.pos[i] = jinja_eval(c, n->items[i]);
    for (size_t i = 0; i < n->n2; i++) a.kval[i] = jinja_eval(c, n->items2[i]);
    return a;
}

/* -------------------------------------------------------- expressions */

/* The expression evaluator: one case per node kind, each short; kept as
 * one switch (~100 lines) so the kinds read as a table. */
jv jinja_eval(jctx *c, const jnode *n) {
    step(c, n);
    switch (n->kind) {
    case N_CONST: return n->val;
    case N_NAME: return lookup(c, n->name);
    case N_LIST:
    case N_TUPLE: {
        jv r = jv_list(c, n->n);
        if (n->kind == N_TUPLE) r.flags = JV_TUPLE;
        for (size_t i = 0; i < n->n; i++) r.l->v[i] = jinja_eval(c, n->items[i]);
        return r;
    }
    case N_DICT: {
        jv r = jv_dict(c);
        for (size_t i = 0; i < n->n; i++) {
            jv k = jinja_eval(c, n->items[i]);
            if (k.kind != JV_STR) jerr(c, "dict keys other than strings are not supported");
            jdict_set(c, r.d, k.s->s, k.s->len, jinja_eval(c, n->items2[i]));
        }
        return r;
    }
    case N_ATTR: return jinja_getattr(c, jinja_eval(c, n->a), n->name);
    case N_ITEM: {
        jv obj = jinja_eval(c, n->a);
        return jinja_getitem(c, obj, jinja_eval(c, n->b));
    }
    case N_SLICE: {
        jv obj = jinja_eval(c, n->a);
        jv s0 = n->b ? jinja_eval(c, n->b) : jv_none();
        jv s1 = n->c ? jinja_eval(c, n->c) : jv_none();
        jv s2 = n->d ? jinja_eval(c, n->d) : jv_none();
        return do_slice(c, obj, s0, s1, s2);
    }
    case N_CALL: {
        /* obj.name(...): evaluated here as N_ATTR would, keeping obj for
         * the error when obj has no such method */
        const jnode *f = n->a;
        jv obj = {0}, callee;
        if (f->kind == N_ATTR) {
            step(c, f);
            obj = jinja_eval(c, f->a);
            callee = jinja_getattr(c, obj, f->name);
        } else {
            callee = jinja_eval(c, f);
        }
        jargs args = eval_args(c, n);
        c->line = n->line;
        if (f->kind == N_ATTR && callee.kind == JV_UNDEF) jinja_no_method(c, obj, f->name);
        return jinja_call(c, callee, &args);
    }
    case N_FILTER: {
        jv v = n->a ? jinja_eval(c, n->a) : c->block_input;
        jargs args = eval_args(c, n);
        c->line = n->line;
        return jinja_filter(c, n->name, v, &args);
    }
    case N_TEST: {
        jv v = jinja_eval(c, n->a);
        jargs args = eval_args(c, n);
        c->line = n->line;
        bool r = jinja_test(c, n->name, v, &args);
        return jv_bool(n->flag ? !r : r);
    }
    case N_BINOP: {
        jv a = jinja_eval(c, n->a);
        jv b = jinja_eval(c, n->b);
        c->line = n->line;
        return jinja_binop(c, n->op, a, b);
    }
    case N_NOT: return jv_bool(!jv_truthy(jinja_eval(c, n->a)));
    case N_NEG:
    case N_POS: {
        jv v = jinja_eval(c, n->a);
        if (v.kind == JV_UNDEF) undefined_error(c, v);
        if (v.kind == JV_FLOAT) return jv_float(n->kind == N_NEG ? -v.f : v.f);
        if (v.kind == JV_INT || v.kind == JV_BOOL) {
            int64_t i = to_i(v);
            if (n->kind == N_NEG && i == INT64_MIN) jerr(c, "integer overflow");
            return jv_int(n->kind == N_NEG ? -i : i);
        }
        jerr(c, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+", jv_type_name(v));
    }
    case N_AND: {
        jv a = jinja_eval(c, n->a);
        return jv_truthy(a) ? jinja_eval(c, n->b) : a;
    }
    case N_OR: {
        jv a = jinja_eval(c, n->a);
        return jv_truthy(a) ? a : jinja_eval(c, n->b);
    }
    case N_COMPARE: {
        jv left = jinja_eval(c, n->a);
        for (size_t i = 0; i < n->n; i++) {
            jv right = jinja_eval(c, n->items[i]->b);
            c->line = n->items[i]->line;
            if (!compare(c, n->items[i]->op, left, right)) return jv_bool(false);
            left = right;
        }
        return jv_bool(true);
    }
    case N_COND:
        if (jv_truthy(jinja_eval(c, n->b))) return jinja_eval(c, n->a);
        return n->c ? jinja_eval(c, n->c) : jv_undef("conditional expression");
    case N_CONCAT: {
        jbuf b = {0};
        jbuf_put(c, &b, "", 0);
        for (size_t i = 0; i < n->n; i++) jv_to_str(c, &b, jinja_eval(c, n->items[i]));
        return jbuf_take(c, &b);
    }
    default: jerr(c, "internal error: node %d is not an expression", n->kind);
    }
}

/* --------------------------------------------------------- statements */

static void assign(jctx *c, const jnode *target, jv v) {
    if (target->kind == N_NAME) {
        jinja_scope_set(c, c->cur, target->name, v);
        return;
    }
    if (target->kind == N_NSREF) {
        jv ns = lookup(c, target->name);
        if (ns.kind != JV_NS) jerr(c, "cannot assign attribute on non-namespace object");
        const char *attr = target->b->name;
        jdict_set(c, ns.d, attr, strlen(attr), v);
        return;
    }
    /* tuple unpacking */
    jv items = jinja_iterable(c, v);
    if (items.l->n != target->n)
        jerr(c, "%s values to unpack (expected %zu, got %zu)",
             items.l->n > target->n ? "too many" : "not enough", target->n, items.l->n);
    for (size_t i = 0; i < target->n; i++) jinja_scope_set(c, c->cur, target->items[i]->name, items.l->v[i]);
}

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

static void exec_for(jctx *c, const jnode *n) {
    jv seq = jinja_iterable(c, jinja_eval(c, n->b));
    jscope *saved = c->cur;
    c->cur = scope_new(c, saved);
    if (n->c) { /* {% for x in xs if cond %}: filter first, loop.length counts what is kept */
        jv kept = jv_list(c, seq.l->n);
        size_t k = 0;
        for (size_t i = 0; i < seq.l->n; i++) {
            if (++c->loop_iters > c->lim.max_loop_iters)
                jerr(c, "loops run more than %llu iterations", (unsigned long long)c->lim.max_loop_iters);
            assign(c, n->a, seq.l->v[i]);
            if (jv_truthy(jinja_eval(c, n->c))) kept.l->v[k++] = seq.l->v[i];
        }
        kept.l->n = k;
        seq = kept;
    }
    jloop *L = jalloc(c, sizeof *L);
    memset(L, 0, sizeof *L);
    L->items = seq.l;
    L->depth = 1;
    jv loopv = {.kind = JV_LOOP, .loop = L};
    for (size_t i = 0; i < seq.l->n; i++) {
        if (++c->loop_iters > c->lim.max_loop_iters)
            jerr(c, "loops run more than %llu iterations", (unsigned long long)c->lim.max_loop_iters);
        L->i = i;
        c->line = n->line;
        assign(c, n->a, seq.l->v[i]);
        jinja_scope_set(c, c->cur, "loop", loopv);
        int ctl = CTL_NONE;
        exec_body(c, n->items, n->n, &ctl);
        if (ctl == CTL_BREAK) break;
    }
    if (seq.l->n == 0 && n->n2) {
        int ctl = CTL_NONE;
        exec_body(c, n->items2, n->n2, &ctl);
    }
    c->cur = saved;
}

/* Run one statement node: one case per statement kind (~90 lines as a
 * table; loops and macros have their own functions). */
static void exec_node(jctx *c, const jnode *n, int *ctl) {
    step(c, n);
    switch (n->kind) {
    case N_TEXT: jbuf_put(c, c->out, n->name, (size_t)n->val.i); return;
    case N_OUTPUT: {
        jv v = jinja_eval(c, n->a);
        jv_to_str(c, c->out, v);
        return;
    }
    case N_IF:
        if (jv_truthy(jinja_eval(c, n->a)))
            exec_body(c, n->items, n->n, ctl);
        else
            exec_body(c, n->items2, n->n2, ctl);
        return;
    case N_FOR: exec_for(c, n); return;
    case N_SET: {
        jv v = jinja_eval(c, n->b);
        c->line = n->line;
        assign(c, n->a, v);
        return;
    }
    case N_SETBLOCK: {
        jv v = capture(c, n->items, n->n);
        if (n->c) {
            jv saved = c->block_input;
            c->block_input = v;
            v = jinja_eval(c, n->c);
            c->block_input = saved;
        }
        c->line = n->line;
        assign(c, n->a, v);
        return;
    }
    case N_FILTERBLOCK: {
        jv v = capture(c, n->items, n->n);
        jv saved = c->block_input;
        c->block_input = v;
        v = jinja_eval(c, n->c);
        c->block_input = saved;
        jv_to_str(c, c->out, v);
        return;
    }
    case N_MACRO: {
        jmacro *m = jalloc(c, sizeof *m);
        m->def = n;
        m->closure = c->cur;
        m->name = n->name;
        jinja_scope_set(c, c->cur, n->name, (jv){.kind = JV_MACRO, .m = m});
        return;
    }
    case N_CALLBLOCK: {
        jmacro *m = jalloc(c, sizeof *m);
        m->def = n;
        m->closure = c->cur;
        m->name = "caller";
        const jnode *call = n->a;
        jv callee = jinja_eval(c, call->a);
        jargs args = eval_args(c, call);
        jargs with = args;
        with.nk = args.nk + 1;
        with.kname = jalloc(c, with.nk * sizeof *with.kname);
        with.kval = jalloc(c, with.nk * sizeof *with.kval);
        for (size_t i = 0; i < args.nk; i++) {
            with.kname[i] = args.kname[i];
            with.kval[i] = args.kval[i];
        }
        with.kname[args.nk] = "caller";
        with.kval[args.nk] = (jv){.kind = JV_MACRO, .m = m};
        c->line = n->line;
        if (callee.kind != JV_MACRO) jerr(c, "{%% call %%} needs a macro");
        jv_to_str(c, c->out, jinja_call(c, callee, &with));
        return;
    }
    case N_WITH: {
        jscope *saved = c->cur;
        jscope *s = scope_new(c, saved);
        jv *vals = n->a->n ? jalloc(c, n->a->n * sizeof *vals) : NULL;
        for (size_t i = 0; i < n->a->n; i++) vals[i] = jinja_eval(c, n->a->items[i]);
        c->cur = s;
        for (size_t i = 0; i < n->n2; i++) assign(c, n->items2[i], vals[i]);
        exec_body(c, n->items, n->n, ctl);
        c->cur = saved;
        return;
    }
    case N_BODY: exec_body(c, n->items, n->n, ctl); return;
    case N_BREAK: *ctl = CTL_BREAK; return;
    case N_CONTINUE: *ctl = CTL_CONTINUE; return;
    default: jerr(c, "internal error: node %d is not a statement", n->kind);
    }
}

static void exec_body(jctx *c, jnode *const *items, size_t n, int *ctl) {
    for (size_t i = 0; i < n && *ctl == CTL_NONE; i++) exec_node(c, items[i], ctl);
}

/* ------------------------------------------------------------- render */

/* The render proper; returns 0, or -1 after an error (error_set done). */
static int render(jctx *c, const jinja_template *t, const char *vars_json, size_t vars_len,
                  const char *const *defaults, jbuf *out) {
    if (setjmp(c->jmp)) return -1; /* every error unwinds to here */
    jbuf_put(c, out, "", 0);
    c->out = out;
    c->globals = scope_new(c, NULL);
    jinja_add_globals(c, c->globals);
    for (size_t i = 0; defaults && defaults[i] && defaults[i + 1]; i += 2)
        jinja_scope_set(c, c->globals, defaults[i], jv_cstr(c, defaults[i + 1]));
    if (vars_json) {
        jv vars = jv_from_json(c, vars_json, vars_len);
        if (vars.kind != JV_DICT) jerr(c, "the template variables must be a JSON object");
        for (size_t i = 0; i < vars.d->n; i++)
            jinja_scope_set(c, c->globals, vars.d->k[i]->s, vars.d->v[i]);
    }
    c->root = scope_new(c, c->globals);
    c->cur = c->root;
    int ctl = 0;
    exec_body(c, t->root->items, t->root->n, &ctl);
    return 0;
}

char *jinja_render(const jinja_template *t, const char *vars_json, size_t vars_len,
                   const char *const *defaults, const jinja_limits *limits, size_t *out_len) {
    jctx *c = calloc(1, sizeof *c);
    if (!c) {
        error_set("out of memory");
        return NULL;
    }
    c->lim = limits ? *limits : jinja_default_limits();
    c->arena.limit = c->lim.max_memory;
    c->t_start = now_s();
    jbuf out = {0};
    char *result = NULL;
    if (render(c, t, vars_json, vars_len, defaults, &out) == 0) {
        result = malloc(out.len + 1);
        if (result) {
            if (out.len) memcpy(result, out.p, out.len);
            result[out.len] = '\0';
            if (out_len) *out_len = out.len;
        } else {
            error_set("out of memory");
        }
    }
    jarena_free(&c->arena);
    free(c);
    return result;
}
