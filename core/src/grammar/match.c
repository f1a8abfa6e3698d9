/*
 * match — parse stacks over a grammar, advanced one code point at a time,
 * and the matcher that feeds them UTF-8 bytes (token pieces may cut a
 * character in two).
 *
 * Expansion is iterative (an explicit work list), so a long chain of rule
 * references cannot overflow the C stack; left recursion, which would
 * expand forever, was rejected by the parser, and the work is bounded
 * anyway: per stack set (GRAMMAR_MAX_STACKS, GRAMMAR_MAX_SET_WORDS), per
 * code point (GRAMMAR_MAX_STEP_WORK) and per call (GRAMMAR_CALL_WORK).
 */
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"
#include "util/grow.h"

/* A stack set up to this size is searched linearly; past it, hashed. */
enum { LINEAR_STACKS = 16 };

static bool is_seq_end(const grammar *g, uint32_t pos) {
    uint32_t op = g->elems[pos].op;
    return op == GRAMMAR_END || op == GRAMMAR_ALT;
}

/* ------------------------------------------------------------ classes */

/* Does the class at pos accept cp? *end: the element after the class. */
static bool class_match(const grammar *g, uint32_t pos, uint32_t cp, uint32_t *end) {
    const grammar_elem *e = g->elems;
    if (e[pos].op == GRAMMAR_ANY) {
        *end = pos + 1;
        return true;
    }
    bool neg = e[pos].op == GRAMMAR_CHAR_NOT, found = false;
    uint32_t i = pos;
    for (;;) {
        uint32_t lo = e[i].value, hi = lo;
        if (e[i + 1].op == GRAMMAR_CHAR_HI) hi = e[++i].value;
        if (cp >= lo && cp <= hi) found = true;
        if (e[++i].op != GRAMMAR_CHAR_ALT) break;
    }
    *end = i;
    return found != neg;
}

/* Does the class at pos accept some code point in [lo, hi]? */
static bool class_match_range(const grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    const grammar_elem *e = g->elems;
    if (e[pos].op == GRAMMAR_ANY) return true;
    uint32_t end;
    if (e[pos].op == GRAMMAR_CHAR) {
        for (uint32_t i = pos;;) {
            uint32_t a = e[i].value, b = a;
            if (e[i + 1].op == GRAMMAR_CHAR_HI) b = e[++i].value;
            if (a <= hi && b >= lo) return true;
            if (e[++i].op != GRAMMAR_CHAR_ALT) return false;
        }
    }
    /* Negated: some point of [lo, hi] lies outside every range; it is lo
     * or just past the end of one of the ranges. */
    if (class_match(g, pos, lo, &end)) return true;
    for (uint32_t i = pos;;) {
        uint32_t b = e[i].value;
        if (e[i + 1].op == GRAMMAR_CHAR_HI) b = e[++i].value;
        if (b < hi && b + 1 >= lo && class_match(g, pos, b + 1, &end)) return true;
        if (e[++i].op != GRAMMAR_CHAR_ALT) return false;
    }
}

/* ------------------------------------------------------------ stack sets */

void grammar_stacks_free(grammar_stacks *s) {
    free(s->pool);
    free(s->off);
    free(s->len);
    free(s->hash);
    free(s->table);
    memset(s, 0, sizeof *s);
}

static void stacks_clear(grammar_stacks *s) {
    s->n = 0;
    s->pool_len = 0;
    s->table_cap = 0;
}

static uint32_t stack_hash(const uint32_t *st, size_t n) {
    uint32_t h = 2166136261u ^ (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ st[i]) * 16777619u;
    return h;
}

static bool stack_is(const grammar_stacks *s, size_t i, const uint32_t *st, size_t n, uint32_t h) {
    /* (pool is NULL while every stack is empty) */
    return s->hash[i] == h && s->len[i] == n && (n == 0 || !memcmp(s->pool + s->off[i], st, n * sizeof *st));
}

/* Is st[0..n) (hash h) in s? With a table, *slot is where it is or would go. */
static bool stacks_find(const grammar_stacks *s, const uint32_t *st, size_t n, uint32_t h, size_t *slot) {
    if (s->table_cap == 0) {
        for (size_t i = 0; i < s->n; i++)
            if (stack_is(s, i, st, n, h)) return true;
        return false;
    }
    size_t mask = s->table_cap - 1, j = h & mask;
    for (; s->table[j]; j = (j + 1) & mask)
        if (stack_is(s, s->table[j] - 1, st, n, h)) break;
    *slot = j;
    return s->table[j] != 0;
}

