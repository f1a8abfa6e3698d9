/*
 * gguf_write — build a GGUF v3 file: metadata, tensor table, aligned data.
 *
 * Values are kept already encoded in the file's byte format, so writing the
 * header is a straight copy and a key copied from a reader (nested arrays
 * included) needs no decoding. Tensor data starts at the first multiple of
 * general.alignment after the header and every tensor is padded to the
 * alignment, which is the layout llama.cpp expects (it checks that each
 * offset equals the padded sum of the sizes before it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

/* llama.cpp stores tensor names in 64-byte buffers (NUL included). */
#define GGUF_MAX_TENSOR_NAME 63

typedef struct writer_kv {
    char *key;
    gguf_type type;
    uint8_t *value; /* encoded as in the file (arrays: elem type, count, elements) */
    uint64_t size;
} writer_kv;

typedef struct writer_tensor {
    char *name;
    int32_t dtype;
    int n_dims;
    int64_t ne[4];
    uint64_t size;
    uint64_t offset; /* from the start of the data section; set by layout */
    const void *data;
} writer_tensor;

struct gguf_writer {
    writer_kv *kv;
    int64_t n_kv, cap_kv;
    writer_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    /* streaming state */
    bool begun;
    uint64_t alignment;
    int64_t next_tensor; /* the tensor write_tensor_data expects next */
};

gguf_writer *gguf_writer_new(void) {
    gguf_writer *w = calloc(1, sizeof *w);
    if (!w) error_set("gguf writer: out of memory");
    return w;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->kv);
    free(w->tensors);
    free(w);
}

/* ------------------------------------------------------------- metadata */

static int64_t writer_find_key(const gguf_writer *w, const char *key) {
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return i;
    return -1;
}

/* Store key = (type, encoded value); takes ownership of value. */
static int writer_put(gguf_writer *w, const char *key, gguf_type type, uint8_t *value,
                      uint64_t size) {
    if (!key || !*key) {
        free(value);
        return error_set("gguf writer: empty key");
    }
    if (w->begun) {
        free(value);
        return error_set("gguf writer: key '%s' set after the header was written", key);
    }
    int64_t i = writer_find_key(w, key);
    if (i >= 0) {
        free(w->kv[i].value);
        w->kv[i].type = type;
        w->kv[i].value = value;
        w->kv[i].size = size;
        return 0;
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 16;
        writer_kv *kv = realloc(w->kv, (size_t)cap * sizeof *kv);
        if (!kv) {
            free(value);
            return error_set("gguf writer: out of memory adding key '%s'", key);
        }
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *copy = strdup(key);
    if (!copy) {
        free(value);
        return error_set("gguf writer: out of memory adding key '%s'", key);
    }
    w->kv[w->n_kv++] = (writer_kv){.key = copy, .type = type, .value = value, .size = size};
    return 0;
}

static int writer_put_bytes(gguf_writer *w, const char *key, gguf_type type, const void *v,
                            uint64_t n) {
    uint8_t *value = malloc(n ? n : 1);
    if (!value) return error_set("gguf writer: out of memory for key '%s'", key ? key : "");
    memcpy(value, v, n);
    return writer_put(w, key, type, value, n);
}

/* The setters of the fixed-size types: the value's bytes as they are
 * (little-endian hosts, as the reader assumes). */
#define GGUF_SETTER(name, ctype, gtype)                                      \
    int gguf_writer_set_##name(gguf_writer *w, const char *key, ctype v) {   \
        return writer_put_bytes(w, key, gtype, &v, sizeof v);                \
    }
GGUF_SETTER(u8, uint8_t, GGUF_TYPE_UINT8)
GGUF_SETTER(i8, int8_t, GGUF_TYPE_INT8)
GGUF_SETTER(u16, uint16_t, GGUF_TYPE_UINT16)
GGUF_SETTER(i16, int16_t, GGUF_TYPE_INT16)
GGUF_SETTER(u32, uint32_t, GGUF_TYPE_UINT32)
GGUF_SETTER(i32, int32_t, GGUF_TYPE_INT32)
GGUF_SETTER(u64, uint64_t, GGUF_TYPE_UINT64)
GGUF_SETTER(i64, int64_t, GGUF_TYPE_INT64)
GGUF_SETTER(f32, float, GGUF_TYPE_FLOAT32)
GGUF_SETTER(f64, double, GGUF_TYPE_FLOAT64)

