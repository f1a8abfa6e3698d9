/* sort — candidates sorted as llama.cpp sorts them, equal logits included.
 *
 * llama.cpp orders candidates by "logit greater" with std::partial_sort
 * when it wants at most 128 of them, and otherwise with a bucket sort (128
 * buckets over logits -10..10, each bucket std::sort'ed, the last one
 * partial_sort'ed); none of these is stable, so equal logits end in an
 * order of their own. To break ties as it does (and so draw the same token
 * from the same seed), these are libstdc++'s algorithms step for step: its
 * heap (__adjust_heap, partial_sort) and its introsort (std::sort). The
 * straightforward version is any sort by descending logit; only the order
 * among equal logits (or equal typical scores) differs. Checked against
 * llama.cpp's outputs in tests/sample/test_sampler_ref.c. */
#include <stdlib.h>
#include <string.h>

#include "sample/sample.h"

typedef bool (*cand_less)(const sample_cand *a, const sample_cand *b);

static bool greater_logit(const sample_cand *a, const sample_cand *b) { return a->logit > b->logit; }
static bool less_score(const sample_cand *a, const sample_cand *b) { return a->score < b->score; }

static void swap(sample_cand *a, sample_cand *b) {
    sample_cand t = *a;
    *a = *b;
    *b = t;
}

/* libstdc++'s __adjust_heap: sift the hole down to a leaf, then push value
 * up from there. */
static void adjust_heap(sample_cand *a, size_t hole, size_t len, sample_cand value, cand_less less) {
    const size_t top = hole;
    size_t child = hole;
    while (len > 2 && child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (less(&a[child], &a[child - 1])) child--;
        a[hole] = a[child];
        hole = child;
    }
    if ((len & 1) == 0 && len >= 2 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        a[hole] = a[child - 1];
        hole = child - 1;
    }
    while (hole > top) {
        size_t parent = (hole - 1) / 2;
        if (!less(&a[parent], &value)) break;
        a[hole] = a[parent];
        hole = parent;
    }
    a[hole] = value;
}

/* std::partial_sort(a, a + k, a + n): heap select, then heap sort. */
static void partial_sort(sample_cand *a, size_t n, size_t k, cand_less less) {
    if (k > n) k = n;
    if (k == 0) return;
    if (k >= 2)
        for (size_t parent = (k - 2) / 2 + 1; parent-- > 0;) adjust_heap(a, parent, k, a[parent], less);
    for (size_t i = k; i < n; i++)
        if (less(&a[i], &a[0])) {
            sample_cand v = a[i];
            a[i] = a[0];
            adjust_heap(a, 0, k, v, less);
        }
    for (size_t last = k; last > 1;) {
        last--;
        sample_cand v = a[last];
        a[last] = a[0];
        adjust_heap(a, 0, last, v, less);
    }
}

/* ---- std::sort: introsort, then insertion sort ---------------------------- */

enum { SORT_THRESHOLD = 16 };

static void move_median_to_first(sample_cand *r, sample_cand *a, sample_cand *b, sample_cand *c, cand_less less) {
    if (less(a, b)) {
        if (less(b, c)) swap(r, b);
        else if (less(a, c)) swap(r, c);
        else swap(r, a);
    } else if (less(a, c)) swap(r, a);
    else if (less(b, c)) swap(r, c);
    else swap(r, b);
}

static sample_cand *unguarded_partition(sample_cand *first, sample_cand *last, sample_cand *pivot, cand_less less) {
    for (;;) {
        while (less(first, pivot)) first++;
        last--;
        while (less(pivot, last)) last--;
        if (!(first < last)) return first;
        swap(first, last);
        first++;
    }
}

static void introsort_loop(sample_cand *first, sample_cand *last, int depth, cand_less less) {
    while (last - first > SORT_THRESHOLD) {
        if (depth == 0) {
            partial_sort(first, (size_t)(last - first), (size_t)(last - first), less);
            return;
        }
        depth--;
        sample_cand *mid = first + (last - first) / 2;
        move_median_to_first(first, first + 1, mid, last - 1, less);
        sample_cand *cut = unguarded_partition(first + 1, last, first, less);
        introsort_loop(cut, last, depth, less);
        last = cut;
    }
}

