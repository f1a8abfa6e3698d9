// flash_attn_inv — FLASH_ATTN on CPU implementations of Vulkan (lavapipe):
// one invocation per (query i, head h) computes its whole output row alone,
// without barriers or shared memory. There a workgroup barrier is a
// coroutine switch, and it makes the shader a coroutine whose compile time
// grows steeply with its size (each K/V dtype pair is its own pipeline).
// The contract is flash_attn.comp's: q [D, n_q, H, 1], k/v [D, n_kv, H_kv, 1]
// of dtypes KDT/VDT (F32, F16, BF16 or a KV cache block type), mask
// [n_kv, >= n_q] optional (P.u[0] = 1), dst F32 [D, H, n_q, 1]; query head h
// reads kv head h / (H / H_kv); a query whose every score is -inf gets zeros.
// One pass over the keys with the online softmax: the weights and the
// accumulator are rescaled when the running maximum grows. Each invocation
// keeps q and its accumulator in its own slice of shared memory (16 KiB for
// the workgroup); no barrier is needed.
// The straightforward version: ref_attn.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

// lavapipe's SIMD width: small workgroups spread over its threads
layout(local_size_x = 8) in;
layout(constant_id = 0) const uint KDT = 0u;
layout(constant_id = 1) const uint VDT = 0u;

shared float sq[8 * 256], sacc[8 * 256]; // D <= 256 (vk_op_supported)

// The loops over head dimensions go 8 at a time, the 8 written out by the
// preprocessor (UNROLL8): gallivm (lavapipe) ends every loop of an
// invocation once it has run 65535 iterations in all (counting each loop's
// final test), so each key costs at most 3 * (ceil(D / 8) + 1) + 1 of them
// (vk_ops.c: attn_fits declines larger nodes on CPU implementations). More
// unrolling costs compile time: every lavapipe compute shader is an LLVM
// coroutine, whose compile time grows steeply with its basic blocks.
#define UNROLL4(X, u) X(u) X(u + 1u) X(u + 2u) X(u + 3u)
#define UNROLL8(X) UNROLL4(X, 0u) UNROLL4(X, 4u)

void main() {
    const uint D = P.ne[0].x, n_q = P.ne[0].y, H = P.ne[0].z;
    const uint n_kv = P.ne[1].y, group = H / P.ne[1].z;
    uint t = group_linear() * 8u + gl_LocalInvocationID.x;
    if (t >= n_q * H) return;
    uint i = t % n_q, h = t / n_q, g = h / group;
    const float neg_inf = uintBitsToFloat(0xff800000u);
    const float scale = P.fp[0];
    const uint base = gl_LocalInvocationID.x * 256u;
#define INIT(u) if (d0 + u < D) { sq[base + d0 + u] = load0(uvec4(d0 + u, i, h, 0u)); sacc[base + d0 + u] = 0.0; }
    for (uint d0 = 0u; d0 < D; d0 += 8u) { UNROLL8(INIT) }
    float m = neg_inf, l = 0.0;
    for (uint j = 0u; j < n_kv; j++) {
        float s = 0.0;
        if (P.u[0] != 0u) {
            s = load3(uvec4(j, i, 0u, 0u));
            if (isinf(s) && s < 0.0) continue; // masked: weight 0
        }
        float dot_ = 0.0;
#define DOT(u) if (d0 + u < D) dot_ += sq[base + d0 + u] * load1_as(KDT, uvec4(d0 + u, j, g, 0u));
        for (uint d0 = 0u; d0 < D; d0 += 8u) { UNROLL8(DOT) }
        s += scale * dot_;
        if (isinf(s) && s < 0.0) continue;
        if (s > m) { // a new maximum: rescale what was summed under the old one
            float corr = isinf(m) ? 0.0 : exp(m - s);
            l *= corr;
#define RESCALE(u) if (d0 + u < D) sacc[base + d0 + u] *= corr;
            for (uint d0 = 0u; d0 < D; d0 += 8u) { UNROLL8(RESCALE) }
            m = s;
        }
        float p = exp(s - m);
        l += p;
#define ACC(u) if (d0 + u < D) sacc[base + d0 + u] += p * load2_as(VDT, uvec4(d0 + u, j, g, 0u));
        for (uint d0 = 0u; d0 < D; d0 += 8u) { UNROLL8(ACC) }
    }
    float inv = l > 0.0 ? 1.0 / l : 0.0;
#define STORE(u) if (d0 + u < D) store_dst(elem_off(4u, uvec4(d0 + u, h, i, 0u)), sacc[base + d0 + u] * inv);
    for (uint d0 = 0u; d0 < D; d0 += 8u) { UNROLL8(STORE) }
}
