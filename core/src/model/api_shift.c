/*
 * Public API: the context shift. When a sequence fills the context, the
 * caller keeps its first positions, drops some after them and moves the
 * rest down (tessera_seq_shift). The cached keys were rotated (RoPE) for
 * their old positions; RoPE turns each pair of dimensions by an angle linear
 * in the position, and two turns add, so a moved key is turned once more by
 * its position's delta. One graph per call: for every layer with rope, its
 * K cells viewed as [D, Hkv, cells], converted to F32 (dequantized for a
 * block type), roped by each cell's delta (0 for cells that did not move:
 * cos 0 = 1, sin 0 = 0, an exact identity) and written back in the cache's
 * type. Values need nothing: they carry no position. A rotated K cache
 * (kv.h: Rotation) holds H R(p) k: it is turned back by H (its own
 * inverse), roped, and turned again, H R(delta) H (H R(p) k) = H R(p +
 * delta) k; rope's turn does not commute with H, so the three steps are
 * needed.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/blocks.h"
#include "model/public.h"
#include "util/error.h"

/* Rotate the keys of every cell by delta[set][cell]. */
static int shift_keys(tessera_context *ctx, int32_t *const *delta) {
    const model *m = ctx->model->m;
    const model_hparams *hp = &m->hp;
    kv_cache *kv = ctx->kv;
    const int64_t D = hp->head_dim, Hkv = hp->n_head_kv;
    graph *g = graph_new(16 * hp->n_layer + 16);
    if (!g) return error_set("context shift: out of memory");
    model_build b = {.g = g, .m = m, .hp = hp, .kv = kv};
    graph_tensor *pos[KV_MAX_SETS] = {0};
    int32_t n_kv[KV_MAX_SETS] = {0}, n_roped = 0;
    for (int32_t s = 0; s < kv->n_sets; s++) {
        n_kv[s] = kv_cache_set_n_kv(kv, s);
        if (n_kv[s] == 0) continue;
        pos[s] = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_kv[s]));
        if (pos[s]) graph_tensor_set_name(pos[s], "shift_delta-%d", s);
    }
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const int32_t s = kv->layers[il].set;
        if (m->layers[il].no_rope || !pos[s] || !kv_cache_layer_has_kv(kv, il)) continue; /* recurrent: no keys */
        graph_tensor *kc = kv_cache_k_leaf(g, kv, il); /* [D*Hkv, cells] */
        if (!kc) break;
        const uint64_t row = kc->t.nb[1];
        graph_tensor *k = graph_view_3d(g, kc, D, Hkv, n_kv[s], row / (uint64_t)Hkv, row, 0);
        graph_rope_params rp = blk_rope_params(&b, (int)il);
        /* A turn only: YaRN's magnitude correction is in the keys already. */
        rp.attn_factor = rp.ext_factor != 0.0f ? 1.0f / (1.0f + 0.1f * logf(1.0f / rp.freq_scale)) : 1.0f;
        graph_tensor *r = graph_cast(g, k, TSR_DTYPE_F32);
        if (kv->rot_k) r = blk_rotate_heads(&b, r);
        r = blk_rope_at(&b, r, (int)il, pos[s], &rp);
        if (kv->rot_k) r = blk_rotate_heads(&b, r);
        graph_tensor_set_name(graph_cpy(g, r, k), "k_shifted-%d", (int)il);
        n_roped++;
    }
    int rc = -1;
    if (graph_check(g) != 0) {
        error_wrap("context shift graph");
        goto done;
    }
    if (n_roped == 0) {
        rc = 0;
        goto done;
    }
    if (sched_alloc(ctx->sched, g) != 0) goto done;
    for (int32_t s = 0; s < kv->n_sets; s++)
        if (pos[s])
            for (int32_t j = 0; j < n_kv[s]; j++) ((int32_t *)pos[s]->t.data)[j] = delta[s][j];
    host_set_n_threads(ctx->params.n_threads);
    if (sched_compute(ctx->sched, g) != 0) goto done;
    rc = 0;
done:
    graph_free(g);
    return rc;
}

/* A move of sequence seq's positions (kv_cache_seq_shift, _add or _div
 * with its arguments), then its keys turned by how far each cell moved. */
typedef enum seq_move_kind { SEQ_MOVE_SHIFT, SEQ_MOVE_ADD, SEQ_MOVE_DIV } seq_move_kind;

static int seq_move(tessera_context *ctx, int32_t seq, seq_move_kind kind, int32_t a, int32_t b, int32_t d,
                    const char *what) {
    kv_cache *kv = ctx->kv;
    int32_t *delta[KV_MAX_SETS] = {0};
    int rc = -1;
    /* M-RoPE's marks (mrope.h) would have to move with the cells */
    if (mrope_has_marks(&ctx->mrope, seq))
        return error_set("%s: sequence %d holds an image with M-RoPE grid positions; moving its positions is not "
                         "supported", what, seq);
    for (int32_t s = 0; s < kv->n_sets; s++)
        if (!(delta[s] = malloc((size_t)kv_cache_set_size(kv, s) * sizeof *delta[s]))) {
            error_set("%s: out of memory", what);
            goto done;
        }
    int moved = kind == SEQ_MOVE_SHIFT ? kv_cache_seq_shift(kv, seq, a, b, delta)
                : kind == SEQ_MOVE_ADD ? kv_cache_seq_add(kv, seq, a, b, d, delta)
                                       : kv_cache_seq_div(kv, seq, a, b, d, delta);
    if (moved != 0) goto done;
    if (shift_keys(ctx, delta) != 0) {
        /* The keys are in an unknown state: the sequence cannot go on. */
        kv_cache_seq_forget(kv, seq, 0);
        mrope_forget(&ctx->mrope, seq, 0);
        error_wrap("%s (the sequence was cleared)", what);
        goto done;
    }
    rc = 0;
done:
    for (int32_t s = 0; s < KV_MAX_SETS; s++) free(delta[s]);
    return rc;
}

