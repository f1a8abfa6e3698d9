/*
 * gguf_internal — what the gguf module's files share: the parsed file, the
 * metadata value layout and small little-endian helpers. Not for other
 * modules: they use gguf.h.
 */
#ifndef TESSERA_GGUF_INTERNAL_H
#define TESSERA_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

#define GGUF_MAGIC "GGUF"
/* Arrays may hold arrays; deeper than this is treated as an attack. */
#define GGUF_MAX_NESTING 16

/* One metadata key/value. Values stay in the file; we keep where they are. */
typedef struct gguf_kv {
    char *key;             /* NUL-terminated copy */
    gguf_type type;
    gguf_type elem_type;   /* arrays: type of the elements */
    uint64_t count;        /* arrays: number of elements */
    const uint8_t *value;  /* encoded value; arrays: the first element */
    uint64_t value_size;   /* bytes from value to the end of the kv */
    uint64_t offset;       /* file offset of the kv, for messages */
    uint64_t *str_offsets; /* arrays of strings: element j starts at value + str_offsets[j] */
} gguf_kv;

/* A name -> index entry of a sorted lookup table (keys, tensor names). */
typedef struct gguf_name_ref {
    const char *name;
    int64_t index;
} gguf_name_ref;

struct gguf_file {
    char *path; /* label used in messages */
    const uint8_t *base;
    uint64_t size;
    bool mapped; /* base is our mmap (unmap on close) */
    bool owned;  /* base is our allocation (free on close) */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    gguf_kv *kv;
    gguf_name_ref *kv_sorted;
    int64_t n_tensors;
    gguf_tensor_info *tensors;
    gguf_name_ref *tensor_sorted;
    /* A split model opened by its first shard: the other shards, each with
     * its mapping (their tensor tables moved into this one's; see
     * gguf_split.c). split_count is 1 for a single file. */
    gguf_file **shards;
    int32_t n_shards;
    int32_t split_count;
};

/* Size in bytes of one value of a fixed-size type; 0 for STRING, ARRAY and
 * invalid types. */
static inline uint64_t gguf_type_fixed_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* GGUF is little-endian; Tessera targets little-endian hosts, so these are
 * unaligned loads. */
static inline uint32_t gguf_load_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t gguf_load_u64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Index lookup in a table sorted by name; -1 if absent. */
int64_t gguf_name_lookup(const gguf_name_ref *sorted, int64_t n, const char *name);

/* Sorted name table over n records stride bytes apart, each starting with
 * a name pointer; the first duplicate found is reported by index pair. */
gguf_name_ref *gguf_build_name_index(const char *const *names, size_t stride, int64_t n,
                                     int64_t *dup_a, int64_t *dup_b);

/* One file, whether or not it is a shard of a split model (gguf_read.c). */
gguf_file *gguf_open_one(const char *path);
gguf_file *gguf_open_one_read(const char *path, bool (*progress)(float done, void *user), void *user);

/* If first is the first shard of a split model, open its siblings and merge
 * their tensor tables into it; takes first, returns it or NULL (closed). */
gguf_file *gguf_split_join(gguf_file *first, bool read, bool (*progress)(float done, void *user),
                           void *user);

/* Block geometry of a GGUF tensor type: 0 on success, -1 if unknown. */
int gguf_dtype_geometry(int32_t dtype, int64_t *block_size, uint64_t *block_bytes);

#endif
