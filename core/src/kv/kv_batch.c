/*
 * kv_batch — placing a decode call's tokens in the cache's cells, a
 * micro-batch at a time, and taking them back when the call fails.
 *
 * Each micro-batch takes a contiguous run of free cells of every cell set
 * (the step graph writes K/V to cells head..head+n-1); the cells record
 * (position, sequence) and the attention mask (kv_cache_fill_mask) lets a
 * token see only the cells of its own sequence at positions <= its own.
 * When no run is long enough the micro-batch is cut to the longest free
 * run, so a call succeeds while any cell is free. A sliding-window set
 * first drops the positions no token can see any more.
 *
 * The decode code sees none of this: it gets a kv_ubatch (where the tokens
 * went, how many cells attention reads) and hands it back to fill masks.
 */
#include <math.h>

#include "kv/kv_internal.h"
#include "util/error.h"

/* The lowest run of up to want free cells: the first run of length want, or
 * else the longest run. Returns its length (0: no free cell). */
static int32_t cells_find_run(const kv_cells *c, int32_t want, int32_t *head) {
    int32_t best_len = 0, best_head = 0;
    for (int32_t j = 0; j < c->size;) {
        if (c->seq[j]) {
            j++;
            continue;
        }
        int32_t s = j;
        while (j < c->size && !c->seq[j] && j - s < want) j++;
        if (j - s == want) {
            *head = s;
            return want;
        }
        if (j - s > best_len) {
            best_len = j - s;
            best_head = s;
        }
    }
    *head = best_head;
    return best_len;
}

/* Cells head..head+n-1 take token i's position pos[i] of sequence seq[i]. */
static void cells_place(kv_cells *c, int32_t head, int32_t n, const int32_t *pos, const int32_t *seq) {
    for (int32_t i = 0; i < n; i++) {
        c->pos[head + i] = pos[i];
        c->seq[head + i] = (uint64_t)1 << seq[i];
    }
}

/* One past the highest position sequence bit holds in c. */
static int32_t cells_seq_end(const kv_cells *c, uint64_t bit) {
    int32_t end = 0;
    for (int32_t k = 0; k < c->size; k++)
        if ((c->seq[k] & bit) && c->pos[k] + 1 > end) end = c->pos[k] + 1;
    return end;
}

/* A sliding-window set drops the positions that neither the n tokens about
 * to be decoded (pos, seq) nor any later token of their sequence can see:
 * p <= next - n_swa, next being the lowest position of the sequence among
 * the tokens, or for a sequence not among them one past its highest. */
static void cells_drop_old(kv_cells *c, int32_t n, const int32_t *pos, const int32_t *seq) {
    if (c->n_swa <= 0) return;
    int32_t next[KV_MAX_SEQ];
    for (int32_t s = 0; s < KV_MAX_SEQ; s++) next[s] = -1;
    for (int32_t i = 0; i < n; i++)
        if (next[seq[i]] < 0 || pos[i] < next[seq[i]]) next[seq[i]] = pos[i];
    for (int32_t j = 0; j < c->size; j++)
        for (int32_t s = 0; s < KV_MAX_SEQ && c->seq[j]; s++) {
            const uint64_t bit = (uint64_t)1 << s;
            if (!(c->seq[j] & bit)) continue;
            if (next[s] < 0) next[s] = cells_seq_end(c, bit);
            if (c->pos[j] > next[s] - c->n_swa) continue;
            if (c->pos[j] > c->dropped[s]) c->dropped[s] = c->pos[j];
            c->seq[j] &= ~bit;
            if (!c->seq[j]) c->pos[j] = -1;
        }
}

int32_t kv_cache_cells_used(const kv_cache *kv) { return kv_cells_used(&kv->sets[0]); }

static bool batch_has_seq(const kv_cache *kv, int32_t s) {
    for (int32_t k = 0; k < kv->batch_n_seq; k++)
        if (kv->batch_seq[k] == s) return true;
    return false;
}

