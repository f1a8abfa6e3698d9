/*
 * Unit tests of the grammar module: the GBNF parser on good and hostile
 * grammars (each error with its line and column), the matcher (whole
 * strings, prefixes, UTF-8 cut between pieces), the token trie against a
 * one-by-one check, and the sampler chain's constraint hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "grammar/grammar.h"
#include "sample/sample.h"
#include "util/error.h"
#include "grammar_test.h"

/* ------------------------------------------------------------ helpers */

static grammar *parse_ok(const char *text) {
    grammar *g = grammar_parse(text, strlen(text), NULL);
    if (!g) fail_msg("grammar did not parse: %s\n%s", error_get(), text);
    return g;
}

/* The error message for a grammar that must not parse. */
static const char *parse_err(const char *text) {
    grammar *g = grammar_parse(text, strlen(text), NULL);
    if (g) {
        grammar_free(g);
        fail_msg("grammar parsed but should not:\n%s", text);
    }
    return error_get();
}

static void expect_err(const char *text, const char *where, const char *what) {
    const char *e = parse_err(text);
    if (!strstr(e, where) || !strstr(e, what))
        fail_msg("error '%s' lacks '%s' / '%s' for:\n%s", e, where, what, text);
}

static int match(const grammar *g, const char *text) {
    return grammar_test_match(g, text);
}

static void expect_match(const char *gbnf, const char *const *full, const char *const *prefix,
                         const char *const *bad) {
    grammar *g = parse_ok(gbnf);
    for (int i = 0; full && full[i]; i++)
        if (match(g, full[i]) != 1) fail_msg("'%s' should match fully:\n%s", full[i], gbnf);
    for (int i = 0; prefix && prefix[i]; i++)
        if (match(g, prefix[i]) != 0) fail_msg("'%s' should be a proper prefix:\n%s", prefix[i], gbnf);
    for (int i = 0; bad && bad[i]; i++)
        if (match(g, bad[i]) != -1) fail_msg("'%s' should be rejected:\n%s", bad[i], gbnf);
    grammar_free(g);
}

/* ------------------------------------------------------------ syntax */

TEST(test_basic_syntax) {
    expect_match("root ::= \"yes\" | \"no\"", L("yes", "no"), L("", "y", "n"), L("yes!", "x", "noo"));
    /* Groups, classes, negation, ranges and escapes. */
    expect_match("root ::= ( [a-c] | [^a-z\\n] )+ \"\\x21\"", L("a!", "abcQ1!", "\t!", "!!"),
                 L("a", "Q", "!"), L("d!", "a\n!"));
    /* Comments, rules defined after use, newlines inside parentheses, a
     * next line starting with '|' continues the rule. */
    expect_match("# leading comment\n"
                 "root ::= greeting ( \" \"\n"
                 "   name )?   # trailing\n"
                 "greeting ::= \"hi\"\n"
                 "  | \"hello\"\n"
                 "name ::= [A-Z] [a-z]*\n",
                 L("hi", "hello", "hi Bob", "hello A"), L("h", "hi ", "hello "),
                 L("hi bob", "hey", "hi Bob!"));
    /* Repetition counts. */
    expect_match("root ::= \"a\"{2} \"b\"{1,3} \"c\"{2,}", L("aabcc", "aabbbccccc"), L("aab", "aabbbc"),
                 L("abcc", "aabbbbcc", "aabc!"));
    expect_match("root ::= (\"ab\"){0,2} \"!\"", L("!", "ab!", "abab!"), L("a", "aba"), L("ababab!", "b!"));
    /* Any character, and escapes of every kind. */
    expect_match("root ::= . \"\\u00e9\\U0001F600\\t\\\"\\\\\"", L("x\xc3\xa9\xf0\x9f\x98\x80\t\"\\"), L("x"),
                 L("x\xc3\xa9\xf0\x9f\x98\x81"));
    /* A class with non-ASCII members and ranges. */
    expect_match("root ::= [\xc3\xa0-\xc3\xbf\xe4\xb8\x80]+", L("\xc3\xa0\xc3\xbf\xe4\xb8\x80"), L(""),
                 L("a", "\xc3\x9f"));
    /* Empty alternatives and an empty rule body written as "". */
    expect_match("root ::= \"a\" opt \"b\"\nopt ::= | \"x\"\nnone ::= \"\"", L("ab", "axb"), L("a", "ax"),
                 L("axxb"));
    /* Another start rule. */
    grammar *g = grammar_parse("a ::= \"1\"\nb ::= \"2\"", 19, "b");
    assert_non_null(g);
    assert_int_equal(match(g, "2"), 1);
    assert_int_equal(match(g, "1"), -1);
    grammar_free(g);
}

