/*
 * Writer -> reader round trips: every metadata type (nested arrays too),
 * tensors of several types and ranks, a custom alignment, the streaming API,
 * and the writer's own error paths (no half-written files left behind).
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf_test.h"
#include "util/error.h"

enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_I32 = 26 };

static char *out_path(const char *name) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", harness_tmpdir(), name);
    return path;
}

/* Files in the temp dir (to prove no temporary file was left behind). */
static int count_files(void) {
    DIR *d = opendir(harness_tmpdir());
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

static bool str_is(gguf_str s, const void *want, size_t len) {
    return s.len == len && memcmp(s.ptr, want, len) == 0;
}

/* Deterministic tensor contents. */
static uint8_t *pattern(uint64_t n, uint32_t seed) {
    uint8_t *p = malloc(n);
    uint32_t x = seed * 2654435761u + 1;
    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        p[i] = (uint8_t)x;
    }
    return p;
}

TEST(test_all_types) {
    gguf_writer *w = gguf_writer_new();
    EXPECT(gguf_writer_set_u8(w, "t.u8", 200) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_i8(w, "t.i8", -5) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_u16(w, "t.u16", 65000) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_i16(w, "t.i16", -30000) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_u32(w, "t.u32", 4000000000u) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_i32(w, "t.i32", -2000000000) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_u64(w, "t.u64", UINT64_MAX) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_i64(w, "t.i64", INT64_MIN) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_f32(w, "t.f32", 0.1f) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_f64(w, "t.f64", -1e300) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_bool(w, "t.bool", true) == 0, "%s", error_get());
    const char odd[] = "a\0b\xc3\xa9"; /* embedded NUL and UTF-8 */
    EXPECT(gguf_writer_set_str(w, "t.str", odd, sizeof odd - 1) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_str(w, "t.empty", "", 0) == 0, "%s", error_get());
    int16_t i16s[] = {-1, 2, -3};
    float f32s[] = {1.5f, -2.25f, NAN, INFINITY};
    uint8_t bools[] = {1, 0, 1};
    EXPECT(gguf_writer_set_arr(w, "a.i16", GGUF_TYPE_INT16, i16s, 3) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, f32s, 4) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, bools, 3) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_UINT64, NULL, 0) == 0, "%s", error_get());
    gguf_str strs[] = {{"hello", 5}, {"", 0}, {"w\xc3\xb6rld", 6}};
    EXPECT(gguf_writer_set_arr_str(w, "a.str", strs, 3) == 0, "%s", error_get());
    /* replacing keeps the position; removing drops the key */
    EXPECT(gguf_writer_set_u32(w, "t.replace", 1) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_str(w, "t.replace", "two", 3) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_u32(w, "t.removed", 1) == 0, "%s", error_get());
    EXPECT(gguf_writer_remove_key(w, "t.removed") == 0, "%s", error_get());
    EXPECT(gguf_writer_remove_key(w, "t.removed") != 0 && strstr(error_get(), "t.removed"),
           "removing a missing key: '%s'", error_get());
    EXPECT(gguf_writer_set_u32(w, "general.alignment", 64) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_arr(w, "a.bad", GGUF_TYPE_STRING, strs, 1) != 0 &&
           strstr(error_get(), "a.bad"), "set_arr with strings must fail: '%s'", error_get());

    int64_t ne_a[] = {3, 5}, ne_b[] = {64, 2}, ne_c[] = {7}, ne_d[] = {2, 3, 4, 5};
    uint8_t *da = pattern(3 * 5 * 4, 1), *db = pattern(2 * 2 * 34, 2), *dc = pattern(7 * 4, 3),
            *dd = pattern(120 * 2, 4);
    EXPECT(gguf_writer_add_tensor(w, "a", T_F32, 2, ne_a, da) == 0, "%s", error_get());
    EXPECT(gguf_writer_add_tensor(w, "b.q8", T_Q8_0, 2, ne_b, db) == 0, "%s", error_get());
    EXPECT(gguf_writer_add_tensor(w, "c.i32", T_I32, 1, ne_c, dc) == 0, "%s", error_get());
    EXPECT(gguf_writer_add_tensor(w, "d.f16", T_F16, 4, ne_d, dd) == 0, "%s", error_get());

    const char *path = out_path("types.gguf");
    EXPECT(gguf_writer_write_file(w, path) == 0, "%s", error_get());
    gguf_writer_free(w);

    gguf_file *f = gguf_open(path);
    EXPECT(f != NULL, "%s", error_get());
    if (!f) goto done;
    EXPECT(gguf_version(f) == 3, "version %" PRIu32, gguf_version(f));
    EXPECT(gguf_alignment(f) == 64, "alignment %" PRIu64, gguf_alignment(f));
    EXPECT(gguf_data_offset(f) % 64 == 0, "data offset %" PRIu64, gguf_data_offset(f));
    EXPECT(gguf_kv_count(f) == 20, "%" PRId64 " keys, expected 20", gguf_kv_count(f));
    EXPECT(strcmp(gguf_kv_key(f, 0), "t.u8") == 0, "first key '%s'", gguf_kv_key(f, 0));

    uint8_t u8 = 0;
    int8_t i8 = 0;
    uint32_t u32 = 0;
    int32_t i32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f32 = 0;
    double f64 = 0;
    bool b = false;
    gguf_str s = {0};
    EXPECT(gguf_kv_scalar(f, gguf_find_key(f, "t.u8"), &u8, 1) == 0 && u8 == 200, "u8 %u", u8);
    EXPECT(gguf_kv_scalar(f, gguf_find_key(f, "t.i8"), &i8, 1) == 0 && i8 == -5, "i8 %d", i8);
    EXPECT(gguf_get_int(f, "t.i8", &i64) == 0 && i64 == -5, "get_int i8 %" PRId64, i64);
    EXPECT(gguf_get_int(f, "t.u16", &i64) == 0 && i64 == 65000, "u16 %" PRId64, i64);
    EXPECT(gguf_get_int(f, "t.i16", &i64) == 0 && i64 == -30000, "i16 %" PRId64, i64);
    EXPECT(gguf_get_u32(f, "t.u32", &u32) == 0 && u32 == 4000000000u, "u32 %" PRIu32, u32);
    EXPECT(gguf_get_i32(f, "t.i32", &i32) == 0 && i32 == -2000000000, "i32 %" PRId32, i32);
    EXPECT(gguf_get_u64(f, "t.u64", &u64) == 0 && u64 == UINT64_MAX, "u64 %" PRIu64, u64);
    EXPECT(gguf_get_int(f, "t.u64", &i64) != 0 && strstr(error_get(), "t.u64"),
           "u64 max does not fit int64: '%s'", error_get());
    EXPECT(gguf_get_int(f, "t.i64", &i64) == 0 && i64 == INT64_MIN, "i64 %" PRId64, i64);
    EXPECT(gguf_get_f32(f, "t.f32", &f32) == 0 && f32 == 0.1f, "f32 %g", f32);
    EXPECT(gguf_kv_scalar(f, gguf_find_key(f, "t.f64"), &f64, 8) == 0 && f64 == -1e300, "f64 %g",
           f64);
    EXPECT(gguf_kv_scalar(f, gguf_find_key(f, "t.f64"), &f32, 4) != 0, "size mismatch must fail");
    EXPECT(gguf_get_bool(f, "t.bool", &b) == 0 && b, "bool");
    EXPECT(gguf_get_str(f, "t.str", &s) == 0 && str_is(s, odd, sizeof odd - 1), "odd string");
    EXPECT(gguf_get_str(f, "t.empty", &s) == 0 && s.len == 0, "empty string");
    EXPECT(gguf_get_str(f, "t.replace", &s) == 0 && str_is(s, "two", 3), "replaced value");
    EXPECT(gguf_find_key(f, "t.removed") < 0, "removed key present");
    EXPECT(gguf_get_int(f, "t.str", &i64) != 0 && strstr(error_get(), "string") &&
           strstr(error_get(), "integer"), "get_int on a string: '%s'", error_get());
    EXPECT(gguf_get_i32(f, "t.u32", &i32) != 0 && strstr(error_get(), "uint32") &&
           strstr(error_get(), "int32"), "get_i32 on uint32: '%s'", error_get());

    gguf_type et;
    uint64_t n;
    const void *data;
    EXPECT(gguf_get_arr(f, "a.i16", &et, &n, &data) == 0 && et == GGUF_TYPE_INT16 && n == 3 &&
           memcmp(data, i16s, sizeof i16s) == 0, "i16 array");
    EXPECT(gguf_get_arr(f, "a.f32", &et, &n, &data) == 0 && et == GGUF_TYPE_FLOAT32 && n == 4 &&
           memcmp(data, f32s, sizeof f32s) == 0, "f32 array (NaN/Inf bits kept)");
    EXPECT(gguf_get_arr(f, "a.bool", &et, &n, &data) == 0 && et == GGUF_TYPE_BOOL && n == 3 &&
           memcmp(data, bools, 3) == 0, "bool array");
    EXPECT(gguf_get_arr(f, "a.empty", &et, &n, &data) == 0 && et == GGUF_TYPE_UINT64 && n == 0,
           "empty array");
    EXPECT(gguf_get_arr(f, "a.str", &et, &n, NULL) == 0 && et == GGUF_TYPE_STRING && n == 3,
           "string array");
    for (uint64_t j = 0; j < 3; j++)
        EXPECT(gguf_get_arr_str(f, "a.str", j, &s) == 0 && str_is(s, strs[j].ptr, strs[j].len),
               "string array element %" PRIu64, j);
    EXPECT(gguf_get_arr_str(f, "a.i16", 0, &s) != 0 && strstr(error_get(), "int16"),
           "arr_str on int16 array: '%s'", error_get());
    EXPECT(gguf_get_arr(f, "t.u8", &et, &n, &data) != 0 && strstr(error_get(), "array"),
           "get_arr on a scalar: '%s'", error_get());

    EXPECT(gguf_tensor_count(f) == 4, "%" PRId64 " tensors", gguf_tensor_count(f));
    const struct { const char *name; int32_t dtype; int n_dims; const int64_t *ne; uint8_t *d;
                   uint64_t size; } want[] = {
        {"a", T_F32, 2, ne_a, da, 60}, {"b.q8", T_Q8_0, 2, ne_b, db, 136},
        {"c.i32", T_I32, 1, ne_c, dc, 28}, {"d.f16", T_F16, 4, ne_d, dd, 240},
    };
    for (int i = 0; i < 4; i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        EXPECT(t && strcmp(t->name, want[i].name) == 0 && t->dtype == want[i].dtype &&
               t->n_dims == want[i].n_dims && t->size == want[i].size &&
               t->offset % 64 == 0 && memcmp(t->data, want[i].d, want[i].size) == 0,
               "tensor %d ('%s') differs", i, want[i].name);
        for (int d = 0; t && d < 4; d++)
            EXPECT(t->ne[d] == (d < want[i].n_dims ? want[i].ne[d] : 1), "tensor %s ne[%d]",
                   want[i].name, d);
    }
    gguf_close(f);
