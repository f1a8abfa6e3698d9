/*
 * json_schema — JSON Schema to GBNF.
 *
 * Supported: type (one or a list) string / number / integer / boolean /
 * null / object / array; properties, required, additionalProperties
 * (false, true or a schema); enum, const; items, minItems, maxItems;
 * tuples (prefixItems, or draft-04's items as a list, with items /
 * additionalItems for what follows: absent, no more items are generated;
 * without minItems, every item of the tuple is);
 * minLength, maxLength; anyOf, oneOf (exclusivity not enforced), allOf of
 * one schema; local $ref ("#", "#/$defs/...", "#/definitions/...", any
 * JSON pointer into the document); formats date, time, date-time, uuid
 * (other formats are annotations, as JSON Schema says by default).
 * Keywords that constrain values in ways the grammar does not follow
 * (pattern, minimum, multipleOf, uniqueItems, ...) are an error naming the
 * keyword and where it is, never silently ignored.
 *
 * Choices: properties come out in the order the schema lists them; when an
 * object lists properties and says nothing of additionalProperties, no
 * others are generated (always valid, and what callers expect). Numbers
 * have at most 16 integer and 16 fraction digits and whitespace is at most
 * one newline and 20 blanks, so a small model cannot run away inside one.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"
#include "util/grow.h"
#include "vocab/utf8.h"

/* The rules every converted schema may use. */
#define JSON_PRIMITIVES                                                                                      \
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"                                                                \
    "json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null\n"       \
    "json-object ::= \"{\" ws ( json-string ws \":\" ws json-value ws ( \",\" ws json-string ws \":\" ws "   \
    "json-value ws )* )? \"}\"\n"                                                                            \
    "json-array ::= \"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\"\n"                         \
    "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"                                                         \
    "json-char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"         \
    "json-number ::= json-integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"                       \
    "json-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"                                                \
    "json-boolean ::= \"true\" | \"false\"\n"                                                                \
    "json-null ::= \"null\"\n"

static const char json_primitives[] = JSON_PRIMITIVES;

static const char json_formats[] =
    "json-date ::= [0-9]{4} \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" "
    "json-day31 | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" json-day30 | \"02\" \"-\" json-day28 )\n"
    "json-day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "json-day30 ::= json-day28 | \"29\" | \"30\"\n"
    "json-day31 ::= json-day30 | \"31\"\n"
    "json-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "json-date-time ::= json-date \"T\" json-time\n"
    "json-uuid ::= [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12}\n";

#ifdef TESSERA_HAVE_CJSON

#include <cjson/cJSON.h>

enum {
    MAX_SCHEMA_DEPTH = 64, /* nested schemas (not counting $ref targets) */
    MAX_COUNT = 10000,     /* minItems, maxItems, minLength, maxLength */
    NAME_LEN = 48,
};

/* text as a GBNF literal: quotes, backslashes and control bytes escaped;
 * other UTF-8 kept as is. */
static void sb_literal(tsr_buf *b, const char *text) {
    buf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            buf_put(b, e, 2);
        } else if (*p < 0x20 || *p == 0x7F) {
            buf_printf(b, "\\x%02X", *p);
        } else {
            buf_put(b, (const char *)p, 1);
        }
    }
    buf_put(b, "\"", 1);
}

typedef struct ref_entry {
    char *ref;
    char name[NAME_LEN];
} ref_entry;

typedef struct conv {
    const cJSON *doc;
    tsr_buf rules;
    ref_entry *refs;
    size_t n_refs, refs_cap;
    unsigned counter;
    bool formats_used;
    bool failed;
    /* $refs being expanded since the last character the grammar matches
     * ('{' or '['): meeting one of them again is a left-recursive schema. */
    const char *open_refs[2 * MAX_SCHEMA_DEPTH + 2];
    int n_open, open_base;
} conv;

