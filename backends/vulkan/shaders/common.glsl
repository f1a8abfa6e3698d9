// common.glsl — what every Tessera compute shader shares.
//
// Bindings: t0..t3 the node's sources, t4 its dst, each bound as the byte
// range that holds the tensor (offset aligned down; P.off[k] is where the
// tensor starts inside it). P (binding 5) is the parameter block written by
// vk_op_plan (vk_internal.h: vk_params, same std430 layout).
//
// Tensors are addressed in bytes through uint words (F32/I32 tensors 4-byte
// aligned, all others 2-byte aligned); 16-bit stores use atomics on the word
// so neighbouring invocations never clobber each other's halves.
// Conversions (f16, bf16) are done with integer ops: round to nearest even,
// the same bits as the host's, whatever the driver's packHalf2x16 does.

layout(std430, binding = 0) buffer T0 { uint d[]; } t0;
layout(std430, binding = 1) buffer T1 { uint d[]; } t1;
layout(std430, binding = 2) buffer T2 { uint d[]; } t2;
layout(std430, binding = 3) buffer T3 { uint d[]; } t3;
layout(std430, binding = 4) buffer T4 { uint d[]; } t4;
layout(std430, binding = 5) readonly buffer Params {
    uint off[8];
    uvec4 ne[5];
    uvec4 nb[5];
    uint dt[8];
    int ip[8];
    float fp[8];
    uint u[8];
    float f[8];
} P;

// GGUF dtype numbers
const uint DT_F32 = 0u, DT_F16 = 1u, DT_Q4_0 = 2u, DT_Q4_1 = 3u, DT_Q5_0 = 6u, DT_Q5_1 = 7u,
           DT_Q8_0 = 8u, DT_Q8_1 = 9u, DT_Q2_K = 10u, DT_Q3_K = 11u, DT_Q4_K = 12u, DT_Q5_K = 13u,
           DT_Q6_K = 14u, DT_Q8_K = 15u, DT_IQ2_XXS = 16u, DT_IQ2_XS = 17u, DT_IQ3_XXS = 18u,
           DT_IQ1_S = 19u, DT_IQ4_NL = 20u, DT_IQ3_S = 21u, DT_IQ2_S = 22u, DT_IQ4_XS = 23u, DT_I32 = 26u,
           DT_IQ1_M = 29u, DT_BF16 = 30u, DT_MXFP4 = 39u;

uint group_linear() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }

uvec4 unflat(uint i, uvec4 ne) {
    uint i0 = i % ne.x; i /= ne.x;
    uint i1 = i % ne.y; i /= ne.y;
    uint i2 = i % ne.z;
    return uvec4(i0, i1, i2, i / ne.z);
}

// byte offset of element idx of tensor k (plain dtypes; for block dtypes
// idx.x counts blocks)
uint elem_off(uint k, uvec4 idx) {
    return P.off[k] + idx.x * P.nb[k].x + idx.y * P.nb[k].y + idx.z * P.nb[k].z + idx.w * P.nb[k].w;
}

