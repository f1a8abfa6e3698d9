/*
 * Corrupt and hostile GGUF files: every one must be rejected with a one-line
 * message (naming the file and, where it applies, the key or tensor) and
 * never crash or read out of bounds. Images are handed to the reader in heap
 * buffers of their exact size so ASan sees any over-read.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_test.h"
#include "util/error.h"

enum { T_F32 = 0, T_Q8_0 = 8 };

/* Open an exact-size heap copy of the image; true if the reader accepted it
 * (then everything it offers is walked before the copy is freed). */
static uint64_t walk_file(const gguf_file *f);

static bool open_copy(const uint8_t *p, size_t n, const char *label) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, p, n);
    gguf_file *f = gguf_open_memory(copy, n, label);
    if (f) {
        walk_file(f);
        gguf_close(f);
    }
    free(copy);
    return f != NULL;
}

static int expect_fail(const img *b, const char *label, const char *want) {
    error_clear();
    bool accepted = open_copy(b->p, b->n, label);
    const char *msg = error_get();
    EXPECT(!accepted, "%s: accepted a corrupt file", label);
    if (accepted) return -1;
    EXPECT(msg[0] != '\0', "%s: empty error message", label);
    EXPECT(strstr(msg, label) != NULL, "%s: message does not name the file: '%s'", label, msg);
    EXPECT(strchr(msg, '\n') == NULL, "%s: message is more than one line: '%s'", label, msg);
    if (want) EXPECT(strstr(msg, want) != NULL, "%s: message lacks '%s': '%s'", label, want, msg);
    if (getenv("GGUF_TEST_VERBOSE")) printf("  %-28s -> %s\n", label, msg);
    return 0;
}

static void expect_ok(const img *b, const char *label) {
    EXPECT(open_copy(b->p, b->n, label), "%s: valid file rejected: %s", label, error_get());
}

/* ------------------------------------------------------ header cases */

TEST(test_header) {
    img b = {0};
    expect_fail(&b, "empty", "empty");

    img_bytes(&b, "GGU", 3);
    expect_fail(&b, "short-magic", "magic");
    img_free(&b);

    img_header(&b, 3, 0, 0);
    expect_ok(&b, "minimal-v3");
    memcpy(b.p, "GGML", 4);
    expect_fail(&b, "bad-magic", "magic");
    img_free(&b);

    const uint32_t versions[] = {1, 0, 4, 99, 0x03000000};
    const char *want[] = {"version 1", "version 0", "version 4", "version 99", "big-endian"};
    for (int i = 0; i < 5; i++) {
        img_header(&b, versions[i], 0, 0);
        char label[64];
        snprintf(label, sizeof label, "version-%" PRIu32, versions[i]);
        expect_fail(&b, label, want[i]);
        img_free(&b);
    }
    img_header(&b, 2, 0, 0);
    expect_ok(&b, "minimal-v2");
    img_free(&b);

    img_header(&b, 3, 0, UINT64_MAX);
    expect_fail(&b, "huge-kv-count", "key/value count");
    img_free(&b);
    img_header(&b, 3, (uint64_t)1 << 40, 0);
    expect_fail(&b, "huge-tensor-count", "tensor count");
    img_free(&b);
    /* plausible count, missing entries */
    img_header(&b, 3, 0, 2);
    img_key(&b, "a", GGUF_TYPE_UINT32);
    img_u32(&b, 1);
    expect_fail(&b, "kv-count-too-big", "key #1");
    img_free(&b);
}

/* ------------------------------------------------------ metadata cases */

static void one_kv(img *b, const char *key, uint32_t type) {
    img_header(b, 3, 0, 1);
    img_key(b, key, type);
}

