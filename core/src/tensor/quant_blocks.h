/*
 * quant_blocks — the byte layout of every GGUF block format Tessera
 * implements, and the per-type reference conversions behind dtype.h.
 *
 * Layouts are GGUF's (llama.cpp's ggml-common.h): little-endian, packed, no
 * padding; fp16 fields are stored as raw IEEE half bits. The static asserts
 * pin each size to the number GGUF files use.
 *
 * Naming: quant_<type>_to_f32 (dequantize), quant_<type>_from_f32 (quantize,
 * byte-exact with llama.cpp's *_ref row quantizers), quant_<type>_dot
 * (x of <type> times y of its activation type; see dtype.h).
 */
#ifndef TESSERA_TENSOR_QUANT_BLOCKS_H
#define TESSERA_TENSOR_QUANT_BLOCKS_H

#include <stdint.h>

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32
#define QK_K 256
#define K_SCALE_SIZE 12

typedef struct block_q4_0 {
    uint16_t d;             /* scale (fp16)                          */
    uint8_t qs[QK4_0 / 2];  /* element j in low nibble of qs[j], j+16 high */
} block_q4_0;

typedef struct block_q4_1 {
    uint16_t d, m;          /* scale and minimum (fp16)              */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];          /* 5th bit of element j at bit j         */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

typedef struct block_q8_0 {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

typedef struct block_q8_1 {
    uint16_t d;             /* scale                                 */
    uint16_t s;             /* d * sum(qs)                           */
    int8_t qs[QK8_1];
} block_q8_1;

typedef struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[QK4_NL / 2]; /* indices into the non-linear table     */
} block_iq4_nl;

/* K-quants: super-blocks of 256 elements split in sub-blocks of 16 or 32. */
typedef struct block_q2_K {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min      */
    uint8_t qs[QK_K / 4];      /* 2-bit quants                           */
    uint16_t d, dmin;          /* super-scales for scales and mins       */
} block_q2_K;

typedef struct block_q3_K {
    uint8_t hmask[QK_K / 8];   /* high bit: element e at hmask[e%32] bit e/32 */
    uint8_t qs[QK_K / 4];      /* low 2 bits                             */
    uint8_t scales[12];        /* 16 scales of 6 bits                    */
    uint16_t d;
} block_q3_K;

typedef struct block_q4_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE]; /* 8 scales + 8 mins, 6 bits each      */
    uint8_t qs[QK_K / 2];
} block_q4_K;

typedef struct block_q5_K {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

typedef struct block_q6_K {
    uint8_t ql[QK_K / 2];      /* low 4 bits                             */
    uint8_t qh[QK_K / 4];      /* high 2 bits                            */
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;

typedef struct block_q8_K {
    float d;                   /* plain f32 scale                        */
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  /* sum of each group of 16 quants         */
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* Round to nearest, ties to even, for |x| < 2^22 (llama.cpp's nearest_int:
 * adding 1.5*2^23 leaves the rounded integer in the low mantissa bits). */
static inline int quant_nearest_int(float x) {
    float v = x + 12582912.f;
    union { float f; int32_t i; } u = {v};
    return (u.i & 0x007fffff) - 0x00400000;
}

#define QUANT_DECLARE(t)                                                     \
    void quant_##t##_to_f32(const void *src, float *dst, int64_t n);         \
    void quant_##t##_from_f32(const float *src, void *dst, int64_t n);      \
    void quant_##t##_dot(int64_t n, float *out, const void *x, const void *y);

QUANT_DECLARE(f32)
QUANT_DECLARE(f16)
QUANT_DECLARE(bf16)
QUANT_DECLARE(q4_0)
QUANT_DECLARE(q4_1)
QUANT_DECLARE(q5_0)
QUANT_DECLARE(q5_1)
QUANT_DECLARE(q8_0)
QUANT_DECLARE(q8_1)
QUANT_DECLARE(iq4_nl)
QUANT_DECLARE(q2_K)
QUANT_DECLARE(q3_K)
QUANT_DECLARE(q4_K)
QUANT_DECLARE(q5_K)
QUANT_DECLARE(q6_K)
QUANT_DECLARE(q8_K)

#undef QUANT_DECLARE

#endif
