/* jinja_parse — tokens to a syntax tree, following jinja2's parser:
 * precedence (lowest first) conditional `a if b else c`, or, and, not,
 * comparisons (chained, in, not in), + -, ~, * / // %, **, unary - +, then
 * postfix (.attr, [item], [a:b:c], call), filters (|f) and tests (is t),
 * which bind tighter than any operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "util/error.h"

#define MAX_NESTING 128 /* expressions and blocks inside each other */

typedef struct parser {
    jarena *a;
    jparse_err err;
    jtok *t;
    size_t n, pos;
    int depth;
    int loop_depth; /* for break/continue */
} parser;

_Noreturn static void fail_at(parser *P, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
_Noreturn static void fail_at(parser *P, int line, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    error_set("template line %d: %s", line, msg);
    longjmp(P->err.jmp, 1);
}

static jtok *cur(parser *P) { return &P->t[P->pos]; }
static jtok *peek(parser *P, size_t k) {
    size_t i = P->pos + k < P->n ? P->pos + k : P->n - 1;
    return &P->t[i];
}
static jtok *next(parser *P) {
    jtok *t = cur(P);
    if (P->pos + 1 < P->n) P->pos++;
    return t;
}

static bool is_op(const jtok *t, const char *op) {
    return t->kind == T_OP && t->len == strlen(op) && memcmp(t->s, op, t->len) == 0;
}
static bool is_name(const jtok *t, const char *name) {
    return t->kind == T_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}

static const char *describe(parser *P, const jtok *t) {
    static const char *const kinds[] = {"end of template", "text", "'{{'", "'}}'", "'{%'",
                                        "'%}'", "name", "string", "integer", "float", "operator"};
    if (t->kind == T_NAME || t->kind == T_OP) {
        char *s = jarena_alloc(P->a, t->len + 3);
        if (!s) return "token";
        snprintf(s, t->len + 3, "'%.*s'", (int)t->len, t->s);
        return s;
    }
    return kinds[t->kind];
}

static void *palloc(parser *P, size_t size) {
    void *p = jarena_alloc(P->a, size);
    if (!p) fail_at(P, cur(P)->line, "template too large");
    memset(p, 0, size);
    return p;
}

static const char *pstr(parser *P, const char *s, size_t len) {
    char *d = palloc(P, len + 1);
    memcpy(d, s, len);
    return d;
}

static void expect_op(parser *P, const char *op) {
    if (!is_op(cur(P), op))
        fail_at(P, cur(P)->line, "expected '%s', got %s", op, describe(P, cur(P)));
    next(P);
}

static const char *expect_name(parser *P) {
    jtok *t = cur(P);
    if (t->kind != T_NAME) fail_at(P, t->line, "expected a name, got %s", describe(P, t));
    next(P);
    return pstr(P, t->s, t->len);
}

static void expect_block_end(parser *P) {
    if (cur(P)->kind != T_BLOCK_END)
        fail_at(P, cur(P)->line, "expected end of statement block, got %s", describe(P, cur(P)));
    next(P);
}

static jnode *node(parser *P, int kind, int line) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = line;
    return n;
}

/* A growable array of node pointers in the arena. */
typedef struct nvec {
    jnode **v;
    size_t n, cap;
} nvec;

static void nvec_push(parser *P, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        jnode **p = palloc(P, cap * sizeof *p);
        if (v->n) memcpy(p, v->v, v->n * sizeof *p);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

typedef struct svec {
    const char **v;
    size_t n, cap;
} svec;

static void svec_push(parser *P, svec *v, const char *s) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        const char **p = palloc(P, cap * sizeof *p);
        if (v->n) memcpy(p, v->v, v->n * sizeof *p);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = s;
}

static void enter(parser *P) {
    if (++P->depth > MAX_NESTING) fail_at(P, cur(P)->line, "nested too deeply (limit %d)", MAX_NESTING);
}
static void leave(parser *P) { P->depth--; }

/* ------------------------------------------------------- expressions */

static jnode *parse_expression(parser *P, bool with_condexpr);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *n);
static jnode *parse_filter_expr(parser *P, jnode *n);

