/*
 * quant_model — stream a GGUF model through the quantizers into a new file.
 *
 * Plan first (choose every tensor's output dtype and check everything that
 * can fail: requantization, unsupported dtypes, row lengths), then write the
 * header and one tensor at a time: rows are split across threads, each
 * converting its rows to f32 (if needed) and quantizing them. Memory holds
 * one output tensor plus one f32 row per thread; the input is read in place
 * from the mapping. Tensors are written in llama.cpp's order (non-layer
 * tensors, then layer by layer, by name inside each) so the per-layer
 * counters of the mixture rules see the same sequence as llama-quantize.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/imatrix.h"
#include "quant/quant.h"
#include "tensor/dtype.h"
#include "util/error.h"

/* llama.cpp's GGML_QNT_VERSION, written as general.quantization_version. */
#define QUANT_FORMAT_VERSION 2

typedef struct tensor_plan {
    const gguf_tensor_info *info;
    int layer;         /* N of "blk.N.", -1 for other tensors */
    int32_t out_dtype;
    const char *why; /* the override that chose out_dtype, or NULL: the mixture */
    uint64_t out_bytes;
    const imatrix_entry *imx; /* its importance matrix, or NULL */
} tensor_plan;

static int tensor_layer(const char *name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) return -1;
    return layer;
}

static int plan_compare(const void *a, const void *b) {
    const tensor_plan *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->info->name, y->info->name);
}

static int64_t tensor_nelements(const gguf_tensor_info *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* Tell p->progress about plan entry i of n (done, or planned in a dry run). */
static void report_progress(const quant_params *p, const tensor_plan *plan, int64_t i, int64_t n) {
    const gguf_tensor_info *t = plan[i].info;
    quant_progress pr = {
        .index = i, .count = n, .name = t->name,
        .from_type = t->dtype, .to_type = plan[i].out_dtype,
        .n_elements = tensor_nelements(t),
        .in_bytes = t->size, .out_bytes = plan[i].out_bytes,
    };
    p->progress(&pr, p->progress_user);
}

static int read_int_key(const gguf_file *f, const char *arch, const char *suffix, int fallback) {
    char key[160];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (gguf_find_key(f, key) < 0 || gguf_get_int(f, key, &v) != 0 || v < 0 || v > 1 << 20)
        return fallback;
    return (int)v;
}

static void model_info_read(const gguf_file *f, quant_model_info *info) {
    memset(info, 0, sizeof *info);
    gguf_str arch;
    if (gguf_find_key(f, "general.architecture") >= 0 &&
        gguf_get_str(f, "general.architecture", &arch) == 0 && arch.len < sizeof info->arch) {
        memcpy(info->arch, arch.ptr, arch.len);
        info->arch[arch.len] = '\0';
    }
    int max_layer = -1;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const char *name = gguf_tensor(f, i)->name;
        int layer = tensor_layer(name);
        if (layer > max_layer) max_layer = layer;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
            strstr(name, "attn_kv_b.weight"))
            info->n_attention_wv++;
        else if (!strcmp(name, "output.weight"))
            info->has_output = true;
    }
    info->n_layer = read_int_key(f, info->arch, "block_count", max_layer + 1);
    info->n_head = read_int_key(f, info->arch, "attention.head_count", 1);
    info->n_head_kv = read_int_key(f, info->arch, "attention.head_count_kv", info->n_head);
    info->n_expert = read_int_key(f, info->arch, "expert_count", 0);
    error_clear();
}

/* The importance-matrix entry of weight t, checked as llama-quantize
 * checks it: its size must be the tensor's row length times its experts
 * (token_embd.weight, which no matrix product sees, is quantized without
 * one instead). *out NULL when the matrix has none; -1 on a mismatch. */
