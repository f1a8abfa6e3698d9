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
//
// Built with MUL_MAT_ID (mul_mat_id_tiled): the second pass of a grouped
// MUL_MAT_ID, dst[n, s, t] = sum_k src0[k, n, e] * src1[k, s % n_b, t] for
// e = ids[s, t]. mul_mat_id_group.comp has listed each expert's (token,
// slot) pairs in the scratch buffer (t3); workgroup (row tile, column
// tile, expert e) multiplies expert e's weights by the tile's 64 pairs of
// that list as the columns of a small GEMM: the same tiles and loads, with
// column j's activations read from the pair's token row and its outputs
// stored at the pair's (slot, token). So a prompt reads each expert's
// weights once per 64 of its pairs instead of once per pair. The grid is
// sized for the worst case (every pair on one expert); a tile past its
// expert's count returns at once.
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

#ifdef MUL_MAT_ID
// P.u: [0] M (rows of an expert), [1] pairs, [2] row tiles, [3] n_used,
// [4] E, [5] K, [6] n_b, [7] column tiles per expert
void main() {
    const uint M = P.u[0], n_mt = P.u[2], n_used = P.u[3], E = P.u[4], K = P.u[5], n_b = P.u[6];
    const uint lid = gl_LocalInvocationID.x;
    uint g = group_linear();
    uint mt = g % n_mt, rest = g / n_mt;
    uint nt = rest % P.u[7], e = rest / P.u[7];
    if (e >= E) return; // the whole workgroup
    const uint w0 = P.off[3] >> 2, first = t3.d[w0 + e] + nt * BN, last = t3.d[w0 + e + 1u];
    if (first >= last) return; // past this expert's pairs: the whole workgroup
    const uint N = last - first, list = w0 + E + 1u + first; // this tile's pairs: list[0 .. min(N, BN))
    const uint m0 = mt * BM, n0 = 0u;
    const uint wbase = P.off[0] + e * P.nb[0].z;
    const uint rowstride = P.nb[0].y;
    const uint xk = P.nb[1].x;
#else
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
#endif

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
#ifdef MUL_MAT_ID
            uint pr = n < N ? t3.d[list + n] : 0u; // pair: token pr / n_used, slot pr % n_used
            uint xo = P.off[1] + (pr % n_used % n_b) * P.nb[1].y + (pr / n_used) * P.nb[1].z;
#else
            uint xo = xbase + n * xn;
#endif
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
#ifdef MUL_MAT_ID
            if (m < M && n < N) {
                uint pr = t3.d[list + n];
                store_dst(elem_off(4u, uvec4(m, pr % n_used, pr / n_used, 0u)), acc[i][j]);
            }
#else
            if (m < M && n < N) store_dst(elem_off(4u, uvec4(m, n, b2, b3)), acc[i][j]);
#endif
        }
    }
}
