/* Unit tests of core/src/chat/tool_parse.c: each format's calls come out
 * with name and arguments, text around them stays content, malformed calls
 * stay text (never dropped, never a crash), the generic fallback only takes
 * known tool names, and the streaming hold-back point is where a call may
 * begin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "chat/tool_parse.h"

static const char *const KNOWN[] = {"get_weather", "add"};

/* Parse text; check the content and the calls "name:args" given as a list
 * ending in NULL. */
static void expect_parse(chat_tool_format f, const char *text, const char *content, const char *reasoning,
                         const char *const *want) {
    chat_parsed p;
    int rc = chat_tool_parse(f, text, strlen(text), KNOWN, 2, &p);
    EXPECT(rc == 0, "[%s] parse failed for %s", chat_tool_format_name(f), text);
    if (rc != 0) return;
    EXPECT(!strcmp(p.content, content), "[%s] content %s, want %s (text %s)", chat_tool_format_name(f),
           p.content, content, text);
    if (reasoning)
        EXPECT(p.reasoning && !strcmp(p.reasoning, reasoning), "[%s] reasoning %s, want %s",
               chat_tool_format_name(f), p.reasoning ? p.reasoning : "(null)", reasoning);
    else
        EXPECT(!p.reasoning, "[%s] unexpected reasoning %s", chat_tool_format_name(f), p.reasoning);
    size_t n = 0;
    while (want[n]) n++;
    EXPECT(p.n_calls == n, "[%s] %zu calls, want %zu (text %s)", chat_tool_format_name(f), p.n_calls, n, text);
    for (size_t i = 0; i < n && i < p.n_calls; i++) {
        char got[512];
        snprintf(got, sizeof got, "%s:%s", p.calls[i].name, p.calls[i].arguments);
        EXPECT(!strcmp(got, want[i]), "[%s] call %zu is %s, want %s", chat_tool_format_name(f), i, got, want[i]);
        /* Every argument text must itself be one valid JSON object. */
        size_t al = strlen(p.calls[i].arguments);
        EXPECT(chat_json_value_end(p.calls[i].arguments, al) == al && p.calls[i].arguments[0] == '{',
               "arguments are not one JSON object: %s", p.calls[i].arguments);
    }
    chat_parsed_free(&p);
}

#define CALLS(...) ((const char *const[]){__VA_ARGS__, NULL})
static const char *const NONE[] = {NULL};

