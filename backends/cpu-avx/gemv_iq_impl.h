/*
 * gemv_iq_impl.h — IQ4_NL, MXFP4, IQ4_XS and TQ2_0 weights against act8 / act8k
 * activations on every level: included by each kernels_<level>.c after
 * kernels_impl.h; gemv_iq_register puts them in the table.
 *
 * The three formats store 4-bit indices into a 16-entry table of int8
 * levels (plugin_quants.h: TSR_IQ4NL_VALUES, TSR_MXFP4_VALUES), so one
 * byte shuffle (vpshufb) turns a register of nibbles into 32 signed
 * weights. Signed x signed products use the sign trick of the Q8_0 kernel:
 * |w| as u8 times a with w's sign, pairs summed in i16 (vpmaddubsw: at most
 * 2 * 127 * 127, no saturation), widened to i32 by vpmaddwd, which for
 * IQ4_XS multiplies by the 32-block's 6-bit scale (ls - 32) on the way.
 * Decoding streams the weights once with DECODE_PREFETCH ahead, as the
 * K-quant kernels do. The straightforward version: dot_decoded in
 * cpu_mm_quants.c (same integer sums; the float steps per block differ,
 * within the conformance tolerance).
 */
#include <tessera/plugin_quants.h>

/* 32 signed products of w and a summed in fours into 8 i32 lanes. */
static inline __m256i dot_s8s8(__m256i acc, __m256i w, __m256i a) {
    return dot_u8s8(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

/* 16 bytes of nibbles (element j: low nibble of byte j, j+16: high) as 32
 * table entries. */
static inline __m256i nibbles_lookup(const uint8_t *qs, __m256i table) {
    return _mm256_shuffle_epi8(table, load_nibbles_q4(qs));
}

static inline __m256i table16(const int8_t *values) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)values));
}

/* 32-element blocks of nibble indices, act8 activations: IQ4_NL (scale
 * fp16 d) and MXFP4 (scale an E8M0 byte). */
#define DOT_NIBBLE32(NAME, BLK, VALUES, SCALE)                                                          \
    KERNEL_INLINE void NAME##_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc, \
                                   float *out) {                                                         \
        const BLK *x = w;                                                                                \
        const __m256i table = table16(VALUES);                                                           \
        __m256 acc[CPU_NC];                                                                              \
        for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();                                   \
        for (int64_t ib = 0; ib < K / 32; ib++) {                                                        \
            prefetch_row_ahead(x + ib, (int)sizeof *x);                                                  \
            const __m256i q = nibbles_lookup(x[ib].qs, table);                                           \
            const float dw = SCALE(x[ib]);                                                               \
            for (int c = 0; c < nc; c++) {                                                               \
                const act8 *a = (const act8 *)ACT(c) + ib;                                               \
                const __m256i p = dot_s8s8(_mm256_setzero_si256(), q,                                    \
                                           _mm256_loadu_si256((const __m256i *)a->qs));                  \
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a->d), acc[c]);      \
            }                                                                                            \
        }                                                                                                \
        for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);                                           \
    }                                                                                                    \
    NC1_SPECIALIZED(NAME, NAME##_body)

#define IQ4NL_SCALE(b) f16s((b).d)
#define MXFP4_SCALE(b) tsr_e8m0_half((b).e)
DOT_NIBBLE32(dot_iq4_nl_v, tsr_block_iq4_nl, TSR_IQ4NL_VALUES, IQ4NL_SCALE)
DOT_NIBBLE32(dot_mxfp4_v, tsr_block_mxfp4, TSR_MXFP4_VALUES, MXFP4_SCALE)

/* IQ4_XS x act8k: per 256-block 8 sub-blocks of 32, two per 32-byte load
 * of nibbles (low nibbles: elements 0..15 of each, high: 16..31). */
KERNEL_INLINE void dot_iq4_xs_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                     float *out) {
    const tsr_block_iq4_xs *x = w;
    const __m256i table = table16(TSR_IQ4NL_VALUES), m4 = _mm256_set1_epi8(0x0f);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const tsr_block_iq4_xs *b = x + ib;
        prefetch_row_ahead(b, (int)sizeof *b);
        int16_t ls[8];
        for (int j = 0; j < 8; j++)
            ls[j] = (int16_t)((((b->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((b->scales_h >> (2 * j)) & 3) << 4)) - 32);
        __m256i isum[CPU_NC];
        for (int c = 0; c < CPU_NC; c++) isum[c] = _mm256_setzero_si256();
        for (int p = 0; p < 4; p++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * p));
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
            const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
            const __m256i w0 = _mm256_permute2x128_si256(lo, hi, 0x20), w1 = _mm256_permute2x128_si256(lo, hi, 0x31);
            const __m256i u0 = _mm256_sign_epi8(w0, w0), u1 = _mm256_sign_epi8(w1, w1);
            const __m256i s0 = _mm256_set1_epi16(ls[2 * p]), s1 = _mm256_set1_epi16(ls[2 * p + 1]);
            for (int c = 0; c < nc; c++) {
                const act8k *a = (const act8k *)ACT(c) + ib;
                const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p));
                const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a->qs + 64 * p + 32));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u0, _mm256_sign_epi8(a0, w0)), s0));
                isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(u1, _mm256_sign_epi8(a1, w1)), s1));
            }
        }
        const float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps(d * a->d), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_iq4_xs_v, dot_iq4_xs_v_body)

/* TQ2_0 x act8k: element 128h + 32l + m is bits 2l..2l+1 of qs[32h + m],
 * a level v in 0..2 meaning v - 1. Shifting a register of 32 qs bytes by
 * 2l and masking gives 32 levels in the activations' order; vpmaddubsw
 * takes them as u8, and the -1 is the activations' sum (their bsums). */
KERNEL_INLINE void dot_tq2_0_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    const tsr_block_tq2_0 *x = w;
    const __m256i m3 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const tsr_block_tq2_0 *b = x + ib;
        prefetch_row_ahead(b, (int)sizeof *b);
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)b->qs);
        const __m256i q1 = _mm256_loadu_si256((const __m256i *)(b->qs + 32));
        const float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            /* -sum(a), spread over 8 lanes */
            __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), ones));
            for (int l = 0; l < 4; l++) {
                const __m256i v0 = _mm256_and_si256(_mm256_srli_epi16(q0, 2 * l), m3);
                const __m256i v1 = _mm256_and_si256(_mm256_srli_epi16(q1, 2 * l), m3);
                isum = dot_u8s8(isum, v0, _mm256_loadu_si256((const __m256i *)(a->qs + 32 * l)));
                isum = dot_u8s8(isum, v1, _mm256_loadu_si256((const __m256i *)(a->qs + 128 + 32 * l)));
            }
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a->d), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_tq2_0_v, dot_tq2_0_v_body)

static void gemv_iq_register(cpu_kernels *k) {
    k->dot[TSR_DTYPE_TQ2_0] = dot_tq2_0_v;
    k->dot[TSR_DTYPE_IQ4_NL] = dot_iq4_nl_v;
    k->dot[TSR_DTYPE_MXFP4] = dot_mxfp4_v;
    k->dot[TSR_DTYPE_IQ4_XS] = dot_iq4_xs_v;
}
