/* The public chat template API: the built-in templates render what each
 * family's published template renders, plain messages and JSON variables
 * (tools, extra kwargs) reach the template, bos_token/eos_token default to
 * the texts given at creation, and errors name what is at fault. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include <tessera/tessera.h>

static const tessera_chat_message CONV[] = {
    {"system", "You are kind."},
    {"user", "Hello"},
    {"assistant", " Hi there! "},
    {"user", "How are you?\n"},
};
enum { N_CONV = sizeof CONV / sizeof CONV[0] };

static void expect_builtin(const char *name, const tessera_chat_message *msgs, size_t n, bool add_gen,
                           const char *want) {
    tessera_chat_template *t = tessera_chat_template_builtin(name, "<s>", "</s>");
    if (!t) fail_msg("%s: %s", name, tessera_last_error());
    size_t len = 0;
    char *got = tessera_chat_template_render(t, msgs, n, add_gen, &len);
    if (!got) fail_msg("%s: %s", name, tessera_last_error());
    if (strcmp(got, want)) fail_msg("%s (gen %d):\n--- got\n%s\n--- want\n%s\n---", name, add_gen, got, want);
    assert_int_equal(len, strlen(want));
    free(got);
    tessera_chat_template_free(t);
}

TEST(test_builtins) {
    expect_builtin("chatml", CONV, N_CONV, true,
                   "<|im_start|>system\nYou are kind.<|im_end|>\n"
                   "<|im_start|>user\nHello<|im_end|>\n"
                   "<|im_start|>assistant\n Hi there! <|im_end|>\n"
                   "<|im_start|>user\nHow are you?\n<|im_end|>\n"
                   "<|im_start|>assistant\n");
    expect_builtin("chatml", CONV + 1, 1, false, "<|im_start|>user\nHello<|im_end|>\n");
    expect_builtin("llama2", CONV, N_CONV, true,
                   "<s>[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\nHello [/INST]"
                   " Hi there! </s>"
                   "<s>[INST] How are you? [/INST]");
    expect_builtin("llama3", CONV, N_CONV, true,
                   "<|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_builtin("gemma", CONV, N_CONV, true,
                   "<start_of_turn>user\nYou are kind.\n\nHello<end_of_turn>\n"
                   "<start_of_turn>model\nHi there!<end_of_turn>\n"
                   "<start_of_turn>user\nHow are you?<end_of_turn>\n"
                   "<start_of_turn>model\n");
    expect_builtin("phi3", CONV, N_CONV, true,
                   "<|system|>\nYou are kind.<|end|>\n"
                   "<|user|>\nHello<|end|>\n"
                   "<|assistant|>\n Hi there! <|end|>\n"
                   "<|user|>\nHow are you?\n<|end|>\n"
                   "<|assistant|>\n");
    expect_builtin("phi3", CONV + 1, 1, false, "<|user|>\nHello<|end|>\n</s>");
    expect_builtin("zephyr", CONV, N_CONV, true,
                   "<|system|>\nYou are kind.</s>\n"
                   "<|user|>\nHello</s>\n"
                   "<|assistant|>\n Hi there! </s>\n"
                   "<|user|>\nHow are you?\n</s>\n"
                   "<|assistant|>\n");
    expect_builtin("mistral", CONV, N_CONV, true,
                   "[INST] You are kind.\n\nHello [/INST] Hi there! </s>"
                   "[INST] How are you?\n [/INST]");
    expect_builtin("chatml", NULL, 0, false, "");
}

TEST(test_unknown_builtin) {
    assert_null(tessera_chat_template_builtin("no-such-template", NULL, NULL));
    assert_non_null(strstr(tessera_last_error(), "'no-such-template'"));
    assert_non_null(strstr(tessera_last_error(), "chatml"));
}

TEST(test_json_variables) {
    static const char tmpl[] =
        "{{ bos_token }}{% for t in tools %}[{{ t.function.name }}:{{ t.function.parameters|tojson }}]"
        "{% endfor %}{% for m in messages %}{{ m.role }}={{ m.content }}"
        "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments|tojson }}{% endif %};{% endfor %}"
        "{% if enable_thinking is false %}nothink{% endif %}{{ eos_token }}";
    tessera_chat_template *t = tessera_chat_template_new(tmpl, strlen(tmpl), "<B>", "<E>");
    assert_non_null(t);
    const char *vars =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"héllo\"}, {\"role\": \"assistant\", "
        "\"content\": null, \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1.0}}}]}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
        "{\"type\": \"object\"}}}], \"enable_thinking\": false, \"eos_token\": \"<E2>\"}";
    size_t len;
    char *out = tessera_chat_template_apply(t, vars, &len);
    if (!out) fail_msg("%s", tessera_last_error());
    assert_string_equal(out, "<B>[f:{\"type\": \"object\"}]user=héllo;assistant=None{\"x\": 1.0};nothink<E2>");
    assert_true(tessera_chat_template_text_has_bos(t, out, len));
    assert_false(tessera_chat_template_text_has_bos(t, "x<B>", 4));
    free(out);
    assert_null(tessera_chat_template_apply(t, "{\"messages\": [", NULL));
    assert_non_null(strstr(tessera_last_error(), "byte"));
    tessera_chat_message bad = {"user", NULL};
    assert_null(tessera_chat_template_render(t, &bad, 1, true, NULL));
    assert_non_null(strstr(tessera_last_error(), "message 0"));
    tessera_chat_template_free(t);
}

TEST(test_errors_name_the_line) {
    static const char bad[] = "ok\n{% for x in %}";
    assert_null(tessera_chat_template_new(bad, strlen(bad), NULL, NULL));
    assert_non_null(strstr(tessera_last_error(), "template line 2"));
    static const char raises[] = "a\nb\n{{ raise_exception('Conversation roles must alternate') }}";
    tessera_chat_template *t = tessera_chat_template_new(raises, strlen(raises), NULL, NULL);
    assert_non_null(t);
    assert_null(tessera_chat_template_render(t, CONV, 1, true, NULL));
    assert_string_equal(tessera_last_error(), "template line 3: Conversation roles must alternate");
    tessera_chat_template_free(t);
}

HARNESS_MAIN("chat_template", HARNESS_TEST(test_builtins), HARNESS_TEST(test_unknown_builtin),
             HARNESS_TEST(test_json_variables), HARNESS_TEST(test_errors_name_the_line))
