// row_norm — RMS_NORM (P.u[0] = 0) and NORM (P.u[0] = 1), one workgroup
// per row of src0, eps = P.fp[0]. Each invocation re-reads the elements it
// summed before writing them, so dst may alias src0.
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
        store_dst(elem_off(4u, idx), (load0(idx) - mean) * scale);
    }
}
