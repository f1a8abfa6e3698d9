/* Chat templates end to end on a real vocabulary: stories260K copied with
 * a tokenizer.chat_template added (templates of ../shared/templates), then
 * loaded through the public API. The model's template is used with the
 * vocabulary's BOS/EOS texts, the rendered text tokenizes to exactly one
 * BOS at the start whether the template writes it (Llama 3.1: tokenize
 * without adding BOS) or not (Qwen2.5: the tokenizer adds it), a model
 * without a template falls back to ChatML, and `tessera chat` runs on such
 * copies, with the model's template and with --chat-template-file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#include <tessera/tessera.h>

#include "gguf/gguf.h"

static char src_model[4096], tmpdir[64], templates[4096];
static const char *bin;

/* Copy src to dst with tokenizer.chat_template set to tmpl (NULL: none). */
static int write_with_template(const char *src, const char *dst, const char *tmpl) {
    gguf_file *f = gguf_open(src);
    if (!f) return -1;
    gguf_writer *w = gguf_writer_new();
    int rc = w ? 0 : -1;
    for (int64_t i = 0; rc == 0 && i < gguf_kv_count(f); i++) rc = gguf_writer_copy_kv(w, f, i);
    if (rc == 0 && tmpl) rc = gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, strlen(tmpl));
    for (int64_t i = 0; rc == 0 && i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        rc = gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data);
    }
    if (rc == 0) rc = gguf_writer_write_file(w, dst);
    gguf_writer_free(w);
    gguf_close(f);
    return rc;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 20);
    size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

static const tessera_chat_message CONV[] = {
    {"system", "You tell stories."},
    {"user", "Once upon a time"},
    {"assistant", "there was a cat."},
    {"user", "What did the cat do?"},
};

/* Model file with the template of $TESSERA_SHARED/templates/NAME (NULL:
 * none; a template that is absent skips the test). */
static void model_path(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s.gguf", tmpdir, name ? name : "none");
    char *tmpl = NULL;
    if (name) {
        char tp[4400];
        snprintf(tp, sizeof tp, "%s/%s", templates, name);
        harness_require_file(tp);
        tmpl = read_text(tp);
        if (!tmpl) fail_msg("cannot read %s", tp);
    }
    if (write_with_template(src_model, out, tmpl) < 0) fail_msg("writing %s: %s", out, tessera_last_error());
    free(tmpl);
}

/* Render CONV with the model's template; count BOS tokens. */
static void check_bos(const char *name, bool writes_bos) {
    char path[1200];
    model_path(path, sizeof path, name);
    tessera_model_params mp = tessera_model_default_params();
    tessera_model *m = tessera_model_load(path, &mp);
    if (!m) fail_msg("%s: %s", path, tessera_last_error());
    bool fallback = true;
    tessera_chat_template *t = tessera_chat_template_from_model(m, &fallback);
    assert_non_null(t);
    assert_int_equal(fallback, name == NULL);
    size_t len = 0;
    char *text = tessera_chat_template_render(t, CONV, 4, true, &len);
    if (!text) fail_msg("%s: render: %s", name, tessera_last_error());
    assert_int_equal(tessera_chat_template_text_has_bos(t, text, len), writes_bos);
    if (!name) /* ChatML */
        assert_non_null(strstr(text, "<|im_start|>user\nWhat did the cat do?<|im_end|>\n<|im_start|>assistant\n"));
    tessera_token toks[2048];
    int32_t nt = tessera_tokenize(m, text, len, toks, 2048, !writes_bos, true);
    assert_true(nt > 2);
    tessera_token bos = tessera_token_bos(m);
    int n_bos = 0;
    for (int32_t i = 0; i < nt; i++) n_bos += toks[i] == bos;
    assert_int_equal(toks[0], bos);
    assert_int_equal(n_bos, 1);
    free(text);
    tessera_chat_template_free(t);
    tessera_model_free(m);
    unlink(path);
}

