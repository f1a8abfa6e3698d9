/*
 * gguf — reading and writing GGUF files (versions 2 and 3).
 *
 * The reader maps the file read-only and validates everything before use, as
 * if the file were hostile: counts, string lengths, nesting, dimensions,
 * element counts, tensor offsets and sizes against the file size, overlaps,
 * unknown types. Errors name the file, the byte offset and the key or tensor.
 *
 * Strings in metadata are not NUL-terminated in the file; the reader hands
 * them out as (pointer, length) pairs pointing into the mapping, and keys and
 * tensor names as NUL-terminated copies.
 */
#ifndef TESSERA_GGUF_H
#define TESSERA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera_gguf.h>

/* The metadata value types are the public API's (tessera_gguf.h: the
 * format's numbers, defined there once); GGUF_TYPE_* are the reader's
 * names for them. */
typedef tessera_gguf_type gguf_type;
#define GGUF_TYPE_UINT8 TESSERA_GGUF_UINT8
#define GGUF_TYPE_INT8 TESSERA_GGUF_INT8
#define GGUF_TYPE_UINT16 TESSERA_GGUF_UINT16
#define GGUF_TYPE_INT16 TESSERA_GGUF_INT16
#define GGUF_TYPE_UINT32 TESSERA_GGUF_UINT32
#define GGUF_TYPE_INT32 TESSERA_GGUF_INT32
#define GGUF_TYPE_FLOAT32 TESSERA_GGUF_FLOAT32
#define GGUF_TYPE_BOOL TESSERA_GGUF_BOOL
#define GGUF_TYPE_STRING TESSERA_GGUF_STRING
#define GGUF_TYPE_ARRAY TESSERA_GGUF_ARRAY
#define GGUF_TYPE_UINT64 TESSERA_GGUF_UINT64
#define GGUF_TYPE_INT64 TESSERA_GGUF_INT64
#define GGUF_TYPE_FLOAT64 TESSERA_GGUF_FLOAT64
#define GGUF_TYPE_COUNT (TESSERA_GGUF_FLOAT64 + 1)

#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_str {
    const char *ptr; /* not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_tensor_info {
    const char *name;   /* NUL-terminated copy */
    int32_t dtype;      /* tsr_dtype / GGUF type number */
    int32_t n_dims;     /* 1..4 */
    int64_t ne[4];      /* unused dims are 1 */
    uint64_t offset;    /* from the start of the data section */
    uint64_t size;      /* bytes */
    const void *data;   /* address in the mapping */
} gguf_tensor_info;

/* ---------------------------------------------------------------- reader */

typedef struct gguf_file gguf_file;

/* Open and validate path. Returns NULL and sets error_get() on failure. */
gguf_file *gguf_open(const char *path);
/* Open path reading it into allocated memory instead of mapping it
 * (--no-mmap): progress (may be NULL) is called as chunks arrive and may
 * return false to cancel. */
gguf_file *gguf_open_read(const char *path, bool (*progress)(float done, void *user), void *user);
/* Validate a file image already in memory (not copied; must outlive f). */
gguf_file *gguf_open_memory(const void *data, size_t size, const char *label);
void gguf_close(gguf_file *f);

/* Split models (llama.cpp's gguf-split: "<prefix>-00001-of-00003.gguf" ...).
 * gguf_open and gguf_open_read given the first shard open the others beside
 * it and list every tensor of the model (each pointing into its own shard);
 * given a later shard they fail saying which file to open. gguf_open_shard
 * opens one file as it is (splitting and merging tools). */
gguf_file *gguf_open_shard(const char *path);
int32_t gguf_split_count(const gguf_file *f);  /* files joined: 1 unless split */
/* Shard i (0: f itself) of a joined model: its path and header; its tensors
 * are listed by f. NULL past the last. */
const gguf_file *gguf_split_shard(const gguf_file *f, int32_t i);
/* "<prefix>-%05d-of-%05d.gguf" for 0-based shard no. */
int gguf_split_path(char *out, size_t out_size, const char *prefix, int32_t no, int32_t count);
/* Parse such a name: 0 with prefix, 0-based no and count; -1 if it isn't one. */
int gguf_split_prefix(const char *path, char *prefix, size_t prefix_size, int32_t *no, int32_t *count);
/* Write f's tensors (with its metadata in the first shard) to
 * "<prefix>-0000K-of-0000N.gguf" files of at most max_tensors tensors
 * and max_bytes bytes of tensor data each (0: no limit; a tensor bigger than
 * max_bytes gets a file of its own). n_files (may be NULL) gets N. */
int gguf_split_write(const gguf_file *f, const char *prefix, int64_t max_tensors, uint64_t max_bytes,
                     bool dry_run, int32_t *n_files);
/* Write the model f (a joined split) as one file without the split keys. */
int gguf_merge_write(const gguf_file *f, const char *path);

const char *gguf_path(const gguf_file *f);
uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_alignment(const gguf_file *f);
uint64_t gguf_file_size(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f);  /* file offset of the data section */
const void *gguf_data(const gguf_file *f);      /* address of the data section */

