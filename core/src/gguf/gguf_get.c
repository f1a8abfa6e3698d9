/*
 * gguf_get — read access to an opened (already validated) GGUF file: header
 * fields, metadata by index or key with typed getters, tensors.
 *
 * Everything here relies on gguf_read having checked the file, so walking a
 * value never needs bounds checks beyond what the parse established.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = "uint8",     [GGUF_TYPE_INT8] = "int8",
    [GGUF_TYPE_UINT16] = "uint16",   [GGUF_TYPE_INT16] = "int16",
    [GGUF_TYPE_UINT32] = "uint32",   [GGUF_TYPE_INT32] = "int32",
    [GGUF_TYPE_FLOAT32] = "float32", [GGUF_TYPE_BOOL] = "bool",
    [GGUF_TYPE_STRING] = "string",   [GGUF_TYPE_ARRAY] = "array",
    [GGUF_TYPE_UINT64] = "uint64",   [GGUF_TYPE_INT64] = "int64",
    [GGUF_TYPE_FLOAT64] = "float64",
};

const char *gguf_type_name(gguf_type t) {
    if ((unsigned)t >= GGUF_TYPE_COUNT) return "invalid";
    return gguf_type_names[t];
}

/* ------------------------------------------------------------- header */

const char *gguf_path(const gguf_file *f) { return f->path; }
uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_alignment(const gguf_file *f) { return f->alignment; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }
uint64_t gguf_data_offset(const gguf_file *f) { return f->data_offset; }
const void *gguf_data(const gguf_file *f) { return f->base + f->data_offset; }

/* ------------------------------------------------------- kv by index */

int64_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }

static const gguf_kv *kv_at(const gguf_file *f, int64_t i) {
    if (i < 0 || i >= f->n_kv) {
        error_set("%s: key index %" PRId64 " out of range (%" PRId64 " keys)", f->path, i,
                  f->n_kv);
        return NULL;
    }
    return &f->kv[i];
}

const char *gguf_kv_key(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv ? kv->key : NULL;
}

gguf_type gguf_kv_type(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv ? kv->type : GGUF_TYPE_COUNT;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) {
    if (!key) return -1;
    return gguf_name_lookup(f->kv_sorted, f->n_kv, key);
}

uint64_t gguf_kv_arr_count(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->count : 0;
}

gguf_type gguf_kv_arr_type(const gguf_file *f, int64_t i) {
    const gguf_kv *kv = kv_at(f, i);
    return kv && kv->type == GGUF_TYPE_ARRAY ? kv->elem_type : GGUF_TYPE_COUNT;
}

static int kv_want(const gguf_file *f, const gguf_kv *kv, gguf_type want) {
    if (kv->type != want)
        return error_set("%s: key '%s' has type %s, expected %s", f->path, kv->key,
                         gguf_type_name(kv->type), gguf_type_name(want));
    return 0;
}

int gguf_kv_scalar(const gguf_file *f, int64_t i, void *out, size_t out_size) {
    const gguf_kv *kv = kv_at(f, i);
    if (!kv) return -1;
    uint64_t n = gguf_type_fixed_size(kv->type);
    if (n == 0)
        return error_set("%s: key '%s' has type %s, expected a scalar", f->path, kv->key,
                         gguf_type_name(kv->type));
    if (out_size != n)
        return error_set("%s: key '%s' is a %s of %" PRIu64 " bytes, not %zu", f->path, kv->key,
                         gguf_type_name(kv->type), n, out_size);
    memcpy(out, kv->value, n);
    return 0;
}

static gguf_str decode_str(const uint8_t *p) {
    gguf_str s = {.ptr = (const char *)(p + 8), .len = gguf_load_u64(p)};
    return s;
}

int gguf_kv_str(const gguf_file *f, int64_t i, gguf_str *out) {
    const gguf_kv *kv = kv_at(f, i);
    if (!kv || kv_want(f, kv, GGUF_TYPE_STRING)) return -1;
    *out = decode_str(kv->value);
    return 0;
}

