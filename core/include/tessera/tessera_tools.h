/*
 * tessera_tools.h — the model and plugin tools behind `tessera quantize`,
 * `tessera imatrix` and `tessera plugin check`: convert a GGUF model's
 * weights to another type (optionally weighted by an importance matrix),
 * observe the activations a context's matrix products use and sum them into
 * such a matrix, and run the op conformance suite on a backend plugin.
 *
 * Conventions as in tessera.h: a negative status on failure, and
 * tessera_last_error() says why, naming the file, tensor, type or plugin at
 * fault. Neither needs tessera_init.
 */
#ifndef TESSERA_TESSERA_TOOLS_H
#define TESSERA_TESSERA_TOOLS_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================ quantize */

/* A target of tessera_quantize, as llama-quantize names them. */
typedef struct tessera_quant_type {
    const char *name;     /* "Q4_K_M" (static storage) */
    int32_t llama_ftype;  /* general.file_type written: LLAMA_FTYPE_MOSTLY_Q4_K_M = 15 */
    int32_t base_type;    /* the GGUF tensor type of most weights (Q4_K); its name:
                           * tessera_tensor_type_name (tessera_gguf.h) */
    const char *summary;  /* one line for --help */
} tessera_quant_type;

/* Number of targets; target i (in --help order) into *out: 0, or -1 with an
 * error for i out of range. */
int32_t tessera_quant_type_count(void);
int tessera_quant_type_get(int32_t i, tessera_quant_type *out);
/* The target named name (case-insensitive; Q3_K, Q4_K, Q5_K mean the _M
 * mixtures) into *out (may be NULL): its index, or -1 with an error listing
 * the names. */
int32_t tessera_quant_type_find(const char *name, tessera_quant_type *out);

/* Reported after each tensor is written. Types are GGUF tensor type numbers. */
typedef struct tessera_quant_progress {
    int64_t index, count; /* this tensor (0-based) and the number of tensors */
    const char *name;     /* valid during the call */
    int32_t from_type, to_type;
    int64_t n_elements;
    uint64_t in_bytes, out_bytes;
} tessera_quant_progress;

typedef struct tessera_quantize_params {
    const char *type;      /* a target name as tessera_quant_type_find takes */
    bool pure;             /* every 2-D weight in the base type (no mixture rules) */
    bool allow_requantize; /* accept quantized input (dequantized first) */
    int32_t n_threads;     /* 0: the online CPUs (at most 256) */
    /* When *abort_flag becomes non-zero (set it from a SIGINT handler) the
     * call stops, removes its temporary file and fails. May be NULL. */
    volatile sig_atomic_t *abort_flag;
    void (*progress)(const tessera_quant_progress *p, void *user); /* may be NULL */
    void *progress_user;
    /* An importance matrix (llama-imatrix's or tessera imatrix's GGUF, or the
     * legacy .dat) that weighs each row's elements as llama-quantize
     * --imatrix does; NULL for none. Its entries are first limited to names
     * containing one of include_weights[] (if any) and none of
     * exclude_weights[]. */
    const char *imatrix_file;
    const char *const *include_weights;
    int32_t n_include_weights;
    const char *const *exclude_weights;
    int32_t n_exclude_weights;
    /* Per-tensor overrides, llama-quantize's flags (appended in 0.1: zero
     * from tessera_quantize_default_params means none). Types are GGUF
     * tensor type names, case-insensitive ("q8_0", "Q6_K", "f16"), not
     * mixture names. Only tensors a mixture would quantize are affected.
     * - tensor_types[i] "PATTERN=TYPE" (--tensor-type): a weight whose name
     *   matches PATTERN (a POSIX extended regular expression searched in
     *   the whole name, lower-cased first as llama-quantize does; \d
     *   means [0-9]) gets TYPE instead of the mixture's choice; the first
     *   matching entry wins. It is not counted by the mixture's per-layer
     *   counters, and a row length TYPE's block does not divide falls back
     *   as the mixtures do (Q4_K on rows of 96: Q5_0).
     * - output_tensor_type (--output-tensor-type): output.weight (the
     *   token embedding when it doubles as the output), taken as given;
     *   token_embedding_type (--token-embedding-type): token_embd.weight.
     *   Both win over tensor_types, the second over the first.
     * - leave_output_tensor (--leave-output-tensor): output.weight keeps
     *   its input type, whatever else is asked. */
    const char *const *tensor_types;
    int32_t n_tensor_types;
    const char *output_tensor_type;   /* NULL: the mixture's */
    const char *token_embedding_type; /* NULL: the mixture's */
    bool leave_output_tensor;
} tessera_quantize_params;

