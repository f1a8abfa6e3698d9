/* Unit tests of the sampler chain: each step on hand-made logits with the
 * exact outcome, then the chain (order, greedy, seeds, distribution) and the
 * public tessera_sampler_* calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"
#include "sample/sample.h"
#include "util/error.h"

enum { MAXV = 64 };

/* Candidates over a logit row, in storage owned by the caller. */
typedef struct fixture {
    sample_cand storage[MAXV];
    sample_cands c;
} fixture;

static void fixture_init(fixture *f, const float *logits, int n) {
    sample_cands_init(&f->c, f->storage, logits, n);
}

/* The ids kept, in candidate order, as "a,b,c". */
static const char *ids_of(const sample_cands *c) {
    static char buf[512];
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < c->size && off + 16 < sizeof buf; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, i ? ",%d" : "%d", (int)c->data[i].id);
    return buf;
}

/* Logits whose softmax is exactly the given probabilities (up to rounding). */
static void logits_from_probs(float *logits, const double *probs, int n) {
    for (int i = 0; i < n; i++) logits[i] = (float)log(probs[i]);
}

/* ------------------------------------------------------------------ rng */

TEST(test_rng) {
    /* MT19937 as the C++ standard fixes it ([rand.predef]): seeded with
     * the default 5489, the first output is 3499211612 and the 10000th
     * 4123659995. */
    sample_rng r;
    sample_rng_seed(&r, 5489);
    uint32_t v = sample_rng_next(&r);
    EXPECT(v == 3499211612u, "seed 5489 output 1 is %u", v);
    for (int i = 2; i < 10000; i++) sample_rng_next(&r);
    v = sample_rng_next(&r);
    EXPECT(v == 4123659995u, "seed 5489 output 10000 is %u", v);
    /* The uniform double is two outputs, the first the low word. */
    sample_rng a, b;
    sample_rng_seed(&a, 42);
    sample_rng_seed(&b, 42);
    double lo32 = sample_rng_next(&b), hi32 = sample_rng_next(&b);
    double u0 = sample_rng_uniform(&a);
    EXPECT(u0 == (lo32 + hi32 * 4294967296.0) / 18446744073709551616.0, "uniform %.17g", u0);
    sample_rng_seed(&r, 7);
    double lo = 1, hi = 0, sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sample_rng_uniform(&r);
        EXPECT(u >= 0.0 && u < 1.0, "uniform %g out of [0,1)", u);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
        sum += u;
    }
    EXPECT(lo < 0.001 && hi > 0.999, "uniform range [%g, %g] too narrow", lo, hi);
    EXPECT(fabs(sum / 100000 - 0.5) < 0.005, "uniform mean %g", sum / 100000);
}

/* ------------------------------------------------------------ softmax/sort */

TEST(test_sort_softmax) {
    const float logits[6] = {1, 3, 3, -2, 0.5f, 3};
    fixture f;
    fixture_init(&f, logits, 6);
    sample_softmax(&f.c);
    /* Ties on 3.0 as libstdc++'s std::partial_sort leaves them (llama.cpp's
     * sort; worked by hand through its heap select and heap sort). */
    EXPECT(!strcmp(ids_of(&f.c), "2,1,5,0,4,3"), "sorted order %s", ids_of(&f.c));
    double sum = 0;
    for (size_t i = 0; i < f.c.size; i++) sum += f.c.data[i].p;
    EXPECT(fabs(sum - 1.0) < 1e-6, "softmax sums to %g", sum);
    double e = exp(1.0 - 3.0) / (3 * 1 + exp(-2.0) + exp(-2.5) + exp(-5.0));
    EXPECT(fabs(f.c.data[3].p - e) < 1e-6, "p(id 0) = %g, expected %g", f.c.data[3].p, e);
}

/* ----------------------------------------------------------------- top-k */

