/*
 * test_quant_ref — the IQ, ternary and MXFP4 formats against llama.cpp's
 * own numbers, dumped by tools/quant-ref/ggml_quant_ref.c (which runs
 * ggml through its public header):
 *
 *   tests/data/quant-ref/dequant.bin  random blocks of every type and
 *       ggml's to_float of them: ours must give the same bits;
 *   tests/data/quant-ref/quant.bin    random rows and ggml_quantize_chunk's
 *       bytes for the types Tessera produces (IQ4_NL, IQ4_XS, TQ1_0,
 *       TQ2_0, MXFP4, IQ3_XXS without a matrix): ours must give the same
 *       bytes;
 *   tests/data/quant-ref/quantw.bin   the same with an importance matrix
 *       per record, for the types that need one (IQ2_XXS, IQ2_XS);
 *   tests/data/quant-ref/quant-iq1.bin  the same for IQ1_S, with zeros
 *       in the matrices.
 *
 * Also: the dot products of every new type against Q8_0/Q8_K activations
 * agree with dequantize-then-multiply.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tensor/dtype.h"
#include "util/error.h"

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static const void *take(reader *r, size_t n) {
    if ((size_t)(r->end - r->p) < n) return NULL;
    const void *v = r->p;
    r->p += n;
    return v;
}

static uint32_t take_u32(reader *r) {
    const void *v = take(r, 4);
    uint32_t x = 0;
    if (v) memcpy(&x, v, 4);
    return x;
}

static uint8_t *slurp(const char *rel, size_t *size) {
    harness_path path = harness_source_file(rel);
    FILE *f = fopen(path.s, "rb");
    REQUIRE(f != NULL, "cannot open %s", path.s);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    REQUIRE(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "cannot read %s", path.s);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

TEST(test_dequant_matches_ggml) {
    size_t size;
    uint8_t *buf = slurp("tests/data/quant-ref/dequant.bin", &size);
    reader r = {buf, buf + size};
    int types = 0;
    while (r.p < r.end) {
        const int32_t t = (int32_t)take_u32(&r);
        const uint32_t nb = take_u32(&r);
        const dtype_traits *tr = dtype_traits_get(t);
        REQUIRE(tr && nb > 0 && nb < 64, "record %d: type %d, %u blocks", types, (int)t, nb);
        const int64_t n = (int64_t)nb * tr->block_size;
        const void *blocks = take(&r, nb * tr->block_bytes);
        const void *want = take(&r, (size_t)n * 4);
        REQUIRE(blocks && want, "%s: record truncated", tr->name);
        float *got = malloc((size_t)n * 4);
        EXPECT(dtype_dequantize_row(t, blocks, got, n) == 0, "%s: %s", tr->name, error_get());
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (memcmp(got + i, (const float *)want + i, 4)) {
                if (first < 0) first = i;
                bad++;
            }
        printf("%-8s %lld values: %s\n", tr->name, (long long)n, bad ? "DIFFER" : "bit-exact");
        if (bad) {
            float w;
            memcpy(&w, (const float *)want + first, 4);
            EXPECT(bad == 0, "%s: %lld of %lld values differ from ggml, first at %lld: %g vs %g", tr->name,
                   (long long)bad, (long long)n, (long long)first, got[first], w);
        }
        free(got);
        types++;
    }
    EXPECT(types == 12, "dequant.bin holds %d types, expected 12", types);
    free(buf);
}

TEST(test_quantize_matches_ggml) {
    size_t size;
    uint8_t *buf = slurp("tests/data/quant-ref/quant.bin", &size);
    reader r = {buf, buf + size};
    int types = 0;
    while (r.p < r.end) {
        const int32_t t = (int32_t)take_u32(&r);
        const uint32_t rows = take_u32(&r), n = take_u32(&r);
        const dtype_traits *tr = dtype_traits_get(t);
        REQUIRE(tr && rows > 0 && rows < 64 && n > 0 && n <= 4096, "record %d: type %d", types, (int)t);
        const size_t row_bytes = dtype_row_bytes(t, n);
        const float *x = take(&r, (size_t)rows * n * 4);
        const uint8_t *want = take(&r, rows * row_bytes);
        REQUIRE(x && want && row_bytes, "%s: record truncated", tr->name);
        uint8_t *got = malloc(rows * row_bytes);
        for (uint32_t k = 0; k < rows; k++) {
            float row[4096];
            memcpy(row, x + (size_t)k * n, (size_t)n * 4);
            EXPECT(dtype_quantize_row(t, row, got + k * row_bytes, n) == 0, "%s: %s", tr->name, error_get());
        }
        size_t bad = 0, first = SIZE_MAX;
        for (size_t i = 0; i < rows * row_bytes; i++)
            if (got[i] != want[i]) {
                if (first == SIZE_MAX) first = i;
                bad++;
            }
        printf("%-8s %u rows of %u: %s\n", tr->name, rows, n, bad ? "DIFFER" : "byte-exact");
        EXPECT(bad == 0, "%s: %zu of %zu bytes differ from ggml_quantize_chunk, first at %zu (row %zu, block %zu)",
               tr->name, bad, rows * row_bytes, first, first / row_bytes, (first % row_bytes) / tr->block_bytes);
        free(got);
        types++;
    }
    EXPECT(types == 6, "quant.bin holds %d types, expected 6", types);
    free(buf);
}

/* IQ3_S and IQ2_S (quant_iq3s.c): rows quantized by ggml_quantize_chunk
 * without and with an importance matrix; ours must give the same bytes. */