/* In a bracketed list before its next item: false, past close, when the
 * list ends there (after a trailing comma too); else true, past the comma
 * that separates the item from the one before (none before the first). */
static bool list_item_next(parser *P, const char *close, bool first) {
    if (!first && !is_op(cur(P), close)) expect_op(P, ",");
    if (is_op(cur(P), close)) {
        next(P);
        return false;
    }
    return true;
}

/* A node of kind whose items are those of vec. */
static jnode *items_node(parser *P, int kind, int line, const nvec *vec) {
    jnode *n = node(P, kind, line);
    n->items = vec->v;
    n->n = vec->n;
    return n;
}

/* Arguments of a call: positional, name=value; into n->items / names+items2. */
static void parse_call_args(parser *P, jnode *n) {
    expect_op(P, "(");
    nvec pos = {0}, kv = {0};
    svec kn = {0};
    while (list_item_next(P, ")", pos.n + kv.n == 0)) {
        if (is_op(cur(P), "*") || is_op(cur(P), "**"))
            fail_at(P, cur(P)->line, "*args and **kwargs in calls are not supported");
        if (cur(P)->kind == T_NAME && is_op(peek(P, 1), "=")) {
            svec_push(P, &kn, expect_name(P));
            next(P);
            nvec_push(P, &kv, parse_expression(P, true));
        } else {
            if (kv.n) fail_at(P, cur(P)->line, "positional argument follows keyword argument");
            nvec_push(P, &pos, parse_expression(P, true));
        }
    }
    n->items = pos.v;
    n->n = pos.n;
    n->names = kn.v;
    n->nn = kn.n;
    n->items2 = kv.v;
    n->n2 = kv.n;
}

static bool is_tuple_end(parser *P, const char *extra_end) {
    jtok *t = cur(P);
    if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || t->kind == T_EOF || is_op(t, ")"))
        return true;
    return extra_end && is_name(t, extra_end);
}

/* a, b, c as a tuple; one expression without a comma as itself. */
static jnode *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens) {
    int line = cur(P)->line;
    nvec items = {0};
    bool comma = false;
    for (;;) {
        if (items.n) expect_op(P, ",");
        if (is_tuple_end(P, extra_end)) break;
        jnode *e = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
        nvec_push(P, &items, e);
        if (is_op(cur(P), ","))
            comma = true;
        else
            break;
    }
    if (!comma) {
        if (items.n) return items.v[0];
        if (!explicit_parens)
            fail_at(P, line, "expected an expression, got %s", describe(P, cur(P)));
    }
    jnode *n = items_node(P, N_TUPLE, line, &items);
    return n;
}

static jnode *parse_primary(parser *P) {
    jtok *t = cur(P);
    jnode *n;
    enter(P);
    if (t->kind == T_NAME) {
        next(P);
        n = node(P, N_CONST, t->line);
        if (is_name(t, "true") || is_name(t, "True"))
            n->val = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False"))
            n->val = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None"))
            n->val = jv_none();
        else {
            n->kind = N_NAME;
            n->name = pstr(P, t->s, t->len);
        }
    } else if (t->kind == T_STRING) {
        /* adjacent literals concatenate */
        size_t total = 0, i = P->pos;
        while (i < P->n && P->t[i].kind == T_STRING) total += P->t[i++].len;
        char *s = palloc(P, total + 1 + sizeof(jstr));
        jstr *js = (jstr *)s;
        js->len = 0;
        while (cur(P)->kind == T_STRING) {
            jtok *st = next(P);
            memcpy(js->s + js->len, st->s, st->len);
            js->len += st->len;
        }
        js->s[js->len] = 0;
        n = node(P, N_CONST, t->line);
        n->val = (jv){.kind = JV_STR, .s = js};
    } else if (t->kind == T_INT) {
        next(P);
        n = node(P, N_CONST, t->line);
        n->val = jv_int(t->i);
    } else if (t->kind == T_FLOAT) {
        next(P);
        n = node(P, N_CONST, t->line);
        n->val = jv_float(t->f);
    } else if (is_op(t, "(")) {
        next(P);
        n = parse_tuple(P, false, true, NULL, true);
        expect_op(P, ")");
    } else if (is_op(t, "[")) {
        next(P);
        n = node(P, N_LIST, t->line);
        nvec items = {0};
        while (list_item_next(P, "]", items.n == 0)) nvec_push(P, &items, parse_expression(P, true));
        n->items = items.v;
        n->n = items.n;
    } else if (is_op(t, "{")) {
        next(P);
        n = node(P, N_DICT, t->line);
        nvec keys = {0}, vals = {0};
        while (list_item_next(P, "}", keys.n == 0)) {
            nvec_push(P, &keys, parse_expression(P, true));
            expect_op(P, ":");
            nvec_push(P, &vals, parse_expression(P, true));
        }
        n->items = keys.v;
        n->n = keys.n;
        n->items2 = vals.v;
        n->n2 = vals.n;
    } else {
        fail_at(P, t->line, "unexpected %s", describe(P, t));
    }
    leave(P);
    return n;
}

