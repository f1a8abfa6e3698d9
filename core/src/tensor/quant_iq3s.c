/*
 * quant_iq3s — the IQ3_S and IQ2_S quantizers, byte-exact with
 * llama-quantize given the same importance matrix (or none). The search
 * steps are quant_iq_grid.c's (quant_iq_grid.h); what differs from IQ3_XXS,
 * found by black-box comparison with ggml_quantize_chunk and ikawrakow's
 * public description of IQ3_S (llama.cpp PR 5829), is, for IQ3_S:
 *
 *   grid     512 points of 4 magnitudes in {1, 3, ..., 15} (levels 0..7);
 *            off-grid points list the grid points at their 3 nearest
 *            distances (2 for IQ3_XXS);
 *   signs    all 8 stored (a byte per group of 8): no parity flip;
 *   sweep    19 trial scales, (15 + 0.2 is) / max for is in -9..9;
 *   re-search when the best trial had a group off the grid, every group of
 *            the sub-block is searched again at the fitted scale;
 *   packing  d = max scale / 31, stored times 1.033; each sub-block of 32 a
 *            4-bit l with scale ~ d (2l + 1); the 9th bit of each group's
 *            index in qh (bit k of qh[sub-block] for its group k).
 *
 * and for IQ2_S:
 *
 *   grid     1024 points of 8 magnitudes (stored 8, 25, 43: levels 0..2,
 *            fitted as 1, 3, 5); an off-grid point lists only the grid
 *            points at its nearest distance;
 *   scales   per sub-block of 16 (two groups of 8), all 8 signs stored;
 *   weights  with a matrix as IQ3_S; without one 0.25 sigma2 + x^2 (not
 *            x^2), sigma2 twice the super-block's mean square;
 *   sweep    19 trial scales, (5 + 0.1 is) / max for is in -9..9; only the
 *            off-grid groups are searched again at the fitted scale;
 *   packing  d = max scale / 31 stored times 0.9875; 4-bit scales per 16
 *            (low nibble first); index bits 8..9 of group k of a 32 in
 *            bits 2k..2k+1 of qh.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <tessera/iq_grids.h>
#include <tessera/plugin_quants.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_iq_grid.h"

static iq_grid iq3s_grid, iq2s_grid;
static pthread_once_t grids_once = PTHREAD_ONCE_INIT;
static int grids_ok;

static void grids_init(void) {
    grids_ok = iq_grid_build(&iq3s_grid, tsr_iq3s_grid, 512, 4, 3, 3) == 0 &&
               iq_grid_build(&iq2s_grid, tsr_iq2s_grid, 1024, 8, 2, 1) == 0;
}

/* 8 sub-blocks of 32: 4-wide points of 8 levels (512, 9-bit indices), a
 * sign byte per 8 and a 4-bit scale per sub-block. */
static void iq3s_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    pthread_once(&grids_once, grids_init);
    const iq_grid *g = &iq3s_grid;
    const iq_grid_sweep sw = {8, 9, 0.2f, IQ_RESEARCH_ALL_IF_OFF};
    tsr_block_iq3_s *y = dst;
    float w[32], waux[32], xval[32], scales[8];
    uint8_t L[32];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K) {
        tsr_block_iq3_s *b = &y[ibl];
        memset(b, 0, sizeof *b);
        if (!grids_ok) continue; /* out of memory building the grid: zeros */
        const float sigma2 = 2 * iq_sum_squares(x, QK_K) / QK_K;
        float max_scale = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + 32 * ib;
            iq_grid_weights(xb, qw ? qw + QK_K * ibl + 32 * ib : NULL, 32, sigma2, w, waux);
            uint8_t signs[4];
            for (int k = 0; k < 4; k++) signs[k] = iq_group_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, false);
            float max = xval[0];
            for (int i = 1; i < 32; i++) max = fmaxf(max, xval[i]);
            memset(L, 0, sizeof L);
            if (max < IQ_GROUP_EPS) {
                scales[ib] = 0;
            } else {
                scales[ib] = iq_grid_search(g, &sw, 32, xval, w, waux, max, max / 15, L);
                if (scales[ib] < 0) {
                    scales[ib] = -scales[ib];
                    for (int k = 0; k < 4; k++) signs[k] = (uint8_t)~signs[k];
                }
            }
            for (int k = 0; k < 8; k++) {
                const int idx = iq_grid_index(g, L + 4 * k); /* levels 0 are point 0 */
                b->qs[8 * ib + k] = (uint8_t)idx;
                b->qh[ib] |= (uint8_t)((idx >> 8) << k);
            }
            memcpy(b->signs + 4 * ib, signs, 4);
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        if (!max_scale) {
            memset(b, 0, sizeof *b);
            continue;
        }
        const float d = max_scale / 31;
        b->d = f32_to_fp16(d * 1.033f); /* PR 5829's fudge factor */
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++)
            b->scales[ib / 2] |= (uint8_t)(iq_scale_bits(id, scales[ib]) << (4 * (ib % 2)));
    }
}