TEST(test_quantize_iq3s_matches_ggml) {
    size_t size;
    uint8_t *buf = slurp("tests/data/quant-ref/quant-iq3s.bin", &size);
    reader r = {buf, buf + size};
    int records = 0;
    while (r.p < r.end) {
        const int32_t t = (int32_t)take_u32(&r);
        const uint32_t rows = take_u32(&r), n = take_u32(&r), has_w = take_u32(&r);
        const dtype_traits *tr = dtype_traits_get(t);
        REQUIRE(tr && tr->from_f32_w && rows > 0 && rows < 64 && n > 0 && n <= 4096 && has_w < 2,
                "record %d: type %d", records, (int)t);
        const size_t row_bytes = dtype_row_bytes(t, n);
        const float *x = take(&r, (size_t)rows * n * 4);
        const float *qw = has_w ? take(&r, (size_t)n * 4) : NULL;
        const uint8_t *want = take(&r, rows * row_bytes);
        REQUIRE(x && want && (qw || !has_w), "%s: record truncated", tr->name);
        uint8_t *got = malloc(rows * row_bytes);
        for (uint32_t k = 0; k < rows; k++) {
            float row[4096], w[4096];
            memcpy(row, x + (size_t)k * n, (size_t)n * 4);
            if (qw) {
                memcpy(w, qw, (size_t)n * 4);
                tr->from_f32_w(row, got + k * row_bytes, n, w);
            } else {
                EXPECT(dtype_quantize_row(t, row, got + k * row_bytes, n) == 0, "%s: %s", tr->name, error_get());
            }
        }
        size_t bad = 0;
        for (size_t i = 0; i < rows * row_bytes; i++) bad += got[i] != want[i];
        printf("%-8s %u rows of %u, %s: %s\n", tr->name, rows, n, has_w ? "with a matrix" : "no matrix",
               bad ? "DIFFER" : "byte-exact");
        EXPECT(bad == 0, "%s (%s): %zu of %zu bytes differ from ggml_quantize_chunk", tr->name,
               has_w ? "with a matrix" : "no matrix", bad, rows * row_bytes);
        free(got);
        records++;
    }
    EXPECT(records == 4, "quant-iq3s.bin holds %d records, expected 4", records);
    free(buf);
}

/* vec_dot against activations quantized to the type's vec_dot_type equals
 * the double sum of the dequantized rows. */
TEST(test_dot_matches_dequant) {
    static const int32_t types[] = {TSR_DTYPE_IQ4_XS, TSR_DTYPE_MXFP4, TSR_DTYPE_TQ1_0, TSR_DTYPE_TQ2_0,
                                    TSR_DTYPE_IQ2_XXS, TSR_DTYPE_IQ2_XS, TSR_DTYPE_IQ2_S, TSR_DTYPE_IQ3_XXS,
                                    TSR_DTYPE_IQ3_S, TSR_DTYPE_IQ1_S, TSR_DTYPE_IQ1_M};
    size_t size;
    uint8_t *buf = slurp("tests/data/quant-ref/dequant.bin", &size);
    enum { N = 1024 };
    uint64_t seed = 7;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const int32_t t = types[k];
        const dtype_traits *tr = dtype_traits_get(t), *at = dtype_traits_get(tr->vec_dot_type);
        /* weights: the dumped blocks of this type */
        reader r = {buf, buf + size};
        const void *blocks = NULL;
        int64_t nw = 0;
        while (r.p < r.end && !blocks) {
            const int32_t rt = (int32_t)take_u32(&r);
            const uint32_t nb = take_u32(&r);
            const dtype_traits *rtr = dtype_traits_get(rt);
            REQUIRE(rtr, "bad record");
            const void *b = take(&r, nb * rtr->block_bytes);
            take(&r, (size_t)nb * rtr->block_size * 4);
            if (rt == t) blocks = b, nw = (int64_t)nb * rtr->block_size;
        }
        REQUIRE(blocks, "%s: no blocks in dequant.bin", tr->name);
        const int64_t n = nw < N ? nw : N;
        float w[N], a[N], aq[N];
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            a[i] = (float)((int64_t)(seed >> 33) % 2001 - 1000) / 1000.0f;
        }
        uint8_t act[N * 2];
        REQUIRE(dtype_quantize_row(tr->vec_dot_type, a, act, n) == 0, "%s", error_get());
        REQUIRE(dtype_dequantize_row(tr->vec_dot_type, act, aq, n) == 0, "%s", error_get());
        REQUIRE(dtype_dequantize_row(t, blocks, w, n) == 0, "%s", error_get());
        double want = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) want += (double)w[i] * aq[i], mag += fabs((double)w[i] * aq[i]);
        float got;
        tr->vec_dot(n, &got, blocks, act);
        EXPECT(fabs(got - want) <= 1e-5 * mag + 1e-12, "%s x %s: dot %.9g, dequantized %.9g", tr->name, at->name,
               got, want);
    }
    free(buf);
}