done:
    unlink(path);
    free(da);
    free(db);
    free(dc);
    free(dd);
}

/* Arrays of arrays cannot be built with setters; make them by hand, read them,
 * copy them through the writer and read them again. */
static void build_nested(img *b, uint32_t version) {
    img_header(b, version, 0, 3);
    /* [[1, 2], [], [3]] */
    img_key(b, "n.u32", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_ARRAY);
    img_u64(b, 3);
    img_u32(b, GGUF_TYPE_UINT32); img_u64(b, 2); img_u32(b, 1); img_u32(b, 2);
    img_u32(b, GGUF_TYPE_UINT32); img_u64(b, 0);
    img_u32(b, GGUF_TYPE_UINT32); img_u64(b, 1); img_u32(b, 3);
    /* [["x", "yz"], [[true]]] is not one type: use [["x","yz"]] and a
     * three-level [[["deep"]]] */
    img_key(b, "n.str", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_ARRAY);
    img_u64(b, 1);
    img_u32(b, GGUF_TYPE_STRING); img_u64(b, 2); img_str(b, "x"); img_str(b, "yz");
    img_key(b, "n.deep", GGUF_TYPE_ARRAY);
    img_u32(b, GGUF_TYPE_ARRAY);
    img_u64(b, 1);
    img_u32(b, GGUF_TYPE_ARRAY); img_u64(b, 1);
    img_u32(b, GGUF_TYPE_STRING); img_u64(b, 1); img_str(b, "deep");
    img_pad(b, 32);
}

