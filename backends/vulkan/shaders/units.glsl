// units.glsl — weights read 32 at a time ("units") and dotted with 32
// activations held in registers: what the fast matrix products share.
//
// A unit is 32 consecutive weights of one row: a block of the 32-element
// types, a 32-element sub-block of the K-quants (256-element blocks), or 32
// elements of an F32/F16/BF16 row. Its quantized values are read with
// 128-bit loads (load16: one uvec4 where the bytes are 16-byte aligned, else
// four or five words shifted together) and unpacked in registers by
// unit_load into its quants q_j and each half's scale a and minimum b
// (every supported type has one scale per 16 or 32 elements):
//     weight j = a_h * q_j + b_h,   h = j / 16
// so a dot product with x is formed as
//     a0 * sum_{j<16} q_j x_j + b0 * sum_{j<16} x_j  +  (same for j >= 16)
// without storing a dequantized weight (unit_dot), and a GEMM tile
// dequantizes a whole unit from one set of loads (unit_dequant).
// The straightforward version: dequant() in common.glsl element by element,
// and ref_matmul.c.
//
// Needs: common.glsl, GL_EXT_control_flow_attributes (t0, t0_u16, t0_u8, f16_to_f32, IQ4NL_VALUES, scale_min_k4);
// the grid IQ types where the shader defines IQ_GRIDS before common.glsl.

// t0 (weights) and t1 (activations) again, as 16-byte words: the same
// bindings, read 128 bits at a time where aligned.
layout(std430, binding = 0) readonly buffer T0V { uvec4 d[]; } t0v;
layout(std430, binding = 1) readonly buffer T1V { uvec4 d[]; } t1v;

// 16 bytes of t0 at byte offset o: one 128-bit load when o is 16-byte
// aligned, four words when 4-byte aligned, else five words shifted (any
// byte: MXFP4's 17-byte blocks start at odd offsets).
uvec4 load16(uint o) {
    if ((o & 15u) == 0u) return t0v.d[o >> 4];
    uint w = o >> 2;
    uvec4 a = uvec4(t0.d[w], t0.d[w + 1u], t0.d[w + 2u], t0.d[w + 3u]);
    uint s = (o & 3u) << 3;
    if (s == 0u) return a;
    uint e = t0.d[w + 4u], r = 32u - s;
    return uvec4((a.x >> s) | (a.y << r), (a.y >> s) | (a.z << r), (a.z >> s) | (a.w << r), (a.w >> s) | (e << r));
}

// 32 bits of t0 at any byte offset
uint load4(uint o) {
    uint w = o >> 2, s = (o & 3u) << 3;
    if (s == 0u) return t0.d[w];
    return (t0.d[w] >> s) | (t0.d[w + 1u] << (32u - s));
}

// Byte j (0..31) of 32 bytes held as two uvec4
uint byte32(uvec4 lo, uvec4 hi, uint j) {
    uvec4 v = j < 16u ? lo : hi;
    uint w = ((j & 15u) >> 2) == 0u ? v.x : ((j & 15u) >> 2) == 1u ? v.y : ((j & 15u) >> 2) == 2u ? v.z : v.w;
    return (w >> ((j & 3u) << 3)) & 0xffu;
}
// Byte j (0..15) of 16 bytes
uint byte16(uvec4 v, uint j) {
    uint w = (j >> 2) == 0u ? v.x : (j >> 2) == 1u ? v.y : (j >> 2) == 2u ? v.z : v.w;
    return (w >> ((j & 3u) << 3)) & 0xffu;
}
int sbyte(uint b) { return int(b << 24) >> 24; }

