/*
 * gguf_read — open a GGUF file (v2/v3) and validate all of it before use.
 *
 * Layout (all little-endian):
 *   "GGUF"  u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x   { string key, u32 type, value }
 *   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 dtype, u64 offset }
 *   padding to general.alignment, then the data section.
 * A string is u64 length + bytes; an array is u32 elem_type, u64 count, then
 * the elements (which may be strings or arrays again).
 *
 * The file is treated as hostile: every length is checked against the bytes
 * that remain before anything is allocated or read, so a corrupt file costs
 * at most O(file size) time and memory and ends in one error line naming the
 * file, the byte offset and the key or tensor.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_internal.h"
#include "tensor/dtype.h"
#include "util/error.h"

typedef struct parser {
    const char *label;
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    char what[160]; /* the item being parsed: "header", "key 'x'", "tensor 'y'" */
} parser;

static int parse_fail(parser *p, uint64_t at, const char *fmt, ...) TSR_PRINTF(3, 4);

static int parse_fail(parser *p, uint64_t at, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set("%s: byte %" PRIu64 ": %s (%s)", p->label, at, msg, p->what);
}

static uint64_t parser_left(const parser *p) { return p->size - p->pos; }

static int parser_need(parser *p, uint64_t n, const char *thing) {
    if (n > parser_left(p))
        return parse_fail(p, p->pos, "file ends inside %s: needs %" PRIu64 " bytes, %" PRIu64
                          " left", thing, n, parser_left(p));
    return 0;
}

static int read_u32(parser *p, uint32_t *out, const char *thing) {
    if (parser_need(p, 4, thing)) return -1;
    *out = gguf_load_u32(p->base + p->pos);
    p->pos += 4;
    return 0;
}

static int read_u64(parser *p, uint64_t *out, const char *thing) {
    if (parser_need(p, 8, thing)) return -1;
    *out = gguf_load_u64(p->base + p->pos);
    p->pos += 8;
    return 0;
}

static int read_str(parser *p, gguf_str *out, const char *thing) {
    uint64_t at = p->pos;
    uint64_t len = 0;
    if (read_u64(p, &len, thing)) return -1;
    if (len > parser_left(p))
        return parse_fail(p, at, "%s length %" PRIu64 " runs past the end of the file (%" PRIu64
                          " bytes left)", thing, len, parser_left(p));
    out->ptr = (const char *)(p->base + p->pos);
    out->len = len;
    p->pos += len;
    return 0;
}

/* A key or tensor name as a NUL-terminated copy; empty names and names with
 * NUL bytes inside are rejected (they could not be looked up). */
static char *read_name(parser *p, const char *thing) {
    uint64_t at = p->pos;
    gguf_str s = {0};
    if (read_str(p, &s, thing)) return NULL;
    if (s.len == 0) {
        parse_fail(p, at, "%s is empty", thing);
        return NULL;
    }
    if (memchr(s.ptr, '\0', s.len)) {
        parse_fail(p, at, "%s contains a NUL byte", thing);
        return NULL;
    }
    char *copy = malloc(s.len + 1);
    if (!copy) {
        parse_fail(p, at, "out of memory copying a %" PRIu64 "-byte %s", s.len, thing);
        return NULL;
    }
    memcpy(copy, s.ptr, s.len);
    copy[s.len] = '\0';
    return copy;
}

static int read_type(parser *p, gguf_type *out, const char *thing) {
    uint64_t at = p->pos;
    uint32_t t = 0;
    if (read_u32(p, &t, thing)) return -1;
    if (t >= GGUF_TYPE_COUNT)
        return parse_fail(p, at, "invalid %s %" PRIu32 " (valid: 0..%d)", thing, t,
                          GGUF_TYPE_COUNT - 1);
    *out = (gguf_type)t;
    return 0;
}

/* Fewest bytes one element of type t can take in the file. */
static uint64_t min_encoded_size(gguf_type t) {
    if (t == GGUF_TYPE_STRING) return 8;
    if (t == GGUF_TYPE_ARRAY) return 12;
    return gguf_type_fixed_size(t);
}

static int parse_value(parser *p, gguf_type type, int depth, gguf_kv *kv);

/* Array body after the u32 elem_type / u64 count; when kv is given (a
 * top-level array) records the element type, count and string offsets. */