TEST(test_right_recursion_flat) {
    /* A long x* and a long recursive list keep the stacks shallow. */
    grammar *g = parse_ok("root ::= item*\nitem ::= [a-z] | \"(\" root \")\"");
    char text[20001];
    memset(text, 'a', 20000);
    text[20000] = '\0';
    assert_int_equal(match(g, text), 1);
    grammar_matcher m;
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    assert_int_equal(grammar_matcher_accept(&m, text, 20000), 0);
    for (size_t i = 0; i < m.stacks.n; i++)
        assert_true(m.stacks.len[i] <= 2);
    grammar_matcher_free(&m);
    grammar_free(g);
}

/* ------------------------------------------------------------ hostile */

TEST(test_errors) {
    expect_err("root ::= \"abc", "line 1, column 10", "unterminated string literal");
    expect_err("root ::= \"a\"\nx ::= [a-z", "line 2, column 7", "unterminated character class");
    expect_err("root ::= foo bar\nfoo ::= \"x\"", "line 1, column 14", "undefined rule 'bar'");
    expect_err("root ::= \"x\"\nroot ::= \"y\"", "line 2, column 1", "rule 'root' is defined twice");
    expect_err("start ::= \"x\"", "line 1", "no rule named 'root'");
    expect_err("", "line 1, column 1", "no rules");
    expect_err("root = \"x\"", "line 1, column 6", "expected '::='");
    expect_err("root ::= (\"x\"", "line 1, column 10", "unclosed '('");
    expect_err("root ::= \"x\")", "line 1, column 13", "')' without a matching '('");
    expect_err("root ::= [z-a]", "line 1, column 11", "backwards");
    expect_err("root ::= []", "line 1, column 10", "empty character class");
    expect_err("root ::= \"\\q\"", "line 1, column 11", "unknown escape '\\q'");
    expect_err("root ::= \"\\x4\"", "line 1", "needs 2 hex digits");
    expect_err("root ::= *", "line 1, column 10", "nothing before it to repeat");
    expect_err("root ::= \"a\"{3,1}", "line 1, column 13", "maximum below its minimum");
    expect_err("root ::= \"a\"{2", "line 1, column 13", "unclosed '{'");
    expect_err("root ::= \"\xff\"", "line 1, column 11", "invalid UTF-8");
    expect_err("root ::= \"a\" $", "line 1, column 14", "unexpected '$'");
}

TEST(test_left_recursion) {
    expect_err("root ::= root \"a\" | \"b\"", "line 1, column 1", "rule 'root' is left-recursive");
    expect_err("root ::= expr\nexpr ::= term \"+\" | \"1\"\nterm ::= expr \"*\"", "line 2, column 1",
               "left recursion: expr -> term -> expr");
    /* Through rules that can match empty text. */
    expect_err("root ::= opt root \"x\" | \"y\"\nopt ::= \"z\"?", "line 1", "left-recursive");
    /* A repetition of something that can match empty text. */
    expect_err("root ::= ( \"a\"? )*", "line 1", "left-recursive");
    /* Right recursion is fine. */
    grammar_free(parse_ok("root ::= \"a\" root | \"b\""));
}

