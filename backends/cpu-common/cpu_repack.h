/*
 * cpu_repack — the CPU plugins' private decoding layout of Q4_K weights:
 * rows interleaved CPU_XROWS at a time, made once per weight and kept.
 *
 * Decoding multiplies each weight row by one activation column. Row by row
 * (dotr), every 256-value block costs its 6-bit scales' unpacking, the
 * activation loads and a horizontal sum, and the kernel is bound by
 * instructions, not memory (~12 ns a block at one thread here, whether the
 * matrix is in L1 or in memory). In the x16 layout one vector lane holds
 * one row: each 4-byte group of an activation block is broadcast once and
 * multiplied into 16 rows at a time (vpdpbusd), the scales are bytes ready
 * to widen, and no horizontal sum is left until the row's end (~2.4 ns a
 * block in L1). The weights still stream in address order: a group of 16
 * rows is stored block after block, groups one after the other.
 *
 * Layout of one group of 16 rows, per 256-value block ib (cpu_q4kx16):
 *   d[r], dmin[r]      the rows' fp16 scales as in the block
 *   sc[s][r], mn[s][r] sub-block s's 6-bit scale and min, one byte each
 *   qs[c][g][r][4]     bytes 32c + 4g .. + 3 of row r's qs: low nibbles
 *                      are elements 64c + 4g.., high ones 64c + 32 + 4g..
 * 2368 bytes for 16 blocks (2304 plain: +2.8%).
 *
 * The integer sums per block and row are the plain dot's (exact); the float
 * steps differ from dotr's (one conversion of the block's whole sum instead
 * of sixteen lanes'), so a repacked product is not bit for bit the row-by-row
 * one: it is used only where the host says the weight is constant
 * (TSR_TENSOR_WEIGHT), for one activation column.
 *
 * The weights are the host's and may be mapped from the model file; the
 * repacked copy is the queue's (cpu_xcache), made the first time a decoding
 * product reads the weight and freed with the queue. A queue lives no
 * longer than the context that owns it, which lives no longer than the
 * model, so a weight's address names the same bytes for the cache's life.
 * TESSERA_CPU_REPACK=0 turns it off.
 */
#ifndef TESSERA_CPU_COMMON_CPU_REPACK_H
#define TESSERA_CPU_COMMON_CPU_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include <tessera/plugin.h>

enum { CPU_XROWS = 16 };

typedef struct cpu_q4kx16 {
    uint16_t d[16], dmin[16];
    uint8_t sc[8][16], mn[8][16];
    uint8_t qs[4][8][16][4];
} cpu_q4kx16;

/* out[16 * gi + r] = row 16 * gi + r of the weight against act (one act8k
 * row of K values), gi < n_groups; wx: the groups' repacked blocks. */
typedef void (*cpu_dotx_fn)(int64_t K, const void *wx, const void *act, int64_t n_groups, float *out);

/* Bytes of one group of 16 rows of K values in the x16 layout of dtype,
 * or 0 when dtype has none. */
size_t cpu_x_group_bytes(int32_t dtype, int64_t K);

/* Repack rows [16 * gi, 16 * gi + 16) of a weight (rows row_stride bytes
 * apart) for gi in [g0, g1) into out (group gi at gi * group bytes). */
void cpu_x_repack(int32_t dtype, const uint8_t *w, size_t row_stride, int64_t K, int64_t g0, int64_t g1,
                  uint8_t *out);

/* The repacked weights of one queue: weight address -> copy. */
typedef struct cpu_xentry {
    const void *src;
    int32_t dtype;
    int64_t ne0, ne1, ne2; /* ne2: MUL_MAT_ID's experts, each repacked alone */
    int64_t nb1;
    void *x; /* NULL: not repacked (out of memory): read in place */
} cpu_xentry;

typedef struct cpu_xcache {
    cpu_xentry *slots; /* open addressing on src */
    int64_t cap, n;
    size_t bytes; /* repacked bytes held */
} cpu_xcache;

/* The entry for weight t (not yet repacked: x NULL and *fresh 1), or NULL
 * out of memory. */
cpu_xentry *cpu_xcache_get(cpu_xcache *c, const tsr_tensor *t, const void *src, int *fresh);
void cpu_xcache_free(cpu_xcache *c);

#endif
