/*
 * The acceptance rule of speculative sampling (spec_accept, spec.h) on a
 * fixed distribution of 6 tokens: x drawn from the draft's q, kept with
 * min(1, p/q), else redrawn from max(0, p - q) normalised, gives tokens
 * distributed as the target's p. 200000 seeded trials each, for a q unlike
 * p, a q equal to p (always kept) and a one-hot q (the engine's drafts: the
 * rule then keeps x with probability p[x]); Pearson's chi-square against p
 * must stay below 20.5 (5 degrees of freedom, p = 0.001). A rule that
 * forgot the residual (redrew from p) or kept every x fails by thousands.
 */
#include "harness.h"
#include <math.h>

#include "spec/spec.h"

enum { NT = 6, TRIALS = 200000 };

static const float P[NT] = {0.30f, 0.25f, 0.20f, 0.12f, 0.08f, 0.05f};

static int32_t draw(const float *q, sample_rng *rng) {
    double u = sample_rng_uniform(rng), acc = 0;
    for (int32_t i = 0; i < NT; i++) {
        acc += q[i];
        if (u < acc) return i;
    }
    return NT - 1;
}

/* chi-square of the rule's tokens against P, and the rate of kept drafts */
static double chi2(const float *q, uint64_t seed, double *kept) {
    sample_rng rng;
    sample_rng_seed(&rng, seed);
    long count[NT] = {0}, n_kept = 0;
    for (int t = 0; t < TRIALS; t++) {
        int accepted = 0;
        int32_t x = draw(q, &rng);
        int32_t y = spec_accept(P, q, NT, x, &rng, &accepted);
        REQUIRE(y >= 0 && y < NT, "token %d", y);
        count[y]++;
        n_kept += accepted;
    }
    double c = 0;
    for (int32_t i = 0; i < NT; i++) {
        const double e = (double)TRIALS * P[i];
        c += (count[i] - e) * (count[i] - e) / e;
    }
    *kept = (double)n_kept / TRIALS;
    return c;
}

TEST(test_rule) {
    const float unlike[NT] = {0.05f, 0.10f, 0.40f, 0.05f, 0.30f, 0.10f};
    const float onehot[NT] = {0, 1, 0, 0, 0, 0};
    double kept = 0;
    double c = chi2(unlike, 7, &kept);
    /* Expected kept rate: sum over i of min(p, q) = 0.05+0.10+0.20+0.05+0.08+0.05 = 0.53 */
    print_message("q unlike p: chi-square %.2f, kept %.4f (expected 0.53)\n", c, kept);
    EXPECT(c < 20.5, "chi-square %.2f", c);
    EXPECT_NEAR(kept, 0.53, 0.01, "kept rate");
    c = chi2(P, 8, &kept);
    print_message("q = p: chi-square %.2f, kept %.4f\n", c, kept);
    EXPECT(c < 20.5, "chi-square %.2f", c);
    EXPECT_NEAR(kept, 1.0, 1e-9, "kept rate");
    c = chi2(onehot, 9, &kept);
    print_message("q one-hot at 1: chi-square %.2f, kept %.4f (expected 0.25)\n", c, kept);
    EXPECT(c < 20.5, "chi-square %.2f", c);
    EXPECT_NEAR(kept, 0.25, 0.01, "kept rate");
}

/* The engine's form for a one-hot q: draw t from p, keep x when t == x. */
TEST(test_engine_form) {
    sample_rng rng;
    sample_rng_seed(&rng, 10);
    long count[NT] = {0}, n_kept = 0;
    for (int t = 0; t < TRIALS; t++) {
        const int32_t x = 1, y = draw(P, &rng);
        n_kept += y == x;
        count[y]++;
    }
    double c = 0;
    for (int32_t i = 0; i < NT; i++) {
        const double e = (double)TRIALS * P[i];
        c += (count[i] - e) * (count[i] - e) / e;
    }
    print_message("target's own draw, x = 1: chi-square %.2f, kept %.4f\n", c, (double)n_kept / TRIALS);
    EXPECT(c < 20.5, "chi-square %.2f", c);
    EXPECT_NEAR((double)n_kept / TRIALS, 0.25, 0.01, "kept rate");
}

TEST(test_ngram) {
    const int32_t toks[] = {1, 2, 3, 4, 5, 1, 2, 3, 9, 8, 1, 2, 3};
    int32_t out[8];
    /* The most recent earlier 1 2 3 is at 5: 9 8 1 2 3 follow. */
    int32_t n = spec_ngram_draft(toks, 13, 3, 8, out);
    EXPECT(n == 5 && out[0] == 9 && out[1] == 8 && out[4] == 3, "got %d tokens, first %d", n, n ? out[0] : -1);
    EXPECT(spec_ngram_draft(toks, 13, 3, 2, out) == 2, "max");
    EXPECT(spec_ngram_draft(toks, 13, 4, 8, out) == 0, "no earlier 8 1 2 3");
    EXPECT(spec_ngram_draft(toks, 3, 3, 8, out) == 0, "too short");
}

HARNESS_MAIN("spec accept", HARNESS_TEST(test_rule), HARNESS_TEST(test_engine_form), HARNESS_TEST(test_ngram))