// Where unit u of a row starts: byte offset of its block and its index in
// the block (0 for 32-element types, 0..7 for K-quants).
uint unit_block_bytes(uint dt) {
    if (dt == DT_Q4_0 || dt == DT_IQ4_NL) return 18u;
    if (dt == DT_MXFP4) return 17u;
    if (dt == DT_Q4_1) return 20u;
    if (dt == DT_Q5_0) return 22u;
    if (dt == DT_Q5_1) return 24u;
    if (dt == DT_Q8_0) return 34u;
    if (dt == DT_Q8_1) return 36u;
    if (dt == DT_Q2_K) return 84u;
    if (dt == DT_Q3_K) return 110u;
    if (dt == DT_Q4_K) return 144u;
    if (dt == DT_Q5_K) return 176u;
    if (dt == DT_Q6_K) return 210u;
    if (dt == DT_Q8_K) return 292u;
    if (dt == DT_IQ4_XS) return 136u;
    return iq_grid_bytes(dt);
}

// Unit u of the weight row at byte offset wrow (dtype dt, a specialization
// constant where called): its 32 quants (float weights: the weights) into q,
// and (a0, b0, a1, b1), each half's scale and minimum.
vec4 unit_load(uint dt, uint wrow, uint u, out float q[32]) {
    float a0 = 1.0, b0 = 0.0, a1 = 1.0, b1 = 0.0;
    if (dt == DT_F32) {
        uint o = wrow + u * 128u;
        [[unroll]] for (uint c = 0u; c < 8u; c++) {
            uvec4 v = load16(o + c * 16u);
            q[4u * c] = uintBitsToFloat(v.x); q[4u * c + 1u] = uintBitsToFloat(v.y);
            q[4u * c + 2u] = uintBitsToFloat(v.z); q[4u * c + 3u] = uintBitsToFloat(v.w);
        }
    } else if (dt == DT_F16 || dt == DT_BF16) {
        uint o = wrow + u * 64u;
        [[unroll]] for (uint c = 0u; c < 4u; c++) {
            uvec4 v = load16(o + c * 16u);
            uint wv[4] = uint[4](v.x, v.y, v.z, v.w);
            [[unroll]] for (uint i = 0u; i < 4u; i++) {
                vec2 h = dt == DT_F16 ? unpackHalf2x16(wv[i])
                                      : vec2(uintBitsToFloat(wv[i] << 16), uintBitsToFloat(wv[i] & 0xffff0000u));
                q[8u * c + 2u * i] = h.x; q[8u * c + 2u * i + 1u] = h.y;
            }
        }
    } else if (dt == DT_Q4_0 || dt == DT_Q4_1 || dt == DT_IQ4_NL || dt == DT_MXFP4) {
        // d [m] qs[16] (MXFP4: e qs[16]): element j < 16 low nibble of byte j,
        // j >= 16 high nibble of byte j - 16
        uint o = wrow + u * unit_block_bytes(dt);
        uint qo = dt == DT_Q4_1 ? o + 4u : dt == DT_MXFP4 ? o + 1u : o + 2u;
        uvec4 qv = load16(qo);
        [[unroll]] for (uint j = 0u; j < 16u; j++) {
            uint b = byte16(qv, j);
            if (dt == DT_IQ4_NL) {
                q[j] = float(IQ4NL_VALUES[b & 15u]);
                q[16u + j] = float(IQ4NL_VALUES[b >> 4]);
            } else if (dt == DT_MXFP4) {
                q[j] = float(MXFP4_VALUES[b & 15u]);
                q[16u + j] = float(MXFP4_VALUES[b >> 4]);
            } else {
                q[j] = float(b & 15u);
                q[16u + j] = float(b >> 4);
            }
        }
        float d = dt == DT_MXFP4 ? e8m0_half(t0_u8(o)) : t0_f16(o);
        a0 = d; a1 = d;
        b0 = dt == DT_Q4_0 ? -8.0 * d : dt == DT_Q4_1 ? t0_f16(o + 2u) : 0.0;
        b1 = b0;
    } else if (dt == DT_Q5_0 || dt == DT_Q5_1) {
        // d [m] qh(32 bits) qs[16]
        uint o = wrow + u * unit_block_bytes(dt);
        uint hb = dt == DT_Q5_1 ? 4u : 2u;
        uint qh = load4(o + hb);
        uvec4 qv = load16(o + hb + 4u);
        [[unroll]] for (uint j = 0u; j < 16u; j++) {
            uint b = byte16(qv, j);
            q[j] = float((b & 15u) | (((qh >> j) & 1u) << 4));
            q[16u + j] = float((b >> 4) | (((qh >> (16u + j)) & 1u) << 4));
        }
        float d = t0_f16(o);
        a0 = d; a1 = d;
        b0 = dt == DT_Q5_0 ? -16.0 * d : t0_f16(o + 2u);
        b1 = b0;
    } else if (dt == DT_Q8_0 || dt == DT_Q8_1) {
        // d [s] qs[32] (int8)
        uint o = wrow + u * unit_block_bytes(dt);
        uint qo = dt == DT_Q8_1 ? o + 4u : o + 2u;
        uvec4 lo = load16(qo), hi = load16(qo + 16u);
        [[unroll]] for (uint j = 0u; j < 16u; j++) {
            q[j] = float(sbyte(byte16(lo, j)));
            q[16u + j] = float(sbyte(byte16(hi, j)));
        }
        a0 = t0_f16(o); a1 = a0;
    } else {
        // K-quants: unit u is sub-block r of block u / 8 (elements 32r..32r+31)
        uint o = wrow + (u >> 3) * unit_block_bytes(dt), r8 = u & 7u;
#ifdef IQ_GRIDS
        if (iq_grid_bytes(dt) != 0u) {
            // the grid IQ types: sub-block r8, four groups of 8 (common.glsl)
            [[unroll]] for (uint l = 0u; l < 4u; l++) {
                int g[8];
                iq_group(dt, o, r8, l, g);
                [[unroll]] for (uint j = 0u; j < 8u; j++) q[8u * l + j] = float(g[j]);
            }
            vec2 sc = iq_scales(dt, o, r8);
            return vec4(sc.x, 0.0, sc.y, 0.0);
        }
#endif
        if (dt == DT_IQ4_XS) {
            // d scales_h scales_l[4] qs[128]: sub-block r8 is qs[16 r8 ..], nibbles as IQ4_NL,
            // scale (ls - 32) * d with ls 4 low bits in scales_l, 2 high in scales_h
            uvec4 qv = load16(o + 8u + 16u * r8);
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                uint b = byte16(qv, j);
                q[j] = float(IQ4NL_VALUES[b & 15u]);
                q[16u + j] = float(IQ4NL_VALUES[b >> 4]);
            }
            uint ls = ((t0_u8(o + 4u + (r8 >> 1)) >> (4u * (r8 & 1u))) & 0xfu) | (((t0_u16(o + 2u) >> (2u * r8)) & 3u) << 4);
            a0 = t0_f16(o) * float(int(ls) - 32); a1 = a0;
        } else if (dt == DT_Q8_K) { // f32 d, qs[256]
            uvec4 lo = load16(o + 4u + 32u * r8), hi = load16(o + 20u + 32u * r8);
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                q[j] = float(sbyte(byte16(lo, j)));
                q[16u + j] = float(sbyte(byte16(hi, j)));
            }
            a0 = uintBitsToFloat(load4(o)); a1 = a0;
        } else if (dt == DT_Q4_K || dt == DT_Q5_K) {
            // d dmin scales[12] [qh[32]] qs[128]: 64-element groups g, low nibbles then high
            uint g = r8 >> 1, hi4 = (r8 & 1u) * 4u;
            uint qo = o + (dt == DT_Q5_K ? 48u : 16u) + 32u * g;
            uvec4 q0 = load16(qo), q1 = load16(qo + 16u);
            uvec4 h0 = uvec4(0u), h1 = uvec4(0u);
            if (dt == DT_Q5_K) { h0 = load16(o + 16u); h1 = load16(o + 32u); }
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                uint v0 = (byte16(q0, j) >> hi4) & 15u, v1 = (byte16(q1, j) >> hi4) & 15u;
                if (dt == DT_Q5_K) {
                    v0 |= ((byte16(h0, j) >> r8) & 1u) << 4;
                    v1 |= ((byte16(h1, j) >> r8) & 1u) << 4;
                }
                q[j] = float(v0);
                q[16u + j] = float(v1);
            }
            float sc, mn;
            scale_min_k4(o + 4u, r8, sc, mn);
            a0 = t0_f16(o) * sc; a1 = a0;
            b0 = -t0_f16(o + 2u) * mn; b1 = b0;
        } else if (dt == DT_Q2_K) {
            // scales[16] qs[64] d dmin; element l of run r of half h: (qs[32h + l] >> 2r) & 3
            uint h = r8 >> 2, r = r8 & 3u;
            uvec4 q0 = load16(o + 16u + 32u * h), q1 = load16(o + 32u + 32u * h);
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                q[j] = float((byte16(q0, j) >> (2u * r)) & 3u);
                q[16u + j] = float((byte16(q1, j) >> (2u * r)) & 3u);
            }
            uint sc0 = t0_u8(o + h * 8u + r * 2u), sc1 = t0_u8(o + h * 8u + r * 2u + 1u);
            float d = t0_f16(o + 80u), dmin = t0_f16(o + 82u);
            a0 = d * float(sc0 & 15u); b0 = -dmin * float(sc0 >> 4);
            a1 = d * float(sc1 & 15u); b1 = -dmin * float(sc1 >> 4);
        } else if (dt == DT_Q3_K) {
            // hmask[32] qs[64] scales[12] d: q = (qs >> 2r) & 3, minus 4 where the hmask bit is clear
            uint h = r8 >> 2, r = r8 & 3u, hbit = h * 4u + r;
            uvec4 q0 = load16(o + 32u + 32u * h), q1 = load16(o + 48u + 32u * h);
            uvec4 m0 = load16(o), m1 = load16(o + 16u);
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                int v0 = int((byte16(q0, j) >> (2u * r)) & 3u) - (((byte16(m0, j) >> hbit) & 1u) != 0u ? 0 : 4);
                int v1 = int((byte16(q1, j) >> (2u * r)) & 3u) - (((byte16(m1, j) >> hbit) & 1u) != 0u ? 0 : 4);
                q[j] = float(v0);
                q[16u + j] = float(v1);
            }
            float d = t0_f16(o + 108u);
            for (uint half_ = 0u; half_ < 2u; half_++) {
                uint i = h * 8u + r * 2u + half_; // scale number 0..15
                uint lo4 = i < 8u ? t0_u8(o + 96u + i) & 0xfu : t0_u8(o + 96u + i - 8u) >> 4;
                uint hi2 = (t0_u8(o + 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
                float a = d * float(int(lo4 | (hi2 << 4)) - 32);
                if (half_ == 0u) a0 = a; else a1 = a;
            }
        } else { // DT_Q6_K: ql[128] qh[64] scales[16] (int8) d
            uint h = r8 >> 2, r = r8 & 3u;
            uint lo_off = o + h * 64u + (r & 1u) * 32u, shift = r >= 2u ? 4u : 0u;
            uvec4 l0 = load16(lo_off), l1 = load16(lo_off + 16u);
            uvec4 g0 = load16(o + 128u + h * 32u), g1 = load16(o + 144u + h * 32u);
            [[unroll]] for (uint j = 0u; j < 16u; j++) {
                int v0 = int(((byte16(l0, j) >> shift) & 15u) | (((byte16(g0, j) >> (2u * r)) & 3u) << 4)) - 32;
                int v1 = int(((byte16(l1, j) >> shift) & 15u) | (((byte16(g1, j) >> (2u * r)) & 3u) << 4)) - 32;
                q[j] = float(v0);
                q[16u + j] = float(v1);
            }
            float d = t0_f16(o + 208u);
            a0 = d * float(t0_i8(o + 192u + h * 8u + 2u * r));
            a1 = d * float(t0_i8(o + 192u + h * 8u + 2u * r + 1u));
        }
    }
    return vec4(a0, b0, a1, b1);
}

