/*
 * tessera_gguf.h — read a GGUF file's header, metadata and tensor table
 * without loading it as a model (what `tessera inspect` prints), and ask
 * whether Tessera runs its architecture.
 *
 * Conventions as in tessera.h: a call that fails returns NULL or a negative
 * status, and tessera_last_error() says why in one line naming the file, the
 * byte offset and the key or tensor at fault. The file is mapped read-only
 * and validated as if hostile before any of it is handed out (counts, string
 * lengths, nesting, tensor offsets and sizes against the file size).
 */
#ifndef TESSERA_TESSERA_GGUF_H
#define TESSERA_TESSERA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_gguf tessera_gguf;

/* Metadata value types; the numbers are the GGUF format's. */
typedef enum tessera_gguf_type {
    TESSERA_GGUF_UINT8 = 0,
    TESSERA_GGUF_INT8 = 1,
    TESSERA_GGUF_UINT16 = 2,
    TESSERA_GGUF_INT16 = 3,
    TESSERA_GGUF_UINT32 = 4,
    TESSERA_GGUF_INT32 = 5,
    TESSERA_GGUF_FLOAT32 = 6,
    TESSERA_GGUF_BOOL = 7,
    TESSERA_GGUF_STRING = 8,
    TESSERA_GGUF_ARRAY = 9,
    TESSERA_GGUF_UINT64 = 10,
    TESSERA_GGUF_INT64 = 11,
    TESSERA_GGUF_FLOAT64 = 12
} tessera_gguf_type;

/* Open and validate path. NULL with an error on failure. */
tessera_gguf *tessera_gguf_open(const char *path);
/* Unmap the file; every pointer handed out for it becomes invalid. NULL is
 * fine. */
void tessera_gguf_close(tessera_gguf *f);

/* The header: the path given to open, the format version (2 or 3), the
 * data alignment, the file's size, the file offset of the tensor data. */
const char *tessera_gguf_path(const tessera_gguf *f);
uint32_t tessera_gguf_version(const tessera_gguf *f);
uint64_t tessera_gguf_alignment(const tessera_gguf *f);
uint64_t tessera_gguf_file_size(const tessera_gguf *f);
uint64_t tessera_gguf_data_offset(const tessera_gguf *f);

/* Split models (llama.cpp's gguf-split, "<name>-00001-of-00003.gguf"...):
 * opening the first shard opens the others beside it, and the tensor list
 * covers the whole model (each tensor's offset is within its own shard's
 * data section). The number of files (1 unless split) and the path of file i
 * (0: the one opened; NULL past the last). The header getters above
 * describe the first shard. */
int32_t tessera_gguf_split_count(const tessera_gguf *f);
const char *tessera_gguf_split_file(const tessera_gguf *f, int32_t i);

/* ------------------------------------------------------------ metadata */

/* Any metadata value, nested arrays included, as a view into the mapped
 * file (valid until tessera_gguf_close). */
typedef struct tessera_gguf_value {
    int32_t type; /* tessera_gguf_type */
    /* scalars: the value's bytes, little-endian and maybe unaligned (memcpy
     * them); strings: the characters, not NUL-terminated; arrays: where the
     * first element is encoded (walk it with tessera_gguf_array_next) */
    const void *data;
    uint64_t size;      /* bytes at data: a scalar's size, a string's length, an array's encoding */
    int32_t elem_type;  /* arrays: the elements' tessera_gguf_type */
    uint64_t count;     /* arrays: how many elements */
} tessera_gguf_value;

/* Number of metadata keys; key i (NUL-terminated, owned by f) for
 * 0 <= i < count, NULL out of range. */
int64_t tessera_gguf_kv_count(const tessera_gguf *f);
const char *tessera_gguf_kv_key(const tessera_gguf *f, int64_t i);
/* The value of key i into *out. 0, or -1 with an error (i out of range). */
int tessera_gguf_kv_value(const tessera_gguf *f, int64_t i, tessera_gguf_value *out);
/* The index of key, or -1 when absent (not an error: nothing is set). */
int64_t tessera_gguf_find_key(const tessera_gguf *f, const char *key);
/* The string value of key as (pointer, length), not NUL-terminated, into
 * the mapping. 0, or -1 with an error naming the key when it is absent or
 * not a string. */
int tessera_gguf_get_str(const tessera_gguf *f, const char *key, const char **str, uint64_t *len);

/* Walk the elements of an array value in order, each in O(1): start with
 * *pos = 0 and call it arr->count times; each call writes the next element
 * to *out. 0, or -1 with an error past the last element or when arr is not
 * an array. */
int tessera_gguf_array_next(const tessera_gguf_value *arr, uint64_t *pos, tessera_gguf_value *out);

/* "uint32", "string", "array", ...; "invalid" for a number outside
 * tessera_gguf_type. Never NULL. */
const char *tessera_gguf_type_name(int32_t type);

/* -------------------------------------------------------------- tensors */

typedef struct tessera_gguf_tensor {
    const char *name;      /* NUL-terminated, owned by f */
    int32_t type;          /* the GGUF tensor type number (0 F32, 1 F16, 2 Q4_0, ...) */
    const char *type_name; /* "F32", "Q4_K", ...; "unknown" for a number Tessera does not know */
    int32_t n_dims;        /* 1..4 */
    int64_t ne[4];         /* elements per dimension, innermost first; unused ones are 1 */
    uint64_t offset;       /* bytes from the start of the data section */
    uint64_t size;         /* bytes */
} tessera_gguf_tensor;

int64_t tessera_gguf_tensor_count(const tessera_gguf *f);
/* Tensor i's entry of the table into *out. 0, or -1 with an error (i out of
 * range). */
int tessera_gguf_tensor_info(const tessera_gguf *f, int64_t i, tessera_gguf_tensor *out);

/* The name of a GGUF tensor type number ("Q4_K"), "unknown" for another
 * number. Never NULL. */
const char *tessera_tensor_type_name(int32_t type);

/* ------------------------------------------------------- architectures */

/* Whether Tessera can run the architecture name[0..len) (a value of
 * general.architecture, not NUL-terminated). Sets no error. */
bool tessera_arch_supported(const char *name, size_t len);
/* The architectures Tessera runs, "llama, qwen2, ..." (static storage). */
const char *tessera_arch_list(void);

#ifdef __cplusplus
}
#endif

#endif