static int plan_imatrix(const imatrix *im, const char *in_path, const gguf_tensor_info *t,
                        const imatrix_entry **out) {
    *out = NULL;
    const imatrix_entry *e = imatrix_find(im, t->name);
    if (!e) return 0;
    if (e->ne0 * e->n_mat != t->ne[0] * t->ne[2]) {
        if (!strcmp(t->name, "token_embd.weight")) return 0;
        return error_set("%s: tensor '%s': the importance matrix has %lld values for it, the tensor needs "
                         "%lld (row length %lld x %lld matrices): the matrix was made for another model",
                         in_path, t->name, (long long)(e->ne0 * e->n_mat), (long long)(t->ne[0] * t->ne[2]),
                         (long long)t->ne[0], (long long)t->ne[2]);
    }
    *out = e;
    return 0;
}

/* The output dtype of weight t: --leave-output-tensor keeps output.weight
 * as it is; otherwise the first --tensor-type entry matching it (the
 * fallback for its row length applied, the mixture's counters not
 * advanced: llama-quantize's --dry-run shows both) or the mixture; then
 * --output-tensor-type for the output (a tied embedding too) and
 * --token-embedding-type for token_embd, taken as given (llama-quantize
 * applies no fallback to those two). *why names the override used. */
typedef struct overrides {
    quant_override *tensor_types; /* p->n_tensor_types entries */
    int32_t output, token_embd;   /* dtypes, -1: none */
} overrides;

static int32_t weight_dtype(const quant_params *p, const overrides *ov, const quant_model_info *info,
                            quant_rule_state *st, const gguf_tensor_info *t, char *why, size_t why_len) {
    const int32_t target = p->ftype->default_dtype;
    const bool mixture = !p->pure && dtype_traits_get(target)->quantized;
    const bool is_output = !strcmp(t->name, "output.weight");
    const bool is_embd = !strcmp(t->name, "token_embd.weight");
    why[0] = '\0';
    if (p->leave_output && is_output) {
        snprintf(why, why_len, "--leave-output-tensor");
        return t->dtype;
    }
    const char *spec = NULL;
    int32_t out = quant_overrides_match(ov->tensor_types, p->n_tensor_types, t->name, &spec);
    if (out >= 0) {
        out = quant_row_fallback_dtype(out, t->ne[0]);
        snprintf(why, why_len, "--tensor-type '%s'", spec);
    } else {
        out = mixture ? quant_mixture_dtype(p->ftype, info, st, t->name, t->ne) : target;
    }
    if (ov->output >= 0 && (is_output || (!info->has_output && is_embd))) {
        out = ov->output;
        snprintf(why, why_len, "--output-tensor-type %s", dtype_name(out));
    }
    if (ov->token_embd >= 0 && is_embd) {
        out = ov->token_embd;
        snprintf(why, why_len, "--token-embedding-type %s", dtype_name(out));
    }
    return out;
}

