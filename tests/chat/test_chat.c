/* Unit tests of the chat templates: family detection from template texts
 * shaped like the families' published Jinja templates, and the exact text
 * each family renders for the same conversation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "chat/chat.h"

static int failures;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            failures++;                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* Abridged Jinja texts carrying each family's markers (the detector only
 * looks at markers and at bos_token). */
static const char TMPL_CHATML[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char TMPL_LLAMA2[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
    "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}"
    "{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
static const char TMPL_LLAMA3[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
static const char TMPL_GEMMA[] =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
static const char TMPL_PHI3[] =
    "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + "
    "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}";
static const char TMPL_ZEPHYR[] =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
    "{{ '<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
    "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
    "{% endfor %}";
static const char TMPL_MISTRAL[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% endif %}{% endfor %}";

static void test_detect(void) {
    struct {
        const char *tmpl;
        tessera_chat_family family;
        bool bos;
    } cases[] = {
        {TMPL_CHATML, TESSERA_CHAT_CHATML, false}, {TMPL_LLAMA2, TESSERA_CHAT_LLAMA2, true},
        {TMPL_LLAMA3, TESSERA_CHAT_LLAMA3, true},  {TMPL_GEMMA, TESSERA_CHAT_GEMMA, true},
        {TMPL_PHI3, TESSERA_CHAT_PHI3, false},     {TMPL_ZEPHYR, TESSERA_CHAT_ZEPHYR, false},
        {TMPL_MISTRAL, TESSERA_CHAT_MISTRAL, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tessera_chat_format f = tessera_chat_format_detect(cases[i].tmpl);
        CHECK(f.family == cases[i].family && !f.fallback, "case %zu detected as %s", i,
              tessera_chat_family_name(f.family));
        CHECK(f.bos_in_text == cases[i].bos, "case %zu (%s): bos_in_text %d", i,
              tessera_chat_family_name(cases[i].family), f.bos_in_text);
        /* from_name gives the same family and the reference template's BOS. */
        tessera_chat_format g;
        CHECK(tessera_chat_format_from_name(tessera_chat_family_name(cases[i].family), &g) == 0 &&
                  g.family == cases[i].family && g.bos_in_text == cases[i].bos,
              "from_name(%s)", tessera_chat_family_name(cases[i].family));
    }
    tessera_chat_format f = tessera_chat_format_detect(NULL);
    CHECK(f.family == TESSERA_CHAT_CHATML && f.fallback && !f.bos_in_text, "no template");
    f = tessera_chat_format_detect("{{ messages | tojson }}");
    CHECK(f.family == TESSERA_CHAT_CHATML && f.fallback, "unknown template");
    tessera_chat_format g;
    CHECK(tessera_chat_format_from_name("vicuna", &g) < 0 &&
              strstr(tessera_last_error(), "'vicuna'") && strstr(tessera_last_error(), "chatml"),
          "unknown name error: '%s'", tessera_last_error());
}

static const tessera_chat_message CONV[] = {
    {"system", "You are kind."},
    {"user", "Hello"},
    {"assistant", " Hi there! "},
    {"user", "How are you?\n"},
};
enum { N_CONV = sizeof CONV / sizeof CONV[0] };

static void expect_render(tessera_chat_family family, bool bos, const tessera_chat_message *msgs,
                          size_t n, bool add_gen, const char *want) {
    tessera_chat_format f = {.family = family, .bos_in_text = bos, .fallback = false};
    size_t len = 0;
    char *got = chat_render_alloc(&f, msgs, n, add_gen, "<s>", "</s>", &len);
    CHECK(got && !strcmp(got, want) && len == strlen(want),
          "%s (bos %d, gen %d):\n--- got\n%s\n--- want\n%s\n---", tessera_chat_family_name(family),
          bos, add_gen, got ? got : tessera_last_error(), want);
    free(got);
}

static void test_render(void) {
    expect_render(TESSERA_CHAT_CHATML, false, CONV, N_CONV, true,
                  "<|im_start|>system\nYou are kind.<|im_end|>\n"
                  "<|im_start|>user\nHello<|im_end|>\n"
                  "<|im_start|>assistant\n Hi there! <|im_end|>\n"
                  "<|im_start|>user\nHow are you?\n<|im_end|>\n"
                  "<|im_start|>assistant\n");
    expect_render(TESSERA_CHAT_CHATML, false, CONV + 1, 1, false,
                  "<|im_start|>user\nHello<|im_end|>\n");
    expect_render(TESSERA_CHAT_LLAMA2, true, CONV, N_CONV, true,
                  "<s>[INST] <<SYS>>\nYou are kind.\n<</SYS>>\n\nHello [/INST]"
                  " Hi there! </s>"
                  "<s>[INST] How are you? [/INST]");
    expect_render(TESSERA_CHAT_LLAMA2, true, CONV + 1, 1, true, "<s>[INST] Hello [/INST]");
    expect_render(TESSERA_CHAT_LLAMA3, true, CONV, N_CONV, true,
                  "<s><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render(TESSERA_CHAT_GEMMA, true, CONV, N_CONV, true,
                  "<s><start_of_turn>user\nYou are kind.\n\nHello<end_of_turn>\n"
                  "<start_of_turn>model\nHi there!<end_of_turn>\n"
                  "<start_of_turn>user\nHow are you?<end_of_turn>\n"
                  "<start_of_turn>model\n");
    expect_render(TESSERA_CHAT_PHI3, false, CONV, N_CONV, true,
                  "<|system|>\nYou are kind.<|end|>\n"
                  "<|user|>\nHello<|end|>\n"
                  "<|assistant|>\n Hi there! <|end|>\n"
                  "<|user|>\nHow are you?\n<|end|>\n"
                  "<|assistant|>\n");
    expect_render(TESSERA_CHAT_PHI3, false, CONV + 1, 1, false, "<|user|>\nHello<|end|>\n</s>");
    expect_render(TESSERA_CHAT_ZEPHYR, false, CONV, N_CONV, true,
                  "<|system|>\nYou are kind.</s>\n"
                  "<|user|>\nHello</s>\n"
                  "<|assistant|>\n Hi there! </s>\n"
                  "<|user|>\nHow are you?\n</s>\n"
                  "<|assistant|>\n");
    expect_render(TESSERA_CHAT_MISTRAL, true, CONV, N_CONV, true,
                  "<s>[INST] You are kind.\n\nHello [/INST] Hi there! </s>"
                  "[INST] How are you?\n [/INST]");
    /* BOS only when the template writes it. */
    expect_render(TESSERA_CHAT_LLAMA3, false, CONV + 1, 1, false,
                  "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>");
    expect_render(TESSERA_CHAT_CHATML, false, NULL, 0, false, "");
}

/* Qwen2-style ChatML: a fixed system message when the conversation has none. */
static const char TMPL_QWEN2[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
/* Qwen2.5-style: the tools branch writes a non-literal system header first. */
static const char TMPL_QWEN25[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] }}{%- endif %}{%- else %}{%- if messages[0]['role'] == "
    "'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}";

static void test_default_system(void) {
    tessera_chat_format f = tessera_chat_format_detect(TMPL_QWEN2);
    CHECK(f.family == TESSERA_CHAT_CHATML && !strcmp(f.default_system,
                                                     "You are a helpful assistant."),
          "qwen2 default system '%s'", f.default_system);
    f = tessera_chat_format_detect(TMPL_QWEN25);
    CHECK(!strcmp(f.default_system,
                  "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
          "qwen2.5 default system '%s'", f.default_system);
    f = tessera_chat_format_detect(TMPL_CHATML);
    CHECK(f.default_system[0] == '\0', "plain chatml has default system '%s'", f.default_system);

    f = tessera_chat_format_detect(TMPL_QWEN2);
    char *got = chat_render_alloc(&f, CONV + 1, 1, true, "", "", NULL);
    const char *want = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                       "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    CHECK(got && !strcmp(got, want), "qwen2 without system:\n%s", got ? got : "(null)");
    free(got);
    /* A system message of the conversation replaces it. */
    got = chat_render_alloc(&f, CONV, 2, false, "", "", NULL);
    want = "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n";
    CHECK(got && !strcmp(got, want), "qwen2 with system:\n%s", got ? got : "(null)");
    free(got);
    /* An empty conversation stays empty. */
    got = chat_render_alloc(&f, NULL, 0, false, "", "", NULL);
    CHECK(got && !strcmp(got, ""), "qwen2 empty: '%s'", got ? got : "(null)");
    free(got);
}

static void test_render_buffer(void) {
    tessera_chat_format f = tessera_chat_format_detect(TMPL_CHATML);
    const char *want = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n";
    int32_t need = (int32_t)strlen(want) + 1;
    char small[8];
    memset(small, 'x', sizeof small);
    int32_t n = tessera_chat_render(&f, CONV + 1, 1, true, NULL, NULL, small, sizeof small);
    CHECK(n == -need, "small buffer returned %d, expected %d", (int)n, (int)-need);
    CHECK(small[0] == 'x', "small buffer was written");
    char buf[128];
    n = tessera_chat_render(&f, CONV + 1, 1, true, NULL, NULL, buf, need);
    CHECK(n == need - 1 && !strcmp(buf, want), "exact buffer: %d '%s'", (int)n, buf);

    tessera_chat_message bad = {"user", NULL};
    n = tessera_chat_render(&f, &bad, 1, true, NULL, NULL, buf, sizeof buf);
    CHECK(n == INT32_MIN && strstr(tessera_last_error(), "message 0"), "NULL content: %d '%s'",
          (int)n, tessera_last_error());
    tessera_chat_format wrong = {.family = TESSERA_CHAT_N_FAMILIES};
    n = tessera_chat_render(&wrong, CONV, 1, true, NULL, NULL, buf, sizeof buf);
    CHECK(n == INT32_MIN && strstr(tessera_last_error(), "family"), "bad family: '%s'",
          tessera_last_error());
}

int main(void) {
    test_detect();
    test_render();
    test_render_buffer();
    test_default_system();
    if (failures) {
        fprintf(stderr, "test_chat: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_chat: all checks passed\n");
    return 0;
}
