/*
 * dequant.cl - quantized rows to f32, 32 elements ("a chunk") at a time.
 *
 * dequant32(row, type, c, out) writes elements 32c .. 32c+31 of a row whose
 * blocks start at row. For the 32-element types a chunk is one block; for
 * the k-quants (256-element super-blocks) it is sub-block c % 8 of
 * super-block c / 8. Block layouts are ggml's (byte for byte), written out
 * here from their definitions:
 *   Q4_0  {f16 d; u8 qs[16]}                      x = d * (q - 8)
 *   Q4_1  {f16 d, m; u8 qs[16]}                   x = d * q + m
 *   Q5_0  {f16 d; u8 qh[4]; u8 qs[16]}            x = d * (q - 16), q 5 bits
 *   Q5_1  {f16 d, m; u8 qh[4]; u8 qs[16]}         x = d * q + m
 *   Q8_0  {f16 d; i8 qs[32]}                      x = d * q
 *   IQ4_NL {f16 d; u8 qs[16]}                     x = d * table[q]
 *   MXFP4 {u8 e; u8 qs[16]}                       x = 2^(e-128) * mxfp4[q] (E2M1
 *         values doubled; 17-byte blocks, read a byte at a time)
 *   (nibbles: element j < 16 is the low nibble of qs[j], j >= 16 the high
 *   nibble of qs[j - 16]; Q5's fifth bit of element j is bit j of qh)
 *   Q2_K  {u8 scales[16]; u8 qs[64]; f16 d, dmin}
 *   Q3_K  {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
 *   Q4_K  {f16 d, dmin; u8 scales[12]; u8 qs[128]}
 *   Q5_K  {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
 *   Q6_K  {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}
 *   IQ4_XS {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}: sub-block j
 *         has the 6-bit scale ls = (4 bits of scales_l, 2 of scales_h) and
 *         x = (d * (ls - 32)) * table[q], nibbles as IQ4_NL in qs[16 j..]
 *   the grid IQ types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
 *         IQ1_M): iq_group and iq_scales below, the layouts and rules of
 *         tessera/plugin_quants.h (tsr_decode_*) with its grids, generated
 *         into iq_grids.cl from tessera/iq_grids.h at build time
 */
#define BYTES_Q4_0 18
#define BYTES_Q4_1 20
#define BYTES_Q5_0 22
#define BYTES_Q5_1 24
#define BYTES_Q8_0 34
#define BYTES_Q2_K 84
#define BYTES_Q3_K 110
#define BYTES_Q4_K 144
#define BYTES_Q5_K 176
#define BYTES_Q6_K 210
#define BYTES_IQ4_XS 136
#define BYTES_MXFP4 17
#define BYTES_IQ2_XXS 66
#define BYTES_IQ2_XS 74
#define BYTES_IQ2_S 82
#define BYTES_IQ3_XXS 98
#define BYTES_IQ3_S 110
#define BYTES_IQ1_S 50
#define BYTES_IQ1_M 56

constant char iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
/* tessera/plugin_quants.h: TSR_MXFP4_VALUES and tsr_e8m0_half */
constant char mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* E8M0 exponent byte e times 1/2: 2^(e-128) (subnormal below 2). */
static inline float e8m0_half(uint e) { return as_float(e < 2 ? 0x00200000u << e : (e - 1) << 23); }

