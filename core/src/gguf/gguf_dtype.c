/*
 * gguf_dtype — block geometry of GGUF tensor types, as the reader and writer
 * need it, from the tensor module's dtype table (the authority on types).
 */
#include "gguf/gguf_internal.h"
#include "tensor/dtype.h"

int gguf_dtype_geometry(int32_t dtype, int64_t *block_size, uint64_t *block_bytes) {
    if (!dtype_is_known(dtype)) return -1;
    const dtype_traits *t = dtype_traits_get(dtype);
    if (t->block_size <= 0 || t->block_bytes == 0) return -1;
    *block_size = t->block_size;
    *block_bytes = t->block_bytes;
    return 0;
}
