/* tessera_gguf.h: the GGUF reader (gguf/) and the architecture table
 * (model/arch.c) behind the public API. A tessera_gguf is the reader's
 * gguf_file and a tessera_gguf_value the reader's gguf_value; the tensor
 * records are filled field by field. */
#include <tessera/tessera_gguf.h>

#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "tensor/dtype.h"
#include "util/error.h"

/* The handle is the reader's file itself; it is never dereferenced as a
 * tessera_gguf. */
static const gguf_file *file_of(const tessera_gguf *f) { return (const gguf_file *)f; }

tessera_gguf *tessera_gguf_open(const char *path) {
    if (!path) {
        error_set("tessera_gguf_open: no path given");
        return NULL;
    }
    return (tessera_gguf *)gguf_open(path);
}

void tessera_gguf_close(tessera_gguf *f) { gguf_close((gguf_file *)f); }

const char *tessera_gguf_path(const tessera_gguf *f) { return gguf_path(file_of(f)); }
uint32_t tessera_gguf_version(const tessera_gguf *f) { return gguf_version(file_of(f)); }
uint64_t tessera_gguf_alignment(const tessera_gguf *f) { return gguf_alignment(file_of(f)); }
uint64_t tessera_gguf_file_size(const tessera_gguf *f) { return gguf_file_size(file_of(f)); }
uint64_t tessera_gguf_data_offset(const tessera_gguf *f) { return gguf_data_offset(file_of(f)); }

int64_t tessera_gguf_kv_count(const tessera_gguf *f) { return gguf_kv_count(file_of(f)); }

const char *tessera_gguf_kv_key(const tessera_gguf *f, int64_t i) {
    if (i < 0 || i >= gguf_kv_count(file_of(f))) return NULL;
    return gguf_kv_key(file_of(f), i);
}

int tessera_gguf_kv_value(const tessera_gguf *f, int64_t i, tessera_gguf_value *out) {
    int64_t n = gguf_kv_count(file_of(f));
    if (i < 0 || i >= n)
        return error_set("%s: metadata index %lld out of range (%lld keys)", gguf_path(file_of(f)), (long long)i,
                         (long long)n);
    return gguf_kv_value(file_of(f), i, out);
}

int64_t tessera_gguf_find_key(const tessera_gguf *f, const char *key) {
    return key ? gguf_find_key(file_of(f), key) : -1;
}

int tessera_gguf_get_str(const tessera_gguf *f, const char *key, const char **str, uint64_t *len) {
    gguf_str s;
    if (gguf_get_str(file_of(f), key, &s) != 0) return -1;
    *str = s.ptr;
    *len = s.len;
    return 0;
}

int tessera_gguf_array_next(const tessera_gguf_value *arr, uint64_t *pos, tessera_gguf_value *out) {
    return gguf_value_next(arr, pos, out);
}

const char *tessera_gguf_type_name(int32_t type) { return gguf_type_name((gguf_type)type); }

int64_t tessera_gguf_tensor_count(const tessera_gguf *f) { return gguf_tensor_count(file_of(f)); }

int tessera_gguf_tensor_info(const tessera_gguf *f, int64_t i, tessera_gguf_tensor *out) {
    int64_t n = gguf_tensor_count(file_of(f));
    if (i < 0 || i >= n)
        return error_set("%s: tensor index %lld out of range (%lld tensors)", gguf_path(file_of(f)), (long long)i,
                         (long long)n);
    const gguf_tensor_info *t = gguf_tensor(file_of(f), i);
    out->name = t->name;
    out->type = t->dtype;
    out->type_name = dtype_name(t->dtype);
    out->n_dims = t->n_dims;
    memcpy(out->ne, t->ne, sizeof out->ne);
    out->offset = t->offset;
    out->size = t->size;
    return 0;
}

const char *tessera_tensor_type_name(int32_t type) { return dtype_name(type); }

bool tessera_arch_supported(const char *name, size_t len) {
    /* model_arch_find explains a miss in the error; the caller's last error
     * is kept instead, as the header promises. */
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", error_get());
    bool found = name && model_arch_find(name, len) != NULL;
    if (saved[0]) error_set("%s", saved);
    else error_clear();
    return found;
}

const char *tessera_arch_list(void) { return model_arch_list(); }
