/*
 * export-lora: a model with LoRA adapters merged into its weights, as
 * llama.cpp's llama-export-lora writes it (observed by running it,
 * November 2026):
 *   - every adapted weight becomes W + sum over adapters of
 *     scale * alpha / r * B A, computed in f32 (per adapter, in the order
 *     given); it keeps an F32 or F16 type, and a quantized (or BF16) weight
 *     is dequantized and written as F16;
 *   - every other tensor is copied as it is;
 *   - tensors are written in the order of their names (strcmp), metadata
 *     as the base's with general.file_type 1 (MOSTLY_F16), whatever the
 *     weights' types.
 * Adapters are checked as for loading (lora.c), against the base file's
 * tensors.
 */
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_tools.h>

#include "gguf/gguf.h"
#include "model/lora.h"
#include "tensor/dtype.h"
#include "util/error.h"

/* One adapter pair of a base tensor. */
typedef struct export_pair {
    const gguf_tensor_info *a, *b;
    float scale; /* user scale * alpha / r */
} export_pair;

typedef struct export_tensor {
    const gguf_tensor_info *ti; /* of the base */
    export_pair *pairs;         /* one per adapter, a NULL when it does not adapt this tensor */
    int32_t out_dtype;
    bool merged;
} export_tensor;

static int by_name(const void *x, const void *y) {
    return strcmp(((const export_tensor *)x)->ti->name, ((const export_tensor *)y)->ti->name);
}

/* Index of the base tensor named name[0..len), -1 if none. */
static int64_t find_base(const export_tensor *ts, int64_t n, const char *name, size_t len) {
    for (int64_t i = 0; i < n; i++)
        if (strlen(ts[i].ti->name) == len && !memcmp(ts[i].ti->name, name, len)) return i;
    return -1;
}

/* File adapter k's tensors under the base tensors they adapt, checked. */
static int take_adapter(const gguf_file *base, const gguf_file *f, int32_t k, float user_scale, export_tensor *ts,
                        int64_t n) {
    gguf_str arch;
    if (gguf_get_str(base, "general.architecture", &arch) != 0) return -1;
    char arch_name[64];
    snprintf(arch_name, sizeof arch_name, "%.*s", (int)(arch.len < 63 ? arch.len : 63), arch.ptr);
    float alpha;
    if (lora_file_check(f, arch_name, &alpha) != 0) return -1;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *ti = gguf_tensor(f, i);
        size_t len;
        bool is_a;
        if (lora_tensor_base(f, ti, &len, &is_a) != 0) return -1;
        int64_t j = find_base(ts, n, ti->name, len);
        if (j < 0)
            return error_set("%s: tensor '%s' adapts '%.*s', which %s does not have", gguf_path(f), ti->name,
                             (int)len, ti->name, gguf_path(base));
        if (ts[j].ti->n_dims != 2)
            return error_set("%s: tensor '%s' adapts '%s', which is not a matrix", gguf_path(f), ti->name,
                             ts[j].ti->name);
        export_pair *p = &ts[j].pairs[k];
        const gguf_tensor_info **half = is_a ? &p->a : &p->b;
        if (*half) return error_set("%s: tensor '%s' appears twice", gguf_path(f), ti->name);
        *half = ti;
    }
    for (int64_t j = 0; j < n; j++) {
        export_pair *p = &ts[j].pairs[k];
        if (!p->a && !p->b) continue;
        if (lora_pair_check(f, ts[j].ti->name, ts[j].ti->ne, p->a ? p->a->name : NULL, p->a ? p->a->ne : NULL,
                            p->b ? p->b->name : NULL, p->b ? p->b->ne : NULL) != 0)
            return -1;
        const float rank = (float)p->a->ne[1];
        p->scale = alpha != 0.0f ? user_scale * alpha / rank : user_scale;
        ts[j].merged = true;
    }
    return 0;
}

/* A 2-D tensor as f32 rows (malloc'd). */
static float *rows_f32(const gguf_tensor_info *ti) {
    const int64_t ne0 = ti->ne[0], rows = ti->ne[1];
    float *out = malloc((size_t)(ne0 * rows) * sizeof *out);
    if (!out) return NULL;
    const size_t rb = dtype_row_bytes(ti->dtype, ne0);
    for (int64_t r = 0; r < rows; r++)
        if (dtype_dequantize_row(ti->dtype, (const char *)ti->data + (size_t)r * rb, out + r * ne0, ne0) != 0) {
            free(out);
            return NULL;
        }
    return out;
}

/* W [n_in, n_out] += scale * B A, with A [n_in, r] and B [r, n_out]:
 * W[j][i] += scale * sum_k B[j][k] A[k][i], summed in k order in f32. */