static jnode *parse_subscript(parser *P) {
    int line = cur(P)->line;
    jnode *args[3] = {NULL, NULL, NULL};
    if (!is_op(cur(P), ":")) {
        jnode *e = parse_expression(P, true);
        if (!is_op(cur(P), ":")) return e;
        args[0] = e;
    }
    next(P); /* ':' */
    if (!is_op(cur(P), "]") && !is_op(cur(P), ",") && !is_op(cur(P), ":"))
        args[1] = parse_expression(P, true);
    if (is_op(cur(P), ":")) {
        next(P);
        if (!is_op(cur(P), "]") && !is_op(cur(P), ","))
            args[2] = parse_expression(P, true);
    }
    jnode *n = node(P, N_SLICE, line);
    n->b = args[0];
    n->c = args[1];
    n->d = args[2];
    return n;
}

static jnode *parse_postfix(parser *P, jnode *n) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, ".")) {
            next(P);
            jtok *a = next(P);
            jnode *x;
            if (a->kind == T_NAME) {
                x = node(P, N_ATTR, t->line);
                x->name = pstr(P, a->s, a->len);
            } else if (a->kind == T_INT) {
                x = node(P, N_ITEM, t->line);
                x->b = node(P, N_CONST, t->line);
                x->b->val = jv_int(a->i);
            } else {
                fail_at(P, a->line, "expected an attribute name after '.'");
            }
            x->a = n;
            n = x;
        } else if (is_op(t, "[")) {
            next(P);
            nvec subs = {0};
            while (!is_op(cur(P), "]")) {
                if (subs.n) expect_op(P, ",");
                if (is_op(cur(P), "]")) break;
                nvec_push(P, &subs, parse_subscript(P));
            }
            next(P);
            if (subs.n != 1) fail_at(P, t->line, "tuple subscripts are not supported");
            jnode *sub = subs.v[0];
            if (sub->kind == N_SLICE) {
                sub->a = n;
                n = sub;
            } else {
                jnode *x = node(P, N_ITEM, t->line);
                x->a = n;
                x->b = sub;
                n = x;
            }
        } else if (is_op(t, "(")) {
            jnode *x = node(P, N_CALL, t->line);
            parse_call_args(P, x);
            x->a = n;
            n = x;
        } else {
            return n;
        }
    }
}

/* `| name(args)` chains; n may be NULL for filter blocks. */
static jnode *parse_filter(parser *P, jnode *n, bool start_inline) {
    while (is_op(cur(P), "|") || start_inline) {
        int line = cur(P)->line;
        if (!start_inline) next(P);
        start_inline = false;
        const char *name = expect_name(P);
        while (is_op(cur(P), ".")) {
            next(P);
            const char *more = expect_name(P);
            size_t l = strlen(name) + strlen(more) + 2;
            char *full = palloc(P, l);
            snprintf(full, l, "%s.%s", name, more);
            name = full;
        }
        if (!jinja_has_filter(name))
            fail_at(P, line, "no filter named '%s'%s%s%s", name, JINJA_DID_YOU_MEAN(jinja_filter_closest(name)));
        jnode *f = node(P, N_FILTER, line);
        f->name = name;
        f->a = n;
        if (is_op(cur(P), "(")) parse_call_args(P, f);
        n = f;
    }
    return n;
}

