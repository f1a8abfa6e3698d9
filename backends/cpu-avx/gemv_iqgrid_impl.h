/*
 * gemv_iqgrid_impl.h — the grid IQ formats (IQ2_XXS, IQ2_XS, IQ2_S,
 * IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and TQ1_0 against act8k activations on
 * every level: included by each kernels_<level>.c after kernels_impl.h and
 * gemv_iq_impl.h; gemv_iqgrid_register puts them in the table.
 *
 * The layouts are plugin_quants.h's and the grids tessera/iq_grids.h's (the
 * one copy of them; nothing here repeats a table). Every kernel works on
 * one 32-element sub-block at a time, as a register of 32 bytes in the
 * activations' order:
 *   - the weights' magnitudes are gathered from the grid, one 8-byte entry
 *     per 8 weights (IQ2_*, IQ1_*) or one 4-byte entry per 4 (IQ3_*): four
 *     (eight) scalar loads put together by vpinsrq/vinserti128 — the grids
 *     have 256..2048 entries, too many for a byte shuffle;
 *   - the signs go onto the activations, not the weights (the sign trick):
 *     vpsignb with +1/-1 bytes, so the grid value stays an unsigned byte and
 *     one vpmaddubsw makes the u8 x s8 pair sums (at most 2 * 62 * 127, no
 *     saturation). 7-bit sign indices (IQ2_XXS, IQ2_XS, IQ3_XXS; bit 7 is
 *     their parity) are expanded by quants_iq_sign8, a table of the +1/-1
 *     bytes built at init from tsr_iq_signs; IQ2_S and IQ3_S store all 8 bits,
 *     which AVX-512 uses as a mask register (one masked subtract from zero)
 *     and AVX2 expands with a shuffle, an and and a compare;
 *   - vpmaddwd widens the pair sums to i32 and multiplies them by the
 *     sub-block's (or 16-group's) odd integer scale 2s + 1 on the way, as
 *     the IQ4_XS kernel does with ls - 32; one float FMA per 256-block and
 *     column applies d (with the format's 1/8 or 1/4) and the activation's d.
 * IQ1_S/IQ1_M (grid values -1, 0, 1, then 8g + delta) take g + 1 as the u8
 * operand and subtract the activations' sums; TQ1_0 computes its base-3
 * digits with 16-bit multiplies (see each kernel).
 * The straightforward version of all of them: dot_decoded in
 * cpu_mm_quants.c (the same integer sums per group; it applies the scales
 * in float per 16, so the results differ in the last bits).
 */

/* Four 8-byte grid entries: elements 8l..8l+7 from entry i_l. */
static inline __m256i gather8x4(const uint64_t *t, uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3) {
    return _mm256_set_epi64x((long long)t[i3], (long long)t[i2], (long long)t[i1], (long long)t[i0]);
}

/* Eight 4-byte grid entries: elements 4l..4l+3 from entry i[l]. */
static inline __m256i gather4x8(const uint32_t *t, const uint32_t *i) {
    return _mm256_set_epi32((int)t[i[7]], (int)t[i[6]], (int)t[i[5]], (int)t[i[4]], (int)t[i[3]], (int)t[i[2]],
                            (int)t[i[1]], (int)t[i[0]]);
}

/* The signs of 32 weights from four 7-bit indices packed in the low 28
 * bits of aux (IQ2_XXS, IQ3_XXS), as +1/-1 bytes. */
static inline __m256i signs_aux28(uint32_t aux) {
    return gather8x4(quants_iq_sign8, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
}

/* a with the signs of 32 weights applied, bit k of the 4 bytes at s the
 * sign of element k (IQ2_S, IQ3_S). */
static inline __m256i signed_act_bits(__m256i a, const uint8_t *s) {
#if KERNELS_AVX512
    uint32_t m;
    memcpy(&m, s, 4);
    return _mm256_mask_sub_epi8(a, (__mmask32)m, _mm256_setzero_si256(), a);
#else
    uint32_t m;
    memcpy(&m, s, 4);
    /* byte k <- byte k/8 of m, tested against bit k%8 */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread), bit);
    return _mm256_sign_epi8(a, _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1)));
