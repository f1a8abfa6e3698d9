/*
 * imatrix — importance matrices, as llama-imatrix makes them and
 * llama-quantize --imatrix uses them.
 *
 * For every weight matrix W (ne0 columns) that a matrix product multiplies
 * with activations x, the matrix holds per column i the sum over every
 * token seen of x[i]^2 ("in_sum2") and the number of tokens ("counts"); an
 * expert tensor (MUL_MAT_ID) holds one such pair per expert. A quantizer
 * weighs element i of a row by the mean, in_sum2[i] / count: columns that
 * meet large activations matter more.
 *
 * Files, both read, both written:
 *  - GGUF (llama.cpp's current format): general.type = "imatrix",
 *    imatrix.datasets (array of strings), imatrix.chunk_count and
 *    imatrix.chunk_size (u32); per matrix, by name order, the F32 tensors
 *    "<name>.in_sum2" [ne0, n_mat] and "<name>.counts" [1, n_mat].
 *  - legacy .dat: i32 entry count; per entry i32 name length, the name, i32
 *    ncall, i32 nval, nval f32 values = in_sum2 / count * ncall (the mean
 *    times the number of chunks); then i32 chunk count, i32 length and the
 *    dataset name. Read back as sums = values with count = ncall, which
 *    gives llama-quantize's mean (values / ncall).
 */
#ifndef TESSERA_QUANT_IMATRIX_H
#define TESSERA_QUANT_IMATRIX_H

#include <stdbool.h>
#include <stdint.h>

typedef struct imatrix_entry {
    char *name;     /* the weight's tensor name, "blk.0.attn_q.weight" */
    int64_t ne0;    /* columns (the weight's row length; legacy: all values) */
    int64_t n_mat;  /* 1, or the number of experts */
    double *sums;   /* [n_mat][ne0] sums of squared activations */
    double *counts; /* [n_mat] tokens seen */
} imatrix_entry;

typedef struct imatrix {
    imatrix_entry *entries;
    int64_t n_entries, cap;
    char **datasets;
    int64_t n_datasets;
    int64_t chunk_count, chunk_size;
} imatrix;

imatrix *imatrix_new(void);
void imatrix_free(imatrix *im);

/* The entry of name with this shape, created (zeroed) when absent; NULL
 * with an error when it exists with another shape or memory runs out. */
imatrix_entry *imatrix_entry_get(imatrix *im, const char *name, int64_t ne0, int64_t n_mat);
const imatrix_entry *imatrix_find(const imatrix *im, const char *name);

int imatrix_add_dataset(imatrix *im, const char *name);

/* Add the file at path (GGUF or legacy .dat, told apart by the magic) to
 * im: sums and counts add up, datasets are appended, chunk counts add (what
 * llama-imatrix --in-file does with several files). 0, or -1 with an error
 * naming the file and what is wrong in it. */
int imatrix_load(imatrix *im, const char *path);

/* Keep only the entries whose name contains one of include[] (when
 * n_include > 0) and none of exclude[] (llama-quantize's --include-weights
 * and --exclude-weights). */
void imatrix_filter(imatrix *im, const char *const *include, int n_include, const char *const *exclude,
                    int n_exclude);

/* Write im to path, GGUF unless legacy (the .dat format). Entries are
 * written in name order. 0 or -1 with an error. */
int imatrix_save(const imatrix *im, const char *path, bool legacy);

/* The per-element weights of entry e as a quantizer takes them: out[j*ne0
 * + i] = sums / count of matrix j, or 1 where a matrix saw no tokens
 * (llama-quantize's rule), in float as llama-quantize computes them. */
void imatrix_entry_means(const imatrix_entry *e, float *out);

#endif
