/*
 * gemm_q4k_impl.h — the packed-panel GEMM (cpu_gemm.h) of Q4_K at the avx2
 * level, replacing gemm_q8_impl.h's generic one there (the VNNI and AVX-512
 * levels keep that). Included by kernels_avx2.c after gemm_q8_impl.h.
 *
 * Without VNNI the generic panel pays, per 32-element group and column, a
 * vpmaddwd per 4 vpmaddubsw (activations +128 as u8: 255 * 15 per product)
 * and four float steps (convert, scale, two FMAs). Here the nibbles are the
 * u8 side and the activations stay signed, so the i16 pair sums of a whole
 * 32-element sub-block fit (8 steps x 2 x 15 x 127 = 30480) and one
 * vpmaddwd per sub-block widens them *and* applies the row's 6-bit scale;
 * the i32 sums run over the 256-element superblock and the float work is
 * per superblock: d * ad * sumi - dmin * ad * sum_j m_j bsum_j, the mins
 * term by vpmaddwd of the rows' (m_j, m_j+1) pairs with the column's bsum
 * pairs. Same integers as the plain C dot_q4_k of cpu_mm_quants.c; the
 * float steps per superblock as dot_q4_k_v's.
 *
 * Panel (16 rows: two halves of 8, one row per i32 lane), per superblock,
 * per half:
 *     uint8 q[8 sub-blocks][8 steps][8 rows][4]   nibble values
 *     int16 sc[8][8 rows][2]                      the row's scale, twice
 *     int16 mn[4][8 rows][2]                      (m_2p, m_2p+1)
 *     f32   d[8], dmin[8]
 * Activations, tiles of GQ_NC = 8 columns, per superblock:
 *     int8  qs[8 columns][256]
 *     int16 bs[8 columns][8]     bsums of each 32-element sub-block
 *     f32   ad[8]
 */

enum {
    K4_Q = 8 * 8 * 32,                 /* q bytes per half and superblock */
    K4_HALF = K4_Q + 256 + 128 + 64,   /* one half's bytes per superblock */
    K4_SB = 2 * K4_HALF,               /* the panel's bytes per superblock */
    K4_ACT = GQ_NC * 256 + GQ_NC * 16 + GQ_NC * 4, /* a tile's bytes per superblock */
};

static size_t k4_act_bytes(int64_t K, int64_t N) { return (size_t)((N + GQ_NC - 1) / GQ_NC) * (size_t)(K / 256) * K4_ACT; }

static void k4_act_from_f32(const cpu_kernels *k, const float *x, int64_t K, void *act, int64_t n) {
    const int64_t nsb = K / 256;
    uint8_t *tile = (uint8_t *)act + (size_t)(n / GQ_NC) * (size_t)nsb * K4_ACT;
    const int c = (int)(n % GQ_NC);
    for (int64_t sb = 0; sb < nsb; sb++) {
        act8k a;
        k->act8k_from_f32(x + 256 * sb, &a, 256);
        uint8_t *t = tile + (size_t)sb * K4_ACT;
        memcpy(t + 256 * c, a.qs, 256);
        int16_t bs[8];
        for (int j = 0; j < 8; j++) bs[j] = (int16_t)(a.bsums[2 * j] + a.bsums[2 * j + 1]);
        memcpy(t + GQ_NC * 256 + 16 * c, bs, 16);
        memcpy(t + GQ_NC * 256 + GQ_NC * 16 + 4 * c, &a.d, 4);
    }
}

static size_t k4_pack_bytes(int64_t K) { return (size_t)(K / 256) * K4_SB; }

/* Rows -> panel. Rows past nrows get zero weights and scales. */
static void k4_pack(const void *w, size_t w_stride, int nrows, int64_t K, void *pack) {
    const int64_t nsb = K / 256;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t sb = 0; sb < nsb; sb++) {
        for (int h = 0; h < 2; h++) {
            uint8_t *ph = (uint8_t *)pack + (size_t)sb * K4_SB + (size_t)h * K4_HALF;
            int16_t *sc = (int16_t *)(ph + K4_Q), *mn = (int16_t *)(ph + K4_Q + 256);
            float *dd = (float *)(ph + K4_Q + 384), *dm = dd + 8;
            const blk_q4_k *b[8];
            for (int r = 0; r < 8; r++) {
                int row = 8 * h + r;
                b[r] = row < nrows ? (const blk_q4_k *)((const uint8_t *)w + (size_t)row * w_stride) + sb : NULL;
                uint8_t s[16] = {0};
                float d = 0.0f, dmin = 0.0f;
                if (b[r]) {
                    _mm_storeu_si128((__m128i *)s, k4_scales_mins(b[r]->scales));
                    d = f16s(b[r]->d), dmin = f16s(b[r]->dmin);
                }
                for (int j = 0; j < 8; j++) sc[16 * j + 2 * r] = sc[16 * j + 2 * r + 1] = s[j];
                for (int p = 0; p < 4; p++) mn[16 * p + 2 * r] = s[8 + 2 * p], mn[16 * p + 2 * r + 1] = s[9 + 2 * p];
                dd[r] = d, dm[r] = dmin;
            }
            for (int c4 = 0; c4 < 4; c4++) { /* sub-blocks 2 c4 (low nibbles), 2 c4 + 1 */
                __m256i lo[8], hi[8];
                for (int r = 0; r < 8; r++) {
                    __m256i v = b[r] ? _mm256_loadu_si256((const __m256i *)(b[r]->qs + 32 * c4)) : _mm256_setzero_si256();
                    lo[r] = _mm256_and_si256(v, m4);
                    hi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                }
                transpose8_epi32(lo);
                transpose8_epi32(hi);
                for (int i = 0; i < 8; i++) {
                    _mm256_storeu_si256((__m256i *)(ph + 256 * (2 * c4) + 32 * i), lo[i]);
                    _mm256_storeu_si256((__m256i *)(ph + 256 * (2 * c4 + 1) + 32 * i), hi[i]);
                }
            }
        }
    }
}

