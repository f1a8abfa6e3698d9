/*
 * Unit tests of JSON Schema -> GBNF: for each schema, documents that must
 * match completely and documents that must be rejected (or left
 * incomplete), and schemas that must be refused with an error naming the
 * keyword and its path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include <tessera/tessera.h>

#include "grammar/grammar.h"
#include "util/error.h"
#include "grammar_test.h"

static grammar *schema_grammar(const char *schema) {
    char *gbnf = grammar_json_schema_to_gbnf(schema, strlen(schema));
    if (!gbnf) fail_msg("schema refused: %s\n%s", error_get(), schema);
    grammar *g = grammar_parse(gbnf, strlen(gbnf), NULL);
    if (!g) fail_msg("its grammar does not parse: %s\n%s", error_get(), gbnf);
    free(gbnf);
    return g;
}

static int match(const grammar *g, const char *text) {
    return grammar_test_match(g, text);
}

static void expect(const char *schema, const char *const *good, const char *const *bad) {
    grammar *g = schema_grammar(schema);
    for (int i = 0; good[i]; i++)
        if (match(g, good[i]) != 1) fail_msg("%s\nshould match %s", schema, good[i]);
    for (int i = 0; bad[i]; i++)
        if (match(g, bad[i]) == 1) fail_msg("%s\nshould not match %s", schema, bad[i]);
    grammar_free(g);
}

static void expect_refused(const char *schema, const char *what) {
    char *gbnf = grammar_json_schema_to_gbnf(schema, strlen(schema));
    if (gbnf) fail_msg("schema accepted but should not be: %s\n%s", schema, gbnf);
    if (!strstr(error_get(), what)) fail_msg("error '%s' lacks '%s'", error_get(), what);
}

TEST(test_primitives) {
    expect("{\"type\": \"string\"}", L("\"\"", "\"a b\\n\\u00e9\\\"\"", "\"\xc3\xa9\""),
           L("a", "\"a", "\"\n\"", "\"\\q\"", "1"));
    expect("{\"type\": \"integer\"}", L("0", "-7", "1234567890123456"), L("01", "1.5", "-", "1e3", "\"1\""));
    expect("{\"type\": \"number\"}", L("0", "-0.5", "12.25e-3", "3E+10"), L("1.", ".5", "+1", "0x1"));
    expect("{\"type\": \"boolean\"}", L("true", "false"), L("True", "1", "null"));
    expect("{\"type\": \"null\"}", L("null"), L("nul", "\"null\""));
    expect("{\"type\": [\"integer\", \"null\"]}", L("5", "null"), L("\"5\"", "true"));
    expect("true", L("1", "{\"a\": [null]}", "\"x\""), L("{", "tru"));
    expect("{}", L("[1, {}]", "false"), L("[1,]"));
}

TEST(test_objects) {
    const char *person = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, "
                         "\"age\": {\"type\": \"integer\"}, \"email\": {\"type\": \"string\"}}, "
                         "\"required\": [\"name\", \"age\"], \"additionalProperties\": false}";
    expect(person,
           L("{\"name\": \"Ann\", \"age\": 3}", "{\"name\":\"A\",\"age\":1,\"email\":\"a@b\"}",
             "{\n  \"name\": \"A\",\n  \"age\": 1\n}"),
           L("{\"age\": 3, \"name\": \"Ann\"}", "{\"name\": \"Ann\"}",
             "{\"name\": \"A\", \"age\": 1, \"x\": 1}", "{\"name\": \"A\", \"age\": 1,}", "{}"));
    /* All optional: any subset in order, including none. */
    expect("{\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}}",
           L("{}", "{\"a\": 1}", "{\"b\": 2}", "{\"a\": 1, \"b\": 2}"),
           L("{,}", "{\"b\": 2, \"a\": 1}", "{\"c\": 1}"));
    /* additionalProperties as a schema, with no listed properties. */
    expect("{\"type\": \"object\", \"additionalProperties\": {\"type\": \"boolean\"}}",
           L("{}", "{\"x\": true, \"y\": false}"), L("{\"x\": 1}"));
    /* Listed plus extra of any value. */
    expect(
        "{\"properties\": {\"id\": {\"const\": 1}}, \"required\": [\"id\"], \"additionalProperties\": true}",
        L("{\"id\": 1}", "{\"id\": 1, \"z\": [2]}"), L("{\"z\": 1}", "{\"id\": 2}"));
    /* A required name outside the listed properties: any value. */
    expect("{\"properties\": {\"a\": {\"type\": \"null\"}}, \"required\": [\"b\"]}",
           L("{\"b\": 1}", "{\"a\": null, \"b\": [true]}"), L("{\"a\": null}", "{}"));
    /* A required name outside properties, with extras allowed. */
    expect("{\"type\": \"object\", \"required\": [\"k\"]}", L("{\"k\": null}", "{\"k\": 1, \"j\": 2}"),
           L("{}"));
    /* Keys needing escapes. */
    expect("{\"properties\": {\"a\\\"b\": {\"type\": \"null\"}}, \"required\": [\"a\\\"b\"]}",
           L("{\"a\\\"b\": null}"), L("{\"ab\": null}"));
}

