/* The acceptance rule of speculative sampling (spec.h). */
#include "spec/spec.h"

int32_t spec_accept(const float *p, const float *q, int32_t n, int32_t x, sample_rng *rng, int *accepted) {
    *accepted = 0;
    if (n <= 0 || x < 0 || x >= n) return -1;
    /* Keep x with probability min(1, p[x] / q[x]): u * q[x] < p[x]. */
    const double u = sample_rng_uniform(rng);
    if (u * (double)q[x] < (double)p[x]) {
        *accepted = 1;
        return x;
    }
    /* Rejected: draw from max(0, p - q), normalised. */
    double total = 0;
    for (int32_t i = 0; i < n; i++)
        if (p[i] > q[i]) total += (double)p[i] - (double)q[i];
    if (total <= 0) return x; /* p == q: rejection has probability 0 */
    double r = sample_rng_uniform(rng) * total;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= q[i]) continue;
        last = i;
        r -= (double)p[i] - (double)q[i];
        if (r < 0) return i;
    }
    return last; /* rounding left a sliver: the last token with mass */
}
