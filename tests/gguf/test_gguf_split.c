/*
 * Split models (llama.cpp's gguf-split format): stories260K split into 3
 * files loads from its first file with every tensor, the same bytes and the
 * same greedy text as the single file; --merge gives the single file back;
 * and broken splits (a missing file, a wrong split.count, a file given twice
 * (as it is, or renumbered: a tensor in two files),
 * a wrong split.tensors.count, a later shard opened directly, a first shard
 * renamed) each fail with one error naming the file and key at fault.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "util/error.h"

#define N_GEN 24

static char src_model[4096];

/* A fresh split of the source model into 3 files: its prefix and the
 * path of each file. */
typedef struct {
    char prefix[4096];
    char shard[3][4200];
} split_files;

static void make_split(split_files *s, const char *name) {
    snprintf(s->prefix, sizeof s->prefix, "%s/%s", harness_tmpdir(), name);
    gguf_file *f = gguf_open(src_model);
    REQUIRE(f, "open %s: %s", src_model, error_get());
    int64_t per = (gguf_tensor_count(f) + 2) / 3;
    int32_t n = 0;
    int rc = gguf_split_write(f, s->prefix, per, 0, false, &n);
    gguf_close(f);
    REQUIRE(rc == 0, "split: %s", error_get());
    REQUIRE(n == 3, "split into %d files, expected 3", (int)n);
    for (int32_t no = 0; no < 3; no++)
        REQUIRE(gguf_split_path(s->shard[no], sizeof s->shard[no], s->prefix, no, 3) == 0, "name: %s", error_get());
}

/* The greedy continuation of a fixed prompt, as token ids. */
static int32_t greedy(const char *path, tessera_token *out) {
    tessera_model *m = harness_model_load(path, NULL, NULL);
    tessera_context *ctx = harness_context(m, NULL);
    tessera_token toks[64];
    const char *prompt = "Once upon a time";
    int32_t n = tessera_tokenize(m, prompt, strlen(prompt), toks, 64, true, false);
    REQUIRE(n > 0, "tokenize: %s", tessera_last_error());
    int32_t pos = 0, n_vocab = tessera_model_n_vocab(m), got = 0;
    for (; got < N_GEN; got++) {
        REQUIRE(tessera_decode(ctx, toks, n, pos, 0) == 0, "decode: %s", tessera_last_error());
        pos += n;
        const float *logits = tessera_logits(ctx, -1);
        REQUIRE(logits, "logits: %s", tessera_last_error());
        int32_t best = 0;
        for (int32_t v = 1; v < n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        out[got] = toks[0] = best;
        n = 1;
    }
    tessera_context_free(ctx);
    tessera_model_free(m);
    return got;
}

/* Every tensor of the joined split has the source's name, shape and bytes. */
static void expect_same_tensors(const gguf_file *a, const gguf_file *b) {
    REQUIRE(gguf_tensor_count(a) == gguf_tensor_count(b), "%" PRId64 " tensors, expected %" PRId64,
            gguf_tensor_count(b), gguf_tensor_count(a));
    for (int64_t i = 0; i < gguf_tensor_count(a); i++) {
        const gguf_tensor_info *ta = gguf_tensor(a, i);
        const gguf_tensor_info *tb = gguf_find_tensor(b, ta->name);
        REQUIRE(tb, "tensor '%s' missing", ta->name);
        EXPECT(ta->size == tb->size && ta->dtype == tb->dtype, "tensor '%s' size/type", ta->name);
        if (ta->size == tb->size) EXPECT_BYTES(tb->data, ta->data, ta->size, "tensor '%s'", ta->name);
    }
}

TEST(test_split_loads_whole_model) {
    split_files s;
    make_split(&s, "whole");
    gguf_file *src = gguf_open(src_model), *f = gguf_open(s.shard[0]);
    REQUIRE(src && f, "open: %s", error_get());
    EXPECT(gguf_split_count(f) == 3, "split count %d", (int)gguf_split_count(f));
    EXPECT(gguf_split_count(src) == 1, "the single file counts %d", (int)gguf_split_count(src));
    EXPECT(gguf_split_shard(f, 3) == NULL, "only 3 shards");
    expect_same_tensors(src, f);
    /* each later shard alone holds only split keys and its own tensors */
    const gguf_file *s2 = gguf_split_shard(f, 1);
    REQUIRE(s2, "shard 2");
    EXPECT(gguf_find_key(s2, "general.architecture") < 0, "metadata only in the s.shard[0] shard");
    EXPECT(gguf_find_key(f, "tokenizer.ggml.tokens") >= 0, "s.shard[0] shard holds the vocabulary");
    gguf_close(f);
    gguf_close(src);
}

TEST(test_split_same_greedy_text) {
    split_files s;
    make_split(&s, "greedy");
    tessera_token want[N_GEN], got[N_GEN];
    greedy(src_model, want);
    greedy(s.shard[0], got);
    for (int i = 0; i < N_GEN; i++) EXPECT(got[i] == want[i], "token %d: %d, expected %d", i, got[i], want[i]);
}

/* Rewrite shard path with key set to v (u16 for split.no/count, else i32). */
static void rewrite_key(const char *path, const char *key, int32_t v) {
    gguf_file *f = gguf_open_shard(path);
    REQUIRE(f, "open %s: %s", path, error_get());
    gguf_writer *w = gguf_writer_new();
    REQUIRE(w, "writer");
    for (int64_t i = 0; i < gguf_kv_count(f); i++) REQUIRE(gguf_writer_copy_kv(w, f, i) == 0, "copy kv");
    int rc = strcmp(key, "split.tensors.count") == 0 ? gguf_writer_set_i32(w, key, v)
                                                      : gguf_writer_set_u16(w, key, (uint16_t)v);
    REQUIRE(rc == 0, "set %s", key);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        REQUIRE(gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data) == 0, "add");
    }
    REQUIRE(gguf_writer_write_file(w, path) == 0, "write %s: %s", path, error_get());
    gguf_writer_free(w);
    gguf_close(f);
}

