// mul_mat — dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
//
// One workgroup per output row m and NCOLS columns n (NCOLS = 1: the
// matrix-vector product of decoding; more columns reuse each dequantized
// weight NCOLS times). The 64 invocations stride over k, each dequantizing
// its weight elements (any supported dtype, see dequant in common.glsl),
// then the partial sums are reduced across the workgroup (subgroupAdd with
// USE_SUBGROUPS, a shared-memory tree otherwise).
// The straightforward version: ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "reduce.glsl"

#ifndef NCOLS
#define NCOLS 1
#endif

// P.u: [0] M, [1] N, [2] column blocks, [3] r2, [4] r3, [5] K, [6] B2, [7] B2*B3
void main() {
    const uint M = P.u[0], N = P.u[1], n_cb = P.u[2], K = P.u[5], B2 = P.u[6];
    uint g = group_linear();
    uint m = g % M, rest = g / M;
    uint cb = rest % n_cb, b = rest / n_cb;
    if (b >= P.u[7]) return; // whole workgroup
    uint b2 = b % B2, b3 = b / B2;
    uint n0 = cb * NCOLS;
    uint lid = gl_LocalInvocationID.x;

    uint dtype = P.dt[0];
    uint bs = block_size_of(dtype);
    uint wrow = P.off[0] + m * P.nb[0].y + (b2 / P.u[3]) * P.nb[0].z + (b3 / P.u[4]) * P.nb[0].w;
    uint xbase = P.off[1] + b2 * P.nb[1].z + b3 * P.nb[1].w;

    float acc[NCOLS];
    for (uint c = 0u; c < NCOLS; c++) acc[c] = 0.0;
    for (uint k = lid; k < K; k += WG) {
        float w = bs == 1u ? t0_float(dtype, wrow + k * P.nb[0].x)
                           : dequant(dtype, wrow + (k / bs) * P.nb[0].x, k % bs);
        for (uint c = 0u; c < NCOLS; c++)
            if (n0 + c < N) acc[c] += w * t1_float(P.dt[1], xbase + k * P.nb[1].x + (n0 + c) * P.nb[1].y);
    }
    for (uint c = 0u; c < NCOLS; c++) {
        float s = wg_sum(acc[c]);
        if (lid == 0u && n0 + c < N) store_dst(elem_off(4u, uvec4(m, n0 + c, b2, b3)), s);
    }
}