TEST(test_metadata) {
    img b = {0};

    /* key length past EOF, and UINT64_MAX (no wrap-around) */
    img_header(&b, 3, 0, 1);
    img_u64(&b, 1000);
    img_bytes(&b, "abc", 3);
    expect_fail(&b, "key-past-eof", "past the end");
    img_free(&b);
    img_header(&b, 3, 0, 1);
    img_u64(&b, UINT64_MAX);
    img_bytes(&b, "abcdefgh", 8);
    expect_fail(&b, "key-len-max", "past the end");
    img_free(&b);

    img_header(&b, 3, 0, 1);
    img_u64(&b, 0);
    img_u32(&b, GGUF_TYPE_UINT8);
    img_u8(&b, 0);
    expect_fail(&b, "empty-key", "empty");
    img_free(&b);

    img_header(&b, 3, 0, 1);
    img_u64(&b, 3);
    img_bytes(&b, "a\0b", 3);
    img_u32(&b, GGUF_TYPE_UINT8);
    img_u8(&b, 0);
    expect_fail(&b, "nul-in-key", "NUL");
    img_free(&b);

    one_kv(&b, "s.str", GGUF_TYPE_STRING);
    img_u64(&b, 50);
    img_bytes(&b, "short", 5);
    expect_fail(&b, "string-past-eof", "s.str");
    img_free(&b);

    one_kv(&b, "s.type13", 13);
    img_u32(&b, 0);
    expect_fail(&b, "value-type-13", "invalid value type 13");
    img_free(&b);
    one_kv(&b, "s.typemax", UINT32_MAX);
    expect_fail(&b, "value-type-max", "s.typemax");
    img_free(&b);

    one_kv(&b, "s.u64", GGUF_TYPE_UINT64);
    img_u32(&b, 7); /* 4 of 8 bytes */
    expect_fail(&b, "scalar-past-eof", "s.u64");
    img_free(&b);

    one_kv(&b, "s.bool", GGUF_TYPE_BOOL);
    img_u8(&b, 2);
    expect_fail(&b, "bool-2", "bool");
    img_free(&b);

    /* arrays: invalid element type, absurd counts of every element kind */
    one_kv(&b, "a.type", GGUF_TYPE_ARRAY);
    img_u32(&b, 77);
    img_u64(&b, 0);
    expect_fail(&b, "array-elem-type", "array element type");
    img_free(&b);
    const uint32_t elem[] = {GGUF_TYPE_UINT8, GGUF_TYPE_UINT64, GGUF_TYPE_STRING, GGUF_TYPE_ARRAY};
    const uint64_t counts[] = {(uint64_t)1 << 62, UINT64_MAX, UINT64_MAX / 8 + 1, 1u << 20};
    for (int i = 0; i < 4; i++) {
        for (int c = 0; c < 4; c++) {
            one_kv(&b, "a.huge", GGUF_TYPE_ARRAY);
            img_u32(&b, elem[i]);
            img_u64(&b, counts[c]);
            img_u64(&b, 0);
            char label[64];
            snprintf(label, sizeof label, "array-%s-count-%d", gguf_type_name(elem[i]), c);
            expect_fail(&b, label, "a.huge");
            img_free(&b);
        }
    }
    /* string element past EOF */
    one_kv(&b, "a.strs", GGUF_TYPE_ARRAY);
    img_u32(&b, GGUF_TYPE_STRING);
    img_u64(&b, 2);
    img_str(&b, "ok");
    img_u64(&b, 99);
    img_bytes(&b, "no", 2);
    expect_fail(&b, "array-string-past-eof", "a.strs");
    img_free(&b);
    /* bool array with a 7 in it */
    one_kv(&b, "a.bools", GGUF_TYPE_ARRAY);
    img_u32(&b, GGUF_TYPE_BOOL);
    img_u64(&b, 3);
    img_u8(&b, 1);
    img_u8(&b, 7);
    img_u8(&b, 0);
    expect_fail(&b, "array-bool-7", "bool");
    img_free(&b);

    /* nesting: 16 levels is the limit, 17 is rejected */
    for (int levels = 16; levels <= 17; levels++) {
        one_kv(&b, "a.nest", GGUF_TYPE_ARRAY);
        for (int l = 0; l < levels - 1; l++) {
            img_u32(&b, GGUF_TYPE_ARRAY);
            img_u64(&b, 1);
        }
        img_u32(&b, GGUF_TYPE_UINT8);
        img_u64(&b, 1);
        img_u8(&b, 42);
        if (levels == 16) expect_ok(&b, "nest-16");
        else expect_fail(&b, "nest-17", "nested");
        img_free(&b);
    }
    /* deep bomb: far more levels than the file could describe */
    one_kv(&b, "a.bomb", GGUF_TYPE_ARRAY);
    for (int l = 0; l < 1000; l++) {
        img_u32(&b, GGUF_TYPE_ARRAY);
        img_u64(&b, 1);
    }
    expect_fail(&b, "nest-bomb", "a.bomb");
    img_free(&b);
    /* wide bomb: an array claiming 2^40 empty arrays */
    one_kv(&b, "a.wide", GGUF_TYPE_ARRAY);
    img_u32(&b, GGUF_TYPE_ARRAY);
    img_u64(&b, (uint64_t)1 << 40);
    for (int l = 0; l < 100; l++) {
        img_u32(&b, GGUF_TYPE_UINT8);
        img_u64(&b, 0);
    }
    expect_fail(&b, "wide-bomb", "a.wide");
    img_free(&b);

    /* duplicate keys */
    img_header(&b, 3, 0, 3);
    img_key(&b, "k.one", GGUF_TYPE_UINT8);
    img_u8(&b, 1);
    img_key(&b, "k.two", GGUF_TYPE_UINT8);
    img_u8(&b, 2);
    img_key(&b, "k.one", GGUF_TYPE_STRING);
    img_str(&b, "again");
    expect_fail(&b, "duplicate-key", "duplicate key");
    img_free(&b);

    /* general.alignment: zero, not a power of two, wrong type */
    const uint32_t aligns[] = {0, 3, 48};
    for (int i = 0; i < 3; i++) {
        one_kv(&b, "general.alignment", GGUF_TYPE_UINT32);
        img_u32(&b, aligns[i]);
        char label[64];
        snprintf(label, sizeof label, "alignment-%" PRIu32, aligns[i]);
        expect_fail(&b, label, "power of two");
        img_free(&b);
    }
    one_kv(&b, "general.alignment", GGUF_TYPE_UINT64);
    img_u64(&b, 32);
    expect_fail(&b, "alignment-u64", "uint32");
    img_free(&b);
}