#endif
}

/* isum + sum over 16-bit pairs of (g * a) times the i16 scales ls. */
static inline __m256i iq_madd(__m256i isum, __m256i g, __m256i a, __m256i ls) {
    return _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(g, a), ls));
}

static inline __m256i act_sub(const void *act, size_t act_stride, int c, int64_t ib, int j) {
    return _mm256_loadu_si256((const __m256i *)(((const act8k *)ACT(c) + ib)->qs + 32 * j));
}

/* The i16 scale vector of a sub-block with scales per 16: s_lo for
 * elements 0..15 (the low 128-bit lane), s_hi for 16..31. */
static inline __m256i scales16(int s_lo, int s_hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short)s_hi), _mm_set1_epi16((short)s_lo));
}

/* The float step shared by all: acc[c] += isum[c] * DW * a_c->d. */
#define IQ_BLOCK_END(DW)                                                                                   \
    for (int c = 0; c < nc; c++) {                                                                        \
        const act8k *a_ = (const act8k *)ACT(c) + ib;                                                     \
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[c]), _mm256_set1_ps((DW) * a_->d), acc[c]);       \
    }

#define IQ_BODY_BEGIN(BLK)                                                                                \
    const BLK *x = w;                                                                                     \
    __m256 acc[CPU_NC];                                                                                   \
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();                                        \
    for (int64_t ib = 0; ib < K / 256; ib++) {                                                            \
        const BLK *b = x + ib;                                                                            \
        prefetch_row_ahead(b, (int)sizeof *b);                                                            \
        __m256i isum[CPU_NC];                                                                             \
        for (int c = 0; c < CPU_NC; c++) isum[c] = _mm256_setzero_si256();

#define IQ_BODY_END(DW)                                                                                    \
        IQ_BLOCK_END(DW)                                                                                  \
    }                                                                                                     \
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);

/* IQ2_XXS: per sub-block 8 bytes, four grid indices (u8) then a u32 of four
 * 7-bit sign indices and the 4-bit scale s: value = d (2s + 1) / 8 * g. */
KERNEL_INLINE void dot_iq2_xxs_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                      float *out) {
    IQ_BODY_BEGIN(tsr_block_iq2_xxs)
    const uint8_t *q = (const uint8_t *)b->qs;
    for (int j = 0; j < 8; j++, q += 8) {
        uint32_t aux;
        memcpy(&aux, q + 4, 4);
        const __m256i g = gather8x4(tsr_iq2xxs_grid, q[0], q[1], q[2], q[3]);
        const __m256i s = signs_aux28(aux);
        const __m256i ls = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        for (int c = 0; c < nc; c++)
            isum[c] = iq_madd(isum[c], g, _mm256_sign_epi8(act_sub(act, act_stride, c, ib, j), s), ls);
    }
    IQ_BODY_END(0.125f * f16s(b->d))
}
NC1_SPECIALIZED(dot_iq2_xxs_v, dot_iq2_xxs_v_body)

/* IQ2_XS: per 8 weights a u16, 9-bit grid index and 7-bit sign index;
 * 4-bit scales per 16: value = d (2s + 1) / 8 * g. */
