/*
 * gemv_kq_impl.h — Q4_K and Q6_K against one activation column (decoding)
 * on the 256-bit levels (avx2, avxvnni): included by kernels_avx2.c and
 * kernels_avxvnni.c after kernels_impl.h, whose dot_q4_k_v / dot_q6_k_v
 * they hand nc > 1 to (the AVX-512 levels have their own, dot_*_512).
 *
 * Decoding reads every weight once, so these must keep up with memory:
 * ~25 cycles per 144-byte Q4_K block per core here (2 cores, 25 GB/s).
 * They stream block by block with no per-block scalar work beyond one
 * fp16 pair: the 6-bit scales and mins are unpacked with vector bit moves
 * (k4_scales_mins), each sub-block's i16 scale is a byte shuffle of one
 * register, nibbles are unpacked in registers, and the u8 x s8 pair sums
 * (vpmaddubsw) are multiplied by their sub-block scale while widening to
 * i32 (vpmaddwd), so a block costs 16 multiplies for 256 products plus
 * one for the mins (or the -32 of Q6_K) against the activation's bsums.
 * Same integer sums as the plain C dot_q4_k / dot_q6_k of cpu_mm_quants.c
 * (exact), the float steps per block as dot_q4_k_v.
 */

/* Q4_K / Q5_K scales: 12 packed bytes (s + 16 readable) -> bytes [sc0..sc7,
 * mn0..mn7]. With 32-bit words a = s[0..3], b = s[4..7], c = s[8..11]:
 * sc0..3 = a & 63, mn0..3 = b & 63, sc4..7 = (c & 15) | (a >> 6) << 4,
 * mn4..7 = (c >> 4) | (b >> 6) << 4, per byte. */
static inline __m128i k4_scales_mins(const uint8_t *s) {
    const __m128i x = _mm_loadu_si128((const __m128i *)s);
    /* words [a, c, b, c >> 4] and [0, a, 0, b] */
    __m128i lo = _mm_shuffle_epi8(x, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    lo = _mm_srlv_epi32(lo, _mm_setr_epi32(0, 0, 0, 4));
    lo = _mm_and_si128(lo, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hi = _mm_shuffle_epi8(x, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    hi = _mm_and_si128(_mm_srli_epi32(hi, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(lo, hi);
}

/* Byte-shuffle controls giving i16 word j of each 128-bit lane in all
 * eight words of that lane (lo_j / hi_j: word j in the low lane, word j'
 * in the high one). */
static inline __m256i word_bcast_ctrl(int lo_j, int hi_j) {
    const __m128i l = _mm_set1_epi16((short)(2 * lo_j | (2 * lo_j + 1) << 8));
    const __m128i h = _mm_set1_epi16((short)(2 * hi_j | (2 * hi_j + 1) << 8));
    return _mm256_set_m128i(h, l);
}

static void dot_q4_k_1(int64_t K, const void *w, const void *act, float *out) {
    const blk_q4_k *x = w;
    const act8k *a = act;
    const int64_t nb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    /* mins repeated per 16-element bsum: bytes 8..15 of k4_scales_mins, twice each */
    const __m128i min_pairs = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q4_k *b = x + ib;
        prefetch_row_ahead(b, sizeof *b);
        const __m128i scm = k4_scales_mins(b->scales);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm)); /* sc0..7 in both lanes */
        const __m256i mn = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(scm, min_pairs));
        __m256i sumi = _mm256_setzero_si256();
        for (int c4 = 0; c4 < 4; c4++) {
            const __m256i bytes = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c4));
            const __m256i lo = _mm256_and_si256(bytes, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4);
            const __m256i s0 = _mm256_shuffle_epi8(sc, word_bcast_ctrl(2 * c4, 2 * c4));
            const __m256i s1 = _mm256_shuffle_epi8(sc, word_bcast_ctrl(2 * c4 + 1, 2 * c4 + 1));
            const __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[ib].qs + 64 * c4)));
            const __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[ib].qs + 64 * c4 + 32)));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
        }
        const __m256i mins = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[ib].bsums), mn);
        /* [d, dmin] * a->d */
        uint32_t dm;
        memcpy(&dm, &b->d, 4);
        const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dm)), _mm_set1_ps(a[ib].d));
        /* the scaled sum less the min term per block and lane, as
         * dot_q4_k_v rounds (the two nearly cancel) */
        __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), _mm256_broadcastss_ps(f));
        v = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_broadcastss_ps(_mm_movehdup_ps(f)), v);
        acc = _mm256_add_ps(acc, v);
    }
    out[0] = hsum256(acc);
}

