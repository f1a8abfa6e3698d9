/*
 * grammar — GBNF grammars (llama.cpp's syntax), the matcher that follows
 * them one code point at a time, the token trie that checks a whole
 * vocabulary against them in one walk, and JSON Schema -> GBNF.
 *
 * Representation. A grammar is one flat array of elements. Rule r starts
 * at rule_start[r]; its alternatives are separated by GRAMMAR_ALT and the
 * rule ends with GRAMMAR_END. A character class is GRAMMAR_CHAR (or
 * GRAMMAR_CHAR_NOT) with the first range's low end, an optional
 * GRAMMAR_CHAR_HI with its high end, then GRAMMAR_CHAR_ALT (+ HI) for each
 * further range; a literal "ab" is two one-character classes. Groups and
 * repetitions become generated rules: x* is `r ::= x r |`, x{0,n} a chain
 * of n rules `r_k ::= x r_{k-1} |` (right recursion, so matching never
 * grows a stack).
 *
 * Matching. A parse stack lists element positions still to match, top
 * last; the top of every stack is a character class (stacks are expanded
 * through rule references until then) or the stack is empty (the root
 * rule is complete). A code point advances every stack whose top class
 * accepts it. Left recursion (through rules that can match empty text
 * too) would expand forever, so the parser rejects it.
 */
#ifndef TESSERA_GRAMMAR_H
#define TESSERA_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits against hostile grammars; each is an error naming the place. */
enum {
    GRAMMAR_MAX_NEST = 128,      /* nested parentheses */
    GRAMMAR_MAX_REPEAT = 100000, /* m and n of x{m,n} */
    GRAMMAR_MAX_ELEMS = 1 << 21, /* elements of the whole grammar */
    GRAMMAR_MAX_STACKS = 4096,   /* live parse stacks (ambiguity) */
    GRAMMAR_MAX_DEPTH = 4096,    /* entries of one parse stack */
    /* Work bounds, in stack entries copied or compared. An ambiguous
     * grammar multiplies stacks at every character; these caps make it an
     * error ("too ambiguous") while it is still cheap, so one request's
     * grammar cannot hold a server thread for seconds per token. */
    GRAMMAR_MAX_SET_WORDS = 1 << 16, /* entries of all stacks of one set */
    GRAMMAR_MAX_STEP_WORK = 1 << 18, /* expansion after one code point */
};

typedef enum grammar_op {
    GRAMMAR_END = 0,  /* end of a rule */
    GRAMMAR_ALT,      /* start of the next alternative */
    GRAMMAR_REF,      /* value: rule index */
    GRAMMAR_CHAR,     /* class start; value: low end of its first range */
    GRAMMAR_CHAR_NOT, /* negated class start; value as GRAMMAR_CHAR */
    GRAMMAR_CHAR_HI,  /* value: high end of the range before it */
    GRAMMAR_CHAR_ALT, /* value: low end of one more range of the class */
    GRAMMAR_ANY,      /* '.': any code point */
} grammar_op;

typedef struct grammar_elem {
    uint32_t op;
    uint32_t value;
} grammar_elem;

typedef struct grammar {
    grammar_elem *elems;
    uint32_t n_elems;
    uint32_t n_rules;
    uint32_t *rule_start; /* n_rules: first element of each rule */
    /* Alternatives of rule r: alt_start[alt_first[r] .. alt_first[r + 1]). */
    uint32_t *alt_first; /* n_rules + 1 */
    uint32_t *alt_start; /* first element of each alternative */
    uint32_t root;
} grammar;

/* Parse GBNF text[0..len). root: the start rule's name (NULL: "root").
 * NULL on error with error_get() = "grammar: line L, column C: what". */
grammar *grammar_parse(const char *text, size_t len, const char *root);
grammar *grammar_copy(const grammar *g);
void grammar_free(grammar *g);

/* ------------------------------------------------------------ stacks */

/* A set of parse stacks, deduplicated. Stack i is
 * pool[off[i] .. off[i] + len[i]), top last. */
typedef struct grammar_stacks {
    uint32_t *pool;
    size_t pool_len, pool_cap;
    uint32_t *off, *len, *hash;
    size_t n, cap;
    /* Open-addressing index of the stacks (slot: stack index + 1, 0 free),
     * built once a set outgrows a linear scan; table_cap 0 while unbuilt. */
    uint32_t *table;
    size_t table_cap, table_alloc;
} grammar_stacks;

void grammar_stacks_free(grammar_stacks *s);

/* Scratch for expanding stacks; reused so steps do not allocate. */
typedef struct grammar_work {
    uint32_t *pool;
    size_t pool_len, pool_cap;
    uint32_t *item_off, *item_len;
    size_t n_items, items_cap;
    uint32_t *cur;
    size_t cur_cap;
    /* Work left (entries) for the current call of the matcher: check,
     * accept, reset or a whole vocabulary mask. */
    size_t budget;
} grammar_work;

/* The work one call may do: about 0.35 s at 190 M entries/s (a 2-core
 * Zen 2 VM). The heaviest masks measured, JSON-schema and word grammars over
 * SmolLM2's 49k and Gemma 3's 262k vocabularies, used 2.6 M (4%). */