// The dot product of unit u of the row at wrow with x[0..31]; xs0 and xs1
// are the sums of x[0..15] and x[16..31].
float unit_dot(uint dt, uint wrow, uint u, float x[32], float xs0, float xs1) {
    float q[32];
    vec4 ab = unit_load(dt, wrow, u, q);
    float s0 = 0.0, s1 = 0.0;
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        s0 += q[j] * x[j];
        s1 += q[16u + j] * x[16u + j];
    }
    return ab.x * s0 + ab.y * xs0 + ab.z * s1 + ab.w * xs1;
}

// Unit u of the row at wrow dequantized into w[0..31].
void unit_dequant(uint dt, uint wrow, uint u, out float w[32]) {
    float q[32];
    vec4 ab = unit_load(dt, wrow, u, q);
    [[unroll]] for (uint j = 0u; j < 16u; j++) {
        w[j] = ab.x * q[j] + ab.y;
        w[16u + j] = ab.z * q[16u + j] + ab.w;
    }
}

// Weight element k of the row at wrow (float dtypes only: the tail of a
// row whose length is not a multiple of 32).
float float_weight(uint dt, uint wrow, uint k) {
    if (dt == DT_F32) return uintBitsToFloat(t0.d[(wrow >> 2) + k]);
    return t0_float(dt, wrow + 2u * k);
}

