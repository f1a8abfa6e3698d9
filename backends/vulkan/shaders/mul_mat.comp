// mul_mat — dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
//
// One workgroup per output row m and NCOLS columns n (NCOLS = 1: the
// matrix-vector product of decoding; more columns reuse each dequantized
// weight NCOLS times). The 64 invocations stride over k, each dequantizing
// its weight elements (any supported dtype, see dequant in common.glsl),
// then the partial sums are reduced across the workgroup (subgroupAdd with
// USE_SUBGROUPS, a shared-memory tree otherwise).
// With PER_INVOCATION each invocation computes its NCOLS outputs alone,
// k in order, with no shared memory or barriers: the fast shape for CPU
// implementations (lavapipe), where a barrier costs a coroutine switch.
// ACC_F64 (with PER_INVOCATION, on devices with fp64) accumulates in double
// in k order as ref does: the products of two floats are exact in double,
// so the results are ref's to the bit for float weights.
// The straightforward version: ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#ifdef PER_INVOCATION
#define WG 64
layout(local_size_x = WG) in;
#else
#include "reduce.glsl"
#endif

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
#ifdef PER_INVOCATION
    uint g = group_linear() * WG + gl_LocalInvocationID.x; // one output block per invocation
    const uint lid = 0u, step = 1u;
#else
    uint g = group_linear();
    uint lid = gl_LocalInvocationID.x;
    const uint step = WG;
#endif
    uint m = g % M, rest = g / M;
    uint cb = rest % n_cb, b = rest / n_cb;
    if (b >= P.u[7]) return; // whole workgroup (or this invocation, PER_INVOCATION)
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
    for (uint k = lid; k < K; k += step) {
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
#ifdef PER_INVOCATION
        float s = float(acc[c]);
#else
        float s = wg_sum(acc[c]);
#endif
        if (lid == 0u && c < ncols) store_dst(elem_off(4u, uvec4(m, n0 + c, b2, b3)), s);
    }
}
