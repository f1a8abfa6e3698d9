/* render — one function per template family, each writing what that
 * family's reference Jinja template writes for a list of messages:
 *
 *   chatml   [bos] <|im_start|>{role}\n{content}<|im_end|>\n ...  gen: <|im_start|>assistant\n
 *            (a template's fixed system message first when the conversation has none)
 *   llama2   system folded into the first turn as <<SYS>>\n{sys}\n<</SYS>>\n\n;
 *            user: [bos][INST] {strip(content)} [/INST]   assistant: ' '{strip(content)}' '{eos}
 *            (the template has no generation prompt)
 *   llama3   [bos] <|start_header_id|>{role}<|end_header_id|>\n\n{trim(content)}<|eot_id|> ...
 *            gen: <|start_header_id|>assistant<|end_header_id|>\n\n
 *   gemma    [bos] system folded into the first user turn as {sys}\n\n;
 *            <start_of_turn>{user|model}\n{trim(content)}<end_of_turn>\n
 *            gen: <start_of_turn>model\n
 *   phi3     [bos] <|{role}|>\n{content}<|end|>\n ...  gen: <|assistant|>\n, else {eos}
 *   zephyr   <|{role}|>\n{content}{eos}\n ...  gen: <|assistant|>\n
 *   mistral  [bos] system folded into the first user turn as {sys}\n\n;
 *            user: [INST] {content} [/INST]   assistant: {content}{eos}
 *
 * [bos] is written only when format->bos_in_text (the template uses
 * bos_token), so the caller knows not to add another BOS when tokenizing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "util/error.h"

/* ------------------------------------------------------ growable string */