static int fail(conv *c, const char *path, const char *fmt, ...) TSR_PRINTF(3, 4);
static int fail(conv *c, const char *path, const char *fmt, ...) {
    if (c->failed) return -1;
    c->failed = true;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set("json schema: %s: %s", path, msg);
}

static void new_name(conv *c, const char *kind, char name[NAME_LEN]) {
    snprintf(name, NAME_LEN, "%s-%u", kind, ++c->counter);
}

/* Keywords that say nothing about which values are valid. */
static bool is_annotation(const char *k) {
    static const char *const names[] = {
        "title",    "description",      "default",         "examples",  "$schema", "$id",
        "$comment", "deprecated",       "readOnly",        "writeOnly", "$defs",   "definitions",
        "format",   "contentMediaType", "contentEncoding", "$anchor",   NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(k, names[i])) return true;
    return false;
}

/* Keywords handled for each type; anything else that is not an annotation
 * is reported. */
static bool keyword_known(const char *k, const char *type) {
    static const char *const common[] = {"type", "enum", "const", NULL};
    for (int i = 0; common[i]; i++)
        if (!strcmp(k, common[i])) return true;
    if (is_annotation(k)) return true;
    const char *const *list = NULL;
    static const char *const obj[] = {"properties", "required", "additionalProperties", NULL};
    static const char *const arr[] = {"items", "minItems", "maxItems", "prefixItems", "additionalItems", NULL};
    static const char *const str[] = {"minLength", "maxLength", NULL};
    if (!strcmp(type, "object")) list = obj;
    if (!strcmp(type, "array")) list = arr;
    if (!strcmp(type, "string")) list = str;
    for (int i = 0; list && list[i]; i++)
        if (!strcmp(k, list[i])) return true;
    /* Keywords of other types do not constrain this one (JSON Schema
     * applies them only to values of their type). */
    static const char *const other[] = {"properties", "required",  "additionalProperties",
                                        "items",      "minItems",  "maxItems",
                                        "minLength",  "maxLength", "prefixItems", "additionalItems", NULL};
    for (int i = 0; other[i]; i++)
        if (!strcmp(k, other[i])) return true;
    return false;
}

static int convert(conv *c, const cJSON *s, const char *path, int depth, char name[NAME_LEN]);

/* convert() for a schema the grammar reaches only after matching a
 * character (an array's items, an object's values): a $ref open before that
 * character may recur here without looping. */
static int convert_after_char(conv *c, const cJSON *s, const char *path, int depth, char name[NAME_LEN]) {
    int base = c->open_base;
    c->open_base = c->n_open;
    int rc = convert(c, s, path, depth, name);
    c->open_base = base;
    return rc;
}

/* An integer keyword in 0..MAX_COUNT; absent leaves *out. */
static int get_count(conv *c, const cJSON *s, const char *key, const char *path, long *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return 0;
    /* floor, not a cast: casting 1e300 to long is undefined */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0)
        return fail(c, path, "'%s' must be a non-negative integer", key);
    if (v->valuedouble > MAX_COUNT) return fail(c, path, "'%s' over %d is not supported", key, MAX_COUNT);
    *out = (long)v->valuedouble;
    return 0;
}

static void child_path(char *out, size_t size, const char *path, const char *a, const char *b) {
    if (b)
        snprintf(out, size, "%s/%s/%s", path, a, b);
    else
        snprintf(out, size, "%s/%s", path, a);
}

