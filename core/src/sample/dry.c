/* dry — the DRY sampler ("don't repeat yourself", p-e-w's design as
 * llama.cpp runs it) and its sequence breakers (see sample.h).
 *
 * The repeats come from a Z-array over the window read backwards: with
 * R[i] the i-th newest token, Z[i] is how many tokens from R[i] on equal the
 * newest ones, so the sequence ending at R[i] repeats the end of the text
 * for Z[i] tokens and the token after it, R[i - 1], would extend the repeat
 * to Z[i] + 1. The straightforward version compares every i afresh
 * (quadratic on repetitive text); the Z-algorithm reuses earlier matches. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sample.h"
#include "util/error.h"

enum { DRY_MAX_CHARS = 40, DRY_MAX_TAIL = 20, DRY_PIECE_MAX = 1024 };

static int seq_cmp(const void *pa, const void *pb) {
    const sample_dry_seq *a = pa, *b = pb;
    if (a->head != b->head) return (a->head > b->head) - (a->head < b->head);
    if (a->n_tail != b->n_tail) return (a->n_tail > b->n_tail) - (a->n_tail < b->n_tail);
    return memcmp(a->tail, b->tail, (size_t)a->n_tail * sizeof *a->tail);
}

static int seq_push(sample_dry_breakers *b, size_t *cap, const sample_dry_seq *s) {
    /* A token's sequences are pushed together: a duplicate is among them. */
    for (size_t i = b->n; i-- > 0 && b->seq[i].head == s->head;)
        if (seq_cmp(&b->seq[i], s) == 0) return 0;
    if (b->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        sample_dry_seq *ns = realloc(b->seq, nc * sizeof *ns);
        if (!ns) return error_set("sampler: out of memory for DRY's sequence breakers");
        b->seq = ns;
        *cap = nc;
    }
    b->seq[b->n++] = *s;
    return 0;
}

/* The sequences one breaker string str[0..len) makes with token id, whose
 * text is word[0..wl). */
static int breaker_add(sample_dry_breakers *b, size_t *cap, const sample_vocab_fns *v, int32_t id, const char *word,
                       int32_t wl, const char *str, size_t len) {
    sample_dry_seq s = {.head = id, .n_tail = 0};
    /* The token holds the whole breaker: a breaker on its own. */
    for (int32_t pos = 0; pos + (int32_t)len <= wl; pos++)
        if (!memcmp(word + pos, str, len)) return seq_push(b, cap, &s);
    /* The token ends with the breaker's start: the rest, tokenized, must follow. */
    for (int32_t pos = 0; pos < wl; pos++) {
        size_t i = 0;
        while (i < len && pos + (int32_t)i < wl && word[pos + i] == str[i]) i++;
        if (i == 0 || pos + (int32_t)i < wl) continue;
        int32_t tail[DRY_MAX_CHARS + 8];
        int32_t nt = v->tokenize(v->user, str + i, len - i, tail, (int32_t)(sizeof tail / sizeof *tail));
        if (nt < 0) return error_set("sampler: DRY sequence breaker '%.*s' does not tokenize", (int)len, str);
        s.n_tail = nt < DRY_MAX_TAIL ? nt : DRY_MAX_TAIL;
        memcpy(s.tail, tail, (size_t)s.n_tail * sizeof *tail);
        if (seq_push(b, cap, &s) < 0) return -1;
    }
    return 0;
}

int sample_dry_breakers_build(sample_dry_breakers *b, const sample_vocab_fns *v, const char *const *strs,
                              size_t n) {
    memset(b, 0, sizeof *b);
    size_t lens[64], n_used = 0;
    const char *used[64];
    for (size_t k = 0; k < n && n_used < 64; k++) {
        if (!strs[k] || !*strs[k]) continue;
        size_t len = strlen(strs[k]);
        lens[n_used] = len > DRY_MAX_CHARS ? DRY_MAX_CHARS : len;
        used[n_used++] = strs[k];
    }
    if (n > 64) return error_set("sampler: %zu DRY sequence breakers, at most 64", n);
    if (n_used == 0) return 0;
    char *word = malloc(DRY_PIECE_MAX);
    if (!word) return error_set("sampler: out of memory");
    size_t cap = 0;
    /* Each token's text once, every breaker against it. */
    for (int32_t id = 0; id < v->n_vocab; id++) {
        int32_t wl = v->piece(v->user, id, word, DRY_PIECE_MAX);
        if (wl <= 0) continue;
        if (wl > DRY_PIECE_MAX) wl = DRY_PIECE_MAX;
        for (size_t k = 0; k < n_used; k++)
            if (breaker_add(b, &cap, v, id, word, wl, used[k], lens[k]) < 0) {
                free(word);
                sample_dry_breakers_free(b);
                return -1;
            }
    }
    free(word);
    if (b->n > 1) qsort(b->seq, b->n, sizeof *b->seq, seq_cmp);
    return 0;
}