/* ------------------------------------------------------- tensor cases */

typedef struct tspec {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[5];
    uint32_t dtype;
    uint64_t offset;
} tspec;

/* A file with general.alignment = align, the tensors given and data_bytes of
 * data after the aligned header. */
static void build_tensors(img *b, const tspec *ts, int n, uint32_t align, uint64_t data_bytes) {
    img_header(b, 3, (uint64_t)n, 1);
    img_key(b, "general.alignment", GGUF_TYPE_UINT32);
    img_u32(b, align);
    for (int i = 0; i < n; i++) img_tensor(b, ts[i].name, ts[i].n_dims, ts[i].ne, ts[i].dtype,
                                           ts[i].offset);
    img_pad(b, align);
    for (uint64_t i = 0; i < data_bytes; i++) img_u8(b, (uint8_t)i);
}

static void tensor_case(const char *label, const tspec *ts, int n, uint64_t data_bytes,
                        const char *want) {
    img b = {0};
    build_tensors(&b, ts, n, 32, data_bytes);
    if (want) expect_fail(&b, label, want);
    else expect_ok(&b, label);
    img_free(&b);
}

TEST(test_tensors) {
    /* the valid baseline: 64 + 68 bytes, second tensor at the next multiple of 32 */
    const tspec ok[] = {{"w.f32", 2, {4, 4}, T_F32, 0}, {"w.q8", 2, {32, 2}, T_Q8_0, 64}};
    tensor_case("tensors-ok", ok, 2, 64 + 68, NULL);
    tensor_case("tensor-data-past-eof", ok, 2, 64 + 67, "w.q8");

    tspec t = {"bad", 2, {4, 4}, T_F32, 0};
    tspec c = t;
    c.n_dims = 0;
    tensor_case("n_dims-0", &c, 1, 64, "n_dims 0");
    c = t;
    c.n_dims = 5;
    c.ne[2] = c.ne[3] = c.ne[4] = 1;
    tensor_case("n_dims-5", &c, 1, 64, "n_dims 5");
    c = t;
    c.ne[1] = 0;
    tensor_case("dim-zero", &c, 1, 64, "dimension 1");
    c = t;
    c.ne[0] = (uint64_t)INT64_MAX + 1;
    tensor_case("dim-negative", &c, 1, 64, "dimension 0");
    c = t;
    c.ne[0] = (uint64_t)1 << 32;
    c.ne[1] = (uint64_t)1 << 32;
    tensor_case("dims-overflow", &c, 1, 64, "overflow");
    c = t;
    c.n_dims = 4;
    c.ne[0] = c.ne[1] = c.ne[2] = c.ne[3] = 1u << 16;
    tensor_case("dims-overflow-4d", &c, 1, 64, "overflow");
    c = t;
    c.n_dims = 1;
    c.ne[0] = (uint64_t)1 << 62; /* fits in elements, not in bytes */
    tensor_case("bytes-overflow", &c, 1, 64, "overflow");
    c = t;
    c.ne[0] = (uint64_t)1 << 40;
    tensor_case("tensor-huge", &c, 1, 64, "past the end");
    const uint32_t bad_types[] = {4, 5, 31, 33, 36, 38, 40, 99, UINT32_MAX};
    for (int i = 0; i < 9; i++) {
        c = t;
        c.dtype = bad_types[i];
        char label[64];
        snprintf(label, sizeof label, "dtype-%" PRIu32, bad_types[i]);
        tensor_case(label, &c, 1, 64, "unknown tensor type");
    }
    c = t;
    c.dtype = T_Q8_0;
    c.ne[0] = 33;
    tensor_case("ne0-not-block-multiple", &c, 1, 68, "block size");
    c = t;
    c.offset = 16;
    tensor_case("offset-misaligned", &c, 1, 96, "alignment");
    c = t;
    c.offset = 1024;
    tensor_case("offset-past-eof", &c, 1, 64, "past the end");
    c = t;
    c.offset = UINT64_MAX - 31;
    tensor_case("offset-max", &c, 1, 64, "past the end");
    c = t;
    c.name = "";
    tensor_case("tensor-name-empty", &c, 1, 64, "empty");

    const tspec overlap[] = {{"o.a", 2, {16, 2}, T_F32, 0}, {"o.b", 1, {8}, T_F32, 96}};
    tensor_case("overlap", overlap, 2, 256, "overlaps");
    const tspec overlap_same[] = {{"o.a", 1, {8}, T_F32, 64}, {"o.b", 1, {8}, T_F32, 64}};
    tensor_case("overlap-same-offset", overlap_same, 2, 128, "overlaps");
    const tspec dup[] = {{"d.x", 1, {8}, T_F32, 0}, {"d.x", 1, {8}, T_F32, 32}};
    tensor_case("duplicate-tensor", dup, 2, 64, "duplicate tensor");

    /* a tensor info cut short, and a data section that would start past EOF */
    img b = {0};
    build_tensors(&b, ok, 2, 32, 0);
    b.n -= 40; /* inside the second tensor's dims/type/offset, before padding */
    expect_fail(&b, "tensor-info-cut", "w.q8");
    img_free(&b);
}

