// quantize — CPY of F32/F16/BF16 into the KV cache's 32-element block types
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): one invocation per dst block.
// Source and dst elements pair up in flat ne order (as eltwise's CPY); a dst
// block is 32 consecutive elements of one dst row, at dst's own strides (a
// KV cache slot). P.u[1]: the number of dst blocks; the dst dtype is the
// specialization constant QDT (one pipeline per type).
//
// The arithmetic is ref's quantizers' (core/src/tensor/quant_legacy.c, which
// follow llama.cpp's reference ones) operation for operation, declared
// precise so that no multiply-add is fused: the bytes are ref's wherever the
// device divides with correct rounding (lavapipe does; Vulkan allows 2.5 ulp,
// which can move a rounding near a half step on other GPUs).
//
// A block is assembled as 16-bit words and stored as whole 32-bit words
// where both halves are its own; a half word it shares with a neighbouring
// block (blocks of 18, 22 or 34 bytes) is stored with atomics.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint QDT = 8u; // DT_Q8_0

float x[32];  // the block's source values
uint hw[17];  // the block's bytes as 16-bit words (34 bytes at most)

void put_byte(uint i, uint v) { hw[i >> 1] |= (v & 0xffu) << ((i & 1u) << 3); }

// roundf: half-way cases away from zero (v - trunc(v) is exact)
int round_away(float v) {
    float t = trunc(v);
    precise float f = abs(v - t);
    return int(t) + (f >= 0.5 ? (v < 0.0 ? -1 : 1) : 0);
}

// Element of largest magnitude, sign kept (first one on ties). Selects,
// not branches: the loops unroll, and lavapipe compiles every compute shader
// as a coroutine, whose compile time grows steeply with the basic blocks.
float signed_absmax() {
    float amax = 0.0, mx = 0.0;
    for (uint j = 0u; j < 32u; j++) {
        bool larger = amax < abs(x[j]);
        mx = larger ? x[j] : mx;
        amax = larger ? abs(x[j]) : amax;
    }
    return mx;
}

void min_max(out float mn, out float mx) {
    mn = 3.40282347e38;
    mx = -3.40282347e38;
    for (uint j = 0u; j < 32u; j++) {
        mn = min(mn, x[j]);
        mx = max(mx, x[j]);
    }
}

// Q4_0 / Q5_0: d = signed absmax / -2^(bits-1), q = min(max_q, int(x/d + half + 0.5))
// (truncation); Q5_0 keeps the fifth bits in qh after d. Returns the bytes.
// (No arrays of quants: an indexed local array costs lavapipe a branch tree
// per access.)
uint quant_sym(uint bits) {
    const float n = float(1u << (bits - 1u));
    const int q_max = int(2.0 * n) - 1;
    precise float d = signed_absmax() / -n;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    hw[0] = f32_to_f16(d);
    const uint at = bits == 5u ? 6u : 2u;
    uint qh = 0u;
    for (uint j = 0u; j < 16u; j++) {
        precise float s0 = x[j] * id, s1 = x[j + 16u] * id;
        precise float t0 = s0 + (n + 0.5), t1 = s1 + (n + 0.5);
        uint q0 = uint(min(q_max, int(t0))), q1 = uint(min(q_max, int(t1)));
        qh |= ((q0 >> 4) & 1u) << j;
        qh |= ((q1 >> 4) & 1u) << (j + 16u);
        put_byte(at + j, (q0 & 15u) | ((q1 & 15u) << 4));
    }
    if (bits == 5u) {
        hw[1] = qh & 0xffffu;
        hw[2] = qh >> 16;
    }
    return at + 16u;
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min, q = int((x - min)/d + 0.5)
// (Q4_1 clamps to 15; Q5_1 does not, as llama.cpp). Returns the bytes.
uint quant_affine(uint bits) {
    float mn, mx;
    min_max(mn, mx);
    precise float d = (mx - mn) / float((1u << bits) - 1u);
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    hw[0] = f32_to_f16(d);
    hw[1] = f32_to_f16(mn);
    const uint at = bits == 5u ? 8u : 4u;
    uint qh = 0u;
    for (uint j = 0u; j < 16u; j++) {
        precise float s0 = (x[j] - mn) * id, s1 = (x[j + 16u] - mn) * id;
        precise float t0 = s0 + 0.5, t1 = s1 + 0.5;
        int v0 = int(t0), v1 = int(t1);
        uint q0 = uint(bits == 4u ? min(15, v0) : v0), q1 = uint(bits == 4u ? min(15, v1) : v1);
        qh |= ((q0 >> 4) & 1u) << j;
        qh |= ((q1 >> 4) & 1u) << (j + 16u);
        put_byte(at + j, (q0 & 15u) | ((q1 & 15u) << 4));
    }
    if (bits == 5u) {
        hw[2] = qh & 0xffffu;
        hw[3] = qh >> 16;
    }
    return at + 16u;
}

// Q8_0: d = amax / 127, q = roundf(x / d).
uint quant_q8_0() {
    float amax = 0.0;
    for (uint j = 0u; j < 32u; j++) amax = max(amax, abs(x[j]));
    precise float d = amax / 127.0;
    precise float id = d != 0.0 ? 1.0 / d : 0.0;
    hw[0] = f32_to_f16(d);
    for (uint j = 0u; j < 32u; j++) {
        precise float s = x[j] * id;
        put_byte(2u + j, uint(round_away(s)));
    }
    return 34u;
}

// IQ4_NL: index of the codebook value nearest to v (ties to the upper one
// unless strictly nearer the lower, as llama.cpp's best_index_int8)
uint iq4nl_index(float v) {
    if (v <= float(IQ4NL_VALUES[0])) return 0u;
    if (v >= float(IQ4NL_VALUES[15])) return 15u;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < float(IQ4NL_VALUES[mid])) hi = mid;
        else lo = mid;
    }
    precise float below = v - float(IQ4NL_VALUES[hi - 1]);
    precise float above = float(IQ4NL_VALUES[hi]) - v;
    return uint(below < above ? hi - 1 : hi);
}