/* Choose and check the output dtype of every tensor. */
static int plan_tensors(const gguf_file *f, const char *in_path, const quant_params *p, const imatrix *im,
                        const overrides *ov, bool dry_run, tensor_plan *plan) {
    const int64_t n = gguf_tensor_count(f);
    quant_model_info info;
    model_info_read(f, &info);
    info.has_imatrix = im != NULL;
    for (int64_t i = 0; i < n; i++) {
        plan[i].info = gguf_tensor(f, i);
        plan[i].layer = tensor_layer(plan[i].info->name);
    }
    qsort(plan, (size_t)n, sizeof *plan, plan_compare);

    const int32_t target = p->ftype->default_dtype;
    quant_rule_state st = {0};
    char why[256];
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *t = plan[i].info;
        int32_t out = t->dtype;
        why[0] = '\0';
        if (quant_tensor_is_weight(t->name, t->ne)) out = weight_dtype(p, ov, &info, &st, t, why, sizeof why);
        /* "(--tensor-type 'attn_v=q8_0')" in the errors below */
        char by[sizeof why + 4] = "";
        if (why[0]) snprintf(by, sizeof by, " (%s)", why);
        plan[i].out_dtype = out;
        plan[i].out_bytes = t->size;
        if (out == t->dtype) continue;
        if (im && plan_imatrix(im, in_path, t, &plan[i].imx) != 0) return -1;

        const dtype_traits *in_tr = dtype_traits_get(t->dtype);
        const dtype_traits *out_tr = dtype_traits_get(out);
        if (!in_tr || !in_tr->to_f32)
            return error_set("%s: tensor '%s' has dtype %s, which Tessera cannot read", in_path,
                             t->name, dtype_name(t->dtype));
        if (dry_run) {
            /* what llama-quantize --dry-run reports: the type and size,
             * not whether this input could be quantized to it */
            plan[i].out_bytes =
                t->ne[0] % out_tr->block_size == 0 ? dtype_row_bytes(out, tensor_nelements(t)) : 0;
            continue;
        }
        if (in_tr->quantized && !p->allow_requantize)
            return error_set("%s: tensor '%s' is already quantized (%s); requantizing loses "
                             "precision, pass --allow-requantize to do it anyway",
                             in_path, t->name, in_tr->name);
        if (!out_tr->from_f32 && out_tr->from_f32_w && !im)
            return error_set("%s: tensor '%s'%s: %s needs an importance matrix and none was given "
                             "(--imatrix FILE; llama-quantize: 'this quantization requires an importance "
                             "matrix!')", in_path, t->name, by, out_tr->name);
        if (!out_tr->from_f32 && out_tr->from_f32_w && !plan[i].imx)
            return error_set("%s: tensor '%s'%s: the importance matrix has no entry for it, and %s needs "
                             "one (llama-quantize: 'Missing importance matrix for tensor %s in a very "
                             "low-bit quantization. The result will be garbage, so bailing out')",
                             in_path, t->name, by, out_tr->name, t->name);
        if (!out_tr->from_f32 && !out_tr->from_f32_w) {
            if (why[0])
                return error_set("%s: tensor '%s': %s asks for %s, which Tessera cannot produce", in_path,
                                 t->name, why, out_tr->name);
            return error_set("%s: tensor '%s': the %s mixture puts it in %s, which Tessera cannot "
                             "produce yet (--pure keeps every weight in %s)", in_path, t->name,
                             p->ftype->name, out_tr->name, dtype_name(target));
        }
        if (t->ne[0] % out_tr->block_size != 0)
            return error_set("%s: tensor '%s'%s: row length %lld is not a multiple of the %s "
                             "block size %lld",
                             in_path, t->name, by, (long long)t->ne[0], out_tr->name,
                             (long long)out_tr->block_size);
        plan[i].out_bytes = dtype_row_bytes(out, tensor_nelements(t));
    }
    return 0;
}

