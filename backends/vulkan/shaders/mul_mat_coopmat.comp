// mul_mat_coopmat — the prompt product on the matrix units
// (GL_KHR_cooperative_matrix), the same product as mul_mat_tiled.comp:
//     dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
//
// Layout expected: rows of src0 contiguous (F16, BF16 or a quantized type:
// F32 weights stay on the tiled kernel, whose f32 products their 1e-5
// tolerance needs); src1 and dst any strides.
//
// Each workgroup of 128 invocations (4 subgroups of 32: vk_features.c
// selects this kernel only where the subgroup size is 32) computes a
// BM x BN = 64 x 64 tile of dst, stepping over k by BK = 64:
//   1. each invocation dequantizes one 32-weight unit (units.glsl) of one of
//      the tile's 64 rows into shared memory as F16 (row lid / 2, unit
//      lid % 2); the workgroup loads the tile's 64 x 64 activations, each
//      pass 2 columns of 64 consecutive k (coalesced), rounded to F16;
//   2. after a barrier subgroup s multiplies its 32 x 32 quarter (rows
//      32 (s % 2), columns 32 (s / 2)) as 2 x 2 cooperative 16 x 16 x 16
//      products per 16 k: A (weights) row-major, B (activations) column-major
//      from shared memory, accumulating in ACC_T (f32, or f16 where the
//      device offers only that: -DACC_F16).
// The accumulators go out through a per-subgroup 16 x 16 staging area in
// shared memory, so any dst strides and partial tiles are stored element by
// element (store_dst).
//
// -DCOOPMAT_EMULATE builds the same kernel with the cooperative operations
// written out in plain GLSL (each of 32 lanes of a "subgroup" of
// invocations lid / 32 owns 8 elements of each accumulator), for devices
// without VK_KHR_cooperative_matrix: lavapipe runs it, so the tiling,
// dequantization, F16 staging and stores are proven there; only the
// cooperative intrinsics themselves need a GPU (bench/gpu-check.sh).
// The straightforward version: mul_mat.comp and ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifndef COOPMAT_EMULATE
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#endif
#include "common.glsl"
#include "units.glsl"

#define BM 64
#define BN 64
#define BK 64
#define WG 128
#define CM 16            // cooperative matrix size: 16 x 16 x 16
#define SA (BK + 8)      // shared row stride in halves: 144 bytes, a multiple of 16
layout(local_size_x = WG) in;

layout(constant_id = 0) const uint WDT = 0u;
layout(constant_id = 1) const uint XDT = 0u;

#ifdef ACC_F16
#define ACC_T float16_t
#else
#define ACC_T float
#endif

shared float16_t As[BM * SA];      // weights: row m at m * SA, then k
shared float16_t Bs[BN * SA];      // activations: column n at n * SA, then k
shared ACC_T Cs[(WG / 32) * CM * CM]; // per subgroup: one accumulator, column-major

#ifndef COOPMAT_EMULATE
#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, CM, CM, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, CM, CM, gl_MatrixUseB>
#define FRAG_C coopmat<ACC_T, gl_ScopeSubgroup, CM, CM, gl_MatrixUseAccumulator>
#else
// Emulated accumulator: lane l holds elements e = l + 32 t (t < 8) of the
// 16 x 16 result, row e % 16 and column e / 16.
struct FRAG_C { ACC_T v[8]; };
#endif

// Load the tile's weights for k0..k0+63: invocation lid, row lid / 2, unit
// (k0 / 32) + lid % 2; rows past M, units past K and the partial unit of a
// float row whose length is not a multiple of 32 are zeros or read element
// by element.
void load_weights(uint wbase, uint rowstride, uint m0, uint M, uint K, uint k0, uint lid) {
    const uint r = lid >> 1, half_ = lid & 1u, m = m0 + r;
    const uint kb = k0 + half_ * 32u;
    float w[32];
    if (m < M && kb + 32u <= K) {
        unit_dequant(WDT, wbase + m * rowstride, kb / 32u, w);
    } else {
        [[unroll]] for (uint j = 0u; j < 32u; j++)
            w[j] = m < M && kb + j < K ? float_weight(WDT, wbase + m * rowstride, kb + j) : 0.0;
    }
    [[unroll]] for (uint j = 0u; j < 32u; j++) As[r * SA + half_ * 32u + j] = float16_t(w[j]);
}

// Load the tile's activations for k0..k0+63: pass p covers columns 2p and
// 2p + 1, invocation lid column 2p + lid / 64 at k0 + lid % 64.
void load_activations(uint xbase, uint xk, uint xn, uint n0, uint N, uint K, uint k0, uint lid) {
    const uint k = k0 + (lid & 63u);
    [[unroll]] for (uint p = 0u; p < BN / 2u; p++) {
        const uint c = 2u * p + (lid >> 6), n = n0 + c;
        const float v = n < N && k < K ? t1_float(XDT, xbase + n * xn + k * xk) : 0.0;
        Bs[c * SA + (lid & 63u)] = float16_t(v);
    }
}

