/* filters — the truncating steps (top-k, typical, top-p, min-p), temperature,
 * and the final pick (argmax or a draw). Semantics follow llama.cpp's
 * samplers, each keeping at least one candidate. */
#include <math.h>
#include <stdlib.h>

#include "sample/sample.h"

/* ------------------------------------------------------------------ top-k */

/* Moves the k best candidates to the front, sorted, in O(n log k), as
 * llama.cpp's top-k does (the same ties first); the others stay behind them
 * in some order (swapped, never lost). A full sort of a 150k vocabulary for
 * k = 40 would cost far more. */
static void select_best(sample_cands *c, size_t k) { sample_sort_top(c->data, c->size, k); }

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
    sample_sort_score(c->data, c->size);
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

/* ------------------------------------------------------------ top-n-sigma */

void sample_top_n_sigma(sample_cands *c, float n) {
    if (n <= 0.0f || c->size == 0) return;
    float max = -INFINITY;
    double sum = 0.0;
    size_t valid = 0;
    for (size_t i = 0; i < c->size; i++) {
        float l = c->data[i].logit;
        if (l > max) max = l;
        if (l != -INFINITY) {
            sum += l;
            valid++;
        }
    }
    if (valid == 0) return;
    float mean = (float)(sum / (double)valid);
    double acc = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float l = c->data[i].logit;
        if (l != -INFINITY) acc += ((double)l - mean) * ((double)l - mean);
    }
    float sigma = (float)sqrt(acc / (double)valid);
    float threshold = max - n * sigma;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit < threshold) c->data[i].logit = -INFINITY;
}

/* ------------------------------------------------------ dynamic temperature */

void sample_temp_ext(sample_cands *c, float temp, float range, float exponent) {
    if (!(range > 0.0f)) {
        if (temp <= 0.0f) { /* the first best keeps its logit, the others -inf */
            size_t best = 0;
            for (size_t i = 1; i < c->size; i++)
                if (c->data[i].logit > c->data[best].logit) best = i;
            for (size_t i = 0; i < c->size; i++)
                if (i != best) c->data[i].logit = -INFINITY;
            return;
        }
        sample_temperature(c, temp);
        return;
    }
    if (c->size <= 1) return;
    float min_temp = temp - range > 0.0f ? temp - range : 0.0f;
    float max_temp = temp + range;
    sample_softmax(c);
    float max_entropy = -logf(1.0f / (float)c->size);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float p = c->data[i].p;
        if (p > 0.0f) entropy -= p * logf(p);
    }
    float norm = entropy / max_entropy;
    float dyn = min_temp + (max_temp - min_temp) * powf(norm, exponent);
    for (size_t i = 0; i < c->size; i++) c->data[i].logit /= dyn;
    /* The probabilities again, at the new temperature. */
    double max_l = c->data[0].logit, sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        double e = exp(c->data[i].logit - max_l);
        c->data[i].p = (float)e;
        sum += e;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p = (float)(c->data[i].p / sum);
}

/* -------------------------------------------------------------------- XTC */

void sample_xtc(sample_cands *c, float probability, float threshold, size_t min_keep, sample_rng *rng) {
    if (probability <= 0.0f || threshold > 0.5f || c->size < 2) return;
    if (sample_rng_uniform_f(rng) > probability) return;
    sample_softmax(c);
    size_t last = 0;
    for (size_t i = 0; i < c->size && c->data[i].p >= threshold; i++) last = i;
    if (last > 0 && c->size - last >= min_keep) {
        c->data += last;
        c->size -= last;
    }
}

/* --------------------------------------------------------------- mirostat */

/* Both versions' last part: draw (one candidate left: llama.cpp's mirostat
 * takes it without a draw), then move mu by the surprise of the pick. */
static int32_t mirostat_pick(sample_cands *c, float tau, float eta, float *mu, sample_rng *rng) {
    int32_t id = c->size == 1 ? c->data[0].id : sample_dist(c, rng);
    float p = 1.0f;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].id == id) p = c->data[i].p;
    *mu -= eta * (-log2f(p) - tau);
    return id;
}

int32_t sample_mirostat(sample_cands *c, float tau, float eta, int32_t m, int32_t n_vocab, float *mu,
                        sample_rng *rng) {
    if (c->size == 0) return -1;
    sample_softmax(c);
    /* s_hat, the Zipf exponent, from the m most likely tokens. */
    float sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i + 1 < (size_t)(m > 0 ? m : 1) && i + 1 < c->size; i++) {
        float t_i = logf((float)(i + 2) / (float)(i + 1));
        float b_i = logf(c->data[i].p / c->data[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    float s_hat = sum_ti_bi / sum_ti_sq;
    float eps = s_hat - 1.0f;
    float k = powf((eps * powf(2.0f, *mu)) / (1.0f - powf((float)n_vocab, -eps)), 1.0f / s_hat);
    int32_t ki = (int32_t)k;
    sample_top_k(c, ki > 1 ? ki : 1);
    sample_softmax(c);
    return mirostat_pick(c, tau, eta, mu, rng);
}

int32_t sample_mirostat_v2(sample_cands *c, float tau, float eta, float *mu, sample_rng *rng) {
    if (c->size == 0) return -1;
    sample_softmax(c);
    /* Drop the tokens more surprising than mu (keep at least one). */
    size_t keep = 0;
    while (keep < c->size && !(-log2f(c->data[keep].p) > *mu)) keep++;
    c->size = keep > 0 ? keep : 1;
    sample_softmax(c);
    return mirostat_pick(c, tau, eta, mu, rng);
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
    sample_softmax_unsorted(c);
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