static void check_nested(const gguf_file *f) {
    gguf_value v, e, x;
    uint32_t u;
    EXPECT(gguf_kv_value(f, gguf_find_key(f, "n.u32"), &v) == 0 && v.type == GGUF_TYPE_ARRAY &&
           v.elem_type == GGUF_TYPE_ARRAY && v.count == 3, "n.u32 outer");
    EXPECT(gguf_value_elem(&v, 0, &e) == 0 && e.elem_type == GGUF_TYPE_UINT32 && e.count == 2,
           "n.u32[0]");
    EXPECT(gguf_value_elem(&e, 1, &x) == 0 && x.type == GGUF_TYPE_UINT32 && x.size == 4, "[0][1]");
    memcpy(&u, x.data, 4);
    EXPECT(u == 2, "n.u32[0][1] = %" PRIu32, u);
    EXPECT(gguf_value_elem(&v, 1, &e) == 0 && e.count == 0, "n.u32[1] empty");
    EXPECT(gguf_value_elem(&v, 2, &e) == 0 && e.count == 1 && gguf_value_elem(&e, 0, &x) == 0,
           "n.u32[2]");
    memcpy(&u, x.data, 4);
    EXPECT(u == 3, "n.u32[2][0] = %" PRIu32, u);
    EXPECT(gguf_value_elem(&v, 3, &e) != 0 && *error_get(), "index past the end must fail");
    EXPECT(gguf_kv_value(f, gguf_find_key(f, "n.str"), &v) == 0 &&
           gguf_value_elem(&v, 0, &e) == 0 && gguf_value_elem(&e, 1, &x) == 0 &&
           x.type == GGUF_TYPE_STRING && x.size == 2 && memcmp(x.data, "yz", 2) == 0,
           "n.str[0][1]");
    gguf_value y;
    EXPECT(gguf_kv_value(f, gguf_find_key(f, "n.deep"), &v) == 0 &&
           gguf_value_elem(&v, 0, &e) == 0 && gguf_value_elem(&e, 0, &x) == 0 &&
           gguf_value_elem(&x, 0, &y) == 0 && y.size == 4 && memcmp(y.data, "deep", 4) == 0,
           "n.deep[0][0][0]");
    EXPECT(gguf_kv_arr_count(f, gguf_find_key(f, "n.u32")) == 3 &&
           gguf_kv_arr_type(f, gguf_find_key(f, "n.u32")) == GGUF_TYPE_ARRAY, "index accessors");
}

