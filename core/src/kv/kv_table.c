/*
 * kv_table — the cell table as a saved state sees it: list the cells a
 * sequence holds, clear a sequence, place and fill saved cells, and keep a
 * copy of the table to put back when a load fails. The state module
 * (state/api_state.c) owns the file format; it reaches the cells only
 * through these.
 */
#include <stdlib.h>
#include <string.h>

#include "kv/kv_internal.h"
#include "util/error.h"

int32_t kv_cache_set_size(const kv_cache *kv, int32_t set) { return kv->sets[set].size; }
int32_t kv_cache_set_used(const kv_cache *kv, int32_t set) { return kv_cells_used(&kv->sets[set]); }
int32_t kv_cache_set_n_kv(const kv_cache *kv, int32_t set) { return kv_cells_n_kv(&kv->sets[set]); }

int32_t kv_cache_cells_list(const kv_cache *kv, int32_t set, int32_t seq, kv_cell_rec *out) {
    const kv_cells *c = &kv->sets[set];
    int32_t n = 0;
    for (int32_t j = 0; j < c->size; j++) {
        bool held = seq < 0 ? c->seq[j] != 0 : (c->seq[j] >> seq) & 1;
        if (!held) continue;
        if (out) out[n] = (kv_cell_rec){.cell = j, .pos = c->pos[j], .seq_mask = seq < 0 ? c->seq[j] : (uint64_t)1 << seq};
        n++;
    }
    return n;
}

int32_t kv_cache_dropped(const kv_cache *kv, int32_t set, int32_t seq) { return kv->sets[set].dropped[seq]; }

void kv_cache_set_dropped(kv_cache *kv, int32_t set, int32_t seq, int32_t pos) { kv->sets[set].dropped[seq] = pos; }

void kv_cache_seq_clear(kv_cache *kv, int32_t seq) {
    for (int32_t s = 0; s < kv->n_sets; s++) {
        kv_cells *c = &kv->sets[s];
        for (int32_t j = 0; j < c->size; j++) {
            if (seq >= 0) c->seq[j] &= ~((uint64_t)1 << seq);
            else c->seq[j] = 0;
            if (!c->seq[j]) c->pos[j] = -1;
        }
    }
    for (int32_t s = 0; s < KV_MAX_SEQ; s++)
        if (seq < 0 || s == seq) kv_rs_release(kv, s);
}

int kv_cache_cells_place(const kv_cache *kv, int32_t set, const kv_cell_rec *recs, int32_t n, int32_t *dst) {
    const kv_cells *c = &kv->sets[set];
    uint8_t *taken = calloc((size_t)c->size + 1, 1);
    if (!taken) return error_set("kv cache: out of memory placing %d cells", n);
    for (int32_t j = 0; j < c->size; j++) taken[j] = c->seq[j] != 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t want = recs[i].cell;
        dst[i] = want >= 0 && want < c->size && !taken[want] ? want : -1;
        if (dst[i] >= 0) taken[dst[i]] = 1;
    }
    int32_t next = 0;
    for (int32_t i = 0; i < n; i++) {
        if (dst[i] >= 0) continue;
        while (next < c->size && taken[next]) next++;
        if (next == c->size) {
            free(taken);
            int32_t used = kv_cells_used(c);
            return error_set("%d cells do not fit in the %d free cells of the context's set %d (-c)", n,
                             used < c->size ? c->size - used : 0, set);
        }
        dst[i] = next;
        taken[next] = 1;
    }
    free(taken);
    return 0;
}

void kv_cache_cells_fill(kv_cache *kv, int32_t set, const kv_cell_rec *recs, const int32_t *dst, int32_t n) {
    kv_cells *c = &kv->sets[set];
    for (int32_t i = 0; i < n; i++) {
        c->pos[dst[i]] = recs[i].pos;
        c->seq[dst[i]] = recs[i].seq_mask;
    }
}

struct kv_cells_backup {
    int32_t n_sets;
    int32_t *pos[KV_MAX_SETS];
    uint64_t *seq[KV_MAX_SETS];
    int32_t dropped[KV_MAX_SETS][KV_MAX_SEQ];
};

void kv_cells_backup_free(kv_cells_backup *b) {
    if (!b) return;
    for (int32_t s = 0; s < KV_MAX_SETS; s++) {
        free(b->pos[s]);
        free(b->seq[s]);
    }
    free(b);
}

kv_cells_backup *kv_cache_cells_backup(const kv_cache *kv) {
    kv_cells_backup *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    b->n_sets = kv->n_sets;
    for (int32_t s = 0; s < kv->n_sets; s++) {
        const kv_cells *c = &kv->sets[s];
        b->pos[s] = malloc((size_t)c->size * sizeof *b->pos[s]);
        b->seq[s] = malloc((size_t)c->size * sizeof *b->seq[s]);
        if (!b->pos[s] || !b->seq[s]) goto oom;
        memcpy(b->pos[s], c->pos, (size_t)c->size * sizeof *c->pos);
        memcpy(b->seq[s], c->seq, (size_t)c->size * sizeof *c->seq);
        memcpy(b->dropped[s], c->dropped, sizeof c->dropped);
    }
    return b;
oom:
    kv_cells_backup_free(b);
    error_set("kv cache: out of memory copying the cell table");
    return NULL;
}

void kv_cache_cells_restore(kv_cache *kv, kv_cells_backup *b) {
    if (!b) return;
    for (int32_t s = 0; s < b->n_sets; s++) {
        kv_cells *c = &kv->sets[s];
        memcpy(c->pos, b->pos[s], (size_t)c->size * sizeof *c->pos);
        memcpy(c->seq, b->seq[s], (size_t)c->size * sizeof *c->seq);
        memcpy(c->dropped, b->dropped[s], sizeof c->dropped);
    }
    kv_cells_backup_free(b);
}
