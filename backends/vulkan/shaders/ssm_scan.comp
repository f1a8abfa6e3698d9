// ssm_scan — SSM_SCAN (ABI 1.4), Mamba-2's selective scan (semantics in
// tessera/plugin.h; the straightforward version is ref_ssm.c, which carries
// the state in double). One workgroup of WG invocations per (p, h, s): a
// row of the state, state[0..N-1, p, h, s], is spread over the workgroup
// (invocation lid holds n = lid, lid + WG, ... in registers, at most
// MAX_PER each, so N <= WG * MAX_PER; vk_ops.c declines more), and each
// token t in order updates it and sums y[p, h, t, s] = sum_n state * C
// across the workgroup (reduce.glsl). Sources: t0 state [N, P, H, S],
// t1 xBC [P*H + 2*G*N, T, S], t2 dt [H, T, S], t3 A [H] or [1, H]; dst t4
// 1-D: y [P, H, T, S] then the final state [N, P, H, S]. All F32, f32
// arithmetic; every source read through its strides.
#version 450
#extension GL_GOOGLE_include_directive : require
#define WG 32
#include "common.glsl"
#include "reduce.glsl"

const uint MAX_PER = 8u;

// softplus as llama.cpp writes it: log(1 + e^x), x itself past 20; log1p
// through the exact-ratio form log(u) * e / (u - 1), u = 1 + e.
float softplus(float x) {
    if (x > 20.0) return x;
    precise float e = exp(x);
    precise float u = 1.0 + e;
    return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

float f32_0(uvec4 i) { return t0_float(DT_F32, elem_off(0u, i)); }
float f32_1(uvec4 i) { return t1_float(DT_F32, elem_off(1u, i)); }

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint N = P.ne[0].x, Pd = P.ne[0].y, H = P.ne[0].z, S = P.ne[0].w;
    uint gid = group_linear(); // the same across the workgroup
    if (gid >= Pd * H * S) return;
    uint p = gid % Pd, h = (gid / Pd) % H, s = gid / (Pd * H);
    uint T = P.ne[1].y;
    uint G = (P.ne[1].x - Pd * H) / (2u * N);
    uint g = h / (H / G);
    uint xB = Pd * H + g * N, xC = Pd * H + G * N + g * N;
    float A = t3_float(DT_F32, elem_off(3u, P.ne[3].x == H ? uvec4(h, 0u, 0u, 0u) : uvec4(0u, h, 0u, 0u)));
    float st[MAX_PER];
    for (uint j = 0u; j < MAX_PER; j++) {
        uint n = lid + j * WG;
        st[j] = n < N ? f32_0(uvec4(n, p, h, s)) : 0.0;
    }
    uint dst_stride = P.nb[4].x;
    for (uint t = 0u; t < T; t++) {
        float d = softplus(t2_float(DT_F32, elem_off(2u, uvec4(h, t, s, 0u))));
        float decay = exp(d * A);
        float xd = f32_1(uvec4(h * Pd + p, t, s, 0u)) * d;
        float y = 0.0;
        for (uint j = 0u; j < MAX_PER; j++) {
            uint n = lid + j * WG;
            if (n < N) {
                st[j] = st[j] * decay + f32_1(uvec4(xB + n, t, s, 0u)) * xd;
                y += st[j] * f32_1(uvec4(xC + n, t, s, 0u));
            }
        }
        y = wg_sum(y);
        if (lid == 0u) store_dst(P.off[4] + (((s * T + t) * H + h) * Pd + p) * dst_stride, y);
    }
    uint y_elems = Pd * H * T * S;
    for (uint j = 0u; j < MAX_PER; j++) {
        uint n = lid + j * WG;
        if (n < N) store_dst(P.off[4] + (y_elems + ((s * H + h) * Pd + p) * N + n) * dst_stride, st[j]);
    }
}