int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return writer_put_bytes(w, key, GGUF_TYPE_BOOL, &b, 1);
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len) {
    if (!s && len > 0) return error_set("gguf writer: key '%s': NULL string", key ? key : "");
    uint8_t *value = malloc(8 + len);
    if (!value) return error_set("gguf writer: out of memory for key '%s'", key ? key : "");
    uint64_t n = len;
    memcpy(value, &n, 8);
    if (len) memcpy(value + 8, s, len);
    return writer_put(w, key, GGUF_TYPE_STRING, value, 8 + n);
}

int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data,
                        uint64_t count) {
    const char *k = key ? key : "";
    uint64_t esize = gguf_type_fixed_size(elem_type);
    if (esize == 0)
        return error_set("gguf writer: key '%s': gguf_writer_set_arr takes fixed-size elements, "
                         "not %s", k, gguf_type_name(elem_type));
    uint64_t bytes;
    if (__builtin_mul_overflow(count, esize, &bytes) || bytes > SIZE_MAX - 12)
        return error_set("gguf writer: key '%s': array of %" PRIu64 " elements is too large", k,
                         count);
    if (!data && count > 0) return error_set("gguf writer: key '%s': NULL array data", k);
    uint8_t *value = malloc(12 + bytes);
    if (!value) return error_set("gguf writer: out of memory for key '%s'", k);
    uint32_t t = (uint32_t)elem_type;
    memcpy(value, &t, 4);
    memcpy(value + 4, &count, 8);
    if (bytes) memcpy(value + 12, data, bytes);
    return writer_put(w, key, GGUF_TYPE_ARRAY, value, 12 + bytes);
}

int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const gguf_str *strs,
                            uint64_t count) {
    const char *k = key ? key : "";
    if (!strs && count > 0) return error_set("gguf writer: key '%s': NULL string array", k);
    uint64_t bytes = 12;
    for (uint64_t j = 0; j < count; j++) {
        if (!strs[j].ptr && strs[j].len > 0)
            return error_set("gguf writer: key '%s': element %" PRIu64 " is NULL", k, j);
        if (strs[j].len > SIZE_MAX - 8 - bytes)
            return error_set("gguf writer: key '%s': array too large", k);
        bytes += 8 + strs[j].len;
    }
    uint8_t *value = malloc(bytes);
    if (!value) return error_set("gguf writer: out of memory for key '%s'", k);
    uint32_t t = GGUF_TYPE_STRING;
    memcpy(value, &t, 4);
    memcpy(value + 4, &count, 8);
    uint8_t *p = value + 12;
    for (uint64_t j = 0; j < count; j++) {
        memcpy(p, &strs[j].len, 8);
        if (strs[j].len) memcpy(p + 8, strs[j].ptr, strs[j].len);
        p += 8 + strs[j].len;
    }
    return writer_put(w, key, GGUF_TYPE_ARRAY, value, bytes);
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, int64_t i) {
    if (i < 0 || i >= f->n_kv)
        return error_set("gguf writer: %s has no key #%" PRId64, f->path, i);
    const gguf_kv *kv = &f->kv[i];
    if (kv->type != GGUF_TYPE_ARRAY)
        return writer_put_bytes(w, kv->key, kv->type, kv->value, kv->value_size);
    /* the reader points at the first element; re-encode the array header */
    uint8_t *value = malloc(12 + kv->value_size);
    if (!value) return error_set("gguf writer: out of memory copying key '%s'", kv->key);
    uint32_t t = (uint32_t)kv->elem_type;
    memcpy(value, &t, 4);
    memcpy(value + 4, &kv->count, 8);
    memcpy(value + 12, kv->value, kv->value_size);
    return writer_put(w, kv->key, GGUF_TYPE_ARRAY, value, 12 + kv->value_size);
}

int gguf_writer_remove_key(gguf_writer *w, const char *key) {
    int64_t i = key ? writer_find_key(w, key) : -1;
    if (i < 0) return error_set("gguf writer: cannot remove key '%s': not set", key ? key : "");
    if (w->begun) return error_set("gguf writer: key '%s' removed after the header", key);
    free(w->kv[i].key);
    free(w->kv[i].value);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    return 0;
}

/* -------------------------------------------------------------- tensors */

