/* Chat templates end to end on a real vocabulary: stories260K copied with
 * a tokenizer.chat_template added, then loaded through the public API. The
 * family is detected from the GGUF metadata, and the rendered text
 * tokenizes to exactly one BOS at the start whether the template writes it
 * (llama2, llama3: tokenize without add_special) or not (chatml: the
 * tokenizer adds it). Finally `tessera chat` runs on such a copy. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "chat/chat.h"
#include "gguf/gguf.h"

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

/* Copy src to dst with tokenizer.chat_template set to tmpl. */
static int write_with_template(const char *src, const char *dst, const char *tmpl) {
    gguf_file *f = gguf_open(src);
    if (!f) return -1;
    gguf_writer *w = gguf_writer_new();
    int rc = w ? 0 : -1;
    for (int64_t i = 0; rc == 0 && i < gguf_kv_count(f); i++)
        rc = gguf_writer_copy_kv(w, f, i);
    if (rc == 0) rc = gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, strlen(tmpl));
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        rc = gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data);
    }
    if (rc == 0) rc = gguf_writer_write_file(w, dst);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

typedef struct family_case {
    const char *name;
    const char *jinja; /* abridged, with the family's markers */
    tessera_chat_family family;
    bool bos_in_text;
} family_case;

static const family_case CASES[] = {
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
     TESSERA_CHAT_CHATML, false},
    {"llama2",
     "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
     "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + "
     "content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}<<SYS>>",
     TESSERA_CHAT_LLAMA2, true},
    {"llama3",
     "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
     "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = "
     "bos_token + content %}{% endif %}",
     TESSERA_CHAT_LLAMA3, true},
};

static const tessera_chat_message CONV[] = {
    {"system", "You tell stories."},
    {"user", "Once upon a time"},
    {"assistant", "there was a cat."},
    {"user", "What did the cat do?"},
};

static void check_family(const char *path, const family_case *fc, const char *bin) {
    tessera_model_params mp = tessera_model_default_params();
    tessera_model *m = tessera_model_load(path, &mp);
    CHECK(m != NULL, "%s: %s", fc->name, tessera_last_error());
    if (!m) return;
    const char *jinja = tessera_model_meta_str(m, "tokenizer.chat_template");
    CHECK(jinja && !strcmp(jinja, fc->jinja), "%s: template read back differs", fc->name);
    tessera_chat_format fmt = tessera_chat_format_detect(jinja);
    CHECK(fmt.family == fc->family && !fmt.fallback && fmt.bos_in_text == fc->bos_in_text,
          "%s: detected %s, bos_in_text %d, fallback %d", fc->name,
          tessera_chat_family_name(fmt.family), fmt.bos_in_text, fmt.fallback);

    tessera_token bos = tessera_token_bos(m);
    char bos_text[32] = "", eos_text[32] = "";
    int32_t n = tessera_token_to_piece(m, bos, bos_text, sizeof bos_text - 1, true);
    bos_text[n > 0 ? n : 0] = '\0';
    n = tessera_token_to_piece(m, tessera_token_eos(m), eos_text, sizeof eos_text - 1, true);
    eos_text[n > 0 ? n : 0] = '\0';
    CHECK(bos >= 0 && bos_text[0], "%s: BOS %d has no text", fc->name, (int)bos);

    size_t len = 0;
    char *text = chat_render_alloc(&fmt, CONV, 4, true, bos_text, eos_text, &len);
    CHECK(text != NULL, "%s: render: %s", fc->name, tessera_last_error());
    tessera_token toks[1024];
    int32_t nt = text ? tessera_tokenize(m, text, len, toks, 1024, !fmt.bos_in_text, true) : 0;
    CHECK(nt > 2, "%s: tokenized to %d tokens", fc->name, (int)nt);
    if (nt > 2) {
        CHECK(toks[0] == bos && toks[1] != bos, "%s: starts %d %d, expected one BOS (%d)",
              fc->name, (int)toks[0], (int)toks[1], (int)bos);
        int n_bos = 0;
        for (int32_t i = 0; i < nt; i++) n_bos += toks[i] == bos;
        /* llama2 writes BOS before every user turn: two here. */
        int want = fc->family == TESSERA_CHAT_LLAMA2 ? 2 : 1;
        CHECK(n_bos == want, "%s: %d BOS tokens, expected %d", fc->name, n_bos, want);
    }
    free(text);
    tessera_model_free(m);

    /* The CLI picks the same family from the file and says so. */
    if (!bin) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "printf 'Hello\\nAnd then?\\n' | '%s' chat -m '%s' -n 4 --seed 1 --verbose "
             "--device ref 2>&1",
             bin, path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "%s: cannot run %s", fc->name, bin);
    if (!p) return;
    char out[16384];
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    char want[64];
    snprintf(want, sizeof want, "template %s%s", fc->name,
             fc->bos_in_text ? " (writes BOS)" : ";");
    CHECK(status == 0, "%s: tessera chat exited with status %d:\n%s", fc->name, status, out);
    CHECK(strstr(out, want) != NULL, "%s: tessera chat did not report '%s':\n%s", fc->name, want,
          out);
    CHECK(strstr(out, "ChatML") == NULL, "%s: tessera chat fell back to ChatML:\n%s", fc->name,
          out);
    int turns = 0;
    for (const char *s = out; (s = strstr(s, "[prompt: ")) != NULL; s++) turns++;
    CHECK(turns == 2, "%s: tessera chat answered %d turns, expected 2", fc->name, turns);
}

int main(void) {
    const char *shared = getenv("TESSERA_SHARED");
    const char *bin = getenv("TESSERA_BIN");
    char src[1024];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", shared ? shared : "../shared");
    if (access(src, R_OK) != 0) {
        printf("skip: %s is missing\n", src);
        return 77;
    }
    if (bin && access(bin, X_OK) != 0) bin = NULL;
    if (tessera_init(NULL) < 0) {
        fprintf(stderr, "tessera_init: %s\n", tessera_last_error());
        return 1;
    }
    char dir[] = "/tmp/tessera-chat-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char path[1100];
        snprintf(path, sizeof path, "%s/%s.gguf", dir, CASES[i].name);
        if (write_with_template(src, path, CASES[i].jinja) < 0) {
            CHECK(0, "%s: writing %s: %s", CASES[i].name, path, tessera_last_error());
            continue;
        }
        check_family(path, &CASES[i], bin);
        unlink(path);
    }
    rmdir(dir);
    tessera_shutdown();
    if (failures) {
        fprintf(stderr, "test_chat_model: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_chat_model: all checks passed%s\n",
           bin ? "" : " (tessera chat not run: no TESSERA_BIN)");
    return 0;
}
