/*
 * quant_iq_grid — the grid search of the IQ quantizers (quant_iq_grid.h),
 * byte-exact with llama-quantize given the same importance matrix (or
 * none), and IQ3_XXS; quant_iq2.c holds IQ2_XXS/IQ2_XS, quant_iq3s.c
 * IQ3_S/IQ2_S, docs/quantize.md what is known of each.
 *
 * A grid format stores each group of 8 (IQ2) or 4 (IQ3) magnitudes as the
 * index of a point of a fixed lattice-derived grid (tessera/iq_grids.h, the
 * tables the decoders read), the signs beside it, and a scale per
 * sub-block. On every grid the magnitudes take a few levels; the quantizer
 * works with them as odd integers q = 2l + 1 (l the level: the rank of the
 * stored value among the grid's values), so x ~ scale * q.
 *
 * Per sub-block the search (ikawrakow's i-quants, reproduced by black-box
 * comparison with llama-quantize) is:
 *   weights  w = imatrix * sqrt(sigma2 + x^2), sigma2 a multiple of the
 *            super-block's mean square (x^2 without a matrix);
 *   signs    the magnitudes |x| are fitted; where the format stores 7 sign
 *            bits per 8 (an even count of negatives), an odd count flips
 *            the sign of the element with the least w * x^2;
 *   scale    a sweep of trial scales; at each, every group's levels are
 *            rounded and, when that point is not on the grid, replaced by
 *            the best (least sqrt(w)-weighted squared error) of its
 *            precomputed neighbours: the grid points at the nearest few
 *            distances. The trial of best weighted least-squares fit wins;
 *            its off-grid groups (or every group: iq_grid_research) are
 *            then re-searched at the fitted scale and the scale refitted.
 *   packing  the super-block's d from the largest sub-block scale; each
 *            sub-block scale to 4 bits against it.
 *
 * IQ3_XXS (checked on every block of synth-s and on random rows, with and
 * without a matrix): sigma2 = 2 * mean square; 31 trial scales
 * (15 +- 0.2 is) / max; d = max scale / 31 stored 1.25% larger; levels
 * rounded as round((x/scale - 1) / 2) into 0..7.
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

/* ------------------------------------------------------------- the grids */

enum { GRID_IQ3XXS, N_GRIDS };

static iq_grid grids[N_GRIDS];
static pthread_once_t grids_once = PTHREAD_ONCE_INIT;
static int grids_ok;

/* Byte j of point k of a grid table (8 bytes or 4 bytes wide). */
static uint8_t grid_byte(const void *table, int width, int k, int j) {
    if (width == 8) return (uint8_t)(((const uint64_t *)table)[k] >> (8 * j));
    return (uint8_t)(((const uint32_t *)table)[k] >> (8 * j));
}

typedef struct dist_index {
    int d2, index;
} dist_index;

/* The grid points at the n_dist (<= 8) nearest distances from the packed
 * point u, ordered by distance then index, into dist; their count. One
 * pass finds the n_dist smallest distinct distances, a second keeps the
 * points within them (in index order), and an insertion sort by distance
 * keeps that order among equals: what sorting all points would give, at a
 * fraction of the cost (IQ2_S's 1024 points for each of 65536 packed
 * points made a sort per point take tens of seconds). */
static int nearest_points(const iq_grid *g, int u, int n_dist, dist_index *dist) {
    int best[8], n_best = 0;
    for (int k = 0; k < g->n_points; k++) {
        int d2 = 0;
        for (int j = 0; j < g->width; j++) {
            const int a = 2 * ((u >> (g->bits * j)) & ((1 << g->bits) - 1)) + 1;
            const int b = 2 * g->levels[k * g->width + j] + 1;
            d2 += (a - b) * (a - b);
        }
        dist[k] = (dist_index){d2, k};
        int at = n_best;
        while (at > 0 && best[at - 1] > d2) at--;
        if ((at > 0 && best[at - 1] == d2) || at >= n_dist) continue;
        if (n_best < n_dist) n_best++;
        for (int m = n_best - 1; m > at; m--) best[m] = best[m - 1];
        best[at] = d2;
    }
    int count = 0;
    for (int k = 0; k < g->n_points; k++)
        if (dist[k].d2 <= best[n_best - 1]) dist[count++] = dist[k];
    for (int k = 1; k < count; k++) {
        dist_index x = dist[k];
        int m = k;
        while (m > 0 && dist[m - 1].d2 > x.d2) {
            dist[m] = dist[m - 1];
            m--;
        }
        dist[m] = x;
    }
    return count;
}