KERNEL_INLINE void dot_iq2_xs_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                     float *out) {
    IQ_BODY_BEGIN(tsr_block_iq2_xs)
    for (int j = 0; j < 8; j++) {
        const uint16_t *q = b->qs + 4 * j;
        const __m256i g = gather8x4(tsr_iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
        const __m256i s = gather8x4(quants_iq_sign8, q[0] >> 9, q[1] >> 9, q[2] >> 9, q[3] >> 9);
        const __m256i ls = scales16(2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1);
        for (int c = 0; c < nc; c++)
            isum[c] = iq_madd(isum[c], g, _mm256_sign_epi8(act_sub(act, act_stride, c, ib, j), s), ls);
    }
    IQ_BODY_END(0.125f * f16s(b->d))
}
NC1_SPECIALIZED(dot_iq2_xs_v, dot_iq2_xs_v_body)

/* IQ2_S: grid index = qs[4j + l] | 2 bits of qh[j] << 8 (1024 entries),
 * the 8 sign bits of each 8 weights in qs[32 + 4j + l]; scales as IQ2_XS. */
KERNEL_INLINE void dot_iq2_s_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    IQ_BODY_BEGIN(tsr_block_iq2_s)
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = b->qs + 4 * j;
        const uint32_t h = b->qh[j];
        const __m256i g = gather8x4(tsr_iq2s_grid, q[0] | (h << 8 & 0x300), q[1] | (h << 6 & 0x300),
                                    q[2] | (h << 4 & 0x300), q[3] | (h << 2 & 0x300));
        const __m256i ls = scales16(2 * (b->scales[j] & 15) + 1, 2 * (b->scales[j] >> 4) + 1);
        for (int c = 0; c < nc; c++)
            isum[c] = iq_madd(isum[c], g, signed_act_bits(act_sub(act, act_stride, c, ib, j), q + 32), ls);
    }
    IQ_BODY_END(0.125f * f16s(b->d))
}
NC1_SPECIALIZED(dot_iq2_s_v, dot_iq2_s_v_body)

/* IQ3_XXS: 64 grid indices (u8, 4 values each), then per sub-block a u32
 * of four 7-bit sign indices (one per 8 weights) and the 4-bit scale s:
 * value = d (2s + 1) / 4 * g. */
KERNEL_INLINE void dot_iq3_xxs_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                      float *out) {
    IQ_BODY_BEGIN(tsr_block_iq3_xxs)
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = b->qs + 8 * j;
        uint32_t aux;
        memcpy(&aux, b->qs + 64 + 4 * j, 4);
        const uint32_t idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        const __m256i g = gather4x8(tsr_iq3xxs_grid, idx);
        const __m256i s = signs_aux28(aux);
        const __m256i ls = _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
        for (int c = 0; c < nc; c++)
            isum[c] = iq_madd(isum[c], g, _mm256_sign_epi8(act_sub(act, act_stride, c, ib, j), s), ls);
    }
    IQ_BODY_END(0.25f * f16s(b->d))
}
NC1_SPECIALIZED(dot_iq3_xxs_v, dot_iq3_xxs_v_body)

/* IQ3_S: grid index m of sub-block j = qs[8j + m] | bit m of qh[j] << 8
 * (512 entries), 8 sign bits per 8 weights in signs[], a 4-bit scale s per
 * sub-block: value = d (2s + 1) * g. */
KERNEL_INLINE void dot_iq3_s_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    IQ_BODY_BEGIN(tsr_block_iq3_s)
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = b->qs + 8 * j;
        const uint32_t h = b->qh[j];
        const uint32_t idx[8] = {q[0] | (h << 8 & 256), q[1] | (h << 7 & 256), q[2] | (h << 6 & 256),
                                 q[3] | (h << 5 & 256), q[4] | (h << 4 & 256), q[5] | (h << 3 & 256),
                                 q[6] | (h << 2 & 256), q[7] | (h << 1 & 256)};
        const __m256i g = gather4x8(tsr_iq3s_grid, idx);
        const __m256i ls = _mm256_set1_epi16((short)(2 * ((b->scales[j / 2] >> (4 * (j % 2))) & 15) + 1));
        for (int c = 0; c < nc; c++)
            isum[c] = iq_madd(isum[c], g, signed_act_bits(act_sub(act, act_stride, c, ib, j), b->signs + 4 * j), ls);
    }
    IQ_BODY_END(f16s(b->d))
}
NC1_SPECIALIZED(dot_iq3_s_v, dot_iq3_s_v_body)

/* 32 signed bytes q against a: |q| as u8, q's sign moved onto a. */
static inline __m256i iq_madd_s8(__m256i isum, __m256i q, __m256i a, __m256i ls) {
    return iq_madd(isum, _mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q), ls);
}

/* IQ1_S/IQ1_M weights 8g + delta as bytes: g (-1, 0, 1) from four 8-byte
 * entries of tsr_iq1s_grid, times 8 by a 16-bit shift with the bits that
 * cross into the next byte masked off (g = -1 is 0xff: 0xf8 = -8). */
