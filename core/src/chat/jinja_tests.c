/* jinja_tests — jinja2's tests (`x is defined`), a row each ({name, fn,
 * min_args}, jinja_builtins.h) returning a bool value; the comparison tests
 * have their operator symbols (==, <, ...) as names too, as in jinja2. */
#include <string.h>

#include "chat/jinja_builtins.h"

static jv arg0(const jargs *a) { return jb_arg(a, 0, NULL, NULL); }

/* eq, equalto, ==, ne, != */
static jv t_equal(jctx *c, jv v, const char *name, const jargs *a) {
    (void)c;
    bool eq = jv_equal(v, arg0(a));
    return jv_bool(name[0] == 'n' || name[0] == '!' ? !eq : eq);
}

/* lt, lessthan, <, le, <=, gt, greaterthan, >, ge, >= */
static jv t_order(jctx *c, jv v, const char *name, const jargs *a) {
    jv a0 = arg0(a);
    if (v.kind == JV_UNDEF || a0.kind == JV_UNDEF) jerr(c, "undefined value in comparison");
    int r = jv_compare(c, v, a0, false);
    bool less = name[0] == 'l' || name[0] == '<';
    bool or_equal = !strcmp(name, "le") || !strcmp(name, "ge") || name[1] == '=';
    return jv_bool(less ? (or_equal ? r <= 0 : r < 0) : (or_equal ? r >= 0 : r > 0));
}

/* The tests that look at the value's kind alone. */
#define KIND_TEST(fn, expr)                                              \
    static jv fn(jctx *c, jv v, const char *name, const jargs *a) {      \
        (void)c;                                                         \
        (void)name;                                                      \
        (void)a;                                                         \
        return jv_bool(expr);                                            \
    }
KIND_TEST(t_defined, v.kind != JV_UNDEF)
KIND_TEST(t_undefined, v.kind == JV_UNDEF)
KIND_TEST(t_none, v.kind == JV_NONE)
KIND_TEST(t_boolean, v.kind == JV_BOOL)
KIND_TEST(t_true, v.kind == JV_BOOL && v.b)
KIND_TEST(t_false, v.kind == JV_BOOL && !v.b)
KIND_TEST(t_integer, v.kind == JV_INT)
KIND_TEST(t_float, v.kind == JV_FLOAT)
KIND_TEST(t_number, v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL)
KIND_TEST(t_string, v.kind == JV_STR)
KIND_TEST(t_mapping, v.kind == JV_DICT)
KIND_TEST(t_iterable, v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF ||
                          v.kind == JV_LOOP)
KIND_TEST(t_sequence, v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_UNDEF)
KIND_TEST(t_callable, v.kind == JV_MACRO || v.kind == JV_FUNC || v.kind == JV_UNDEF)
KIND_TEST(t_escaped, v.kind == JV_STR && (v.flags & JV_SAFE))
KIND_TEST(t_filter, v.kind == JV_STR && jinja_has_filter(v.s->s))
KIND_TEST(t_test, v.kind == JV_STR && jinja_has_test(v.s->s))
#undef KIND_TEST

/* Python's `is`: the same object (here: the same allocation). */
static bool same_object(jv v, jv a0) {
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

static jv t_sameas(jctx *c, jv v, const char *name, const jargs *a) {
    (void)c;
    (void)name;
    return jv_bool(same_object(v, arg0(a)));
}

static jv t_in(jctx *c, jv v, const char *name, const jargs *a) {
    (void)name;
    return jv_bool(jinja_contains(c, arg0(a), v));
}

/* lower, upper: on str() of the value, as jinja2 does */
static jv t_case(jctx *c, jv v, const char *name, const jargs *a) {
    (void)a;
    return jv_bool(jb_case_test(c, jb_soft_str(c, v), name[0] == 'l'));
}

/* odd, even, divisibleby: v % d as jinja2 computes it (floats, bools and
 * errors included) */
static jv t_divisible(jctx *c, jv v, const char *name, const jargs *a) {
    jv d = name[0] == 'd' ? arg0(a) : jv_int(2);
    bool zero = !jv_truthy(jinja_binop(c, OP_MOD, v, d));
    return jv_bool(name[0] == 'o' ? !zero : zero);
}

/* A test a line, with its aliases. min_args 0 where Python needs an
 * argument: see jinja_builtins.h. */
static const jbuiltin tests[] = {
    {"defined", t_defined, 0}, {"undefined", t_undefined, 0},
    {"none", t_none, 0}, {"boolean", t_boolean, 0}, {"true", t_true, 0}, {"false", t_false, 0},
    {"integer", t_integer, 0}, {"float", t_float, 0}, {"number", t_number, 0},
    {"string", t_string, 0}, {"mapping", t_mapping, 0},
    {"iterable", t_iterable, 0}, {"sequence", t_sequence, 0},
    {"callable", t_callable, 0}, {"escaped", t_escaped, 0},
    {"filter", t_filter, 0}, {"test", t_test, 0},
    {"eq", t_equal, 0 /* Python: 1 */}, {"equalto", t_equal, 0 /* Python: 1 */}, {"==", t_equal, 0 /* Python: 1 */},
    {"ne", t_equal, 0 /* Python: 1 */}, {"!=", t_equal, 0 /* Python: 1 */},
    {"lt", t_order, 1}, {"lessthan", t_order, 1}, {"<", t_order, 1},
    {"le", t_order, 1}, {"<=", t_order, 1},
    {"gt", t_order, 1}, {"greaterthan", t_order, 1}, {">", t_order, 1},
    {"ge", t_order, 1}, {">=", t_order, 1},
    {"sameas", t_sameas, 0 /* Python: 1 */}, {"in", t_in, 0 /* Python: 1 */},
    {"lower", t_case, 0}, {"upper", t_case, 0},
    {"odd", t_divisible, 0}, {"even", t_divisible, 0}, {"divisibleby", t_divisible, 1},
};

bool jinja_has_test(const char *name) { return JB_FIND(name, tests) != NULL; }
const char *jinja_test_closest(const char *name) { return JB_CLOSEST(name, tests); }
bool jinja_test(jctx *c, const char *name, jv v, const jargs *a) {
    return jv_truthy(JB_CALL(c, "test", tests, name, v, a));
}
