/* rng — xoshiro256** seeded through splitmix64: a small PRNG whose stream is
 * the same on every machine and libc for a given seed. */
#include "sample/sample.h"

static uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void sample_rng_seed(sample_rng *rng, uint64_t seed) {
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64_next(&sm);
}

uint64_t sample_rng_next(sample_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double sample_rng_uniform(sample_rng *rng) {
    return (double)(sample_rng_next(rng) >> 11) * 0x1.0p-53;
}