static int parse_array(parser *p, int depth, gguf_kv *kv) {
    if (depth >= GGUF_MAX_NESTING)
        return parse_fail(p, p->pos, "arrays nested deeper than %d levels", GGUF_MAX_NESTING);
    gguf_type elem = GGUF_TYPE_UINT8;
    uint64_t count = 0;
    if (read_type(p, &elem, "array element type")) return -1;
    uint64_t count_at = p->pos;
    if (read_u64(p, &count, "array length")) return -1;
    uint64_t min = min_encoded_size(elem);
    if (count > parser_left(p) / min)
        return parse_fail(p, count_at, "array of %" PRIu64 " %s elements cannot fit in the %"
                          PRIu64 " bytes left (each takes at least %" PRIu64 ")", count,
                          gguf_type_name(elem), parser_left(p), min);
    uint64_t first = p->pos;
    if (kv) {
        kv->elem_type = elem;
        kv->count = count;
        kv->value = p->base + first;
        if (elem == GGUF_TYPE_STRING && count > 0) {
            /* count <= bytes left / 8, so this is bounded by the file size */
            kv->str_offsets = malloc(count * sizeof *kv->str_offsets);
            if (!kv->str_offsets)
                return parse_fail(p, first, "out of memory indexing %" PRIu64 " strings", count);
        }
    }
    uint64_t fixed = gguf_type_fixed_size(elem);
    if (fixed && elem != GGUF_TYPE_BOOL) {
        p->pos += count * fixed; /* checked above */
        return 0;
    }
    for (uint64_t j = 0; j < count; j++) {
        if (kv && kv->str_offsets) kv->str_offsets[j] = p->pos - first;
        if (parse_value(p, elem, depth + 1, NULL)) return -1;
    }
    return 0;
}

static int parse_value(parser *p, gguf_type type, int depth, gguf_kv *kv) {
    uint64_t at = p->pos;
    if (type == GGUF_TYPE_STRING) {
        gguf_str s = {0};
        return read_str(p, &s, "string");
    }
    if (type == GGUF_TYPE_ARRAY) return parse_array(p, depth, kv);
    uint64_t n = gguf_type_fixed_size(type);
    if (parser_need(p, n, gguf_type_name(type))) return -1;
    if (type == GGUF_TYPE_BOOL && p->base[p->pos] > 1)
        return parse_fail(p, at, "bool value %u is neither 0 nor 1", p->base[p->pos]);
    p->pos += n;
    return 0;
}

static int parse_kv(parser *p, gguf_kv *kv, int64_t i) {
    kv->offset = p->pos;
    snprintf(p->what, sizeof p->what, "key #%" PRId64, i);
    kv->key = read_name(p, "key");
    if (!kv->key) return -1;
    snprintf(p->what, sizeof p->what, "key '%.120s'", kv->key);
    if (read_type(p, &kv->type, "value type")) return -1;
    uint64_t start = p->pos;
    kv->value = p->base + start;
    if (parse_value(p, kv->type, 0, kv)) return -1;
    kv->value_size = p->pos - (uint64_t)(kv->value - p->base);
    return 0;
}

static int name_ref_cmp(const void *a, const void *b) {
    const gguf_name_ref *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return (x->index > y->index) - (x->index < y->index);
}

int64_t gguf_name_lookup(const gguf_name_ref *sorted, int64_t n, const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid].name, name);
        if (c == 0) return sorted[mid].index;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* (gguf_internal.h) */
gguf_name_ref *gguf_build_name_index(const char *const *names, size_t stride, int64_t n,
                                       int64_t *dup_a, int64_t *dup_b) {
    *dup_a = *dup_b = -1;
    gguf_name_ref *refs = malloc((size_t)(n > 0 ? n : 1) * sizeof *refs);
    if (!refs) return NULL;
    for (int64_t i = 0; i < n; i++) {
        refs[i].name = *(const char *const *)((const char *)names + (size_t)i * stride);
        refs[i].index = i;
    }
    qsort(refs, (size_t)n, sizeof *refs, name_ref_cmp);
    for (int64_t i = 1; i < n; i++) {
        if (strcmp(refs[i - 1].name, refs[i].name) == 0) {
            *dup_a = refs[i - 1].index;
            *dup_b = refs[i].index;
            break;
        }
    }
    return refs;
}

static int parse_kvs(parser *p, gguf_file *f) {
    for (int64_t i = 0; i < f->n_kv; i++) {
        if (parse_kv(p, &f->kv[i], i)) return -1;
    }
    int64_t a = -1, b = -1;
    f->kv_sorted = gguf_build_name_index((const char *const *)&f->kv[0].key, sizeof(gguf_kv), f->n_kv,
                                    &a, &b);
    if (!f->kv_sorted) return error_set("%s: out of memory indexing keys", p->label);
    if (a >= 0) {
        snprintf(p->what, sizeof p->what, "key '%.120s'", f->kv[b].key);
        return parse_fail(p, f->kv[b].offset, "duplicate key (first defined at byte %" PRIu64 ")",
                          f->kv[a].offset);
    }
    return 0;
}