TEST(test_top_k) {
    const float logits[7] = {1, 5, 3, 4, 2, 4.5f, -1};
    fixture f;
    fixture_init(&f, logits, 7);
    sample_top_k(&f.c, 3);
    EXPECT(f.c.size == 3 && !strcmp(ids_of(&f.c), "1,5,3"), "top-3 kept %s", ids_of(&f.c));

    fixture_init(&f, logits, 7);
    sample_top_k(&f.c, 1);
    EXPECT(!strcmp(ids_of(&f.c), "1"), "top-1 kept %s", ids_of(&f.c));

    fixture_init(&f, logits, 7);
    sample_top_k(&f.c, 0);
    EXPECT(f.c.size == 7, "k = 0 must keep all, kept %zu", f.c.size);

    fixture_init(&f, logits, 7);
    sample_top_k(&f.c, 100);
    EXPECT(f.c.size == 7, "k > n must keep all, kept %zu", f.c.size);

    /* Larger row, random logits: compare with a full sort. */
    float big[MAXV];
    sample_rng r;
    sample_rng_seed(&r, 3);
    for (int i = 0; i < MAXV; i++) big[i] = (float)(sample_rng_uniform(&r) * 10 - 5);
    fixture g;
    fixture_init(&f, big, MAXV);
    fixture_init(&g, big, MAXV);
    sample_top_k(&f.c, 10);
    sample_sort(&g.c);
    EXPECT(f.c.size == 10, "top-10 kept %zu", f.c.size);
    for (size_t i = 0; i < 10 && i < f.c.size; i++)
        EXPECT(f.c.data[i].id == g.c.data[i].id, "top-10 rank %zu: %d vs full sort %d", i,
               (int)f.c.data[i].id, (int)g.c.data[i].id);
}

/* What a filter with parameter p keeps, as ids_of writes it. */
typedef struct kept_case {
    float p;
    const char *kept;
} kept_case;

/* Each case of a p-filter (top-p, min-p, typical) on a fresh copy of logits. */
static void expect_kept(const char *name, void (*filter)(sample_cands *, float), const float *logits, int n,
                        const kept_case *cases, size_t n_cases) {
    for (size_t i = 0; i < n_cases; i++) {
        fixture f;
        fixture_init(&f, logits, n);
        filter(&f.c, cases[i].p);
        EXPECT(!strcmp(ids_of(&f.c), cases[i].kept), "%s %g kept %s, expected %s", name, (double)cases[i].p,
               ids_of(&f.c), cases[i].kept);
    }
}

/* The probabilities the top-p and min-p cases filter (sorted: ids 1,3,4,0,2). */
static const double PROBS5[5] = {0.1, 0.4, 0.05, 0.25, 0.2};

/* ----------------------------------------------------------------- top-p */

TEST(test_top_p) {
    float logits[5];
    logits_from_probs(logits, PROBS5, 5);
    static const kept_case cases[] = {
        {0.3f, "1"},        /* 0.4 >= 0.3 */
        {0.5f, "1,3"},      /* 0.65 */
        {0.66f, "1,3,4"},   /* 0.85 */
        {0.9f, "1,3,4,0"},  /* 0.95 */
        {0.99f, "1,3,4,0,2"},
        {0.0f, "1"},        /* keeps at least one */
    };
    expect_kept("top-p", sample_top_p, logits, 5, cases, sizeof cases / sizeof cases[0]);
    fixture f;
    fixture_init(&f, logits, 5);
    sample_top_p(&f.c, 1.0f);
    EXPECT(f.c.size == 5, "top-p 1 must keep all, kept %zu", f.c.size);
}

/* Over 1024 unsorted candidates top-p sorts only a growing best prefix;
 * it must keep exactly what the full sort keeps. */
TEST(test_top_p_large) {
    enum { N = 5000 };
    float *logits = malloc(N * sizeof *logits);
    sample_cand *sa = malloc(N * sizeof *sa), *sb = malloc(N * sizeof *sb);
    if (!logits || !sa || !sb) {
        ADD_FAILURE("out of memory");
        goto done;
    }
    sample_rng r;
    sample_rng_seed(&r, 11);
    const float ps[] = {0.1f, 0.5f, 0.9f, 0.95f, 0.999f};
    for (int round = 0; round < 2; round++) {
        /* Peaked (Gaussian x 4) then nearly flat (uniform in [0, 1)). */
        for (int i = 0; i < N; i++) {
            double u1 = sample_rng_uniform(&r) + 1e-12, u2 = sample_rng_uniform(&r);
            logits[i] = round == 0 ? (float)(4.0 * sqrt(-2 * log(u1)) * cos(6.283185307 * u2))
                                   : (float)u2;
        }
        for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
            sample_cands a, b;
            sample_cands_init(&a, sa, logits, N);
            sample_cands_init(&b, sb, logits, N);
            sample_sort(&b); /* sorted: the plain path */
            sample_top_p(&a, ps[k]);
            sample_top_p(&b, ps[k]);
            bool same = a.size == b.size;
            for (size_t i = 0; same && i < a.size; i++) same = a.data[i].id == b.data[i].id;
            EXPECT(same, "round %d top-p %g: kept %zu, full sort kept %zu", round, (double)ps[k],
                   a.size, b.size);
        }
    }
