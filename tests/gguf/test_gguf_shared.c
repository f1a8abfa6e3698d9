/*
 * Every GGUF file in ../shared (models and vocabularies) opens; known values
 * read back; and rewriting each one through reader -> writer reproduces its
 * tensor data section byte for byte (and, for the files llama.cpp wrote with
 * the same layout, the whole file).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_test.h"
#include "util/error.h"

static bool str_is(gguf_str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static void check_str(const gguf_file *f, const char *key, const char *want) {
    gguf_str s = {0};
    int rc = gguf_get_str(f, key, &s);
    EXPECT(rc == 0, "%s: %s", gguf_path(f), error_get());
    if (rc == 0)
        EXPECT(str_is(s, want), "%s: %s = '%.*s', expected '%s'", gguf_path(f), key, (int)s.len,
               s.ptr, want);
}

static void check_u32(const gguf_file *f, const char *key, uint32_t want) {
    uint32_t v = 0;
    int rc = gguf_get_u32(f, key, &v);
    EXPECT(rc == 0, "%s: %s", gguf_path(f), error_get());
    EXPECT(v == want, "%s: %s = %" PRIu32 ", expected %" PRIu32, gguf_path(f), key, v, want);
}

static void check_tensor(const gguf_file *f, const char *name, int32_t dtype, int n_dims,
                         int64_t ne0, int64_t ne1) {
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    EXPECT(t != NULL, "%s: %s", gguf_path(f), error_get());
    if (!t) return;
    EXPECT(t->dtype == dtype, "%s: %s dtype %d, expected %d", gguf_path(f), name, t->dtype, dtype);
    EXPECT(t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == ne1,
           "%s: %s shape %d:[%" PRId64 ", %" PRId64 "], expected %d:[%" PRId64 ", %" PRId64 "]",
           gguf_path(f), name, t->n_dims, t->ne[0], t->ne[1], n_dims, ne0, ne1);
}

static void check_string_array(const gguf_file *f, const char *key, uint64_t want_count) {
    gguf_type et = GGUF_TYPE_COUNT;
    uint64_t count = 0;
    int rc = gguf_get_arr(f, key, &et, &count, NULL);
    EXPECT(rc == 0, "%s: %s", gguf_path(f), error_get());
    EXPECT(et == GGUF_TYPE_STRING && count == want_count,
           "%s: %s is %s[%" PRIu64 "], expected string[%" PRIu64 "]", gguf_path(f), key,
           gguf_type_name(et), count, want_count);
    /* every element reachable, and the last one through the slow path too */
    for (uint64_t j = 0; j < count; j++) {
        gguf_str s;
        if (gguf_get_arr_str(f, key, j, &s) != 0) {
            ADD_FAILURE("%s: %s[%" PRIu64 "]: %s", gguf_path(f), key, j, error_get());
            break;
        }
    }
    if (count > 0) {
        gguf_value v, e;
        gguf_str s;
        EXPECT(gguf_kv_value(f, gguf_find_key(f, key), &v) == 0, "%s", error_get());
        EXPECT(gguf_value_elem(&v, count - 1, &e) == 0, "%s", error_get());
        EXPECT(gguf_get_arr_str(f, key, count - 1, &s) == 0, "%s", error_get());
        EXPECT(e.type == GGUF_TYPE_STRING && e.size == s.len && e.data == s.ptr,
               "%s: %s: value view and string getter disagree on the last element", gguf_path(f),
               key);
    }
    gguf_str s;
    EXPECT(gguf_get_arr_str(f, key, count, &s) != 0 && *error_get(),
           "%s: %s[%" PRIu64 "] past the end must fail", gguf_path(f), key, count);
}

/* Tensors fit in the data section, in offset order, without overlap. */
static void check_tensor_layout(const gguf_file *f) {
    uint64_t data_size = gguf_file_size(f) - gguf_data_offset(f);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        EXPECT(t && t->offset + t->size <= data_size, "%s: tensor %" PRId64 " outside the file",
               gguf_path(f), i);
        EXPECT(t && t->offset % gguf_alignment(f) == 0, "%s: tensor %" PRId64 " misaligned",
               gguf_path(f), i);
        EXPECT(t && (const uint8_t *)t->data == (const uint8_t *)gguf_data(f) + t->offset,
               "%s: tensor %" PRId64 " data pointer", gguf_path(f), i);
        EXPECT(t && gguf_find_tensor(f, t->name) == t, "%s: lookup of '%s'", gguf_path(f),
               t ? t->name : "");
    }
}

