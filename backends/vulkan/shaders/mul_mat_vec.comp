// mul_mat_vec — the matrix-vector product of decoding, at memory speed:
//     dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
// for one activation column n per workgroup (a few columns: one workgroup
// each, the weights then come from cache).
//
// Layout expected: rows of src0 contiguous (any supported dtype, blocks of
// 32 or 256 elements back to back); src1 any strides (contiguous F32
// columns are read 128 bits at a time).
//
// ROWS consecutive rows per workgroup of WG invocations. Invocation t takes
// the 32-element units t, t + WG, ... of the row (units.glsl): it reads the
// unit's 32 activations once into registers, then for each of the ROWS rows
// reads that row's unit with 128-bit loads (adjacent invocations read
// adjacent blocks: every load of a subgroup is one contiguous stretch of
// the row) and dots it in registers, without storing dequantized weights.
// The ROWS partial sums are reduced with subgroupAdd and one shared-memory
// step (USE_SUBGROUPS), or a shared-memory tree (devices without subgroup
// arithmetic). Rows of a length that is not a multiple of 32 (float
// weights) end with an element-wise tail.
// USE_IDOT (a glslc and a device with integer dot products; quantized
// weights of idot_type): each invocation quantizes its unit's activations to
// 8 bits once (one scale per 32, as Q8_0) and every row's unit is dotted
// with 4 x 8-bit integer dot products on the packed quants; the minimum
// terms use the unrounded activation sums. (Quantizing once per step into
// a buffer would save that work per workgroup; the unit's quantization is
// amortized over ROWS rows and is free where the product waits on memory.)
// The straightforward version: mul_mat.comp (one row per invocation, one
// element at a time) and ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#ifdef USE_IDOT
#extension GL_EXT_integer_dot_product : require
#endif
#include "common.glsl"
#include "units.glsl"

#ifndef WG
#define WG 64
#endif
#ifndef ROWS
#define ROWS 4
#endif
layout(local_size_x = WG) in;

layout(constant_id = 0) const uint WDT = 0u;
layout(constant_id = 1) const uint XDT = 0u;

// per row: one value per subgroup (USE_SUBGROUPS; WG bounds their count)
// or per invocation
shared float red[ROWS][WG];

// Sum v[r] over the workgroup for each row r; the result is valid in
// invocation r (r < ROWS).
void reduce_rows(inout float v[ROWS], uint lid) {
#ifdef USE_SUBGROUPS
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
        float s = subgroupAdd(v[r]);
        if (subgroupElect()) red[r][gl_SubgroupID] = s;
    }
    barrier();
    if (lid < ROWS) {
        float s = 0.0;
        for (uint i = 0u; i < gl_NumSubgroups; i++) s += red[lid][i];
        v[lid] = s;
    }
#else
    [[unroll]] for (uint r = 0u; r < ROWS; r++) red[r][lid] = v[r];
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) {
            [[unroll]] for (uint r = 0u; r < ROWS; r++) red[r][lid] += red[r][lid + s];
        }
        barrier();
    }
    if (lid < ROWS) v[lid] = red[lid][0];
#endif
}

// P.u: [0] M, [1] N, [2] row groups, [3] r2, [4] r3, [5] K, [6] B2, [7] B2*B3
void main() {
    const uint M = P.u[0], N = P.u[1], n_rg = P.u[2], K = P.u[5], B2 = P.u[6];
    const uint lid = gl_LocalInvocationID.x;
    uint g = group_linear();
    uint rg = g % n_rg, rest = g / n_rg;
    uint n = rest % N, b = rest / N;
    if (b >= P.u[7]) return; // the whole workgroup
    uint b2 = b % B2, b3 = b / B2;
    uint m0 = rg * ROWS;

    const uint wbase = P.off[0] + (b2 / P.u[3]) * P.nb[0].z + (b3 / P.u[4]) * P.nb[0].w;
    const uint rowstride = P.nb[0].y;
    const uint xo = P.off[1] + n * P.nb[1].y + b2 * P.nb[1].z + b3 * P.nb[1].w, xk = P.nb[1].x;
    const bool xwide = XDT == DT_F32 && xk == 4u; // contiguous f32 column

    float acc[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; r++) acc[r] = 0.0;
    const uint units = K / 32u;
    for (uint u = lid; u < units; u += WG) {
        float x[32];
        uint xu = xo + u * 32u * xk;
        if (xwide && (xu & 15u) == 0u) {
            [[unroll]] for (uint c = 0u; c < 8u; c++) {
                uvec4 v = t1v.d[(xu >> 4) + c];
                x[4u * c] = uintBitsToFloat(v.x); x[4u * c + 1u] = uintBitsToFloat(v.y);
                x[4u * c + 2u] = uintBitsToFloat(v.z); x[4u * c + 3u] = uintBitsToFloat(v.w);
            }
        } else {
            [[unroll]] for (uint j = 0u; j < 32u; j++) x[j] = t1_float(XDT, xu + j * xk);
        }
        float xs0 = 0.0, xs1 = 0.0;
        [[unroll]] for (uint j = 0u; j < 16u; j++) { xs0 += x[j]; xs1 += x[16u + j]; }
#ifdef USE_IDOT
        if (idot_type(WDT)) {
            int xq[8];
            float xd = quantize_unit(x, xq);
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                if (m0 + r < M) acc[r] += unit_dot_idot(WDT, wbase + (m0 + r) * rowstride, u, xq, xd, xs0, xs1);
            continue;
        }
#endif
        [[unroll]] for (uint r = 0u; r < ROWS; r++)
            if (m0 + r < M) acc[r] += unit_dot(WDT, wbase + (m0 + r) * rowstride, u, x, xs0, xs1);
    }
    // float weights: the last K % 32 elements, one per invocation
    for (uint k = units * 32u + lid; k < K; k += WG) {
        float xv = t1_float(XDT, xo + k * xk);
        [[unroll]] for (uint r = 0u; r < ROWS; r++)
            if (m0 + r < M) acc[r] += float_weight(WDT, wbase + (m0 + r) * rowstride, k) * xv;
    }
    reduce_rows(acc, lid);
    if (lid < ROWS && m0 + lid < M) {
        float s = acc[0];
        [[unroll]] for (uint r = 1u; r < ROWS; r++) if (r == lid) s = acc[r];
        store_dst(elem_off(4u, uvec4(m0 + lid, n, b2, b3)), s);
    }
}