static int convert_string(conv *c, const cJSON *s, const char *path, char name[NAME_LEN]) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (cJSON_IsString(fmt)) {
        static const char *const formats[] = {"date", "time", "date-time", "uuid", NULL};
        for (int i = 0; formats[i]; i++)
            if (!strcmp(fmt->valuestring, formats[i])) {
                c->formats_used = true;
                new_name(c, "string", name);
                buf_printf(&c->rules, "%s ::= \"\\\"\" json-%s \"\\\"\"\n", name, formats[i]);
                return 0;
            }
    }
    long min = 0, max = -1;
    if (get_count(c, s, "minLength", path, &min) || get_count(c, s, "maxLength", path, &max)) return -1;
    if (min == 0 && max < 0) {
        snprintf(name, NAME_LEN, "json-string");
        return 0;
    }
    if (max >= 0 && max < min) return fail(c, path, "'maxLength' %ld is below 'minLength' %ld", max, min);
    new_name(c, "string", name);
    if (max < 0)
        buf_printf(&c->rules, "%s ::= \"\\\"\" json-char{%ld,} \"\\\"\"\n", name, min);
    else
        buf_printf(&c->rules, "%s ::= \"\\\"\" json-char{%ld,%ld} \"\\\"\"\n", name, min, max);
    return 0;
}

/* A tuple: the schemas of tuple (prefixItems, or items as a list) for the
 * first items, then, when rest is a schema (not false, not absent), more
 * items of it. min/maxItems apply to the whole list: the tuple's items from
 * minItems on are optional (each only after the one before), and a maxItems
 * below the tuple's length cuts it. Without minItems (min < 0) every item
 * of the tuple is generated: valid, and what a caller giving one expects. */
static int convert_tuple(conv *c, const cJSON *tuple, const char *tuple_key, const cJSON *rest,
                         const char *rest_key, long min, long max, const char *path, int depth, char name[NAME_LEN]) {
    long n = cJSON_GetArraySize(tuple);
    long k = max >= 0 && max < n ? max : n;
    if (min < 0) min = k;
    bool more = rest && !cJSON_IsFalse(rest) && (max < 0 || max > k);
    if (min > k && !more)
        return fail(c, path, "'minItems' %ld is above the %ld items of '%s' and no more items are allowed", min, k,
                    tuple_key);
    char rest_name[NAME_LEN] = "json-value", p[512];
    if (more) {
        child_path(p, sizeof p, path, rest_key, NULL);
        if (convert_after_char(c, rest, p, depth + 1, rest_name) < 0) return -1;
    }
    tsr_buf body = {0};
    long open = 0;
    for (long i = 0; i < k; i++) {
        char item[NAME_LEN], idx[24];
        snprintf(idx, sizeof idx, "%ld", i);
        child_path(p, sizeof p, path, tuple_key, idx);
        if (convert_after_char(c, cJSON_GetArrayItem(tuple, (int)i), p, depth + 1, item) < 0) {
            buf_free(&body);
            return -1;
        }
        if (i >= min) { /* optional from here: closed after the rest */
            buf_printf(&body, "( ");
            open++;
        }
        buf_printf(&body, "%s%s ws ", i ? "\",\" ws " : "", item);
    }
    if (more) {
        long lo = min > k ? min - k : 0;
        if (max < 0)
            buf_printf(&body, "( \",\" ws %s ws ){%ld,} ", rest_name, lo);
        else
            buf_printf(&body, "( \",\" ws %s ws ){%ld,%ld} ", rest_name, lo, max - k);
    }
    for (long i = 0; i < open; i++) buf_printf(&body, ")? ");
    if (body.oom) {
        buf_free(&body);
        return fail(c, path, "out of memory");
    }
    new_name(c, "tuple", name);
    buf_printf(&c->rules, "%s ::= \"[\" ws %s\"]\"\n", name, body.p ? body.p : "");
    buf_free(&body);
    return 0;
}