typedef struct strbuf {
    char *data;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_putn(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_put(strbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Jinja's trim / Python's strip() on ASCII whitespace. */
static void sb_put_trimmed(strbuf *b, const char *s) {
    size_t n = strlen(s), start = 0;
    while (start < n && is_space(s[start])) start++;
    while (n > start && is_space(s[n - 1])) n--;
    sb_putn(b, s + start, n - start);
}

/* ------------------------------------------------------------ families */

typedef struct render_args {
    const tessera_chat_message *msgs;
    size_t n;
    bool add_gen;
    bool bos_in_text;
    const char *bos;
    const char *eos;
    const char *default_system; /* chatml: "" or the template's own */
} render_args;

static bool role_is(const tessera_chat_message *m, const char *role) {
    return strcmp(m->role, role) == 0;
}

static void render_chatml(strbuf *b, const render_args *a) {
    if (a->bos_in_text) sb_put(b, a->bos);
    if (a->default_system[0] && a->n > 0 && !role_is(&a->msgs[0], "system")) {
        sb_put(b, "<|im_start|>system\n");
        sb_put(b, a->default_system);
        sb_put(b, "<|im_end|>\n");
    }
    for (size_t i = 0; i < a->n; i++) {
        sb_put(b, "<|im_start|>");
        sb_put(b, a->msgs[i].role);
        sb_put(b, "\n");
        sb_put(b, a->msgs[i].content);
        sb_put(b, "<|im_end|>\n");
    }
    if (a->add_gen) sb_put(b, "<|im_start|>assistant\n");
}

static void render_llama2(strbuf *b, const render_args *a) {
    size_t first = 0;
    const char *sys = NULL;
    if (a->n > 0 && role_is(&a->msgs[0], "system")) {
        sys = a->msgs[0].content;
        first = 1;
    }
    for (size_t i = first; i < a->n; i++) {
        const tessera_chat_message *m = &a->msgs[i];
        /* strip() applies to the folded content as a whole. */
        strbuf content = {0};
        if (i == first && sys) {
            sb_put(&content, "<<SYS>>\n");
            sb_put(&content, sys);
            sb_put(&content, "\n<</SYS>>\n\n");
        }
        sb_put(&content, m->content);
        if (content.oom) {
            b->oom = true;
            return;
        }
        const char *text = content.data ? content.data : "";
        if (role_is(m, "user")) {
            if (a->bos_in_text) sb_put(b, a->bos);
            sb_put(b, "[INST] ");
            sb_put_trimmed(b, text);
            sb_put(b, " [/INST]");
        } else if (role_is(m, "assistant")) {
            sb_put(b, " ");
            sb_put_trimmed(b, text);
            sb_put(b, " ");
            sb_put(b, a->eos);
        }
        free(content.data);
    }
}

static void render_llama3(strbuf *b, const render_args *a) {
    for (size_t i = 0; i < a->n; i++) {
        if (i == 0 && a->bos_in_text) sb_put(b, a->bos);
        sb_put(b, "<|start_header_id|>");
        sb_put(b, a->msgs[i].role);
        sb_put(b, "<|end_header_id|>\n\n");
        sb_put_trimmed(b, a->msgs[i].content);
        sb_put(b, "<|eot_id|>");
    }
    if (a->add_gen) sb_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Gemma and Mistral have no system role: its text goes before the first
 * user turn's content, separated by a blank line. */
static void render_gemma(strbuf *b, const render_args *a) {
    if (a->bos_in_text) sb_put(b, a->bos);
    const char *sys = NULL;
    for (size_t i = 0; i < a->n; i++) {
        const tessera_chat_message *m = &a->msgs[i];
        if (role_is(m, "system")) {
            sys = m->content;
            continue;
        }
        bool assistant = role_is(m, "assistant");
        sb_put(b, "<start_of_turn>");
        sb_put(b, assistant ? "model" : m->role);
        sb_put(b, "\n");
        if (sys && !assistant) {
            sb_put(b, sys);
            sb_put(b, "\n\n");
            sys = NULL;
        }
        sb_put_trimmed(b, m->content);
        sb_put(b, "<end_of_turn>\n");
    }
    if (a->add_gen) sb_put(b, "<start_of_turn>model\n");
}

static void render_phi3(strbuf *b, const render_args *a) {
    if (a->bos_in_text) sb_put(b, a->bos);
    for (size_t i = 0; i < a->n; i++) {
        sb_put(b, "<|");
        sb_put(b, a->msgs[i].role);
        sb_put(b, "|>\n");
        sb_put(b, a->msgs[i].content);
        sb_put(b, "<|end|>\n");
    }
    sb_put(b, a->add_gen ? "<|assistant|>\n" : a->eos);
}

static void render_zephyr(strbuf *b, const render_args *a) {
    if (a->bos_in_text) sb_put(b, a->bos);
    for (size_t i = 0; i < a->n; i++) {
        sb_put(b, "<|");
        sb_put(b, a->msgs[i].role);
        sb_put(b, "|>\n");
        sb_put(b, a->msgs[i].content);
        sb_put(b, a->eos);
        sb_put(b, "\n");
    }
    if (a->add_gen && a->n > 0) sb_put(b, "<|assistant|>\n");
}

static void render_mistral(strbuf *b, const render_args *a) {
    if (a->bos_in_text) sb_put(b, a->bos);
    const char *sys = NULL;
    for (size_t i = 0; i < a->n; i++) {
        const tessera_chat_message *m = &a->msgs[i];
        if (role_is(m, "system")) {
            sys = m->content;
        } else if (role_is(m, "assistant")) {
            sb_put(b, m->content);
            sb_put(b, a->eos);
        } else {
            sb_put(b, "[INST] ");
            if (sys) {
                sb_put(b, sys);
                sb_put(b, "\n\n");
                sys = NULL;
            }
            sb_put(b, m->content);
            sb_put(b, " [/INST]");
        }
    }
}

typedef void (*render_fn)(strbuf *b, const render_args *a);

static const render_fn renderers[TESSERA_CHAT_N_FAMILIES] = {
    [TESSERA_CHAT_CHATML] = render_chatml, [TESSERA_CHAT_LLAMA2] = render_llama2,
    [TESSERA_CHAT_LLAMA3] = render_llama3, [TESSERA_CHAT_GEMMA] = render_gemma,
    [TESSERA_CHAT_PHI3] = render_phi3,     [TESSERA_CHAT_ZEPHYR] = render_zephyr,
    [TESSERA_CHAT_MISTRAL] = render_mistral,
};

/* ---------------------------------------------------------------- entry */

char *chat_render_alloc(const tessera_chat_format *format, const tessera_chat_message *messages,
                        size_t n_messages, bool add_generation_prompt, const char *bos_text,
                        const char *eos_text, size_t *len) {
    if (!format || (int)format->family < 0 || format->family >= TESSERA_CHAT_N_FAMILIES) {
        error_set("chat template: unknown family %d", format ? (int)format->family : -1);
        return NULL;
    }
    if (!memchr(format->default_system, '\0', sizeof format->default_system)) {
        error_set("chat template: default system message is not NUL-terminated");
        return NULL;
    }
    if (n_messages > 0 && !messages) {
        error_set("chat template: message list is NULL");
        return NULL;
    }
    for (size_t i = 0; i < n_messages; i++) {
        if (!messages[i].role || !messages[i].content) {
            error_set("chat template: message %zu has no %s", i,
                      messages[i].role ? "content" : "role");
            return NULL;
        }
    }
    render_args a = {
        .msgs = messages,
        .n = n_messages,
        .add_gen = add_generation_prompt,
        .bos_in_text = format->bos_in_text,
        .bos = bos_text ? bos_text : "",
        .eos = eos_text ? eos_text : "",
        .default_system = format->default_system,
    };
    strbuf b = {0};
    sb_put(&b, ""); /* an empty conversation still gives "" */
    renderers[format->family](&b, &a);
    if (b.oom) {
        free(b.data);
        error_set("chat template: out of memory rendering %zu messages", n_messages);
        return NULL;
    }
    if (len) *len = b.len;
    return b.data;
}

int32_t tessera_chat_render(const tessera_chat_format *format, const tessera_chat_message *messages,
                            size_t n_messages, bool add_generation_prompt, const char *bos_text,
                            const char *eos_text, char *buf, int32_t size) {
    size_t len = 0;
    char *text = chat_render_alloc(format, messages, n_messages, add_generation_prompt, bos_text,
                                   eos_text, &len);
    if (!text) return INT32_MIN;
    if (len >= (size_t)INT32_MAX) {
        free(text);
        error_set("chat template: rendered conversation of %zu bytes is too long", len);
        return INT32_MIN;
    }
    if (!buf || size < 0 || (size_t)size < len + 1) {
        free(text);
        return -(int32_t)(len + 1);
    }
    memcpy(buf, text, len + 1);
    free(text);
    return (int32_t)len;
}