done:
    free(logits);
    free(sa);
    free(sb);
}

/* ----------------------------------------------------------------- min-p */

TEST(test_min_p) {
    float logits[5];
    logits_from_probs(logits, PROBS5, 5);
    /* kept in input order: min-p filters without sorting */
    static const kept_case cases[] = {
        {0.7f, "1"},          /* threshold 0.28 */
        {0.55f, "1,3"},       /* 0.22 */
        {0.45f, "1,3,4"},     /* 0.18 */
        {0.2f, "0,1,3,4"},    /* 0.08 */
        {0.1f, "0,1,2,3,4"},  /* 0.04 */
    };
    expect_kept("min-p", sample_min_p, logits, 5, cases, sizeof cases / sizeof cases[0]);
    fixture f;
    fixture_init(&f, logits, 5);
    sample_min_p(&f.c, 0.0f);
    EXPECT(f.c.size == 5, "min-p 0 must keep all, kept %zu", f.c.size);
}

/* --------------------------------------------------------------- typical */

TEST(test_typical) {
    /* p = 0.4 0.3 0.2 0.1, H = 1.2799 nats; |-log p - H| = 0.364 0.076 0.329
     * 1.023: typicality order is ids 1, 2, 0, 3 — the most likely token is
     * not the most typical one. */
    const double probs[4] = {0.4, 0.3, 0.2, 0.1};
    float logits[4];
    logits_from_probs(logits, probs, 4);
    static const kept_case cases[] = {
        {0.25f, "1"},      /* 0.3 > 0.25 */
        {0.45f, "1,2"},    /* 0.5 */
        {0.6f, "1,2,0"},   /* 0.9 */
        {0.95f, "1,2,0,3"},
    };
    expect_kept("typical", sample_typical, logits, 4, cases, sizeof cases / sizeof cases[0]);
    fixture f;
    fixture_init(&f, logits, 4);
    sample_typical(&f.c, 1.0f);
    EXPECT(f.c.size == 4 && !strcmp(ids_of(&f.c), "0,1,2,3"), "typical 1 must be a no-op: %s",
           ids_of(&f.c));
}

/* ----------------------------------------------------------- temperature */

TEST(test_temperature) {
    const float logits[3] = {2, -4, 1};
    fixture f;
    fixture_init(&f, logits, 3);
    sample_temperature(&f.c, 2.0f);
    EXPECT(f.c.data[0].logit == 1.0f && f.c.data[1].logit == -2.0f && f.c.data[2].logit == 0.5f,
           "temp 2 gave %g %g %g", (double)f.c.data[0].logit, (double)f.c.data[1].logit,
           (double)f.c.data[2].logit);
    fixture_init(&f, logits, 3);
    sample_temperature(&f.c, 0.0f);
    EXPECT(!strcmp(ids_of(&f.c), "0"), "temp 0 must keep only the best, kept %s", ids_of(&f.c));
}

/* ------------------------------------------------------------- penalties */