static int convert_array(conv *c, const cJSON *s, const char *path, int depth, char name[NAME_LEN]) {
    long min = 0, max = -1;
    if (get_count(c, s, "minItems", path, &min) || get_count(c, s, "maxItems", path, &max)) return -1;
    if (max >= 0 && max < min) return fail(c, path, "'maxItems' %ld is below 'minItems' %ld", max, min);
    char item[NAME_LEN] = "json-value";
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    char p[512];
    if (prefix && !cJSON_IsArray(prefix)) {
        child_path(p, sizeof p, path, "prefixItems", NULL);
        return fail(c, p, "'prefixItems' must be a list of schemas");
    }
    long tuple_min = cJSON_GetObjectItemCaseSensitive(s, "minItems") ? min : -1;
    if (prefix && cJSON_GetArraySize(prefix) > 0)
        return convert_tuple(c, prefix, "prefixItems", items, "items", tuple_min, max, path, depth, name);
    if (cJSON_IsArray(items) && cJSON_GetArraySize(items) > 0)
        return convert_tuple(c, items, "items", cJSON_GetObjectItemCaseSensitive(s, "additionalItems"),
                             "additionalItems", tuple_min, max, path, depth, name);
    if (cJSON_IsArray(items)) items = NULL; /* an empty tuple says nothing */
    if (items) {
        child_path(p, sizeof p, path, "items", NULL);
        if (convert_after_char(c, items, p, depth + 1, item) < 0) return -1;
    }
    new_name(c, "array", name);
    if (max == 0) {
        buf_printf(&c->rules, "%s ::= \"[\" ws \"]\"\n", name);
        return 0;
    }
    /* The items after the first: ( "," ws item ws ){lo,hi} */
    long lo = min > 0 ? min - 1 : 0;
    char rest[96];
    if (max < 0)
        snprintf(rest, sizeof rest, "{%ld,}", lo);
    else
        snprintf(rest, sizeof rest, "{%ld,%ld}", lo, max - 1);
    if (min == 0)
        buf_printf(&c->rules, "%s ::= \"[\" ws ( %s ws ( \",\" ws %s ws )%s )? \"]\"\n", name, item, item,
                  rest);
    else
        buf_printf(&c->rules, "%s ::= \"[\" ws %s ws ( \",\" ws %s ws )%s \"]\"\n", name, item, item, rest);
    return 0;
}

static bool in_required(const cJSON *required, const char *key) {
    const cJSON *r;
    cJSON_ArrayForEach(r, required) if (cJSON_IsString(r) && !strcmp(r->valuestring, key)) return true;
    return false;
}

typedef struct prop {
    const char *key;
    char value[NAME_LEN];
    bool required;
} prop;

/* An object schema: its properties in order, required ones first as
 * llama.cpp orders them, then optional ones and additionalProperties; one
 * pass (~90 lines) since the rule text is built as the keys are read. */
