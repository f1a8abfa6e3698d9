// mul_mat_tiled — the prompt product as a compute kernel (tiled GEMM):
//     dst[m, n, b2, b3] = sum_k src0[k, m, b2/r2, b3/r3] * src1[k, n, b2, b3]
//
// Layout expected: rows of src0 contiguous (any supported dtype); src1 and
// dst any strides.
//
// Each workgroup of 256 invocations computes a BM x BN = 64 x 64 tile of
// dst, stepping over k by BK = 32 (one 32-weight unit, units.glsl):
//   1. invocations 0..63 each dequantize one unit (32 weights, read with
//      128-bit loads) of one of the tile's 64 rows into shared memory; all
//      256 load 8 activations each of the tile's 64 columns;
//   2. after a barrier each invocation accumulates a 4 x 4 block of outputs
//      in registers (rows ty + 16 i, columns tx + 16 j: conflict-free shared
//      reads with the padded row stride 33), reading each shared value once
//      per 4 products.
// So a weight read from memory serves 64 columns and an activation 64 rows.
// Rows of float weights whose length is not a multiple of 32 end with a
// partial unit read element by element; tiles past M or N load zeros.
// The straightforward version: mul_mat.comp (one row per workgroup) and
// ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : enable
#include "common.glsl"
#include "units.glsl"

#define BM 64
#define BN 64
#define BK 32
#define WG 256
#define TM 4
#define TN 4
layout(local_size_x = WG) in;

layout(constant_id = 0) const uint WDT = 0u;
layout(constant_id = 1) const uint XDT = 0u;

shared float As[BM][BK + 1]; // weights: row, k
shared float Bs[BN][BK + 1]; // activations: column, k

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

    const uint tx = lid % 16u, ty = lid / 16u;
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < TM; i++)
        [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;

    // activations: invocation lid loads column lid / 4, k (lid % 4) * 8 .. + 7
    const uint bcol = lid >> 2, bk0 = (lid & 3u) * 8u;
    for (uint k0 = 0u; k0 < K; k0 += BK) {
        if (lid < BM) {
            uint m = m0 + lid;
            float w[32];
            if (m < M && k0 + BK <= K) {
                unit_dequant(WDT, wbase + m * rowstride, k0 / BK, w);
            } else { // past the last row, or a partial unit of a float row
                [[unroll]] for (uint j = 0u; j < 32u; j++)
                    w[j] = m < M && k0 + j < K ? float_weight(WDT, wbase + m * rowstride, k0 + j) : 0.0;
            }
            [[unroll]] for (uint j = 0u; j < 32u; j++) As[lid][j] = w[j];
        }
        {
            uint n = n0 + bcol;
            uint xo = xbase + n * xn;
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                uint k = k0 + bk0 + j;
                Bs[bcol][bk0 + j] = n < N && k < K ? t1_float(XDT, xo + k * xk) : 0.0;
            }
        }
        barrier();
        [[unroll]] for (uint k = 0u; k < BK; k++) {
            float a[TM], bv[TN];
            [[unroll]] for (uint i = 0u; i < TM; i++) a[i] = As[ty + 16u * i][k];
            [[unroll]] for (uint j = 0u; j < TN; j++) bv[j] = Bs[tx + 16u * j][k];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] += a[i] * bv[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint m = m0 + ty + 16u * i;
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint n = n0 + tx + 16u * j;
            if (m < M && n < N) store_dst(elem_off(4u, uvec4(m, n, b2, b3)), acc[i][j]);
        }
    }
}