TEST(test_json_scanner) {
    static const char *const good[] = {"{}", "[]", " {\"a\": [1, -2.5e+3, true, false, null]}", "\"x\\u00e9\\n\"",
                                       "0", "-0.5", "{\"a\":{\"b\":{\"c\":[]}}}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        EXPECT(chat_json_value_end(good[i], strlen(good[i])) == strlen(good[i]), "valid JSON rejected: %s",
               good[i]);
    static const char *const bad[] = {"{", "{\"a\" 1}", "{\"a\":}", "[1,]", "01", "1.", "tru", "\"\\x\"",
                                      "\"\\u12G4\"", "{'a': 1}", "\"a\nb\"", "{\"a\":1,}", "-", "[1 2]", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT(chat_json_value_end(bad[i], strlen(bad[i])) != strlen(bad[i]) || !bad[i][0],
               "invalid JSON accepted: %s", bad[i]);
    /* Nesting beyond the bound is refused, not recursed into. */
    size_t depth = 10000;
    char *deep = malloc(depth * 2 + 1);
    for (size_t i = 0; i < depth; i++) {
        deep[i] = '[';
        deep[depth * 2 - 1 - i] = ']';
    }
    deep[depth * 2] = '\0';
    EXPECT(chat_json_value_end(deep, depth * 2) == 0, "10000-deep array accepted");
    chat_parsed p;
    EXPECT(chat_tool_parse(TESSERA_TOOLS_LLAMA3, deep, depth * 2, KNOWN, 2, &p) == 0 && p.n_calls == 0,
           "deep array in llama3");
    chat_parsed_free(&p);
    free(deep);
    /* A value ends where it ends: trailing text is not part of it. */
    EXPECT(chat_json_value_end("{\"a\":1} tail", 12) == 7, "value end with a tail");
}

TEST(test_hermes) {
    expect_parse(TESSERA_TOOLS_HERMES,
                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
                 NULL, CALLS("get_weather:{\"city\": \"Paris\"}"));
    expect_parse(TESSERA_TOOLS_HERMES,
                 "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                 "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n"
                 "</tool_call>",
                 "Let me check.", NULL,
                 CALLS("get_weather:{\"city\": \"Paris\"}", "add:{\"a\": 1, \"b\": 2}"));
    /* No closing tag at the end of the output (generation stopped): still a call. */
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": {}}", "", NULL,
                 CALLS("add:{}"));
    /* Arguments absent: an empty object. */
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\"}</tool_call>", "", NULL, CALLS("add:{}"));
    /* Malformed: broken JSON, missing name, non-object arguments; kept as text. */
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": {]</tool_call> ok",
                 "<tool_call>{\"name\": \"add\", \"arguments\": {]</tool_call> ok", NULL, NONE);
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>",
                 "<tool_call>{\"arguments\": {}}</tool_call>", NULL, NONE);
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": [1]}</tool_call>",
                 "<tool_call>{\"name\": \"add\", \"arguments\": [1]}</tool_call>", NULL, NONE);
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>", "<tool_call>", NULL, NONE);
    /* One or two closing braces short before </tool_call> (small models do
     * that): repaired; three short or no close tag: text. */
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}\n</tool_call>", "", NULL,
                 CALLS("add:{\"a\": 1}"));
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": {\"b\": 1}</tool_call>",
                 "", NULL, CALLS("add:{\"a\": {\"b\": 1}}"));
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": {\"b\": 1</tool_call>",
                 "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": {\"b\": 1</tool_call>", NULL, NONE);
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}",
                 "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}", NULL, NONE);
    /* One bad call and one good one: the good one still counts. */
    expect_parse(TESSERA_TOOLS_HERMES,
                 "<tool_call>{oops}</tool_call><tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 1}}</tool_call>",
                 "<tool_call>{oops}</tool_call>", NULL, CALLS("add:{\"a\": 1}"));
    expect_parse(TESSERA_TOOLS_HERMES, "Just text, no call.", "Just text, no call.", NULL, NONE);
    /* Escapes in names are decoded. */
    expect_parse(TESSERA_TOOLS_HERMES, "<tool_call>{\"name\": \"a\\u0064d\", \"arguments\": {}}</tool_call>", "", NULL,
                 CALLS("add:{}"));
}

TEST(test_qwen3_coder) {
    expect_parse(TESSERA_TOOLS_QWEN3_CODER,
                 "I will look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis, \"FR\"\n</parameter>\n"
                 "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n"
                 "</function>\n</tool_call>",
                 "I will look.", NULL,
                 CALLS("get_weather:{\"city\":\"Paris, \\\"FR\\\"\",\"days\":3,\"opts\":{\"unit\": \"C\"}}"));
    /* Multi-line string values keep their inner newlines. */
    expect_parse(TESSERA_TOOLS_QWEN3_CODER,
                 "<tool_call>\n<function=add>\n<parameter=text>\nline1\nline2\n</parameter>\n</function>\n</tool_call>",
                 "", NULL, CALLS("add:{\"text\":\"line1\\nline2\"}"));
    expect_parse(TESSERA_TOOLS_QWEN3_CODER, "<tool_call>\n<function=add>\n</function>\n</tool_call>", "", NULL,
                 CALLS("add:{}"));
    /* Unterminated parameter and empty name: text. */
    expect_parse(TESSERA_TOOLS_QWEN3_CODER, "<tool_call>\n<function=add>\n<parameter=a>\n1\n",
                 "<tool_call>\n<function=add>\n<parameter=a>\n1\n", NULL, NONE);
    expect_parse(TESSERA_TOOLS_QWEN3_CODER, "<tool_call><function=><parameter=a>1</parameter></function></tool_call>",
                 "<tool_call><function=><parameter=a>1</parameter></function></tool_call>", NULL, NONE);
    /* The Hermes JSON body inside <tool_call> is understood too. */
    expect_parse(TESSERA_TOOLS_QWEN3_CODER, "<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>", "", NULL,
                 CALLS("add:{}"));
}

