/*
 * quant_iq_grid.h — the grid search the IQ quantizers share
 * (quant_iq_grid.c defines it; quant_iq_grid.c's top comment explains it):
 * a grid with each off-grid point's neighbour list, the trial-scale sweep,
 * the even-sign trick and the importance weights. Each quantizer file
 * (quant_iq_grid.c for IQ3_XXS, quant_iq2.c for IQ2_XXS/IQ2_XS,
 * quant_iq3s.c for IQ3_S/IQ2_S) builds its grids once and runs the search
 * per sub-block. quant_iq1.c (IQ1_S; IQ1_M not yet enabled) uses the grid
 * and its neighbour lists only.
 */
#ifndef TESSERA_TENSOR_QUANT_IQ_GRID_H
#define TESSERA_TENSOR_QUANT_IQ_GRID_H

#include <stdbool.h>
#include <stdint.h>

/* Below this largest magnitude a sub-block is all zero. */
#define IQ_GROUP_EPS 1e-8f

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

/* Which groups the search places again at the fitted scale after the
 * sweep (the scale then refitted). */
typedef enum iq_grid_research {
    IQ_RESEARCH_OFF_GRID,    /* those the best trial left off the grid (IQ3_XXS, IQ2_XS, IQ2_S) */
    IQ_RESEARCH_ALL_IF_OFF,  /* every group, when any was off the grid (IQ3_S)                   */
    IQ_RESEARCH_ALL,         /* every group, always (IQ2_XXS)                                    */
} iq_grid_research;

/* The trial inverse scales of the search: (2 n_levels - 1 + is * step) / max
 * for is in [-n_steps, n_steps]; then the re-search research says. */
typedef struct iq_grid_sweep {
    int n_levels, n_steps;
    float step;
    iq_grid_research research;
} iq_grid_sweep;

/* Build g from a table of n_points points of width (8 or 4) byte values
 * (tessera/iq_grids.h layout), a value's level being its rank among the
 * table's byte values as unsigned; for every point off the grid, the grid
 * points at its n_dist nearest distances (in odd-integer units 2l + 1),
 * sorted by distance then index. 0, or -1 when out of memory. */
int iq_grid_build(iq_grid *g, const void *table, int n_points, int width, int bits, int n_dist);

/* One sub-block's search (n <= 32, at most 8 groups): levels into L, the
 * fitted scale returned; max: the magnitude the trial scales start from,
 * scale: the scale kept if no trial fits (all-zero weights). */
float iq_grid_search(const iq_grid *g, const iq_grid_sweep *sw, int n, const float *xval, const float *w,
                     const float *waux, float max, float scale, uint8_t *L);

/* The grid index of the levels L[0..width) (always on the grid here). */
int iq_grid_index(const iq_grid *g, const uint8_t *L);

/* Magnitudes of a group of 8 into xval; the sign bits returned. With
 * even_signs the format stores 7 of them, the 8th implied by an even
 * count of negatives: an odd count flips the element of least w * x^2. */
uint8_t iq_group_signs(const float *x, const float *w, float *xval, bool even_signs);

/* Per-element weights of n elements: qw * sqrt(sigma2 + x^2), or x^2
 * without a matrix; their square roots into waux. */
void iq_grid_weights(const float *x, const float *qw, int n, float sigma2, float *w, float *waux);

float iq_sum_squares(const float *x, int n);

/* A sub-block scale as 4 bits against 1/id: scale ~ (2l + 1) / id. */
int iq_scale_bits(float id, float scale);

#endif
