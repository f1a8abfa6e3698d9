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

#endif