/* Build grid g from table: levels, map, and for every point off the grid
 * the grid points at its n_dist nearest distances (in odd-integer units). */
int iq_grid_build(iq_grid *g, const void *table, int n_points, int width, int bits, int n_dist) {
    uint8_t values[256] = {0};
    for (int k = 0; k < n_points; k++)
        for (int j = 0; j < width; j++) values[grid_byte(table, width, k, j)] = 1;
    int rank[256], n_levels = 0;
    for (int v = 0; v < 256; v++) rank[v] = values[v] ? n_levels++ : -1;

    const int n_map = 1 << (bits * width);
    g->n_points = n_points;
    g->width = width;
    g->bits = bits;
    g->levels = malloc((size_t)n_points * (size_t)width);
    g->map = malloc((size_t)n_map * sizeof *g->map);
    dist_index *dist = malloc((size_t)n_points * sizeof *dist);
    if (!g->levels || !g->map || !dist) goto fail;
    for (int u = 0; u < n_map; u++) g->map[u] = -1;
    for (int k = 0; k < n_points; k++) {
        int u = 0;
        for (int j = 0; j < width; j++) {
            const int l = rank[grid_byte(table, width, k, j)];
            g->levels[k * width + j] = (uint8_t)l;
            u |= l << (bits * j);
        }
        g->map[u] = k;
    }
    /* one pass, the lists appended to a growing array */
    size_t at = 0, cap = 0;
    g->neighbours = NULL;
    for (int u = 0; u < n_map; u++) {
        if (g->map[u] >= 0) continue; /* on the grid: no list */
        const int count = nearest_points(g, u, n_dist, dist);
        if (at + 1 + (size_t)count > cap) {
            size_t grown = cap ? 2 * cap : 4096;
            while (grown < at + 1 + (size_t)count) grown *= 2;
            uint16_t *more = realloc(g->neighbours, grown * sizeof *more);
            if (!more) goto fail;
            g->neighbours = more;
            cap = grown;
        }
        g->map[u] = -1 - (int32_t)at;
        g->neighbours[at] = (uint16_t)count;
        for (int k = 0; k < count; k++) g->neighbours[at + 1 + (size_t)k] = (uint16_t)dist[k].index;
        at += 1 + (size_t)count;
    }
    free(dist);
    return 0;
fail:
    free(dist);
    return -1;
}

/* IQ3_XXS: 4 coordinates of 8 levels; off-grid points list the grid
 * points at their 2 nearest distances. */
static void grids_init(void) {
    grids_ok = iq_grid_build(&grids[GRID_IQ3XXS], tsr_iq3xxs_grid, 256, 4, 3, 2) == 0;
}

static const iq_grid *grid_get(int which) {
    pthread_once(&grids_once, grids_init);
    return grids_ok ? &grids[which] : NULL;
}

/* ------------------------------------------------------------ the search */

/* Level of x at inverse scale id: x ~ (2l + 1) / id, l in [0, n_levels). */
static int iq_grid_level(float id, float x, int n_levels) {
    const int l = quant_nearest_int(0.5f * (id * x - 1.0f));
    return l < 0 ? 0 : l >= n_levels ? n_levels - 1 : l;
}

/* The grid point for the magnitudes xval[0..width) at inverse scale id
 * (scale = 1/id, as the caller computed it): the rounded point if it is
 * on the grid, else the neighbour of least error weighted by waux. Its
 * levels into L; *on_grid says which. */
