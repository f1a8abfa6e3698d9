// mul_mat — dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
// for CPU implementations (lavapipe): the simple product, kept as their
// kernel (GPUs run mul_mat_vec.comp and mul_mat_tiled.comp).
//
// Each invocation computes one output row m for NCOLS columns n alone, k in
// order, dequantizing element by element (dequant in common.glsl), with no
// shared memory or barriers: the fast shape where a barrier costs a
// coroutine switch. ACC_F64 (devices with fp64) accumulates in double in k
// order as ref does: the products of two floats are exact in double, so the
// results are ref's to the bit for float weights.
// The straightforward version: ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 64
layout(local_size_x = WG) in;

#ifndef NCOLS
#define NCOLS 1
#endif

// The weight and activation dtypes are specialization constants: each
// (shader, dtypes) pair is its own pipeline, so the dtype branches of the
// loaders fold away (a generic loader made lavapipe 16x slower).
layout(constant_id = 0) const uint WDT = 0u;
layout(constant_id = 1) const uint XDT = 0u;

// P.u: [0] M, [1] N, [2] column blocks, [3] r2, [4] r3, [5] K, [6] B2, [7] B2*B3
void main() {
    const uint M = P.u[0], N = P.u[1], n_cb = P.u[2], K = P.u[5], B2 = P.u[6];
    uint g = group_linear() * WG + gl_LocalInvocationID.x; // one output block per invocation
    uint m = g % M, rest = g / M;
    uint cb = rest % n_cb, b = rest / n_cb;
    if (b >= P.u[7]) return;
    uint b2 = b % B2, b3 = b / B2;
    uint n0 = cb * NCOLS;

    const uint bs = block_size_of(WDT), block_bytes = P.nb[0].x;
    const uint wrow = P.off[0] + m * P.nb[0].y + (b2 / P.u[3]) * P.nb[0].z + (b3 / P.u[4]) * P.nb[0].w;
    const uint xbase = P.off[1] + b2 * P.nb[1].z + b3 * P.nb[1].w;
    const uint xk = P.nb[1].x, xn = P.nb[1].y;
    const uint xcol = n0 * xn; // byte offset of column n0
    const uint ncols = min(uint(NCOLS), N - n0);

#ifdef ACC_F64
    double acc[NCOLS];
#else
    float acc[NCOLS];
#endif
    for (uint c = 0u; c < NCOLS; c++) acc[c] = 0.0;
    for (uint k = 0u; k < K; k++) {
        // rows of src0 are contiguous (supports_op): element k at wrow + k * size
        float w;
        if (WDT == DT_F32) w = uintBitsToFloat(t0.d[(wrow >> 2) + k]);
        else if (bs == 1u) w = t0_float(WDT, wrow + 2u * k);
        else w = dequant(WDT, wrow + (k / bs) * block_bytes, k % bs);
        uint xo = xbase + xcol + k * xk;
        for (uint c = 0u; c < NCOLS; c++)
#ifdef ACC_F64
            if (c < ncols) acc[c] += double(w) * double(t1_float(XDT, xo + c * xn));
#else
            if (c < ncols) acc[c] += w * t1_float(XDT, xo + c * xn);
#endif
    }
    for (uint c = 0u; c < NCOLS; c++) {
        if (c < ncols) store_dst(elem_off(4u, uvec4(m, n0 + c, b2, b3)), float(acc[c]));
    }
}
