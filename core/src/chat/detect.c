/* detect — which family a Jinja chat template belongs to, by the markers
 * each family's template writes, and whether it writes the BOS token. */
#include <string.h>

#include "chat/chat.h"
#include "util/error.h"

static const char *const family_names[TESSERA_CHAT_N_FAMILIES] = {
    [TESSERA_CHAT_CHATML] = "chatml", [TESSERA_CHAT_LLAMA2] = "llama2",
    [TESSERA_CHAT_LLAMA3] = "llama3", [TESSERA_CHAT_GEMMA] = "gemma",
    [TESSERA_CHAT_PHI3] = "phi3",     [TESSERA_CHAT_ZEPHYR] = "zephyr",
    [TESSERA_CHAT_MISTRAL] = "mistral",
};

/* Whether the family's reference template writes bos_token. */
static const bool family_bos[TESSERA_CHAT_N_FAMILIES] = {
    [TESSERA_CHAT_CHATML] = false, [TESSERA_CHAT_LLAMA2] = true, [TESSERA_CHAT_LLAMA3] = true,
    [TESSERA_CHAT_GEMMA] = true,   [TESSERA_CHAT_PHI3] = false,  [TESSERA_CHAT_ZEPHYR] = false,
    [TESSERA_CHAT_MISTRAL] = true,
};

const char *tessera_chat_family_name(tessera_chat_family family) {
    if ((int)family < 0 || family >= TESSERA_CHAT_N_FAMILIES) return "unknown";
    return family_names[family];
}

static bool has(const char *text, const char *marker) { return strstr(text, marker) != NULL; }

/* Order matters: a ChatML template may mention "[INST]" in a comment, Phi-3
 * and Zephyr share "<|user|>" and differ by "<|end|>". */
static int family_of(const char *t) {
    if (has(t, "<|im_start|>")) return TESSERA_CHAT_CHATML;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return TESSERA_CHAT_LLAMA3;
    if (has(t, "<start_of_turn>")) return TESSERA_CHAT_GEMMA;
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return TESSERA_CHAT_PHI3;
    if (has(t, "<|user|>") && has(t, "<|assistant|>")) return TESSERA_CHAT_ZEPHYR;
    if (has(t, "[INST]")) return has(t, "<<SYS>>") ? TESSERA_CHAT_LLAMA2 : TESSERA_CHAT_MISTRAL;
    return -1;
}

/* A ChatML template's built-in system message: a string literal
 * '<|im_start|>system\n...<|im_end|>' whose text has no Jinja in it (the
 * "\n" is the two characters of the escape in the template source). */
static void find_default_system(const char *t, char *out, size_t size) {
    static const char head[] = "<|im_start|>system\\n";
    static const char tail[] = "<|im_end|>";
    out[0] = '\0';
    for (const char *p = strstr(t, head); p; p = strstr(p + 1, head)) {
        const char *text = p + strlen(head);
        const char *end = strstr(text, tail);
        if (!end) return;
        size_t len = (size_t)(end - text);
        const char *jinja = strpbrk(text, "'\"{}+\\");
        if (len == 0 || len >= size || (jinja && jinja < end)) continue;
        memcpy(out, text, len);
        out[len] = '\0';
        return;
    }
}

tessera_chat_format tessera_chat_format_detect(const char *jinja) {
    tessera_chat_format f = {.family = TESSERA_CHAT_CHATML, .bos_in_text = false, .fallback = true};
    if (!jinja) return f;
    int family = family_of(jinja);
    if (family < 0) return f;
    f.family = (tessera_chat_family)family;
    f.bos_in_text = has(jinja, "bos_token");
    f.fallback = false;
    if (f.family == TESSERA_CHAT_CHATML)
        find_default_system(jinja, f.default_system, sizeof f.default_system);
    return f;
}

int tessera_chat_format_from_name(const char *name, tessera_chat_format *out) {
    for (int i = 0; name && i < TESSERA_CHAT_N_FAMILIES; i++) {
        if (strcmp(name, family_names[i]) != 0) continue;
        memset(out, 0, sizeof *out);
        out->family = (tessera_chat_family)i;
        out->bos_in_text = family_bos[i];
        out->fallback = false;
        return 0;
    }
    return error_set("chat template '%s' is unknown (known: chatml, llama2, llama3, gemma, phi3, "
                     "zephyr, mistral)",
                     name ? name : "(null)");
}
