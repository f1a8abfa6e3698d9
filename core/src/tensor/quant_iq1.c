/*
 * quant_iq1 — the IQ1_S and IQ1_M quantizers, byte-exact with
 * llama-quantize given the same importance matrix.
 *
 * Both formats store each group of 8 weights as an 11-bit index into a
 * grid of 2048 points with coordinates in {-1, 0, +1} (tsr_iq1s_grid), plus
 * a shift of +-1/8 added to every coordinate, times a 3-bit scale
 * (2l + 1) * d: IQ1_S with one scale and one shift per 32, IQ1_M with a
 * scale per 16 and a shift per 8. The quantizer's levels are 0, 1, 2 for
 * -1, 0, +1.
 *
 * Per block (32 for IQ1_S, 16 for IQ1_M), found by black-box comparison
 * with llama-quantize and ikawrakow's description of the search:
 *   weights  w = imatrix * sqrt(sigma2 + x^2), sigma2 twice the
 *            super-block's mean square;
 *   split    the values sorted ascending; every split of the sorted list
 *            into a low run (-1), a middle run (0) and a high run (+1) and
 *            every choice of shift is scored by its weighted least-squares
 *            fit (sumqx^2 / sumq2, from running sums); the best wins;
 *   grid     a group of 8 whose levels are not a grid point takes the
 *            neighbour (grid points at the 3 nearest distances) of least
 *            weighted squared error at the fitted scale; then the scale is
 *            refitted to the chosen points;
 *   packing  d = largest block scale / 15 (stored larger by a fudge
 *            factor); each block scale as 3 bits l with scale ~ d (2l + 1).
 *
 * Zero matrix weights make splits (and neighbours) tie exactly; which
 * one ggml keeps rests on the rounding of its comparison, so the sums are
 * formed as ggml forms them (docs/quantize.md). IQ1_S is in dtype.c's
 * table (identical on every block tried); IQ1_M still differs on some
 * blocks with zero weights, so tessera quantize refuses it.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/iq_grids.h>
#include <tessera/plugin_quants.h>

#include "tensor/dtype.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_iq_grid.h"

#define IQ1_SIGMA2_MUL 2.0f /* sigma2: twice the super-block's mean square */
#define IQ1S_FUDGE 1.125f   /* IQ1_S's stored d is 12.5% larger            */
#define IQ1M_FUDGE 1.1125f  /* IQ1_M's d (refitted) 11.25% larger          */
#define IQ1_NDIST 3         /* neighbour lists: the 3 nearest distances    */

#define IQ1_DELTA 0.125f
#define IQ1_EPS 1e-8f

static iq_grid iq1_grid;
static pthread_once_t iq1_once = PTHREAD_ONCE_INIT;
static int iq1_ok;


/* The grid with its bytes -1, 0, 1 moved to 0, 1, 2, so that a value's
 * rank is its level. */
static void iq1_init(void) {
    uint64_t *t = malloc(2048 * sizeof *t);
    if (!t) return;
    for (int k = 0; k < 2048; k++) {
        t[k] = 0;
        for (int j = 0; j < 8; j++) t[k] |= (uint64_t)(uint8_t)((tsr_iq1s_grid[k] >> (8 * j)) + 1) << (8 * j);
    }
    iq1_ok = iq_grid_build(&iq1_grid, t, 2048, 8, 2, IQ1_NDIST) == 0;
    free(t);
}

static const iq_grid *iq1_grid_get(void) {
    pthread_once(&iq1_once, iq1_init);
    return iq1_ok ? &iq1_grid : NULL;
}

/* The values of levels 0, 1, 2 with shift +delta (shift > 0) or -delta. */
static void iq1_values(int shift, float *v) {
    const float s = shift > 0 ? IQ1_DELTA : -IQ1_DELTA;
    v[0] = -1 + s;
    v[1] = s;
    v[2] = 1 + s;
}

/* The grid index for the 8 levels L (replaced by the neighbour's levels
 * when not on the grid, chosen at scale with level values v). */
static int iq1_point(const iq_grid *g, const float *x, const float *w, float scale, const float *v,
                     uint8_t *L, bool *all_on) {
    int u = 0;
    for (int j = 0; j < 8; j++) u |= L[j] << (2 * j);
    int k = g->map[u];
    if (k >= 0) return k;
    *all_on = false;
    const uint16_t *nb = g->neighbours + (-1 - k);
    float best = FLT_MAX;
    for (int t = 1; t <= nb[0]; t++) {
        const uint8_t *lv = g->levels + 8 * (size_t)nb[t];
        float d2 = 0.0f;
        for (int j = 0; j < 8; j++) {
            const float diff = scale * v[lv[j]] - x[j];
            d2 += w[j] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            k = nb[t];
        }
    }
    memcpy(L, g->levels + 8 * (size_t)k, 8);
    return k;
}

