// flash_attn — fused attention, one workgroup per (query i, head h):
//   s_j = scale * (q_i . k_j) + mask[j, i];  out = softmax(s) . v
// Keys go in chunks of WG: each invocation scores one key of the chunk,
// the chunk's max and weight sum are workgroup reductions, and the softmax
// runs online (the accumulator is rescaled when the max grows). Invocation
// t owns output dims t, t + WG, ... (D <= 4 * WG).
// q [D, n_q, H, 1] (kept in shared memory), k/v [D, n_kv, H_kv, 1] (F32,
// F16, BF16 or a KV cache block type: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// dequantized element by element as ref does; their dtypes are the
// specialization constants KDT and VDT, one pipeline per pair),
// mask [n_kv, >= n_q] optional (P.u[0] = 1), dst F32 [D, H, n_q, 1]; query
// head h reads kv head h / (H / H_kv). A query whose every score is -inf
// gets zeros, as in ref.
// Split over the keys (P.u[1] = S > 1 splits of P.u[2] keys; decoding,
// where n_q * H workgroups would leave most of a GPU idle): workgroup
// (i, h, s) runs the same loop over its keys only and stores its partial
// state unnormalized — m (running max), l (weight sum), acc[D] — as D + 2
// floats at (0..D+1, s, i, h) of the scratch tensor bound as dst (F32
// [D + 2, S, n_q, H]); flash_attn_reduce.comp combines the S partials.
// A split whose keys are all masked stores m = -inf, l = 0.
// The straightforward version: ref_attn.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "reduce.glsl"

layout(constant_id = 0) const uint KDT = 0u;
layout(constant_id = 1) const uint VDT = 0u;

shared float weights[WG];
shared float qv[256]; // D <= 256 (vk_op_supported)

void main() {
    const uint D = P.ne[0].x, n_q = P.ne[0].y, H = P.ne[0].z;
    const uint n_kv = P.ne[1].y, group = H / P.ne[1].z;
    const uint S = max(P.u[1], 1u);
    uint t = group_linear();
    if (t >= n_q * H * S) return; // whole workgroup
    uint split = t % S;
    t /= S;
    uint i = t % n_q, h = t / n_q, g = h / group;
    uint j_first = S > 1u ? split * P.u[2] : 0u;
    uint j_end = S > 1u ? min(n_kv, j_first + P.u[2]) : n_kv;
    uint lid = gl_LocalInvocationID.x;
    const float neg_inf = uintBitsToFloat(0xff800000u);
    float scale = P.fp[0];
    for (uint d = lid; d < D; d += WG) qv[d] = load0(uvec4(d, i, h, 0u));
    barrier();
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    float m = neg_inf, l = 0.0;
    for (uint j0 = j_first; j0 < j_end; j0 += WG) {
        uint j = j0 + lid;
        float s = neg_inf;
        if (j < j_end) {
            float dot_ = 0.0;
            for (uint d = 0u; d < D; d++) dot_ += qv[d] * load1_as(KDT, uvec4(d, j, g, 0u));
            s = scale * dot_;
            if (P.u[0] != 0u) s += load3(uvec4(j, i, 0u, 0u));
        }
        float m_new = max(m, wg_max(s));
        if (isinf(m_new) && m_new < 0.0) continue; // nothing visible yet (uniform)
        float p = isinf(s) && s < 0.0 ? 0.0 : exp(s - m_new);
        float corr = isinf(m) && m < 0.0 ? 0.0 : exp(m - m_new);
        weights[lid] = p;
        l = l * corr + wg_sum(p); // its barriers publish weights[]
        uint n = min(uint(WG), j_end - j0);
        for (uint c = 0u; c < 4u; c++) {
            uint d = lid + c * WG;
            if (d >= D) break;
            float a = acc[c] * corr;
            for (uint jj = 0u; jj < n; jj++) a += weights[jj] * load2_as(VDT, uvec4(d, j0 + jj, g, 0u));
            acc[c] = a;
        }
        barrier(); // weights[] is rewritten by the next chunk
        m = m_new;
    }
    if (S > 1u) { // the partial state, for flash_attn_reduce.comp
        if (lid == 0u) {
            store_dst(elem_off(4u, uvec4(0u, split, i, h)), m);
            store_dst(elem_off(4u, uvec4(1u, split, i, h)), l);
        }
        for (uint c = 0u; c < 4u; c++) {
            uint d = lid + c * WG;
            if (d < D) store_dst(elem_off(4u, uvec4(d + 2u, split, i, h)), acc[c]);
        }
        return;
    }
    float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint c = 0u; c < 4u; c++) {
        uint d = lid + c * WG;
        if (d < D) store_dst(elem_off(4u, uvec4(d, h, i, 0u)), acc[c] * inv);
    }
}
