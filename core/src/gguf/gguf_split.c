/*
 * gguf_split — models split into several GGUF files (llama.cpp's gguf-split
 * format): "<prefix>-00001-of-00003.gguf" ... "<prefix>-00003-of-00003.gguf",
 * each a valid GGUF with its own tensor infos and data section. Every shard
 * carries split.no (0-based), split.count and split.tensors.count (tensors
 * across all shards); the first also holds the model's metadata.
 *
 * Opening the first shard opens its siblings by name, validates them and
 * moves their tensor tables into the first shard's gguf_file, so that one
 * gguf_file lists every tensor, each pointing into its own shard's mapping.
 * The other shards stay open (owned by the first) until gguf_close.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_internal.h"
#include "util/error.h"

#define SPLIT_SUFFIX_LEN 20 /* "-00001-of-00003.gguf" */

int gguf_split_path(char *out, size_t out_size, const char *prefix, int32_t no, int32_t count) {
    int n = snprintf(out, out_size, "%s-%05d-of-%05d.gguf", prefix, (int)no + 1, (int)count);
    if (n < 0 || (size_t)n >= out_size) return error_set("%s: split file name too long", prefix);
    return 0;
}

int gguf_split_prefix(const char *path, char *prefix, size_t prefix_size, int32_t *no, int32_t *count) {
    size_t len = strlen(path);
    if (len <= SPLIT_SUFFIX_LEN) return -1;
    const char *s = path + len - SPLIT_SUFFIX_LEN;
    unsigned a, b;
    char tail[8];
    if (sscanf(s, "-%5u-of-%5u%7s", &a, &b, tail) != 3 || strcmp(tail, ".gguf") != 0) return -1;
    if (s[1] < '0' || s[1] > '9' || a < 1 || b < 1 || a > b) return -1;
    if (len - SPLIT_SUFFIX_LEN >= prefix_size) return -1;
    memcpy(prefix, path, len - SPLIT_SUFFIX_LEN);
    prefix[len - SPLIT_SUFFIX_LEN] = '\0';
    *no = (int32_t)a - 1;
    *count = (int32_t)b;
    return 0;
}

/* f's general.architecture, if it has one (later shards need not). */
static bool architecture_of(const gguf_file *f, gguf_str *out) {
    return gguf_find_key(f, "general.architecture") >= 0 && gguf_get_str(f, "general.architecture", out) == 0;
}

/* split.no / split.count of f, checked against what its place asks. */
static int shard_check(const gguf_file *f, int32_t want_no, int32_t want_count, const gguf_str *arch) {
    int64_t no, count;
    if (gguf_get_int(f, "split.count", &count)) return error_wrap("shard %d of %d", want_no + 1, want_count);
    if (count != want_count)
        return error_set("%s: key 'split.count' is %" PRId64 ", the first shard says %d", f->path, count,
                         want_count);
    if (gguf_get_int(f, "split.no", &no)) return error_wrap("shard %d of %d", want_no + 1, want_count);
    if (no != want_no)
        return error_set("%s: key 'split.no' is %" PRId64 ", expected %d (shard %d of %d by its name)",
                         f->path, no, want_no, want_no + 1, want_count);
    gguf_str a;
    if (arch && architecture_of(f, &a) && (a.len != arch->len || memcmp(a.ptr, arch->ptr, a.len) != 0))
        return error_set("%s: key 'general.architecture' is '%.*s', the first shard's is '%.*s'", f->path,
                         (int)(a.len > 64 ? 64 : a.len), a.ptr, (int)(arch->len > 64 ? 64 : arch->len),
                         arch->ptr);
    return 0;
}

/* Move every shard's tensor infos into first's table (names change owner). */
static int tensors_merge(gguf_file *first, int64_t total) {
    gguf_tensor_info *all = calloc((size_t)(total > 0 ? total : 1), sizeof *all);
    int32_t *owner = calloc((size_t)(total > 0 ? total : 1), sizeof *owner);
    if (!all || !owner) {
        free(all);
        free(owner);
        return error_set("%s: out of memory merging %" PRId64 " tensors", first->path, total);
    }
    int64_t n = 0;
    for (int32_t s = 0; s <= first->n_shards; s++) {
        const gguf_file *f = s == 0 ? first : first->shards[s - 1];
        for (int64_t i = 0; i < f->n_tensors; i++, n++) {
            all[n] = f->tensors[i];
            owner[n] = s;
        }
    }
    int64_t a, b;
    gguf_name_ref *sorted = gguf_build_name_index(&all[0].name, sizeof *all, n, &a, &b);
    int rc = 0;
    if (!sorted) rc = error_set("%s: out of memory indexing tensors", first->path);
    else if (a >= 0)
        rc = error_set("%s: tensor '%.120s' is in shard %d and again in shard %d", first->path, all[b].name,
                       owner[a] + 1, owner[b] + 1);
    free(owner);
    if (rc) {
        free(all);
        free(sorted);
        return rc;
    }
    for (int32_t s = 0; s <= first->n_shards; s++) {
        gguf_file *f = s == 0 ? first : first->shards[s - 1];
        free(f->tensors);
        free(f->tensor_sorted);
        f->tensors = NULL;
        f->tensor_sorted = NULL;
        f->n_tensors = 0;
    }
    first->tensors = all;
    first->tensor_sorted = sorted;
    first->n_tensors = n;
    return 0;
}