static int writer_setup(gguf_writer *w, const gguf_file *f, const tensor_plan *plan, int64_t n,
                        const quant_params *p, const imatrix *im) {
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *key = gguf_kv_key(f, i);
        /* rewritten below, at the end as llama-quantize does */
        if (!strcmp(key, "general.file_type") || !strcmp(key, "general.quantization_version"))
            continue;
        if (gguf_writer_copy_kv(w, f, i) != 0) return -1;
    }
    if (gguf_writer_set_u32(w, "general.quantization_version", QUANT_FORMAT_VERSION) != 0 ||
        gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype->llama_ftype) != 0)
        return -1;
    /* what llama-quantize records of the matrix, in its order */
    if (im) {
        if (gguf_writer_set_str(w, "quantize.imatrix.file", p->imatrix_file, strlen(p->imatrix_file)) != 0)
            return -1;
        if (im->n_datasets > 0 &&
            gguf_writer_set_str(w, "quantize.imatrix.dataset", im->datasets[0], strlen(im->datasets[0])) != 0)
            return -1;
        if (gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)im->n_entries) != 0 ||
            gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", (uint32_t)im->chunk_count) != 0)
            return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        const gguf_tensor_info *t = plan[i].info;
        if (gguf_writer_add_tensor(w, t->name, plan[i].out_dtype, t->n_dims, t->ne, NULL) != 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ conversion */

typedef struct convert_job {
    const void *src;
    int32_t in_dtype, out_dtype;
    int64_t row_len, row_begin, row_end;
    int64_t rows_per_matrix; /* ne[1]: rows of one expert */
    const float *qw;         /* importance weights, row_len per matrix, or NULL */
    size_t in_row_bytes, out_row_bytes;
    unsigned char *dst;
    volatile sig_atomic_t *abort_flag;
    int failed; /* 1: out of memory */
} convert_job;

static void *convert_rows(void *arg) {
    convert_job *j = arg;
    const dtype_traits *in_tr = dtype_traits_get(j->in_dtype);
    const dtype_traits *out_tr = dtype_traits_get(j->out_dtype);
    float *scratch = NULL;
    if (j->in_dtype != TSR_DTYPE_F32) {
        scratch = malloc((size_t)j->row_len * sizeof *scratch);
        if (!scratch) {
            j->failed = 1;
            return NULL;
        }
    }
    for (int64_t r = j->row_begin; r < j->row_end; r++) {
        if (j->abort_flag && *j->abort_flag) break;
        const unsigned char *in = (const unsigned char *)j->src + (size_t)r * j->in_row_bytes;
        const float *row = (const float *)(const void *)in;
        if (scratch) {
            in_tr->to_f32(in, scratch, j->row_len);
            row = scratch;
        }
        unsigned char *out = j->dst + (size_t)r * j->out_row_bytes;
        if (j->qw && out_tr->from_f32_w)
            out_tr->from_f32_w(row, out, j->row_len, j->qw + (r / j->rows_per_matrix) * j->row_len);
        else
            out_tr->from_f32(row, out, j->row_len);
    }
    free(scratch);
    return NULL;
}

/* Convert tensor t into dst (plan->out_bytes) using up to n_threads,
 * weighing rows by qw (row length x matrices floats) unless NULL. */
static int convert_tensor(const gguf_tensor_info *t, int32_t out_dtype, unsigned char *dst,
                          const quant_params *p, const float *qw) {
    enum { MAX_THREADS = 256 };
    const int64_t row_len = t->ne[0];
    const int64_t n_rows = tensor_nelements(t) / row_len;
    int n_threads = p->n_threads < 1 ? 1 : p->n_threads > MAX_THREADS ? MAX_THREADS : p->n_threads;
    if (n_threads > n_rows) n_threads = (int)n_rows;
    if (n_threads < 1) n_threads = 1;

    convert_job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int k = 0; k < n_threads; k++) {
        jobs[k] = (convert_job){
            .src = t->data,
            .in_dtype = t->dtype,
            .out_dtype = out_dtype,
            .row_len = row_len,
            .row_begin = n_rows * k / n_threads,
            .row_end = n_rows * (k + 1) / n_threads,
            .rows_per_matrix = t->ne[1] > 0 ? t->ne[1] : 1,
            .qw = qw,
            .in_row_bytes = dtype_row_bytes(t->dtype, row_len),
            .out_row_bytes = dtype_row_bytes(out_dtype, row_len),
            .dst = dst,
            .abort_flag = p->abort_flag,
        };
        /* the calling thread takes the first share */
        if (k > 0 && pthread_create(&threads[k], NULL, convert_rows, &jobs[k]) == 0)
            started[k] = true;
    }
    convert_rows(&jobs[0]);
    int failed = jobs[0].failed;
    for (int k = 1; k < n_threads; k++) {
        if (started[k])
            pthread_join(threads[k], NULL);
        else
            convert_rows(&jobs[k]); /* thread creation failed: do it here */
        failed |= jobs[k].failed;
    }
    if (failed) return error_set("tensor '%s': out of memory converting rows", t->name);
    if (p->abort_flag && *p->abort_flag) return error_set("interrupted");
    return 0;
}

/* ------------------------------------------------------------------ main */