static void check_stories(const gguf_file *f) {
    check_str(f, "general.architecture", "llama");
    check_str(f, "tokenizer.ggml.model", "llama");
    check_u32(f, "llama.block_count", 5);
    check_u32(f, "llama.embedding_length", 64);
    check_u32(f, "llama.attention.head_count", 8);
    check_u32(f, "llama.attention.head_count_kv", 4);
    check_u32(f, "llama.context_length", 128);
    EXPECT(gguf_tensor_count(f) == 48, "stories260K has %" PRId64 " tensors, expected 48",
           gguf_tensor_count(f));
    check_tensor(f, "token_embd.weight", 0, 2, 64, 512);
    check_tensor(f, "blk.4.ffn_down.weight", 0, 2, 172, 64);
    check_string_array(f, "tokenizer.ggml.tokens", 512);
    gguf_str s;
    EXPECT(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 0, &s) == 0 && str_is(s, "<unk>"),
           "stories260K token 0 should be <unk>");
    float eps = 0;
    EXPECT(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps) == 0 && eps > 0 &&
           eps < 1e-3f, "rms epsilon %g: %s", eps, error_get());
    int64_t n = 0;
    EXPECT(gguf_get_int(f, "llama.block_count", &n) == 0 && n == 5, "get_int block_count");
    /* errors name the key and both types */
    uint32_t u;
    EXPECT(gguf_get_u32(f, "general.architecture", &u) != 0 &&
           strstr(error_get(), "general.architecture") && strstr(error_get(), "string") &&
           strstr(error_get(), "uint32"), "wrong-type message: '%s'", error_get());
    EXPECT(gguf_get_u32(f, "llama.no_such_key", &u) != 0 &&
           strstr(error_get(), "llama.no_such_key") && strstr(error_get(), "not found"),
           "missing-key message: '%s'", error_get());
    EXPECT(gguf_find_tensor(f, "no.such.tensor") == NULL && strstr(error_get(), "no.such.tensor"),
           "missing-tensor message: '%s'", error_get());
}

/* synth-s-<TYPE>.gguf: 4 layers x 9 tensors + token_embd, output_norm, output. */
static void check_synth(const gguf_file *f, const char *type) {
    static const struct { const char *name; int32_t dtype; } types[] = {
        {"f32", 0}, {"F16", 1}, {"BF16", 30}, {"Q4_0", 2}, {"Q4_1", 3}, {"Q5_0", 6},
        {"Q5_1", 7}, {"Q8_0", 8}, {"Q2_K", 10}, {"Q3_K_S", 11}, {"Q4_K_S", 12},
        {"Q5_K_S", 13}, {"Q6_K", 14}, {"Q4_K_M-mix", 12}, {"IQ4_NL", 20}, {"IQ4_XS", 23},
        {"TQ1_0", 34}, {"TQ2_0", 35}, {"IQ4_NL-mix", 20}, {"IQ4_XS-mix", 23}, {"TQ1_0-mix", 34},
    };
    check_str(f, "general.architecture", "llama");
    check_u32(f, "llama.block_count", 4);
    check_u32(f, "llama.embedding_length", 256);
    check_u32(f, "llama.feed_forward_length", 768);
    check_u32(f, "llama.attention.head_count_kv", 2);
    check_string_array(f, "tokenizer.ggml.tokens", 512);
    EXPECT(gguf_tensor_count(f) == 39, "%s: %" PRId64 " tensors, expected 39", gguf_path(f),
           gguf_tensor_count(f));
    int32_t want = -1;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(types[i].name, type) == 0) want = types[i].dtype;
    EXPECT(want >= 0, "unexpected synth file type '%s'", type);
    if (want >= 0) check_tensor(f, "blk.0.attn_q.weight", want, 2, 256, 256);
    const gguf_tensor_info *norm = gguf_find_tensor(f, "output_norm.weight");
    EXPECT(norm && norm->dtype == 0 && norm->n_dims == 1 && norm->ne[0] == 256,
           "%s: output_norm.weight should be F32 [256]", gguf_path(f));
}

static void check_vocab(const gguf_file *f, const char *name) {
    EXPECT(gguf_tensor_count(f) == 0, "%s: vocab file with tensors", gguf_path(f));
    if (strstr(name, "gpt-2")) {
        check_str(f, "tokenizer.ggml.model", "gpt2");
        check_string_array(f, "tokenizer.ggml.tokens", 50257);
        check_string_array(f, "tokenizer.ggml.merges", 50000);
    } else if (strstr(name, "llama-spm")) {
        check_str(f, "tokenizer.ggml.model", "llama");
        check_string_array(f, "tokenizer.ggml.tokens", 32000);
        bool add_bos = false;
        EXPECT(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &add_bos) == 0, "%s",
               error_get());
    }
}

