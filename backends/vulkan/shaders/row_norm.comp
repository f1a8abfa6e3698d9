// row_norm — RMS_NORM (P.u[0] = 0) and NORM (P.u[0] = 1), one workgroup
// per row of src0, eps = P.fp[0]. Each invocation re-reads the elements it
// summed before writing them, so dst may alias src0.
// Fused with the MUL by a norm weight that follows it (P.u[1] = 1; vk_fused.c):
// dst = norm(src0) * src1, src1 broadcast as MUL's (element i meets
// i % ne1 in every dimension); with P.u[2] = 1 the normalized row is also
// stored in src2 (the unfused RMS_NORM's dst), else that intermediate is
// never written. The product is the same f32 multiply MUL does: the results
// are the unfused ones to the bit.
// The straightforward version: ref_ops_norm.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#ifdef USE_SUBGROUPS
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#define WG 128
#include "common.glsl"
#include "reduce.glsl"

void main() {
    uint row = group_linear();
    uvec4 ne = P.ne[0];
    if (row >= ne.y * ne.z * ne.w) return; // whole workgroup
    uvec4 r = unflat(row * ne.x, ne);       // (0, i1, i2, i3)
    uint n = ne.x, lid = gl_LocalInvocationID.x;
    float eps = P.fp[0];
    float mean = 0.0;
    if (P.u[0] == 1u) {
        float s = 0.0;
        for (uint i = lid; i < n; i += WG) s += load0(uvec4(i, r.yzw));
        mean = wg_sum(s) / float(n);
    }
    float s2 = 0.0;
    for (uint i = lid; i < n; i += WG) {
        float x = load0(uvec4(i, r.yzw)) - mean;
        s2 += x * x;
    }
    float scale = 1.0 / sqrt(wg_sum(s2) / float(n) + eps);
    for (uint i = lid; i < n; i += WG) {
        uvec4 idx = uvec4(i, r.yzw);
        float y = (load0(idx) - mean) * scale;
        if (P.u[1] != 0u) {
            if (P.u[2] != 0u) t2.d[elem_off(2u, idx) >> 2] = floatBitsToUint(y);
            y *= load1(idx % P.ne[1]);
        }
        store_dst(elem_off(4u, idx), y);
    }
}