int gguf_kv_arr(const gguf_file *f, int64_t i, gguf_type *elem_type, uint64_t *count,
                const void **data) {
    const gguf_kv *kv = kv_at(f, i);
    if (!kv || kv_want(f, kv, GGUF_TYPE_ARRAY)) return -1;
    if (elem_type) *elem_type = kv->elem_type;
    if (count) *count = kv->count;
    if (data) *data = kv->value;
    return 0;
}

int gguf_kv_arr_str(const gguf_file *f, int64_t i, uint64_t j, gguf_str *out) {
    const gguf_kv *kv = kv_at(f, i);
    if (!kv || kv_want(f, kv, GGUF_TYPE_ARRAY)) return -1;
    if (kv->elem_type != GGUF_TYPE_STRING)
        return error_set("%s: key '%s' is an array of %s, expected an array of string", f->path,
                         kv->key, gguf_type_name(kv->elem_type));
    if (j >= kv->count)
        return error_set("%s: key '%s': index %" PRIu64 " out of range (%" PRIu64 " elements)",
                         f->path, kv->key, j, kv->count);
    *out = decode_str(kv->value + kv->str_offsets[j]);
    return 0;
}

/* ------------------------------------------------------ kv by key */

static const gguf_kv *kv_named(const gguf_file *f, const char *key) {
    int64_t i = gguf_find_key(f, key);
    if (i < 0) {
        error_set("%s: key '%s' not found", f->path, key ? key : "(null)");
        return NULL;
    }
    return &f->kv[i];
}

static int get_fixed(const gguf_file *f, const char *key, gguf_type want, void *out) {
    const gguf_kv *kv = kv_named(f, key);
    if (!kv || kv_want(f, kv, want)) return -1;
    memcpy(out, kv->value, gguf_type_fixed_size(want));
    return 0;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    return get_fixed(f, key, GGUF_TYPE_UINT32, out);
}

int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out) {
    return get_fixed(f, key, GGUF_TYPE_INT32, out);
}

int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) {
    return get_fixed(f, key, GGUF_TYPE_UINT64, out);
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    return get_fixed(f, key, GGUF_TYPE_FLOAT32, out);
}

int gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    uint8_t b;
    if (get_fixed(f, key, GGUF_TYPE_BOOL, &b)) return -1;
    *out = b != 0;
    return 0;
}

int gguf_get_int(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv = kv_named(f, key);
    if (!kv) return -1;
    const uint8_t *p = kv->value;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: *out = p[0]; return 0;
    case GGUF_TYPE_INT8: *out = (int8_t)p[0]; return 0;
    case GGUF_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_TYPE_INT64: { int64_t v; memcpy(&v, p, 8); *out = v; return 0; }
    case GGUF_TYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX)
            return error_set("%s: key '%s' = %" PRIu64 " does not fit in int64", f->path, key, v);
        *out = (int64_t)v;
        return 0;
    }
    default:
        return error_set("%s: key '%s' has type %s, expected an integer", f->path, key,
                         gguf_type_name(kv->type));
    }
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv = kv_named(f, key);
    if (!kv || kv_want(f, kv, GGUF_TYPE_STRING)) return -1;
    *out = decode_str(kv->value);
    return 0;
}

int gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem_type, uint64_t *count,
                 const void **data) {
    int64_t i = gguf_find_key(f, key);
    if (i < 0) return error_set("%s: key '%s' not found", f->path, key ? key : "(null)");
    return gguf_kv_arr(f, i, elem_type, count, data);
}

int gguf_get_arr_str(const gguf_file *f, const char *key, uint64_t i, gguf_str *out) {
    int64_t k = gguf_find_key(f, key);
    if (k < 0) return error_set("%s: key '%s' not found", f->path, key ? key : "(null)");
    return gguf_kv_arr_str(f, k, i, out);
}

