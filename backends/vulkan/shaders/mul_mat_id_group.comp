// mul_mat_id_group — the first pass of a grouped MUL_MAT_ID (vk_fused.c):
// the batch's (token, slot) pairs gathered per expert, for the tiled GEMM
// (mul_mat_tiled.comp built with MUL_MAT_ID) to multiply each expert's
// pairs as the columns of one small matrix product.
//
// Reads ids (t2, I32 [n_used, T], any strides). Writes into the queue's
// scratch buffer (t3, words from P.off[3] / 4):
//     offs[0..E]            pairs of expert e are list[offs[e] .. offs[e+1])
//     list[0..n_used*T)     at word E + 1: pair p = t * n_used + s
// One workgroup: counts per expert (shared atomics), their prefix sums,
// then each pair placed at its expert's next free slot. The order of an
// expert's pairs is whatever the atomics give: each output of the GEMM is
// one row dotted with one column, k in order, wherever that column sits in
// its tile, so the results do not depend on it. A pair whose id is outside
// 0..E-1 is in no list: its dst row (t4) is written as 0 here, as
// mul_mat_id.comp writes it.
// The straightforward version: mul_mat_id.comp (one output per invocation)
// and ref_matmul.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WG 256
#ifndef MAX_E
#define MAX_E 1024 // VK_MOE_MAX_EXPERTS
#endif
layout(local_size_x = WG) in;

shared uint cnt[MAX_E];  // pairs per expert, then each expert's next free slot
shared uint base[MAX_E]; // first list index of each expert

// P.u: [0] N, [1] n_used, [2] T, [4] E
void main() {
    const uint N = P.u[0], n_used = P.u[1], T = P.u[2], E = P.u[4];
    const uint lid = gl_LocalInvocationID.x, pairs = n_used * T, w0 = P.off[3] >> 2;
    for (uint e = lid; e < E; e += WG) cnt[e] = 0u;
    barrier();
    for (uint p = lid; p < pairs; p += WG) {
        const int e = int(t2_u32(P.off[2] + (p % n_used) * P.nb[2].x + (p / n_used) * P.nb[2].y));
        if (e >= 0 && uint(e) < E) atomicAdd(cnt[e], 1u);
    }
    barrier();
    if (lid == 0u) {
        uint run = 0u;
        for (uint e = 0u; e < E; e++) {
            base[e] = run;
            t3.d[w0 + e] = run;
            run += cnt[e];
            cnt[e] = 0u;
        }
        t3.d[w0 + E] = run;
    }
    barrier();
    for (uint p = lid; p < pairs; p += WG) {
        const uint s = p % n_used, t = p / n_used;
        const int e = int(t2_u32(P.off[2] + s * P.nb[2].x + t * P.nb[2].y));
        if (e >= 0 && uint(e) < E) {
            t3.d[w0 + E + 1u + base[e] + atomicAdd(cnt[e], 1u)] = p;
        } else {
            for (uint n = 0u; n < N; n++) store_dst(elem_off(4u, uvec4(n, s, t, 0u)), 0.0);
        }
    }
}
