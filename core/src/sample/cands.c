/* cands — the candidate list the sampler steps work on: init, sort, softmax. */
#include <math.h>
#include <stdlib.h>

#include "sample/sample.h"

void sample_cands_init(sample_cands *c, sample_cand *storage, const float *logits,
                       int32_t n_vocab) {
    for (int32_t i = 0; i < n_vocab; i++) {
        storage[i].id = i;
        storage[i].logit = logits[i];
        storage[i].p = 0.0f;
        storage[i].score = 0.0f;
    }
    c->data = storage;
    c->size = n_vocab > 0 ? (size_t)n_vocab : 0;
    c->sorted = false;
}

void sample_cands_init_masked(sample_cands *c, sample_cand *storage, const float *logits, int32_t n_vocab,
                              const uint8_t *allowed) {
    size_t n = 0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (allowed[i]) storage[n++] = (sample_cand){.id = i, .logit = logits[i]};
    c->data = storage;
    c->size = n;
    c->sorted = false;
}

/* Descending logit, then ascending id: a total order, so qsort's lack of
 * stability never changes the outcome. NaN logits sort last. */
int sample_cand_cmp(const void *pa, const void *pb) {
    const sample_cand *a = pa, *b = pb;
    if (a->logit > b->logit) return -1;
    if (a->logit < b->logit) return 1;
    bool an = isnan(a->logit), bn = isnan(b->logit);
    if (an != bn) return an ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

bool sample_cand_before(const sample_cand *a, const sample_cand *b) {
    return sample_cand_cmp(a, b) < 0;
}

void sample_sort(sample_cands *c) {
    if (c->sorted) return;
    sample_sort_top(c->data, c->size, c->size);
    c->sorted = true;
}

void sample_softmax(sample_cands *c) {
    sample_sort(c);
    sample_softmax_unsorted(c);
}

void sample_softmax_unsorted(sample_cands *c) {
    if (c->size == 0) return;
    float max = c->data[0].logit;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > max) max = c->data[i].logit;
    if (!isfinite(max)) { /* every logit -inf (or NaN): the first one takes it all */
        for (size_t i = 0; i < c->size; i++) c->data[i].p = i == 0 ? 1.0f : 0.0f;
        return;
    }
    double sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float e = expf(c->data[i].logit - max);
        c->data[i].p = e;
        sum += e;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p = (float)(c->data[i].p / sum);
}