TEST(test_llama3) {
    expect_parse(TESSERA_TOOLS_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "", NULL,
                 CALLS("get_weather:{\"city\": \"Oslo\"}"));
    expect_parse(TESSERA_TOOLS_LLAMA3,
                 "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1}}; {\"name\": \"add\", \"parameters\": {}}",
                 "", NULL, CALLS("add:{\"a\": 1}", "add:{}"));
    /* Prose, or JSON followed by prose: not a call. */
    expect_parse(TESSERA_TOOLS_LLAMA3, "The weather is fine.", "The weather is fine.", NULL, NONE);
    expect_parse(TESSERA_TOOLS_LLAMA3, "{\"name\": \"add\", \"parameters\": {}} and more",
                 "{\"name\": \"add\", \"parameters\": {}} and more", NULL, NONE);
    expect_parse(TESSERA_TOOLS_LLAMA3, "{\"name\": \"add\", \"parameters\": {", "{\"name\": \"add\", \"parameters\": {",
                 NULL, NONE);
}

TEST(test_mistral) {
    expect_parse(TESSERA_TOOLS_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", "", NULL,
                 CALLS("get_weather:{\"city\": \"Rome\"}"));
    expect_parse(TESSERA_TOOLS_MISTRAL,
                 "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}[TOOL_CALLS]add[ARGS]{\"a\": 2}", "Sure.", NULL,
                 CALLS("get_weather:{\"city\": \"Rome\"}", "add:{\"a\": 2}"));
    expect_parse(TESSERA_TOOLS_MISTRAL,
                 "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": \"abc123def\"}, "
                 "{\"name\": \"get_weather\", \"arguments\": {}}]",
                 "", NULL, CALLS("add:{\"a\": 1}", "get_weather:{}"));
    chat_parsed p;
    const char *t = "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {}, \"id\": \"abc123def\"}]";
    EXPECT(chat_tool_parse(TESSERA_TOOLS_MISTRAL, t, strlen(t), KNOWN, 2, &p) == 0 && p.n_calls == 1 &&
              p.calls[0].id && !strcmp(p.calls[0].id, "abc123def"),
           "mistral call id");
    chat_parsed_free(&p);
    t = "[TOOL_CALLS]add[CALL_ID]x9[ARGS]{}";
    EXPECT(chat_tool_parse(TESSERA_TOOLS_MISTRAL, t, strlen(t), KNOWN, 2, &p) == 0 && p.n_calls == 1 &&
              !strcmp(p.calls[0].name, "add") && p.calls[0].id && !strcmp(p.calls[0].id, "x9"),
           "mistral [CALL_ID]");
    chat_parsed_free(&p);
    expect_parse(TESSERA_TOOLS_MISTRAL, "[TOOL_CALLS]add{\"a\": 1}", "[TOOL_CALLS]add{\"a\": 1}", NULL, NONE);
    expect_parse(TESSERA_TOOLS_MISTRAL, "[TOOL_CALLS]add[ARGS]{\"a\": ", "[TOOL_CALLS]add[ARGS]{\"a\": ", NULL, NONE);
    expect_parse(TESSERA_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": 3}]", "[TOOL_CALLS][{\"name\": 3}]", NULL, NONE);
}