TEST(test_limits) {
    /* Nesting: the limit is an error, below it parses. */
    char deep[2 * GRAMMAR_MAX_NEST + 64];
    int n = snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < GRAMMAR_MAX_NEST + 1; i++)
        deep[n++] = '(';
    deep[n++] = '"';
    deep[n++] = 'x';
    deep[n++] = '"';
    for (int i = 0; i < GRAMMAR_MAX_NEST + 1; i++)
        deep[n++] = ')';
    deep[n] = '\0';
    expect_err(deep, "line 1", "nested deeper than");
    /* One level less parses and matches. */
    memmove(deep + 9, deep + 10, strlen(deep + 10) + 1);
    deep[strlen(deep) - 1] = '\0';
    grammar *g = parse_ok(deep);
    assert_int_equal(match(g, "x"), 1);
    grammar_free(g);
    /* Huge counts. */
    expect_err("root ::= \"a\"{1000000000}", "line 1, column 14", "over the limit");
    expect_err("root ::= \"a\"{99999999999999999999999}", "line 1", "over the limit");
    /* Within the per-count limit, but the product is too large. */
    expect_err("root ::= [a-z]{0,100000} [a-z]{0,100000} [a-z]{0,100000} [a-z]{0,100000} "
               "[a-z]{0,100000} [a-z]{0,100000}",
               "line 1", "too large");
    /* A long chain of rules: iterative expansion, no C recursion. */
    size_t cap = 64 * 20000;
    char *chain = malloc(cap);
    size_t off = (size_t)snprintf(chain, cap, "root ::= r0\n");
    for (int i = 0; i < 20000; i++)
        off += (size_t)snprintf(chain + off, cap - off, "r%d ::= r%d\n", i, i + 1);
    off += (size_t)snprintf(chain + off, cap - off, "r20000 ::= \"z\"\n");
    g = grammar_parse(chain, off, NULL);
    assert_non_null(g);
    assert_int_equal(match(g, "z"), 1);
    grammar_free(g);
    free(chain);
    /* Ambiguity: many ways to match is bounded by deduplication. */
    g = parse_ok("root ::= (\"a\" | \"a\" \"a\" | [a-z])*");
    char as[2001];
    memset(as, 'a', 2000);
    as[2000] = '\0';
    assert_int_equal(match(g, as), 1);
    grammar_free(g);
}

/* ------------------------------------------------------------ matcher */

TEST(test_utf8_split) {
    grammar *g = parse_ok("root ::= \"\xc3\xa9t\xc3\xa9\"");
    grammar_matcher m;
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    /* The first byte of é alone is fine (é may follow), of è is not. */
    assert_int_equal(grammar_matcher_check(&m, "\xc3", 1), 1);
    assert_int_equal(grammar_matcher_check(&m, "\xc3\xa8", 2), 0);
    assert_int_equal(grammar_matcher_check(&m, "\xc4", 1), 0);
    assert_int_equal(grammar_matcher_check(&m, "\x80", 1), 0); /* stray continuation */
    assert_int_equal(grammar_matcher_accept(&m, "\xc3", 1), 0);
    assert_false(grammar_matcher_complete(&m));
    assert_int_equal(grammar_matcher_accept(&m, "\xa9t\xc3", 3), 0);
    assert_int_equal(grammar_matcher_accept(&m, "\xa8", 1), 1); /* rejected, state kept */
    assert_int_equal(grammar_matcher_accept(&m, "\xa9", 1), 0);
    assert_true(grammar_matcher_complete(&m));
    assert_false(grammar_matcher_can_continue(&m));
    assert_int_equal(grammar_matcher_reset(&m), 0);
    assert_false(grammar_matcher_complete(&m));
    grammar_matcher_free(&m);
    grammar_free(g);
    /* Negated classes and a partial sequence: [^é] accepts a lead byte of
     * other characters that share it. */
    g = parse_ok("root ::= [^\xc3\xa9]");
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    assert_int_equal(grammar_matcher_check(&m, "\xc3", 1), 1);
    assert_int_equal(grammar_matcher_check(&m, "\xc3\xa9", 2), 0);
    assert_int_equal(grammar_matcher_check(&m, "\xc3\xa8", 2), 1);
    grammar_matcher_free(&m);
    grammar_free(g);
    /* Overlong forms and surrogates are invalid even for '.'. */
    g = parse_ok("root ::= .");
    assert_int_equal(match(g, "\xc0\xaf"), -1);
    assert_int_equal(match(g, "\xed\xa0\x80"), -1);
    assert_int_equal(match(g, "\xf4\x8f\xbf\xbf"), 1);
    grammar_free(g);
}