static int iq_grid_point(const iq_grid *g, const float *xval, const float *waux, float id, float scale,
                         int n_levels, uint8_t *L, bool *on_grid) {
    int u = 0;
    for (int j = 0; j < g->width; j++) {
        L[j] = (uint8_t)iq_grid_level(id, xval[j], n_levels);
        u |= L[j] << (g->bits * j);
    }
    int k = g->map[u];
    *on_grid = k >= 0;
    if (k >= 0) return k;
    const uint16_t *nb = g->neighbours + (-1 - k);
    float best = FLT_MAX;
    for (int t = 1; t <= nb[0]; t++) {
        const uint8_t *lv = g->levels + (size_t)nb[t] * (size_t)g->width;
        float d2 = 0.0f;
        for (int j = 0; j < g->width; j++) {
            const float diff = scale * (float)(2 * lv[j] + 1) - xval[j];
            d2 += waux[j] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            k = nb[t];
        }
    }
    memcpy(L, g->levels + (size_t)k * (size_t)g->width, (size_t)g->width);
    return k;
}

/* The weighted least-squares scale of xval ~ scale * (2L + 1): sums. */
static void iq_grid_fit(int n, const float *xval, const float *w, const uint8_t *L, float *sumqx, float *sumq2) {
    float sx = 0.0f, s2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const float q = (float)(2 * L[i] + 1);
        sx += w[i] * xval[i] * q;
        s2 += w[i] * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* One sub-block's search (see the top of the file): levels into L, the
 * fitted scale returned; max: the largest magnitude, scale: the scale kept
 * if no trial fits (all-zero weights). */
float iq_grid_search(const iq_grid *g, const iq_grid_sweep *sw, int n, const float *xval, const float *w,
                     const float *waux, float max, float scale, uint8_t *L) {
    const int n_groups = n / g->width;
    uint8_t Laux[32];
    bool on[8], on_aux[8];
    float best = 0.0f, sumqx, sumq2;
    for (int k = 0; k < n_groups; k++) on[k] = true;
    for (int is = -sw->n_steps; is <= sw->n_steps; is++) {
        const float id = ((float)(2 * sw->n_levels - 1) + (float)is * sw->step) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < n_groups; k++)
            iq_grid_point(g, xval + g->width * k, waux + g->width * k, id, this_scale, sw->n_levels,
                          Laux + g->width * k, &on_aux[k]);
        iq_grid_fit(n, xval, w, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            memcpy(on, on_aux, sizeof on);
        }
    }
    int n_off = 0;
    for (int k = 0; k < n_groups; k++) n_off += !on[k];
    if ((n_off > 0 || sw->research == IQ_RESEARCH_ALL) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < n_groups; k++) {
            bool dummy;
            if (!on[k] || sw->research != IQ_RESEARCH_OFF_GRID)
                iq_grid_point(g, xval + g->width * k, waux + g->width * k, id, scale, sw->n_levels,
                              L + g->width * k, &dummy);
        }
        iq_grid_fit(n, xval, w, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

/* The grid index of the levels L[0..width) (always on the grid here). */
int iq_grid_index(const iq_grid *g, const uint8_t *L) {
    int u = 0;
    for (int j = 0; j < g->width; j++) u |= L[j] << (g->bits * j);
    return g->map[u];
}

/* Magnitudes of a group of 8 into xval; the sign bits returned. With
 * even_signs the format stores 7 of them, the 8th implied by an even
 * count of negatives: an odd count flips the element of least w * x^2. */
uint8_t iq_group_signs(const float *x, const float *w, float *xval, bool even_signs) {
    unsigned s = 0;
    int n_neg = 0;
    for (int i = 0; i < 8; i++) {
        if (x[i] >= 0) {
            xval[i] = x[i];
        } else {
            xval[i] = -x[i];
            n_neg++;
            s |= 1u << i;
        }
    }
    if (even_signs && n_neg % 2) {
        int imin = 0;
        float min = w[0] * x[0] * x[0];
        for (int i = 1; i < 8; i++) {
            const float ax = w[i] * x[i] * x[i];
            if (ax < min) {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1u << imin;
    }
    return (uint8_t)(even_signs ? s & 127 : s);
}

/* Per-element weights of n elements: qw * sqrt(sigma2 + x^2), or x^2
 * without a matrix; their square roots into waux. */
void iq_grid_weights(const float *x, const float *qw, int n, float sigma2, float *w, float *waux) {
    for (int i = 0; i < n; i++) w[i] = qw ? qw[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
    for (int i = 0; i < n; i++) waux[i] = sqrtf(w[i]);
}

float iq_sum_squares(const float *x, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return s;
}

/* A sub-block scale as 4 bits against d: scale ~ d * (2l + 1). */
int iq_scale_bits(float id, float scale) {
    const int l = quant_nearest_int(0.5f * (id * scale - 1));
    return l < 0 ? 0 : l > 15 ? 15 : l;
}


/* ------------------------------------------------------------- IQ3_XXS */

/* 8 sub-blocks of 32: 4-wide points of 8 levels (256), 7 sign bits per 8
 * and a 4-bit scale per sub-block in one u32. */
static void iq3xxs_quantize(const float *x, void *dst, int64_t n, const float *qw) {
    const iq_grid *g = grid_get(GRID_IQ3XXS);
    const iq_grid_sweep sw = {8, 15, 0.2f, IQ_RESEARCH_OFF_GRID};
    tsr_block_iq3_xxs *y = dst;
    float w[32], waux[32], xval[32], scales[8];
    uint8_t L[32];
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++, x += QK_K) {
        uint8_t q3[96] = {0};
        uint32_t sas[8] = {0};
        const float sigma2 = 2 * iq_sum_squares(x, QK_K) / QK_K;
        float max_scale = 0.0f;
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = x + 32 * ib;
            iq_grid_weights(xb, qw ? qw + QK_K * ibl + 32 * ib : NULL, 32, sigma2, w, waux);
            uint8_t signs[4];
            for (int k = 0; k < 4; k++) signs[k] = iq_group_signs(xb + 8 * k, w + 8 * k, xval + 8 * k, true);
            float max = xval[0];
            for (int i = 1; i < 32; i++) max = fmaxf(max, xval[i]);
            if (max < IQ_GROUP_EPS) {
                scales[ib] = 0;
                memset(L, 0, sizeof L);
            } else {
                memset(L, 0, sizeof L);
                scales[ib] = iq_grid_search(g, &sw, 32, xval, w, waux, max, max / 15, L);
                if (scales[ib] < 0) {
                    scales[ib] = -scales[ib];
                    for (int k = 0; k < 4; k++) signs[k] = (uint8_t)(~signs[k] & 127);
                }
            }
            for (int k = 0; k < 8; k++) q3[8 * ib + k] = (uint8_t)iq_grid_index(g, L + 4 * k);
            sas[ib] = signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 | (uint32_t)signs[3] << 21;
            max_scale = fmaxf(max_scale, scales[ib]);
        }
        if (!max_scale) {
            memset(&y[ibl], 0, sizeof y[ibl]);
            continue;
        }
        const float d = max_scale / 31;
        y[ibl].d = f32_to_fp16(d * 1.0125f); /* llama.cpp's stored d is 1.25% larger */
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) sas[ib] |= (uint32_t)iq_scale_bits(id, scales[ib]) << 28;
        memcpy(y[ibl].qs, q3, 64);
        for (int ib = 0; ib < 8; ib++) memcpy(y[ibl].qs + 64 + 4 * ib, &sas[ib], 4);
    }
}

void quant_iq3_xxs_from_f32(const float *x, void *dst, int64_t n) { iq3xxs_quantize(x, dst, n, NULL); }

void quant_iq3_xxs_from_f32_w(const float *x, void *dst, int64_t n, const float *qw) {
    iq3xxs_quantize(x, dst, n, qw);
}