/* ----------------------------------------------------------- truncation */

/* Every prefix of a real file's header (and a few inside its data) fails. */
TEST(test_truncation) {
    harness_path model = harness_model_file("stories260K");
    const char *path = model.s;
    size_t size;
    uint8_t *whole = read_whole_file(path, &size);
    gguf_file *f = gguf_open_memory(whole, size, "whole");
    EXPECT(f != NULL, "%s: %s", path, error_get());
    if (!f) {
        free(whole);
        return;
    }
    uint64_t data_offset = gguf_data_offset(f);
    gguf_close(f);
    int failed_ok = 0;
    for (uint64_t n = 0; n <= data_offset; n++) {
        char label[64];
        snprintf(label, sizeof label, "truncated-at-%" PRIu64, n);
        img b = {.p = whole, .n = n, .cap = size};
        error_clear();
        bool accepted = open_copy(b.p, b.n, label);
        if (!accepted && error_get()[0] && strstr(error_get(), label)) failed_ok++;
        else ADD_FAILURE("%s: prefix of %" PRIu64 " bytes: %s", path, n,
                   accepted ? "accepted" : "bad message");
    }
    const uint64_t in_data[] = {data_offset + 1, (data_offset + size) / 2, size - 1};
    for (int i = 0; i < 3; i++) {
        img b = {.p = whole, .n = in_data[i], .cap = size};
        char label[64];
        snprintf(label, sizeof label, "data-truncated-at-%" PRIu64, in_data[i]);
        expect_fail(&b, label, "past the end");
    }
    printf("truncation: %d of %" PRIu64 " header prefixes of %s rejected\n", failed_ok,
           data_offset + 1, path);
    free(whole);
}