TEST(test_penalties) {
    const float logits[6] = {1.0f, 1.0f, 0.5f, 2.0f, 0.0f, -1.0f};
    sample_history h;
    EXPECT(sample_history_init(&h, 8) == 0, "history init: %s", error_get());
    const int32_t seen[] = {3, 3, 5, 4, 3};
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) sample_history_push(&h, seen[i]);

    /* Repetition only: once per distinct token, not once per occurrence. */
    fixture f;
    fixture_init(&f, logits, 6);
    sample_penalties(&f.c, &h, 8, 2.0f, 0.0f, 0.0f);
    const float want_rep[6] = {1.0f, 1.0f, 0.5f, 1.0f, 0.0f, -2.0f};
    for (int i = 0; i < 6; i++)
        EXPECT(f.c.data[i].logit == want_rep[i], "repeat: logit[%d] = %g, expected %g", i,
               (double)f.c.data[i].logit, (double)want_rep[i]);

    /* All three: id 3 seen 3x, 4 and 5 once. */
    fixture_init(&f, logits, 6);
    sample_penalties(&f.c, &h, 8, 2.0f, 0.5f, 0.25f);
    const float want_all[6] = {1.0f, 1.0f, 0.5f, 1.0f - 1.5f - 0.25f, 0.0f - 0.5f - 0.25f,
                               -2.0f - 0.5f - 0.25f};
    for (int i = 0; i < 6; i++)
        EXPECT(fabsf(f.c.data[i].logit - want_all[i]) < 1e-6f, "all: logit[%d] = %g, expected %g",
               i, (double)f.c.data[i].logit, (double)want_all[i]);

    /* Same result when the candidates are no longer in id order. */
    fixture_init(&f, logits, 6);
    sample_sort(&f.c);
    sample_penalties(&f.c, &h, 8, 2.0f, 0.5f, 0.25f);
    for (size_t i = 0; i < f.c.size; i++) {
        int32_t id = f.c.data[i].id;
        EXPECT(fabsf(f.c.data[i].logit - want_all[id]) < 1e-6f,
               "sorted: logit[%d] = %g, expected %g", (int)id, (double)f.c.data[i].logit,
               (double)want_all[id]);
    }

    /* The window holds the last N tokens only. */
    sample_history w;
    EXPECT(sample_history_init(&w, 2) == 0, "history init: %s", error_get());
    for (size_t i = 0; i < sizeof seen / sizeof seen[0]; i++) sample_history_push(&w, seen[i]);
    fixture_init(&f, logits, 6);
    sample_penalties(&f.c, &w, 2, 1.0f, 1.0f, 0.0f); /* window {4, 3} */
    EXPECT(f.c.data[3].logit == 1.0f && f.c.data[4].logit == -1.0f && f.c.data[5].logit == -1.0f,
           "window of 2: logits 3,4,5 = %g %g %g, expected 1 -1 -1", (double)f.c.data[3].logit,
           (double)f.c.data[4].logit, (double)f.c.data[5].logit);
    /* A longer ring (DRY's) with the penalties' last 2 only: the same. */
    fixture_init(&f, logits, 6);
    sample_penalties(&f.c, &h, 2, 1.0f, 1.0f, 0.0f);
    EXPECT(f.c.data[3].logit == 1.0f && f.c.data[4].logit == -1.0f && f.c.data[5].logit == -1.0f,
           "last 2 of 5: logits 3,4,5 = %g %g %g, expected 1 -1 -1", (double)f.c.data[3].logit,
           (double)f.c.data[4].logit, (double)f.c.data[5].logit);
    sample_history_clear(&w);
    fixture_init(&f, logits, 6);
    sample_penalties(&f.c, &w, 2, 2.0f, 1.0f, 1.0f);
    EXPECT(f.c.data[3].logit == 2.0f, "cleared history must not penalize");
    sample_history_free(&w);
    sample_history_free(&h);
}

TEST(test_logit_bias) {
    const float logits[4] = {1, 3, 2, 0};
    const sample_bias bias[2] = {{1, -INFINITY}, {3, 2.5f}};
    fixture f;
    fixture_init(&f, logits, 4);
    sample_logit_bias(&f.c, bias, 2);
    EXPECT(sample_argmax(&f.c) == 3, "biased argmax is %d, expected 3", (int)sample_argmax(&f.c));
    EXPECT(isinf(f.c.data[1].logit) && f.c.data[1].logit < 0, "banned token kept logit %g",
           (double)f.c.data[1].logit);
}

/* ----------------------------------------------------------------- chain */

