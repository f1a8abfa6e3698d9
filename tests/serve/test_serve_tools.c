/*
 * The request side of tool calling (serve/tools.c) without a model: the
 * grammar a forced call gets accepts exactly a call of an offered tool whose
 * arguments follow its JSON Schema, then the end of the call; prefills,
 * the system text and earlier calls written back are what the parser reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "harness.h"
#include "chat/tool_parse.h"
#include "grammar/grammar.h"
#include "tools.h"

static const char TOOLS[] =
    "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"add\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": \"integer\"}}, \"required\": [\"a\", \"b\"], "
    "\"additionalProperties\": false}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"ping\"}}], \"tool_choice\": %s}";

/* Parse the tools with tool_choice, and the grammar serve_tools_grammar makes. */
static grammar *forced(const char *choice, serve_tools *t) {
    char body[2048];
    snprintf(body, sizeof body, TOOLS, choice);
    cJSON *root = cJSON_Parse(body);
    serve_error err = {0, NULL};
    int rc = serve_tools_parse(root, t, &err);
    cJSON_Delete(root);
    EXPECT(rc == 0, "tools do not parse: %s", err.body ? err.body : "?");
    free(err.body);
    if (rc != 0) return NULL;
    char *gbnf = serve_tools_grammar(t, &err);
    EXPECT(gbnf != NULL, "no grammar for tool_choice %s: %s", choice, err.body ? err.body : "?");
    free(err.body);
    if (!gbnf) return NULL;
    grammar *g = grammar_parse(gbnf, strlen(gbnf), NULL);
    EXPECT(g != NULL, "the tool grammar does not parse:\n%s", gbnf);
    free(gbnf);
    return g;
}

/* Whether the grammar accepts text as a complete output. */
static bool matches(const grammar *g, const char *text) {
    grammar_matcher m;
    if (grammar_matcher_init(&m, g) != 0) return false;
    bool ok = grammar_matcher_accept(&m, text, strlen(text)) == 0 && grammar_matcher_complete(&m);
    grammar_matcher_free(&m);
    return ok;
}

TEST(test_required) {
    serve_tools t;
    grammar *g = forced("\"required\"", &t);
    if (g) {
        static const char *const good[] = {
            "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            "add\", \"arguments\": {\"a\": 1, \"b\": -20}}\n</tool_call>",
            "ping\", \"arguments\": {}}\n</tool_call>",
            "ping\", \"arguments\": {\"any\": [1, \"x\"]}}\n</tool_call>",
        };
        static const char *const bad[] = {
            "rm\", \"arguments\": {}}\n</tool_call>",                         /* not offered */
            "add\", \"arguments\": {\"a\": 1}}\n</tool_call>",                /* b required */
            "add\", \"arguments\": {\"a\": \"1\", \"b\": 2}}\n</tool_call>",  /* a is an integer */
            "add\", \"arguments\": {\"a\": 1, \"b\": 2, \"c\": 3}}\n</tool_call>",
            "get_weather\", \"arguments\": {\"city\": \"Paris\"}",           /* not closed */
            "get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call> and more",
        };
        for (size_t i = 0; i < sizeof good / sizeof *good; i++)
            EXPECT(matches(g, good[i]), "required: rejected %s", good[i]);
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
            EXPECT(!matches(g, bad[i]), "required: accepted %s", bad[i]);
        /* The prefill plus a grammar match is a call the parser reads. */
        char *pre = serve_tools_prefill(&t, TESSERA_TOOLS_HERMES);
        char full[512];
        snprintf(full, sizeof full, "%s%s", pre ? pre : "", good[1]);
        chat_parsed p;
        const char *const names[] = {"get_weather", "add", "ping"};
        EXPECT(chat_tool_parse(TESSERA_TOOLS_HERMES, full, strlen(full), names, 3, &p) == 0 && p.n_calls == 1 &&
                  !strcmp(p.calls[0].name, "add") && !strcmp(p.calls[0].arguments, "{\"a\": 1, \"b\": -20}"),
               "prefill + match does not parse back: %s", full);
        chat_parsed_free(&p);
        free(pre);
        grammar_free(g);
    }
    serve_tools_free(&t);
}

TEST(test_named) {
    serve_tools t;
    grammar *g = forced("{\"type\": \"function\", \"function\": {\"name\": \"add\"}}", &t);
    if (g) {
        EXPECT(matches(g, "{\"a\": 2, \"b\": 3}}\n</tool_call>"), "named: rejected a valid call");
        EXPECT(!matches(g, "{\"city\": \"Oslo\"}}\n</tool_call>"), "named: accepted another tool's arguments");
        char *pre = serve_tools_prefill(&t, TESSERA_TOOLS_HERMES);
        EXPECT(pre && !strcmp(pre, "<tool_call>\n{\"name\": \"add\", \"arguments\": "), "named prefill %s", pre);
        free(pre);
        grammar_free(g);
    }
    serve_tools_free(&t);
    /* auto and none force nothing. */
    char body[2048];
    for (int k = 0; k < 2; k++) {
        snprintf(body, sizeof body, TOOLS, k ? "\"none\"" : "\"auto\"");
        cJSON *root = cJSON_Parse(body);
        serve_error err = {0, NULL};
        EXPECT(serve_tools_parse(root, &t, &err) == 0, "auto/none");
        EXPECT(!serve_tools_grammar(&t, &err) && err.status == 0, "a grammar for tool_choice auto/none");
        EXPECT(!serve_tools_prefill(&t, TESSERA_TOOLS_HERMES), "a prefill for auto/none");
        cJSON_Delete(root);
        serve_tools_free(&t);
    }
}

TEST(test_prompt_text) {
    serve_tools t;
    char body[2048];
    snprintf(body, sizeof body, TOOLS, "\"auto\"");
    cJSON *root = cJSON_Parse(body);
    serve_error perr = {0, NULL};
    EXPECT(serve_tools_parse(root, &t, &perr) == 0, "tools do not parse");
    cJSON_Delete(root);
    char *sys = serve_tools_system_text(&t);
    EXPECT(sys && strstr(sys, "<tools>") && strstr(sys, "\"name\":\"add\"") && strstr(sys, "<tool_call>"),
           "system text %s", sys);
    free(sys);
    serve_tools_free(&t);
    cJSON *calls = cJSON_Parse("[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"add\", "
                               "\"arguments\": \"{\\\"a\\\": 1}\"}}, {\"function\": {\"name\": \"ping\", "
                               "\"arguments\": {}}}]");
    serve_error err = {0, NULL};
    char *text = serve_tools_calls_text(calls, &err);
    chat_parsed p;
    const char *const names[] = {"add", "ping"};
    EXPECT(text && chat_tool_parse(TESSERA_TOOLS_HERMES, text, strlen(text), names, 2, &p) == 0 && p.n_calls == 2 &&
              !strcmp(p.calls[0].arguments, "{\"a\": 1}") && !strcmp(p.calls[1].name, "ping"),
           "earlier calls do not read back: %s", text);
    chat_parsed_free(&p);
    free(text);
    cJSON_Delete(calls);
}

HARNESS_MAIN("serve tools", HARNESS_TEST(test_required), HARNESS_TEST(test_named), HARNESS_TEST(test_prompt_text))