static int merge_pair(float *w, const gguf_tensor_info *wt, const export_pair *p) {
    float *a = rows_f32(p->a), *b = rows_f32(p->b);
    if (!a || !b) {
        free(a);
        free(b);
        return error_set("export-lora: out of memory merging '%s'", wt->name);
    }
    const int64_t n_in = wt->ne[0], n_out = wt->ne[1], r = p->a->ne[1];
    for (int64_t j = 0; j < n_out; j++)
        for (int64_t i = 0; i < n_in; i++) {
            float d = 0.0f;
            for (int64_t k = 0; k < r; k++) d += b[j * r + k] * a[k * n_in + i];
            w[j * n_in + i] += p->scale * d;
        }
    free(a);
    free(b);
    return 0;
}

/* The bytes of tensor t in the output (malloc'd into *out, *size). */
static int tensor_bytes(const export_tensor *t, int32_t n_lora, void **out, uint64_t *size) {
    const gguf_tensor_info *ti = t->ti;
    if (!t->merged) {
        *out = NULL;
        *size = ti->size;
        return 0;
    }
    float *w = rows_f32(ti);
    if (!w) return error_set("export-lora: cannot read '%s' as f32", ti->name);
    for (int32_t k = 0; k < n_lora; k++)
        if (t->pairs[k].a && merge_pair(w, ti, &t->pairs[k]) != 0) {
            free(w);
            return -1;
        }
    const int64_t n = ti->ne[0] * ti->ne[1];
    if (t->out_dtype == TSR_DTYPE_F32) {
        *out = w;
        *size = (uint64_t)n * sizeof(float);
        return 0;
    }
    uint16_t *h = malloc((size_t)n * sizeof *h);
    if (!h) {
        free(w);
        return error_set("export-lora: out of memory for '%s'", ti->name);
    }
    for (int64_t i = 0; i < n; i++) h[i] = tsr_f32_to_fp16(w[i]);
    free(w);
    *out = h;
    *size = (uint64_t)n * sizeof *h;
    return 0;
}

int tessera_lora_export(const char *base_path, const char *const *lora_paths, const float *scales, int32_t n_lora,
                        const char *out_path, tessera_lora_export_report *report) {
    if (!base_path || !out_path || n_lora <= 0 || !lora_paths || !scales)
        return error_set("export-lora: a base model, at least one adapter and an output path are needed");
    gguf_file *base = gguf_open(base_path);
    if (!base) return -1;
    gguf_file **loras = calloc((size_t)n_lora, sizeof *loras);
    const int64_t n = gguf_tensor_count(base);
    export_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    export_pair *pairs = calloc((size_t)(n * n_lora) + 1, sizeof *pairs);
    gguf_writer *w = gguf_writer_new();
    FILE *fp = NULL;
    char *tmp = NULL;
    int rc = -1;
    if (!loras || !ts || !pairs || !w) {
        error_set("export-lora: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) ts[i] = (export_tensor){.ti = gguf_tensor(base, i), .pairs = pairs + i * n_lora};
    for (int32_t k = 0; k < n_lora; k++) {
        loras[k] = gguf_open(lora_paths[k]);
        if (!loras[k] || take_adapter(base, loras[k], k, scales[k], ts, n) != 0) goto done;
    }
    qsort(ts, (size_t)n, sizeof *ts, by_name);
    int64_t n_merged = 0;
    for (int64_t i = 0; i < n; i++) {
        export_tensor *t = &ts[i];
        t->out_dtype = t->ti->dtype;
        if (t->merged && t->ti->dtype != TSR_DTYPE_F32) t->out_dtype = TSR_DTYPE_F16;
        n_merged += t->merged;
    }
    for (int64_t i = 0; i < gguf_kv_count(base); i++)
        if (gguf_writer_copy_kv(w, base, i) != 0) goto done;
    if (gguf_writer_set_u32(w, "general.file_type", 1) != 0) goto done;
    for (int64_t i = 0; i < n; i++)
        if (gguf_writer_add_tensor(w, ts[i].ti->name, ts[i].out_dtype, ts[i].ti->n_dims, ts[i].ti->ne, NULL) != 0)
            goto done;
    fp = gguf_tmpfile_open(out_path, &tmp);
    if (!fp || gguf_writer_begin(w, fp) != 0) goto done;
    for (int64_t i = 0; i < n; i++) {
        void *data = NULL;
        uint64_t size = 0;
        if (tensor_bytes(&ts[i], n_lora, &data, &size) != 0) goto done;
        int wrc = gguf_writer_write_tensor_data(w, fp, i, data ? data : ts[i].ti->data, size);
        free(data);
        if (wrc != 0) goto done;
    }
    if (gguf_writer_finish(w, fp) != 0) goto done;
    rc = gguf_tmpfile_commit(fp, tmp, out_path);
    fp = NULL;
    tmp = NULL;
    if (rc == 0 && report) *report = (tessera_lora_export_report){.n_tensors = n, .n_merged = n_merged};
done:
    if (fp) gguf_tmpfile_abort(fp, tmp);
    gguf_writer_free(w);
    for (int32_t k = 0; loras && k < n_lora; k++) gguf_close(loras[k]);
    free(loras);
    free(pairs);
    free(ts);
    gguf_close(base);
    return rc;
}
