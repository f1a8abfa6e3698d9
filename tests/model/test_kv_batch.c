/*
 * The KV cache's whole-call operations (kv.h, kv_batch.c), without a model:
 *
 * 1. A call's tokens take a run of free cells; when none is long enough the
 *    micro-batch is cut to the longest run.
 * 2. kv_cache_batch_rollback forgets every micro-batch of the call and only
 *    them: a new sequence is gone, a continued one keeps what it had before.
 * 3. A call needing more cells than are free is refused ("context full")
 *    and changes nothing.
 * 4. The mask: a token sees the cells of its own sequence at positions up to
 *    its own; the sliding-window mask only the last n_swa of them, and the
 *    window's own cell set drops what no token can see, so 20 steps fit in
 *    its 8 cells.
 * 5. The cell table of a saved state (kv_table.c): listing a sequence's
 *    cells, clearing it, placing saved cells (their own index when free,
 *    else the lowest free cell, refused when too many), filling them, and
 *    putting the table back from a backup.
 */
#include <string.h>

#include "harness.h"

#include "kv/kv.h"
#include "tensor/dtype.h"
#include "util/error.h"

enum { N_CTX = 16, N_EMBD = 32 };

static kv_cache *cache_new(int32_t n_ctx, const bool *layer_swa, int32_t n_swa, int32_t n_cells_swa) {
    kv_cache_params p = {.n_layer = 2, .n_ctx = n_ctx, .n_embd_k = N_EMBD, .n_embd_v = N_EMBD,
                         .head_dim = N_EMBD, .dtype_k = TSR_DTYPE_F16, .dtype_v = TSR_DTYPE_F16,
                         .flash_attn = true, .layer_swa = layer_swa, .n_swa = n_swa, .n_cells_swa = n_cells_swa};
    kv_cache *kv = kv_cache_new(&p);
    assert_non_null(kv);
    return kv;
}

/* n tokens of sequence seq from position pos0 in one call of micro-batches
 * of up to n_batch; the heads of the first two go to heads. */
static int decode_call(kv_cache *kv, int32_t seq, int32_t pos0, int32_t n, int32_t n_batch, int32_t *heads) {
    int32_t pos[N_CTX * 2], sq[N_CTX * 2];
    for (int32_t i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        sq[i] = seq;
    }
    if (kv_cache_batch_begin(kv, pos, sq, n) != 0) return -1;
    for (int32_t b0 = 0, k = 0; b0 < n; k++) {
        kv_ubatch ub;
        int32_t want = n - b0 < n_batch ? n - b0 : n_batch;
        if (kv_cache_ubatch_reserve(kv, pos + b0, sq + b0, want, &ub) == 0) return -1;
        if (heads && k < 2) heads[k] = ub.head[0];
        b0 += ub.n;
    }
    return 0;
}

TEST(test_placement_and_rollback) {
    kv_cache *kv = cache_new(N_CTX, NULL, 0, 0);
    int32_t heads[2] = {-1, -1};
    assert_int_equal(decode_call(kv, 0, 0, 4, 8, heads), 0);
    assert_int_equal(heads[0], 0);
    assert_int_equal(decode_call(kv, 1, 0, 4, 8, heads), 0);
    assert_int_equal(heads[0], 4);
    kv_cache_seq_forget(kv, 0, 0); /* cells 0..3 free, 8..15 free */
    assert_int_equal(kv_cache_cells_used(kv), 4);

    /* 10 tokens: no run of 10, so 8 go to the longest run, then 2 */
    heads[0] = heads[1] = -1;
    assert_int_equal(decode_call(kv, 2, 0, 10, 16, heads), 0);
    assert_int_equal(heads[0], 8);
    assert_int_equal(heads[1], 0);
    assert_int_equal(kv_cache_cells_used(kv), 14);
    kv_cache_batch_rollback(kv);
    assert_int_equal(kv_cache_cells_used(kv), 4);
    assert_int_equal(kv_cache_seq_len(kv, 2), 0);
    assert_int_equal(kv_cache_seq_len(kv, 1), 4);

    /* a continued sequence keeps what it held before the call */
    assert_int_equal(decode_call(kv, 1, 4, 3, 2, NULL), 0);
    assert_int_equal(kv_cache_seq_len(kv, 1), 7);
    kv_cache_batch_rollback(kv);
    assert_int_equal(kv_cache_seq_len(kv, 1), 4);
    assert_int_equal(kv_cache_cells_used(kv), 4);
    kv_cache_free(kv);
}

TEST(test_context_full) {
    kv_cache *kv = cache_new(N_CTX, NULL, 0, 0);
    assert_int_equal(decode_call(kv, 0, 0, 10, 16, NULL), 0);
    assert_int_not_equal(decode_call(kv, 1, 0, 7, 16, NULL), 0);
    assert_non_null(strstr(error_get(), "context full"));
    assert_int_equal(kv_cache_cells_used(kv), 10);
    assert_int_equal(kv_cache_seq_len(kv, 1), 0);
    kv_cache_free(kv);
}

static int32_t seen(const float *row, int32_t n) {
    int32_t k = 0;
    for (int32_t j = 0; j < n; j++) {
        assert_true(row[j] == 0.0f || (isinf(row[j]) && row[j] < 0));
        k += row[j] == 0.0f;
    }
    return k;
}