/* ------------------------------------------------------------ trie */

typedef struct fake_vocab {
    char pieces[600][8];
    int32_t n;
} fake_vocab;

static int32_t fake_piece(void *user, int32_t id, char *buf, int32_t size) {
    fake_vocab *v = user;
    int32_t n = (int32_t)strlen(v->pieces[id]);
    if (n > size) return -1;
    memcpy(buf, v->pieces[id], (size_t)n);
    return n;
}

/* The walk over the trie marks exactly the tokens a one-by-one check
 * accepts, at every step of a JSON document (and with UTF-8 cut). */
TEST(test_trie_equals_bruteforce) {
    static const char alphabet[] = "{}[]\":, \n0123456789.-eEtrufalsn\\x\xc3\xa9\xe2\x82\xac";
    fake_vocab *v = calloc(1, sizeof *v);
    uint64_t x = 88172645463325252ULL;
    v->n = 600;
    for (int32_t i = 0; i < v->n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int len = i < 40 ? 1 : 1 + (int)(x % 6);
        for (int k = 0; k < len; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            v->pieces[i][k] = alphabet[i < 40 ? i % (sizeof alphabet - 1) : x % (sizeof alphabet - 1)];
        }
    }
    strcpy(v->pieces[7], ""); /* a control token */
    grammar_vocab *gv = grammar_vocab_new(v->n, fake_piece, v);
    assert_non_null(gv);
    const char *gbnf = grammar_json_object_gbnf();
    grammar *g = parse_ok(gbnf);
    grammar_matcher m;
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    static const char doc[] = "{\"a\xc3\xa9\": [1, -2.5e3, true, null, \"x\\n\xe2\x82\xac\"], \"b\": {}}";
    uint8_t allowed[600];
    for (size_t pos = 0; pos <= sizeof doc - 1; pos++) {
        int32_t count = grammar_vocab_mask(gv, &m, allowed);
        assert_true(count >= 0);
        int32_t brute = 0;
        for (int32_t id = 0; id < v->n; id++) {
            size_t n;
            const char *p = grammar_vocab_piece(gv, id, &n);
            int ok = n > 0 && grammar_matcher_check(&m, p, n) == 1;
            if (ok != allowed[id])
                fail_msg("token %d '%s' at byte %zu: trie %d, check %d", id, v->pieces[id], pos, allowed[id],
                         ok);
            brute += ok;
        }
        assert_int_equal(count, brute);
        if (pos < sizeof doc - 1) assert_int_equal(grammar_matcher_accept(&m, doc + pos, 1), 0);
    }
    assert_true(grammar_matcher_complete(&m));
    grammar_matcher_free(&m);
    grammar_free(g);
    grammar_vocab_free(gv);
    free(v);
}

/* Feed text byte by byte as the fuzzer does (a rejected byte is skipped);
 * the index of the first byte whose accept errs, -1 if none did. */
static long accept_until_error(grammar_matcher *m, const char *text, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (grammar_matcher_accept(m, text + i, 1) < 0) return (long)i;
    return -1;
}

/* root ::= c1 "x", c1 ::= c2 "x", ..., c<depth> ::= [a]: expanding it
 * pushes stacks of 1, 2, ..., depth entries, depth^2/2 in all. */
