/*
 * quant_iq_grid.h — the grid IQ formats' lattice as their quantizers see
 * it, shared by quant_iq_grid.c (IQ2/IQ3) and quant_iq1.c (IQ1_S/IQ1_M).
 */
#ifndef TESSERA_TENSOR_QUANT_IQ_GRID_H
#define TESSERA_TENSOR_QUANT_IQ_GRID_H

#include <stdint.h>

/* A grid as the quantizer sees it: each point's levels, and a map from any
 * point's packed levels (bits per coordinate, coordinate 0 lowest) to its
 * grid index, or to -1 - offset of its neighbour list in neighbours
 * (count, then that many grid indices, nearest first). */
typedef struct iq_grid {
    int n_points, width, bits;
    uint8_t *levels;     /* n_points * width                           */
    int32_t *map;        /* 1 << (bits * width)                        */
    uint16_t *neighbours;
} iq_grid;

/* Build g from a table of n_points points of width (8 or 4) byte values
 * (tessera/iq_grids.h layout), a value's level being its rank among the
 * table's byte values as unsigned; for every point off the grid, the grid
 * points at its n_dist nearest distances (in odd-integer units 2l + 1),
 * sorted by distance then index. 0, or -1 when out of memory. */
int iq_grid_build(iq_grid *g, const void *table, int n_points, int width, int bits, int n_dist);

/* ---- the search steps of quant_iq_grid.c, shared with quant_iq3s.c ---- */

#include <stdbool.h>

/* Below this largest magnitude a sub-block is all zero. */
#define IQ_GROUP_EPS 1e-8f

/* The trial inverse scales of a search: (2 n_levels - 1 + is * step) / max
 * for is in [-n_steps, n_steps]. research_all: when the best trial had a
 * group off the grid, every group (not only those) is searched again at
 * the fitted scale (IQ3_S). */
typedef struct iq_grid_sweep {
    int n_levels, n_steps;
    float step;
    bool research_all;
} iq_grid_sweep;

/* Level of x at inverse scale id: x ~ (2l + 1) / id, l in [0, n_levels). */
int iq_grid_level(float id, float x, int n_levels);
/* The grid point for the magnitudes xval[0..width) at inverse scale id: the
 * rounded point if on the grid, else the neighbour of least waux-weighted
 * error at scale; its levels into L, *on_grid says which. */
int iq_grid_point(const iq_grid *g, const float *xval, const float *waux, float id, float scale, int n_levels,
                  uint8_t *L, bool *on_grid);
/* Weighted least-squares sums of xval ~ scale * (2L + 1). */
void iq_grid_fit(int n, const float *xval, const float *w, const uint8_t *L, float *sumqx, float *sumq2);
/* One sub-block's sweep and re-search (n <= 32): levels into L, the fitted
 * scale returned (scale: kept if no trial fits). */
float iq_grid_search(const iq_grid *g, const iq_grid_sweep *sw, int n, const float *xval, const float *w,
                     const float *waux, float max, float scale, uint8_t *L);
/* The grid index of the on-grid levels L[0..width). */
int iq_grid_index(const iq_grid *g, const uint8_t *L);
/* Magnitudes of a group of 8 into xval, sign bits returned; even_signs:
 * 7 stored, an odd count of negatives flips the least w * x^2. */
uint8_t iq_group_signs(const float *x, const float *w, float *xval, bool even_signs);
/* w = qw * sqrt(sigma2 + x^2) (x^2 without qw), waux = sqrt(w). */
void iq_grid_weights(const float *x, const float *qw, int n, float sigma2, float *w, float *waux);
float iq_sum_squares(const float *x, int n);
/* A sub-block scale as 4 bits l against 1/id: scale ~ (2l + 1) / id. */
int iq_scale_bits(float id, float scale);

#endif