/* ------------------------------------------------------------- values */

int gguf_kv_value(const gguf_file *f, int64_t i, gguf_value *out) {
    const gguf_kv *kv = kv_at(f, i);
    if (!kv) return -1;
    memset(out, 0, sizeof *out);
    out->type = kv->type;
    if (kv->type == GGUF_TYPE_STRING) {
        gguf_str s = decode_str(kv->value);
        out->data = s.ptr;
        out->size = s.len;
    } else if (kv->type == GGUF_TYPE_ARRAY) {
        out->data = kv->value;
        out->size = kv->value_size;
        out->elem_type = kv->elem_type;
        out->count = kv->count;
    } else {
        out->data = kv->value;
        out->size = gguf_type_fixed_size(kv->type);
    }
    return 0;
}

/* Decode the element of type t encoded at p; returns its encoded size. The
 * bytes were validated when the file was opened. */
static uint64_t decode_elem(gguf_type t, const uint8_t *p, gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == GGUF_TYPE_STRING) {
        out->size = gguf_load_u64(p);
        out->data = p + 8;
        return 8 + out->size;
    }
    if (t != GGUF_TYPE_ARRAY) {
        out->data = p;
        out->size = gguf_type_fixed_size(t);
        return out->size;
    }
    out->elem_type = (gguf_type)gguf_load_u32(p);
    out->count = gguf_load_u64(p + 4);
    out->data = p + 12;
    const uint8_t *q = p + 12;
    uint64_t fixed = gguf_type_fixed_size(out->elem_type);
    if (fixed) {
        q += out->count * fixed;
    } else {
        gguf_value sub;
        for (uint64_t j = 0; j < out->count; j++) q += decode_elem(out->elem_type, q, &sub);
    }
    out->size = (uint64_t)(q - (p + 12));
    return (uint64_t)(q - p);
}

int gguf_value_elem(const gguf_value *arr, uint64_t j, gguf_value *out) {
    if (arr->type != GGUF_TYPE_ARRAY)
        return error_set("gguf value of type %s is not an array", gguf_type_name(arr->type));
    if (j >= arr->count)
        return error_set("gguf array index %" PRIu64 " out of range (%" PRIu64 " elements)", j,
                         arr->count);
    const uint8_t *p = arr->data;
    uint64_t fixed = gguf_type_fixed_size(arr->elem_type);
    if (fixed) {
        decode_elem(arr->elem_type, p + j * fixed, out);
        return 0;
    }
    for (uint64_t k = 0; k < j; k++) p += decode_elem(arr->elem_type, p, out);
    decode_elem(arr->elem_type, p, out);
    return 0;
}

int gguf_value_next(const gguf_value *arr, uint64_t *pos, gguf_value *out) {
    if (arr->type != GGUF_TYPE_ARRAY)
        return error_set("gguf value of type %s is not an array", gguf_type_name(arr->type));
    if (*pos >= arr->size)
        return error_set("gguf array walked past its last element (byte %" PRIu64 " of %" PRIu64
                         ")", *pos, arr->size);
    *pos += decode_elem(arr->elem_type, (const uint8_t *)arr->data + *pos, out);
    return 0;
}

/* ------------------------------------------------------------ tensors */

int64_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }

const gguf_tensor_info *gguf_tensor(const gguf_file *f, int64_t i) {
    if (i < 0 || i >= f->n_tensors) {
        error_set("%s: tensor index %" PRId64 " out of range (%" PRId64 " tensors)", f->path, i,
                  f->n_tensors);
        return NULL;
    }
    return &f->tensors[i];
}

const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t i = name ? gguf_name_lookup(f->tensor_sorted, f->n_tensors, name) : -1;
    if (i < 0) {
        error_set("%s: tensor '%s' not found", f->path, name ? name : "(null)");
        return NULL;
    }
    return &f->tensors[i];
}
