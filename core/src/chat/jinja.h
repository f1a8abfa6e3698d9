/*
 * jinja — a Jinja2 engine for chat templates.
 *
 * Renders tokenizer.chat_template texts exactly as Python's jinja2 does when
 * Hugging Face transformers renders them: an ImmutableSandboxedEnvironment
 * with trim_blocks and lstrip_blocks on, the loopcontrols extension (break,
 * continue), a tojson filter that keeps non-ASCII, and the globals
 * raise_exception(msg) and strftime_now(fmt). Undefined names follow
 * jinja2's default Undefined (printing gives "", attribute access fails).
 *
 * The template variables come in as one JSON object (messages, tools,
 * add_generation_prompt, bos_token, eos_token, extra keyword arguments).
 *
 * Templates are hostile input: parsing and rendering are bounded (nesting
 * depth, memory, output size, loop iterations, steps, wall time) and every
 * failure is one message naming the template line.
 *
 * Files: jinja_lex.c (text -> tokens, whitespace control), jinja_parse.c
 * (tokens -> tree), jinja_value.c (values, arena, str()/repr/JSON),
 * jinja_eval.c (statements and expressions), and the builtins as tables
 * (jinja_builtins.h): jinja_filters.c, jinja_tests.c, jinja_methods.c,
 * jinja_globals.c, with what they share in jinja_builtins.c. Everything
 * a render allocates lives in one arena freed at the end; errors unwind
 * with longjmp to the single cleanup point of jinja_render (nothing outside
 * the arena is held across a call that can fail).
 */
#ifndef TESSERA_CHAT_JINJA_H
#define TESSERA_CHAT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab/utf8.h"

/* ------------------------------------------------------------ the API */

typedef struct jinja_limits {
    size_t max_output;       /* bytes of rendered text (also per capture) */
    size_t max_memory;       /* bytes of the render's arena */
    uint64_t max_loop_iters; /* for-loop iterations over the whole render */
    uint64_t max_steps;      /* evaluated nodes over the whole render */
    int max_call_depth;      /* nested macro calls */
    double max_seconds;      /* wall time of one render */
} jinja_limits;

jinja_limits jinja_default_limits(void);

typedef struct jinja_template jinja_template;

/* Parse a template. NULL with error_get() set ("template line N: ...") on
 * bad syntax or when a limit is passed. */
jinja_template *jinja_parse(const char *src, size_t len);
void jinja_template_free(jinja_template *t);

/* Render with the members of the JSON object vars_json as variables;
 * defaults (may be NULL) is a NULL-terminated list of name, value string
 * pairs for variables the JSON does not give (bos_token, eos_token).
 * Returns a malloc'd NUL-terminated string (*out_len its length), or NULL
 * with error_get() set: "template line N: ..." for template errors
 * (raise_exception included), or a message naming the JSON at fault.
 * limits may be NULL (defaults). */
char *jinja_render(const jinja_template *t, const char *vars_json, size_t vars_len,
                   const char *const *defaults, const jinja_limits *limits, size_t *out_len);

/* =============================================== internals of the engine */

/* ---- arena: every allocation of a parse or a render */
typedef struct jarena {
    struct jchunk *head;
    size_t used, limit;
} jarena;

/* ---- values: a small JSON-like model. Strings, lists and dicts are
 * immutable once built (the sandbox forbids mutation), so values are shared
 * freely; namespaces are the only mutable objects. */
typedef enum jv_kind {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS,    /* namespace(): attributes settable with {% set ns.x = ... %} */
    JV_MACRO, /* a macro (or caller) with the scope it was defined in */
    JV_FUNC,  /* a global function or a bound method */
    JV_LOOP,  /* the `loop` object of a for loop */
} jv_kind;

enum {
    JV_SAFE = 1,  /* a Markup string (|safe): + escapes the other operand */
    JV_TUPLE = 2, /* a list that is a Python tuple (repr, equality) */
};

typedef struct jstr {
    size_t len;
    char s[]; /* NUL-terminated */
} jstr;

struct jv;
typedef struct jlist {
    size_t n;
    struct jv *v;
} jlist;

/* Insertion-ordered; keys are strings (JSON's model). */
typedef struct jdict {
    size_t n, cap;
    jstr **k;
    struct jv *v;
} jdict;

typedef struct jv {
    uint8_t kind, flags;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d; /* JV_DICT and JV_NS */
        struct jmacro *m;
        struct jfunc *fn;
        struct jloop *loop;
        const char *undef; /* JV_UNDEF: what was undefined, for messages */
    };
} jv;