tessera_quantize_params tessera_quantize_default_params(void); /* type "Q8_0" */

/* Check params without reading any file: the target name and every
 * override (a malformed "PATTERN=TYPE", a bad PATTERN, an unknown type).
 * 0, or -1 with an error naming the flag (--tensor-type, ...) and value.
 * tessera_quantize and tessera_quantize_dry_run make the same checks. */
int tessera_quantize_check_params(const tessera_quantize_params *params);

/* Convert the weights of in_path (F32, F16 or BF16; quantized ones with
 * allow_requantize) to params->type and write out_path, one tensor at a
 * time. Metadata is kept and general.file_type set; norms and other 1-D
 * tensors keep their type. The output goes to a temporary file beside
 * out_path that is renamed into place only when complete: on any error or
 * abort nothing is left at out_path. 0, or -1 with an error. */
int tessera_quantize(const char *in_path, const char *out_path, const tessera_quantize_params *params);

/* What tessera_quantize would do, without quantizing or writing anything
 * (llama-quantize --dry-run): every tensor's output type and size goes to
 * params->progress, in output order. A target that needs an importance
 * matrix, or one Tessera cannot produce, is planned all the same (without
 * a matrix the rules that depend on having one take their no-matrix
 * branch). 0, or -1 with an error (unreadable file, bad matrix). */
int tessera_quantize_dry_run(const char *in_path, const tessera_quantize_params *params);

/* ============================================================= imatrix */

/* The activations one matrix product of a decode step multiplied a model
 * weight with (valid during the callback): n_rows rows of n_cols floats,
 * row r multiplying expert experts[r] of the weight when it is a
 * mixture-of-experts tensor (experts NULL, n_experts 1 otherwise). */
typedef struct tessera_matmul_input {
    const char *weight; /* the weight's tensor name, "blk.0.attn_q.weight" */
    int64_t n_cols;     /* the weight's row length */
    int64_t n_experts;
    int64_t n_rows;
    const float *rows;
    const int32_t *experts;
} tessera_matmul_input;

typedef struct tessera_context tessera_context;
typedef void (*tessera_matmul_observer)(const tessera_matmul_input *in, void *user);

/* From the next decode on, hand every product of a model weight (MUL_MAT,
 * MUL_MAT_ID) with activations to fn, after each micro-batch's compute, on
 * whatever device computed it (NULL: stop). Costs memory and copies while
 * set: the inputs are kept to the end of each step. 0 or -1. */
int tessera_context_set_matmul_observer(tessera_context *ctx, tessera_matmul_observer fn, void *user);

/* An importance matrix as llama-imatrix makes it: per weight and column the
 * sum of squared activations and the number of rows seen. */
typedef struct tessera_imatrix tessera_imatrix;

tessera_imatrix *tessera_imatrix_new(void); /* NULL on out of memory */
void tessera_imatrix_free(tessera_imatrix *im);
/* Add the rows of one product (a tessera_matmul_observer's input). 0 or -1
 * (a weight seen before with another shape, out of memory). */
int tessera_imatrix_add(tessera_imatrix *im, const tessera_matmul_input *in);
/* Add a file's sums and counts (GGUF imatrix or legacy .dat): llama-imatrix
 * --in-file. 0 or -1 with an error naming the file. */
int tessera_imatrix_load(tessera_imatrix *im, const char *path);
/* Record a dataset name and the chunks computed (added to the count), and
 * the chunk size in tokens. */
int tessera_imatrix_note(tessera_imatrix *im, const char *dataset, int64_t chunks, int64_t chunk_size);
int64_t tessera_imatrix_n_entries(const tessera_imatrix *im);
int64_t tessera_imatrix_n_chunks(const tessera_imatrix *im);
/* Write llama.cpp's GGUF imatrix format, or the legacy .dat (legacy). */
int tessera_imatrix_save(const tessera_imatrix *im, const char *path, bool legacy);