static int read_alignment(parser *p, gguf_file *f) {
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_name_lookup(f->kv_sorted, f->n_kv, "general.alignment");
    if (i < 0) return 0;
    const gguf_kv *kv = &f->kv[i];
    snprintf(p->what, sizeof p->what, "key 'general.alignment'");
    if (kv->type != GGUF_TYPE_UINT32)
        return parse_fail(p, kv->offset, "has type %s, expected uint32", gguf_type_name(kv->type));
    uint32_t a = gguf_load_u32(kv->value);
    if (a == 0 || (a & (a - 1)) != 0)
        return parse_fail(p, kv->offset, "alignment %" PRIu32 " is not a non-zero power of two", a);
    f->alignment = a;
    return 0;
}

static int parse_tensor_info(parser *p, gguf_file *f, gguf_tensor_info *t, int64_t i,
                             uint64_t *info_at) {
    *info_at = p->pos;
    snprintf(p->what, sizeof p->what, "tensor #%" PRId64, i);
    char *name = read_name(p, "tensor name");
    if (!name) return -1;
    t->name = name;
    snprintf(p->what, sizeof p->what, "tensor '%.120s'", name);

    uint64_t at = p->pos;
    uint32_t n_dims = 0;
    if (read_u32(p, &n_dims, "tensor dimension count")) return -1;
    if (n_dims < 1 || n_dims > 4)
        return parse_fail(p, at, "n_dims %" PRIu32 " is outside 1..4", n_dims);
    t->n_dims = (int32_t)n_dims;
    int64_t nelem = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne = 0;
        at = p->pos;
        if (read_u64(p, &ne, "tensor dimension")) return -1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return parse_fail(p, at, "dimension %" PRIu32 " is %" PRIu64
                              " (must be 1..INT64_MAX)", d, ne);
        t->ne[d] = (int64_t)ne;
        if (__builtin_mul_overflow(nelem, t->ne[d], &nelem))
            return parse_fail(p, at, "element count overflows 64 bits at dimension %" PRIu32, d);
    }

    at = p->pos;
    uint32_t dtype = 0;
    if (read_u32(p, &dtype, "tensor type")) return -1;
    int64_t block_size = 1;
    uint64_t block_bytes = 0;
    if (dtype > INT32_MAX || gguf_dtype_geometry((int32_t)dtype, &block_size, &block_bytes))
        return parse_fail(p, at, "unknown tensor type %" PRIu32, dtype);
    t->dtype = (int32_t)dtype;
    if (t->ne[0] % block_size != 0)
        return parse_fail(p, at, "ne[0] = %" PRId64 " is not a multiple of the block size %" PRId64
                          " of type %s", t->ne[0], block_size, dtype_name((int32_t)dtype));
    uint64_t size = (uint64_t)(nelem / block_size);
    if (__builtin_mul_overflow(size, block_bytes, &size))
        return parse_fail(p, at, "byte size overflows 64 bits");
    t->size = size;

    at = p->pos;
    if (read_u64(p, &t->offset, "tensor offset")) return -1;
    if (t->offset % f->alignment != 0)
        return parse_fail(p, at, "offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                          t->offset, f->alignment);
    return 0;
}

/* qsort has no context argument; sort pointers to the tensors instead. */
static int tensor_ptr_offset_cmp(const void *a, const void *b) {
    const gguf_tensor_info *x = *(const gguf_tensor_info *const *)a;
    const gguf_tensor_info *y = *(const gguf_tensor_info *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Every tensor inside the file, and no two sharing a byte. */
static int check_tensor_data(parser *p, gguf_file *f, const uint64_t *info_at) {
    uint64_t avail = f->size - f->data_offset;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        if (t->offset > avail || t->size > avail - t->offset) {
            snprintf(p->what, sizeof p->what, "tensor '%.120s'", t->name);
            return parse_fail(p, info_at[i], "data [%" PRIu64 ", +%" PRIu64 ") runs past the end "
                              "of the file (data section of %" PRIu64 " bytes at byte %" PRIu64 ")",
                              t->offset, t->size, avail, f->data_offset);
        }
        f->tensors[i].data = f->base + f->data_offset + t->offset;
    }
    if (f->n_tensors < 2) return 0;
    const gguf_tensor_info **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order) return error_set("%s: out of memory checking tensor overlaps", p->label);
    for (int64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, tensor_ptr_offset_cmp);
    int rc = 0;
    for (int64_t k = 1; k < f->n_tensors; k++) {
        const gguf_tensor_info *prev = order[k - 1], *cur = order[k];
        if (cur->offset < prev->offset + prev->size) {
            int64_t i = cur - f->tensors;
            snprintf(p->what, sizeof p->what, "tensor '%.120s'", cur->name);
            rc = parse_fail(p, info_at[i], "data at offset %" PRIu64 " overlaps tensor '%.120s' "
                            "[%" PRIu64 ", +%" PRIu64 ")", cur->offset, prev->name, prev->offset,
                            prev->size);
            break;
        }
    }
    free(order);
    return rc;
}