/* ---- syntax tree */
typedef enum jnode_kind {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_BREAK, N_CONTINUE, N_WITH, N_BODY,
    /* expressions */
    N_CONST, N_NAME, N_LIST, N_TUPLE, N_DICT, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER,
    N_TEST, N_BINOP, N_NOT, N_NEG, N_POS, N_AND, N_OR, N_COMPARE, N_COND, N_CONCAT,
    N_NSREF, /* assignment target ns.attr */
} jnode_kind;

typedef enum jop {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
} jop;

typedef struct jnode jnode;
struct jnode {
    uint8_t kind, op;
    bool flag;        /* N_TEST: negated; N_FOR: recursive */
    int line;
    jnode *a, *b, *c, *d;
    jnode **items;    /* body, arguments, elements, compare operands */
    size_t n;
    jnode **items2;   /* else body, keyword values, dict values */
    size_t n2;
    const char **names; /* keyword names, macro parameters */
    size_t nn;
    const char *name; /* variable, attribute, filter, test, macro */
    jv val;           /* N_CONST */
};

struct jinja_template {
    jarena arena;
    jnode *root; /* N_BODY */
};

/* ---- lexer */
typedef enum jtok_kind {
    T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING,
    T_INT, T_FLOAT, T_OP,
} jtok_kind;

typedef struct jtok {
    uint8_t kind;
    int line;
    const char *s; /* TEXT, NAME, OP, STRING (decoded) */
    size_t len;
    int64_t i;
    double f;
} jtok;

/* Set by the lexer and parser: the message goes to error_set. */
typedef struct jparse_err {
    jmp_buf jmp;
} jparse_err;

/* Tokens of src (newlines normalised, one trailing newline dropped, as
 * jinja2 does). Returns the count; the array lives in the arena. Errors
 * longjmp to err after error_set. */
size_t jinja_lex(jarena *a, const char *src, size_t len, jtok **out, jparse_err *err);

/* ---- arena and values (jinja_value.c) */
void *jarena_alloc(jarena *a, size_t size); /* NULL when over the limit */
void jarena_free(jarena *a);

/* ---- render context */
typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    size_t n, cap;
    const char **k;
    jv *v;
};

typedef struct jbuf {
    char *p;
    size_t len, cap;
} jbuf;

typedef struct jctx {
    jarena arena;
    jinja_limits lim;
    jmp_buf jmp;
    int line;          /* line of the node being evaluated */
    jbuf *out;         /* where output goes (captures swap it) */
    jscope *cur;       /* innermost scope (loop, macro, with) */
    jscope *root;      /* template-level variables */
    jv block_input;    /* filter blocks: what the innermost filter applies to */
    jscope *globals;   /* the JSON variables and the built-in globals */
    uint64_t steps, loop_iters;
    int call_depth;
    double t_start;
} jctx;

typedef struct jmacro {
    const jnode *def; /* N_MACRO, or the N_CALLBLOCK for `caller` */
    jscope *closure;
    const char *name;
} jmacro;

/* Arguments of a call. */
typedef struct jargs {
    size_t n;
    jv *pos;
    size_t nk;
    const char **kname;
    jv *kval;
} jargs;

typedef jv (*jfunc_impl)(jctx *c, jv self, const char *name, const jargs *args);
typedef struct jfunc {
    jfunc_impl fn;
    jv self; /* bound methods: the object */
    const char *name;
    int min_args; /* arguments a call must give (jinja_call checks) */
} jfunc;

typedef struct jloop {
    const jlist *items;
    size_t i;
    int depth;
    jv last_changed; /* loop.changed() */
    bool changed_set;
} jloop;

/* Raise a template error at the current line (longjmp). */
_Noreturn void jerr(jctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Value helpers (jinja_value.c); they allocate in c->arena and raise on
 * failure. */
void *jalloc(jctx *c, size_t size);
jv jv_undef(const char *what);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
/* A float truncated toward zero to an integer, as Python's int(): NaN,
 * infinity and values beyond 64 bits raise (Python would make a big int). */
int64_t jv_float_to_int(jctx *c, double f);
jv jv_str(jctx *c, const char *s, size_t len);
jv jv_cstr(jctx *c, const char *s);
jv jv_list(jctx *c, size_t n); /* n items, all none; fill l->v */
jv jv_dict(jctx *c);
void jdict_set(jctx *c, jdict *d, const char *k, size_t klen, jv v);
jv *jdict_get(const jdict *d, const char *k, size_t klen);
bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);
const char *jv_type_name(jv v);
/* Python's str() and repr() of a value, appended to b. */
void jv_to_str(jctx *c, jbuf *b, jv v);
void jv_repr(jctx *c, jbuf *b, jv v);
jv jv_stringify(jctx *c, jv v); /* str(v) as a value (keeps Markup) */
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys). indent
 * < 0: none; indent_str overrides when not NULL. */