/* ========================================================== export-lora */

typedef struct tessera_lora_export_report {
    int64_t n_tensors; /* written */
    int64_t n_merged;  /* of which had an adapter merged in */
} tessera_lora_export_report;

/* llama-export-lora: write out_path, the model base_path with the LoRA
 * adapters lora_paths[0..n) merged into its weights at scales[0..n) (each
 * adapted W becomes W + sum scale * alpha / r * B A, in f32). An F32 or F16
 * weight keeps its type; a quantized or BF16 one is dequantized and written
 * as F16, as llama-export-lora does; other tensors are copied. Tensors are
 * written sorted by name and general.file_type is set to 1, as
 * llama-export-lora does. The adapters are checked as tessera_lora_load
 * checks them (architecture, base tensors, shapes). The output goes to a
 * temporary file renamed into place when complete. 0, or -1 with an error
 * naming the file and key or tensor; report (may be NULL) says what was
 * written. */
int tessera_lora_export(const char *base_path, const char *const *lora_paths, const float *scales, int32_t n,
                        const char *out_path, tessera_lora_export_report *report);

/* =========================================================== gguf-split */

/* tessera_gguf_split's limits per output file, as llama-gguf-split's
 * --split-max-tensors and --split-max-size (0: none; with neither set,
 * 128 tensors, llama-gguf-split's default). */
typedef struct tessera_gguf_split_params {
    int64_t max_tensors;
    uint64_t max_bytes; /* tensor data bytes per file */
    bool dry_run;       /* plan only: n_files is set, nothing written */
} tessera_gguf_split_params;

/* Split in_path into "<out_prefix>-00001-of-0000N.gguf" ... as
 * llama-gguf-split does: the metadata in the first file, split.no,
 * split.count and split.tensors.count in each. *n_files (may be NULL) gets
 * N. 0, or -1 with an error. */
int tessera_gguf_split(const char *in_path, const char *out_prefix, const tessera_gguf_split_params *params,
                       int32_t *n_files);
/* Merge the split model whose first shard is first_path into out_path (one
 * file, without the split keys). 0, or -1 with an error. */
int tessera_gguf_merge(const char *first_path, const char *out_path);

/* ========================================================== conformance */

/* Results of tessera_plugin_check (also `tessera plugin check`'s exit
 * statuses). */
enum {
    TESSERA_CHECK_PASS = 0,
    TESSERA_CHECK_FAIL = 1,     /* at least one case failed */
    TESSERA_CHECK_ERROR = 2,    /* the plugin did not load, or bad params: tessera_last_error() */
    TESSERA_CHECK_NO_DEVICE = 77 /* the plugin has no usable device (the reason is printed) */
};

typedef struct tessera_plugin_check_params {
    const char *target; /* a plugin file (libtessera-backend-NAME.so), or "ref" */
    int32_t device;     /* the plugin's device index to check, -1: every device */
    const char *op;     /* one op family (case-insensitive), NULL: all */
    bool verbose;       /* one line per case */
    bool one_case;      /* only case case_index of the op family */
    int32_t case_index;
    bool no_fork;       /* run every family in this process (for a debugger) */
    FILE *out;          /* the report; NULL: stdout */
} tessera_plugin_check_params;

/* Run the op conformance suite on target's devices: every op x type x a
 * family of shapes (odd sizes, broadcasting, strided and permuted views,
 * in place) compared with the built-in reference backend within per-op
 * tolerances ("ref" against itself: bit for bit). Ops a device declines are
 * counted as falling back, not as failures. Each family runs in a child
 * process unless no_fork, so a crash names its case. Prints one line per
 * family and a summary per device to out; returns a TESSERA_CHECK_*. */
int tessera_plugin_check(const tessera_plugin_check_params *params);
/* The op family names, NULL-terminated ("GET_ROWS", ...; static storage). */
const char *const *tessera_plugin_check_families(void);

#ifdef __cplusplus
}
#endif

#endif