/* The same through files on disk (mmap path), plus unreadable inputs. */
TEST(test_files) {
    char path[1024];
    snprintf(path, sizeof path, "%s/does-not-exist.gguf", harness_tmpdir());
    EXPECT(gguf_open(path) == NULL && strstr(error_get(), path), "missing file: '%s'",
           error_get());
    EXPECT(gguf_open(harness_tmpdir()) == NULL && strstr(error_get(), "not a regular file"),
           "directory: '%s'", error_get());
    snprintf(path, sizeof path, "%s/empty.gguf", harness_tmpdir());
    FILE *fp = fopen(path, "wb");
    if (fp) fclose(fp);
    EXPECT(gguf_open(path) == NULL && strstr(error_get(), "empty"), "empty file: '%s'",
           error_get());
    unlink(path);
}

/* A real file cut short on disk. */
TEST(test_files_cut) {
    harness_path src = harness_model_file("stories260K");
    char path[1024];
    FILE *fp;
    size_t size;
    uint8_t *whole = read_whole_file(src.s, &size);
    const size_t cuts[] = {10, 1000, 14000, size - 1};
    snprintf(path, sizeof path, "%s/cut.gguf", harness_tmpdir());
    for (int i = 0; i < 4; i++) {
        fp = fopen(path, "wb");
        if (!fp) break;
        fwrite(whole, 1, cuts[i], fp);
        fclose(fp);
        EXPECT(gguf_open(path) == NULL && strstr(error_get(), path),
               "file cut at %zu: '%s'", cuts[i], error_get());
    }
    unlink(path);
    free(whole);
}

/* ------------------------------------------------------------- fuzzing */