TEST(test_merge_round_trip) {
    split_files s;
    char merged[4200];
    make_split(&s, "merge");
    snprintf(merged, sizeof merged, "%s/merged.gguf", harness_tmpdir());
    gguf_file *f = gguf_open(s.shard[0]);
    REQUIRE(f, "open: %s", error_get());
    REQUIRE(gguf_merge_write(f, merged) == 0, "merge: %s", error_get());
    gguf_close(f);
    gguf_file *src = gguf_open(src_model), *m = gguf_open(merged);
    REQUIRE(src && m, "open: %s", error_get());
    EXPECT(gguf_find_key(m, "split.count") < 0, "merged file has no split keys");
    EXPECT(gguf_kv_count(m) == gguf_kv_count(src), "%" PRId64 " keys, expected %" PRId64, gguf_kv_count(m),
           gguf_kv_count(src));
    expect_same_tensors(src, m);
    gguf_close(m);
    /* llama-gguf-split --merge leaves split.count = 0: a single file */
    rewrite_key(merged, "split.count", 0);
    m = gguf_open(merged);
    REQUIRE(m, "open with split.count 0: %s", error_get());
    EXPECT(gguf_split_count(m) == 1, "split count %d", (int)gguf_split_count(m));
    expect_same_tensors(src, m);
    gguf_close(m);
    gguf_close(src);
}

/* Opening path fails with one error holding both needles. */
static void expect_open_fails(const char *path, const char *needle1, const char *needle2) {
    gguf_file *f = gguf_open(path);
    EXPECT_ERROR(f == NULL, error_get(), needle1, "open %s", path);
    if (!f) EXPECT_HAS(error_get(), needle2, "open %s", path);
    gguf_close(f);
    /* the model loader says the same */
    tessera_model *m = tessera_model_load(path, NULL);
    EXPECT_ERROR(m == NULL, tessera_last_error(), needle1, "load %s", path);
    tessera_model_free(m);
}

TEST(test_missing_shard) {
    split_files s;
    make_split(&s, "missing");
    REQUIRE(unlink(s.shard[2]) == 0, "unlink %s", s.shard[2]);
    expect_open_fails(s.shard[0], "missing-00003-of-00003.gguf", "shard 3 of 3");
}

TEST(test_wrong_split_count) {
    split_files s;
    make_split(&s, "count");
    rewrite_key(s.shard[1], "split.count", 4);
    expect_open_fails(s.shard[0], "split.count", "count-00002-of-00003.gguf");
}

