/*
 * cpu_blocks.h — the GGUF block layouts the CPU plugins (cpu-avx, cpu-neon)
 * read (byte for byte the ggml formats, documented in GGUF's spec), the 8-bit
 * activation blocks their quantized matrix products share, and scalar
 * fp16/bf16 conversions. Compiled into each plugin, which include nothing
 * from core.
 *
 * Weight blocks (value of element i; d, m, dmin are fp16 unless noted):
 *   Q4_0  {d; qs[16]}            low nibble of qs[j] -> j, high -> j+16; (q-8)*d
 *   Q4_1  {d; m; qs[16]}         same nibbles; q*d + m
 *   Q5_0  {d; qh[4]; qs[16]}     5th bit j of qh (u32 LE) for element j; (q-16)*d
 *   Q5_1  {d; m; qh[4]; qs[16]}  same bits; q*d + m
 *   Q8_0  {d; int8 qs[32]}       q*d
 *   Q2_K  {scales[16]; qs[64]; d; dmin}   16 groups of 16, 2-bit q, 4-bit scale|min
 *   Q3_K  {hmask[32]; qs[64]; scales[12]; d}   16 groups, 3-bit q, 6-bit scales-32
 *   Q4_K  {d; dmin; scales[12]; qs[128]}  8 groups of 32, 6-bit scale and min
 *   Q5_K  {d; dmin; scales[12]; qh[32]; qs[128]}
 *   Q6_K  {ql[128]; qh[64]; int8 scales[16]; d}  16 groups of 16, (q-32)*d*sc
 */
#ifndef TESSERA_CPU_COMMON_CPU_BLOCKS_H
#define TESSERA_CPU_COMMON_CPU_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include <tessera/plugin_util.h>

#define QK 32
#define QKK 256

/* The weight blocks are plugin_util.h's structs (one definition for host
 * and plugins). */
typedef tsr_block_q4_0 blk_q4_0;
typedef tsr_block_q4_1 blk_q4_1;
typedef tsr_block_q5_0 blk_q5_0;
typedef tsr_block_q5_1 blk_q5_1;
typedef tsr_block_q8_0 blk_q8_0;
typedef tsr_block_q2_K blk_q2_k;
typedef tsr_block_q3_K blk_q3_k;
typedef tsr_block_q4_K blk_q4_k;
typedef tsr_block_q5_K blk_q5_k;
typedef tsr_block_q6_K blk_q6_k;

/*
 * Activation blocks (plugin-internal, never stored in a file). They carry the
 * same numbers as ggml's Q8_0/Q8_1/Q8_K (d rounded to fp16 for the 32-blocks,
 * so products round like llama.cpp's) plus the sums the kernels need.
 *   act8:  32 values; d (fp16-rounded), isum = sum(qs), s = d*isum (as Q8_1)
 *   act8k: 256 values; d = 1/iscale (f32), bsums[i] = sum of qs[16i..16i+15]
 */
typedef struct {
    float d;
    float s;
    int32_t isum;
    int32_t pad;
    int8_t qs[32];
} act8;

typedef struct {
    float d;
    int32_t pad[3];
    int16_t bsums[16];
    int8_t qs[256];
} act8k;


/* ----------------------------------------------------- fp16 / bf16 */

static inline float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float cpu_fp16_to_f32(uint16_t h) { return tsr_fp16_to_f32(h); }

/* Float to IEEE half, round to nearest even. Unlike tsr_f32_to_fp16 a NaN
 * keeps the top of its payload, as F16C's vcvtps2ph does, so this scalar
 * path and the plugins' vector conversions give the same bits. */
static inline uint16_t cpu_f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (ax < 0x38800000u) { /* subnormal half or zero */
        float v = f32_from_bits(ax) * 16777216.0f; /* value / 2^-24 */
        uint32_t m = (uint32_t)__builtin_rintf(v);
        return (uint16_t)(sign | m);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u) - (112u << 23);
    return (uint16_t)(sign | (r >> 13));
}

static inline float cpu_bf16_to_f32(uint16_t h) { return tsr_bf16_to_f32(h); }
static inline uint16_t cpu_f32_to_bf16(float f) { return tsr_f32_to_bf16(f); }

static inline float fp16_round(float f) { return cpu_fp16_to_f32(cpu_f32_to_fp16(f)); }

/* act8p: four 32-blocks (128 activations) packed for cpu-avx's vector Q4_0 /
 * Q8_0 kernels, in the order a register of Q4_0 nibbles comes in:
 * qs[0..63] = elements 0..15 of blocks 0, 1, 2, 3 (16 each), qs[64..127] =
 * elements 16..31 of blocks 0..3. So every 4-byte lane l of either half
 * belongs to block l/4 and both halves sum into one accumulator (lane l:
 * block l/4). d[l] = d of block l/4 (fp16-rounded); corr[l] = -offset * (sum
 * of qs[4l..4l+3] and qs[64+4l..64+4l+3]) where offset is the weight type's
 * zero point (8 for Q4_0, 0 for Q8_0): the integer accumulator starts from
 * corr, so sum((w - offset) * a) costs no extra instruction. A row of K
 * activations is ceil(K/128) of them; where K % 128 is 64 the last one holds
 * blocks 0, 1 and zeros (qs, d, corr) for blocks 2, 3. */
typedef struct {
    int8_t qs[128];
    float d[16];
    int32_t corr[16];
} act8p;

_Static_assert(sizeof(act8p) == 256, "act8p keeps 64-byte alignment");

#endif