enum { GRAMMAR_CALL_WORK = 1 << 26 };

void grammar_work_free(grammar_work *w);

/* The stacks at the start of the root rule. -1 with an error (too
 * ambiguous, out of memory). */
int grammar_stacks_init(const grammar *g, grammar_stacks *out, grammar_work *w);
/* out = the stacks of `in` advanced by code point cp (empty: rejected). */
int grammar_stacks_advance(const grammar *g, const grammar_stacks *in, uint32_t cp, grammar_stacks *out,
                           grammar_work *w);
/* Some stack is empty: the text so far is a complete match. */
bool grammar_stacks_complete(const grammar_stacks *s);
/* a and b hold the same stacks (in any order). */
bool grammar_stacks_equal(const grammar_stacks *a, const grammar_stacks *b);
/* Some stack's top class accepts a code point in [lo, hi]. */
bool grammar_stacks_allow_range(const grammar *g, const grammar_stacks *s, uint32_t lo, uint32_t hi);

/* ------------------------------------------------------------ matcher */

/* A UTF-8 sequence cut between tokens: the bits so far and the
 * continuation bytes still to come (need == 0: none pending). */
typedef struct grammar_utf8 {
    uint32_t cp;
    uint32_t need;
    uint32_t min; /* smallest code point the full sequence may encode */
} grammar_utf8;

/* One byte into a decoder state: 1 when a code point completed (*cp), 0
 * when more bytes are needed, -1 for invalid UTF-8 (overlong forms and
 * surrogates included). */
int grammar_utf8_step(grammar_utf8 *u, uint8_t b, uint32_t *cp);
/* The code points a pending sequence may still become. */
void grammar_utf8_range(const grammar_utf8 *u, uint32_t *lo, uint32_t *hi);

/* The grammar's state after the text accepted so far. */
typedef struct grammar_matcher {
    const grammar *g;
    grammar_stacks stacks;
    grammar_utf8 partial;
    grammar_stacks tmp[2]; /* ping-pong for checks */
    grammar_work work;
    size_t call_work; /* budget of each call; GRAMMAR_CALL_WORK (tests lower it) */
} grammar_matcher;

/* g must outlive the matcher. -1 with an error. */
int grammar_matcher_init(grammar_matcher *m, const grammar *g);
void grammar_matcher_free(grammar_matcher *m);
/* Back to the start of the root rule. */
int grammar_matcher_reset(grammar_matcher *m);
/* 1 when bytes[0..n) may follow the text so far, 0 when not, -1 on error. */
int grammar_matcher_check(grammar_matcher *m, const char *bytes, size_t n);
/* Advance by bytes[0..n). 0; 1 when the grammar rejects them (state
 * unchanged); -1 on error. */
int grammar_matcher_accept(grammar_matcher *m, const char *bytes, size_t n);
/* The text so far is a complete match (and no UTF-8 sequence is open). */
bool grammar_matcher_complete(const grammar_matcher *m);
/* Some continuation is possible. */
bool grammar_matcher_can_continue(const grammar_matcher *m);

/* ------------------------------------------------------------ vocabulary */

/* The token pieces of a vocabulary in a byte trie: a walk over it checks
 * every token sharing a prefix once, and prunes a subtree as soon as the
 * grammar rejects its prefix. */
typedef struct grammar_vocab grammar_vocab;

/* piece(user, id, buf, size) writes token id's bytes and returns their
 * length (<= size), 0 for tokens that are never allowed (control tokens).
 * Pieces longer than GRAMMAR_MAX_PIECE are checked one by one. */
enum { GRAMMAR_MAX_PIECE = 256 };
typedef int32_t (*grammar_piece_fn)(void *user, int32_t id, char *buf, int32_t size);
grammar_vocab *grammar_vocab_new(int32_t n_vocab, grammar_piece_fn piece, void *user);
void grammar_vocab_free(grammar_vocab *v);
int32_t grammar_vocab_size(const grammar_vocab *v);
/* Token id's bytes (NULL, *n = 0 for none). */
const char *grammar_vocab_piece(const grammar_vocab *v, int32_t id, size_t *n);

/* allowed[id] = 1 for every token whose piece the matcher accepts next,
 * 0 for the others (n_vocab bytes). Returns how many, or -1 on error. */
int32_t grammar_vocab_mask(grammar_vocab *v, grammar_matcher *m, uint8_t *allowed);

/* ------------------------------------------------------------ JSON */

/* GBNF for any JSON object ({"type": "json_object"}), root rule "root". */
const char *grammar_json_object_gbnf(void);

/* GBNF (malloc'd, NUL-terminated) for a JSON Schema given as JSON text.
 * NULL with error_get() = "json schema: #/path: what". */
char *grammar_json_schema_to_gbnf(const char *schema, size_t len);

/* ------------------------------------------------------------ public */

/* What tessera.h's tessera_grammar is (the sampler reads it). */
struct tessera_grammar {
    grammar *g;
};

#endif