static inline __m256i k4_bcast(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* One half panel (ph: its first superblock) x columns c0 .. c0 + nc - 1 of
 * one tile. */
static inline __attribute__((always_inline)) void k4_tile(const uint8_t *ph, const uint8_t *tile, int64_t nsb,
                                                           const int c0, const int nc, float *dst,
                                                           size_t dst_stride, int rows) {
    __m256 acc[4];
    GQ_UNROLL for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++, ph += K4_SB, tile += K4_ACT) {
        const uint8_t *aq = tile + 256 * c0, *abs = tile + GQ_NC * 256 + 16 * c0;
        const float *ad = (const float *)(tile + GQ_NC * 256 + GQ_NC * 16) + c0;
        const __m256 d = _mm256_loadu_ps((const float *)(ph + K4_Q + 384));
        const __m256 dmin = _mm256_loadu_ps((const float *)(ph + K4_Q + 416));
        /* the mins term first, folded into acc before the q loop needs registers */
        GQ_UNROLL for (int c = 0; c < nc; c++) {
            __m256i m = _mm256_setzero_si256();
            GQ_UNROLL for (int p = 0; p < 4; p++)
                m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(ph + K4_Q + 256 + 32 * p)),
                                                          k4_bcast(abs + 16 * c + 4 * p)));
            acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, _mm256_set1_ps(ad[c])), acc[c]);
        }
        __m256i sumi[4];
        GQ_UNROLL for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int j = 0; j < 8; j++) {
            __m256i s16[4];
            GQ_UNROLL for (int i = 0; i < 8; i++) {
                const __m256i wq = _mm256_loadu_si256((const __m256i *)(ph + 256 * j + 32 * i));
                GQ_UNROLL for (int c = 0; c < nc; c++) {
                    __m256i m = _mm256_maddubs_epi16(wq, k4_bcast(aq + 256 * c + 32 * j + 4 * i));
                    s16[c] = i == 0 ? m : gq_add16_in_order(s16[c], m);
                }
            }
            const __m256i scj = _mm256_loadu_si256((const __m256i *)(ph + K4_Q + 32 * j));
            GQ_UNROLL for (int c = 0; c < nc; c++) sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s16[c], scj));
        }
        GQ_UNROLL for (int c = 0; c < nc; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[c]), _mm256_mul_ps(d, _mm256_set1_ps(ad[c])), acc[c]);
    }
    for (int c = 0; c < nc; c++) gq_store(dst + (size_t)c * dst_stride, acc[c], rows);
}

static void k4_run(const void *pack, int nrows, int64_t K, const void *act, int64_t N, float *dst, size_t dst_stride) {
    const int64_t nsb = K / 256;
    const size_t tile_bytes = (size_t)nsb * K4_ACT;
    for (int64_t n0 = 0; n0 < N; n0 += GQ_NC) {
        const uint8_t *tile = (const uint8_t *)act + (size_t)(n0 / GQ_NC) * tile_bytes;
        const int ncols = N - n0 < GQ_NC ? (int)(N - n0) : GQ_NC;
        for (int h = 0; h < 2 && 8 * h < nrows; h++) {
            const uint8_t *ph = (const uint8_t *)pack + (size_t)h * K4_HALF;
            const int rows = nrows - 8 * h < 8 ? nrows - 8 * h : 8;
            for (int c0 = 0; c0 < ncols; c0 += 4) {
                float *d = dst + (size_t)(n0 + c0) * dst_stride + 8 * h;
                switch (ncols - c0 < 4 ? ncols - c0 : 4) {
                case 4: k4_tile(ph, tile, nsb, c0, 4, d, dst_stride, rows); break;
                case 3: k4_tile(ph, tile, nsb, c0, 3, d, dst_stride, rows); break;
                case 2: k4_tile(ph, tile, nsb, c0, 2, d, dst_stride, rows); break;
                default: k4_tile(ph, tile, nsb, c0, 1, d, dst_stride, rows); break;
                }
            }
        }
    }
}

static const gemm_ops k4_ops = {GQ_ROWS, k4_act_bytes, k4_act_from_f32, k4_pack_bytes, k4_pack, k4_run, 0};

static void gemm_q4k_register(cpu_kernels *k) { k->gemm[TSR_DTYPE_Q4_K] = &k4_ops; }
