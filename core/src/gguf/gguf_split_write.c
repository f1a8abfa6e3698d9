/*
 * gguf_split_write — writing split models (gguf_split.c reads them) and
 * merging one back into a single file, with the gguf writer. As
 * llama-gguf-split does: the first shard holds the model's metadata, every
 * shard split.no (u16, 0-based), split.count (u16) and split.tensors.count
 * (i32), and tensors keep their order across the shards.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

static bool is_split_key(const char *key) { return strncmp(key, "split.", 6) == 0; }

/* First tensor of each shard in starts[0..*n) under the limits. */
static int32_t plan_shards(const gguf_file *f, int64_t max_tensors, uint64_t max_bytes, int64_t *starts) {
    int32_t n = 0;
    int64_t in_shard = 0;
    uint64_t bytes = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        uint64_t sz = f->tensors[i].size;
        bool full = in_shard > 0 && ((max_tensors > 0 && in_shard >= max_tensors) ||
                                     (max_bytes > 0 && bytes + sz > max_bytes));
        if (i == 0 || full) {
            starts[n++] = i;
            in_shard = 0;
            bytes = 0;
        }
        in_shard++;
        bytes += sz;
    }
    if (n == 0) starts[n++] = 0; /* no tensors: one file of metadata */
    starts[n] = f->n_tensors;
    return n;
}

static int write_shard(const gguf_file *f, const char *path, int32_t no, int32_t count, int64_t from,
                       int64_t to) {
    gguf_writer *w = gguf_writer_new();
    if (!w) return error_set("%s: out of memory", path);
    int rc = 0;
    for (int64_t i = 0; i < f->n_kv && rc == 0; i++) {
        const char *key = f->kv[i].key;
        if (is_split_key(key)) continue;
        if (no == 0 || strcmp(key, "general.alignment") == 0) rc = gguf_writer_copy_kv(w, f, i);
    }
    if (rc == 0 && count > 1)
        /* llama-gguf-split's order: its files and ours are the same bytes */
        rc = gguf_writer_set_u16(w, "split.no", (uint16_t)no) ||
             gguf_writer_set_i32(w, "split.tensors.count", (int32_t)f->n_tensors) ||
             gguf_writer_set_u16(w, "split.count", (uint16_t)count);
    for (int64_t i = from; i < to && rc == 0; i++) {
        const gguf_tensor_info *t = &f->tensors[i];
        rc = gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data);
    }
    if (rc == 0) rc = gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    return rc ? error_wrap("%s", path) : 0;
}

int gguf_split_write(const gguf_file *f, const char *prefix, int64_t max_tensors, uint64_t max_bytes,
                     bool dry_run, int32_t *n_files) {
    if (max_tensors < 0) return error_set("--split-max-tensors %" PRId64 " is negative", max_tensors);
    if (f->n_tensors > INT32_MAX) return error_set("%s: too many tensors to split", f->path);
    int64_t *starts = malloc((size_t)(f->n_tensors + 2) * sizeof *starts);
    if (!starts) return error_set("%s: out of memory", f->path);
    int32_t n = plan_shards(f, max_tensors, max_bytes, starts);
    int rc = 0;
    if (n > 99999) rc = error_set("%s: the split would need %d files, more than 99999", f->path, n);
    char path[4096];
    for (int32_t s = 0; s < n && rc == 0; s++) {
        rc = gguf_split_path(path, sizeof path, prefix, s, n);
        if (rc == 0 && !dry_run) rc = write_shard(f, path, s, n, starts[s], starts[s + 1]);
    }
    free(starts);
    if (rc == 0 && n_files) *n_files = n;
    return rc;
}

/* The whole model as "shard 0 of 1": all metadata but the split keys. */
int gguf_merge_write(const gguf_file *f, const char *path) { return write_shard(f, path, 0, 1, 0, f->n_tensors); }