static sample_params params_plain(uint64_t seed) {
    sample_params p = sample_params_default();
    p.seed = seed;
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

TEST(test_greedy) {
    const float logits[5] = {0.5f, 2.0f, 2.0f, -1.0f, 1.9f};
    sample_params p = params_plain(1);
    p.temp = 0.0f;
    sample_chain *s = sample_chain_new(&p, 5);
    EXPECT(s != NULL, "chain: %s", error_get());
    if (!s) return;
    for (int i = 0; i < 10; i++)
        EXPECT(sample_chain_sample(s, logits) == 1, "greedy must pick id 1 (tie to lowest id)");
    sample_chain_free(s);

    /* Repetition penalty steers greedy away from a repeated token. */
    p.penalty_repeat = 1.5f;
    p.penalty_last_n = 4;
    s = sample_chain_new(&p, 5);
    if (!s) return;
    sample_chain_accept(s, 1);
    sample_chain_accept(s, 2);
    int32_t t = sample_chain_sample(s, logits);
    EXPECT(t == 4, "penalized greedy picked %d, expected 4", (int)t);
    sample_chain_free(s);
}

static void draw(sample_chain *s, const float *logits, int32_t *out, int n) {
    for (int i = 0; i < n; i++) out[i] = sample_chain_sample(s, logits);
}

TEST(test_seeds) {
    float logits[32];
    for (int i = 0; i < 32; i++) logits[i] = (float)(i % 7) * 0.3f;
    enum { N = 200 };
    int32_t a[N], b[N], c[N], d[N];
    sample_params p = params_plain(1234);
    sample_chain *s1 = sample_chain_new(&p, 32), *s2 = sample_chain_new(&p, 32);
    p.seed = 1235;
    sample_chain *s3 = sample_chain_new(&p, 32);
    EXPECT(s1 && s2 && s3, "chain: %s", error_get());
    if (!s1 || !s2 || !s3) return;
    draw(s1, logits, a, N);
    draw(s2, logits, b, N);
    draw(s3, logits, c, N);
    EXPECT(!memcmp(a, b, sizeof a), "same seed gave different sequences");
    int same = 0;
    for (int i = 0; i < N; i++) same += a[i] == c[i];
    EXPECT(same < N / 2, "seeds 1234 and 1235 agree on %d of %d draws", same, N);
    sample_chain_reset(s1);
    draw(s1, logits, d, N);
    EXPECT(!memcmp(a, d, sizeof a), "reset must restart the same sequence");
    sample_chain_free(s1);
    sample_chain_free(s2);
    sample_chain_free(s3);
}

/* The draw follows the distribution: 40000 draws from 0.5/0.25/0.125/0.125. */
TEST(test_distribution) {
    const double probs[4] = {0.5, 0.25, 0.125, 0.125};
    float logits[4];
    logits_from_probs(logits, probs, 4);
    sample_params p = params_plain(99);
    sample_chain *s = sample_chain_new(&p, 4);
    if (!s) return;
    int counts[4] = {0};
    enum { N = 40000 };
    for (int i = 0; i < N; i++) {
        int32_t t = sample_chain_sample(s, logits);
        EXPECT(t >= 0 && t < 4, "drew id %d", (int)t);
        if (t >= 0 && t < 4) counts[t]++;
    }
    for (int i = 0; i < 4; i++)
        EXPECT(fabs((double)counts[i] / N - probs[i]) < 0.01, "id %d drawn %.4f, expected %.3f", i,
               (double)counts[i] / N, probs[i]);
    sample_chain_free(s);

    /* Temperature 0.5 squares the odds: 0.5^2 : 0.25^2 : ... normalized. */
    p.temp = 0.5f;
    s = sample_chain_new(&p, 4);
    if (!s) return;
    memset(counts, 0, sizeof counts);
    for (int i = 0; i < N; i++) {
        int32_t t = sample_chain_sample(s, logits);
        if (t >= 0 && t < 4) counts[t]++;
    }
    double z = 0.25 + 0.0625 + 2 * 0.015625;
    EXPECT(fabs((double)counts[0] / N - 0.25 / z) < 0.01, "temp 0.5: id 0 drawn %.4f, expected %.4f",
           (double)counts[0] / N, 0.25 / z);
    sample_chain_free(s);
}

/* Truncation happens before temperature: top-k 2 with a huge temperature
 * still only ever yields the two best tokens. */
TEST(test_chain_order) {
    const float logits[6] = {0, 5, 1, 4, 2, 3};
    sample_params p = params_plain(5);
    p.top_k = 2;
    p.temp = 100.0f;
    sample_chain *s = sample_chain_new(&p, 6);
    if (!s) return;
    int seen[6] = {0};
    for (int i = 0; i < 2000; i++) {
        int32_t t = sample_chain_sample(s, logits);
        if (t >= 0 && t < 6) seen[t]++;
    }
    EXPECT(seen[1] > 0 && seen[3] > 0, "both top-2 tokens must appear (%d, %d)", seen[1], seen[3]);
    EXPECT(seen[0] + seen[2] + seen[4] + seen[5] == 0, "a token outside the top-2 was drawn");
    sample_chain_free(s);

    /* min-p runs on what top-p left: p 0.5 then min-p 0.9 leaves the best. */
    const double probs[4] = {0.3, 0.28, 0.22, 0.2};
    float lg[4];
    logits_from_probs(lg, probs, 4);
    p = params_plain(6);
    p.top_p = 0.5f;
    p.min_p = 0.9f;
    s = sample_chain_new(&p, 4);
    if (!s) return;
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 2000; i++) {
        int32_t t = sample_chain_sample(s, lg);
        if (t >= 0 && t < 4) seen[t]++;
    }
    EXPECT(seen[0] > 0 && seen[1] > 0 && seen[2] + seen[3] == 0,
           "top-p 0.5 + min-p 0.9 drew %d %d %d %d", seen[0], seen[1], seen[2], seen[3]);
    sample_chain_free(s);
}

