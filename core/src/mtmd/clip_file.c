/* clip_file — shared mmproj key and tensor checks (clip_file.h). */
#include "mtmd/clip_file.h"

#include <math.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "util/error.h"

int clip_file_key_int(const gguf_file *f, const char *path, const char *key, bool optional, int32_t lo, int32_t hi,
                      int32_t *out) {
    if (optional && gguf_find_key(f, key) < 0) return 0;
    int64_t v;
    if (gguf_get_int(f, key, &v) != 0) return error_wrap("%s", path);
    if (v < lo || v > hi)
        return error_set("%s: key %s = %lld is out of range [%d, %d]", path, key, (long long)v, lo, hi);
    *out = (int32_t)v;
    return 0;
}

int clip_file_key_f32x3(const gguf_file *f, const char *path, const char *key, float *out) {
    gguf_type t;
    uint64_t n;
    const void *data;
    if (gguf_get_arr(f, key, &t, &n, &data) != 0) return error_wrap("%s", path);
    if (t != GGUF_TYPE_FLOAT32 || n != 3)
        return error_set("%s: key %s must be 3 float32 values (has %llu of %s)", path, key, (unsigned long long)n,
                         gguf_type_name(t));
    memcpy(out, data, 3 * sizeof(float));
    for (int i = 0; i < 3; i++)
        if (!isfinite(out[i])) return error_set("%s: key %s holds a non-finite value", path, key);
    return 0;
}

int clip_file_tensor(const gguf_file *f, const char *path, const char *name, bool optional, bool f16_ok, int64_t ne0,
                     int64_t ne1, int64_t ne2, int64_t ne3, const gguf_tensor_info **out) {
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    *out = t;
    if (!t) return optional ? 0 : error_set("%s: tensor %s is missing", path, name);
    const int64_t want[4] = {ne0, ne1, ne2, ne3};
    if (memcmp(t->ne, want, sizeof want) != 0)
        return error_set("%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", path,
                         name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                         (long long)ne0, (long long)ne1, (long long)ne2, (long long)ne3);
    if (t->dtype != TSR_DTYPE_F32 && !(f16_ok && t->dtype == TSR_DTYPE_F16))
        return error_set("%s: tensor %s has type %s, expected F32%s", path, name, tsr_dtype_name(t->dtype),
                         f16_ok ? " or F16" : "");
    return 0;
}

int clip_file_check_width(const char *path, const char *name, int32_t n_out, int32_t n_embd_text) {
    if (n_embd_text > 0 && n_out != n_embd_text)
        return error_set("%s: the projector writes %d-wide embeddings (%s) but the text model's are %d wide: not "
                         "this model's mmproj",
                         path, n_out, name, n_embd_text);
    return 0;
}
