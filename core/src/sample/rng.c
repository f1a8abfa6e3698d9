/* rng — MT19937, the generator llama.cpp's samplers draw from (C++'s
 * std::mt19937: Matsumoto and Nishimura, 1998), and the uniform numbers
 * libstdc++'s std::uniform_real_distribution makes from it, so a seed gives
 * llama.cpp's draws on every machine and libc. */
#include "sample/sample.h"

enum { MT_M = 397 };

void sample_rng_seed(sample_rng *rng, uint32_t seed) {
    rng->mt[0] = seed;
    for (uint32_t i = 1; i < SAMPLE_MT_N; i++)
        rng->mt[i] = 1812433253u * (rng->mt[i - 1] ^ (rng->mt[i - 1] >> 30)) + i;
    rng->i = SAMPLE_MT_N;
}

/* The next 624 words at once (the "twist"). */
static void mt_twist(uint32_t *mt) {
    for (int k = 0; k < SAMPLE_MT_N; k++) {
        uint32_t y = (mt[k] & 0x80000000u) | (mt[(k + 1) % SAMPLE_MT_N] & 0x7fffffffu);
        mt[k] = mt[(k + MT_M) % SAMPLE_MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
}

uint32_t sample_rng_next(sample_rng *rng) {
    if (rng->i >= SAMPLE_MT_N) {
        mt_twist(rng->mt);
        rng->i = 0;
    }
    uint32_t y = rng->mt[rng->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* libstdc++'s generate_canonical: enough 32-bit words for the mantissa,
 * the first the least significant, divided by 2^(32 k); a result that
 * rounds up to 1 becomes the largest value below 1. */
double sample_rng_uniform(sample_rng *rng) {
    double lo = sample_rng_next(rng);
    double hi = sample_rng_next(rng);
    double u = (lo + hi * 4294967296.0) / 18446744073709551616.0;
    return u < 1.0 ? u : 0x1.fffffffffffffp-1;
}

float sample_rng_uniform_f(sample_rng *rng) {
    float u = (float)sample_rng_next(rng) / 4294967296.0f;
    return u < 1.0f ? u : 0x1.fffffep-1f;
}