float f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 0u) {
        float v = float(m) * 5.9604644775390625e-8; // m * 2^-24, exact
        return s != 0u ? -v : v;
    }
    if (e == 31u) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint f32_to_f16(float v) {
    uint x = floatBitsToUint(v);
    uint sign = (x >> 16) & 0x8000u;
    uint ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // rounds to infinity
    if (ax < 0x38800000u) {                     // half subnormal or zero
        uint e = ax >> 23;
        if (e < 102u) return sign;
        uint m = (ax & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;                  // value in units of 2^-24 is m >> shift
        uint q = m >> shift;
        uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
        return sign | q;
    }
    ax += 0xc8000fffu + ((ax >> 13) & 1u);      // rebias exponent, round to nearest even
    return sign | (ax >> 13);
}

uint f32_to_bf16(float v) {
    uint x = floatBitsToUint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// Readers of bytes, 16-bit words (at even offsets), 32-bit words (at
// multiples of 4; u32_2 at even offsets) and of one float element (F32,
// F16, BF16), for each tensor binding. vk_op_supported guarantees the
// alignment: F32 and I32 tensors at multiples of 4 bytes, everything else
// at even ones.
#define DEF_READERS(T)                                                                  \
    uint T##_u8(uint o) { return (T.d[o >> 2] >> ((o & 3u) << 3)) & 0xffu; }            \
    uint T##_u16(uint o) { return (T.d[o >> 2] >> ((o & 2u) << 3)) & 0xffffu; }         \
    uint T##_u32(uint o) { return T.d[o >> 2]; }                                        \
    uint T##_u32_2(uint o) { return T##_u16(o) | (T##_u16(o + 2u) << 16); }             \
    float T##_float(uint dtype, uint o) {                                               \
        if (dtype == DT_F32) return uintBitsToFloat(T.d[o >> 2]);                       \
        uint h = T##_u16(o);                                                            \
        return dtype == DT_F16 ? f16_to_f32(h) : uintBitsToFloat(h << 16);              \
    }

DEF_READERS(t0)
DEF_READERS(t1)
DEF_READERS(t2)
DEF_READERS(t3)
DEF_READERS(t4)

// Store one float into dst (t4) at byte offset o, in dst's dtype.
void store_dst(uint o, float v) {
    uint dtype = P.dt[4];
    if (dtype == DT_F32) {
        t4.d[o >> 2] = floatBitsToUint(v);
        return;
    }
    uint h = dtype == DT_F16 ? f32_to_f16(v) : f32_to_bf16(v);
    uint s = (o & 2u) << 3;
    atomicAnd(t4.d[o >> 2], ~(0xffffu << s));
    atomicOr(t4.d[o >> 2], h << s);
}

// ------------------------------------------------------------ dequantize
// GGUF block layouts, see core/src/tensor/quant_blocks.h.

const int IQ4NL_VALUES[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
// MXFP4: E2M1 values times 2, with the E8M0 scale halved to match
// (tessera/plugin_quants.h: TSR_MXFP4_VALUES, tsr_e8m0_half)
const int MXFP4_VALUES[16] = int[16](0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
float e8m0_half(uint e) { return uintBitsToFloat(e < 2u ? 0x00200000u << e : (e - 1u) << 23); }

// Element j (0..31) of the 32-element block (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q8_1, IQ4_NL, MXFP4) at byte offset b of tensor T: weights (t0) and the
// KV cache's block types (flash attention's k and v, t1 and t2). Each value
// is rounded as ref's dequantizer rounds it (precise: no fused
// multiply-add). MXFP4's 17-byte blocks may start at any byte: it is read
// a byte at a time ({e; qs[16]}, exact: a power of two times a small
// integer).
#define DEF_BLOCK32(T)                                                                  \
    float T##_f16(uint o) { return f16_to_f32(T##_u16(o)); }                            \
    int T##_i8(uint o) { return int(T##_u8(o) << 24) >> 24; }                           \
    uint T##_nibble32(uint qs, uint j) { /* quant j of 16 nibble bytes at qs */         \
        return (T##_u8(qs + (j & 15u)) >> ((j >> 4) << 2)) & 0xfu;                      \
    }                                                                                   \
    float T##_block32(uint dtype, uint b, uint j) {                                     \
        precise float v;                                                                \
        if (dtype == DT_Q4_0) {                                                         \
            v = T##_f16(b) * float(int(T##_nibble32(b + 2u, j)) - 8);                   \
        } else if (dtype == DT_Q4_1) {                                                  \
            v = float(T##_nibble32(b + 4u, j)) * T##_f16(b) + T##_f16(b + 2u);          \
        } else if (dtype == DT_Q5_0) {                                                  \
            uint hi = (T##_u32_2(b + 2u) >> j) & 1u;                                    \
            v = T##_f16(b) * float(int(T##_nibble32(b + 6u, j) | (hi << 4)) - 16);      \
        } else if (dtype == DT_Q5_1) {                                                  \
            uint hi = (T##_u32_2(b + 4u) >> j) & 1u;                                    \
            v = float(T##_nibble32(b + 8u, j) | (hi << 4)) * T##_f16(b) + T##_f16(b + 2u); \
        } else if (dtype == DT_Q8_0) {                                                  \
            v = T##_f16(b) * float(T##_i8(b + 2u + j));                                 \
        } else if (dtype == DT_Q8_1) { /* d, s, qs[32] */                               \
            v = T##_f16(b) * float(T##_i8(b + 4u + j));                                 \
        } else if (dtype == DT_MXFP4) { /* e qs[16] */                                 \
            v = e8m0_half(T##_u8(b)) * float(MXFP4_VALUES[T##_nibble32(b + 1u, j)]);    \
        } else { /* DT_IQ4_NL */                                                        \
            v = T##_f16(b) * float(IQ4NL_VALUES[T##_nibble32(b + 2u, j)]);              \
        }                                                                               \
        return v;                                                                       \
    }

DEF_BLOCK32(t0)
DEF_BLOCK32(t1)
DEF_BLOCK32(t2)

// Bytes per 256-element block of a grid IQ type; 0 for every other type.
uint iq_grid_bytes(uint dt) {
    if (dt == DT_IQ2_XXS) return 66u;
    if (dt == DT_IQ2_XS) return 74u;
    if (dt == DT_IQ2_S) return 82u;
    if (dt == DT_IQ3_XXS) return 98u;
    if (dt == DT_IQ3_S) return 110u;
    if (dt == DT_IQ1_S) return 50u;
    if (dt == DT_IQ1_M) return 56u;
    return 0u;
}

uint block_size_of(uint dtype) {
    if (dtype == DT_F32 || dtype == DT_F16 || dtype == DT_BF16) return 1u;
    if ((dtype >= DT_Q2_K && dtype <= DT_Q8_K) || dtype == DT_IQ4_XS || iq_grid_bytes(dtype) != 0u) return 256u;
    return 32u;
}

#ifdef IQ_GRIDS
// The grid IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M)
// as weights (t0): the layouts and rules of tessera/plugin_quants.h
// (tsr_decode_*). Their grids (tessera/iq_grids.h) are a buffer the queue
// binds at the slot a shader names in IQ_GRIDS (t2 or t3, one its node does
// not use: vk_queue.c), each table at the word iq_grids.glsl gives
// (generated at build time by backends/gen_iq_grids.py, which also writes
// the buffer's contents for the plugin). Only the matrix products' IQ
// builds define IQ_GRIDS. Sub-block ib (0..7) of a block is 32 elements;
// each half has one scale and each element is scale * q, q a small integer
// (IQ1_S, IQ1_M: q is 8 times grid +- 1/8 and the scale an eighth, as
// tsr_decode_iq1_*: exact).
#include "iq_grids.glsl"
uint iq_word(uint w) { return IQ_GRIDS.d[w]; } // bound whole, from byte 0

// tsr_iq_signs: the 8 signs of a 7-bit index, bit 7 making the count of
// minus signs even
uint iq_signs(uint i) {
    i &= 127u;
    uint p = i ^ (i >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return i | ((p & 1u) << 7);
}

// byte j (0..7) of the grid entry g as a signed value, negated where bit j of s is set
int iq_grid_byte(uvec2 g, uint j, uint s) {
    int v = int((((j < 4u ? g.x : g.y) >> (8u * (j & 3u))) & 0xffu) << 24) >> 24;
    return ((s >> j) & 1u) != 0u ? -v : v;
}

// the scales of the two halves of sub-block ib of the block at b, with
// ref's float operations in ref's order
vec2 iq_scales(uint dt, uint b, uint ib) {
    precise float s0, s1;
    if (dt == DT_IQ2_XXS) {
        s0 = t0_f16(b) * (0.5 + float(t0_u32_2(b + 6u + 8u * ib) >> 28)) * 0.25; s1 = s0;
    } else if (dt == DT_IQ2_XS || dt == DT_IQ2_S) {
        uint sc = t0_u8(b + (dt == DT_IQ2_XS ? 66u : 74u) + ib);
        float d = t0_f16(b);
        s0 = d * (0.5 + float(sc & 0xfu)) * 0.25;
        s1 = d * (0.5 + float(sc >> 4)) * 0.25;
    } else if (dt == DT_IQ3_XXS) {
        s0 = t0_f16(b) * (0.5 + float(t0_u32_2(b + 66u + 4u * ib) >> 28)) * 0.5; s1 = s0;
    } else if (dt == DT_IQ3_S) {
        uint s4 = t0_u8(b + 106u + (ib >> 1));
        s0 = t0_f16(b) * float(1u + 2u * ((ib & 1u) != 0u ? s4 >> 4 : s4 & 0xfu)); s1 = s0;
    } else if (dt == DT_IQ1_S) {
        uint h = t0_u16(b + 34u + 2u * ib);
        s0 = t0_f16(b) * float(2u * ((h >> 12) & 7u) + 1u) * 0.125; s1 = s0;
    } else { // DT_IQ1_M: d in the top nibbles of the four scale words
        uint w0 = t0_u16(b + 48u), w1 = t0_u16(b + 50u), w2 = t0_u16(b + 52u), w3 = t0_u16(b + 54u);
        float d = f16_to_f32((w0 >> 12) | ((w1 >> 8) & 0x00f0u) | ((w2 >> 4) & 0x0f00u) | (w3 & 0xf000u));
        uint sw = t0_u16(b + 48u + 2u * (ib >> 1)), sh = 6u * (ib & 1u);
        s0 = d * float(2u * ((sw >> sh) & 7u) + 1u) * 0.125;
        s1 = d * float(2u * ((sw >> (sh + 3u)) & 7u) + 1u) * 0.125;
    }
    return vec2(s0, s1);
}

// values 8l .. 8l+7 (l 0..3) of sub-block ib of the block at b
void iq_group(uint dt, uint b, uint ib, uint l, out int q[8]) {
    uvec2 g;
    uint s = 0u;
    int delta = 0;
    if (dt == DT_IQ2_XXS) {
        uint idx = (t0_u32_2(b + 2u + 8u * ib) >> (8u * l)) & 0xffu;
        g = uvec2(iq_word(IQ2XXS_GRID + 2u * idx), iq_word(IQ2XXS_GRID + 2u * idx + 1u));
        s = iq_signs(t0_u32_2(b + 6u + 8u * ib) >> (7u * l));
    } else if (dt == DT_IQ2_XS) {
        uint v = t0_u16(b + 2u + 2u * (4u * ib + l)), idx = v & 511u;
        g = uvec2(iq_word(IQ2XS_GRID + 2u * idx), iq_word(IQ2XS_GRID + 2u * idx + 1u));
        s = iq_signs(v >> 9);
    } else if (dt == DT_IQ2_S) {
        uint idx = t0_u8(b + 2u + 4u * ib + l) | ((t0_u8(b + 66u + ib) << (8u - 2u * l)) & 0x300u);
        g = uvec2(iq_word(IQ2S_GRID + 2u * idx), iq_word(IQ2S_GRID + 2u * idx + 1u));
        s = t0_u8(b + 34u + 4u * ib + l);
    } else if (dt == DT_IQ3_XXS) {
        g = uvec2(iq_word(IQ3XXS_GRID + t0_u8(b + 2u + 8u * ib + 2u * l)), iq_word(IQ3XXS_GRID + t0_u8(b + 3u + 8u * ib + 2u * l)));
        s = iq_signs(t0_u32_2(b + 66u + 4u * ib) >> (7u * l));
    } else if (dt == DT_IQ3_S) {
        uint qh = t0_u8(b + 66u + ib);
        g = uvec2(iq_word(IQ3S_GRID + (t0_u8(b + 2u + 8u * ib + 2u * l) | ((qh << (8u - 2u * l)) & 256u))),
                  iq_word(IQ3S_GRID + (t0_u8(b + 3u + 8u * ib + 2u * l) | ((qh << (7u - 2u * l)) & 256u))));
        s = t0_u8(b + 74u + 4u * ib + l);
    } else if (dt == DT_IQ1_S) {
        uint h = t0_u16(b + 34u + 2u * ib);
        uint idx = t0_u8(b + 2u + 4u * ib + l) | (((h >> (3u * l)) & 7u) << 8);
        g = uvec2(iq_word(IQ1S_GRID + 2u * idx), iq_word(IQ1S_GRID + 2u * idx + 1u));
        delta = (h & 0x8000u) != 0u ? -1 : 1;
    } else { // DT_IQ1_M
        uint qh = t0_u8(b + 32u + 2u * ib + (l >> 1));
        uint idx = t0_u8(b + 4u * ib + l) | ((qh << ((l & 1u) != 0u ? 4u : 8u)) & 0x700u);
        g = uvec2(iq_word(IQ1S_GRID + 2u * idx), iq_word(IQ1S_GRID + 2u * idx + 1u));
        delta = (qh & ((l & 1u) != 0u ? 0x80u : 0x08u)) != 0u ? -1 : 1;
    }
    bool iq1 = dt == DT_IQ1_S || dt == DT_IQ1_M;
    for (uint j = 0u; j < 8u; j++) {
        int v = iq_grid_byte(g, j, s);
        q[j] = iq1 ? 8 * v + delta : v;
    }
}
#endif

// K-quants' 6-bit scale and min number i (0..7) packed in 12 bytes at sc
void scale_min_k4(uint sc, uint i, out float scale, out float mn) {
    if (i < 4u) {
        scale = float(t0_u8(sc + i) & 63u);
        mn = float(t0_u8(sc + i + 4u) & 63u);
    } else {
        scale = float((t0_u8(sc + i + 4u) & 0xfu) | ((t0_u8(sc + i - 4u) >> 6) << 4));
        mn = float((t0_u8(sc + i + 4u) >> 4) | ((t0_u8(sc + i) >> 6) << 4));
    }
}

float dequant(uint dtype, uint b, uint j) {
    if (block_size_of(dtype) == 32u) return t0_block32(dtype, b, j);
#ifdef IQ_GRIDS
    if (iq_grid_bytes(dtype) != 0u) { // element j: group (j / 8) % 4 of sub-block j / 32
        int q[8];
        iq_group(dtype, b, j >> 5, (j >> 3) & 3u, q);
        vec2 sc = iq_scales(dtype, b, j >> 5);
        precise float v = (((j >> 4) & 1u) == 0u ? sc.x : sc.y) * float(q[j & 7u]);
        return v;
    }
#endif
    if (dtype == DT_Q8_K) return uintBitsToFloat(t0_u32_2(b)) * float(t0_i8(b + 4u + j)); // f32 d, qs[256]
    if (dtype == DT_Q2_K) {
        // scales[16] qs[64] d dmin; element j: half h, 32-run r (shift 2r), lane l
        uint h = j >> 7, r = (j >> 5) & 3u, l = j & 31u;
        uint q = (t0_u8(b + 16u + h * 32u + l) >> (2u * r)) & 3u;
        uint sc = t0_u8(b + h * 8u + r * 2u + (l >> 4));
        return t0_f16(b + 80u) * float(sc & 0xfu) * float(q) - t0_f16(b + 82u) * float(sc >> 4);
    }
    if (dtype == DT_Q3_K) {
        // hmask[32] qs[64] scales[12] d
        uint h = j >> 7, r = (j >> 5) & 3u, l = j & 31u;
        uint q = (t0_u8(b + 32u + h * 32u + l) >> (2u * r)) & 3u;
        uint high = (t0_u8(b + l) >> (h * 4u + r)) & 1u;
        uint i = h * 8u + r * 2u + (l >> 4);                // scale number 0..15
        uint lo4 = i < 8u ? t0_u8(b + 96u + i) & 0xfu : t0_u8(b + 96u + i - 8u) >> 4;
        uint hi2 = (t0_u8(b + 104u + (i & 3u)) >> (2u * (i >> 2))) & 3u;
        int sc = int(lo4 | (hi2 << 4)) - 32;
        return t0_f16(b + 108u) * float(sc) * float(int(q) - (high != 0u ? 0 : 4));
    }
    if (dtype == DT_Q4_K) {
        // d dmin scales[12] qs[128]; 64-element groups g, low then high nibbles
        uint g = j >> 6, hi = (j >> 5) & 1u, l = j & 31u;
        uint byte = t0_u8(b + 16u + g * 32u + l);
        uint q = hi != 0u ? byte >> 4 : byte & 0xfu;
        float sc, mn;
        scale_min_k4(b + 4u, g * 2u + hi, sc, mn);
        return t0_f16(b) * sc * float(q) - t0_f16(b + 2u) * mn;
    }
    if (dtype == DT_Q5_K) {
        // d dmin scales[12] qh[32] qs[128]
        uint g = j >> 6, hi = (j >> 5) & 1u, l = j & 31u;
        uint byte = t0_u8(b + 48u + g * 32u + l);
        uint q = (hi != 0u ? byte >> 4 : byte & 0xfu) | (((t0_u8(b + 16u + l) >> (2u * g + hi)) & 1u) << 4);
        float sc, mn;
        scale_min_k4(b + 4u, g * 2u + hi, sc, mn);
        return t0_f16(b) * sc * float(q) - t0_f16(b + 2u) * mn;
    }
    if (dtype == DT_Q6_K) {
        // ql[128] qh[64] scales[16] (int8) d
        uint h = j >> 7, r = (j >> 5) & 3u, l = j & 31u;
        uint lbyte = t0_u8(b + h * 64u + l + (r & 1u) * 32u);
        uint lo = r >= 2u ? lbyte >> 4 : lbyte & 0xfu;
        uint hb = (t0_u8(b + 128u + h * 32u + l) >> (2u * r)) & 3u;
        int q = int(lo | (hb << 4)) - 32;
        int sc = t0_i8(b + 192u + h * 8u + (l >> 4) + 2u * r);
        return t0_f16(b + 208u) * float(sc) * float(q);
    }
    if (dtype == DT_IQ4_XS) {
        // d scales_h(u16) scales_l[4] qs[128]; 32-element sub-block ib with
        // a 6-bit scale (ls - 32) * d, nibbles as IQ4_NL
        uint ib = j >> 5, l = j & 31u;
        uint ls = ((t0_u8(b + 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 0xfu) | (((t0_u16(b + 2u) >> (2u * ib)) & 3u) << 4);
        uint byte = t0_u8(b + 8u + 16u * ib + (l & 15u));
        precise float dl = t0_f16(b) * float(int(ls) - 32);
        precise float v = dl * float(IQ4NL_VALUES[l < 16u ? byte & 0xfu : byte >> 4]);
        return v;
    }
    return uintBitsToFloat(0x7fc00000u); // not reached: supports_op declines other types
}

// Element idx (idx.x along the row) of tensor 0, any supported dtype.
float load0(uvec4 idx) {
    uint dtype = P.dt[0];
    uint bs = block_size_of(dtype);
    if (bs == 1u) return t0_float(dtype, elem_off(0u, idx));
    uint row = P.off[0] + idx.y * P.nb[0].y + idx.z * P.nb[0].z + idx.w * P.nb[0].w;
    return dequant(dtype, row + (idx.x / bs) * P.nb[0].x, idx.x % bs);
}

float load1(uvec4 idx) { return t1_float(P.dt[1], elem_off(1u, idx)); }
float load2(uvec4 idx) { return t2_float(P.dt[2], elem_off(2u, idx)); }

// Element idx of tensor 1 or 2 read as dtype dt: F32/F16/BF16 or a
// 32-element block type (flash attention's k and v in a quantized KV
// cache). dt is a specialization constant where it is called, so each
// pipeline holds one reader (barriers make a shader a coroutine on
// lavapipe, whose compile time grows steeply with its size).
uint block32_off(uint k, uvec4 idx) { return elem_off(k, uvec4(idx.x >> 5, idx.yzw)); }
float load1_as(uint dt, uvec4 idx) {
    if (block_size_of(dt) == 1u) return t1_float(dt, elem_off(1u, idx));
    return t1_block32(dt, block32_off(1u, idx), idx.x & 31u);
}
float load2_as(uint dt, uvec4 idx) {
    if (block_size_of(dt) == 1u) return t2_float(dt, elem_off(2u, idx));
    return t2_block32(dt, block32_off(2u, idx), idx.x & 31u);
}
float load3(uvec4 idx) { return t3_float(P.dt[3], elem_off(3u, idx)); }
