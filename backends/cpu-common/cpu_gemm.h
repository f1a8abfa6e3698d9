/*
 * cpu_gemm — packed-panel matrix products for prompt processing.
 *
 * With many activation columns (N >= GEMM_MIN_N) the one-row-at-a-time dot
 * kernels spend most of their instructions unpacking weights and scaling
 * partial sums. A gemm_ops instead works like a BLAS: cpu_matmul.c
 *   1. converts every activation column once, with act_from_f32, into the
 *      shared work area (act_row_bytes(K) bytes per column);
 *   2. cuts the weight rows into panels of `rows` rows; a thread takes a
 *      panel (atomic counter), packs it with pack() into its own buffer
 *      (pack_bytes(K) bytes, from the work area), and multiplies the packed
 *      panel with every column with run().
 * The packed panel is the product's private, short-lived copy (a few tens
 * of KiB per thread): weights stay read in place from the mapped file and
 * no memory is kept between products.
 *
 * A kernel table (cpu_kernels.h) holds one gemm_ops per weight dtype or NULL;
 * the dot kernels remain the path for decoding and small N.
 */
#ifndef TESSERA_CPU_COMMON_CPU_GEMM_H
#define TESSERA_CPU_COMMON_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

enum { GEMM_MIN_N = 16 }; /* fewer columns: the dot kernels are faster */

struct cpu_kernels;

typedef struct gemm_ops {
    int rows; /* weight rows per panel */
    /* Bytes of the packed form of N activation columns of K elements (one
     * batch: column n of batch b is column n of the area at b * act_bytes). */
    size_t (*act_bytes)(int64_t K, int64_t N);
    /* Column n (K f32 values at x) -> its packed form inside the batch's
     * area at act. k is the kernel table (for its vector quantizers). */
    void (*act_from_f32)(const struct cpu_kernels *k, const float *x, int64_t K, void *act, int64_t n);
    size_t (*pack_bytes)(int64_t K);
    /* nrows <= rows weight rows (row r at w + r * w_stride bytes, K
     * elements each, as stored in the file) -> pack. */
    void (*pack)(const void *w, size_t w_stride, int nrows, int64_t K, void *pack);
    /* dst[n * dst_stride + r] = dot(panel row r, column n) for r < nrows,
     * n < N, from the batch's packed columns at act. dst_stride is in
     * floats. */
    void (*run)(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst,
                size_t dst_stride);
    /* 0, or the columns a run() may also start at: any multiple n0 of
     * col_tile, with act advanced by act_bytes(K, n0) and dst by n0 *
     * dst_stride (each output the same sums either way). With fewer
     * panels than threads (a product of 128 rows or fewer: the encoders'
     * patch embeddings) the columns are cut there too. */
    int col_tile;
} gemm_ops;

#endif