static jnode *parse_test(parser *P, jnode *n) {
    int line = next(P)->line; /* 'is' */
    bool negated = false;
    if (is_name(cur(P), "not")) {
        next(P);
        negated = true;
    }
    const char *name = expect_name(P);
    if (!jinja_has_test(name))
        fail_at(P, line, "no test named '%s'%s%s%s", name, JINJA_DID_YOU_MEAN(jinja_test_closest(name)));
    jnode *t = node(P, N_TEST, line);
    t->name = name;
    t->a = n;
    t->flag = negated;
    jtok *c = cur(P);
    if (is_op(c, "(")) {
        parse_call_args(P, t);
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT ||
                is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) fail_at(P, c->line, "you cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        t->items = palloc(P, sizeof(jnode *));
        t->items[0] = arg;
        t->n = 1;
    }
    return t;
}

static jnode *parse_filter_expr(parser *P, jnode *n) {
    for (;;) {
        if (is_op(cur(P), "|"))
            n = parse_filter(P, n, false);
        else if (is_name(cur(P), "is"))
            n = parse_test(P, n);
        else if (is_op(cur(P), "(")) {
            jnode *x = node(P, N_CALL, cur(P)->line);
            parse_call_args(P, x);
            x->a = n;
            n = x;
        } else
            return n;
    }
}

static jnode *parse_unary(parser *P, bool with_filter) {
    jtok *t = cur(P);
    jnode *n;
    enter(P);
    if (is_op(t, "-") || is_op(t, "+")) {
        next(P);
        n = node(P, is_op(t, "-") ? N_NEG : N_POS, t->line);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static jnode *binop(parser *P, int op, jnode *a, jnode *b, int line) {
    jnode *n = node(P, N_BINOP, line);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, true);
    while (is_op(cur(P), "**")) {
        int line = next(P)->line;
        n = binop(P, OP_POW, n, parse_unary(P, true), line);
    }
    return n;
}

static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV
                 : is_op(t, "%") ? OP_MOD : 0;
        if (!op) return n;
        next(P);
        n = binop(P, op, n, parse_pow(P), t->line);
    }
}

static jnode *parse_concat(parser *P) {
    jnode *first = parse_math2(P);
    if (!is_op(cur(P), "~")) return first;
    nvec args = {0};
    nvec_push(P, &args, first);
    int line = cur(P)->line;
    while (is_op(cur(P), "~")) {
        next(P);
        nvec_push(P, &args, parse_math2(P));
    }
    jnode *n = items_node(P, N_CONCAT, line, &args);
    return n;
}

static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : 0;
        if (!op) return n;
        next(P);
        n = binop(P, op, n, parse_concat(P), t->line);
    }
}

static jnode *parse_compare(parser *P) {
    int line = cur(P)->line;
    jnode *first = parse_math1(P);
    nvec ops = {0};
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT
                 : is_op(t, "<=") ? OP_LE : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE : 0;
        if (op) {
            next(P);
        } else if (is_name(t, "in")) {
            next(P);
            op = OP_IN;
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            next(P);
            next(P);
            op = OP_NOTIN;
        } else {
            break;
        }
        jnode *operand = parse_math1(P);
        jnode *o = node(P, N_BINOP, t->line);
        o->op = (uint8_t)op;
        o->b = operand;
        nvec_push(P, &ops, o);
    }
    if (!ops.n) return first;
    jnode *n = node(P, N_COMPARE, line);
    n->a = first;
    n->items = ops.v;
    n->n = ops.n;
    return n;
}

static jnode *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        int line = next(P)->line;
        enter(P);
        jnode *n = node(P, N_NOT, line);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}

