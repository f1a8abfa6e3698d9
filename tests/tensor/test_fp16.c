/*
 * test_fp16 — fp16 and bf16 conversions are exact and round to nearest even.
 *
 *  - every one of the 65536 halves widens exactly and narrows back to itself
 *    (NaNs stay NaN);
 *  - for every pair of adjacent finite halves, the f32 midpoint rounds to the
 *    even one, and the f32 values one ulp either side round to the nearer;
 *    overflow (>= 65520) gives infinity; subnormal halves included;
 *  - where the compiler has _Float16, 2^20 random f32 bit patterns convert
 *    the same as the compiler's own (IEEE round-to-nearest-even) conversion;
 *  - bf16: every value widens exactly and narrows back; midpoints round to
 *    even; a signalling NaN becomes a quiet NaN; ggml's rounding formula.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tensor/dtype.h"

static int n_mismatches; /* the first 10 are printed */

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void mismatch(const char *what, uint32_t in, uint32_t got, uint32_t want) {
    if (n_mismatches++ < 10) ADD_FAILURE("%s: input 0x%08x -> 0x%04x, want 0x%04x", what, in, got, want);
}

TEST(test_fp16) {
    /* fp16 round trip of every half */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        uint16_t back = f32_to_fp16(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan ? !(isnan(f) && (back & 0x7c00) == 0x7c00 && (back & 0x3ff)) : back != h)
            mismatch("fp16 round trip", h, back, h);
    }
    /* midpoints between adjacent positive finite halves (and their negatives) */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float lo = fp16_to_f32((uint16_t)h), hi = fp16_to_f32((uint16_t)(h + 1));
        float mid = (lo + hi) / 2; /* exact: 12 significant bits */
        uint32_t even = (h & 1) ? h + 1 : h;
        for (int sign = 0; sign < 2; sign++) {
            float s = sign ? -1.0f : 1.0f;
            uint32_t sb = sign ? 0x8000 : 0;
            uint16_t got = f32_to_fp16(s * mid);
            if (got != (even | sb)) mismatch("fp16 midpoint to even", to_bits(s * mid), got, even | sb);
            got = f32_to_fp16(s * nextafterf(mid, 0));
            if (got != (h | sb)) mismatch("fp16 below midpoint", to_bits(s * mid), got, h | sb);
            got = f32_to_fp16(s * nextafterf(mid, INFINITY));
            if (got != ((h + 1) | sb)) mismatch("fp16 above midpoint", to_bits(s * mid), got, (h + 1) | sb);
        }
    }
    if (f32_to_fp16(65519.99f) != 0x7bff) mismatch("fp16 just below overflow", 0, f32_to_fp16(65519.99f), 0x7bff);
    if (f32_to_fp16(65520.0f) != 0x7c00) mismatch("fp16 overflow", 0, f32_to_fp16(65520.0f), 0x7c00);
    if (f32_to_fp16(-1e30f) != 0xfc00) mismatch("fp16 -overflow", 0, f32_to_fp16(-1e30f), 0xfc00);
    if (f32_to_fp16(0x1p-25f) != 0) mismatch("fp16 2^-25 ties to 0", 0, f32_to_fp16(0x1p-25f), 0);
    if (f32_to_fp16(0x1.000002p-25f) != 1) mismatch("fp16 above 2^-25", 0, f32_to_fp16(0x1.000002p-25f), 1);
    {
        uint16_t n = f32_to_fp16(from_bits(0xff800001u));
        if ((n & 0x7c00) != 0x7c00 || !(n & 0x0200) || !(n & 0x8000)) mismatch("fp16 NaN", 0xff800001u, n, 0xfe00);
    }
#if defined(__FLT16_MAX__)
    {
        uint64_t s = 88172645463325252ull;
        for (int i = 0; i < (1 << 20); i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            uint32_t bits = (uint32_t)s;
            float f = from_bits(bits);
            if (isnan(f)) continue;
            _Float16 c = (_Float16)f;
            uint16_t want;
            memcpy(&want, &c, 2);
            uint16_t got = f32_to_fp16(f);
            if (got != want) mismatch("fp16 vs compiler _Float16", bits, got, want);
        }
        printf("fp16: 2^20 random values agree with the compiler's _Float16\n");
    }
#else
    printf("fp16: compiler has no _Float16; random comparison not run\n");
#endif
}

TEST(test_bf16) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (to_bits(f) != h << 16) mismatch("bf16 widen", h, to_bits(f) >> 16, h);
        uint16_t back = f32_to_bf16(f);
        int is_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (is_nan ? !((back & 0x7f80) == 0x7f80 && (back & 0x40)) : back != h) mismatch("bf16 round trip", h, back, h);
        if (!is_nan && (h & 0x7fff) < 0x7f7f) { /* midpoint to the next finite value */
            uint32_t mid = (h << 16) | 0x8000;
            uint32_t even = (h & 1) ? h + 1 : h;
            if (f32_to_bf16(from_bits(mid)) != even) mismatch("bf16 midpoint to even", mid, f32_to_bf16(from_bits(mid)), even);
            if (f32_to_bf16(from_bits(mid - 1)) != h) mismatch("bf16 below midpoint", mid - 1, f32_to_bf16(from_bits(mid - 1)), h);
            if (f32_to_bf16(from_bits(mid + 1)) != h + 1) mismatch("bf16 above midpoint", mid + 1, f32_to_bf16(from_bits(mid + 1)), h + 1);
        }
    }
    if (f32_to_bf16(from_bits(0x7f800001u)) != 0x7fc0) mismatch("bf16 sNaN quieted", 0x7f800001u, f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
}

HARNESS_MAIN("fp16/bf16: all conversions exact and round to nearest even", HARNESS_TEST(test_fp16),
             HARNESS_TEST(test_bf16))