int quant_model_file(const char *in_path, const char *out_path, const quant_params *p) {
    int rc = -1;
    gguf_file *f = NULL;
    tensor_plan *plan = NULL;
    gguf_writer *w = NULL;
    FILE *fp = NULL;
    char *tmp_path = NULL;
    unsigned char *buf = NULL;
    imatrix *im = NULL;
    float *qw = NULL;
    overrides ov = {NULL, -1, -1};

    if (!p || !p->ftype) return error_set("quantize: no target type given");
    const bool dry_run = out_path == NULL;
    if (!dry_run && quant_ftype_check(p->ftype, p->imatrix_file != NULL)) return -1;
    if ((p->output_type &&
         (ov.output = quant_override_type("--output-tensor-type", p->output_type, p->output_type)) < 0) ||
        (p->token_embd_type &&
         (ov.token_embd = quant_override_type("--token-embedding-type", p->token_embd_type,
                                              p->token_embd_type)) < 0) ||
        quant_overrides_parse(p->tensor_types, p->n_tensor_types, &ov.tensor_types) != 0)
        return -1;
    if (p->imatrix_file) {
        if (!(im = imatrix_new()) || imatrix_load(im, p->imatrix_file) != 0) goto done;
        imatrix_filter(im, p->include, p->n_include, p->exclude, p->n_exclude);
    }
    f = gguf_open(in_path);
    if (!f) goto done;
    const int64_t n = gguf_tensor_count(f);
    plan = calloc((size_t)(n > 0 ? n : 1), sizeof *plan);
    if (!plan) {
        error_set("%s: out of memory", in_path);
        goto done;
    }
    if (plan_tensors(f, in_path, p, im, &ov, dry_run, plan) != 0) goto done;
    if (dry_run) {
        for (int64_t i = 0; i < n && p->progress; i++) report_progress(p, plan, i, n);
        rc = 0;
        goto done;
    }

    w = gguf_writer_new();
    if (!w || writer_setup(w, f, plan, n, p, im) != 0) goto done;
    fp = gguf_tmpfile_open(out_path, &tmp_path);
    if (!fp) goto done;
    if (gguf_writer_begin(w, fp) != 0) goto fail_write;

    uint64_t max_out = 0;
    int64_t max_qw = 0;
    for (int64_t i = 0; i < n; i++) {
        if (plan[i].out_dtype != plan[i].info->dtype && plan[i].out_bytes > max_out)
            max_out = plan[i].out_bytes;
        if (plan[i].imx && plan[i].imx->ne0 * plan[i].imx->n_mat > max_qw)
            max_qw = plan[i].imx->ne0 * plan[i].imx->n_mat;
    }
    if (max_qw > 0 && !(qw = malloc((size_t)max_qw * sizeof *qw))) {
        error_set("%s: out of memory", out_path);
        goto fail_write;
    }
    if (max_out > 0 && !(buf = malloc(max_out))) {
        error_set("%s: out of memory (%llu bytes for one tensor)", out_path,
                  (unsigned long long)max_out);
        goto fail_write;
    }

    for (int64_t i = 0; i < n; i++) {
        if (p->abort_flag && *p->abort_flag) {
            error_set("interrupted");
            goto fail_write;
        }
        const gguf_tensor_info *t = plan[i].info;
        const void *data = t->data;
        if (plan[i].out_dtype != t->dtype) {
            if (plan[i].imx) imatrix_entry_means(plan[i].imx, qw);
            if (convert_tensor(t, plan[i].out_dtype, buf, p, plan[i].imx ? qw : NULL) != 0) goto fail_write;
            data = buf;
        }
        if (gguf_writer_write_tensor_data(w, fp, i, data, plan[i].out_bytes) != 0) goto fail_write;
        if (p->progress) report_progress(p, plan, i, n);
    }
    if (gguf_writer_finish(w, fp) != 0) goto fail_write;
    rc = gguf_tmpfile_commit(fp, tmp_path, out_path);
    fp = NULL;
    tmp_path = NULL;
    goto done;

fail_write:
    gguf_tmpfile_abort(fp, tmp_path);
    fp = NULL;
    tmp_path = NULL;
done:
    quant_overrides_free(ov.tensor_types, p->n_tensor_types);
    free(qw);
    imatrix_free(im);
    free(buf);
    gguf_writer_free(w);
    free(plan);
    gguf_close(f);
    return rc;
}