/* Grow a uint32 array to hold need items (an error names the grammar). */
static int ensure_u32(uint32_t **p, size_t *cap, size_t need) {
    return ARRAY_GROW(*p, *cap, need, 64) < 0 ? error_set("grammar: out of memory") : 0;
}

/* Grow k parallel uint32 arrays that share the capacity *cap. */
static int ensure_parallel_u32(uint32_t **arrays[], int k, size_t *cap, size_t need) {
    size_t grown = *cap;
    for (int i = 0; i < k; i++) {
        grown = *cap;
        if (ensure_u32(arrays[i], &grown, need) < 0) return -1;
    }
    *cap = grown;
    return 0;
}

/* (Re)build the index at least four times the stacks' number, so it is at
 * most a quarter full; stacks_add rebuilds it once it passes that. */
static int stacks_index(grammar_stacks *s) {
    size_t cap = 64;
    while (cap < 4 * (s->n + 1))
        cap *= 2;
    if (cap > s->table_alloc) {
        uint32_t *t = realloc(s->table, cap * sizeof *t);
        if (!t) return error_set("grammar: out of memory");
        s->table = t;
        s->table_alloc = cap;
    }
    memset(s->table, 0, cap * sizeof *s->table);
    s->table_cap = cap;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = s->hash[i] & (cap - 1);
        while (s->table[j])
            j = (j + 1) & (cap - 1);
        s->table[j] = (uint32_t)i + 1;
    }
    return 0;
}

/* Add st[0..n) unless already present. */
static int stacks_add(grammar_stacks *s, const uint32_t *st, size_t n) {
    uint32_t h = stack_hash(st, n);
    size_t slot = 0;
    if (stacks_find(s, st, n, h, &slot)) return 0;
    if (s->n >= GRAMMAR_MAX_STACKS)
        return error_set("grammar: more than %d parse stacks at once (the grammar is too ambiguous)",
                         GRAMMAR_MAX_STACKS);
    if (s->pool_len + n > GRAMMAR_MAX_SET_WORDS)
        return error_set("grammar: the parse stacks hold more than %d entries at once (the grammar is too "
                         "ambiguous)",
                         GRAMMAR_MAX_SET_WORDS);
    uint32_t **stack_arrays[] = {&s->off, &s->len, &s->hash};
    if (ensure_parallel_u32(stack_arrays, 3, &s->cap, s->n + 1) < 0) return -1;
    if (ensure_u32(&s->pool, &s->pool_cap, s->pool_len + n) < 0) return -1;
    if (n) memcpy(s->pool + s->pool_len, st, n * sizeof *st);
    s->off[s->n] = (uint32_t)s->pool_len;
    s->len[s->n] = (uint32_t)n;
    s->hash[s->n] = h;
    s->pool_len += n;
    s->n++;
    if (s->table_cap) {
        if (4 * s->n <= s->table_cap)
            s->table[slot] = (uint32_t)s->n;
        else if (stacks_index(s) < 0)
            return -1;
    } else if (s->n > LINEAR_STACKS && stacks_index(s) < 0) {
        return -1;
    }
    return 0;
}

bool grammar_stacks_complete(const grammar_stacks *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] == 0) return true;
    return false;
}

bool grammar_stacks_equal(const grammar_stacks *a, const grammar_stacks *b) {
    if (a->n != b->n) return false;
    /* Both are deduplicated, so equal sizes and a in b means equal sets. */
    for (size_t i = 0; i < a->n; i++) {
        size_t slot;
        if (!stacks_find(b, a->pool + a->off[i], a->len[i], a->hash[i], &slot)) return false;
    }
    return true;
}

bool grammar_stacks_allow_range(const grammar *g, const grammar_stacks *s, uint32_t lo, uint32_t hi) {
    for (size_t i = 0; i < s->n; i++)
        if (s->len[i] > 0 && class_match_range(g, s->pool[s->off[i] + s->len[i] - 1], lo, hi)) return true;
    return false;
}

/* ------------------------------------------------------------ expansion */

void grammar_work_free(grammar_work *w) {
    free(w->pool);
    free(w->item_off);
    free(w->item_len);
    free(w->cur);
    memset(w, 0, sizeof *w);
}

