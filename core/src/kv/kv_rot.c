/*
 * kv_rot — the Hadamard rotation of a quantized KV cache (see kv.h).
 *
 * A 4-bit block of 32 values shares one scale, so one large value (keys
 * have a few outlier dimensions) makes the scale coarse for the other 31.
 * Turning every head by an orthonormal Walsh-Hadamard matrix spreads each
 * value over the whole head before it is stored: q.k and sum p v are
 * unchanged in exact arithmetic (H is orthogonal), but the blocks hold
 * values of like size and lose far less to rounding. H is symmetric and its
 * own inverse, so the same matrix rotates back.
 */
#include <math.h>

#include "kv/kv.h"

int32_t kv_rot_block(int32_t head_dim) {
    if (head_dim <= 0) return 0;
    return head_dim & -head_dim; /* the lowest set bit: the largest power of two dividing it */
}

/* Sylvester's construction: H_2n = [[H_n, H_n], [H_n, -H_n]], so entry
 * (i, j) of H_n is (-1)^popcount(i & j), here times 1/sqrt(n). */
void kv_rot_fill(float *h, int32_t head_dim) {
    const int32_t n = kv_rot_block(head_dim);
    const float s = (float)(1.0 / sqrt((double)n));
    for (int32_t i = 0; i < head_dim; i++)
        for (int32_t j = 0; j < head_dim; j++)
            h[(int64_t)i * head_dim + j] =
                i / n != j / n ? 0.0f : (__builtin_popcount((unsigned)(i & j) & (unsigned)(n - 1)) & 1) ? -s : s;
}