TEST(test_bad_params) {
    sample_params p = sample_params_default();
    p.top_p = NAN;
    EXPECT(!sample_chain_new(&p, 10) && strstr(error_get(), "top-p"), "NaN top-p: '%s'",
           error_get());
    p = sample_params_default();
    p.penalty_last_n = -1;
    EXPECT(!sample_chain_new(&p, 10) && strstr(error_get(), "penalty window"), "last_n -1: '%s'",
           error_get());
    p = sample_params_default();
    sample_bias bad = {10, 1.0f};
    p.bias = &bad;
    p.n_bias = 1;
    EXPECT(!sample_chain_new(&p, 10) && strstr(error_get(), "token 10"), "bias id 10: '%s'",
           error_get());
    p = sample_params_default();
    EXPECT(!sample_chain_new(&p, 0) && strstr(error_get(), "vocabulary"), "n_vocab 0: '%s'",
           error_get());
}

/* ------------------------------------------------------------ public API */

TEST(test_public_api) {
    tessera_sampler_params p = tessera_sampler_default_params();
    EXPECT(p.seed == TESSERA_SEED_RANDOM && p.top_k == 40 && p.temp == 0.8f && p.top_p == 0.95f &&
              p.min_p == 0.05f && p.penalty_last_n == 64 && p.penalty_repeat == 1.0f,
           "defaults differ from llama.cpp's");
    tessera_sampler *r = tessera_sampler_new(16, &p);
    EXPECT(r && tessera_sampler_seed(r) != TESSERA_SEED_RANDOM, "random seed: %s",
           tessera_last_error());
    tessera_sampler_free(r);

    float logits[16];
    for (int i = 0; i < 16; i++) logits[i] = (float)i * 0.1f;
    tessera_logit_bias ban = {15, -INFINITY};
    p.seed = 77;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    p.logit_bias = &ban;
    p.n_logit_bias = 1;
    tessera_sampler *a = tessera_sampler_new(16, &p), *b = tessera_sampler_new(16, &p);
    EXPECT(a && b, "sampler: %s", tessera_last_error());
    if (a && b) {
        EXPECT(tessera_sampler_seed(a) == 77, "seed reported %u", tessera_sampler_seed(a));
        for (int i = 0; i < 100; i++) {
            tessera_token ta = tessera_sampler_sample(a, logits);
            tessera_token tb = tessera_sampler_sample(b, logits);
            EXPECT(ta == tb, "draw %d: %d vs %d with the same seed", i, (int)ta, (int)tb);
            EXPECT(ta != 15 && ta >= 0, "banned or bad token %d drawn", (int)ta);
            tessera_sampler_accept(a, ta);
            tessera_sampler_accept(b, tb);
        }
    }
    tessera_sampler_free(a);
    tessera_sampler_free(b);

    ban.token = 16;
    EXPECT(!tessera_sampler_new(16, &p) && strstr(tessera_last_error(), "token 16"),
           "bias on token 16 of 16: '%s'", tessera_last_error());
}

