// soft_max — each row of src0: softmax(x * scale + slope * mask), one
// workgroup per row. P.fp[0] scale; P.u[0] 1 when a mask (src1, F32 or F16,
// [n, >= rows], broadcast over dims 2 and 3) is bound; ALiBi slope of head
// i2 from P.f[0] m0, P.f[1] m1, P.u[1] n_head_log2 (slope 1 when P.u[2] = 0).
// A row whose every entry is -inf becomes zeros, as in ref. Each invocation
// re-reads its own elements before writing them, so dst may alias src0.
// The straightforward version: ref_ops_norm.c (ref_op_soft_max).
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#define WG 128
#include "common.glsl"
#include "reduce.glsl"

float slope_of(uint h) {
    if (P.u[2] == 0u) return 1.0;
    uint nl2 = P.u[1];
    return h < nl2 ? pow(P.f[0], float(h + 1u)) : pow(P.f[1], float(2u * (h - nl2) + 1u));
}

float logit(uvec4 idx, float slope) {
    float x = load0(idx) * P.fp[0];
    if (P.u[0] != 0u) x += slope * load1(uvec4(idx.x, idx.y, idx.z % P.ne[1].z, idx.w % P.ne[1].w));
    return x;
}

void main() {
    uint row = group_linear();
    uvec4 ne = P.ne[0];
    if (row >= ne.y * ne.z * ne.w) return; // whole workgroup
    uvec4 r = unflat(row * ne.x, ne);
    uint n = ne.x, lid = gl_LocalInvocationID.x;
    float slope = slope_of(r.z);
    float mx = uintBitsToFloat(0xff800000u); // -inf
    for (uint i = lid; i < n; i += WG) mx = max(mx, logit(uvec4(i, r.yzw), slope));
    mx = wg_max(mx);
    bool empty = isinf(mx) && mx < 0.0;
    float s = 0.0;
    if (!empty)
        for (uint i = lid; i < n; i += WG) s += exp(logit(uvec4(i, r.yzw), slope) - mx);
    s = wg_sum(s);
    float inv = empty ? 0.0 : 1.0 / s;
    for (uint i = lid; i < n; i += WG) {
        uvec4 idx = uvec4(i, r.yzw);
        float y = empty ? 0.0 : exp(logit(idx, slope) - mx) * inv;
        store_dst(elem_off(4u, idx), y);
    }
}
