/* penalties — logit bias and the repetition / frequency / presence penalties
 * over the last N accepted tokens (llama.cpp semantics). */
#include <stdlib.h>
#include <string.h>

#include "sample/sample.h"
#include "util/error.h"

void sample_logit_bias(sample_cands *c, const sample_bias *bias, size_t n_bias) {
    if (n_bias == 0) return;
    for (size_t i = 0; i < c->size; i++) {
        for (size_t j = 0; j < n_bias; j++)
            if (bias[j].id == c->data[i].id) c->data[i].logit += bias[j].bias;
    }
    c->sorted = false;
}

int sample_history_init(sample_history *h, size_t cap) {
    memset(h, 0, sizeof *h);
    if (cap == 0) return 0;
    h->ring = malloc(cap * sizeof *h->ring);
    h->scratch = malloc(4 * cap * sizeof *h->scratch); /* penalties: cap; DRY: 4 cap */
    if (!h->ring || !h->scratch) {
        sample_history_free(h);
        return error_set("sampler: out of memory for a penalty window of %zu tokens", cap);
    }
    h->cap = cap;
    return 0;
}

void sample_history_free(sample_history *h) {
    free(h->ring);
    free(h->scratch);
    memset(h, 0, sizeof *h);
}

void sample_history_push(sample_history *h, int32_t id) {
    if (h->cap == 0) return;
    h->ring[h->head] = id;
    h->head = (h->head + 1) % h->cap;
    if (h->count < h->cap) h->count++;
}

void sample_history_clear(sample_history *h) {
    h->count = 0;
    h->head = 0;
}

int32_t sample_history_back(const sample_history *h, size_t i) {
    return h->ring[(h->head + h->cap - 1 - i) % h->cap];
}

static int id_cmp(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* How often id occurs in the sorted window (binary search for its run). */
static size_t count_in_sorted(const int32_t *ids, size_t n, int32_t id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    size_t count = 0;
    while (lo + count < n && ids[lo + count] == id) count++;
    return count;
}

static void penalize(sample_cand *cand, size_t n, float repeat, float freq, float present) {
    if (cand->logit > 0.0f) cand->logit /= repeat;
    else cand->logit *= repeat;
    cand->logit -= (float)n * freq + present;
}

void sample_penalties(sample_cands *c, sample_history *h, size_t last_n, float repeat, float freq,
                      float present) {
    if (h->count == 0 || last_n == 0 || (repeat == 1.0f && freq == 0.0f && present == 0.0f)) return;
    /* The window in any order will do: only the counts matter. */
    int32_t *ids = h->scratch;
    size_t n_ids = h->count < last_n ? h->count : last_n;
    for (size_t i = 0; i < n_ids; i++) ids[i] = sample_history_back(h, i);
    qsort(ids, n_ids, sizeof *ids, id_cmp);
    /* Usual case: the candidates are still the whole row in id order, so
     * each distinct id of the window is found by indexing. */
    bool by_index = true;
    for (size_t i = 0; i < n_ids && by_index; i++)
        by_index = ids[i] >= 0 && (size_t)ids[i] < c->size && c->data[ids[i]].id == ids[i];
    if (by_index) {
        for (size_t i = 0; i < n_ids;) {
            size_t run = 1;
            while (i + run < n_ids && ids[i + run] == ids[i]) run++;
            penalize(&c->data[ids[i]], run, repeat, freq, present);
            i += run;
        }
    } else {
        for (size_t i = 0; i < c->size; i++) {
            size_t n = count_in_sorted(ids, n_ids, c->data[i].id);
            if (n > 0) penalize(&c->data[i], n, repeat, freq, present);
        }
    }
    c->sorted = false;
}