static int convert_object(conv *c, const cJSON *s, const char *path, int depth, char name[NAME_LEN]) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, path, "'properties' must be an object");
    if (required && !cJSON_IsArray(required)) return fail(c, path, "'required' must be an array of names");
    const cJSON *r;
    cJSON_ArrayForEach(r, required) if (!cJSON_IsString(r)) return fail(c, path,
                                                                        "'required' must hold strings");
    /* Extra properties: a value rule, or none. */
    char extra[NAME_LEN] = "";
    if (!addl) {
        if (!props) snprintf(extra, NAME_LEN, "json-value");
    } else if (cJSON_IsTrue(addl)) {
        snprintf(extra, NAME_LEN, "json-value");
    } else if (cJSON_IsObject(addl)) {
        char p[512];
        child_path(p, sizeof p, path, "additionalProperties", NULL);
        if (convert_after_char(c, addl, p, depth + 1, extra) < 0) return -1;
    } else if (!cJSON_IsFalse(addl)) {
        return fail(c, path, "'additionalProperties' must be a boolean or a schema");
    }
    /* Listed properties, then required names the list lacks (any value). */
    size_t n = (size_t)cJSON_GetArraySize(props) + (size_t)cJSON_GetArraySize(required);
    prop *ps = calloc(n ? n : 1, sizeof *ps);
    if (!ps) return fail(c, path, "out of memory");
    size_t np = 0;
    int rc = -1;
    const cJSON *pr;
    cJSON_ArrayForEach(pr, props) {
        char p[512];
        child_path(p, sizeof p, path, "properties", pr->string);
        ps[np].key = pr->string;
        ps[np].required = in_required(required, pr->string);
        if (convert_after_char(c, pr, p, depth + 1, ps[np].value) < 0) goto done;
        np++;
    }
    cJSON_ArrayForEach(r, required) {
        if (props && cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) continue;
        if (cJSON_IsFalse(addl)) {
            fail(c, path, "required property '%s' is not in 'properties' and additionalProperties is false",
                 r->valuestring);
            goto done;
        }
        ps[np].key = r->valuestring;
        ps[np].required = true;
        snprintf(ps[np].value, NAME_LEN, "%s", extra[0] ? extra : "json-value");
        np++;
    }
    /* kv_i: "key" ws ":" ws value. A_i: the members from i on, none
     * written yet; B_i: the same after one was written (each starts with
     * a comma). Optional members may be skipped; extras come last. */
    unsigned id = ++c->counter;
    for (size_t i = 0; i < np; i++) {
        cJSON *key = cJSON_CreateStringReference(ps[i].key);
        char *key_json = key ? cJSON_PrintUnformatted(key) : NULL;
        cJSON_Delete(key);
        if (!key_json) {
            fail(c, path, "out of memory");
            goto done;
        }
        buf_printf(&c->rules, "object-%u-kv%zu ::= ", id, i);
        sb_literal(&c->rules, key_json);
        buf_printf(&c->rules, " ws \":\" ws %s\n", ps[i].value);
        free(key_json);
    }
    if (extra[0]) {
        buf_printf(&c->rules, "object-%u-extra ::= json-string ws \":\" ws %s\n", id, extra);
        buf_printf(&c->rules, "object-%u-b%zu ::= ( \",\" ws object-%u-extra ws )*\n", id, np, id);
        buf_printf(&c->rules, "object-%u-a%zu ::= ( object-%u-extra ws object-%u-b%zu )?\n", id, np, id, id,
                  np);
    } else {
        buf_printf(&c->rules, "object-%u-b%zu ::= \"\"\nobject-%u-a%zu ::= \"\"\n", id, np, id, np);
    }
    for (size_t i = np; i-- > 0;) {
        buf_printf(&c->rules, "object-%u-b%zu ::= \",\" ws object-%u-kv%zu ws object-%u-b%zu%s", id, i, id, i,
                  id, i + 1, ps[i].required ? "\n" : "");
        if (!ps[i].required) buf_printf(&c->rules, " | object-%u-b%zu\n", id, i + 1);
        buf_printf(&c->rules, "object-%u-a%zu ::= object-%u-kv%zu ws object-%u-b%zu%s", id, i, id, i, id,
                  i + 1, ps[i].required ? "\n" : "");
        if (!ps[i].required) buf_printf(&c->rules, " | object-%u-a%zu\n", id, i + 1);
    }
    snprintf(name, NAME_LEN, "object-%u", id);
    buf_printf(&c->rules, "%s ::= \"{\" ws object-%u-a0 \"}\"\n", name, id);
    rc = 0;
done:
    free(ps);
    return rc;
}

/* One type of a schema. */
static int convert_type(conv *c, const cJSON *s, const char *type, const char *path, int depth,
                        char name[NAME_LEN]) {
    const cJSON *k;
    cJSON_ArrayForEach(k, s) if (!keyword_known(k->string, type)) return fail(
        c, path, "the keyword '%s' is not supported", k->string);
    if (!strcmp(type, "string")) return convert_string(c, s, path, name);
    if (!strcmp(type, "object")) return convert_object(c, s, path, depth, name);
    if (!strcmp(type, "array")) return convert_array(c, s, path, depth, name);
    static const char *const simple[] = {"number", "integer", "boolean", "null", NULL};
    for (int i = 0; simple[i]; i++)
        if (!strcmp(type, simple[i])) {
            snprintf(name, NAME_LEN, "json-%s", type);
            return 0;
        }
    return fail(c, path, "unknown type '%.64s' (string, number, integer, boolean, null, object, array)",
                type);
}