int tessera_seq_shift(tessera_context *ctx, int32_t seq, int32_t n_keep, int32_t n_discard) {
    if (!ctx) return error_set("context shift: no context");
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("context shift: sequence %d is not in 0..%d", seq, TESSERA_MAX_SEQ - 1);
    const int32_t len = kv_cache_seq_len(ctx->kv, seq);
    if (n_keep < 0 || n_discard <= 0 || (int64_t)n_keep + n_discard > len)
        return error_set("context shift: keeping %d and dropping %d positions does not fit the %d the sequence "
                         "holds", n_keep, n_discard, len);
    return seq_move(ctx, seq, SEQ_MOVE_SHIFT, n_keep, n_discard, 0, "context shift");
}

/* p1 < 0 means to the end, as llama.cpp's. */
static int seq_range_check(const tessera_context *ctx, int32_t seq, int32_t p0, int32_t *p1, const char *what) {
    if (!ctx) return error_set("%s: no context", what);
    if (seq < 0 || seq >= TESSERA_MAX_SEQ)
        return error_set("%s: sequence %d is not in 0..%d", what, seq, TESSERA_MAX_SEQ - 1);
    if (*p1 < 0) *p1 = INT32_MAX;
    if (p0 < 0 || p0 > *p1) return error_set("%s: the range [%d, %d) is not one", what, p0, *p1);
    return 0;
}

int tessera_seq_add(tessera_context *ctx, int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
    if (seq_range_check(ctx, seq, p0, &p1, "position add") != 0) return -1;
    if (delta == 0 || p0 == p1) return 0;
    return seq_move(ctx, seq, SEQ_MOVE_ADD, p0, p1, delta, "position add");
}

int tessera_seq_div(tessera_context *ctx, int32_t seq, int32_t p0, int32_t p1, int32_t d) {
    if (seq_range_check(ctx, seq, p0, &p1, "position divide") != 0) return -1;
    if (d <= 0) return error_set("position divide: the divisor %d is not positive", d);
    if (d == 1 || p0 == p1) return 0;
    return seq_move(ctx, seq, SEQ_MOVE_DIV, p0, p1, d, "position divide");
}

int tessera_self_extend_check(int32_t ga_n, int32_t ga_w) {
    if (ga_n < 1) return error_set("--grp-attn-n %d: the group factor must be at least 1", ga_n);
    if (ga_n == 1) return 0;
    if (ga_w <= 0 || ga_w % ga_n != 0)
        return error_set("--grp-attn-w %d must be a positive multiple of --grp-attn-n %d", ga_w, ga_n);
    return 0;
}

/* The grouped part grows by one window each time: the window after what
 * was grouped so far (at ga_i) is first moved back to its own positions,
 * divided by ga_n so it follows the groups before it, and everything after
 * it moves down to follow it. Each step frees ga_w - ga_w / ga_n
 * positions. */
int tessera_self_extend(tessera_context *ctx, int32_t seq, int32_t ga_n, int32_t ga_w, int32_t *ga_i,
                        int32_t *n_past) {
    if (tessera_self_extend_check(ga_n, ga_w) != 0) return -1;
    if (!ga_i || !n_past) return error_set("self-extend: no group state");
    if (ga_n == 1) return 0;
    while (*n_past >= *ga_i + ga_w) {
        const int32_t ib = (ga_n * *ga_i) / ga_w;
        const int32_t bd = (ga_w / ga_n) * (ga_n - 1);
        const int32_t dd = (ga_w / ga_n) - ib * bd - ga_w;
        if (tessera_seq_add(ctx, seq, *ga_i, *n_past, ib * bd) != 0 ||
            tessera_seq_div(ctx, seq, *ga_i + ib * bd, *ga_i + ib * bd + ga_w, ga_n) != 0 ||
            tessera_seq_add(ctx, seq, *ga_i + ib * bd + ga_w, *n_past + ib * bd, dd) != 0)
            return error_wrap("self-extend");
        *n_past -= bd;
        *ga_i += ga_w / ga_n;
    }
    return 0;
}

bool tessera_context_can_shift(const tessera_context *ctx) {
    return ctx && !kv_cache_is_recurrent(ctx->kv);
}

int32_t tessera_shift_keep(int32_t n_keep, int32_t n_prompt, bool has_bos) {
    const int32_t keep = n_keep < 0 ? n_prompt : n_keep + (has_bos ? 1 : 0);
    return keep > n_prompt ? n_prompt : keep;
}

int tessera_context_shift(tessera_context *ctx, int32_t seq, int32_t keep, tessera_token *tokens,
                          int32_t *n_past) {
    if (!n_past) return error_set("context shift: no position count");
    const int32_t n_discard = (*n_past - keep) / 2;
    if (keep < 0 || n_discard <= 0)
        return error_set("context shift: keeping %d tokens leaves nothing to drop of %d (--keep)", keep, *n_past);
    if (tessera_seq_shift(ctx, seq, keep, n_discard) != 0) return -1;
    if (tokens)
        memmove(tokens + keep, tokens + keep + n_discard, (size_t)(*n_past - keep - n_discard) * sizeof *tokens);
    *n_past -= n_discard;
    return 0;
}