/* tessera_sampler_last_probs: the distribution of the last draw after the
 * filters, renormalized (llama-server's post_sampling_probs). */
TEST(test_last_probs) {
    float logits[5];
    logits_from_probs(logits, PROBS5, 5);
    tessera_sampler_params p = tessera_sampler_default_params();
    p.seed = 5;
    p.top_k = 3;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temp = 1.0f;
    tessera_sampler *s = tessera_sampler_new(5, &p);
    EXPECT(s, "sampler: %s", tessera_last_error());
    if (!s) return;
    tessera_token_prob out[5];
    EXPECT(tessera_sampler_last_probs(s, out, 5) == 0, "probabilities before any draw");
    /* top-k 3 keeps ids 1, 3, 4 (0.4, 0.25, 0.2), renormalized over 0.85 */
    static const int want_id[3] = {1, 3, 4};
    static const double want_p[3] = {0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85};
    for (int draw = 0; draw < 20; draw++) {
        tessera_token t = tessera_sampler_sample(s, logits);
        int32_t n = tessera_sampler_last_probs(s, out, 5);
        EXPECT(n == 3, "draw %d: %d candidates after top-k 3", draw, (int)n);
        bool drawn_listed = false;
        for (int32_t i = 0; i < n && i < 3; i++) {
            EXPECT(out[i].token == want_id[i] && fabs(out[i].prob - want_p[i]) < 1e-5, "draw %d: #%d is %d p %g", draw,
                   (int)i, (int)out[i].token, (double)out[i].prob);
            drawn_listed |= out[i].token == t;
        }
        EXPECT(drawn_listed, "draw %d: token %d drawn but not listed", draw, (int)t);
    }
    /* a smaller buffer gets the most likely ones; the count is all of them */
    EXPECT(tessera_sampler_last_probs(s, out, 1) == 3 && out[0].token == 1, "cap 1");
    tessera_sampler_reset(s);
    EXPECT(tessera_sampler_last_probs(s, out, 5) == 0, "probabilities kept after a reset");
    tessera_sampler_free(s);

    /* temperature 0.5 squares the probabilities before renormalizing */
    p.top_k = 0;
    p.temp = 0.5f;
    s = tessera_sampler_new(5, &p);
    if (s) {
        tessera_sampler_sample(s, logits);
        double z = 0.0;
        for (int i = 0; i < 5; i++) z += PROBS5[i] * PROBS5[i];
        EXPECT(tessera_sampler_last_probs(s, out, 5) == 5, "temperature alone drops nothing");
        EXPECT(out[0].token == 1 && fabs(out[0].prob - 0.16 / z) < 1e-5 && out[4].token == 2 &&
                   fabs(out[4].prob - 0.0025 / z) < 1e-5,
               "temp 0.5: %d %g .. %d %g", (int)out[0].token, (double)out[0].prob, (int)out[4].token,
               (double)out[4].prob);
    }
    tessera_sampler_free(s);

    /* greedy: the pick alone, probability 1 */
    p.temp = 0.0f;
    s = tessera_sampler_new(5, &p);
    if (s) {
        tessera_token t = tessera_sampler_sample(s, logits);
        EXPECT(t == 1 && tessera_sampler_last_probs(s, out, 5) == 1 && out[0].token == 1 && out[0].prob == 1.0f,
               "greedy: %d", (int)t);
    }
    tessera_sampler_free(s);
    EXPECT(tessera_sampler_last_probs(NULL, out, 5) == -1, "NULL sampler");
}

HARNESS_MAIN("sampler", HARNESS_TEST(test_rng), HARNESS_TEST(test_sort_softmax), HARNESS_TEST(test_top_k),
             HARNESS_TEST(test_top_p), HARNESS_TEST(test_top_p_large), HARNESS_TEST(test_min_p),
             HARNESS_TEST(test_typical), HARNESS_TEST(test_temperature), HARNESS_TEST(test_penalties),
             HARNESS_TEST(test_logit_bias), HARNESS_TEST(test_greedy), HARNESS_TEST(test_seeds),
             HARNESS_TEST(test_distribution), HARNESS_TEST(test_chain_order), HARNESS_TEST(test_bad_params),
             HARNESS_TEST(test_public_api), HARNESS_TEST(test_last_probs))