TEST(test_llama31_writes_bos) {
    check_bos("meta-llama-Llama-3.1-8B-Instruct.jinja", true);
}
TEST(test_qwen25_tokenizer_adds_bos) {
    check_bos("Qwen-Qwen2.5-7B-Instruct.jinja", false);
}
TEST(test_no_template_chatml) {
    check_bos(NULL, false);
}

static char *run_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "printf 'Hello\\nAnd then?\\n' | '%s' chat %s -n 4 --seed 1 --verbose --device ref 2>&1",
             bin, args);
    FILE *p = popen(cmd, "r");
    if (!p) fail_msg("cannot run %s", bin);
    char *out = malloc(65536);
    size_t got = fread(out, 1, 65535, p);
    out[got] = '\0';
    int status = pclose(p);
    if (status != 0) fail_msg("'%s' exited with %d:\n%s", cmd, status, out);
    return out;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (; (s = strstr(s, what)) != NULL; s++) n++;
    return n;
}

TEST(test_cli) {
    bin = harness_tessera_bin();
    char path[1200], args[3000];
    /* stories260K's context is 128: short templates */
    model_path(path, sizeof path, "google-gemma-2-2b-it.jinja");
    snprintf(args, sizeof args, "-m '%s'", path);
    char *out = run_cli(args);
    if (!strstr(out, "template model;")) fail_msg("no 'template model;' in:\n%s", out);
    assert_null(strstr(out, "ChatML"));
    assert_int_equal(count(out, "[prompt: "), 2);
    free(out);
    /* --chat-template-file replaces the model's */
    char file[128];
    snprintf(file, sizeof file, "%s/mini.jinja", tmpdir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("{% for m in messages %}{{ m.role[0] }}: {{ m.content }}\n{% endfor %}a:", f);
    fclose(f);
    snprintf(args, sizeof args, "-m '%s' --chat-template-file '%s'", path, file);
    out = run_cli(args);
    if (!strstr(out, "mini.jinja;")) fail_msg("template file not reported:\n%s", out);
    assert_int_equal(count(out, "[prompt: "), 2);
    free(out);
    /* a template that does not compile is an error naming the line */
    f = fopen(file, "w");
    assert_non_null(f);
    fputs("line one\n{% if %}", f);
    fclose(f);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "'%s' chat -m '%s' --chat-template-file '%s' -p hi 2>&1", bin, path, file);
    FILE *p = popen(cmd, "r");
    char err[4096];
    size_t got = fread(err, 1, sizeof err - 1, p);
    err[got] = '\0';
    int status = pclose(p);
    assert_int_not_equal(status, 0);
    if (!strstr(err, "mini.jinja: template line 2")) fail_msg("bad template error:\n%s", err);
    unlink(file);
    unlink(path);
    /* no template: a note, and ChatML */
    model_path(path, sizeof path, NULL);
    snprintf(args, sizeof args, "-m '%s'", path);
    out = run_cli(args);
    if (!strstr(out, "no chat template; using ChatML")) fail_msg("no fallback note:\n%s", out);
    free(out);
    unlink(path);
}

/* stories260K, the templates, and Tessera started. */
FIXTURE(setup) {
    snprintf(src_model, sizeof src_model, "%s", harness_model_file("stories260K").s);
    snprintf(templates, sizeof templates, "%s", harness_shared_file("templates").s);
    REQUIRE(tessera_init(NULL) >= 0, "tessera_init: %s", tessera_last_error());
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tessera-chat-XXXXXX");
    REQUIRE(mkdtemp(tmpdir) != NULL, "mkdtemp %s", tmpdir);
    return 0;
}

FIXTURE(teardown) {
    rmdir(tmpdir);
    tessera_shutdown();
    return 0;
}

HARNESS_MAIN_GROUP("chat model", setup, teardown, HARNESS_TEST(test_llama31_writes_bos),
                   HARNESS_TEST(test_qwen25_tokenizer_adds_bos), HARNESS_TEST(test_no_template_chatml),
                   HARNESS_TEST(test_cli))
