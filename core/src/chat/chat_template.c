/* chat_template — the public chat template API (tessera.h) over the Jinja
 * engine: a compiled template with its default bos_token / eos_token, the
 * model's own template with ChatML as the fallback, and a few built-in
 * templates by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "chat/jinja.h"
#include "util/error.h"
#include "util/grow.h"

struct tessera_chat_template {
    jinja_template *jinja;
    char *source, *bos, *eos;
};

/* Built-in templates, written as each family's published template renders
 * (the system message folded into the first user turn where the family has
 * no system role). As llama-server's built-ins, they do not write the BOS
 * text at the start: the tokenizer adds BOS (text_has_bos is false), so the
 * tokens are the same and /apply-template shows what llama-server's does.
 * llama2 writes it per user turn, inside the conversation. */
static const struct {
    const char *name, *jinja;
} builtins[] = {
    {"chatml",
     "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
     "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
     "{%- endif %}"},
    {"llama2",
     "{%- if messages[0]['role'] == 'system' %}{%- set loop_messages = messages[1:] %}"
     "{%- set system_message = messages[0]['content'] %}{%- else %}{%- set loop_messages = messages %}"
     "{%- set system_message = false %}{%- endif %}{%- for message in loop_messages %}"
     "{%- if loop.index0 == 0 and system_message != false %}{%- set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{%- else %}{%- set content = message['content'] %}{%- endif %}"
     "{%- if message['role'] == 'user' %}{{- bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
     "{%- elif message['role'] == 'assistant' %}{{- ' ' + content.strip() + ' ' + eos_token }}{%- endif %}"
     "{%- endfor %}"},
    {"llama3",
     "{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
     "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
    {"gemma",
     "{%- if messages[0]['role'] == 'system' %}{%- set prefix = messages[0]['content'] + "
     "'\\n\\n' %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set prefix = '' %}"
     "{%- set loop_messages = messages %}{%- endif %}{%- for message in loop_messages %}"
     "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
     "{{- '<start_of_turn>' + role + '\\n' + (prefix if loop.first else '') + message['content'] | trim + "
     "'<end_of_turn>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<start_of_turn>model\\n' }}"
     "{%- endif %}"},
    {"phi3",
     "{%- for message in messages %}{{- '<|' + message['role'] + '|>\\n' + message['content'] + "
     "'<|end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- else %}"
     "{{- eos_token }}{%- endif %}"},
    {"zephyr",
     "{%- for message in messages %}{{- '<|' + message['role'] + '|>\\n' + message['content'] + eos_token + "
     "'\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>\\n' }}{%- endif %}"},
    {"mistral",
     "{%- if messages[0]['role'] == 'system' %}{%- set prefix = messages[0]['content'] + "
     "'\\n\\n' %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set prefix = '' %}"
     "{%- set loop_messages = messages %}{%- endif %}{%- for message in loop_messages %}"
     "{%- if message['role'] == 'user' %}{{- '[INST] ' + (prefix if loop.first else '') + message['content'] + "
     "' [/INST]' }}{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}"
     "{%- endfor %}"},
    /* More of llama-server's --chat-template names, from each family's published format. */
    {"command-r",
     "{%- for message in messages %}{%- set token = {'system': '<|SYSTEM_TOKEN|>', 'user': "
     "'<|USER_TOKEN|>', 'assistant': '<|CHATBOT_TOKEN|>'}[message['role']] %}"
     "{{- '<|START_OF_TURN_TOKEN|>' + token + message['content'] | trim + '<|END_OF_TURN_TOKEN|>' }}"
     "{%- endfor %}{%- if add_generation_prompt %}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{%- endif %}"},
    {"vicuna",
     "{%- for message in messages %}{%- if message['role'] == 'system' %}{{- message['content'] + '\n\n' }}"
     "{%- elif message['role'] == 'user' %}{{- 'USER: ' + message['content'] + '\n' }}"
     "{%- else %}{{- 'ASSISTANT: ' + message['content'] + eos_token + '\n' }}{%- endif %}{%- endfor %}"
     "{%- if add_generation_prompt %}{{- 'ASSISTANT:' }}{%- endif %}"},
    {"deepseek3",
     "{%- for message in messages %}{%- if message['role'] == 'system' %}"
     "{{- message['content'] }}{%- elif message['role'] == 'user' %}{{- '<\xef\xbd\x9c" "User\xef\xbd\x9c>' + "
     "message['content'] }}{%- else %}{{- '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' + message['content'] + "
     "eos_token }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}"
     "{{- '<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>' }}{%- endif %}"},
    {"phi4",
     "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + "
     "'<|im_end|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant<|im_sep|>' }}"
     "{%- endif %}"},
    {"falcon3",
     "{%- for message in messages %}{{- '<|' + message['role'] + '|>\n' + message['content'] + '\n' }}"
     "{%- endfor %}{%- if add_generation_prompt %}{{- '<|assistant|>\n' }}{%- endif %}"},
    {"llama4",
     "{%- for message in messages %}{{- '<|header_start|>' + message['role'] + "
     "'<|header_end|>\n\n' + message['content'] | trim + '<|eot|>' }}{%- endfor %}"
     "{%- if add_generation_prompt %}{{- '<|header_start|>assistant<|header_end|>\n\n' }}{%- endif %}"},
    {"granite",
     "{%- for message in messages %}{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + "
     "message['content'] + '<|end_of_text|>\n' }}{%- endfor %}{%- if add_generation_prompt %}"
     "{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}"},
};

tessera_chat_template *tessera_chat_template_new(const char *jinja, size_t len, const char *bos_text,
                                                 const char *eos_text) {
    if (!jinja) {
        error_set("chat template: no text");
        return NULL;
    }
    tessera_chat_template *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->source = malloc(len + 1);
    t->bos = strdup(bos_text ? bos_text : "");
    t->eos = strdup(eos_text ? eos_text : "");
    if (!t->source || !t->bos || !t->eos) goto oom;
    memcpy(t->source, jinja, len);
    t->source[len] = '\0';
    t->jinja = jinja_parse(jinja, len);
    if (!t->jinja) goto fail;
    return t;
oom:
    error_set("out of memory");
fail:
    tessera_chat_template_free(t);
    return NULL;
}

tessera_chat_template *tessera_chat_template_builtin(const char *name, const char *bos_text,
                                                     const char *eos_text) {
    for (size_t i = 0; name && i < sizeof builtins / sizeof builtins[0]; i++)
        if (!strcmp(name, builtins[i].name))
            return tessera_chat_template_new(builtins[i].jinja, strlen(builtins[i].jinja), bos_text, eos_text);
    char names[256] = "";
    for (size_t i = 0, o = 0; i < sizeof builtins / sizeof builtins[0] && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", builtins[i].name);
    error_set("chat template '%s' is unknown (built-in: %s)", name ? name : "(null)", names);
    return NULL;
}

/* The special token's text, for bos_token / eos_token. */
static void special_text(const tessera_model *m, tessera_token id, char *buf, int32_t size) {
    buf[0] = '\0';
    if (id < 0) return;
    int32_t n = tessera_token_to_piece(m, id, buf, size - 1, true);
    buf[n > 0 && n < size ? n : 0] = '\0';
}

tessera_chat_template *tessera_chat_template_from_model(const tessera_model *model, bool *fallback) {
    char bos[256], eos[256];
    special_text(model, tessera_token_bos(model), bos, sizeof bos);
    special_text(model, tessera_token_eos(model), eos, sizeof eos);
    if (fallback) *fallback = false;
    const char *jinja = tessera_model_meta_str(model, "tokenizer.chat_template");
    if (jinja) {
        tessera_chat_template *t = tessera_chat_template_new(jinja, strlen(jinja), bos, eos);
        if (t) return t;
        error_wrap("tokenizer.chat_template");
    } else {
        error_set("the model has no tokenizer.chat_template");
    }
    if (fallback) *fallback = true;
    /* keep the reason for the caller's note: build ChatML without touching it */
    char why[512];
    snprintf(why, sizeof why, "%s", error_get());
    tessera_chat_template *t = tessera_chat_template_builtin("chatml", bos, eos);
    error_set("%s", why);
    return t;
}

void tessera_chat_template_free(tessera_chat_template *t) {
    if (!t) return;
    jinja_template_free(t->jinja);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t);
}

char *tessera_chat_template_apply(const tessera_chat_template *t, const char *vars_json, size_t *len) {
    if (!t || !vars_json) {
        error_set("chat template: no %s", t ? "variables" : "template");
        return NULL;
    }
    const char *defaults[] = {"bos_token", t->bos, "eos_token", t->eos, NULL};
    return jinja_render(t->jinja, vars_json, strlen(vars_json), defaults, NULL, len);
}

/* A JSON string literal of s appended to b. */
static void json_quote(tsr_buf *b, const char *s) {
    buf_putc(b, '"');
    for (const char *p = s; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        char esc[8];
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char)ch;
            esc[2] = 0;
        } else if (ch < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
        } else {
            buf_putc(b, (char)ch);
            continue;
        }
        buf_puts(b, esc);
    }
    buf_putc(b, '"');
}