TEST(test_masks) {
    const bool swa[2] = {false, true};
    kv_cache *kv = cache_new(32, swa, 4, 8);
    assert_int_equal(kv->n_sets, 2);
    assert_int_equal(decode_call(kv, 1, 0, 3, 8, NULL), 0); /* another sequence's cells, never seen */
    kv_ubatch ub = {0};
    for (int32_t p = 0; p < 20; p++) {
        const int32_t sq = 0;
        assert_int_equal(kv_cache_batch_begin(kv, &p, &sq, 1), 0);
        assert_int_equal(kv_cache_ubatch_reserve(kv, &p, &sq, 1, &ub), 1);
    }
    float full[32], window[32], early[32], bidir[32];
    const int32_t p = 19, p5 = 5, sq = 0;
    kv_cache_fill_mask(kv, false, true, ub.n_kv, 1, &p, &sq, full);
    kv_cache_fill_mask(kv, true, true, ub.n_kv, 1, &p, &sq, window);
    assert_int_equal(seen(full, ub.n_kv[0]), 20);
    assert_int_equal(seen(window, ub.n_kv[1]), 4);
    /* position 5 sees positions 0..5 causally, and its whole sequence when
     * the model is an encoder (no causal mask) */
    kv_cache_fill_mask(kv, false, true, ub.n_kv, 1, &p5, &sq, early);
    kv_cache_fill_mask(kv, false, false, ub.n_kv, 1, &p5, &sq, bidir);
    assert_int_equal(seen(early, ub.n_kv[0]), 6);
    assert_int_equal(seen(bidir, ub.n_kv[0]), 20);
    assert_true(ub.n_kv[1] <= 8);
    kv_cache_free(kv);
}

TEST(test_cell_table) {
    kv_cache *kv = cache_new(N_CTX, NULL, 0, 0);
    assert_int_equal(decode_call(kv, 0, 0, 4, 8, NULL), 0); /* cells 0..3 */
    assert_int_equal(decode_call(kv, 1, 0, 3, 8, NULL), 0); /* cells 4..6 */
    kv_cell_rec recs[N_CTX];
    assert_int_equal(kv_cache_cells_list(kv, 0, 1, NULL), 3);
    assert_int_equal(kv_cache_cells_list(kv, 0, -1, recs), 7);
    assert_int_equal(recs[5].cell, 5);
    assert_int_equal(recs[5].pos, 1);
    assert_true(recs[5].seq_mask == 2);
    assert_int_equal(kv_cache_cells_list(kv, 0, 1, recs), 3);
    assert_int_equal(recs[0].cell, 4);
    assert_int_equal(kv_cache_set_used(kv, 0), 7);
    assert_int_equal(kv_cache_set_n_kv(kv, 0), 7);

    kv_cells_backup *bk = kv_cache_cells_backup(kv);
    assert_non_null(bk);
    kv_cache_seq_clear(kv, 0);
    assert_int_equal(kv_cache_set_used(kv, 0), 3);
    assert_int_equal(kv_cache_seq_len(kv, 0), 0);
    /* Saved cells 2 and 5 for sequence 2: 2 is free and kept, 5 is taken by
     * sequence 1 and goes to the lowest free cell, 0. */
    kv_cell_rec saved[2] = {{.cell = 2, .pos = 0, .seq_mask = 4}, {.cell = 5, .pos = 1, .seq_mask = 4}};
    int32_t dst[2];
    assert_int_equal(kv_cache_cells_place(kv, 0, saved, 2, dst), 0);
    assert_int_equal(dst[0], 2);
    assert_int_equal(dst[1], 0);
    kv_cache_cells_fill(kv, 0, saved, dst, 2);
    assert_int_equal(kv_cache_seq_len(kv, 2), 2);
    assert_int_equal(kv_cache_set_used(kv, 0), 5);
    kv_cache_set_dropped(kv, 0, 2, 7);
    assert_int_equal(kv_cache_dropped(kv, 0, 2), 7);
    /* More saved cells than free ones: refused, nothing placed. */
    kv_cell_rec many[N_CTX];
    for (int32_t i = 0; i < N_CTX; i++) many[i] = (kv_cell_rec){.cell = i, .pos = i, .seq_mask = 8};
    int32_t dst_many[N_CTX];
    assert_int_equal(kv_cache_cells_place(kv, 0, many, N_CTX, dst_many), -1);
    assert_non_null(strstr(error_get(), "do not fit in the 11 free cells"));
    /* The backup puts back what was there before the clear. */
    kv_cache_cells_restore(kv, bk);
    assert_int_equal(kv_cache_seq_len(kv, 0), 4);
    assert_int_equal(kv_cache_seq_len(kv, 2), 0);
    assert_int_equal(kv_cache_dropped(kv, 0, 2), -1);
    assert_int_equal(kv_cache_set_used(kv, 0), 7);
    kv_cache_seq_clear(kv, -1);
    assert_int_equal(kv_cache_set_used(kv, 0), 0);
    kv_cache_free(kv);
}

HARNESS_MAIN("kv_batch", HARNESS_TEST(test_placement_and_rollback), HARNESS_TEST(test_context_full),
             HARNESS_TEST(test_masks), HARNESS_TEST(test_cell_table))