TEST(test_nested) {
    for (uint32_t version = 2; version <= 3; version++) {
        img b = {0};
        build_nested(&b, version);
        gguf_file *f = gguf_open_memory(b.p, b.n, "nested");
        EXPECT(f != NULL, "v%" PRIu32 ": %s", version, error_get());
        if (!f) {
            img_free(&b);
            continue;
        }
        EXPECT(gguf_version(f) == version, "version");
        check_nested(f);
        gguf_writer *w = gguf_writer_new();
        for (int64_t i = 0; i < gguf_kv_count(f); i++)
            EXPECT(gguf_writer_copy_kv(w, f, i) == 0, "%s", error_get());
        const char *path = out_path("nested.gguf");
        EXPECT(gguf_writer_write_file(w, path) == 0, "%s", error_get());
        gguf_writer_free(w);
        gguf_file *g = gguf_open(path);
        EXPECT(g != NULL, "%s", error_get());
        if (g) {
            check_nested(g);
            /* a v3 source comes back as the same bytes */
            size_t n;
            uint8_t *bytes = read_whole_file(path, &n);
            if (version == 3)
                EXPECT(n == b.n && memcmp(bytes, b.p, n) == 0, "nested rewrite not identical");
            free(bytes);
            gguf_close(g);
        }
        unlink(path);
        gguf_close(f);
        img_free(&b);
    }
}

