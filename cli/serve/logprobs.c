/* logprobs — log-softmax of one row of logits at the sampled token and the
 * k most likely tokens: one pass for the maximum, one for the sum of
 * exponentials (in double), one keeping the top k by insertion (k <= 20). */
#include <math.h>

#include "serve.h"

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
}
