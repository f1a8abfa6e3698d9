/*
 * The split of a growing chat reply (serve/reply.c): <think> reasoning
 * apart from content, a tail that may begin a marker or a tool call held
 * back, and, for every prefix of a reply, what the split shows is a prefix
 * of what the finished reply shows (so a stream never sends text it must
 * take back).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "chat/tool_parse.h"
#include "format.h"

static serve_reply_rules think_rules(bool tools, bool starts_in_think) {
    return (serve_reply_rules){.think_open = "<think>", .think_close = "</think>",
                               .starts_in_think = starts_in_think, .tools = tools,
                               .tool_format = TESSERA_TOOLS_HERMES};
}

/* The reasoning and content the split shows for text (final or not). */
static void show(const serve_reply_rules *rules, const char *text, size_t n, bool final, char *reasoning,
                 char *content) {
    serve_split sp;
    serve_reply_split(rules, text, n, final, &sp);
    EXPECT(sp.reasoning_at <= sp.reasoning_end && sp.reasoning_end <= n && sp.content_at <= sp.content_end &&
              sp.content_end <= n,
           "split out of range for '%.*s'", (int)n, text);
    snprintf(reasoning, 512, "%.*s", (int)(sp.reasoning_end - sp.reasoning_at), text + sp.reasoning_at);
    snprintf(content, 512, "%.*s", (int)(sp.content_end - sp.content_at), text + sp.content_at);
}

static void expect_split(const serve_reply_rules *rules, const char *text, bool final, const char *reasoning,
                         const char *content) {
    char r[512], c[512];
    show(rules, text, strlen(text), final, r, c);
    EXPECT(!strcmp(r, reasoning) && !strcmp(c, content), "'%s' (final %d): reasoning '%s' content '%s', want '%s' '%s'",
           text, final, r, c, reasoning, content);
}

TEST(test_think) {
    serve_reply_rules t = think_rules(false, false);
    expect_split(&t, "<think>\nplan it</think>\n\nThe answer.", true, "plan it", "The answer.");
    expect_split(&t, "<think>\nplan it</thi", false, "plan it", "");   /* maybe the close marker */
    expect_split(&t, "<think>\nplan it</thi", true, "plan it</thi", "");
    expect_split(&t, "<thi", false, "", "");                          /* maybe the open marker */
    expect_split(&t, "<thi", true, "", "<thi");
    expect_split(&t, "No reasoning here.", false, "", "No reasoning here.");
    expect_split(&t, "<b>bold</b>", false, "", "<b>bold</b>");
    serve_reply_rules open = think_rules(false, true); /* the prompt opened <think> */
    expect_split(&open, "plan</think>Done", true, "plan", "Done");
    expect_split(&open, "still thinking", false, "still thinking", "");
    serve_reply_rules none = {0};
    expect_split(&none, "<think>x</think>y", true, "", "<think>x</think>y");
}

TEST(test_tools_hold) {
    serve_reply_rules t = think_rules(true, false);
    expect_split(&t, "<think>call it</think>Sure. <tool_ca", false, "call it", "Sure. ");
    expect_split(&t, "Sure. <tool_call>{\"name\"", false, "", "Sure. ");
    expect_split(&t, "{\"name\": \"f\"", false, "", "");
}

/* Every prefix shows a prefix of the finished reply. */
TEST(test_prefixes) {
    static const char *const samples[] = {
        "<think>\nI should call the tool.\n</think>\n\nLet me check. <tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "  <think>a < b and </thin k</think>x<tool_c y",
        "plain answer with < and <think> inside",
        "{\"name\": \"f\", \"arguments\": {}}",
    };
    for (int variant = 0; variant < 4; variant++) {
        serve_reply_rules rules = think_rules(variant & 1, variant & 2);
        for (size_t s = 0; s < sizeof samples / sizeof *samples; s++) {
            const char *text = samples[s];
            size_t n = strlen(text);
            char fr[512], fc[512];
            show(&rules, text, n, true, fr, fc);
            for (size_t k = 0; k <= n; k++) {
                char r[512], c[512];
                show(&rules, text, k, false, r, c);
                EXPECT(!strncmp(fr, r, strlen(r)) && !strncmp(fc, c, strlen(c)),
                       "variant %d prefix %zu of '%s': '%s'/'%s' is not a prefix of '%s'/'%s'", variant, k, text, r, c,
                       fr, fc);
            }
        }
    }
}

HARNESS_MAIN("serve reply", HARNESS_TEST(test_think), HARNESS_TEST(test_tools_hold), HARNESS_TEST(test_prefixes))