TEST(test_harmony) {
    expect_parse(TESSERA_TOOLS_HARMONY,
                 "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                 "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Tokyo\"}<|call|>",
                 "", "Need the weather.", CALLS("get_weather:{\"city\": \"Tokyo\"}"));
    expect_parse(TESSERA_TOOLS_HARMONY,
                 "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi there.",
                 "Hi there.", "Think.", NONE);
    /* The recipient in the header before the channel. */
    expect_parse(TESSERA_TOOLS_HARMONY,
                 "<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 1}<|call|>", "",
                 NULL, CALLS("add:{\"a\": 1}"));
    /* Broken arguments: the body is content. */
    expect_parse(TESSERA_TOOLS_HARMONY, "<|channel|>commentary to=functions.add<|message|>{\"a\": <|call|>", "{\"a\": ",
                 NULL, NONE);
    expect_parse(TESSERA_TOOLS_HARMONY, "plain text", "plain text", NULL, NONE);
}

TEST(test_generic) {
    expect_parse(TESSERA_TOOLS_GENERIC, "{\"tool_call\": {\"name\": \"add\", \"arguments\": {\"a\": 1}}}", "", NULL,
                 CALLS("add:{\"a\": 1}"));
    expect_parse(TESSERA_TOOLS_GENERIC,
                 " {\"tool_calls\": [{\"name\": \"add\", \"arguments\": {}}, {\"type\": \"function\", \"function\": "
                 "{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Lima\\\"}\"}}]}",
                 "", NULL, CALLS("add:{}", "get_weather:{\"city\":\"Lima\"}"));
    expect_parse(TESSERA_TOOLS_GENERIC, "```json\n{\"name\": \"add\", \"arguments\": {\"b\": 2}}\n```", "", NULL,
                 CALLS("add:{\"b\": 2}"));
    /* Unknown names, or JSON that is just data: content. */
    expect_parse(TESSERA_TOOLS_GENERIC, "{\"name\": \"rm_rf\", \"arguments\": {}}", "{\"name\": \"rm_rf\", \"arguments\": {}}",
                 NULL, NONE);
    expect_parse(TESSERA_TOOLS_GENERIC, "{\"answer\": 42}", "{\"answer\": 42}", NULL, NONE);
    /* Every format falls back to it. */
    expect_parse(TESSERA_TOOLS_HERMES, "{\"name\": \"add\", \"arguments\": {}}", "", NULL, CALLS("add:{}"));
    chat_parsed p;
    const char *t = "{\"name\": \"add\", \"arguments\": {}}";
    EXPECT(chat_tool_parse(TESSERA_TOOLS_GENERIC, t, strlen(t), NULL, 0, &p) == 0 && p.n_calls == 0,
           "generic call accepted with no tools offered");
    chat_parsed_free(&p);
    EXPECT(chat_tool_parse(TESSERA_TOOLS_HERMES, NULL, 0, NULL, 0, &p) == 0 && p.content && !p.content[0],
           "NULL text");
    chat_parsed_free(&p);
}

TEST(test_detect) {
    static const struct {
        const char *file;
        chat_tool_format want;
    } cases[] = {
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", TESSERA_TOOLS_HERMES},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TESSERA_TOOLS_HERMES},
        {"Qwen-Qwen3-0.6B.jinja", TESSERA_TOOLS_HERMES},
        {"Qwen3-Coder.jinja", TESSERA_TOOLS_QWEN3_CODER},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TESSERA_TOOLS_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", TESSERA_TOOLS_LLAMA3},
        {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", TESSERA_TOOLS_MISTRAL},
        {"openai-gpt-oss-120b.jinja", TESSERA_TOOLS_HARMONY},
        {"google-gemma-2-2b-it.jinja", TESSERA_TOOLS_GENERIC},
    };
    EXPECT(chat_tool_format_detect(NULL) == TESSERA_TOOLS_GENERIC, "NULL template");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "templates/%s", cases[i].file);
        harness_path path = harness_shared_file(rel);
        FILE *fp = fopen(path.s, "rb");
        EXPECT(fp != NULL, "cannot open %s", path.s);
        if (!fp) continue;
        static char text[1 << 17];
        size_t n = fread(text, 1, sizeof text - 1, fp);
        fclose(fp);
        text[n] = '\0';
        chat_tool_format f = chat_tool_format_detect(text);
        EXPECT(f == cases[i].want, "%s detected as %s, want %s", cases[i].file, chat_tool_format_name(f),
               chat_tool_format_name(cases[i].want));
    }
}