/* Q6_K, per half n: quarter k of ql[64n..] / qh[32n..] (see dot_q6_k_v) is
 * 32 values in 0..63 of groups 8n + 2k (low 128-bit lane) and 8n + 2k + 1
 * (high lane); their scales are words 2k and 2k + 1 of the half's eight. */
/* One half of a Q6_K block: ql, qh at the half's bytes, an at its 128
 * activations, sc its eight scales (as i16) in both lanes. */
static inline __m256i q6_k_half(const uint8_t *ql, const uint8_t *qh, const int8_t *an, __m256i sc) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    const __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
    const __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
    const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m30));
    const __m256i q3 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
    const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, _mm256_loadu_si256((const __m256i *)an)),
                                         _mm256_shuffle_epi8(sc, word_bcast_ctrl(0, 1)));
    const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, _mm256_loadu_si256((const __m256i *)(an + 32))),
                                         _mm256_shuffle_epi8(sc, word_bcast_ctrl(2, 3)));
    const __m256i p2 = _mm256_madd_epi16(_mm256_maddubs_epi16(q2, _mm256_loadu_si256((const __m256i *)(an + 64))),
                                         _mm256_shuffle_epi8(sc, word_bcast_ctrl(4, 5)));
    const __m256i p3 = _mm256_madd_epi16(_mm256_maddubs_epi16(q3, _mm256_loadu_si256((const __m256i *)(an + 96))),
                                         _mm256_shuffle_epi8(sc, word_bcast_ctrl(6, 7)));
    return _mm256_add_epi32(_mm256_add_epi32(p0, p1), _mm256_add_epi32(p2, p3));
}

static void dot_q6_k_1(int64_t K, const void *w, const void *act, float *out) {
    const blk_q6_k *x = w;
    const act8k *a = act;
    const int64_t nb = K / 256;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ib = 0; ib < nb; ib++) {
        const blk_q6_k *b = x + ib;
        prefetch_row_ahead(b, sizeof *b);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
        __m256i sumi = q6_k_half(b->ql, b->qh, a[ib].qs, _mm256_permute4x64_epi64(sc16, 0x44));
        sumi = _mm256_add_epi32(sumi, q6_k_half(b->ql + 64, b->qh + 32, a[ib].qs + 128, _mm256_permute4x64_epi64(sc16, 0xEE)));
        /* the -32 offset: 32 * sum_g sc_g * bsums_g */
        const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[ib].bsums), sc16);
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(f16s(b->d) * a[ib].d), acc);
    }
    out[0] = hsum256(acc);
}

static void dot_q4_k_y(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    if (nc == 1) dot_q4_k_1(K, w, act, out);
    else dot_q4_k_v(K, w, act, act_stride, nc, out);
}

static void dot_q6_k_y(int64_t K, const void *w, const void *act, size_t act_stride, int nc, float *out) {
    if (nc == 1) dot_q6_k_1(K, w, act, out);
    else dot_q6_k_v(K, w, act, act_stride, nc, out);
}

static void gemv_kq_register(cpu_kernels *k) {
    k->dot[TSR_DTYPE_Q4_K] = dot_q4_k_y;
    k->dot[TSR_DTYPE_Q6_K] = dot_q6_k_y;
}