int kv_cache_batch_begin(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t n) {
    kv->batch_n_seq = 0;
    for (int32_t i = 0; i < n; i++) {
        if (batch_has_seq(kv, seq[i])) continue; /* seen at its first token */
        int32_t lo = pos[i];
        for (int32_t k = i + 1; k < n; k++)
            if (seq[k] == seq[i] && pos[k] < lo) lo = pos[k];
        /* remembered for kv_cache_batch_rollback */
        kv->batch_seq[kv->batch_n_seq] = seq[i];
        kv->batch_from[kv->batch_n_seq++] = lo;
        if (kv_cache_seq_forget(kv, seq[i], lo) < lo)
            return error_set(kv->rs ? "sequence %d cannot go back to position %d: its recurrent state cannot be "
                                      "rolled back, so the sequence was cleared (decode it from position 0)"
                                    : "sequence %d cannot go on at position %d: the sliding-window cache no longer "
                                      "holds the positions before it, so the sequence was cleared (decode it from "
                                      "position 0)",
                             seq[i], lo);
    }
    for (int32_t k = 0; k < kv->batch_n_seq; k++)
        if (kv->rs && kv_rs_acquire(kv, kv->batch_seq[k]) < 0) return -1;
    int32_t n_free = kv->n_ctx - kv_cells_used(&kv->sets[0]);
    if (n_free < n)
        return error_set("context full: %d tokens need cells, %d of %d are free (-c)", n, n_free, kv->n_ctx);
    kv_cache_compact(kv);
    return 0;
}

/* How many of want tokens fit in a run of free cells of every set, with
 * head[s] where; a sliding-window set first drops what the tokens cannot
 * see. 0 when some set has no free cell. */
static int32_t batch_find_cells(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t want,
                                int32_t *head) {
    int32_t nb = want;
    for (int32_t s = 0; s < kv->n_sets && nb > 0; s++) {
        kv_cells *c = &kv->sets[s];
        int32_t got = cells_find_run(c, nb, &head[s]);
        if (got < nb && c->n_swa > 0) {
            cells_drop_old(c, nb, pos, seq);
            got = cells_find_run(c, nb, &head[s]);
        }
        if (got < nb) {
            nb = got; /* the sets before this one then take fewer: look again */
            s = -1;
        }
    }
    return nb;
}

int32_t kv_cache_ubatch_reserve(kv_cache *kv, const int32_t *pos, const int32_t *seq, int32_t want,
                                kv_ubatch *ub) {
    *ub = (kv_ubatch){.n_sets = kv->n_sets};
    if (kv->rs) { /* one sequence per micro-batch: the graph updates one state */
        int32_t run = 1;
        while (run < want && seq[run] == seq[0]) run++;
        want = run;
        const int32_t slot = kv_rs_acquire(kv, seq[0]);
        if (slot < 0) return 0;
        ub->rs_slot = kv->rs->cur_slot = slot;
    }
    ub->n = batch_find_cells(kv, pos, seq, want, ub->head);
    if (ub->n == 0)
        return error_set(kv->n_sets > 1 ? "no free cell left in the KV cache (the sliding-window cells hold "
                                          "the window of more sequences than the context was made for)"
                                        : "no free cell left in the KV cache");
    for (int32_t s = 0; s < kv->n_sets; s++) {
        cells_place(&kv->sets[s], ub->head[s], ub->n, pos, seq);
        ub->n_kv[s] = kv_cells_n_kv(&kv->sets[s]);
        ub->n_cells[s] = kv->sets[s].size;
    }
    return ub->n;
}

void kv_cache_batch_rollback(kv_cache *kv) {
    for (int32_t k = 0; k < kv->batch_n_seq; k++) {
        /* a recurrent state may hold some of the call's tokens: it all goes */
        const int32_t from = kv->rs ? 0 : kv->batch_from[k];
        for (int32_t s = 0; s < kv->n_sets; s++) kv_cells_forget(&kv->sets[s], kv->batch_seq[k], from);
        if (kv->rs) kv_rs_release(kv, kv->batch_seq[k]);
    }
    kv->batch_n_seq = 0;
}

void kv_cache_fill_mask(const kv_cache *kv, bool swa, bool causal, const int32_t *n_kv, int32_t n_tokens,
                        const int32_t *pos, const int32_t *seq, float *mask) {
    const int32_t set = swa ? kv_cache_swa_set(kv) : 0, n_swa = swa ? kv->n_swa : 0, cells = n_kv[set];
    const kv_cells *c = &kv->sets[set];
    for (int32_t t = 0; t < n_tokens; t++) {
        const uint64_t bit = (uint64_t)1 << seq[t];
        float *row = mask + (size_t)t * (size_t)cells;
        for (int32_t j = 0; j < cells; j++) {
            /* causal: no later position; an encoder sees its whole sequence */
            bool seen = (c->seq[j] & bit) && c->pos[j] >= 0 && (!causal || c->pos[j] <= pos[t]) &&
                        (n_swa <= 0 || pos[t] - c->pos[j] < n_swa);
            row[j] = seen ? 0.0f : -INFINITY;
        }
    }
}