/* operand (word operand)*, left to right: `and` over `not`, `or` over `and`. */
static jnode *parse_logic(parser *P, const char *word, int kind, jnode *(*operand)(parser *)) {
    jnode *n = operand(P);
    while (is_name(cur(P), word)) {
        int line = next(P)->line;
        jnode *x = node(P, kind, line);
        x->a = n;
        x->b = operand(P);
        n = x;
    }
    return n;
}

static jnode *parse_and(parser *P) { return parse_logic(P, "and", N_AND, parse_not); }
static jnode *parse_or(parser *P) { return parse_logic(P, "or", N_OR, parse_and); }

static jnode *parse_expression(parser *P, bool with_condexpr) {
    enter(P);
    jnode *n = parse_or(P);
    if (with_condexpr) {
        while (is_name(cur(P), "if")) {
            int line = next(P)->line;
            jnode *x = node(P, N_COND, line);
            x->a = n;
            x->b = parse_or(P);
            if (is_name(cur(P), "else")) {
                next(P);
                x->c = parse_expression(P, true);
            }
            n = x;
        }
    }
    leave(P);
    return n;
}

/* -------------------------------------------------------- statements */

static jnode *parse_body(parser *P, const char *const *ends, const char **which);

/* The statements up to one of ends (which: the tag that ended them) as n's
 * body. */
static void body_into(parser *P, jnode *n, const char *const *ends, const char **which) {
    jnode *body = parse_body(P, ends, which);
    n->items = body->items;
    n->n = body->n;
}

/* Past the end of a tag: the statements up to end_tag as n's body. */
static void tag_body(parser *P, jnode *n, const char *end_tag) {
    expect_block_end(P);
    const char *const ends[] = {end_tag, NULL};
    const char *which;
    body_into(P, n, ends, &which);
}

/* When the body ended at {% else %} (which): the statements after it up
 * to end_tag as n's second body. */
static void else_into(parser *P, jnode *n, const char *which, const char *end_tag) {
    if (strcmp(which, "else") != 0) return;
    expect_block_end(P);
    const char *const ends[] = {end_tag, NULL};
    const char *ended;
    jnode *eb = parse_body(P, ends, &ended);
    n->items2 = eb->items;
    n->n2 = eb->n;
}

static bool name_in(const jtok *t, const char *const *names) {
    for (; *names; names++)
        if (is_name(t, *names)) return true;
    return false;
}

static jnode *parse_assign_target(parser *P, bool with_namespace, const char *extra_end) {
    jtok *t = cur(P);
    if (with_namespace && t->kind == T_NAME && is_op(peek(P, 1), ".")) {
        jnode *n = node(P, N_NSREF, t->line);
        n->name = expect_name(P);
        next(P);
        n->b = node(P, N_CONST, t->line);
        const char *attr = expect_name(P);
        n->b->name = attr;
        return n;
    }
    jnode *n = parse_tuple(P, true, true, extra_end, false);
    if (n->kind == N_NAME) return n;
    if (n->kind == N_TUPLE) {
        for (size_t i = 0; i < n->n; i++)
            if (n->items[i]->kind != N_NAME) fail_at(P, t->line, "can't assign to this target");
        return n;
    }
    fail_at(P, t->line, "can't assign to %s", n->kind == N_CONST ? "a literal" : "this expression");
}

static jnode *parse_for(parser *P, int line) {
    jnode *n = node(P, N_FOR, line);
    n->a = parse_assign_target(P, false, "in");
    if (!is_name(cur(P), "in")) fail_at(P, cur(P)->line, "expected 'in' in for loop");
    next(P);
    n->b = parse_tuple(P, false, false, "recursive", false);
    if (is_name(cur(P), "if")) {
        next(P);
        n->c = parse_expression(P, true);
    }
    if (is_name(cur(P), "recursive")) fail_at(P, cur(P)->line, "recursive loops are not supported");
    expect_block_end(P);
    static const char *const ends[] = {"endfor", "else", NULL};
    const char *which;
    P->loop_depth++;
    body_into(P, n, ends, &which);
    P->loop_depth--;
    else_into(P, n, which, "endfor");
    expect_block_end(P);
    return n;
}