static uint32_t rng_next(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* A small file that has a bit of everything. */
static void build_rich(img *b) {
    img_header(b, 3, 2, 5);
    img_key(b, "general.architecture", GGUF_TYPE_STRING);
    img_str(b, "llama");
    img_key(b, "x.u32", GGUF_TYPE_UINT32);
    img_u32(b, 7);
    img_key(b, "x.strs", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_STRING);
    img_u64(b, 3);
    img_str(b, "a");
    img_str(b, "bc");
    img_str(b, "");
    img_key(b, "x.nested", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_ARRAY);
    img_u64(b, 2);
    img_u32(b, GGUF_TYPE_FLOAT32);
    img_u64(b, 2);
    img_f32(b, 1.0f);
    img_f32(b, 2.0f);
    img_u32(b, GGUF_TYPE_STRING);
    img_u64(b, 1);
    img_str(b, "z");
    img_key(b, "x.bools", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_BOOL);
    img_u64(b, 2);
    img_u8(b, 1);
    img_u8(b, 0);
    const uint64_t ne0[] = {4, 4}, ne1[] = {32, 2};
    img_tensor(b, "w.f32", 2, ne0, T_F32, 0);
    img_tensor(b, "w.q8", 2, ne1, T_Q8_0, 64);
    img_pad(b, 32);
    for (int i = 0; i < 64 + 68; i++) img_u8(b, (uint8_t)i);
}

/* Touch everything an accepted file offers, so ASan checks that validation
 * really covered what the accessors read. */
static uint64_t walk_value(const gguf_value *v, int depth) {
    uint64_t sum = v->size;
    if (v->size && v->type != GGUF_TYPE_ARRAY)
        sum += ((const uint8_t *)v->data)[0] + ((const uint8_t *)v->data)[v->size - 1];
    if (v->type != GGUF_TYPE_ARRAY || depth > 20) return sum;
    uint64_t pos = 0;
    for (uint64_t j = 0; j < v->count; j++) {
        gguf_value e;
        if (gguf_value_next(v, &pos, &e) != 0) {
            ADD_FAILURE("walk failed inside a validated array: %s", error_get());
            break;
        }
        sum += walk_value(&e, depth + 1);
    }
    return sum;
}

static uint64_t walk_file(const gguf_file *f) {
    uint64_t sum = 0;
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        gguf_value v;
        EXPECT(gguf_kv_value(f, i, &v) == 0, "%s", error_get());
        sum += walk_value(&v, 0);
        EXPECT(gguf_find_key(f, gguf_kv_key(f, i)) == i, "key lookup");
        if (v.type == GGUF_TYPE_ARRAY && v.elem_type == GGUF_TYPE_STRING)
            for (uint64_t j = 0; j < v.count; j++) {
                gguf_str s;
                EXPECT(gguf_kv_arr_str(f, i, j, &s) == 0, "%s", error_get());
                if (s.len) sum += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
            }
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        const uint8_t *d = t->data;
        sum += d[0] + d[t->size - 1] + strlen(t->name);
    }
    return sum;
}

TEST(test_fuzz) {
    const int iterations = 20000;
    img base = {0};
    build_rich(&base);
    gguf_file *f = gguf_open_memory(base.p, base.n, "rich");
    EXPECT(f != NULL, "rich baseline: %s", error_get());
    if (f) {
        walk_file(f);
        gguf_close(f);
    }
    uint32_t seed = 0x9e3779b9u;
    int accepted = 0, rejected = 0;
    uint64_t sink = 0;
    for (int it = 0; it < iterations; it++) {
        uint8_t *m = malloc(base.n);
        memcpy(m, base.p, base.n);
        size_t n = base.n;
        int edits = 1 + (int)(rng_next(&seed) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = rng_next(&seed) % n;
            switch (rng_next(&seed) % 4) {
            case 0: m[at] = (uint8_t)rng_next(&seed); break;
            case 1: m[at] ^= (uint8_t)(1u << (rng_next(&seed) % 8)); break;
            case 2: m[at] = (uint8_t)(rng_next(&seed) % 3 ? 0xff : 0x00); break;
            default: n = at > 0 ? at : 1; break; /* truncate */
            }
        }
        error_clear();
        gguf_file *g = gguf_open_memory(m, n, "fuzz");
        if (g) {
            accepted++;
            sink += walk_file(g);
            gguf_close(g);
        } else {
            rejected++;
            EXPECT(error_get()[0] != '\0', "fuzz iteration %d: empty message", it);
        }
        free(m);
    }
    printf("fuzz: %d mutations, %d rejected, %d accepted and fully walked (%" PRIu64 ")\n",
           iterations, rejected, accepted, sink % 1000);
    img_free(&base);
}

TEST(test_cleanup) {
    EXPECT(rmdir(harness_tmpdir()) == 0, "%s: a file was left behind", harness_tmpdir());
}

HARNESS_MAIN("gguf corruption", HARNESS_TEST(test_header), HARNESS_TEST(test_metadata), HARNESS_TEST(test_tensors),
             HARNESS_TEST(test_fuzz), HARNESS_TEST(test_files), HARNESS_TEST(test_files_cut),
             HARNESS_TEST(test_truncation), HARNESS_TEST(test_cleanup))
