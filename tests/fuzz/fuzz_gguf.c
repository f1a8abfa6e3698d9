/* Fuzz target: the GGUF reader on arbitrary bytes. Every key, value, array
 * element and tensor description of a file that opens is read back, so a
 * length the reader accepted but did not check shows up as an ASan report. */
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f = gguf_open_memory(data, size, "fuzz.gguf");
    if (!f) return 0;
    volatile uint64_t sink = gguf_version(f) + gguf_alignment(f) + gguf_data_offset(f);
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *key = gguf_kv_key(f, i);
        sink += key ? (uint8_t)key[0] : 0;
        gguf_str s;
        if (gguf_kv_str(f, i, &s) == 0 && s.len) sink += (uint8_t)s.ptr[s.len - 1];
        uint64_t scalar[2];
        if (gguf_kv_scalar(f, i, scalar, sizeof scalar) == 0) sink += scalar[0];
        uint64_t n = gguf_kv_arr_count(f, i);
        for (uint64_t j = 0; j < n && j < 4096; j++)
            if (gguf_kv_arr_str(f, i, j, &s) == 0 && s.len) sink += (uint8_t)s.ptr[0];
        gguf_type et;
        uint64_t count;
        const void *arr;
        if (gguf_kv_arr(f, i, &et, &count, &arr) == 0 && count && arr && et != GGUF_TYPE_STRING &&
            et != GGUF_TYPE_ARRAY)
            sink += *(const uint8_t *)arr;
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        if (t && t->data && t->size) sink += ((const uint8_t *)t->data)[t->size - 1];
    }
    (void)sink;
    gguf_close(f);
    return 0;
}