/* Metadata: index-based access, then typed getters by key. */
int64_t gguf_kv_count(const gguf_file *f);
const char *gguf_kv_key(const gguf_file *f, int64_t i);
gguf_type gguf_kv_type(const gguf_file *f, int64_t i);
int64_t gguf_find_key(const gguf_file *f, const char *key); /* -1 if absent */

/* Typed getters: 0 on success; -1 with a message naming the key when the key
 * is missing or has another type. The _int getters accept any integer type
 * whose value fits. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
int gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
int gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
int gguf_get_int(const gguf_file *f, const char *key, int64_t *out);
int gguf_get_f32(const gguf_file *f, const char *key, float *out);
int gguf_get_bool(const gguf_file *f, const char *key, bool *out);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);

/* Arrays: element type and count; elements of fixed-size types are packed
 * little-endian at *data (may be unaligned: memcpy them). */
int gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem_type, uint64_t *count,
                 const void **data);
/* Element i of an array of strings. */
int gguf_get_arr_str(const gguf_file *f, const char *key, uint64_t i, gguf_str *out);

/* Value access by index, for printing every key (inspect). */
uint64_t gguf_kv_arr_count(const gguf_file *f, int64_t i);      /* 0 if not an array */
gguf_type gguf_kv_arr_type(const gguf_file *f, int64_t i);
/* The raw value of kv i: for scalars a pointer to its bytes in the file, for
 * strings a gguf_str, for arrays see gguf_get_arr. Helpers for inspect. */
int gguf_kv_scalar(const gguf_file *f, int64_t i, void *out, size_t out_size);
int gguf_kv_str(const gguf_file *f, int64_t i, gguf_str *out);
int gguf_kv_arr_str(const gguf_file *f, int64_t i, uint64_t j, gguf_str *out);
int gguf_kv_arr(const gguf_file *f, int64_t i, gguf_type *elem_type, uint64_t *count,
                const void **data);

/* Tensors. */
int64_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor_info *gguf_tensor(const gguf_file *f, int64_t i);
const gguf_tensor_info *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL */

/* ------------------------------------------------------------ values */

/* Name of a metadata type ("uint32", "string", "array", ...), "invalid" for
 * a number outside the enum. */
const char *gguf_type_name(gguf_type t);

/* Any metadata value, nested arrays included, as a view into the mapping: the
 * public tessera_gguf_value (type and elem_type hold gguf_type numbers), so
 * tessera_gguf.h hands the reader's values out as they are. */
typedef tessera_gguf_value gguf_value;

/* The value of kv i. */
int gguf_kv_value(const gguf_file *f, int64_t i, gguf_value *out);
/* Element j of an array value (O(1) for fixed-size elements, O(j) for
 * strings and arrays; prefer gguf_get_arr_str for top-level string arrays). */
int gguf_value_elem(const gguf_value *arr, uint64_t j, gguf_value *out);
/* Walk an array's elements in order in O(1) each: start with *pos = 0 and
 * call it arr->count times; fails past the last element. */
int gguf_value_next(const gguf_value *arr, uint64_t *pos, gguf_value *out);

/* ---------------------------------------------------------------- writer */

/* Builds metadata and a tensor table in memory, then writes the header and
 * streams tensor data in table order, padding to the alignment. Tensor data
 * may be given up front (pointer kept, not copied) or written one tensor at a
 * time with gguf_writer_write_tensor_data() after gguf_writer_begin(). */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);

/* Setting a key that exists replaces its value. */
int gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
int gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
int gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
int gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
int gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
int gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
int gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
int gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *s, size_t len);
/* Array of fixed-size elements (not STRING, not ARRAY): data packed. */
int gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data,
                        uint64_t count);
int gguf_writer_set_arr_str(gguf_writer *w, const char *key, const gguf_str *strs, uint64_t count);
/* Copy key i of f (any type, nested arrays included). */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, int64_t i);
int gguf_writer_remove_key(gguf_writer *w, const char *key);

/* Add a tensor: data may be NULL when it will be streamed later. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, int32_t dtype, int n_dims,
                           const int64_t *ne, const void *data);

/* Write everything (all tensors must have data) to path. */
int gguf_writer_write_file(gguf_writer *w, const char *path);

/* Streaming: begin writes the header to fp; then one call per tensor in the
 * order added (size bytes each, padded to the alignment as written); then
 * finish checks that every tensor was written and flushes fp. */
#include <stdio.h>
int gguf_writer_begin(gguf_writer *w, FILE *fp);
int gguf_writer_write_tensor_data(gguf_writer *w, FILE *fp, int64_t index, const void *data,
                                  uint64_t size);
int gguf_writer_finish(gguf_writer *w, FILE *fp);

/* Never leave a half-written file at path: open "<path>.tmp-XXXXXX" beside
 * it, stream into that, then commit (flush, fsync, rename onto path) or abort
 * (remove it). Both free *tmp_path and close fp. */
FILE *gguf_tmpfile_open(const char *path, char **tmp_path);
int gguf_tmpfile_commit(FILE *fp, char *tmp_path, const char *path);
void gguf_tmpfile_abort(FILE *fp, char *tmp_path);

#endif