TEST(test_arrays_enums_combos) {
    expect("{\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 3}",
           L("[1, 2]", "[1,2,3]"), L("[]", "[1]", "[1, 2, 3, 4]", "[1, \"2\"]"));
    expect("{\"type\": \"array\", \"maxItems\": 0}", L("[]"), L("[1]"));
    expect("{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}}",
           L("[]", "[true]", "[true, false, true]"), L("[true,]"));
    expect("{\"enum\": [\"red\", \"green\", 3, null, {\"a\": [1]}]}",
           L("\"red\"", "\"green\"", "3", "null", "{\"a\":[1]}"), L("\"blue\"", "\"Red\"", "4"));
    expect("{\"const\": \"x\\ny\"}", L("\"x\\ny\""), L("\"x\"", "\"xy\""));
    expect(
        "{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\", \"maxLength\": 2}], \"title\": \"t\"}",
        L("1", "\"ab\""), L("\"abc\"", "true"));
    expect("{\"oneOf\": [{\"type\": \"null\"}, {\"type\": \"boolean\"}]}", L("null", "true"), L("0"));
    expect("{\"allOf\": [{\"type\": \"boolean\"}]}", L("true"), L("0"));
}

TEST(test_strings) {
    expect("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}",
           L("\"ab\"", "\"a\\nb\"", "\"\xc3\xa9\xc3\xa9\""), L("\"a\"", "\"abcd\""));
    expect("{\"type\": \"string\", \"format\": \"date\"}",
           L("\"2024-02-28\"", "\"1999-12-31\"", "\"2023-04-30\""),
           L("\"2024-13-01\"", "\"2024-02-30\"", "\"2024-04-31\"", "\"24-01-01\"", "\"2024-00-10\""));
    expect("{\"type\": \"string\", \"format\": \"time\"}", L("\"23:59:59Z\"", "\"08:00:00.5+02:00\""),
           L("\"24:00:00Z\"", "\"12:00\"", "\"12:00:00\""));
    expect("{\"type\": \"string\", \"format\": \"date-time\"}", L("\"2024-01-31T12:30:00Z\""),
           L("\"2024-01-31 12:30:00Z\""));
    expect("{\"type\": \"string\", \"format\": \"uuid\"}", L("\"123e4567-e89b-12d3-a456-426614174000\""),
           L("\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""));
    /* Unknown formats are annotations. */
    expect("{\"type\": \"string\", \"format\": \"email\"}", L("\"not an email\""), L("1"));
}

TEST(test_refs) {
    const char *tree =
        "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, "
        "\"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, "
        "\"required\": [\"v\"], \"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}";
    expect(tree, L("{\"v\": 1}", "{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": []}, {\"v\": 3}]}"),
           L("{\"kids\": []}", "{\"v\": 1, \"kids\": [{}]}"));
    expect(
        "{\"definitions\": {\"a~b/c\": {\"type\": \"null\"}}, \"type\": \"object\", \"properties\": {\"x\": "
        "{\"$ref\": \"#/definitions/a~0b~1c\"}}, \"required\": [\"x\"]}",
        L("{\"x\": null}"), L("{\"x\": 1}"));
    /* A list that refers to the root. */
    expect("{\"type\": \"array\", \"items\": {\"$ref\": \"#\"}, \"maxItems\": 2}", L("[]", "[[], [[]]]"),
           L("[1]"));
}

TEST(test_refused) {
    expect_refused("{\"type\": \"string\", \"pattern\": \"^a\"}",
                   "#: the keyword 'pattern' is not supported");
    expect_refused("{\"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0}}}",
                   "#/properties/n: the keyword 'minimum' is not supported");
    expect_refused("{\"$ref\": \"http://example.com/s.json\"}", "is not local");
    expect_refused("{\"$ref\": \"#/$defs/missing\"}", "points at nothing");
    expect_refused("{\"type\": \"strin\"}", "unknown type 'strin'");
    expect_refused("{\"type\": \"object\", \"properties\": {}, \"required\": [\"a\"], "
                   "\"additionalProperties\": false}",
                   "required property 'a'");
    expect_refused("{\"type\": \"string\", \"maxLength\": 100000000}", "'maxLength' over");
    expect_refused("{\"type\": \"string\", \"maxLength\": 1e300}", "'maxLength' over");
    expect_refused("{\"type\": \"array\", \"minItems\": 2.5}", "'minItems' must be a non-negative integer");
    expect_refused("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "below 'minItems'");
    expect_refused("{\"enum\": []}", "'enum' must be a non-empty array");
    expect_refused("{\"anyOf\": [{\"type\": \"null\"}], \"type\": \"string\"}",
                   "'anyOf' together with 'type'");
    expect_refused("false", "allows no value");
    expect_refused("{\"type\": ", "not valid JSON");
    expect_refused("[1]", "#: a schema must be an object");
    /* Deep nesting is bounded. */
    char deep[4096] = "";
    for (int i = 0; i < 100; i++)
        strcat(deep, "{\"items\": ");
    strcat(deep, "{}");
    for (int i = 0; i < 100; i++)
        strcat(deep, "}");
    expect_refused(deep, "nested deeper than");
    /* A reference that reaches itself before matching a character is
     * refused by the converter at the schema path, not by the GBNF checker
     * (fuzz finding schema-ref-cycle). */
    tessera_grammar *tg = tessera_grammar_from_json_schema("{\"$ref\": \"#\"}", 13);
    assert_null(tg);
    assert_non_null(strstr(tessera_last_error(), "json schema: #: '$ref' '#' leads back to itself"));
    expect_refused("{\"anyOf\": [{\"$ref\": \"#/$defs/x\"}, {\"type\": \"null\"}], "
                   "\"$defs\": {\"x\": {\"anyOf\": [{\"$ref\": \"#\"}]}}}",
                   "#/anyOf/0: '$ref' '#/$defs/x' leads back to itself");
    /* Through an object's value or an array's items it is fine (a '{' or
     * '[' comes first): test_refs. Invalid UTF-8 anywhere in the schema is
     * named by path (fuzz finding schema-invalid-utf8). */
    expect_refused("{\"const\": \"a\xff\xfe\"}", "#/const: invalid UTF-8 in a string (byte 0xFF at offset 1)");
    expect_refused("{\"enum\": [\"ok\", \"\xc3\"]}", "#/enum/1: invalid UTF-8 in a string (byte 0xC3");
    expect_refused("{\"properties\": {\"\xff\": {}}}", "#/properties/\\xFF: invalid UTF-8 in a name");
    expect("{\"const\": \"caf\xc3\xa9\"}", L("\"caf\xc3\xa9\""), L("\"cafe\""));
}

TEST(test_public_api) {
    tessera_grammar *g = tessera_grammar_json_object();
    assert_non_null(g);
    tessera_grammar_free(g);
    g = tessera_grammar_from_json_schema("{\"type\": \"integer\"}", 19);
    assert_non_null(g);
    tessera_grammar_free(g);
    g = tessera_grammar_parse("root ::= (", 10, NULL);
    assert_null(g);
    assert_non_null(strstr(tessera_last_error(), "grammar: line 1, column 10"));
    char *gbnf = tessera_json_schema_to_gbnf("{\"type\": \"boolean\"}", 19);
    assert_non_null(gbnf);
    assert_non_null(strstr(gbnf, "root ::= json-boolean"));
    free(gbnf);
    /* The json_object grammar: objects only. */
    grammar *jg = grammar_parse(grammar_json_object_gbnf(), strlen(grammar_json_object_gbnf()), NULL);
    assert_non_null(jg);
    assert_int_equal(match(jg, "{\"a\": {\"b\": [1, \"x\", null]}}"), 1);
    assert_int_equal(match(jg, "[1]"), -1);
    assert_int_equal(match(jg, "{\"a\": 1} "), -1);
    grammar_free(jg);
}

/* Tuples: prefixItems, and draft-04's items as a list, with what may follow. */
TEST(test_tuples) {
    /* items as a list, nothing said of the rest or of minItems: exactly the tuple */
    expect("{\"items\": [{\"type\": \"integer\"}]}", L("[1]", "[ -3000 ]"), L("[]", "[1, 2]", "[\"a\"]"));
    expect("{\"type\": \"array\", \"prefixItems\": [{\"type\": \"string\"}, {\"type\": \"boolean\"}]}",
           L("[\"a\", true]", "[\"\",false]"), L("[true, \"a\"]", "[\"a\"]", "[\"a\", true, 1]"));
    /* the rest as a schema: more of it after the tuple */
    expect("{\"prefixItems\": [{\"type\": \"string\"}], \"items\": {\"type\": \"integer\"}}",
           L("[\"a\"]", "[\"a\", 1, 2]"), L("[\"a\", \"b\"]", "[1]", "[]"));
    expect("{\"items\": [{\"type\": \"null\"}], \"additionalItems\": {\"type\": \"boolean\"}, \"maxItems\": 3}",
           L("[null]", "[null, true, false]"), L("[null, true, false, true]", "[null, 1]"));
    expect("{\"items\": [{\"type\": \"null\"}], \"additionalItems\": false}", L("[null]"), L("[null, null]"));
    /* minItems below the tuple's length: the tail is optional, in order */
    expect("{\"prefixItems\": [{\"const\": 1}, {\"const\": 2}, {\"const\": 3}], \"minItems\": 1}",
           L("[1]", "[1, 2]", "[1, 2, 3]"), L("[]", "[2]", "[1, 3]"));
    expect("{\"prefixItems\": [{\"const\": 1}, {\"const\": 2}], \"maxItems\": 1}", L("[1]"), L("[1, 2]", "[]"));
    /* minItems past the tuple needs the rest */
    expect("{\"prefixItems\": [{\"const\": 1}], \"items\": {\"const\": 0}, \"minItems\": 3}", L("[1, 0, 0]"),
           L("[1]", "[1, 0]"));
    expect_refused("{\"prefixItems\": [{\"const\": 1}], \"minItems\": 2}", "'minItems' 2 is above the 1 items");
    expect_refused("{\"prefixItems\": {\"const\": 1}}", "#/prefixItems: 'prefixItems' must be a list");
    expect_refused("{\"items\": [{\"type\": \"integer\"}, {\"pattern\": \"a\"}]}",
                   "#/items/1: the keyword 'pattern' is not supported");
}

HARNESS_MAIN("json-schema", HARNESS_TEST(test_primitives), HARNESS_TEST(test_objects),
             HARNESS_TEST(test_arrays_enums_combos), HARNESS_TEST(test_strings), HARNESS_TEST(test_refs),
             HARNESS_TEST(test_refused), HARNESS_TEST(test_public_api), HARNESS_TEST(test_tuples))