/* A new rule "name ::= names[0] | names[1] | ...". */
static void emit_alternation(conv *c, const char *kind, char (*names)[NAME_LEN], int n, char name[NAME_LEN]) {
    new_name(c, kind, name);
    buf_printf(&c->rules, "%s ::=", name);
    for (int i = 0; i < n; i++)
        buf_printf(&c->rules, "%s %s", i ? " |" : "", names[i]);
    buf_put(&c->rules, "\n", 1);
}

/* Rule `name`: one alternative per item of list, a non-empty array. With
 * typed NULL the items are schemas (anyOf / oneOf / allOf under key); else
 * they are type names of the schema typed (a "type" list). */
static int convert_list(conv *c, const cJSON *list, const cJSON *typed, const char *key, const char *path, int depth,
                        char name[NAME_LEN]) {
    int n = cJSON_GetArraySize(list);
    char(*names)[NAME_LEN] = calloc((size_t)n, NAME_LEN);
    if (!names) return fail(c, path, "out of memory");
    int i = 0, rc = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, list) {
        if (typed && !cJSON_IsString(item)) {
            rc = fail(c, path, "'type' must list type names");
        } else if (typed) {
            rc = convert_type(c, typed, item->valuestring, path, depth, names[i]);
        } else {
            char p[512], idx[16];
            snprintf(idx, sizeof idx, "%d", i);
            child_path(p, sizeof p, path, key, idx);
            rc = convert(c, item, p, depth + 1, names[i]);
        }
        if (rc < 0) break;
        i++;
    }
    if (rc >= 0) emit_alternation(c, typed ? "types" : "alt", names, n, name);
    free(names);
    return rc < 0 ? -1 : 0;
}

/* Alternatives of a list of schemas (anyOf / oneOf / allOf). */
static int convert_alternatives(conv *c, const cJSON *list, const char *key, const char *path, int depth,
                                char name[NAME_LEN]) {
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return fail(c, path, "'%s' must be a non-empty array of schemas", key);
    return convert_list(c, list, NULL, key, path, depth, name);
}

/* The value a local reference points at ("#/a/b~1c"), or NULL. */
static const cJSON *resolve_ref(const cJSON *doc, const char *ref) {
    if (ref[0] != '#') return NULL;
    const cJSON *cur = doc;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char tok[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            if (n + 1 < sizeof tok) tok[n++] = ch;
        }
        tok[n] = '\0';
        if (cJSON_IsArray(cur)) {
            char *end;
            long i = strtol(tok, &end, 10);
            cur = *end || end == tok ? NULL : cJSON_GetArrayItem(cur, (int)i);
        } else {
            cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
        }
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

static int convert_ref(conv *c, const cJSON *ref, const char *path, int depth, char name[NAME_LEN]) {
    if (!cJSON_IsString(ref)) return fail(c, path, "'$ref' must be a string");
    for (int i = c->open_base; i < c->n_open; i++)
        if (!strcmp(c->open_refs[i], ref->valuestring))
            return fail(c, path,
                        "'$ref' '%.128s' leads back to itself before any character is matched "
                        "(a left-recursive schema)",
                        ref->valuestring);
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref->valuestring)) {
            memcpy(name, c->refs[i].name, NAME_LEN);
            return 0;
        }
    if (ref->valuestring[0] != '#')
        return fail(c, path, "'$ref' '%.128s' is not local (only '#...' references are supported)",
                    ref->valuestring);
    const cJSON *target = resolve_ref(c->doc, ref->valuestring);
    if (!target) return fail(c, path, "'$ref' '%.128s' points at nothing", ref->valuestring);
    if (ARRAY_GROW(c->refs, c->refs_cap, c->n_refs + 1, 8) < 0) return fail(c, path, "out of memory");
    /* Name it before converting, so a recursive reference finds it. */
    ref_entry *e = &c->refs[c->n_refs];
    e->ref = strdup(ref->valuestring);
    if (!e->ref) return fail(c, path, "out of memory");
    new_name(c, "ref", e->name);
    memcpy(name, e->name, NAME_LEN);
    c->n_refs++;
    char target_name[NAME_LEN];
    char p[512];
    snprintf(p, sizeof p, "%.256s", ref->valuestring);
    if (c->n_open == (int)(sizeof c->open_refs / sizeof c->open_refs[0]))
        return fail(c, path, "'$ref's nested deeper than %d levels", c->n_open);
    c->open_refs[c->n_open++] = e->ref;
    int rc = convert(c, target, p, depth + 1, target_name);
    c->n_open--;
    if (rc < 0) return -1;
    buf_printf(&c->rules, "%s ::= %s\n", name, target_name);
    return 0;
}