static inline __m256i iq1_q8(uint32_t i0, uint32_t i1, uint32_t i2, uint32_t i3, __m256i delta) {
    const __m256i g = gather8x4(tsr_iq1s_grid, i0, i1, i2, i3);
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(g, 3), _mm256_set1_epi8((char)0xf8)), delta);
}

/* IQ1_S: per sub-block 4 bytes of index and a u16 qh: 3 more index bits
 * per 8 weights, a 3-bit scale s, the sign of delta; value =
 * d (2s + 1) / 8 * (8g + delta), |8g + delta| <= 9. */
KERNEL_INLINE void dot_iq1_s_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    IQ_BODY_BEGIN(tsr_block_iq1_s)
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = b->qs + 4 * j;
        const uint32_t h = b->qh[j];
        const __m256i v = iq1_q8(q[0] | (h << 8 & 0x700), q[1] | (h << 5 & 0x700), q[2] | (h << 2 & 0x700),
                                 q[3] | (h >> 1 & 0x700), _mm256_set1_epi8(h & 0x8000 ? -1 : 1));
        const __m256i ls = _mm256_set1_epi16((short)(2 * (h >> 12 & 7) + 1));
        for (int c = 0; c < nc; c++) isum[c] = iq_madd_s8(isum[c], v, act_sub(act, act_stride, c, ib, j), ls);
    }
    IQ_BODY_END(0.125f * f16s(b->d))
}
NC1_SPECIALIZED(dot_iq1_s_v, dot_iq1_s_v_body)

/* IQ1_M: indices as IQ1_S with the 3 high bits and the delta sign per 8
 * weights in a nibble of qh; 3-bit scales per 16 in the u16s of scales,
 * whose top nibbles hold d. */
KERNEL_INLINE void dot_iq1_m_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    static const uint64_t delta8[2] = {0x0101010101010101ull, 0xffffffffffffffffull};
    const tsr_block_iq1_m *x = w;
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const tsr_block_iq1_m *b = x + ib;
        prefetch_row_ahead(b, (int)sizeof *b);
        uint16_t sc[4];
        memcpy(sc, b->scales, 8);
        const uint16_t dh = (uint16_t)((sc[0] >> 12) | (sc[1] >> 8 & 0x00f0) | (sc[2] >> 4 & 0x0f00) | (sc[3] & 0xf000));
        __m256i isum[CPU_NC];
        for (int c = 0; c < CPU_NC; c++) isum[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = b->qs + 4 * j;
            const uint32_t h0 = b->qh[2 * j], h1 = b->qh[2 * j + 1], s = sc[j / 2] >> (6 * (j % 2));
            const __m256i delta = gather8x4(delta8, h0 >> 3 & 1, h0 >> 7, h1 >> 3 & 1, h1 >> 7);
            const __m256i v = iq1_q8(q[0] | (h0 << 8 & 0x700), q[1] | (h0 << 4 & 0x700), q[2] | (h1 << 8 & 0x700),
                                     q[3] | (h1 << 4 & 0x700), delta);
            const __m256i ls = scales16(2 * (int)(s & 7) + 1, 2 * (int)(s >> 3 & 7) + 1);
            for (int c = 0; c < nc; c++) isum[c] = iq_madd_s8(isum[c], v, act_sub(act, act_stride, c, ib, j), ls);
        }
        IQ_BLOCK_END(0.125f * _cvtsh_ss(dh))
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_iq1_m_v, dot_iq1_m_v_body)

/* TQ1_0 digits: byte v holds base-3 digits as the fraction v / 256 of
 * 3^5 (plugin_quants.h); digit n is floor(3 t / 256) with t = v * 3^n mod
 * 256, i.e. (t >= 86) + (t >= 171). The byte products mod 256 come from
 * two 16-bit multiplies by the per-lane powers p (even bytes from v * p,
 * odd ones from (v & 0xff00) * p); the compares give -1 per step, so this
 * returns the digits negated, 0..-2. */