TEST(test_streaming) {
    gguf_writer *w = gguf_writer_new();
    int64_t ne[] = {32, 3};
    uint8_t *d0 = pattern(32 * 3 * 4, 7), *d1 = pattern(3 * 34, 8);
    gguf_writer_set_str(w, "general.architecture", "test", 4);
    EXPECT(gguf_writer_add_tensor(w, "s0", T_F32, 2, ne, NULL) == 0, "%s", error_get());
    EXPECT(gguf_writer_add_tensor(w, "s1", T_Q8_0, 2, ne, NULL) == 0, "%s", error_get());
    const char *path = out_path("stream.gguf");
    EXPECT(gguf_writer_write_file(w, path) != 0 && strstr(error_get(), "s0"),
           "write_file without data must fail naming the tensor: '%s'", error_get());
    EXPECT(access(path, F_OK) != 0 && count_files() == 0, "failed write left files behind");

    char *tmp = NULL;
    FILE *fp = gguf_tmpfile_open(path, &tmp);
    EXPECT(fp != NULL && tmp != NULL, "%s", error_get());
    if (!fp) goto done;
    EXPECT(gguf_writer_write_tensor_data(w, fp, 0, d0, 384) != 0 && *error_get(),
           "data before begin must fail");
    EXPECT(gguf_writer_begin(w, fp) == 0, "%s", error_get());
    EXPECT(gguf_writer_set_u32(w, "late", 1) != 0, "key after begin must fail");
    EXPECT(gguf_writer_write_tensor_data(w, fp, 1, d1, 102) != 0 && strstr(error_get(), "s1"),
           "out of order must fail: '%s'", error_get());
    EXPECT(gguf_writer_write_tensor_data(w, fp, 0, d0, 100) != 0 && strstr(error_get(), "384"),
           "wrong size must fail: '%s'", error_get());
    EXPECT(gguf_writer_write_tensor_data(w, fp, 0, d0, 384) == 0, "%s", error_get());
    EXPECT(gguf_writer_finish(w, fp) != 0 && strstr(error_get(), "s1"),
           "finish before all tensors must fail: '%s'", error_get());
    EXPECT(access(path, F_OK) != 0, "the target exists before commit");
    EXPECT(gguf_writer_write_tensor_data(w, fp, 1, d1, 102) == 0, "%s", error_get());
    EXPECT(gguf_writer_finish(w, fp) == 0, "%s", error_get());
    EXPECT(gguf_tmpfile_commit(fp, tmp, path) == 0, "%s", error_get());
    EXPECT(count_files() == 1, "temporary file left behind");

    gguf_file *f = gguf_open(path);
    EXPECT(f != NULL, "%s", error_get());
    if (f) {
        const gguf_tensor_info *t0 = gguf_find_tensor(f, "s0"), *t1 = gguf_find_tensor(f, "s1");
        EXPECT(t0 && t0->size == 384 && memcmp(t0->data, d0, 384) == 0, "s0 data");
        EXPECT(t1 && t1->size == 102 && t1->offset == 384 && memcmp(t1->data, d1, 102) == 0,
               "s1 data");
        EXPECT(gguf_file_size(f) == gguf_data_offset(f) + 384 + 128, "file size %" PRIu64
               " (the last tensor is padded too)", gguf_file_size(f));
        gguf_close(f);
    }
    unlink(path);

    /* abort removes the temporary file */
    fp = gguf_tmpfile_open(path, &tmp);
    EXPECT(fp != NULL, "%s", error_get());
    gguf_tmpfile_abort(fp, tmp);
    EXPECT(count_files() == 0, "abort left a file behind");
done:
    gguf_writer_free(w);
    free(d0);
    free(d1);
}