static int convert(conv *c, const cJSON *s, const char *path, int depth, char name[NAME_LEN]) {
    if (depth > MAX_SCHEMA_DEPTH)
        return fail(c, path, "schemas nested deeper than %d levels", MAX_SCHEMA_DEPTH);
    if (cJSON_IsTrue(s)) {
        snprintf(name, NAME_LEN, "json-value");
        return 0;
    }
    if (cJSON_IsFalse(s)) return fail(c, path, "the schema 'false' allows no value");
    if (!cJSON_IsObject(s)) return fail(c, path, "a schema must be an object or a boolean");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) return convert_ref(c, ref, path, depth, name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (v || en) {
        if (en && (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0))
            return fail(c, path, "'enum' must be a non-empty array");
        new_name(c, v ? "const" : "enum", name);
        buf_printf(&c->rules, "%s ::=", name);
        const cJSON *item = v;
        int i = 0;
        for (item = v ? v : en->child; item; item = v ? NULL : item->next) {
            char *js = cJSON_PrintUnformatted(item);
            if (!js) return fail(c, path, "out of memory");
            buf_put(&c->rules, i ? " | " : " ", i ? 3 : 1);
            i++;
            sb_literal(&c->rules, js);
            free(js);
        }
        buf_put(&c->rules, "\n", 1);
        return 0;
    }
    static const char *const combos[] = {"anyOf", "oneOf", "allOf", NULL};
    for (int i = 0; combos[i]; i++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(s, combos[i]);
        if (!list) continue;
        const cJSON *k;
        cJSON_ArrayForEach(k, s) if (strcmp(k->string, combos[i]) && !is_annotation(k->string)) return fail(
            c, path, "'%s' together with '%s' is not supported", combos[i], k->string);
        if (i == 2 && cJSON_GetArraySize(list) != 1)
            return fail(c, path, "'allOf' of more than one schema is not supported");
        return convert_alternatives(c, list, combos[i], path, depth, name);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!type) {
        /* Untyped: what the keywords imply, else any value. */
        if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
            cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") ||
            cJSON_GetObjectItemCaseSensitive(s, "required"))
            return convert_type(c, s, "object", path, depth, name);
        if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
            return convert_type(c, s, "array", path, depth, name);
        const cJSON *k;
        cJSON_ArrayForEach(k, s) if (!keyword_known(k->string, "")) return fail(
            c, path, "the keyword '%s' is not supported", k->string);
        snprintf(name, NAME_LEN, "json-value");
        return 0;
    }
    if (cJSON_IsString(type)) return convert_type(c, s, type->valuestring, path, depth, name);
    if (!cJSON_IsArray(type) || cJSON_GetArraySize(type) == 0)
        return fail(c, path, "'type' must be a type name or a non-empty array of them");
    return convert_list(c, type, s, "type", path, depth, name);
}

/* path + "/" + key, with bytes that are not printable ASCII as \xNN (the
 * key may be the invalid UTF-8 being reported). */