TEST(test_duplicated_shard) {
    split_files s;
    make_split(&s, "dup");
    size_t n;
    char *bytes = harness_read_file(s.shard[1], &n);
    REQUIRE(bytes, "read %s", s.shard[1]);
    FILE *fp = fopen(s.shard[2], "wb");
    REQUIRE(fp && fwrite(bytes, 1, n, fp) == n && fclose(fp) == 0, "copy over %s", s.shard[2]);
    free(bytes);
    expect_open_fails(s.shard[0], "split.no", "dup-00003-of-00003.gguf");
    /* the copy renumbered: the counts add up, but its tensors are shard 2's */
    rewrite_key(s.shard[2], "split.no", 2);
    expect_open_fails(s.shard[0], "in shard 2 and again in shard 3", "dup-00001-of-00003.gguf");
}

TEST(test_tensor_count_mismatch) {
    split_files s;
    make_split(&s, "tcount");
    gguf_file *f = gguf_open_shard(s.shard[0]);
    REQUIRE(f, "open: %s", error_get());
    int64_t total;
    REQUIRE(gguf_get_int(f, "split.tensors.count", &total) == 0, "split.tensors.count");
    gguf_close(f);
    rewrite_key(s.shard[0], "split.tensors.count", (int32_t)total + 1);
    expect_open_fails(s.shard[0], "split.tensors.count", "tcount-00001-of-00003.gguf");
}

TEST(test_later_shard_or_renamed_first) {
    split_files s;
    char renamed[4200];
    make_split(&s, "later");
    expect_open_fails(s.shard[1], "split.no", "later-00001-of-00003.gguf");
    snprintf(renamed, sizeof renamed, "%s/renamed.gguf", harness_tmpdir());
    REQUIRE(rename(s.shard[0], renamed) == 0, "rename");
    expect_open_fails(renamed, "-00001-of-00003.gguf", "renamed.gguf");
}

TEST(test_split_by_size) {
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/bysize", harness_tmpdir());
    gguf_file *f = gguf_open(src_model);
    REQUIRE(f, "open: %s", error_get());
    uint64_t total = 0, biggest = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        uint64_t s = gguf_tensor(f, i)->size;
        total += s;
        if (s > biggest) biggest = s;
    }
    int32_t n = 0;
    /* half the data per file: at least 2 files, and a dry run writes none */
    REQUIRE(gguf_split_write(f, prefix, 0, total / 2, true, &n) == 0, "plan: %s", error_get());
    EXPECT(n >= 2, "%d files for half the data each", (int)n);
    char first[4200];
    REQUIRE(gguf_split_path(first, sizeof first, prefix, 0, n) == 0, "name");
    EXPECT(!harness_file_exists(first), "a dry run wrote %s", first);
    REQUIRE(gguf_split_write(f, prefix, 0, biggest, false, &n) == 0, "split: %s", error_get());
    REQUIRE(gguf_split_path(first, sizeof first, prefix, 0, n) == 0, "name");
    gguf_file *j = gguf_open(first);
    REQUIRE(j, "open %s: %s", first, error_get());
    for (int32_t s = 0; s < gguf_split_count(j); s++) {
        const gguf_file *sh = gguf_split_shard(j, s);
        uint64_t data = gguf_file_size(sh) - gguf_data_offset(sh);
        EXPECT(data <= biggest + 64 * 32, "%s holds %" PRIu64 " bytes of data, limit %" PRIu64, gguf_path(sh),
               data, biggest);
    }
    expect_same_tensors(f, j);
    gguf_close(j);
    gguf_close(f);
}

FIXTURE(setup) {
    snprintf(src_model, sizeof src_model, "%s", harness_model_file("stories260K").s);
    harness_host_start();
    return 0;
}

FIXTURE(teardown) {
    tessera_shutdown();
    return 0;
}

HARNESS_MAIN_GROUP("gguf split", setup, teardown, HARNESS_TEST(test_split_loads_whole_model),
                   HARNESS_TEST(test_split_same_greedy_text), HARNESS_TEST(test_merge_round_trip),
                   HARNESS_TEST(test_missing_shard), HARNESS_TEST(test_wrong_split_count),
                   HARNESS_TEST(test_duplicated_shard), HARNESS_TEST(test_tensor_count_mismatch),
                   HARNESS_TEST(test_later_shard_or_renamed_first), HARNESS_TEST(test_split_by_size))