#ifdef COOPMAT_EMULATE
// acc += A x B for the 16 x 16 x 16 block: A rows a_row.. of As at column
// kk, B columns b_col.. of Bs at row kk (lane's 8 elements)
void emu_mul_add(inout FRAG_C acc, uint a_row, uint b_col, uint kk, uint lane) {
    [[unroll]] for (uint t = 0u; t < 8u; t++) {
        const uint e = lane + 32u * t, m = e & 15u, n = e >> 4;
        ACC_T s = acc.v[t];
        [[unroll]] for (uint k = 0u; k < CM; k++)
            s += ACC_T(As[(a_row + m) * SA + kk + k]) * ACC_T(Bs[(b_col + n) * SA + kk + k]);
        acc.v[t] = s;
    }
}
#endif

// P.u: [0] M, [1] N, [2] row tiles, [3] r2, [4] r3, [5] K, [6] B2, [7] B2*B3
void main() {
    const uint M = P.u[0], N = P.u[1], n_mt = P.u[2], K = P.u[5], B2 = P.u[6];
    const uint lid = gl_LocalInvocationID.x;
    const uint n_nt = (N + BN - 1u) / BN;
    uint g = group_linear();
    uint mt = g % n_mt, rest = g / n_mt;
    uint nt = rest % n_nt, b = rest / n_nt;
    if (b >= P.u[7]) return; // the whole workgroup
    uint b2 = b % B2, b3 = b / B2;
    const uint m0 = mt * BM, n0 = nt * BN;

    const uint wbase = P.off[0] + (b2 / P.u[3]) * P.nb[0].z + (b3 / P.u[4]) * P.nb[0].w;
    const uint rowstride = P.nb[0].y;
    const uint xbase = P.off[1] + b2 * P.nb[1].z + b3 * P.nb[1].w, xk = P.nb[1].x, xn = P.nb[1].y;

#ifdef COOPMAT_EMULATE
    const uint sg = lid >> 5, lane = lid & 31u;
#else
    const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
#endif
    const uint wm = (sg & 1u) * 32u, wn = (sg >> 1) * 32u; // the subgroup's quarter of the tile

    FRAG_C acc[2][2];
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
#ifdef COOPMAT_EMULATE
            [[unroll]] for (uint t = 0u; t < 8u; t++) acc[i][j].v[t] = ACC_T(0.0);
#else
            acc[i][j] = FRAG_C(ACC_T(0.0));
#endif
        }

    for (uint k0 = 0u; k0 < K; k0 += BK) {
        load_weights(wbase, rowstride, m0, M, K, k0, lid);
        load_activations(xbase, xk, xn, n0, N, K, k0, lid);
        barrier();
#ifdef COOPMAT_EMULATE
        // (loops kept: the unrolled emulation would be 2048 products long)
        for (uint kk = 0u; kk < BK; kk += CM)
            for (uint i = 0u; i < 2u; i++)
                for (uint j = 0u; j < 2u; j++) emu_mul_add(acc[i][j], wm + 16u * i, wn + 16u * j, kk, lane);
#else
        [[unroll]] for (uint kk = 0u; kk < BK; kk += CM) {
            FRAG_A fa[2];
            FRAG_B fb[2];
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                coopMatLoad(fa[i], As, (wm + 16u * i) * SA + kk, SA, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < 2u; j++)
                coopMatLoad(fb[j], Bs, (wn + 16u * j) * SA + kk, SA, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0u; i < 2u; i++)
                [[unroll]] for (uint j = 0u; j < 2u; j++) acc[i][j] = coopMatMulAdd(fa[i], fb[j], acc[i][j]);
        }
#endif
        barrier();
    }

    // Out through the subgroup's staging area: element (row r, column c) at
    // sg * 256 + c * 16 + r; lane l stores elements l + 32 t.
    const uint cbase = sg * (CM * CM);
    [[unroll]] for (uint i = 0u; i < 2u; i++)
        [[unroll]] for (uint j = 0u; j < 2u; j++) {
#ifdef COOPMAT_EMULATE
            [[unroll]] for (uint t = 0u; t < 8u; t++) {
                Cs[cbase + lane + 32u * t] = acc[i][j].v[t]; // e = 16 c + r
            }
#else
            coopMatStore(acc[i][j], Cs, cbase, CM, gl_CooperativeMatrixLayoutColumnMajor);
#endif
            barrier();
            [[unroll]] for (uint t = 0u; t < 8u; t++) {
                const uint e = lane + 32u * t;
                const uint m = m0 + wm + 16u * i + (e & 15u), n = n0 + wn + 16u * j + (e >> 4);
                if (m < M && n < N) store_dst(elem_off(4u, uvec4(m, n, b2, b3)), float(Cs[cbase + e]));
            }
            barrier();
        }
}