static grammar *nested_chain(int depth) {
    size_t cap = (size_t)depth * 32 + 64, off = 0;
    char *text = malloc(cap);
    for (int i = 0; i < depth; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        off += (size_t)snprintf(text + off, cap - off, "%s ::= c%d \"x\"\n", i ? name : "root", i + 1);
    }
    off += (size_t)snprintf(text + off, cap - off, "c%d ::= [a]\n", depth);
    grammar *g = grammar_parse(text, off, NULL);
    if (!g) fail_msg("the chain of %d did not parse: %s", depth, error_get());
    free(text);
    return g;
}

/* An ambiguous grammar is an error while it is still cheap: per stack set,
 * per step and per call (issue 19: a fuzz input held the matcher 0.4 s,
 * over 20 s instrumented, at up to 4096 stacks a step). */
TEST(test_ambiguity_bounded) {
    /* The fuzz input (tests/fuzz/regress/grammar/ambiguous-nesting): after
     * any character, `[^"]root` may open a whole new root inside an item,
     * so the ways to parse multiply with every byte. */
    grammar *g = parse_ok("root ::=item+ (\"\" item)*\n"
                          "item ::=[a-z] [a-z4-9]{0,8} | \"\\\\u00e9\" | [^\\\"]root");
    grammar_matcher m;
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    static const char text[] = "w0\"\"allOf\"\"it\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
    long at = accept_until_error(&m, text, sizeof text - 1);
    if (at < 0) fail_msg("the ambiguous grammar took all %zu bytes without an error", sizeof text - 1);
    if (!strstr(error_get(), "the parse stacks hold more than") || !strstr(error_get(), "too ambiguous"))
        fail_msg("error at byte %ld: %s", at, error_get());
    assert_true(m.stacks.n <= GRAMMAR_MAX_STACKS && m.stacks.pool_len <= GRAMMAR_MAX_SET_WORDS);
    grammar_matcher_free(&m);
    grammar_free(g);

    /* Per step: a chain of 600 expands in 181k entries and matches; one
     * of 800 needs 321k, over GRAMMAR_MAX_STEP_WORK, and fails at once. */
    g = nested_chain(600);
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    char *xs = malloc(602);
    xs[0] = 'a';
    memset(xs + 1, 'x', 600);
    xs[601] = '\0';
    assert_int_equal(grammar_matcher_accept(&m, xs, 601), 0);
    assert_true(grammar_matcher_complete(&m));
    free(xs);
    /* Per call: the same work with a budget of 100 entries is an error,
     * and the failed call leaves the matcher as it was. */
    assert_int_equal(grammar_matcher_reset(&m), 0);
    m.call_work = 100;
    assert_int_equal(grammar_matcher_accept(&m, "a", 1), -1);
    if (!strstr(error_get(), "more than its budget")) fail_msg("budget error: %s", error_get());
    assert_int_equal(grammar_matcher_check(&m, "a", 1), -1);
    m.call_work = GRAMMAR_CALL_WORK;
    assert_int_equal(grammar_matcher_accept(&m, "ax", 2), 0);
    grammar_matcher_free(&m);
    grammar_free(g);
    g = nested_chain(800);
    assert_int_equal(grammar_matcher_init(&m, g), -1);
    if (!strstr(error_get(), "expanded in one step")) fail_msg("step error: %s", error_get());
    grammar_matcher_free(&m);
    grammar_free(g);

    /* A whole mask shares one budget: enough for the JSON grammar's walk
     * over 600 pieces, not with half of what it used. */
    fake_vocab *v = calloc(1, sizeof *v);
    v->n = 600;
    for (int32_t i = 0; i < v->n; i++)
        snprintf(v->pieces[i], sizeof v->pieces[i], "%c%d", "{\"a1 :,}"[i % 8], (int)(i % 1000));
    grammar_vocab *gv = grammar_vocab_new(v->n, fake_piece, v);
    g = parse_ok(grammar_json_object_gbnf());
    assert_int_equal(grammar_matcher_init(&m, g), 0);
    assert_int_equal(grammar_matcher_accept(&m, "{\"a", 3), 0);
    uint8_t allowed[600];
    assert_true(grammar_vocab_mask(gv, &m, allowed) > 0);
    size_t used = m.call_work - m.work.budget;
    m.call_work = used / 2;
    assert_true(used > 100);
    assert_int_equal(grammar_vocab_mask(gv, &m, allowed), -1);
    if (!strstr(error_get(), "more than its budget")) fail_msg("mask budget error: %s", error_get());
    grammar_matcher_free(&m);
    grammar_free(g);
    grammar_vocab_free(gv);
    free(v);
}