/* Queue the stack base[0..n) followed by `top` (if top != UINT32_MAX). */
static int work_push(grammar_work *w, const uint32_t *base, size_t n, uint32_t top) {
    size_t len = n + (top != UINT32_MAX);
    if (len > GRAMMAR_MAX_DEPTH)
        return error_set("grammar: a parse stack is deeper than %d (nesting too deep)", GRAMMAR_MAX_DEPTH);
    uint32_t **item_arrays[] = {&w->item_off, &w->item_len};
    if (ensure_parallel_u32(item_arrays, 2, &w->items_cap, w->n_items + 1) < 0) return -1;
    if (ensure_u32(&w->pool, &w->pool_cap, w->pool_len + len + 1) < 0) return -1;
    if (n) memcpy(w->pool + w->pool_len, base, n * sizeof *base);
    if (top != UINT32_MAX) w->pool[w->pool_len + n] = top;
    w->item_off[w->n_items] = (uint32_t)w->pool_len;
    w->item_len[w->n_items] = (uint32_t)len;
    w->pool_len += len;
    w->n_items++;
    return 0;
}

/* Expand every queued stack until its top is a class (or it is empty) and
 * add those to out. Each item popped costs its length plus one, against the
 * step's bound and the call's budget. */
static int work_run(const grammar *g, grammar_work *w, grammar_stacks *out) {
    size_t step = GRAMMAR_MAX_STEP_WORK;
    while (w->n_items > 0) {
        size_t n = w->item_len[w->n_items - 1], cost = n + 1;
        if (cost > step)
            return error_set("grammar: more than %d stack entries expanded in one step (the grammar is too "
                             "ambiguous)",
                             GRAMMAR_MAX_STEP_WORK);
        if (cost > w->budget)
            return error_set("grammar: matching one token took more than its budget of work (the grammar "
                             "is too ambiguous)");
        step -= cost;
        w->budget -= cost;
        /* Pop the last item into cur (the pool tail is reused by pushes). */
        w->n_items--;
        if (ensure_u32(&w->cur, &w->cur_cap, n + 1) < 0) return -1;
        if (n) memcpy(w->cur, w->pool + w->item_off[w->n_items], n * sizeof *w->cur);
        w->pool_len = w->item_off[w->n_items];
        uint32_t *st = w->cur;
        for (;;) {
            if (n == 0) {
                if (stacks_add(out, st, 0) < 0) return -1;
                break;
            }
            uint32_t pos = st[n - 1];
            uint32_t op = g->elems[pos].op;
            if (op == GRAMMAR_END || op == GRAMMAR_ALT) {
                n--; /* this sequence is done: continue below it */
                continue;
            }
            if (op == GRAMMAR_REF) {
                uint32_t r = g->elems[pos].value;
                /* The continuation after the reference; none when the
                 * reference ends its sequence (keeps right recursion flat). */
                size_t base = n - 1;
                if (!is_seq_end(g, pos + 1)) st[base++] = pos + 1;
                for (uint32_t a = g->alt_first[r + 1]; a-- > g->alt_first[r];)
                    if (work_push(w, st, base, g->alt_start[a]) < 0) return -1;
                break;
            }
            if (stacks_add(out, st, n) < 0) return -1; /* a class: terminal */
            break;
        }
    }
    return 0;
}

int grammar_stacks_init(const grammar *g, grammar_stacks *out, grammar_work *w) {
    stacks_clear(out);
    w->n_items = 0;
    w->pool_len = 0;
    for (uint32_t a = g->alt_first[g->root + 1]; a-- > g->alt_first[g->root];)
        if (work_push(w, NULL, 0, g->alt_start[a]) < 0) return -1;
    return work_run(g, w, out);
}

int grammar_stacks_advance(const grammar *g, const grammar_stacks *in, uint32_t cp, grammar_stacks *out,
                           grammar_work *w) {
    stacks_clear(out);
    w->n_items = 0;
    w->pool_len = 0;
    for (size_t i = in->n; i-- > 0;) {
        size_t n = in->len[i];
        if (n == 0) continue;
        const uint32_t *st = in->pool + in->off[i];
        uint32_t end;
        if (!class_match(g, st[n - 1], cp, &end)) continue;
        if (work_push(w, st, n - 1, is_seq_end(g, end) ? UINT32_MAX : end) < 0) return -1;
    }
    return work_run(g, w, out);
}

/* ------------------------------------------------------------ matcher */