typedef struct sorted_x {
    float x;
    int i;
} sorted_x;

static int sorted_x_cmp(const void *a, const void *b) {
    const sorted_x *p = a, *q = b;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

/* One block's search of n (16 or 32) values in groups of 8: n_shift
 * shift groups (1: one shift for the block; n / 8: one per group of 8).
 * Levels into L, shifts (+1/-1) into shifts, the fitted scale returned. */
static float iq1_block(const iq_grid *g, int n, int n_shift, const float *x, const float *w, uint8_t *L,
                       int *shifts, uint16_t *index) {
    sorted_x s[32];
    for (int i = 0; i < n; i++) s[i] = (sorted_x){x[i], i};
    qsort(s, (size_t)n, sizeof s[0], sorted_x_cmp);
    const int group = n / n_shift;
    /* running sums of w x and w per shift group over the sorted list */
    float sx[4][33], sw[4][33];
    for (int c = 0; c < n_shift; c++) sx[c][0] = sw[c][0] = 0.0f;
    for (int j = 0; j < n; j++) {
        const int i = s[j].i;
        for (int c = 0; c < n_shift; c++) {
            const bool mine = i / group == c;
            sx[c][j + 1] = sx[c][j] + (mine ? w[i] * x[i] : 0.0f);
            sw[c][j + 1] = sw[c][j] + (mine ? w[i] : 0.0f);
        }
    }
    /* best starts below zero: where the matrix leaves only zero-valued
     * elements weighted, every split fits with sumqx = 0, and the first
     * (all at +1, shift +, scale 0) is kept, as ggml keeps it */
    float best = -1.0f, best_scale = 0.0f;
    int b1 = -1, b2 = -1, best_combo = 0;
    const int n_combo = 1 << n_shift;
    for (int i1 = 0; i1 <= n; i1++) {
        for (int i2 = i1; i2 <= n; i2++) {
            for (int combo = 0; combo < n_combo; combo++) {
                float sumqx = 0.0f, sumq2 = 0.0f;
                for (int c = 0; c < n_shift; c++) {
                    float v[3];
                    iq1_values(combo >> c & 1 ? -1 : 1, v);
                    /* this association (run sum times value, weight sum
                     * times value times value) is ggml's to the last bit:
                     * with zero weights splits tie exactly, and which one
                     * wins then rests on the rounding of the comparison */
                    sumqx += (sx[c][i1] - sx[c][0]) * v[0] + (sx[c][i2] - sx[c][i1]) * v[1] +
                             (sx[c][n] - sx[c][i2]) * v[2];
                    sumq2 += (sw[c][i1] - sw[c][0]) * v[0] * v[0] + (sw[c][i2] - sw[c][i1]) * v[1] * v[1] +
                             (sw[c][n] - sw[c][i2]) * v[2] * v[2];
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    best_scale = sumqx / sumq2;
                    best = best_scale * sumqx;
                    b1 = i1;
                    b2 = i2;
                    best_combo = combo;
                }
            }
        }
    }
    for (int j = 0; j < n; j++) L[s[j].i] = (uint8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
    if (b1 < 0) /* no fit (all weights zero): every value at level 0 */
        for (int j = 0; j < n; j++) L[j] = 0;
    for (int c = 0; c < n_shift; c++) shifts[c] = best_combo >> c & 1 ? -1 : 1;
    bool all_on = true;
    for (int k = 0; k < n / 8; k++) {
        float v[3];
        iq1_values(shifts[k * 8 / group], v);
        index[k] = (uint16_t)iq1_point(g, x + 8 * k, w + 8 * k, best_scale, v, L + 8 * k, &all_on);
    }
    if (all_on) return best_scale;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int i = 0; i < n; i++) {
        float v[3];
        iq1_values(shifts[i / group], v);
        const float q = v[L[i]];
        sumqx += w[i] * q * x[i];
        sumq2 += w[i] * q * q;
    }
    return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : best_scale;
}

static float iq1_sum_squares(const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* A block scale as 3 bits against 1/d: scale ~ d (2l + 1). */
static int iq1_scale_bits(float id, float scale) {
    const int l = quant_nearest_int(0.5f * (id * scale - 1));
    return l < 0 ? 0 : l > 7 ? 7 : l;
}

/* Weights of a super-block into w. */
static void iq1_weights(const float *x, const float *qw, float *w) {
    const float sigma2 = IQ1_SIGMA2_MUL * iq1_sum_squares(x, QK_K) / QK_K;
    for (int i = 0; i < QK_K; i++) w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
}

/* ---------------------------------------------------------------- IQ1_S */

static void iq1s_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    const iq_grid *g = iq1_grid_get();
    tsr_block_iq1_s *y = dst;
    float w[QK_K], scales[8];
    int shifts[8];
    uint16_t index[32];
    uint8_t L[32];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K) {
        iq1_weights(x, qw ? qw + QK_K * ibl : NULL, w);
        float max_scale = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + 32 * ib;
            float max = 0.0f;
            for (int i = 0; i < 32; i++) max = fmaxf(max, fabsf(xb[i]));
            if (max < IQ1_EPS) {
                scales[ib] = 0.0f;
                shifts[ib] = 1;
                for (int k = 0; k < 4; k++) index[4 * ib + k] = 0; /* all -1 */
                continue;
            }
            scales[ib] = iq1_block(g, 32, 1, xb, w + 32 * ib, L, &shifts[ib], index + 4 * ib);
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        memset(&y[ibl], 0, sizeof y[ibl]);
        if (!max_scale) continue;
        const float d = max_scale / 15;
        y[ibl].d = f32_to_fp16(d * IQ1S_FUDGE);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            unsigned h = (unsigned)iq1_scale_bits(id, scales[ib]) << 12 | (shifts[ib] < 0 ? 0x8000u : 0u);
            for (int k = 0; k < 4; k++) {
                y[ibl].qs[4 * ib + k] = (uint8_t)index[4 * ib + k];
                h |= (unsigned)(index[4 * ib + k] >> 8) << (3 * k);
            }
            y[ibl].qh[ib] = (uint16_t)h;
        }
    }
}