static jnode *parse_if(parser *P, int line) {
    jnode *n = node(P, N_IF, line);
    n->a = parse_tuple(P, false, false, NULL, false);
    expect_block_end(P);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    const char *which;
    body_into(P, n, ends, &which);
    if (strcmp(which, "elif") == 0) {
        enter(P);
        jnode *e = parse_if(P, P->t[P->pos - 1].line);
        leave(P);
        n->items2 = palloc(P, sizeof(jnode *));
        n->items2[0] = e;
        n->n2 = 1;
        return n; /* the nested if consumed endif */
    }
    else_into(P, n, which, "endif");
    expect_block_end(P);
    return n;
}

static jnode *parse_set(parser *P, int line) {
    jnode *target = parse_assign_target(P, true, NULL);
    if (is_op(cur(P), "=")) {
        next(P);
        jnode *n = node(P, N_SET, line);
        n->a = target;
        n->b = parse_tuple(P, false, true, NULL, false);
        expect_block_end(P);
        return n;
    }
    jnode *n = node(P, N_SETBLOCK, line);
    n->a = target;
    n->c = parse_filter(P, NULL, false);
    tag_body(P, n, "endset");
    expect_block_end(P);
    return n;
}

/* (a, b=default, ...) of a macro or a call block into names/items2. */
static void parse_signature(parser *P, jnode *n) {
    expect_op(P, "(");
    svec names = {0};
    nvec defs = {0};
    while (!is_op(cur(P), ")")) {
        if (names.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        const char *name = expect_name(P);
        jnode *def = NULL;
        if (is_op(cur(P), "=")) {
            next(P);
            def = parse_expression(P, true);
        } else if (defs.n && defs.v[defs.n - 1]) {
            fail_at(P, cur(P)->line, "non-default argument follows default argument");
        }
        svec_push(P, &names, name);
        nvec_push(P, &defs, def);
    }
    next(P);
    n->names = names.v;
    n->nn = names.n;
    n->items2 = defs.v;
    n->n2 = defs.n;
}

/* A macro's or call block's body, up to end_tag: a loop around the
 * definition is not the body's (loop_depth starts again at 0). */
static void callable_body(parser *P, jnode *n, const char *end_tag) {
    int saved = P->loop_depth;
    P->loop_depth = 0;
    tag_body(P, n, end_tag);
    P->loop_depth = saved;
}

static jnode *parse_macro(parser *P, int line) {
    jnode *n = node(P, N_MACRO, line);
    n->name = expect_name(P);
    parse_signature(P, n);
    callable_body(P, n, "endmacro");
    if (cur(P)->kind == T_NAME) next(P); /* {% endmacro name %} */
    expect_block_end(P);
    return n;
}

static jnode *parse_call_block(parser *P, int line) {
    jnode *n = node(P, N_CALLBLOCK, line);
    if (is_op(cur(P), "("))
        parse_signature(P, n);
    n->a = parse_expression(P, true);
    if (n->a->kind != N_CALL) fail_at(P, line, "expected a call after {%% call %%}");
    callable_body(P, n, "endcall");
    expect_block_end(P);
    return n;
}

static jnode *parse_statement(parser *P) {
    jtok *begin = next(P); /* {% */
    jtok *t = cur(P);
    int line = begin->line;
    if (t->kind != T_NAME) fail_at(P, t->line, "tag name expected, got %s", describe(P, t));
    next(P);
    enter(P);
    jnode *n;
    if (is_name(t, "for")) {
        n = parse_for(P, line);
    } else if (is_name(t, "if")) {
        n = parse_if(P, line);
    } else if (is_name(t, "set")) {
        n = parse_set(P, line);
    } else if (is_name(t, "macro")) {
        n = parse_macro(P, line);
    } else if (is_name(t, "call")) {
        n = parse_call_block(P, line);
    } else if (is_name(t, "filter")) {
        n = node(P, N_FILTERBLOCK, line);
        n->c = parse_filter(P, NULL, true);
        tag_body(P, n, "endfilter");
        expect_block_end(P);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (P->loop_depth == 0)
            fail_at(P, line, "'%.*s' outside of a loop", (int)t->len, t->s);
        n = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, line);
        expect_block_end(P);
    } else if (is_name(t, "with")) {
        n = node(P, N_WITH, line);
        nvec targets = {0}, values = {0};
        while (cur(P)->kind != T_BLOCK_END) {
            if (targets.n) expect_op(P, ",");
            jnode *tg = parse_assign_target(P, false, NULL);
            expect_op(P, "=");
            nvec_push(P, &targets, tg);
            nvec_push(P, &values, parse_expression(P, true));
        }
        expect_block_end(P);
        n->items2 = targets.v;
        n->n2 = targets.n;
        n->a = node(P, N_BODY, line);
        n->a->items = values.v;
        n->a->n = values.n;
        static const char *const ends[] = {"endwith", NULL};
        const char *which;
        body_into(P, n, ends, &which);
        expect_block_end(P);
    } else if (is_name(t, "generation")) {
        /* transformers' AssistantTracker: marks assistant text, renders as is */
        expect_block_end(P);
        static const char *const ends[] = {"endgeneration", NULL};
        const char *which;
        n = parse_body(P, ends, &which);
        expect_block_end(P);
    } else {
        fail_at(P, line, "encountered unknown tag '%.*s'", (int)t->len, t->s);
    }
    leave(P);
    return n;
}