TEST(test_writer_errors) {
    gguf_writer *w = gguf_writer_new();
    int64_t ne[] = {32, 2, 1, 1, 1};
    int64_t bad_ne0[] = {33};
    int64_t zero[] = {32, 0};
    int64_t huge[] = {INT64_MAX, 4};
    float x[64] = {0};
    char long_name[100];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    EXPECT(gguf_writer_add_tensor(w, "t", T_F32, 2, ne, x) == 0, "%s", error_get());
    EXPECT(gguf_writer_add_tensor(w, "t", T_F32, 2, ne, x) != 0 && strstr(error_get(), "'t'"),
           "duplicate: '%s'", error_get());
    EXPECT(gguf_writer_add_tensor(w, long_name, T_F32, 2, ne, x) != 0 &&
           strstr(error_get(), "longer"), "long name: '%s'", error_get());
    EXPECT(gguf_writer_add_tensor(w, "", T_F32, 2, ne, x) != 0, "empty name");
    EXPECT(gguf_writer_add_tensor(w, "u", 4, 2, ne, x) != 0 && strstr(error_get(), "type"),
           "retired type 4: '%s'", error_get());
    EXPECT(gguf_writer_add_tensor(w, "u", 99, 2, ne, x) != 0, "type 99");
    EXPECT(gguf_writer_add_tensor(w, "u", T_F32, 0, ne, x) != 0, "n_dims 0");
    EXPECT(gguf_writer_add_tensor(w, "u", T_F32, 5, ne, x) != 0, "n_dims 5");
    EXPECT(gguf_writer_add_tensor(w, "u", T_Q8_0, 1, bad_ne0, x) != 0 &&
           strstr(error_get(), "block"), "ne0 not a block multiple: '%s'", error_get());
    EXPECT(gguf_writer_add_tensor(w, "u", T_F32, 2, zero, x) != 0, "zero dim");
    EXPECT(gguf_writer_add_tensor(w, "u", T_F32, 2, huge, x) != 0 &&
           strstr(error_get(), "overflow"), "overflow: '%s'", error_get());
    EXPECT(gguf_writer_set_u32(w, "", 1) != 0, "empty key");

    EXPECT(gguf_writer_set_u32(w, "general.alignment", 24) == 0, "%s", error_get());
    const char *path = out_path("bad-align.gguf");
    EXPECT(gguf_writer_write_file(w, path) != 0 && strstr(error_get(), "alignment"),
           "alignment 24: '%s'", error_get());
    EXPECT(gguf_writer_set_i32(w, "general.alignment", 32) == 0, "%s", error_get());
    EXPECT(gguf_writer_write_file(w, path) != 0 && strstr(error_get(), "uint32"),
           "alignment of type int32: '%s'", error_get());
    EXPECT(count_files() == 0, "failed writes left files behind");
    EXPECT(gguf_writer_remove_key(w, "general.alignment") == 0, "%s", error_get());
    EXPECT(gguf_writer_write_file(w, "/nonexistent-dir/x.gguf") != 0 &&
           strstr(error_get(), "/nonexistent-dir/x.gguf"), "bad dir: '%s'", error_get());
    /* the same writer can be written twice */
    EXPECT(gguf_writer_write_file(w, path) == 0, "%s", error_get());
    EXPECT(gguf_writer_write_file(w, path) == 0, "%s", error_get());
    EXPECT(count_files() == 1, "expected one file");
    unlink(path);
    gguf_writer_free(w);
}

/* The temp dir goes once every test has checked it is empty or not. */
TEST(test_cleanup) {
    EXPECT(rmdir(harness_tmpdir()) == 0, "%s: a file was left behind", harness_tmpdir());
}

HARNESS_MAIN("gguf round trip", HARNESS_TEST(test_all_types), HARNESS_TEST(test_nested), HARNESS_TEST(test_streaming),
             HARNESS_TEST(test_writer_errors), HARNESS_TEST(test_cleanup))