void quant_iq3_s_from_f32(const float *x, void *dst, int64_t n) { iq3s_quantize(x, dst, n, NULL); }

void quant_iq3_s_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq3s_quantize(x, dst, n, qw);
}

/* 16 sub-blocks of 16: 8-wide points of 3 levels (1024, 10-bit indices),
 * a sign byte per 8 and a 4-bit scale per sub-block. */
static void iq2s_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    pthread_once(&grids_once, grids_init);
    const iq_grid *g = &iq2s_grid;
    const iq_grid_sweep sw = {3, 9, 0.1f, IQ_RESEARCH_OFF_GRID};
    tsr_block_iq2_s *y = dst;
    float w[16], waux[16], xval[16], scales[16];
    uint8_t L[16];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K) {
        tsr_block_iq2_s *b = &y[ibl];
        memset(b, 0, sizeof *b);
        if (!grids_ok) continue; /* out of memory building the grid: zeros */
        const float sigma2 = 2 * iq_sum_squares(x, QK_K) / QK_K;
        float max_scale = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = x + 16 * ib;
            if (qw) {
                iq_grid_weights(xb, qw + QK_K * ibl + 16 * ib, 16, sigma2, w, waux);
            } else {
                for (int i = 0; i < 16; i++) {
                    w[i] = 0.25f * sigma2 + xb[i] * xb[i];
                    waux[i] = sqrtf(w[i]);
                }
            }
            uint8_t signs[2];
            for (int k = 0; k < 2; k++) signs[k] = iq_group_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, false);
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = fmaxf(max, xval[i]);
            memset(L, 0, sizeof L);
            if (max < IQ_GROUP_EPS) {
                scales[ib] = 0;
            } else {
                scales[ib] = iq_grid_search(g, &sw, 16, xval, w, waux, max, max / 5, L);
                if (scales[ib] < 0) {
                    scales[ib] = -scales[ib];
                    for (int k = 0; k < 2; k++) signs[k] = (uint8_t)~signs[k];
                }
            }
            for (int k = 0; k < 2; k++) {
                const int gi = 2 * ib + k; /* group of 8 in the super-block */
                const int idx = iq_grid_index(g, L + 8 * k);
                b->qs[gi] = (uint8_t)idx;
                b->qs[32 + gi] = signs[k];
                b->qh[gi / 4] |= (uint8_t)((idx >> 8) << (2 * (gi % 4)));
            }
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        if (!max_scale) {
            memset(b, 0, sizeof *b);
            continue;
        }
        const float d = max_scale / 31;
        b->d = f32_to_fp16(d * 0.9875f);
        const float id = 1 / d;
        for (int ib = 0; ib < 16; ib++)
            b->scales[ib / 2] |= (uint8_t)(iq_scale_bits(id, scales[ib]) << (4 * (ib % 2)));
    }
}

void quant_iq2_s_from_f32(const float *x, void *dst, int64_t n) { iq2s_quantize(x, dst, n, NULL); }

void quant_iq2_s_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq2s_quantize(x, dst, n, qw);
}