/* Reader -> writer -> file; compare with the original. */
static void check_rewrite(const gguf_file *f, const char *base) {
    char out[1024];
    snprintf(out, sizeof out, "%s/%s", harness_tmpdir(), base);
    gguf_writer *w = gguf_writer_new();
    EXPECT(w != NULL, "%s", error_get());
    if (!w) return;
    for (int64_t i = 0; i < gguf_kv_count(f); i++)
        EXPECT(gguf_writer_copy_kv(w, f, i) == 0, "%s", error_get());
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        EXPECT(gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data) == 0, "%s",
               error_get());
    }
    int rc = gguf_writer_write_file(w, out);
    EXPECT(rc == 0, "writing %s: %s", out, error_get());
    gguf_writer_free(w);
    if (rc != 0) return;

    gguf_file *g = gguf_open(out);
    EXPECT(g != NULL, "re-reading %s: %s", out, error_get());
    if (g) {
        EXPECT(gguf_kv_count(g) == gguf_kv_count(f) && gguf_tensor_count(g) == gguf_tensor_count(f),
               "%s: counts differ after rewrite", base);
        for (int64_t i = 0; i < gguf_kv_count(f) && i < gguf_kv_count(g); i++) {
            gguf_value a, b;
            gguf_kv_value(f, i, &a);
            gguf_kv_value(g, i, &b);
            EXPECT(strcmp(gguf_kv_key(f, i), gguf_kv_key(g, i)) == 0 && a.type == b.type &&
                   a.size == b.size && a.count == b.count && memcmp(a.data, b.data, a.size) == 0,
                   "%s: key '%s' differs after rewrite", base, gguf_kv_key(f, i));
        }
        uint64_t fsz = gguf_file_size(f) - gguf_data_offset(f);
        uint64_t gsz = gguf_file_size(g) - gguf_data_offset(g);
        EXPECT(fsz == gsz && memcmp(gguf_data(f), gguf_data(g), fsz) == 0,
               "%s: tensor data section differs after rewrite (%" PRIu64 " vs %" PRIu64 " bytes)",
               base, fsz, gsz);
        gguf_close(g);
    }
    /* llama.cpp's writer pads the header and every tensor exactly like ours,
     * so a model it wrote comes back byte for byte. */
    if (gguf_tensor_count(f) > 0) {
        size_t na, nb;
        uint8_t *a = read_whole_file(gguf_path(f), &na);
        uint8_t *b = read_whole_file(out, &nb);
        EXPECT(na == nb && memcmp(a, b, na) == 0, "%s: rewritten file is not byte-identical "
               "(%zu vs %zu bytes)", base, na, nb);
        free(a);
        free(b);
    }
    unlink(out);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int scan_dir(const char *dir, int *n_models) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    int count = 0;
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".gguf")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        gguf_file *f = gguf_open(path);
        EXPECT(f != NULL, "%s", error_get());
        if (!f) continue;
        count++;
        EXPECT(gguf_version(f) == 2 || gguf_version(f) == 3, "%s: version", path);
        check_tensor_layout(f);
        if (strcmp(e->d_name, "stories260K.gguf") == 0) check_stories(f);
        if (strncmp(e->d_name, "synth-s-", 8) == 0) {
            char type[64];
            snprintf(type, sizeof type, "%.*s", (int)(strlen(e->d_name) - 13), e->d_name + 8);
            check_synth(f, type);
        }
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0) check_vocab(f, e->d_name);
        check_rewrite(f, e->d_name);
        printf("ok %-28s v%" PRIu32 " %3" PRId64 " keys %3" PRId64 " tensors, data at %" PRIu64
               "\n", e->d_name, gguf_version(f), gguf_kv_count(f), gguf_tensor_count(f),
               gguf_data_offset(f));
        gguf_close(f);
    }
    closedir(d);
    *n_models += count;
    return 0;
}

TEST(test_shared_files) {
    char dir[1024];
    int n = 0;
    snprintf(dir, sizeof dir, "%s/models", harness_shared_dir());
    EXPECT(scan_dir(dir, &n) == 0, "cannot list %s", dir);
    int n_models = n;
    snprintf(dir, sizeof dir, "%s/vocab", harness_shared_dir());
    EXPECT(scan_dir(dir, &n) == 0, "cannot list %s", dir);
    /* ../shared holds 17 models, the repository's own data folder (tests/data)
     * fewer; either way an empty folder must not pass unnoticed. */
    EXPECT(n_models >= 1 && n - n_models >= 2, "found %d model and %d vocab files", n_models, n - n_models);
    rmdir(harness_tmpdir());
    printf("%d shared GGUF files parsed and rewritten\n", n);
}

HARNESS_MAIN("gguf shared", HARNESS_TEST(test_shared_files))