int gguf_writer_add_tensor(gguf_writer *w, const char *name, int32_t dtype, int n_dims,
                           const int64_t *ne, const void *data) {
    if (!name || !*name) return error_set("gguf writer: tensor with an empty name");
    if (strlen(name) > GGUF_MAX_TENSOR_NAME)
        return error_set("gguf writer: tensor name '%s' is longer than %d bytes", name,
                         GGUF_MAX_TENSOR_NAME);
    if (w->begun) return error_set("gguf writer: tensor '%s' added after the header", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return error_set("gguf writer: duplicate tensor '%s'", name);
    int64_t block_size;
    uint64_t block_bytes;
    if (gguf_dtype_geometry(dtype, &block_size, &block_bytes))
        return error_set("gguf writer: tensor '%s': unknown type %" PRId32, name, dtype);
    if (n_dims < 1 || n_dims > 4 || !ne)
        return error_set("gguf writer: tensor '%s': n_dims %d is outside 1..4", name, n_dims);
    writer_tensor t = {.dtype = dtype, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data};
    int64_t nelem = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 1)
            return error_set("gguf writer: tensor '%s': ne[%d] = %" PRId64 " (must be >= 1)",
                             name, d, ne[d]);
        if (__builtin_mul_overflow(nelem, ne[d], &nelem))
            return error_set("gguf writer: tensor '%s': element count overflows", name);
        t.ne[d] = ne[d];
    }
    if (t.ne[0] % block_size != 0)
        return error_set("gguf writer: tensor '%s': ne[0] = %" PRId64 " is not a multiple of "
                         "the block size %" PRId64, name, t.ne[0], block_size);
    if (__builtin_mul_overflow((uint64_t)(nelem / block_size), block_bytes, &t.size))
        return error_set("gguf writer: tensor '%s': byte size overflows", name);
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? 2 * w->cap_tensors : 64;
        writer_tensor *ts = realloc(w->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return error_set("gguf writer: out of memory adding tensor '%s'", name);
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    t.name = strdup(name);
    if (!t.name) return error_set("gguf writer: out of memory adding tensor '%s'", name);
    w->tensors[w->n_tensors++] = t;
    return 0;
}