static int parse_tensors(parser *p, gguf_file *f) {
    uint64_t *info_at = malloc((size_t)(f->n_tensors > 0 ? f->n_tensors : 1) * sizeof *info_at);
    if (!info_at) return error_set("%s: out of memory reading tensor infos", p->label);
    int rc = -1;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        if (parse_tensor_info(p, f, &f->tensors[i], i, &info_at[i])) goto done;
    }
    int64_t a = -1, b = -1;
    f->tensor_sorted = gguf_build_name_index(&f->tensors[0].name, sizeof(gguf_tensor_info),
                                        f->n_tensors, &a, &b);
    if (!f->tensor_sorted) {
        error_set("%s: out of memory indexing tensors", p->label);
        goto done;
    }
    if (a >= 0) {
        snprintf(p->what, sizeof p->what, "tensor '%.120s'", f->tensors[b].name);
        parse_fail(p, info_at[b], "duplicate tensor name (first at byte %" PRIu64 ")", info_at[a]);
        goto done;
    }
    /* The data section starts at the next multiple of the alignment. */
    uint64_t pad = (f->alignment - p->pos % f->alignment) % f->alignment;
    f->data_offset = p->pos + pad;
    snprintf(p->what, sizeof p->what, "data section");
    if (f->n_tensors > 0 && f->data_offset > f->size) {
        parse_fail(p, p->pos, "data section would start at byte %" PRIu64 ", past the end of the "
                   "file (%" PRIu64 " bytes)", f->data_offset, f->size);
        goto done;
    }
    if (f->data_offset > f->size) f->data_offset = f->size; /* no tensors: nothing to point at */
    rc = check_tensor_data(p, f, info_at);
done:
    free(info_at);
    return rc;
}

static int parse_header(parser *p, gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(p->what, sizeof p->what, "header");
    if (p->size < 4 || memcmp(p->base, GGUF_MAGIC, 4) != 0)
        return error_set("%s: not a GGUF file (no 'GGUF' magic at byte 0)", p->label);
    p->pos = 4;
    if (read_u32(p, &f->version, "version")) return -1;
    if (f->version == 1)
        return parse_fail(p, 4, "GGUF version 1 is not supported (only versions 2 and 3)");
    if (f->version != 2 && f->version != 3)
        return parse_fail(p, 4, "unsupported GGUF version %" PRIu32 " (only versions 2 and 3)%s",
                          f->version,
                          (f->version & 0xffff) == 0 ? "; a big-endian file?" : "");
    uint64_t at = p->pos;
    if (read_u64(p, n_tensors, "tensor count")) return -1;
    /* smallest tensor info: 8 name length + 1 + 4 n_dims + 8 + 4 type + 8 offset */
    if (*n_tensors > p->size / 33)
        return parse_fail(p, at, "tensor count %" PRIu64 " cannot fit in a %" PRIu64 "-byte file",
                          *n_tensors, p->size);
    at = p->pos;
    if (read_u64(p, n_kv, "key/value count")) return -1;
    /* smallest kv: 8 key length + 1 + 4 type + 1 value */
    if (*n_kv > p->size / 14)
        return parse_fail(p, at, "key/value count %" PRIu64 " cannot fit in a %" PRIu64
                          "-byte file", *n_kv, p->size);
    return 0;
}