/* Rows with an importance matrix each (quantw.bin's record format), for
 * the types that need one; every super-block must be ggml's, and the file
 * must hold n_types types. */
static void check_w_file(const char *rel, int n_types) {
    size_t size;
    uint8_t *buf = slurp(rel, &size);
    reader r = {buf, buf + size};
    int records = 0;
    int64_t blocks[TSR_DTYPE_COUNT] = {0}, same[TSR_DTYPE_COUNT] = {0};
    while (r.p < r.end) {
        const int32_t t = (int32_t)take_u32(&r);
        const uint32_t rows = take_u32(&r), n = take_u32(&r);
        const dtype_traits *tr = dtype_traits_get(t);
        REQUIRE(tr && t < TSR_DTYPE_COUNT && rows > 0 && rows < 64 && n > 0 && n <= 4096, "record %d: type %d",
                records, (int)t);
        const size_t row_bytes = dtype_row_bytes(t, n);
        const float *x = take(&r, (size_t)rows * n * 4);
        const float *qw = take(&r, (size_t)n * 4);
        const uint8_t *want = take(&r, rows * row_bytes);
        REQUIRE(x && qw && want && row_bytes, "%s: record truncated", tr->name);
        float row[4096], w[4096];
        uint8_t got[4096];
        memcpy(w, qw, (size_t)n * 4);
        for (uint32_t k = 0; k < rows; k++) {
            memcpy(row, x + (size_t)k * n, (size_t)n * 4);
            EXPECT(dtype_quantize_row_w(t, row, got, n, w) == 0, "%s: %s", tr->name, error_get());
            for (size_t b = 0; b < row_bytes / tr->block_bytes; b++) {
                const size_t at = b * tr->block_bytes;
                const bool ok = !memcmp(got + at, want + k * row_bytes + at, tr->block_bytes);
                EXPECT(ok, "%s: record %d row %u block %zu differs from ggml_quantize_chunk", tr->name, records, k,
                       b);
                blocks[t]++;
                same[t] += ok;
            }
        }
        /* and without the matrix it is refused, naming the type */
        EXPECT(dtype_quantize_row(t, row, got, n) != 0 && strstr(error_get(), tr->name),
               "%s without a matrix: '%s'", tr->name, error_get());
        records++;
    }
    int types = 0;
    for (int t = 0; t < TSR_DTYPE_COUNT; t++)
        if (blocks[t]) {
            printf("%-8s with a matrix: %lld/%lld super-blocks byte-exact\n", dtype_name(t), (long long)same[t],
                   (long long)blocks[t]);
            types++;
        }
    EXPECT(types == n_types, "%s holds %d types, expected %d", rel, types, n_types);
    free(buf);
}

/* quantw.bin: IQ2_XXS and IQ2_XS under six kinds of matrix. */
TEST(test_quantize_w_matches_ggml) { check_w_file("tests/data/quant-ref/quantw.bin", 2); }

/* quant-iq1.bin: IQ1_S under matrices with zeros (one, a group of 8, a
 * block of 32, a sixteenth, all), where tied splits and tied neighbours
 * are settled by the rounding of ggml's own arithmetic. */
TEST(test_quantize_iq1_matches_ggml) { check_w_file("tests/data/quant-ref/quant-iq1.bin", 1); }

HARNESS_MAIN("IQ, TQ and MXFP4 agree with ggml", HARNESS_TEST(test_dequant_matches_ggml),
             HARNESS_TEST(test_quantize_matches_ggml), HARNESS_TEST(test_dot_matches_dequant),
             HARNESS_TEST(test_quantize_iq3s_matches_ggml), HARNESS_TEST(test_quantize_w_matches_ggml),
             HARNESS_TEST(test_quantize_iq1_matches_ggml))