static inline __m256i tq1_neg_digits(__m256i v, __m256i p) {
    const __m256i lo = _mm256_set1_epi16(0x00ff);
    const __m256i t = _mm256_or_si256(_mm256_and_si256(_mm256_mullo_epi16(v, p), lo),
                                      _mm256_mullo_epi16(_mm256_andnot_si256(lo, v), p));
    const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(t, _mm256_set1_epi8(86)), t);
    const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(t, _mm256_set1_epi8((char)171)), t);
    return _mm256_add_epi8(ge86, ge171);
}

/* TQ1_0 x act8k: elements 32n + m (n < 5) are digit n of qs[m], 160 + 16n
 * + m digit n of qs[32 + m], 240 + 4n + m digit n of qh[m]; a weight is
 * digit - 1. Eight registers of 32 digits in the activations' order (the
 * 16-byte and 4-byte groups broadcast and multiplied by a different power
 * per lane or word), summed as u8 x s8; the -1 is the activations' sum. */
KERNEL_INLINE void dot_tq1_0_v_body(int64_t K, const void *w, const void *act, size_t act_stride, int nc,
                                    float *out) {
    const tsr_block_tq1_0 *x = w;
    const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    const __m256i p_lanes[2] = {_mm256_setr_m128i(_mm_set1_epi16(1), _mm_set1_epi16(3)),
                                _mm256_setr_m128i(_mm_set1_epi16(9), _mm_set1_epi16(27))};
    const __m256i p_last = _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27);
    __m256 acc[CPU_NC];
    for (int c = 0; c < CPU_NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < K / 256; ib++) {
        const tsr_block_tq1_0 *b = x + ib;
        prefetch_row_ahead(b, (int)sizeof *b);
        __m256i dg[8];
        const __m256i v0 = _mm256_loadu_si256((const __m256i *)b->qs);
        static const int16_t pow3[5] = {1, 3, 9, 27, 81};
        for (int n = 0; n < 5; n++) dg[n] = _mm256_sub_epi8(zero, tq1_neg_digits(v0, _mm256_set1_epi16(pow3[n])));
        const __m256i v1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32)));
        dg[5] = _mm256_sub_epi8(zero, tq1_neg_digits(v1, p_lanes[0]));
        dg[6] = _mm256_sub_epi8(zero, tq1_neg_digits(v1, p_lanes[1]));
        uint32_t qh;
        memcpy(&qh, b->qh, 4);
        const __m256i v2 = _mm256_setr_m128i(_mm_loadu_si128((const __m128i *)(b->qs + 32)), _mm_set1_epi32((int)qh));
        dg[7] = _mm256_sub_epi8(zero, tq1_neg_digits(v2, p_last));
        const float d = f16s(b->d);
        for (int c = 0; c < nc; c++) {
            const act8k *a = (const act8k *)ACT(c) + ib;
            __m256i isum = _mm256_sub_epi32(zero, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), ones));
            for (int r = 0; r < 8; r++) isum = dot_u8s8(isum, dg[r], _mm256_loadu_si256((const __m256i *)(a->qs + 32 * r)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a->d), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[c] = hsum256(acc[c]);
}
NC1_SPECIALIZED(dot_tq1_0_v, dot_tq1_0_v_body)

static void gemv_iqgrid_register(cpu_kernels *k) {
    quants_iq_sign8_init();
    k->dot[TSR_DTYPE_IQ2_XXS] = dot_iq2_xxs_v;
    k->dot[TSR_DTYPE_IQ2_XS] = dot_iq2_xs_v;
    k->dot[TSR_DTYPE_IQ2_S] = dot_iq2_s_v;
    k->dot[TSR_DTYPE_IQ3_XXS] = dot_iq3_xxs_v;
    k->dot[TSR_DTYPE_IQ3_S] = dot_iq3_s_v;
    k->dot[TSR_DTYPE_IQ1_S] = dot_iq1_s_v;
    k->dot[TSR_DTYPE_IQ1_M] = dot_iq1_m_v;
    k->dot[TSR_DTYPE_TQ1_0] = dot_tq1_0_v;
}