static gguf_file *gguf_parse(const uint8_t *base, uint64_t size, const char *label) {
    parser p = {.label = label, .base = base, .size = size, .pos = 0};
    gguf_file *f = calloc(1, sizeof *f);
    if (f) f->split_count = 1;
    if (!f) {
        error_set("%s: out of memory", label);
        return NULL;
    }
    f->base = base;
    f->size = size;
    f->path = strdup(label);
    if (!f->path) {
        error_set("%s: out of memory", label);
        goto fail;
    }
    p.label = f->path;
    uint64_t n_tensors = 0, n_kv = 0;
    if (parse_header(&p, f, &n_tensors, &n_kv)) goto fail;
    /* counts are bounded by the file size above, so these allocations are too */
    f->kv = calloc((size_t)(n_kv > 0 ? n_kv : 1), sizeof *f->kv);
    f->tensors = calloc((size_t)(n_tensors > 0 ? n_tensors : 1), sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        error_set("%s: out of memory for %" PRIu64 " keys and %" PRIu64 " tensors", label, n_kv,
                  n_tensors);
        goto fail;
    }
    f->n_kv = (int64_t)n_kv;
    f->n_tensors = (int64_t)n_tensors;
    if (parse_kvs(&p, f)) goto fail;
    if (read_alignment(&p, f)) goto fail;
    if (parse_tensors(&p, f)) goto fail;
    return f;
fail:
    gguf_close(f);
    return NULL;
}

gguf_file *gguf_open_memory(const void *data, size_t size, const char *label) {
    if (!label) label = "<memory>";
    if (!data && size > 0) {
        error_set("%s: no data", label);
        return NULL;
    }
    if (size == 0) {
        error_set("%s: not a GGUF file (empty)", label);
        return NULL;
    }
    return gguf_parse(data, size, label);
}

/* Open path as a regular, non-empty file; its size in *size. -1 on error. */
static int open_regular(const char *path, uint64_t *size) {
    if (!path) return error_set("gguf_open: no path given");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return error_set("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = error_set("%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode)) rc = error_set("%s: not a regular file", path);
    else if (st.st_size == 0) rc = error_set("%s: not a GGUF file (empty)", path);
    if (rc) {
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

gguf_file *gguf_open_one(const char *path) {
    uint64_t size;
    int fd = open_regular(path, &size);
    if (fd < 0) return NULL;
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        error_set("%s: cannot map %llu bytes: %s", path, (unsigned long long)size, strerror(errno));
        return NULL;
    }
    gguf_file *f = gguf_parse(map, size, path);
    if (!f) {
        munmap(map, (size_t)size);
        return NULL;
    }
    f->mapped = true;
    return f;
}

gguf_file *gguf_open_one_read(const char *path, bool (*progress)(float done, void *user), void *user) {
    enum { CHUNK = 8 << 20 };
    uint64_t size;
    int fd = open_regular(path, &size);
    if (fd < 0) return NULL;
    /* page-aligned, so the image can be locked and tensors keep the file's
     * alignment; from 2 MiB on, aligned to 2 MiB and marked for transparent
     * huge pages (where the kernel has them in "madvise" mode, Debian's
     * default): decoding reads every weight once per token, and with 4 KiB
     * pages that is a TLB miss per 4 KiB of weights */
    const uint64_t align = size >= (2u << 20) && !getenv("TESSERA_NO_HUGEPAGE") ? 2u << 20 : 4096;
    const size_t len = (size_t)((size + align - 1) & ~(align - 1));
    uint8_t *buf = aligned_alloc((size_t)align, len);
#ifdef MADV_HUGEPAGE
    if (buf && align > 4096) madvise(buf, len, MADV_HUGEPAGE); /* a hint: refusal changes nothing */
#endif
    if (!buf) {
        close(fd);
        error_set("%s: cannot allocate %llu bytes to read it (--no-mmap)", path, (unsigned long long)size);
        return NULL;
    }
    for (uint64_t got = 0; got < size;) {
        size_t want = size - got < CHUNK ? (size_t)(size - got) : CHUNK;
        ssize_t n = read(fd, buf + got, want);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error_set("%s: reading at byte %llu: %s", path, (unsigned long long)got,
                      n < 0 ? strerror(errno) : "unexpected end of file");
            goto fail;
        }
        got += (uint64_t)n;
        if (progress && !progress((float)((double)got / (double)size), user)) {
            error_set("model load cancelled");
            goto fail;
        }
    }
    close(fd);
    gguf_file *f = gguf_parse(buf, size, path);
    if (!f) {
        free(buf);
        return NULL;
    }
    f->owned = true;
    return f;
fail:
    close(fd);
    free(buf);
    return NULL;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kv) {
        for (int64_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            free(f->kv[i].str_offsets);
        }
    }
    if (f->tensors) {
        for (int64_t i = 0; i < f->n_tensors; i++) free((char *)f->tensors[i].name);
    }
    free(f->kv);
    free(f->kv_sorted);
    free(f->tensors);
    free(f->tensor_sorted);
    if (f->mapped) munmap((void *)f->base, (size_t)f->size);
    if (f->owned) free((void *)f->base);
    free(f->path);
    for (int32_t i = 0; i < f->n_shards; i++) gguf_close(f->shards[i]);
    free(f->shards);
    free(f);
}
