/* filters — the truncating steps (top-k, typical, top-p, min-p), temperature,
 * and the final pick (argmax or a draw). Semantics follow llama.cpp's
 * samplers, each keeping at least one candidate. */
#include <math.h>
#include <stdlib.h>

#include "sample/sample.h"

/* ------------------------------------------------------------------ top-k */

/* Min-heap on the sort order: the root is the candidate that sorts last. */
static void heap_sift_down(sample_cand *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && sample_cand_before(&h[m], &h[l])) m = l;
        if (r < n && sample_cand_before(&h[m], &h[r])) m = r;
        if (m == i) return;
        sample_cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Moves the k best candidates to the front, sorted, in O(n log k); the
 * others stay behind them in some order (swapped, never lost). A full sort
 * of a 150k vocabulary for k = 40 would cost far more. */
static void select_best(sample_cands *c, size_t k) {
    sample_cand *h = c->data;
    for (size_t i = k / 2; i-- > 0;) heap_sift_down(h, k, i);
    for (size_t i = k; i < c->size; i++) {
        if (sample_cand_before(&h[i], &h[0])) {
            sample_cand t = h[0];
            h[0] = h[i];
            h[i] = t;
            heap_sift_down(h, k, 0);
        }
    }
    qsort(h, k, sizeof *h, sample_cand_cmp);
}

void sample_top_k(sample_cands *c, int32_t k) {
    if (k <= 0 || (size_t)k >= c->size) {
        if (k > 0) sample_sort(c);
        return;
    }
    if (!c->sorted) select_best(c, (size_t)k);
    c->size = (size_t)k;
    c->sorted = true;
}

/* ------------------------------------------------------------------ top-p */

/* How many of the first n (sorted) candidates reach mass p, with
 * probabilities taken against the whole set (max, sum); 0 if they do not. */
static size_t top_p_prefix(const sample_cands *c, size_t n, float max, double sum, float p) {
    double cum = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum += (float)(expf(c->data[i].logit - max) / sum);
        if (cum >= p) return i + 1;
    }
    return 0;
}

void sample_top_p(sample_cands *c, float p) {
    if (p >= 1.0f || c->size == 0) return;
    /* A large unsorted set: sort only a growing best prefix until it holds
     * mass p, instead of the whole vocabulary. */
    if (!c->sorted && c->size > 1024) {
        float max = c->data[0].logit;
        for (size_t i = 1; i < c->size; i++)
            if (c->data[i].logit > max) max = c->data[i].logit;
        if (isfinite(max)) {
            double sum = 0.0;
            for (size_t i = 0; i < c->size; i++) sum += expf(c->data[i].logit - max);
            for (size_t k = 256; k < c->size / 2; k *= 4) {
                select_best(c, k);
                size_t keep = top_p_prefix(c, k, max, sum, p);
                if (keep > 0) {
                    c->size = keep;
                    c->sorted = true;
                    return;
                }
            }
        }
    }
    sample_softmax(c);
    double cum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[i].p;
        if (cum >= p) {
            c->size = i + 1;
            return;
        }
    }
}

/* ------------------------------------------------------------------ min-p */

void sample_min_p(sample_cands *c, float p) {
    if (p <= 0.0f || c->size == 0) return;
    float max = c->data[0].logit;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > max) max = c->data[i].logit;
    float threshold = max + logf(p);
    size_t kept = 0;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit >= threshold) c->data[kept++] = c->data[i];
    /* Filtering in place keeps the relative order, so sortedness survives. */
    c->size = kept > 0 ? kept : 1;
}

/* ---------------------------------------------------------------- typical */

/* Typicality order: score ascending; ties keep the probability order. */
static int typical_cmp(const void *pa, const void *pb) {
    const sample_cand *a = pa, *b = pb;
    if (a->score < b->score) return -1;
    if (a->score > b->score) return 1;
    return sample_cand_before(a, b) ? -1 : sample_cand_before(b, a) ? 1 : 0;
}

void sample_typical(sample_cands *c, float p) {
    if (p >= 1.0f || c->size <= 1) return;
    sample_softmax(c);
    double entropy = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float pi = c->data[i].p;
        if (pi > 0.0f) entropy -= pi * log(pi);
    }
    for (size_t i = 0; i < c->size; i++) {
        float pi = c->data[i].p;
        double surprise = pi > 0.0f ? -log(pi) : INFINITY;
        c->data[i].score = (float)fabs(surprise - entropy);
    }
    qsort(c->data, c->size, sizeof *c->data, typical_cmp);
    c->sorted = false; /* now in typicality order */
    double cum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[i].p;
        if (cum > p) {
            c->size = i + 1;
            return;
        }
    }
}

/* ------------------------------------------------------------ temperature */

void sample_temperature(sample_cands *c, float temp) {
    if (temp == 1.0f) return;
    if (temp <= 0.0f) { /* keep only the best, as llama.cpp does */
        int32_t best = sample_argmax(c);
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].id == best) {
                c->data[0] = c->data[i];
                break;
            }
        c->size = c->size > 0 ? 1 : 0;
        c->sorted = true;
        return;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].logit /= temp;
}

/* ------------------------------------------------------------------- pick */

int32_t sample_argmax(const sample_cands *c) {
    if (c->size == 0) return -1;
    const sample_cand *best = &c->data[0];
    for (size_t i = 1; i < c->size; i++)
        if (sample_cand_before(&c->data[i], best)) best = &c->data[i];
    return best->id;
}

int32_t sample_dist(sample_cands *c, sample_rng *rng) {
    if (c->size == 0) return -1;
    sample_softmax(c);
    double r = sample_rng_uniform(rng), cum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[i].p;
        if (r < cum) return c->data[i].id;
    }
    /* Rounding left r above the total: the last candidate with mass wins. */
    for (size_t i = c->size; i-- > 0;)
        if (c->data[i].p > 0.0f) return c->data[i].id;
    return c->data[0].id;
}