int grammar_matcher_init(grammar_matcher *m, const grammar *g) {
    memset(m, 0, sizeof *m);
    m->g = g;
    m->call_work = GRAMMAR_CALL_WORK;
    return grammar_matcher_reset(m);
}

void grammar_matcher_free(grammar_matcher *m) {
    grammar_stacks_free(&m->stacks);
    grammar_stacks_free(&m->tmp[0]);
    grammar_stacks_free(&m->tmp[1]);
    grammar_work_free(&m->work);
}

int grammar_matcher_reset(grammar_matcher *m) {
    m->partial = (grammar_utf8){0, 0, 0};
    m->work.budget = m->call_work;
    return grammar_stacks_init(m->g, &m->stacks, &m->work);
}

int grammar_utf8_step(grammar_utf8 *u, uint8_t b, uint32_t *cp) {
    if (u->need == 0) {
        if (b < 0x80) {
            *cp = b;
            return 1;
        }
        if (b >= 0xC2 && b <= 0xDF)
            *u = (grammar_utf8){b & 0x1Fu, 1, 0x80};
        else if (b >= 0xE0 && b <= 0xEF)
            *u = (grammar_utf8){b & 0x0Fu, 2, 0x800};
        else if (b >= 0xF0 && b <= 0xF4)
            *u = (grammar_utf8){b & 0x07u, 3, 0x10000};
        else
            return -1;
        return 0;
    }
    if ((b & 0xC0) != 0x80) return -1;
    u->cp = u->cp << 6 | (b & 0x3Fu);
    if (--u->need > 0) return 0;
    if (u->cp < u->min || u->cp > 0x10FFFF || (u->cp >= 0xD800 && u->cp <= 0xDFFF)) return -1;
    *cp = u->cp;
    u->cp = 0;
    return 1;
}

void grammar_utf8_range(const grammar_utf8 *u, uint32_t *lo, uint32_t *hi) {
    uint32_t shift = 6 * u->need;
    *lo = u->cp << shift;
    *hi = *lo | ((1u << shift) - 1);
    if (*lo < u->min) *lo = u->min;
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
}

/* Feed bytes from (in, *u); the result lands in one of m->tmp, returned in
 * *res (may be `in` itself when no code point completed). 1 accepted, 0
 * rejected, -1 error. */
static int feed(grammar_matcher *m, const grammar_stacks *in, grammar_utf8 *u, const char *bytes, size_t n,
                const grammar_stacks **res) {
    const grammar_stacks *cur = in;
    int which = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp;
        int s = grammar_utf8_step(u, (uint8_t)bytes[i], &cp);
        if (s < 0) return 0;
        if (s == 0) continue;
        grammar_stacks *next = &m->tmp[which];
        which ^= 1;
        if (grammar_stacks_advance(m->g, cur, cp, next, &m->work) < 0) return -1;
        if (next->n == 0) return 0;
        cur = next;
    }
    if (u->need > 0) {
        uint32_t lo, hi;
        grammar_utf8_range(u, &lo, &hi);
        if (lo > hi || !grammar_stacks_allow_range(m->g, cur, lo, hi)) return 0;
    }
    *res = cur;
    return 1;
}

int grammar_matcher_check(grammar_matcher *m, const char *bytes, size_t n) {
    grammar_utf8 u = m->partial;
    const grammar_stacks *res;
    m->work.budget = m->call_work;
    return feed(m, &m->stacks, &u, bytes, n, &res);
}

int grammar_matcher_accept(grammar_matcher *m, const char *bytes, size_t n) {
    grammar_utf8 u = m->partial;
    const grammar_stacks *res;
    m->work.budget = m->call_work;
    int rc = feed(m, &m->stacks, &u, bytes, n, &res);
    if (rc <= 0) return rc < 0 ? -1 : 1;
    if (res != &m->stacks) {
        /* Swap the result's storage in. */
        grammar_stacks t = m->stacks;
        m->stacks = *res;
        *(grammar_stacks *)res = t;
    }
    m->partial = u;
    return 0;
}

bool grammar_matcher_complete(const grammar_matcher *m) {
    return m->partial.need == 0 && grammar_stacks_complete(&m->stacks);
}

bool grammar_matcher_can_continue(const grammar_matcher *m) {
    for (size_t i = 0; i < m->stacks.n; i++)
        if (m->stacks.len[i] > 0) return true;
    return false;
}