static void child_path_escaped(char *out, size_t size, const char *path, const char *key) {
    size_t n = (size_t)snprintf(out, size, "%.480s/", path);
    if (n >= size) n = size - 1;
    for (const unsigned char *k = (const unsigned char *)key; *k && n + 5 < size; k++)
        if (*k >= 0x20 && *k < 0x7F)
            out[n++] = (char)*k, out[n] = '\0';
        else
            n += (size_t)snprintf(out + n, size - n, "\\x%02X", *k);
}

/* Offset of the first invalid UTF-8 sequence in s, or -1. */
static long utf8_invalid_at(const char *s) {
    size_t n = strlen(s), off = 0;
    while (off < n) {
        size_t at = off;
        if (utf8_decode(s, n, &off) == UTF8_REPLACEMENT && off == at + 1) return (long)at;
    }
    return -1;
}

/* JSON text is UTF-8 (RFC 8259): refuse a schema with an invalid name or
 * string anywhere, naming where, rather than a GBNF error about a line of
 * generated grammar. */
static int check_utf8(conv *c, const cJSON *node, const char *path, int depth) {
    if (depth > 4 * MAX_SCHEMA_DEPTH) return fail(c, path, "JSON nested deeper than %d levels", 4 * MAX_SCHEMA_DEPTH);
    long at;
    if (cJSON_IsString(node) && (at = utf8_invalid_at(node->valuestring)) >= 0)
        return fail(c, path, "invalid UTF-8 in a string (byte 0x%02X at offset %ld)",
                    (unsigned char)node->valuestring[at], at);
    const cJSON *child;
    int i = 0;
    cJSON_ArrayForEach(child, node) {
        char p[512];
        if (cJSON_IsObject(node)) {
            child_path_escaped(p, sizeof p, path, child->string);
            if ((at = utf8_invalid_at(child->string)) >= 0)
                return fail(c, p, "invalid UTF-8 in a name (byte 0x%02X at offset %ld)",
                            (unsigned char)child->string[at], at);
        } else {
            snprintf(p, sizeof p, "%.480s/%d", path, i);
        }
        if (check_utf8(c, child, p, depth + 1) < 0) return -1;
        i++;
    }
    return 0;
}

char *grammar_json_schema_to_gbnf(const char *schema, size_t len) {
    cJSON *doc = cJSON_ParseWithLength(schema, len);
    if (!doc) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= schema && at <= schema + len ? (long)(at - schema) : -1;
        error_set("json schema: not valid JSON (at byte %ld)", off);
        return NULL;
    }
    conv c = {.doc = doc};
    char root[NAME_LEN];
    char *out = NULL;
    if (check_utf8(&c, doc, "#", 0) == 0 && convert(&c, doc, "#", 0, root) == 0) {
        tsr_buf b = {0};
        buf_printf(&b, "root ::= %s\n", root);
        buf_put(&b, c.rules.p ? c.rules.p : "", c.rules.len);
        buf_put(&b, json_primitives, sizeof json_primitives - 1);
        if (c.formats_used) buf_put(&b, json_formats, sizeof json_formats - 1);
        if (b.oom || c.rules.oom) {
            error_set("json schema: out of memory");
            free(b.p);
        } else {
            out = b.p;
        }
    }
    for (size_t i = 0; i < c.n_refs; i++)
        free(c.refs[i].ref);
    free(c.refs);
    free(c.rules.p);
    cJSON_Delete(doc);
    return out;
}

#else /* !TESSERA_HAVE_CJSON */

char *grammar_json_schema_to_gbnf(const char *schema, size_t len) {
    (void)schema;
    (void)len;
    (void)json_formats;
    error_set("json schema: this build of Tessera has no JSON parser (install libcjson-dev and rebuild)");
    return NULL;
}

#endif

const char *grammar_json_object_gbnf(void) {
    static const char text[] = "root ::= json-object\n" JSON_PRIMITIVES;
    return text;
}