void sample_dry_breakers_free(sample_dry_breakers *b) {
    free(b->seq);
    memset(b, 0, sizeof *b);
}

/* The first sequence with this head, or b->n. */
static size_t seq_first(const sample_dry_breakers *b, int32_t head) {
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->seq[mid].head < head) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static bool single_token_breaker(const sample_dry_breakers *b, int32_t id) {
    for (size_t k = seq_first(b, id); k < b->n && b->seq[k].head == id; k++)
        if (b->seq[k].n_tail == 0) return true;
    return false;
}

static int pair_cmp(const void *pa, const void *pb) {
    const int32_t *a = pa, *b = pb;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

void sample_dry(sample_cands *c, const sample_history *h, const sample_dry_breakers *b, float multiplier,
                float base, int32_t allowed_length, int32_t last_n) {
    if (multiplier == 0.0f || base < 1.0f || last_n == 0 || h->count == 0) return;
    size_t n = last_n < 0 || (size_t)last_n > h->count ? h->count : (size_t)last_n;
    if (allowed_length < 0) allowed_length = 0;
    if (n <= (size_t)allowed_length) return;
    /* How far back a repeat may reach: up to the newest breaker. */
    size_t limit = n;
    for (size_t i = 0; i < n && b && b->n; i++) {
        int32_t tok = sample_history_back(h, i);
        long longest = -1;
        for (size_t k = seq_first(b, tok); k < b->n && b->seq[k].head == tok; k++) {
            const sample_dry_seq *s = &b->seq[k];
            if (s->n_tail <= longest || (size_t)s->n_tail > i) continue;
            bool match = true;
            for (int32_t o = 0; o < s->n_tail && match; o++) match = s->tail[o] == sample_history_back(h, i - o - 1);
            if (match) longest = s->n_tail;
        }
        if (longest >= 0) {
            limit = i - (size_t)longest;
            break;
        }
    }
    if (limit < (size_t)allowed_length) return;
    /* R = the window newest first, Z its Z-array (scratch: R, Z, pairs). */
    int32_t *R = h->scratch, *Z = h->scratch + h->cap, *pairs = h->scratch + 2 * h->cap;
    for (size_t i = 0; i < n; i++) R[i] = sample_history_back(h, i);
    size_t l = 0, r = 0, n_pairs = 0;
    Z[0] = (int32_t)n;
    for (size_t i = 1; i < n; i++) {
        size_t z = 0;
        if (i < r) z = r - i < (size_t)Z[i - l] ? r - i : (size_t)Z[i - l];
        while (i + z < n && R[z] == R[i + z]) z++;
        Z[i] = (int32_t)z;
        if (i + z > r) {
            l = i;
            r = i + z;
        }
        size_t len = z < limit ? z : limit;
        if (len >= (size_t)allowed_length && len > 0) {
            pairs[2 * n_pairs] = R[i - 1];
            pairs[2 * n_pairs + 1] = (int32_t)len;
            n_pairs++;
        }
    }
    if (n_pairs == 0) return;
    /* Per token, the longest repeat it would extend. */
    qsort(pairs, n_pairs, 2 * sizeof *pairs, pair_cmp);
    size_t m = 0;
    for (size_t k = 0; k < n_pairs; k++) {
        if (m > 0 && pairs[2 * (m - 1)] == pairs[2 * k]) {
            if (pairs[2 * k + 1] > pairs[2 * (m - 1) + 1]) pairs[2 * (m - 1) + 1] = pairs[2 * k + 1];
            continue;
        }
        pairs[2 * m] = pairs[2 * k];
        pairs[2 * m + 1] = pairs[2 * k + 1];
        m++;
    }
    /* pow(base, e) stays finite: e at most log(FLT_MAX) / log(base). */
    int32_t max_exp = base > 1.000001f ? (int32_t)(88.7228391f / logf(base)) : 0;
    for (size_t i = 0; i < c->size; i++) {
        int32_t id = c->data[i].id;
        size_t lo = 0, hi = m;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (pairs[2 * mid] < id) lo = mid + 1;
            else hi = mid;
        }
        if (lo == m || pairs[2 * lo] != id) continue;
        if (b && single_token_breaker(b, id)) continue;
        int32_t e = pairs[2 * lo + 1] - allowed_length;
        if (max_exp > 0 && e > max_exp) e = max_exp;
        c->data[i].logit -= multiplier * powf(base, (float)e);
    }
    c->sorted = false;
}