/* -------------------------------------------------------------- writing */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* general.alignment if set (a u32 power of two), else the default. */
static int writer_alignment(const gguf_writer *w, uint64_t *out) {
    *out = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = writer_find_key(w, "general.alignment");
    if (i < 0) return 0;
    if (w->kv[i].type != GGUF_TYPE_UINT32)
        return error_set("gguf writer: key 'general.alignment' has type %s, expected uint32",
                         gguf_type_name(w->kv[i].type));
    uint32_t a;
    memcpy(&a, w->kv[i].value, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return error_set("gguf writer: general.alignment %" PRIu32
                         " is not a non-zero power of two", a);
    *out = a;
    return 0;
}

static int put(FILE *fp, const void *p, uint64_t n) {
    if (n && fwrite(p, 1, (size_t)n, fp) != n)
        return error_set("gguf writer: write failed: %s", strerror(errno));
    return 0;
}

static int put_u32(FILE *fp, uint32_t v) { return put(fp, &v, 4); }
static int put_u64(FILE *fp, uint64_t v) { return put(fp, &v, 8); }

static int put_zeros(FILE *fp, uint64_t n) {
    static const uint8_t zeros[256];
    while (n > 0) {
        uint64_t k = n < sizeof zeros ? n : sizeof zeros;
        if (put(fp, zeros, k)) return -1;
        n -= k;
    }
    return 0;
}

int gguf_writer_begin(gguf_writer *w, FILE *fp) {
    if (w->begun) return error_set("gguf writer: header already written");
    if (writer_alignment(w, &w->alignment)) return -1;
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = offset;
        offset = align_up(offset + w->tensors[i].size, w->alignment);
    }
    uint64_t header = 0;
    if (put(fp, GGUF_MAGIC, 4) || put_u32(fp, 3) || put_u64(fp, (uint64_t)w->n_tensors) ||
        put_u64(fp, (uint64_t)w->n_kv))
        return -1;
    header += 24;
    for (int64_t i = 0; i < w->n_kv; i++) {
        const writer_kv *kv = &w->kv[i];
        uint64_t klen = strlen(kv->key);
        if (put_u64(fp, klen) || put(fp, kv->key, klen) || put_u32(fp, (uint32_t)kv->type) ||
            put(fp, kv->value, kv->size))
            return error_wrap("key '%s'", kv->key);
        header += 8 + klen + 4 + kv->size;
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const writer_tensor *t = &w->tensors[i];
        uint64_t nlen = strlen(t->name);
        if (put_u64(fp, nlen) || put(fp, t->name, nlen) || put_u32(fp, (uint32_t)t->n_dims))
            return error_wrap("tensor '%s'", t->name);
        for (int d = 0; d < t->n_dims; d++)
            if (put_u64(fp, (uint64_t)t->ne[d])) return error_wrap("tensor '%s'", t->name);
        if (put_u32(fp, (uint32_t)t->dtype) || put_u64(fp, t->offset))
            return error_wrap("tensor '%s'", t->name);
        header += 8 + nlen + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    if (put_zeros(fp, align_up(header, w->alignment) - header)) return -1;
    w->begun = true;
    w->next_tensor = 0;
    return 0;
}

int gguf_writer_write_tensor_data(gguf_writer *w, FILE *fp, int64_t index, const void *data,
                                  uint64_t size) {
    if (!w->begun) return error_set("gguf writer: tensor data written before the header");
    if (index < 0 || index >= w->n_tensors)
        return error_set("gguf writer: tensor index %" PRId64 " out of range (%" PRId64
                         " tensors)", index, w->n_tensors);
    const writer_tensor *t = &w->tensors[index];
    if (index != w->next_tensor)
        return error_set("gguf writer: tensor '%s' (#%" PRId64 ") written out of order; expected "
                         "#%" PRId64, t->name, index, w->next_tensor);
    if (size != t->size)
        return error_set("gguf writer: tensor '%s': got %" PRIu64 " bytes, expected %" PRIu64,
                         t->name, size, t->size);
    if (!data) return error_set("gguf writer: tensor '%s': no data", t->name);
    if (put(fp, data, size) || put_zeros(fp, align_up(size, w->alignment) - size))
        return error_wrap("tensor '%s'", t->name);
    w->next_tensor++;
    return 0;
}

int gguf_writer_finish(gguf_writer *w, FILE *fp) {
    if (!w->begun) return error_set("gguf writer: finish before the header was written");
    if (w->next_tensor != w->n_tensors)
        return error_set("gguf writer: finish after %" PRId64 " of %" PRId64 " tensors (next: "
                         "'%s')", w->next_tensor, w->n_tensors, w->tensors[w->next_tensor].name);
    /* every tensor was padded as written, so the file already ends aligned */
    if (fflush(fp) != 0 || ferror(fp))
        return error_set("gguf writer: write failed: %s", strerror(errno));
    return 0;
}

/* ------------------------------------------------- whole file, atomically */

FILE *gguf_tmpfile_open(const char *path, char **tmp_path) {
    *tmp_path = NULL;
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".tmp-XXXXXX");
    if (!tmp) {
        error_set("%s: out of memory", path);
        return NULL;
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        error_set("%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp);
        return NULL;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes 0600; a model file is not secret */
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        error_set("%s: cannot open %s: %s", path, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return NULL;
    }
    *tmp_path = tmp;
    return fp;
}

int gguf_tmpfile_commit(FILE *fp, char *tmp_path, const char *path) {
    int rc = 0;
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0)
        rc = error_set("%s: write failed: %s", path, strerror(errno));
    if (fclose(fp) != 0 && rc == 0) rc = error_set("%s: write failed: %s", path, strerror(errno));
    if (rc == 0 && rename(tmp_path, path) != 0)
        rc = error_set("%s: cannot rename %s into place: %s", path, tmp_path, strerror(errno));
    if (rc != 0) unlink(tmp_path);
    free(tmp_path);
    return rc;
}

void gguf_tmpfile_abort(FILE *fp, char *tmp_path) {
    if (fp) fclose(fp);
    if (tmp_path) unlink(tmp_path);
    free(tmp_path);
}

int gguf_writer_write_file(gguf_writer *w, const char *path) {
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (!w->tensors[i].data)
            return error_set("%s: tensor '%s' has no data (stream it with "
                             "gguf_writer_write_tensor_data)", path, w->tensors[i].name);
    char *tmp;
    FILE *fp = gguf_tmpfile_open(path, &tmp);
    if (!fp) return -1;
    if (gguf_writer_begin(w, fp)) goto fail;
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (gguf_writer_write_tensor_data(w, fp, i, w->tensors[i].data, w->tensors[i].size))
            goto fail;
    if (gguf_writer_finish(w, fp)) goto fail;
    w->begun = false; /* the writer may be written again */
    return gguf_tmpfile_commit(fp, tmp, path);
fail:
    w->begun = false;
    error_wrap("%s", path);
    gguf_tmpfile_abort(fp, tmp);
    return -1;
}
