/* logprobs — log-softmax of one row of logits at the sampled token and the
 * k most likely tokens: one pass for the maximum, one for the sum of
 * exponentials (in double), one keeping the top k by insertion (k <= 20).
 * Or the sampler's own post-filter distribution (post_sampling_probs). */
#include <math.h>
#include <stdlib.h>

#include "engine.h"

void serve_logprobs_compute(const float *logits, int32_t n_vocab, tessera_token chosen, int32_t k,
                            serve_logprob *out) {
    if (k > SERVE_MAX_TOP_LOGPROBS) k = SERVE_MAX_TOP_LOGPROBS;
    if (k > n_vocab) k = n_vocab;
    if (k < 0) k = 0;
    float max = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    double lse = (double)max + log(sum);
    /* top[0..n) descending by logit; a later token with an equal logit sorts
     * after (lower id first). */
    int32_t n = 0;
    for (int32_t i = 0; i < n_vocab && k > 0; i++) {
        float l = logits[i];
        if (n == k && !(l > logits[out->top_id[n - 1]])) continue;
        int32_t at = n < k ? n++ : n - 1;
        while (at > 0 && l > logits[out->top_id[at - 1]]) {
            out->top_id[at] = out->top_id[at - 1];
            at--;
        }
        out->top_id[at] = i;
    }
    for (int32_t j = 0; j < n; j++) out->top_lp[j] = (float)((double)logits[out->top_id[j]] - lse);
    out->n_top = n;
    out->token = chosen;
    out->logprob = chosen >= 0 && chosen < n_vocab ? (float)((double)logits[chosen] - lse) : -INFINITY;
    out->post_sampling = false;
}

void serve_logprobs_post_sampling(const tessera_sampler *sampler, tessera_token chosen, int32_t k,
                                  serve_logprob *out) {
    if (k > SERVE_MAX_TOP_LOGPROBS) k = SERVE_MAX_TOP_LOGPROBS;
    tessera_token_prob top[SERVE_MAX_TOP_LOGPROBS];
    int32_t n = tessera_sampler_last_probs(sampler, top, k > 0 ? k : 0);
    out->token = chosen;
    out->post_sampling = true;
    out->logprob = 0.0f;
    out->n_top = 0;
    for (int32_t i = 0; i < n && i < k; i++) {
        if (!(top[i].prob > 0.0f)) break; /* sorted: the rest are 0 too */
        out->top_id[out->n_top] = top[i].token;
        out->top_lp[out->n_top++] = top[i].prob;
    }
    /* The chosen token is usually among the top ones; else look it up. */
    for (int32_t i = 0; i < out->n_top; i++)
        if (out->top_id[i] == chosen) {
            out->logprob = out->top_lp[i];
            return;
        }
    if (n <= k) return;
    tessera_token_prob *all = malloc((size_t)n * sizeof *all);
    if (!all) return;
    n = tessera_sampler_last_probs(sampler, all, n);
    for (int32_t i = 0; i < n; i++)
        if (all[i].token == chosen) out->logprob = all[i].prob;
    free(all);
}