void jv_to_json(jctx *c, jbuf *b, jv v, int indent, const char *indent_str, const char *item_sep,
                const char *key_sep, bool sort_keys);
/* Parse JSON text into values (ints stay ints, object order kept). Raises
 * naming the byte offset. */
jv jv_from_json(jctx *c, const char *text, size_t len);
void jbuf_put(jctx *c, jbuf *b, const char *s, size_t n);
void jbuf_putc(jctx *c, jbuf *b, char ch);
void jbuf_printf(jctx *c, jbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
jv jbuf_take(jctx *c, jbuf *b); /* the buffer's text as a string value */
void jfloat_repr(char *out, size_t size, double f); /* Python repr(float) */
/* Compare for sorting (<): raises on mixed types like Python. */
int jv_compare(jctx *c, jv a, jv b, bool case_insensitive);

/* UTF-8: decode one code point at s (len > 0 bytes left) with the
 * tokenizers' decoder (vocab/utf8.h); returns its byte length (invalid
 * bytes: 1, and *cp = U+FFFD). */
static inline size_t jutf8_decode(const char *s, size_t len, int32_t *cp) {
    size_t off = 0;
    *cp = len ? (int32_t)utf8_decode(s, len, &off) : 0;
    return off;
}
size_t utf8_count(const char *s, size_t len);
bool py_isspace(int32_t cp);

/* ---- evaluation (jinja_eval.c) */
jv jinja_eval(jctx *c, const jnode *n);
jv jinja_call(jctx *c, jv callee, const jargs *args);
jv jinja_getattr(jctx *c, jv obj, const char *name);
jv jinja_getitem(jctx *c, jv obj, jv key);
jv jinja_iterable(jctx *c, jv v); /* a list of what `for` iterates */
jv jinja_binop(jctx *c, int op, jv a, jv b);
bool jinja_contains(jctx *c, jv container, jv item);

/* ---- builtins (tables in jinja_filters.c, jinja_tests.c,
 * jinja_methods.c, jinja_globals.c) */
jv jinja_filter(jctx *c, const char *name, jv v, const jargs *args);
bool jinja_test(jctx *c, const char *name, jv v, const jargs *args);
bool jinja_has_filter(const char *name);
bool jinja_has_test(const char *name);
/* The known filter or test name closest to name (a likely typo), or NULL. */
const char *jinja_filter_closest(const char *name);
const char *jinja_test_closest(const char *name);
/* For an error message's "%s%s%s": " (did you mean 'x'?)", or nothing when
 * near is NULL. */
#define JINJA_DID_YOU_MEAN(near) \
    (near) ? " (did you mean '" : "", (near) ? (near) : "", (near) ? "'?)" : ""
/* A method of a string, list or dict by name, bound to obj; undefined when
 * the type has no such method. */
jv jinja_method(jctx *c, jv obj, const char *name);
/* Raise for a call of obj.name that is undefined, suggesting the closest
 * method of obj's type. */
_Noreturn void jinja_no_method(jctx *c, jv obj, const char *name);
void jinja_add_globals(jctx *c, jscope *globals);
/* A copy of n items in a new arena array of cap items (cap >= n). */
void *jarena_grow(jctx *c, const void *items, size_t n, size_t cap, size_t item_size);
/* Room for one more key/value pair in o (a jdict or a jscope: parallel k[]
 * and v[] of o->n pairs, o->cap allocated): both double together. */
#define JARENA_GROW_PAIRS(c, o)                                               \
    do {                                                                      \
        if ((o)->n == (o)->cap) {                                             \
            size_t cap_ = (o)->cap ? (o)->cap * 2 : 8;                        \
            (o)->k = jarena_grow((c), (o)->k, (o)->n, cap_, sizeof *(o)->k);  \
            (o)->v = jarena_grow((c), (o)->v, (o)->n, cap_, sizeof *(o)->v);  \
            (o)->cap = cap_;                                                  \
        }                                                                     \
    } while (0)
/* Bind k to v in scope s (replacing an existing binding of k). */
void jinja_scope_set(jctx *c, jscope *s, const char *k, jv v);
/* markupsafe.escape() of a string. */
jv jinja_escape(jctx *c, jv s);

#endif