static inline uint load_u32_bytes(const global uchar *p) {
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* 4-bit nibble j (0..31) of a 16-byte qs array. */
static inline int nibble(const global uchar *qs, int j) {
    return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
}

/* Scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block: 6 bits
 * each, packed in 12 bytes. */
static inline void scale_min_k4(int j, const global uchar *q, float *sc, float *m) {
    if (j < 4) {
        *sc = (float)(q[j] & 63);
        *m = (float)(q[j + 4] & 63);
    } else {
        *sc = (float)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Signed 6-bit scale is (0..15) of a Q3_K super-block, minus 32. */
static inline int scale_q3_k(const global uchar *s, int is) {
    int low = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
    int high = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
    return (low | (high << 4)) - 32;
}

static inline uint load_u16_bytes(const global uchar *p) { return (uint)p[0] | ((uint)p[1] << 8); }

/* Bytes per block of a grid IQ type (0: not one). */
static inline int iq_grid_bytes(int type) {
    switch (type) {
    case DT_IQ2_XXS: return BYTES_IQ2_XXS;
    case DT_IQ2_XS: return BYTES_IQ2_XS;
    case DT_IQ2_S: return BYTES_IQ2_S;
    case DT_IQ3_XXS: return BYTES_IQ3_XXS;
    case DT_IQ3_S: return BYTES_IQ3_S;
    case DT_IQ1_S: return BYTES_IQ1_S;
    case DT_IQ1_M: return BYTES_IQ1_M;
    default: return 0;
    }
}

/* tsr_iq_signs: the 8 signs of a 7-bit index, bit 7 making the count of
 * minus signs even. */
static inline uint iq_signs(uint i) {
    i &= 127u;
    uint p = i ^ (i >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return i | ((p & 1u) << 7);
}

/* Byte j of grid entry g as a signed value, negated where bit j of s is
 * set. */
static inline int grid_byte(ulong g, int j, uint s) {
    const int v = (int)(char)(uchar)(g >> (8 * j));
    return (s >> j) & 1u ? -v : v;
}

/* The scales of the two 16-element halves of sub-block ib (0..7) of the
 * block at b, formed with ref's float operations in ref's order
 * (tsr_decode_*). */
static inline float2 iq_scales(const global uchar *b, int type, int ib) {
    switch (type) {
    case DT_IQ2_XXS: {
        const float s = load_f16(b) * (0.5f + (float)(load_u32_bytes(b + 6 + 8 * ib) >> 28)) * 0.25f;
        return (float2)(s, s);
    }
    case DT_IQ2_XS:
    case DT_IQ2_S: {
        const uint sc = b[type == DT_IQ2_XS ? 66 + ib : 74 + ib];
        const float d = load_f16(b);
        return (float2)(d * (0.5f + (float)(sc & 0xf)) * 0.25f, d * (0.5f + (float)(sc >> 4)) * 0.25f);
    }
    case DT_IQ3_XXS: {
        const float s = load_f16(b) * (0.5f + (float)(load_u32_bytes(b + 66 + 4 * ib) >> 28)) * 0.5f;
        return (float2)(s, s);
    }
    case DT_IQ3_S: {
        const uint s4 = b[106 + ib / 2];
        const float s = load_f16(b) * (float)(1 + 2 * (int)(ib % 2 ? s4 >> 4 : s4 & 0xf));
        return (float2)(s, s);
    }
    case DT_IQ1_S: {
        const uint h = load_u16_bytes(b + 34 + 2 * ib);
        const float s = load_f16(b) * (float)(2 * ((h >> 12) & 7) + 1) * 0.125f;
        return (float2)(s, s);
    }
    default: { /* DT_IQ1_M: d in the top nibbles of the four scale words */
        uint s[4];
        for (int i = 0; i < 4; i++) s[i] = load_u16_bytes(b + 48 + 2 * i);
        const uint dh = (s[0] >> 12) | ((s[1] >> 8) & 0x00f0) | ((s[2] >> 4) & 0x0f00) | (s[3] & 0xf000);
        const ushort dbits = (ushort)dh;
        const float d = vload_half(0, (const private half *)&dbits);
        const int sh = 6 * (ib % 2);
        return (float2)(d * (float)(2 * ((s[ib / 2] >> sh) & 7) + 1) * 0.125f,
                        d * (float)(2 * ((s[ib / 2] >> (sh + 3)) & 7) + 1) * 0.125f);
    }
    }
}

/* Values 8l .. 8l+7 (l 0..3) of sub-block ib of the block at b as small
 * integers: element = scale of its half * q (IQ1_S, IQ1_M: q is 8 times
 * grid +- 1/8 and their scale an eighth, as tsr_decode_iq1_*). */
static inline void iq_group(const global uchar *b, int type, int ib, int l, int *q) {
    switch (type) {
    case DT_IQ2_XXS: {
        const uint idx = load_u32_bytes(b + 2 + 8 * ib), aux = load_u32_bytes(b + 6 + 8 * ib);
        const ulong g = iq2xxs_grid[(idx >> (8 * l)) & 0xff];
        const uint s = iq_signs(aux >> (7 * l));
        for (int j = 0; j < 8; j++) q[j] = grid_byte(g, j, s);
        break;
    }
    case DT_IQ2_XS: {
        const uint v = load_u16_bytes(b + 2 + 2 * (4 * ib + l));
        const ulong g = iq2xs_grid[v & 511];
        const uint s = iq_signs(v >> 9);
        for (int j = 0; j < 8; j++) q[j] = grid_byte(g, j, s);
        break;
    }
    case DT_IQ2_S: {
        const uint idx = b[2 + 4 * ib + l] | (((uint)b[66 + ib] << (8 - 2 * l)) & 0x300);
        const ulong g = iq2s_grid[idx];
        const uint s = b[34 + 4 * ib + l];
        for (int j = 0; j < 8; j++) q[j] = grid_byte(g, j, s);
        break;
    }
    case DT_IQ3_XXS: {
        const uint s = iq_signs(load_u32_bytes(b + 66 + 4 * ib) >> (7 * l));
        const ulong g = (ulong)iq3xxs_grid[b[2 + 8 * ib + 2 * l]] | ((ulong)iq3xxs_grid[b[3 + 8 * ib + 2 * l]] << 32);
        for (int j = 0; j < 8; j++) q[j] = grid_byte(g, j, s);
        break;
    }
    case DT_IQ3_S: {
        const uint qh = b[66 + ib], s = b[74 + 4 * ib + l];
        const ulong g = (ulong)iq3s_grid[b[2 + 8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256)] |
                        ((ulong)iq3s_grid[b[3 + 8 * ib + 2 * l] | ((qh << (7 - 2 * l)) & 256)] << 32);
        for (int j = 0; j < 8; j++) q[j] = grid_byte(g, j, s);
        break;
    }
    case DT_IQ1_S: {
        const uint h = load_u16_bytes(b + 34 + 2 * ib);
        const ulong g = iq1s_grid[b[2 + 4 * ib + l] | (((h >> (3 * l)) & 7) << 8)];
        const int delta = h & 0x8000 ? -1 : 1;
        for (int j = 0; j < 8; j++) q[j] = 8 * grid_byte(g, j, 0) + delta;
        break;
    }
    default: { /* DT_IQ1_M */
        const uint qh = b[32 + 2 * ib + l / 2];
        const ulong g = iq1s_grid[b[4 * ib + l] | ((qh << (l % 2 ? 4 : 8)) & 0x700)];
        const int delta = qh & (l % 2 ? 0x80 : 0x08) ? -1 : 1;
        for (int j = 0; j < 8; j++) q[j] = 8 * grid_byte(g, j, 0) + delta;
        break;
    }
    }
}

void dequant32(const global uchar *row, int type, long c, float *out) {
    const int grid_bytes = iq_grid_bytes(type);
    if (grid_bytes) { /* sub-block c % 8 of block c / 8 */
        const global uchar *b = row + (c / 8) * grid_bytes;
        const int ib = (int)(c % 8);
        const float2 sc = iq_scales(b, type, ib);
        int q[8];
        for (int l = 0; l < 4; l++) {
            iq_group(b, type, ib, l, q);
            for (int j = 0; j < 8; j++) out[8 * l + j] = (l < 2 ? sc.s0 : sc.s1) * (float)q[j];
        }
        return;
    }
    switch (type) {
    case DT_Q4_0: {
        const global uchar *b = row + c * BYTES_Q4_0;
        float d = load_f16(b);
        for (int j = 0; j < 32; j++) out[j] = d * (float)(nibble(b + 2, j) - 8);
        break;
    }
    case DT_Q4_1: {
        const global uchar *b = row + c * BYTES_Q4_1;
        float d = load_f16(b), m = load_f16(b + 2);
        for (int j = 0; j < 32; j++) out[j] = d * (float)nibble(b + 4, j) + m;
        break;
    }
    case DT_Q5_0: {
        const global uchar *b = row + c * BYTES_Q5_0;
        float d = load_f16(b);
        uint qh = load_u32_bytes(b + 2);
        for (int j = 0; j < 32; j++)
            out[j] = d * (float)((nibble(b + 6, j) | (int)(((qh >> j) & 1) << 4)) - 16);
        break;
    }
    case DT_Q5_1: {
        const global uchar *b = row + c * BYTES_Q5_1;
        float d = load_f16(b), m = load_f16(b + 2);
        uint qh = load_u32_bytes(b + 4);
        for (int j = 0; j < 32; j++)
            out[j] = d * (float)(nibble(b + 8, j) | (((qh >> j) & 1) << 4)) + m;
        break;
    }
    case DT_Q8_0: {
        const global uchar *b = row + c * BYTES_Q8_0;
        float d = load_f16(b);
        const global char *qs = (const global char *)(b + 2);
        for (int j = 0; j < 32; j++) out[j] = d * (float)qs[j];
        break;
    }
    case DT_IQ4_NL: {
        const global uchar *b = row + c * BYTES_Q4_0;
        float d = load_f16(b);
        for (int j = 0; j < 32; j++) out[j] = d * (float)iq4nl_values[nibble(b + 2, j)];
        break;
    }
    case DT_MXFP4: {
        const global uchar *b = row + c * BYTES_MXFP4;
        float d = e8m0_half(b[0]);
        for (int j = 0; j < 32; j++) out[j] = d * (float)mxfp4_values[nibble(b + 1, j)];
        break;
    }
    case DT_Q2_K: {
        /* sub-block c: half h = c / 4 of 128 elements, shift 2 * (c % 4);
         * each 16 elements have their own 4-bit scale and min */
        const global uchar *b = row + (c / 8) * BYTES_Q2_K;
        const int sub = (int)(c % 8), h = sub / 4, j = sub % 4;
        float d = load_f16(b + 80), dmin = load_f16(b + 82);
        for (int l = 0; l < 32; l++) {
            int sc = b[h * 8 + j * 2 + l / 16];
            int q = (b[16 + h * 32 + l] >> (2 * j)) & 3;
            out[l] = d * (float)(sc & 0xF) * (float)q - dmin * (float)(sc >> 4);
        }
        break;
    }
    case DT_Q3_K: {
        const global uchar *b = row + (c / 8) * BYTES_Q3_K;
        const int sub = (int)(c % 8), h = sub / 4, j = sub % 4;
        const global uchar *hmask = b, *qs = b + 32, *scales = b + 96;
        float d = load_f16(b + 108);
        for (int l = 0; l < 32; l++) {
            int sc = scale_q3_k(scales, h * 8 + j * 2 + l / 16);
            int q = (qs[h * 32 + l] >> (2 * j)) & 3;
            int hi = (hmask[l] >> (h * 4 + j)) & 1;
            out[l] = d * (float)sc * (float)(q - (hi ? 0 : 4));
        }
        break;
    }
    case DT_Q4_K: {
        const global uchar *b = row + (c / 8) * BYTES_Q4_K;
        const int sub = (int)(c % 8);
        float d = load_f16(b), dmin = load_f16(b + 2), sc, m;
        scale_min_k4(sub, b + 4, &sc, &m);
        const global uchar *qs = b + 16 + (sub / 2) * 32;
        for (int l = 0; l < 32; l++) {
            int q = sub % 2 ? qs[l] >> 4 : qs[l] & 0xF;
            out[l] = d * sc * (float)q - dmin * m;
        }
        break;
    }
    case DT_Q5_K: {
        const global uchar *b = row + (c / 8) * BYTES_Q5_K;
        const int sub = (int)(c % 8);
        float d = load_f16(b), dmin = load_f16(b + 2), sc, m;
        scale_min_k4(sub, b + 4, &sc, &m);
        const global uchar *qh = b + 16, *qs = b + 48 + (sub / 2) * 32;
        for (int l = 0; l < 32; l++) {
            int q = (sub % 2 ? qs[l] >> 4 : qs[l] & 0xF) | (((qh[l] >> sub) & 1) << 4);
            out[l] = d * sc * (float)q - dmin * m;
        }
        break;
    }
    case DT_Q6_K: {
        /* half h = sub / 4 of 128 elements, quarter k = sub % 4 */
        const global uchar *b = row + (c / 8) * BYTES_Q6_K;
        const int sub = (int)(c % 8), h = sub / 4, k = sub % 4;
        const global uchar *ql = b + h * 64 + (k & 1) * 32, *qh = b + 128 + h * 32;
        const global char *scales = (const global char *)(b + 192) + h * 8;
        float d = load_f16(b + 208);
        for (int l = 0; l < 32; l++) {
            int lo = k >= 2 ? ql[l] >> 4 : ql[l] & 0xF;
            int q = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
            out[l] = d * (float)scales[l / 16 + 2 * k] * (float)q;
        }
        break;
    }
    case DT_IQ4_XS: {
        const global uchar *b = row + (c / 8) * BYTES_IQ4_XS;
        const int sub = (int)(c % 8);
        const int sh = b[2] | (b[3] << 8);
        const int ls = ((b[4 + sub / 2] >> (4 * (sub % 2))) & 0xF) | (((sh >> (2 * sub)) & 3) << 4);
        const float dl = load_f16(b) * (float)(ls - 32);
        for (int j = 0; j < 32; j++) out[j] = dl * (float)iq4nl_values[nibble(b + 8 + 16 * sub, j)];
        break;
    }
    default:
        for (int j = 0; j < 32; j++) out[j] = 0.0f;
        break;
    }
}