char *tessera_chat_template_render(const tessera_chat_template *t, const tessera_chat_message *messages,
                                   size_t n_messages, bool add_generation_prompt, size_t *len) {
    tsr_buf vars = {0};
    buf_puts(&vars, "{\"messages\": [");
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role || !messages[i].content) {
            buf_free(&vars);
            error_set("chat message %zu has no %s", i, messages[i].role ? "content" : "role");
            return NULL;
        }
        buf_puts(&vars, i ? ", {\"role\": " : "{\"role\": ");
        json_quote(&vars, messages[i].role);
        buf_puts(&vars, ", \"content\": ");
        json_quote(&vars, messages[i].content);
        buf_putc(&vars, '}');
    }
    buf_puts(&vars, add_generation_prompt ? "], \"add_generation_prompt\": true}"
                                          : "], \"add_generation_prompt\": false}");
    if (vars.oom) {
        buf_free(&vars);
        error_set("out of memory");
        return NULL;
    }
    char *out = tessera_chat_template_apply(t, vars.p, len);
    buf_free(&vars);
    return out;
}

const char *tessera_chat_template_source(const tessera_chat_template *t) { return t->source; }
const char *tessera_chat_template_bos_token(const tessera_chat_template *t) { return t->bos; }
const char *tessera_chat_template_eos_token(const tessera_chat_template *t) { return t->eos; }

bool tessera_chat_template_text_has_bos(const tessera_chat_template *t, const char *text, size_t len) {
    size_t n = strlen(t->bos);
    return n > 0 && len >= n && memcmp(text, t->bos, n) == 0;
}