#ifdef USE_IDOT
// ---------------------------------------------------------- integer dots
// With GL_EXT_integer_dot_product: unit u's quants as packed signed bytes
// (word i holds q_{4i..4i+3}) for a 4 x 8-bit dot product with activations
// quantized to 8 bits, and (a0, b0, a1, b1) as unit_load gives them.
// Weight types with an integer path (the rest use unit_dot):
bool idot_type(uint dt) {
    return dt == DT_Q4_0 || dt == DT_Q4_1 || dt == DT_Q5_0 || dt == DT_Q5_1 || dt == DT_Q8_0 ||
           dt == DT_Q8_1 || dt == DT_Q4_K || dt == DT_Q6_K;
}

// 4 bits n spread to bit 4 of each byte: the fifth bit of Q5 quants
uint spread4(uint n) { return ((n & 1u) << 4) | ((n & 2u) << 11) | ((n & 4u) << 18) | ((n & 8u) << 25); }

vec4 unit_load_packed(uint dt, uint wrow, uint u, out int qp[8]) {
    float a0, b0 = 0.0, a1, b1 = 0.0;
    if (dt == DT_Q8_0 || dt == DT_Q8_1) {
        uint o = wrow + u * unit_block_bytes(dt);
        uint qo = dt == DT_Q8_1 ? o + 4u : o + 2u;
        uvec4 lo = load16(qo), hi = load16(qo + 16u);
        qp = int[8](int(lo.x), int(lo.y), int(lo.z), int(lo.w), int(hi.x), int(hi.y), int(hi.z), int(hi.w));
        a0 = t0_f16(o); a1 = a0;
    } else if (dt == DT_Q4_0 || dt == DT_Q4_1 || dt == DT_Q5_0 || dt == DT_Q5_1) {
        uint o = wrow + u * unit_block_bytes(dt);
        uint qo = dt == DT_Q4_0 ? o + 2u : dt == DT_Q4_1 ? o + 4u : dt == DT_Q5_0 ? o + 6u : o + 8u;
        uvec4 v = load16(qo);
        uint w[4] = uint[4](v.x, v.y, v.z, v.w);
        uint qh = dt == DT_Q5_0 ? load4(o + 2u) : dt == DT_Q5_1 ? load4(o + 4u) : 0u;
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            qp[i] = int((w[i] & 0x0f0f0f0fu) | spread4((qh >> (4u * i)) & 15u));
            qp[4u + i] = int(((w[i] >> 4) & 0x0f0f0f0fu) | spread4((qh >> (16u + 4u * i)) & 15u));
        }
        float d = t0_f16(o);
        a0 = d; a1 = d;
        b0 = dt == DT_Q4_0 ? -8.0 * d : dt == DT_Q5_0 ? -16.0 * d : t0_f16(o + 2u);
        b1 = b0;
    } else if (dt == DT_Q4_K) {
        uint o = wrow + (u >> 3) * 144u, r8 = u & 7u;
        uint qo = o + 16u + 32u * (r8 >> 1), hi4 = (r8 & 1u) * 4u;
        uvec4 q0 = load16(qo), q1 = load16(qo + 16u);
        uint w[8] = uint[8](q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w);
        [[unroll]] for (uint i = 0u; i < 8u; i++) qp[i] = int((w[i] >> hi4) & 0x0f0f0f0fu);
        float sc, mn;
        scale_min_k4(o + 4u, r8, sc, mn);
        a0 = t0_f16(o) * sc; a1 = a0;
        b0 = -t0_f16(o + 2u) * mn; b1 = b0;
    } else { // DT_Q6_K: q - 32 as b = -32 a
        uint o = wrow + (u >> 3) * 210u, r8 = u & 7u;
        uint h = r8 >> 2, r = r8 & 3u;
        uint lo_off = o + h * 64u + (r & 1u) * 32u, shift = r >= 2u ? 4u : 0u;
        uvec4 l0 = load16(lo_off), l1 = load16(lo_off + 16u);
        uvec4 g0 = load16(o + 128u + h * 32u), g1 = load16(o + 144u + h * 32u);
        uint lw[8] = uint[8](l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w);
        uint gw[8] = uint[8](g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w);
        [[unroll]] for (uint i = 0u; i < 8u; i++)
            qp[i] = int(((lw[i] >> shift) & 0x0f0f0f0fu) | (((gw[i] >> (2u * r)) & 0x03030303u) << 4));
        float d = t0_f16(o + 208u);
        a0 = d * float(t0_i8(o + 192u + h * 8u + 2u * r));
        a1 = d * float(t0_i8(o + 192u + h * 8u + 2u * r + 1u));
        b0 = -32.0 * a0; b1 = -32.0 * a1;
    }
    return vec4(a0, b0, a1, b1);
}