/* Statements until {% one-of-ends %}; leaves the position after the end
 * tag's name (its arguments and %} are the caller's). */
static jnode *parse_body(parser *P, const char *const *ends, const char **which) {
    int line = cur(P)->line;
    nvec items = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->kind == T_EOF) {
            if (ends)
                fail_at(P, t->line, "unexpected end of template: expected '%s' (block opened on line %d)",
                        ends[0], line);
            break;
        }
        if (t->kind == T_TEXT) {
            next(P);
            jnode *x = node(P, N_TEXT, t->line);
            x->name = t->s;
            x->val.i = (int64_t)t->len;
            nvec_push(P, &items, x);
        } else if (t->kind == T_VAR_BEGIN) {
            next(P);
            jnode *x = node(P, N_OUTPUT, t->line);
            x->a = parse_tuple(P, false, true, NULL, false);
            if (cur(P)->kind != T_VAR_END)
                fail_at(P, cur(P)->line, "expected '}}', got %s", describe(P, cur(P)));
            next(P);
            nvec_push(P, &items, x);
        } else if (t->kind == T_BLOCK_BEGIN) {
            jtok *name = peek(P, 1);
            if (ends && name_in(name, ends)) {
                next(P);
                next(P);
                *which = pstr(P, name->s, name->len);
                break;
            }
            static const char *const stray[] = {"endfor", "endif", "else", "elif", "endset",
                                                "endmacro", "endcall", "endfilter", "endwith",
                                                "endgeneration", NULL};
            if (name_in(name, stray))
                fail_at(P, name->line, "unexpected '%.*s'%s%s", (int)name->len, name->s,
                        ends ? ", expected " : "", ends ? ends[0] : "");
            nvec_push(P, &items, parse_statement(P));
        } else {
            fail_at(P, t->line, "unexpected %s", describe(P, t));
        }
    }
    jnode *b = node(P, N_BODY, line);
    b->items = items.v;
    b->n = items.n;
    return b;
}

/* Lex and parse into t; -1 after an error (error_set done). */
static int parse_into(jinja_template *t, const char *src, size_t len) {
    parser P = {.a = &t->arena};
    if (setjmp(P.err.jmp)) return -1;
    P.n = jinja_lex(&t->arena, src, len, &P.t, &P.err);
    t->root = parse_body(&P, NULL, NULL);
    return 0;
}

jinja_template *jinja_parse(const char *src, size_t len) {
    jinja_template *t = calloc(1, sizeof *t);
    if (!t) {
        error_set("out of memory");
        return NULL;
    }
    t->arena.limit = jinja_default_limits().max_memory;
    if (parse_into(t, src, len) < 0) {
        jinja_template_free(t);
        return NULL;
    }
    return t;
}

void jinja_template_free(jinja_template *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t);
}
