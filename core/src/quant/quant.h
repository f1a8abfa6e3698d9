/*
 * quant — convert a GGUF model to another weight type (`tessera quantize`).
 *
 * A target is a llama.cpp "ftype": a name users know (Q4_K_M, Q8_0, ...), its
 * LLAMA_FTYPE number (written to general.file_type) and the default dtype of
 * 2-D weights. Mixtures pick a dtype per tensor with llama.cpp's rules (see
 * docs/quantize.md); pure mode uses the default dtype for every weight.
 */
#ifndef TESSERA_QUANT_H
#define TESSERA_QUANT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <tessera/tessera_tools.h>

typedef struct quant_ftype {
    const char *name;      /* "Q4_K_M"                                   */
    int32_t llama_ftype;   /* LLAMA_FTYPE_MOSTLY_Q4_K_M = 15             */
    int32_t default_dtype; /* TSR_DTYPE_Q4_K                             */
    const char *summary;   /* one line for --help                        */
    /* llama-quantize refuses it without an importance matrix: its ~2-bit
     * (and IQ3_XXS) quantizers choose grid points by each weight's
     * importance. */
    bool needs_imatrix;
} quant_ftype;

/* The error for a target that needs an importance matrix when none is
 * given (-1, with error_get() giving llama-quantize's reasoning), or for
 * one of those targets that Tessera cannot produce even with one; or 0. */
int quant_ftype_check(const quant_ftype *ft, bool have_imatrix);

/* The target of a name (case-insensitive; aliases Q3_K, Q4_K, Q5_K mean the
 * _M mixtures as in llama-quantize), or NULL. */
const quant_ftype *quant_ftype_find(const char *name);
/* Targets in --help order; *count receives their number. */
const quant_ftype *quant_ftype_list(int *count);

/* Model facts the per-tensor rules need. */
typedef struct quant_model_info {
    char arch[64];      /* general.architecture                      */
    int n_layer;        /* <arch>.block_count                        */
    int n_head, n_head_kv;
    int n_expert;       /* <arch>.expert_count, 0 if none            */
    bool has_output;    /* output.weight exists (untied embeddings)  */
    int n_attention_wv; /* attn_v / attn_qkv / attn_kv_b tensors     */
    bool has_imatrix;   /* quantizing with an importance matrix       */
} quant_model_info;

/* Counters the rules advance as tensors are visited in file order. */
typedef struct quant_rule_state {
    int i_attention_wv;
    int i_ffn_down, i_ffn_gate, i_ffn_up;
} quant_rule_state;

/* Whether llama.cpp would quantize this tensor at all (a 2-D+ weight that is
 * not a norm, router, positional embedding, ...). ne has 4 entries. */
bool quant_tensor_is_weight(const char *name, const int64_t *ne);

/* The dtype a weight gets under ftype's mixture (llama.cpp's
 * llama_tensor_get_type), including the fallback when the row length is not
 * a multiple of the chosen block size. Advances st. */
int32_t quant_mixture_dtype(const quant_ftype *ft, const quant_model_info *info,
                            quant_rule_state *st, const char *name, const int64_t *ne);

/* dtype when the row length nx is a multiple of its block size, else
 * llama.cpp's fallback for it (the table the mixtures use: Q4_K -> Q5_0,
 * Q6_K -> Q8_0, the grid types -> IQ4_NL, ..., F16 as the last resort). */
int32_t quant_row_fallback_dtype(int32_t dtype, int64_t nx);

/* One --tensor-type entry, "PATTERN=TYPE", compiled. */
typedef struct quant_override quant_override;

/* Parse and compile n specs "PATTERN=TYPE" into *out (NULL when n is 0):
 * 0, or -1 with an error naming the flag and the bad entry. */
int quant_overrides_parse(const char *const *specs, int n, quant_override **out);
void quant_overrides_free(quant_override *ov, int n);
/* The dtype of the first entry whose pattern matches name, or -1; *spec
 * (may be NULL) receives that entry's text. */
int32_t quant_overrides_match(const quant_override *ov, int n, const char *name, const char **spec);
/* The tensor type named name (case-insensitive GGUF type name) for flag,
 * or -1 with an error naming the flag. */
int32_t quant_override_type(const char *flag, const char *value, const char *name);

/* What the progress callback gets after each tensor is written: the
 * public tessera_quant_progress (tessera_tools.h), so tessera_quantize
 * hands the caller's callback to quant_model_file as it is. */
typedef tessera_quant_progress quant_progress;

typedef struct quant_params {
    const quant_ftype *ftype;
    bool pure;             /* every weight in ftype->default_dtype       */
    bool allow_requantize; /* accept quantized input tensors             */
    int n_threads;         /* >= 1                                      */
    /* Set (e.g. from a SIGINT handler) to stop; the output is removed. */
    volatile sig_atomic_t *abort_flag;
    void (*progress)(const quant_progress *p, void *user);
    void *progress_user;
    /* An importance matrix (GGUF or legacy .dat) the quantizers weigh rows
     * by, as llama-quantize --imatrix; NULL for none. Entries whose name
     * contains none of include[] (when n_include > 0) or any of exclude[]
     * are dropped first (--include-weights / --exclude-weights). */
    const char *imatrix_file;
    const char *const *include;
    int n_include;
    const char *const *exclude;
    int n_exclude;
    /* Per-tensor overrides (tessera_tools.h explains them): the specs
     * "PATTERN=TYPE" of --tensor-type, and the type names of
     * --output-tensor-type and --token-embedding-type (NULL: none). */
    const char *const *tensor_types;
    int n_tensor_types;
    const char *output_type, *token_embd_type;
    bool leave_output;
} quant_params;

/* Quantize in_path into out_path, streaming one tensor at a time. Writes a
 * temporary file beside out_path and renames it into place only on success;
 * on any error (or abort) nothing is left at out_path. 0, or -1 with
 * error_get() naming the file, tensor or dtype at fault. out_path NULL is a
 * dry run: the plan goes to p->progress and nothing is quantized; a target
 * that needs a matrix or that Tessera cannot produce is planned anyway. */
int quant_model_file(const char *in_path, const char *out_path, const quant_params *p);

#endif