/* ------------------------------------------------------------ chain hook */

/* Allows only even ids (or ids listed), counting the calls. */
typedef struct fake_con {
    int allows_calls, mask_calls;
    int32_t n_vocab;
    int32_t only; /* >= 0: only this id */
} fake_con;

static int fake_allows(void *user, int32_t id) {
    fake_con *f = user;
    f->allows_calls++;
    return f->only >= 0 ? id == f->only : id % 2 == 0;
}

static int32_t fake_mask(void *user, uint8_t *allowed) {
    fake_con *f = user;
    f->mask_calls++;
    int32_t n = 0;
    for (int32_t i = 0; i < f->n_vocab; i++) {
        allowed[i] = (uint8_t)(f->only >= 0 ? i == f->only : i % 2 == 0);
        n += allowed[i];
    }
    return n;
}

TEST(test_chain_constraint) {
    enum { NV = 100 };
    float logits[NV];
    for (int i = 0; i < NV; i++)
        logits[i] = (float)((i * 37) % 100) / 10.0f;
    /* argmax is 27 ((27*37)%100 = 99); the best even one is 54 (98). */
    sample_params p = sample_params_default();
    p.temp = 0.0f;
    sample_chain *s = sample_chain_new(&p, NV);
    fake_con f = {0, 0, NV, -1};
    sample_constraint c = {fake_allows, fake_mask, &f};
    sample_chain_set_constraint(s, &c);
    assert_int_equal(sample_chain_sample(s, logits), 54);
    assert_int_equal(f.mask_calls, 0); /* the second best was tried alone */
    /* An allowed argmax costs one check. */
    f = (fake_con){0, 0, NV, -1};
    logits[54] = 20.0f;
    assert_int_equal(sample_chain_sample(s, logits), 54);
    assert_int_equal(f.allows_calls, 1);
    /* Far down the list: the mask is used. */
    f = (fake_con){0, 0, NV, 3};
    assert_int_equal(sample_chain_sample(s, logits), 3);
    assert_int_equal(f.mask_calls, 1);
    sample_chain_free(s);
    /* Sampling never returns a rejected token. */
    p = sample_params_default();
    p.seed = 7;
    p.top_k = 0;
    p.min_p = 0.0f;
    p.top_p = 1.0f;
    p.temp = 1.5f;
    s = sample_chain_new(&p, NV);
    f = (fake_con){0, 0, NV, -1};
    sample_chain_set_constraint(s, &c);
    for (int i = 0; i < 2000; i++) {
        int32_t t = sample_chain_sample(s, logits);
        assert_true(t >= 0 && t % 2 == 0);
    }
    assert_true(f.mask_calls > 0);
    /* Nothing allowed: -1 with an error. */
    f = (fake_con){0, 0, NV, NV + 5};
    assert_int_equal(sample_chain_sample(s, logits), -1);
    assert_non_null(strstr(error_get(), "allows no token"));
    sample_chain_free(s);
}

HARNESS_MAIN("gbnf", HARNESS_TEST(test_basic_syntax), HARNESS_TEST(test_right_recursion_flat),
             HARNESS_TEST(test_errors), HARNESS_TEST(test_left_recursion), HARNESS_TEST(test_limits),
             HARNESS_TEST(test_utf8_split), HARNESS_TEST(test_trie_equals_bruteforce),
             HARNESS_TEST(test_ambiguity_bounded), HARNESS_TEST(test_chain_constraint))