TEST(test_hold) {
    static const struct {
        chat_tool_format f;
        const char *text;
        size_t want;
    } cases[] = {
        {TESSERA_TOOLS_HERMES, "Hello there", 11},
        {TESSERA_TOOLS_HERMES, "Hello <tool", 6},      /* may begin <tool_call> */
        {TESSERA_TOOLS_HERMES, "Hello <tool_call>{", 6},
        {TESSERA_TOOLS_HERMES, "Hello <b>", 9},        /* cannot */
        {TESSERA_TOOLS_HERMES, "Hi <", 3},
        {TESSERA_TOOLS_HERMES, "  {\"name\"", 0},      /* bare JSON: the generic fallback */
        {TESSERA_TOOLS_HERMES, "  ", 0},
        {TESSERA_TOOLS_QWEN3_CODER, "ok <function=a>", 3},
        {TESSERA_TOOLS_MISTRAL, "Sure[TOOL_", 4},
        {TESSERA_TOOLS_MISTRAL, "Sure [x]", 8},
        {TESSERA_TOOLS_LLAMA3, "The answer", 10},
        {TESSERA_TOOLS_HARMONY, "<|channel|>", 0},
        {TESSERA_TOOLS_GENERIC, "Plain < text", 12},
        {TESSERA_TOOLS_GENERIC, "```json", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t got = chat_tool_hold_from(cases[i].f, cases[i].text, strlen(cases[i].text));
        EXPECT(got == cases[i].want, "[%s] hold of '%s' at %zu, want %zu", chat_tool_format_name(cases[i].f),
               cases[i].text, got, cases[i].want);
    }
}

/* Every prefix of every sample output parses without a crash (ASan checks
 * the reads) and every call's arguments are valid JSON. */
TEST(test_prefixes) {
    static const char *const samples[] = {
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"x\\u00e9\\\"\"}}\n</tool_call>",
        "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
        "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": [1, 2]}}",
        "[TOOL_CALLS]add[CALL_ID]q[ARGS]{\"a\": 1}[TOOL_CALLS][{\"name\": \"add\"}]",
        "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.add<|channel|>c<|message|>{}<|call|>",
        "```json\n{\"tool_calls\": [{\"name\": \"add\", \"arguments\": {}}]}\n```",
    };
    for (int f = TESSERA_TOOLS_GENERIC; f <= TESSERA_TOOLS_HARMONY; f++)
        for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
            size_t n = strlen(samples[s]);
            for (size_t k = 0; k <= n; k++) {
                char *t = malloc(k ? k : 1); /* exact size: ASan sees any overread */
                memcpy(t, samples[s], k);
                chat_parsed p;
                EXPECT(chat_tool_parse((chat_tool_format)f, t, k, KNOWN, 2, &p) == 0, "prefix parse");
                for (size_t c = 0; c < p.n_calls; c++) {
                    size_t al = strlen(p.calls[c].arguments);
                    EXPECT(chat_json_value_end(p.calls[c].arguments, al) == al, "bad arguments %s from prefix %zu of %s",
                           p.calls[c].arguments, k, samples[s]);
                }
                chat_parsed_free(&p);
                EXPECT(chat_tool_hold_from((chat_tool_format)f, t, k) <= k, "hold past the end");
                free(t);
            }
        }
}

HARNESS_MAIN("tool_parse", HARNESS_TEST(test_json_scanner), HARNESS_TEST(test_hermes), HARNESS_TEST(test_qwen3_coder),
             HARNESS_TEST(test_llama3), HARNESS_TEST(test_mistral), HARNESS_TEST(test_harmony),
             HARNESS_TEST(test_generic), HARNESS_TEST(test_detect), HARNESS_TEST(test_hold),
             HARNESS_TEST(test_prefixes))