static void unguarded_linear_insert(sample_cand *last, cand_less less) {
    sample_cand val = *last;
    sample_cand *next = last - 1;
    while (less(&val, next)) {
        *last = *next;
        last = next;
        next--;
    }
    *last = val;
}

static void insertion_sort(sample_cand *first, sample_cand *last, cand_less less) {
    if (first == last) return;
    for (sample_cand *i = first + 1; i < last; i++) {
        if (less(i, first)) {
            sample_cand val = *i;
            memmove(first + 1, first, (size_t)(i - first) * sizeof *first);
            *first = val;
        } else {
            unguarded_linear_insert(i, less);
        }
    }
}

static void std_sort(sample_cand *a, size_t n, cand_less less) {
    if (n < 2) return;
    int lg = 0;
    while (((size_t)1 << (lg + 1)) <= n) lg++;
    introsort_loop(a, a + n, 2 * lg, less);
    if (n > SORT_THRESHOLD) {
        insertion_sort(a, a + SORT_THRESHOLD, less);
        for (sample_cand *i = a + SORT_THRESHOLD; i < a + n; i++) unguarded_linear_insert(i, less);
    } else {
        insertion_sort(a, a + n, less);
    }
}

/* ---- llama.cpp's bucket sort for more than 128 -------------------------- */

enum { N_BUCKETS = 128 };

/* The k best to the front in llama.cpp's order; false when out of memory. */
static bool bucket_sort(sample_cand *a, size_t n, size_t k) {
    const float scale = (float)N_BUCKETS / 20.0f, inter = 10.0f * scale; /* logits -10..10 */
    size_t histo[N_BUCKETS] = {0};
    uint8_t *idx = malloc(n);
    if (!idx) return false;
    for (size_t i = 0; i < n; i++) {
        int ib = (int)(scale * a[i].logit + inter);
        ib = ib < 0 ? 0 : ib > N_BUCKETS - 1 ? N_BUCKETS - 1 : ib;
        idx[i] = (uint8_t)ib;
        histo[ib]++;
    }
    size_t have = 0;
    int low = N_BUCKETS - 1;
    for (; low >= 0; low--) {
        have += histo[low];
        if (have >= k) break;
    }
    if (low < 0) low = 0;
    sample_cand *tmp = malloc(have * sizeof *tmp);
    if (!tmp) {
        free(idx);
        return false;
    }
    size_t start[N_BUCKETS], at = 0;
    for (int j = N_BUCKETS - 1; j >= low; j--) {
        start[j] = at;
        at += histo[j];
    }
    for (size_t i = 0; i < n; i++)
        if (idx[i] >= low) tmp[start[idx[i]]++] = a[i];
    sample_cand *p = tmp;
    size_t done = 0;
    for (int j = N_BUCKETS - 1; j > low; j--) {
        std_sort(p, histo[j], greater_logit);
        p += histo[j];
        done += histo[j];
    }
    partial_sort(p, histo[low], k - done, greater_logit);
    /* The k best in front, then the others: those of the lower buckets
     * (gathered to the front first: writing never passes reading), then
     * the rest of tmp. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (idx[i] < low) a[m++] = a[i];
    memmove(a + k, a, m * sizeof *a);
    memcpy(a + k + m, tmp + k, (have - k) * sizeof *a);
    memcpy(a, tmp, k * sizeof *a);
    free(tmp);
    free(idx);
    return true;
}

void sample_sort_top(sample_cand *a, size_t n, size_t k) {
    if (k > n) k = n;
    if (k > 128 && bucket_sort(a, n, k)) return;
    partial_sort(a, n, k, greater_logit);
}

void sample_sort_score(sample_cand *a, size_t n) { std_sort(a, n, less_score); }