// x[0..31] quantized to 8 bits with one scale (returned): xq packed as qp.
float quantize_unit(float x[32], out int xq[8]) {
    float amax = 0.0;
    [[unroll]] for (uint j = 0u; j < 32u; j++) amax = max(amax, abs(x[j]));
    float xd = amax / 127.0, inv = amax > 0.0 ? 127.0 / amax : 0.0;
    [[unroll]] for (uint i = 0u; i < 8u; i++) {
        uint w = 0u;
        [[unroll]] for (uint k = 0u; k < 4u; k++)
            w |= (uint(int(round(x[4u * i + k] * inv))) & 0xffu) << (8u * k);
        xq[i] = int(w);
    }
    return xd;
}

// unit_dot with integer dot products: xq, xd from quantize_unit.
float unit_dot_idot(uint dt, uint wrow, uint u, int xq[8], float xd, float xs0, float xs1) {
    int qp[8];
    vec4 ab = unit_load_packed(dt, wrow, u, qp);
    int s0 = 0, s1 = 0;
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        s0 = dotPacked4x8AccSatEXT(qp[i], xq[i], s0);
        s1 = dotPacked4x8AccSatEXT(qp[4u + i], xq[4u + i], s1);
    }
    return xd * (ab.x * float(s0) + ab.z * float(s1)) + ab.y * xs0 + ab.w * xs1;
}
#endif
