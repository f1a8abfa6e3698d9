/*
 * logits_util.h — comparing two rows of logits (or any float vectors) in a
 * test: the greedy pick and the largest difference.
 *
 * Header-only (static inline); include it as "../logits_util.h".
 */
#ifndef TESSERA_TESTS_LOGITS_UTIL_H
#define TESSERA_TESTS_LOGITS_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The index of the largest of x[0..n) (the first on a tie). */
static inline int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The largest |a[i] - b[i]| over [0, n), in double. Equal values (the same
 * infinity too) differ by 0; a NaN on either side counts as an infinite
 * difference, so it never passes a tolerance. */
static inline double max_diff(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i]) continue;
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) return INFINITY;
        if (d > e) e = d;
    }
    return e;
}

#endif
