/*
 * quant_iq2 — IQ2_XXS and IQ2_XS quantizers, byte-exact with llama-quantize
 * given the same importance matrix. Both need one, as in llama.cpp (its
 * quantizer refuses without), so only the _w entry points exist.
 *
 * Both grids (tessera/iq_grids.h) hold points of 8 magnitudes out of three
 * levels (stored 8, 25, 43; odd integers 1, 3, 5 to the search); IQ2_XXS
 * has 256 of them, IQ2_XS 512. The search is quant_iq_grid.h's, per
 * sub-block, with (found by black-box comparison with ggml_quantize_chunk,
 * see docs/quantize.md):
 *   weights  imatrix * sqrt(sigma2 + x^2), sigma2 the super-block's mean
 *            square;
 *   signs    7 stored per 8, the element of least w * x^2 flipped when the
 *            count of negatives is odd;
 *   neighbours  the grid points at the 2 nearest distances.
 * IQ2_XXS: sub-blocks of 32 (4 groups); a first fit by make_qp_quants
 *   (levels 0..4) gives the sweep's starting magnitude, 3 times its scale;
 *   13 trials (6 +- 0.1 is); afterwards EVERY group is searched again at
 *   the fitted scale, not only the off-grid ones (the step the first
 *   attempt missed: 19/32 super-blocks without it). Per sub-block one u32
 *   of 4 grid indices and one of 4 x 7 sign bits with a 4-bit scale on top.
 * IQ2_XS: sub-blocks of 16 (2 groups), a 4-bit scale each (two per byte);
 *   19 trials (9 +- 0.1 is) from the sub-block's largest magnitude; only
 *   the off-grid groups are searched again (as IQ3_XXS; searching all
 *   differs on ~5% of synth-s's blocks). Per group a u16: 9-bit grid
 *   index, 7 sign bits.
 * Both: d = largest sub-block scale / 31, stored as is.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <tessera/iq_grids.h>
#include <tessera/plugin_quants.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_iq_grid.h"

enum { GRID_IQ2XXS, GRID_IQ2XS, N_IQ2_GRIDS };

static iq_grid iq2_grids[N_IQ2_GRIDS];
static pthread_once_t iq2_grids_once = PTHREAD_ONCE_INIT;
static int iq2_grids_ok;

/* 8 coordinates of 3 levels (2 bits each); neighbours at 2 distances. */
static void iq2_grids_init(void) {
    iq2_grids_ok = iq_grid_build(&iq2_grids[GRID_IQ2XXS], tsr_iq2xxs_grid, 256, 8, 2, 2) == 0 &&
                   iq_grid_build(&iq2_grids[GRID_IQ2XS], tsr_iq2xs_grid, 512, 8, 2, 2) == 0;
}

static const iq_grid *iq2_grid_get(int which) {
    pthread_once(&iq2_grids_once, iq2_grids_init);
    return iq2_grids_ok ? &iq2_grids[which] : NULL;
}

/* One sub-block of n (a multiple of 8) elements of an IQ2 format: signs
 * into signs[n / 8], grid levels into L, the scale returned. qp_start:
 * start the sweep from make_qp_quants' fit (IQ2_XXS) rather than from the
 * largest magnitude (IQ2_XS). */
static float iq2_sub_block(const iq_grid *g, const iq_grid_sweep *sw, bool qp_start, int n, const float *x,
                           const float *qw, float sigma2, uint8_t *signs, uint8_t *L) {
    float w[32], waux[32], xval[32];
    iq_grid_weights(x, qw, n, sigma2, w, waux);
    for (int k = 0; k < n / 8; k++) signs[k] = iq_group_signs(x + 8 * k, w + 8 * k, xval + 8 * k, true);
    memset(L, 0, (size_t)n);
    float max = xval[0];
    for (int i = 1; i < n; i++) max = fmaxf(max, xval[i]);
    if (max < IQ_GROUP_EPS) return 0.0f;
    float scale = max / (float)(2 * sw->n_levels - 1), start = max;
    if (qp_start) {
        uint8_t Lqp[32];
        scale = quant_make_qp(n, sw->n_levels + 1, xval, Lqp, w);
        if (!(scale > 0)) { /* all weights zero: llama.cpp writes the sub-block as zero, signs too */
            memset(signs, 0, (size_t)n / 8);
            return 0.0f;
        }
        start = scale * (float)sw->n_levels;
    }
    scale = iq_grid_search(g, sw, n, xval, w, waux, start, scale, L);
    if (!(scale == scale)) return 0.0f; /* all weights zero: no trial fits (IQ2_XS keeps the signs) */
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < n / 8; k++) signs[k] = (uint8_t)(~signs[k] & 127);
    }
    return scale;
}

static void iq2xxs_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    const iq_grid *g = iq2_grid_get(GRID_IQ2XXS);
    const iq_grid_sweep sw = {3, 6, 0.1f, IQ_RESEARCH_ALL};
    tsr_block_iq2_xxs *y = dst;
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K, qw += QK_K) {
        uint32_t q2[16] = {0};
        float scales[8], max_scale = 0.0f;
        const float sigma2 = iq_sum_squares(x, QK_K) / QK_K;
        for (int ib = 0; ib < 8; ib++) {
            uint8_t signs[4], L[32];
            scales[ib] = iq2_sub_block(g, &sw, true, 32, x + 32 * ib, qw + 32 * ib, sigma2, signs, L);
            for (int k = 0; k < 4; k++) {
                q2[2 * ib] |= (uint32_t)iq_grid_index(g, L + 8 * k) << (8 * k);
                q2[2 * ib + 1] |= (uint32_t)signs[k] << (7 * k);
            }
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        memset(&y[ibl], 0, sizeof y[ibl]);
        if (!max_scale) continue;
        const float d = max_scale / 31;
        y[ibl].d = f32_to_fp16(d);
        for (int ib = 0; ib < 8; ib++) q2[2 * ib + 1] |= (uint32_t)iq_scale_bits(1 / d, scales[ib]) << 28;
        memcpy(y[ibl].qs, q2, sizeof q2);
    }
}

static void iq2xs_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    const iq_grid *g = iq2_grid_get(GRID_IQ2XS);
    const iq_grid_sweep sw = {3, 9, 0.1f, IQ_RESEARCH_OFF_GRID};
    tsr_block_iq2_xs *y = dst;
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K, qw += QK_K) {
        uint16_t q2[32];
        float scales[16], max_scale = 0.0f;
        const float sigma2 = iq_sum_squares(x, QK_K) / QK_K;
        for (int ib = 0; ib < 16; ib++) {
            uint8_t signs[2], L[16];
            scales[ib] = iq2_sub_block(g, &sw, false, 16, x + 16 * ib, qw + 16 * ib, sigma2, signs, L);
            for (int k = 0; k < 2; k++) q2[2 * ib + k] = (uint16_t)(iq_grid_index(g, L + 8 * k) | signs[k] << 9);
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        memset(&y[ibl], 0, sizeof y[ibl]);
        if (!max_scale) continue;
        const float d = max_scale / 31;
        y[ibl].d = f32_to_fp16(d);
        for (int ib = 0; ib < 16; ib++) y[ibl].scales[ib / 2] |= (uint8_t)(iq_scale_bits(1 / d, scales[ib]) << (4 * (ib % 2)));
        memcpy(y[ibl].qs, q2, sizeof q2);
    }
}

void quant_iq2_xxs_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq2xxs_quantize(x, dst, n, qw);
}

void quant_iq2_xs_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq2xs_quantize(x, dst, n, qw);
}
