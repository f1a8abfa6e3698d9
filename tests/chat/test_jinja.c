/* Unit tests of the Jinja engine's pieces (float repr, JSON in and out,
 * lexer whitespace control, error lines) and of hostile templates: each
 * must fail with one clear "template line N" error, quickly, never crash.
 * Byte-for-byte agreement with jinja2 is compare_jinja.py's job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "chat/jinja.h"
#include "util/error.h"

/* Render src with vars (JSON); returns the malloc'd text or NULL. */
static char *render_lim(const char *src, const char *vars, const jinja_limits *lim) {
    jinja_template *t = jinja_parse(src, strlen(src));
    if (!t) return NULL;
    char *out = jinja_render(t, vars, vars ? strlen(vars) : 0, NULL, lim, NULL);
    jinja_template_free(t);
    return out;
}

static char *render(const char *src, const char *vars) { return render_lim(src, vars, NULL); }

static void expect_text(const char *src, const char *vars, const char *want) {
    char *got = render(src, vars);
    if (!got) fail_msg("%s: failed: %s", src, error_get());
    assert_string_equal(got, want);
    free(got);
}

/* The render fails and the message holds `part`. */
static void expect_error(const char *src, const char *vars, const char *part) {
    char *got = render(src, vars);
    if (got) fail_msg("rendered %.80s instead of failing", got);
    if (!strstr(error_get(), part)) fail_msg("error '%s' lacks '%s'", error_get(), part);
}

TEST(test_float_repr) {
    static const struct {
        double v;
        const char *want;
    } cases[] = {{0.1 + 0.2, "0.30000000000000004"}, {1.0, "1.0"}, {1e16, "1e+16"},
                 {1e15, "1000000000000000.0"}, {1e-5, "1e-05"}, {0.0001, "0.0001"},
                 {-2.5, "-2.5"}, {123456789.125, "123456789.125"}, {1.5e300, "1.5e+300"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        jfloat_repr(buf, sizeof buf, cases[i].v);
        assert_string_equal(buf, cases[i].want);
    }
}

TEST(test_json_roundtrip) {
    /* ints stay ints, floats floats, key order kept, non-ASCII kept,
     * control characters escaped as Python's json.dumps does */
    expect_text("{{ v|tojson }}", "{\"v\": {\"z\": 1, \"a\": 1.0, \"s\": \"é\\u0001\\n\", \"l\": [true, null]}}",
                "{\"z\": 1, \"a\": 1.0, \"s\": \"é\\u0001\\n\", \"l\": [true, null]}");
    expect_text("{{ v|tojson(indent=2) }}", "{\"v\": {\"a\": [1, 2], \"b\": {}}}",
                "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
    expect_text("{{ v }}", "{\"v\": {\"k\": [\"it's\", 1.5, null, false]}}",
                "{'k': [\"it's\", 1.5, None, False]}");
    expect_text("{{ v|tojson }}", "{\"v\": \"\\ud83c\\udf89\"}", "\"\xf0\x9f\x8e\x89\"");
}

TEST(test_bad_json) {
    expect_error("x", "{\"messages\": [1, 2", "byte");
    expect_error("x", "[1]", "must be a JSON object");
    expect_error("x", "{\"a\": 1} trailing", "trailing characters");
    expect_error("x", "{\"a\": \"\xff\"}", "invalid UTF-8");
}

TEST(test_whitespace) {
    expect_text("{% if true %}\nyes\n{% endif %}\n", NULL, "yes\n");
    expect_text("  {% if true %}x{% endif %}", NULL, "x");
    expect_text("a\n  {{ 'b' }}", NULL, "a\n  b");
    expect_text("a  {%- if true -%}  b  {%- endif %}", NULL, "ab");
    expect_text("{# c #}\nz", NULL, "z");
    expect_text("a\r\nb\n", NULL, "a\nb");
}

TEST(test_error_lines) {
    expect_error("a\nb\n{{ nope.x }}", NULL, "template line 3: 'nope' is undefined");
    expect_error("line1\n{{ raise_exception('No user query found.') }}", NULL,
                 "template line 2: No user query found.");
    expect_error("\n\n{% if x %}\nopen", NULL, "template line 4");
    expect_error("{% for x in y %}{% endif %}", NULL, "template line 1");
    expect_error("{{ 1 + }}", NULL, "template line 1");
    expect_error("{{ 'unterminated }}", NULL, "unterminated string");
    expect_error("ok\n{{ '\xff' }}", NULL, "template line 2: invalid UTF-8 at byte 7");
    expect_error("{% if true %}", NULL, "expected 'elif'");
    expect_error("{{ x|nosuch }}", NULL, "no filter named 'nosuch'");
    /* floats beyond 64-bit integers (a fuzz finding: the conversion was
     * undefined behaviour); Python would make a big int */
    expect_error("{{ 1e300|int }}", NULL, "integer 1000000000000000052504760255204420248704468581108159154915854115");
    expect_error("{{ '-1e19'|int }}", NULL, "out of range (64 bits)");
    expect_error("{{ '%d' % ('nan'|float) }}", NULL, "cannot convert float NaN to integer");
    /* eight hex digits past U+10FFFF are refused before they overflow (a
     * fuzz finding) */
    expect_error("{{ '\\Ud99d9999' }}", NULL, "bad \\U escape");
    expect_error("{{ '\\U00110000' }}", NULL, "bad \\U escape");
    expect_error("{% macro m() %}{% endmacro %}{{ m(1) }}", NULL, "takes not more than 0");
}

TEST(test_hostile_nesting) {
    size_t n = 20000;
    char *src = malloc(4 * n + 16);
    /* (((((...1...))))) */
    size_t o = 0;
    o += (size_t)sprintf(src + o, "{{ ");
    for (size_t i = 0; i < n; i++) src[o++] = '(';
    src[o++] = '1';
    for (size_t i = 0; i < n; i++) src[o++] = ')';
    o += (size_t)sprintf(src + o, " }}");
    src[o] = 0;
    expect_error(src, NULL, "nested too deeply");
    /* {% if %} inside {% if %} 20000 times */
    char *blocks = malloc(n * 28 + 1);
    o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(blocks + o, "{%% if true %%}");
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(blocks + o, "{%% endif %%}");
    expect_error(blocks, NULL, "nested too deeply");
    /* [[[[ ... and not a crash on unbalanced brackets */
    memset(src, '[', 4 * n);
    memcpy(src, "{{ ", 3);
    src[4 * n] = 0;
    expect_error(src, NULL, "template line 1");
    free(src);
    free(blocks);
}

TEST(test_hostile_loops) {
    expect_error("{% for i in range(2**31) %}{% endfor %}", NULL, "Range too big");
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 NULL, "iterations");
    expect_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, "nested deeper");
    jinja_limits lim = jinja_default_limits();
    lim.max_steps = 10000;
    char *out = render_lim("{% for i in range(100000) %}{{ i }}{% endfor %}", NULL, &lim);
    assert_null(out);
    assert_non_null(strstr(error_get(), "steps"));
    lim = jinja_default_limits();
    lim.max_seconds = 0.0; /* the clock is read every 1024 steps: fails there */
    out = render_lim("{% for i in range(100000) %}{{ (i ~ 'x')|upper|length }}{% endfor %}", NULL, &lim);
    assert_null(out);
    assert_non_null(strstr(error_get(), "longer than"));
}