// sum(w q x) and sum(w q q), w = x^2, for the indices chosen with inverse scale id
void iq4nl_fit(float id, out float sumqx, out float sumq2) {
    precise float sx = 0.0, s2 = 0.0;
    for (uint j = 0u; j < 32u; j++) {
        precise float v = id * x[j];
        float q = float(IQ4NL_VALUES[iq4nl_index(v)]);
        precise float w = x[j] * x[j];
        precise float wq = w * q;
        sx += wq * x[j];
        s2 += wq * q;
    }
    sumqx = sx;
    sumq2 = s2;
}

// IQ4_NL: the x^2-weighted least-squares scale, best of 15 starting scales
// (llama.cpp's quantize_row_iq4_nl_ref: one block, no importance, ntry 7).
uint quant_iq4_nl() {
    float mx = signed_absmax(), amax = abs(mx);
    precise float scale = 0.0;
    if (amax >= 1e-15) {
        float sumqx, sumq2;
        precise float first = -mx / float(IQ4NL_VALUES[0]);
        precise float id0 = 1.0 / first;
        iq4nl_fit(id0, sumqx, sumq2);
        precise float d = sumqx / sumq2;
        precise float best = d * sumqx;
        for (int itry = -7; itry <= 7; itry++) {
            precise float id = float(itry + IQ4NL_VALUES[0]) / mx;
            iq4nl_fit(id, sumqx, sumq2);
            precise float lhs = sumqx * sumqx;
            precise float rhs = best * sumq2;
            if (sumq2 > 0.0 && lhs > rhs) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scale = d;
    }
    hw[0] = f32_to_f16(scale);
    precise float id = scale != 0.0 ? 1.0 / scale : 0.0;
    for (uint j = 0u; j < 16u; j++) {
        precise float v0 = id * x[j], v1 = id * x[j + 16u];
        put_byte(2u + j, iq4nl_index(v0) | (iq4nl_index(v1) << 4));
    }
    return 18u;
}

// Store n_bytes (even) of hw[] at byte offset o of dst (o even).
void store_block(uint o, uint n_bytes) {
    uint n = n_bytes >> 1;
    for (uint k = 0u; k < n;) {
        uint a = o + 2u * k;
        if ((a & 2u) == 0u && k + 1u < n) {
            t4.d[a >> 2] = hw[k] | (hw[k + 1u] << 16);
            k += 2u;
        } else {
            uint s = (a & 2u) << 3;
            atomicAnd(t4.d[a >> 2], ~(0xffffu << s));
            atomicOr(t4.d[a >> 2], hw[k] << s);
            k += 1u;
        }
    }
}

void main() {
    uint blk = group_linear() * 64u + gl_LocalInvocationID.x;
    if (blk >= P.u[1]) return;
    uint e0 = blk * 32u; // flat index of the block's first element
    for (uint j = 0u; j < 32u; j++) x[j] = t0_float(P.dt[0], elem_off(0u, unflat(e0 + j, P.ne[0]))); // F32/F16/BF16
    for (uint k = 0u; k < 17u; k++) hw[k] = 0u;
    uint n_bytes;
    if (QDT == DT_Q8_0) n_bytes = quant_q8_0();
    else if (QDT == DT_Q4_0) n_bytes = quant_sym(4u);
    else if (QDT == DT_Q5_0) n_bytes = quant_sym(5u);
    else if (QDT == DT_Q4_1) n_bytes = quant_affine(4u);
    else if (QDT == DT_Q5_1) n_bytes = quant_affine(5u);
    else n_bytes = quant_iq4_nl(); // DT_IQ4_NL (vk_op_supported)
    uvec4 di = unflat(e0, P.ne[4]); // di.x is a multiple of 32
    store_block(P.off[4] + (di.x >> 5) * P.nb[4].x + di.y * P.nb[4].y + di.z * P.nb[4].z + di.w * P.nb[4].w,
                n_bytes);
}
