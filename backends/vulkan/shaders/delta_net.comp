// delta_net — DELTA_NET (ABI 1.5), the gated delta rule of Qwen3.5's Gated
// DeltaNet (semantics in tessera/plugin.h; the straightforward version is
// ref_ssm.c, which carries the state in double). One invocation per column
// (i, h, s) of the state: column i of head h evolves on its own (u[i], its
// Dk entries S[i, n] and y[i] read no other column), so no barrier. The
// column lives in dst's state part and is updated there token by token;
// each invocation takes q's and k's L2 norms itself. Sources: t0 state
// [Dv, Dk, H, S], t1 qkv [2*Hk*Dk + H*Dv, T, S] (q [Dk, Hk], k [Dk, Hk],
// v [Dv, H]), t2 gates [H, 2, T, S] (beta logits, then the decay inputs),
// t3 A [H] or [1, H]; dst t4 1-D: y [Dv, H, T, S] then the final state.
// All F32 read through their strides; P.fp[0] eps, P.fp[1] scale, P.ip[0]
// kv_tiled (the node's slots as they are); P.u[1]: Dv * H * S; P.u[2],
// P.u[3]: the tokens t0 .. t1-1 this dispatch takes (a long prompt on a CPU
// implementation runs in chunks, vk_fused.c: the first copies the state in
// from t0, the others go on from the state dst holds).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

// softplus as llama.cpp writes it (see ssm_scan.comp)
float softplus(float x) {
    if (x > 20.0) return x;
    precise float e = exp(x);
    precise float u = 1.0 + e;
    return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

float x_at(uint n, uint t, uint s) { return t1_float(DT_F32, elem_off(1u, uvec4(n, t, s, 0u))); }

void main() {
    uint c = group_linear() * 64u + gl_LocalInvocationID.x;
    if (c >= P.u[1]) return;
    uint Dv = P.ne[0].x, Dk = P.ne[0].y, H = P.ne[0].z, S = P.ne[0].w, T = P.ne[1].y;
    uint i = c % Dv, h = (c / Dv) % H, s = c / (Dv * H);
    uint Hk = (P.ne[1].x - H * Dv) / (2u * Dk);
    uint j = P.ip[0] != 0 ? h % Hk : h / (H / Hk);
    uint q0 = j * Dk, k0 = (Hk + j) * Dk, v0 = 2u * Hk * Dk + h * Dv;
    float eps = P.fp[0], scale = P.fp[1];
    float A = t3_float(DT_F32, elem_off(3u, P.ne[3].x == H ? uvec4(h, 0u, 0u, 0u) : uvec4(0u, h, 0u, 0u)));
    uint ds = P.nb[4].x;
    uint col = P.off[4] + (Dv * H * T * S + (s * H + h) * Dk * Dv + i) * ds; // S[i, n] at n * Dv
    if (P.u[2] == 0u)
        for (uint n = 0u; n < Dk; n++) store_dst(col + n * Dv * ds, t0_float(DT_F32, elem_off(0u, uvec4(i, n, h, s))));
    for (uint t = P.u[2]; t < P.u[3]; t++) {
        float qq = 0.0, kk = 0.0;
        for (uint n = 0u; n < Dk; n++) {
            float qv = x_at(q0 + n, t, s), kv = x_at(k0 + n, t, s);
            qq += qv * qv;
            kk += kv * kv;
        }
        float qs = scale / max(sqrt(qq), eps), ks = 1.0 / max(sqrt(kk), eps);
        float decay = exp(A * softplus(t2_float(DT_F32, elem_off(2u, uvec4(h, 1u, t, s)))));
        float beta = 1.0 / (1.0 + exp(-t2_float(DT_F32, elem_off(2u, uvec4(h, 0u, t, s)))));
        float sk = 0.0;
        for (uint n = 0u; n < Dk; n++) {
            float sn = t4_float(DT_F32, col + n * Dv * ds) * decay;
            store_dst(col + n * Dv * ds, sn);
            sk += sn * (x_at(k0 + n, t, s) * ks);
        }
        float u = beta * (x_at(v0 + i, t, s) - sk);
        float y = 0.0;
        for (uint n = 0u; n < Dk; n++) {
            float sn = t4_float(DT_F32, col + n * Dv * ds) + x_at(k0 + n, t, s) * ks * u;
            store_dst(col + n * Dv * ds, sn);
            y += sn * (x_at(q0 + n, t, s) * qs);
        }
        store_dst(P.off[4] + (((s * T + t) * H + h) * Dv + i) * ds, y);
    }
}
