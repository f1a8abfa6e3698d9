// flash_attn_reduce — the second pass of FLASH_ATTN split over the keys
// (flash_attn.comp with P.u[1] = S > 1): one workgroup per (query i,
// head h) combines the S partial states (m_s, l_s, acc_s[D]) stored at
// (0..D+1, s, i, h) of src0 (F32 [D + 2, S, n_q, H]):
//   M = max_s m_s,  L = sum_s l_s e^(m_s - M),
//   dst[d, h, i] = sum_s acc_s[d] e^(m_s - M) / L
// Splits whose keys were all masked (m_s = -inf) weigh nothing; a query
// with no visible key at all gets zeros, as in ref.
// dst F32 [D, H, n_q, 1]; no barriers (each invocation owns dims d).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;

void main() {
    const uint D = P.ne[4].x, S = P.ne[0].y, n_q = P.ne[0].z, H = P.ne[0].w;
    uint t = group_linear();
    if (t >= n_q * H) return;
    uint i = t % n_q, h = t / n_q;
    float M = uintBitsToFloat(0xff800000u);
    for (uint s = 0u; s < S; s++) M = max(M, load0(uvec4(0u, s, i, h)));
    bool none = isinf(M) && M < 0.0;
    float L = 0.0;
    for (uint s = 0u; s < S && !none; s++) {
        float m = load0(uvec4(0u, s, i, h));
        if (!(isinf(m) && m < 0.0)) L += load0(uvec4(1u, s, i, h)) * exp(m - M);
    }
    float inv = L > 0.0 ? 1.0 / L : 0.0;
    for (uint d = gl_LocalInvocationID.x; d < D; d += 64u) {
        float a = 0.0;
        for (uint s = 0u; s < S && !none; s++) {
            float m = load0(uvec4(0u, s, i, h));
            if (!(isinf(m) && m < 0.0)) a += load0(uvec4(d + 2u, s, i, h)) * exp(m - M);
        }
        store_dst(elem_off(4u, uvec4(d, h, i, 0u)), a * inv);
    }
}