void quant_iq1_s_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) { iq1s_quantize(x, dst, n, qw); }



/* ---------------------------------------------------------------- IQ1_M */

static void iq1m_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    const iq_grid *g = iq1_grid_get();
    tsr_block_iq1_m *y = dst;
    float w[QK_K], scales[16];
    int shifts[32];
    uint16_t index[32];
    uint8_t L[16];
    uint8_t Lall[256];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K) {
        iq1_weights(x, qw ? qw + QK_K * ibl : NULL, w);
        float max_scale = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = x + 16 * ib;
            float max = 0.0f;
            for (int i = 0; i < 16; i++) max = fmaxf(max, fabsf(xb[i]));
            if (max < IQ1_EPS) {
                scales[ib] = 0.0f;
                shifts[2 * ib] = shifts[2 * ib + 1] = 1;
                index[2 * ib] = index[2 * ib + 1] = 0; /* all -1 */
                memset(Lall + 16 * ib, 0, 16);
                continue;
            }
            scales[ib] = iq1_block(g, 16, 2, xb, w + 16 * ib, L, &shifts[2 * ib], index + 2 * ib);
            memcpy(Lall + 16 * ib, L, 16);
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        memset(&y[ibl], 0, sizeof y[ibl]);
        if (!max_scale) continue;
        const float id = 15 / max_scale;
        uint16_t sc[4] = {0};
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int ib = 0; ib < 16; ib++) {
            const int l = iq1_scale_bits(id, scales[ib]);
            sc[ib / 4] |= (uint16_t)(l << (3 * (ib % 4)));
            for (int i = 16 * ib; i < 16 * ib + 16; i++) {
                float v[3];
                iq1_values(shifts[i / 8], v);
                const float q = (float)(2 * l + 1) * v[Lall[i]];
                sumqx += w[i] * x[i] * q;
                sumq2 += w[i] * q * q;
            }
        }
        const float d = sumq2 > 0 ? sumqx / sumq2 : max_scale / 15;
        const uint16_t dh = f32_to_fp16(d * IQ1M_FUDGE);
        for (int i = 0; i < 4; i++) sc[i] |= (uint16_t)(((dh >> (4 * i)) & 0xf) << 12);
        memcpy(y[ibl].scales, sc, 8);
        for (int k = 0; k < 32; k++) {
            y[ibl].qs[k] = (uint8_t)index[k];
            const unsigned nib = (unsigned)(index[k] >> 8) | (shifts[k] < 0 ? 8u : 0u);
            y[ibl].qh[k / 2] |= (uint8_t)(nib << (4 * (k % 2)));
        }
    }
}

void quant_iq1_m_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) { iq1m_quantize(x, dst, n, qw); }