/* Open shards 2..count beside first and check each. */
static int shards_open(gguf_file *first, const char *prefix, int32_t count, bool read,
                       bool (*progress)(float, void *), void *user) {
    first->shards = calloc((size_t)count, sizeof *first->shards);
    if (!first->shards) return error_set("%s: out of memory", first->path);
    gguf_str arch_v;
    const gguf_str *arch = architecture_of(first, &arch_v) ? &arch_v : NULL;
    char path[4096];
    for (int32_t k = 1; k < count; k++) {
        if (gguf_split_path(path, sizeof path, prefix, k, count)) return -1;
        gguf_file *f = read ? gguf_open_one_read(path, progress, user) : gguf_open_one(path);
        if (!f)
            return error_wrap("%s: shard %d of %d of the split model", first->path, k + 1, count);
        first->shards[first->n_shards++] = f;
        if (shard_check(f, k, count, arch)) return -1;
    }
    return 0;
}

static int split_join(gguf_file *first, bool read, bool (*progress)(float, void *), void *user) {
    int64_t count, no, total;
    if (gguf_get_int(first, "split.count", &count)) return -1;
    if (count == 0) return 0; /* what llama-gguf-split --merge leaves in a merged file */
    if (count < 0 || count > 65535)
        return error_set("%s: key 'split.count' is %" PRId64 ", expected 0..65535", first->path, count);
    if (gguf_get_int(first, "split.no", &no)) return -1;
    if (no != 0) {
        char prefix[4096];
        int32_t n_no, n_count;
        const char *hint = gguf_split_prefix(first->path, prefix, sizeof prefix, &n_no, &n_count) == 0
                               ? prefix : "<prefix>";
        return error_set("%s: key 'split.no' is %" PRId64 ": this is shard %" PRId64 " of %" PRId64
                         " of a split model; open the first shard, %s-00001-of-%05d.gguf",
                         first->path, no, no + 1, count, hint, (int)count);
    }
    if (count == 1) return 0;
    if (gguf_get_int(first, "split.tensors.count", &total)) return -1;
    char prefix[4096];
    int32_t name_no, name_count;
    if (gguf_split_prefix(first->path, prefix, sizeof prefix, &name_no, &name_count) ||
        name_no != 0 || name_count != count)
        return error_set("%s: the first shard of a split model of %" PRId64 " files must be named "
                         "<prefix>-00001-of-%05d.gguf to find the others", first->path, count, (int)count);
    if (shards_open(first, prefix, (int32_t)count, read, progress, user)) return -1;
    int64_t sum = first->n_tensors;
    for (int32_t s = 0; s < first->n_shards; s++) sum += first->shards[s]->n_tensors;
    if (sum != total)
        return error_set("%s: key 'split.tensors.count' is %" PRId64 " but the %" PRId64
                         " shards hold %" PRId64 " tensors", first->path, total, count, sum);
    if (tensors_merge(first, sum)) return -1;
    first->split_count = (int32_t)count;
    return 0;
}

gguf_file *gguf_split_join(gguf_file *first, bool read, bool (*progress)(float done, void *user),
                           void *user) {
    if (!first || gguf_find_key(first, "split.count") < 0) return first;
    if (split_join(first, read, progress, user) == 0) return first;
    gguf_close(first);
    return NULL;
}

gguf_file *gguf_open(const char *path) { return gguf_split_join(gguf_open_one(path), false, NULL, NULL); }

gguf_file *gguf_open_read(const char *path, bool (*progress)(float done, void *user), void *user) {
    return gguf_split_join(gguf_open_one_read(path, progress, user), true, progress, user);
}

gguf_file *gguf_open_shard(const char *path) { return gguf_open_one(path); }

int32_t gguf_split_count(const gguf_file *f) { return f->split_count; }

const gguf_file *gguf_split_shard(const gguf_file *f, int32_t i) {
    if (i == 0) return f;
    return i > 0 && i <= f->n_shards ? f->shards[i - 1] : NULL;
}
