/* tessera_tools.h's gguf-split and merge, and tessera_gguf.h's shard
 * getters, over gguf/gguf_split*.c. */
#include <tessera/tessera_gguf.h>
#include <tessera/tessera_tools.h>

#include "gguf/gguf.h"
#include "util/error.h"

int32_t tessera_gguf_split_count(const tessera_gguf *f) { return gguf_split_count((const gguf_file *)f); }

const char *tessera_gguf_split_file(const tessera_gguf *f, int32_t i) {
    const gguf_file *s = gguf_split_shard((const gguf_file *)f, i);
    return s ? gguf_path(s) : NULL;
}

int tessera_gguf_split(const char *in_path, const char *out_prefix, const tessera_gguf_split_params *params,
                       int32_t *n_files) {
    if (!in_path || !out_prefix || !params) return error_set("gguf-split: missing input, output or params");
    int64_t max_tensors = params->max_tensors;
    if (max_tensors == 0 && params->max_bytes == 0) max_tensors = 128;
    gguf_file *f = gguf_open(in_path);
    if (!f) return -1;
    int rc = gguf_split_write(f, out_prefix, max_tensors, params->max_bytes, params->dry_run, n_files);
    gguf_close(f);
    return rc;
}

int tessera_gguf_merge(const char *first_path, const char *out_path) {
    if (!first_path || !out_path) return error_set("gguf-split --merge: missing input or output");
    gguf_file *f = gguf_open(first_path);
    if (!f) return -1;
    int rc = gguf_merge_write(f, out_path);
    gguf_close(f);
    return rc;
}
