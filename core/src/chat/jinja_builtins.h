/*
 * jinja_builtins — what the engine's built-in names are made of.
 *
 * Every filter, test, method and global is one row of a table, {name, fn,
 * min_args}, in a file of its own: jinja_filters.c, jinja_tests.c,
 * jinja_methods.c (one table per type: str, list, dict, loop) and
 * jinja_globals.c. The tables are the only lists of known names: the parser
 * checks filters and tests against them, the evaluator finds what to call in
 * them, and the "no filter / test named" and "has no attribute" errors
 * suggest the closest known name from them. Adding a builtin is one
 * function and one row.
 *
 * min_args is how many arguments (positional and keyword together) a call
 * must give; fewer is an error before the function runs. Where Python needs
 * an argument that the engine has always done without (rendering as though
 * it were undefined), the row keeps 0 and says so, so that no template
 * renders differently.
 *
 * jinja_builtins.c holds what several tables share: argument access, code
 * points, the string operations that a filter and a method both are
 * (strip, split, replace, case changes), and the closest-name search.
 */
#ifndef TESSERA_CHAT_JINJA_BUILTINS_H
#define TESSERA_CHAT_JINJA_BUILTINS_H

#include "chat/jinja.h"

/* ------------------------------------------------------------ tables */

/* A row: fn(c, subject, name, args), where the subject is the filtered or
 * tested value, the method's object, or none for a global, and name the
 * row's own, so that one function can serve a family (upper, lower, ...).
 * A test's fn returns a bool value. */
typedef struct jbuiltin {
    const char *name;
    jfunc_impl fn;
    int min_args;
} jbuiltin;

/* The row of table (n rows) named name, or NULL. */
const jbuiltin *jb_find(const char *name, const jbuiltin *table, size_t n);
/* The name in table closest to name (at most 2 edits; 1 for names of 3 or
 * 4 characters, none for shorter ones), or NULL: for "did you mean". */
const char *jb_closest(const char *name, const jbuiltin *table, size_t n);
/* Call the row named name on subject after checking its min_args; raise
 * "No <kind> named 'name'" with the closest known name when there is none. */
jv jb_call(jctx *c, const char *kind, const jbuiltin *table, size_t n, const char *name, jv subject,
           const jargs *a);
#define JB_ROWS(table) (table), sizeof(table) / sizeof *(table)
#define JB_FIND(name, table) jb_find((name), JB_ROWS(table))
#define JB_CLOSEST(name, table) jb_closest((name), JB_ROWS(table))
#define JB_CALL(c, kind, table, name, subject, a) jb_call((c), (kind), JB_ROWS(table), (name), (subject), (a))

/* Raise "what() takes at least N argument(s) (M given)" when a gives fewer
 * than min_args (positional and keyword arguments together). */
void jb_check_min_args(jctx *c, const char *what, int min_args, const jargs *a);

/* ------------------------------------------------------- arguments */

/* Argument idx (positional) or name (keyword); has=false when absent
 * (idx (size_t)-1: keyword only; name NULL: positional only). */
jv jb_arg(const jargs *a, size_t idx, const char *name, bool *has);
jv jb_arg_or(const jargs *a, size_t idx, const char *name, jv def);
/* Raise on more than max_pos positional arguments or a keyword not in the
 * NULL-terminated names. */
void jb_check_args(jctx *c, const jargs *a, size_t max_pos, const char *const *names, const char *what);
jv jb_need_str(jctx *c, jv v, const char *what);
int64_t jb_need_int(jctx *c, jv v, const char *what);

static inline jv jb_with_flags(jv v, uint8_t flags) {
    v.flags = flags;
    return v;
}

/* soft_str(): str() of anything, Markup kept. */
static inline jv jb_soft_str(jctx *c, jv v) { return jv_stringify(c, v); }

/* ------------------------------------------------- lists being built */

/* Append v to b, a byte buffer of jv; jb_list_from makes the list. */
void jb_list_push(jctx *c, jbuf *b, jv v);
jv jb_list_from(jctx *c, jbuf *b);

/* ------------------------------------------------------ code points */

typedef struct jcps {
    size_t n;
    int32_t *cp;
    size_t *off; /* n + 1 byte offsets */
} jcps;

jcps jb_decode(jctx *c, const jstr *s);
void jb_put_cp(jctx *c, jbuf *b, int32_t cp); /* append as UTF-8 */
bool jb_is_alpha(int32_t cp); /* str.isalpha() of one code point */
bool jb_is_alnum(int32_t cp); /* str.isalnum() of one code point */

/* ------------------------------------------------ string operations */

enum { JB_CASE_UPPER, JB_CASE_LOWER, JB_CASE_TITLE, JB_CASE_CAPITALIZE, JB_CASE_SWAP };

/* str.upper() and friends (mode JB_CASE_*). */
jv jb_change_case(jctx *c, jv s, int mode);
/* str.strip/lstrip/rstrip(chars=None) */
jv jb_strip(jctx *c, jv s, jv chars, bool left, bool right);
/* str.split / str.rsplit(sep, maxsplit) */
jv jb_split(jctx *c, jv s, jv sep, jv maxv, bool from_right);
jv jb_splitlines(jctx *c, jv s, bool keepends);
/* str.replace(old, new, count); count < 0: all. Flags not kept. */
jv jb_replace(jctx *c, jv s, jv old, jv new_, int64_t count);
/* str.islower()/isupper(): some cased character, none of the other case. */
bool jb_case_test(jctx *c, jv s, bool lower);
/* memmem from byte from, and its reverse ending at byte end. */
const char *jb_find_bytes(const char *h, size_t hl, const char *n, size_t nl, size_t from);
const char *jb_rfind_bytes(const char *h, const char *n, size_t nl, size_t end);

/* dict.items(): a list of (key, value) tuples. */
jv jb_dict_items(jctx *c, jv d);

#endif
