// mul_mat_id — MUL_MAT_ID (ABI 1.4), the experts chosen per token:
// dst[n, s, t] = sum_k src0[k, n, e] * src1[k, s % n_b, t], e = src2[s, t]
// src0 experts [K, N, E] (any dtype dequant reads; rows contiguous), src1 F32
// [K, n_b, T], src2 I32 ids [n_used, T], dst F32 [N, n_used, T].
//
// One output element per invocation, k in order, dequantizing element by
// element as mul_mat.comp does for CPU implementations: the simple product,
// correct on every device; GPUs run it for decoding (up to VK_MMV_MAX_COLS
// tokens), and prompts grouped by expert (mul_mat_id_group.comp, then
// mul_mat_tiled.comp with MUL_MAT_ID: vk_fused.c). An id outside 0..E-1
// cannot be reported from here: its slot's row is written as 0 and nothing
// is read through it.
// The straightforward version: ref_matmul.c (ref_op_mul_mat_id).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 64
layout(local_size_x = WG) in;

// The weight dtype is a specialization constant (one pipeline per dtype):
// the dequantizer's dtype branches fold away.
layout(constant_id = 0) const uint WDT = 0u;

// P.u: [0] N, [1] n_used, [2] T, [3] K, [4] E, [5] n_b
void main() {
    const uint N = P.u[0], n_used = P.u[1], T = P.u[2], K = P.u[3], E = P.u[4], n_b = P.u[5];
    uint g = group_linear() * WG + gl_LocalInvocationID.x;
    uint n = g % N, rest = g / N;
    uint s = rest % n_used, t = rest / n_used;
    if (t >= T) return;
    const uint dst_off = elem_off(4u, uvec4(n, s, t, 0u));
    const int e = int(t2_u32(P.off[2] + s * P.nb[2].x + t * P.nb[2].y));
    if (e < 0 || uint(e) >= E) {
        store_dst(dst_off, 0.0);
        return;
    }
    const uint bs = block_size_of(WDT), block_bytes = P.nb[0].x;
    const uint wrow = P.off[0] + n * P.nb[0].y + uint(e) * P.nb[0].z;
    const uint xrow = P.off[1] + (s % n_b) * P.nb[1].y + t * P.nb[1].z;
    const uint xk = P.nb[1].x;
    float acc = 0.0;
    for (uint k = 0u; k < K; k++) {
        float w;
        if (WDT == DT_F32) w = uintBitsToFloat(t0.d[(wrow >> 2) + k]);
        else if (bs == 1u) w = t0_float(WDT, wrow + 2u * k);
        else w = dequant(WDT, wrow + (k / bs) * block_bytes, k % bs);
        acc += w * t1_float(DT_F32, xrow + k * xk);
    }
    store_dst(dst_off, acc);
}
