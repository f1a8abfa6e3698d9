// flash_attn_tiled — FLASH_ATTN for prompts: one workgroup per (block of
// BQ queries, head h) walks the keys in tiles of BK, each K and V tile
// loaded (dequantized) into shared memory once and used by all BQ queries,
// where flash_attn.comp loads every key once per query.
//   s_j = scale * (q_i . k_j) + mask[j, i];  out = softmax(s) . v
// Per tile: the K tile goes to kv[], the BQ x BK scores to ss[], then the V
// tile replaces K in kv[] and each query's accumulator takes the tile under
// the online softmax (rescaled when its running max grows). Invocation
// (r, sub) = (lid / SUB, lid % SUB) serves query r of the block and owns
// its output dims sub, sub + SUB, ... (D <= 256); the SUB invocations of a
// query keep the same m and l.
// Contract as flash_attn.comp: q [D, n_q, H, 1], k/v [D, n_kv, H_kv, 1] of
// dtypes KDT/VDT (F32, F16, BF16 or a KV cache block type), mask
// [n_kv, >= n_q] optional (P.u[0] = 1), dst F32 [D, H, n_q, 1]; query
// head h reads kv head h / (H / H_kv); a query whose every score is -inf
// gets zeros. Shared memory: 24.5 KiB (vk_ops.c checks the device's limit).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#define BQ 8u   // queries a workgroup
#define BK 16u  // keys a tile
#define SUB 8u  // invocations a query
#define DMAX 256u
layout(local_size_x = 64) in; // BQ * SUB

layout(constant_id = 0) const uint KDT = 0u;
layout(constant_id = 1) const uint VDT = 0u;

shared float qs[BQ * DMAX];
shared float kv[BK * DMAX];
shared float ss[BQ * BK];

void main() {
    const uint D = P.ne[0].x, n_q = P.ne[0].y, H = P.ne[0].z;
    const uint n_kv = P.ne[1].y, group = H / P.ne[1].z;
    const uint blocks = (n_q + BQ - 1u) / BQ;
    uint t = group_linear();
    if (t >= blocks * H) return; // whole workgroup
    const uint i0 = (t % blocks) * BQ, h = t / blocks, g = h / group;
    const uint lid = gl_LocalInvocationID.x, r = lid / SUB, sub = lid % SUB;
    const uint i = i0 + r;
    const bool live = i < n_q;
    const float neg_inf = uintBitsToFloat(0xff800000u);
    const float scale = P.fp[0];
    for (uint e = lid; e < BQ * D; e += 64u) {
        uint rr = e / D, d = e % D;
        qs[rr * DMAX + d] = i0 + rr < n_q ? load0(uvec4(d, i0 + rr, h, 0u)) : 0.0;
    }
    float acc[DMAX / SUB];
    for (uint c = 0u; c < DMAX / SUB; c++) acc[c] = 0.0;
    float m = neg_inf, l = 0.0;
    for (uint j0 = 0u; j0 < n_kv; j0 += BK) {
        const uint nk = min(BK, n_kv - j0);
        barrier(); // qs written (first tile); kv's V no longer read (later ones)
        for (uint e = lid; e < nk * D; e += 64u) {
            uint jj = e / D, d = e % D;
            kv[jj * DMAX + d] = load1_as(KDT, uvec4(d, j0 + jj, g, 0u));
        }
        barrier();
        for (uint e = lid; e < BQ * BK; e += 64u) { // scores of the tile
            uint rr = e / BK, jj = e % BK;
            float s = neg_inf;
            if (jj < nk && i0 + rr < n_q) {
                float dot_ = 0.0;
                for (uint d = 0u; d < D; d++) dot_ += qs[rr * DMAX + d] * kv[jj * DMAX + d];
                s = scale * dot_;
                if (P.u[0] != 0u) s += load3(uvec4(j0 + jj, i0 + rr, 0u, 0u));
            }
            ss[e] = s;
        }
        barrier(); // scores done: K no longer read
        for (uint e = lid; e < nk * D; e += 64u) {
            uint jj = e / D, d = e % D;
            kv[jj * DMAX + d] = load2_as(VDT, uvec4(d, j0 + jj, g, 0u));
        }
        barrier();
        float m_tile = neg_inf;
        for (uint jj = 0u; jj < nk; jj++) m_tile = max(m_tile, ss[r * BK + jj]);
        const float m_new = max(m, m_tile);
        if (live && !(isinf(m_new) && m_new < 0.0)) { // else nothing visible yet
            const float corr = isinf(m) && m < 0.0 ? 0.0 : exp(m - m_new);
            l *= corr;
            for (uint c = 0u; c < DMAX / SUB; c++) acc[c] *= corr;
            for (uint jj = 0u; jj < nk; jj++) {
                const float s = ss[r * BK + jj];
                if (isinf(s) && s < 0.0) continue;
                const float p = exp(s - m_new);
                l += p;
                for (uint c = 0u; c < DMAX / SUB; c++) {
                    uint d = sub + c * SUB;
                    if (d < D) acc[c] += p * kv[jj * DMAX + d];
                }
            }
            m = m_new;
        }
    }
    if (!live) return;
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint c = 0u; c < DMAX / SUB; c++) {
        uint d = sub + c * SUB;
        if (d < D) store_dst(elem_off(4u, uvec4(d, h, i, 0u)), acc[c] * inv);
    }
}