TEST(test_hostile_output) {
    /* 32 MiB of output */
    expect_error("{% for i in range(32768) %}{{ 'x' * 1024 }}{% endfor %}", NULL, "output exceeds");
    /* a string doubled until it is huge */
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
                 "{% endfor %}{{ ns.s|length }}",
                 NULL, "exceeds");
    expect_error("{{ 'x' * 2**40 }}", NULL, "exceeds");
    /* memory: many medium strings kept alive in a list */
    jinja_limits lim = jinja_default_limits();
    lim.max_memory = 4u << 20;
    char *out = render_lim("{% set ns = namespace(l=[]) %}{% for i in range(2000) %}"
                           "{% set ns.l = ns.l + ['y' * 4000] %}{% endfor %}{{ ns.l|length }}",
                           NULL, &lim);
    assert_null(out);
    assert_non_null(strstr(error_get(), "memory"));
}

TEST(test_bad_syntax_never_crashes) {
    static const char *const bad[] = {
        "{{", "{%", "{#", "{{ }}", "{% %}", "{% for %}", "{% for x %}", "{% for x in %}",
        "{% set %}", "{% set x %}", "{% macro %}", "{% endfor %}", "{{ a.}}", "{{ a[ }}",
        "{{ a( }}", "{{ 'a' ~ }}", "{{ a if }}", "{{ a is }}", "{{ {1: }}", "{% if %}{% else %}{% else %}",
        "{% raw %}", "{{ 1 )}}", "{{ ] }}", "{% call %}{% endcall %}", "{% filter %}x{% endfilter %}",
        "{{ x|map( }}", "{{ \"\\x4 }}", "{{ 99999999999999999999 }}", "{% with %}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *out = render(bad[i], NULL);
        if (out) fail_msg("'%s' rendered '%s'", bad[i], out);
        assert_non_null(strstr(error_get(), "template line"));
    }
}

TEST(test_undefined) {
    expect_text("[{{ nope }}{{ nope|length }}{% for x in nope %}x{% endfor %}{{ nope is iterable }}]", NULL,
                "[0True]");
    expect_text("{{ messages[0].role }}", "{\"messages\": [{\"role\": \"user\"}]}", "user");
    expect_error("{{ messages[5].role }}", "{\"messages\": []}", "undefined");
}

HARNESS_MAIN("jinja", HARNESS_TEST(test_float_repr), HARNESS_TEST(test_json_roundtrip), HARNESS_TEST(test_bad_json),
             HARNESS_TEST(test_whitespace), HARNESS_TEST(test_error_lines), HARNESS_TEST(test_hostile_nesting),
             HARNESS_TEST(test_hostile_loops), HARNESS_TEST(test_hostile_output),
             HARNESS_TEST(test_bad_syntax_never_crashes), HARNESS_TEST(test_undefined))
