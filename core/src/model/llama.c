/*
 * llama.c — the forward pass of the llama family (llama, qwen2) as a graph.
 *
 * Shapes use GGUF order (innermost first). For a micro-batch of T tokens:
 *
 *   x = token_embd[tokens]                                  [E, T]
 *   for each layer:
 *     h = rms_norm(x) * attn_norm
 *     q = Wq h (+bq), k = Wk h (+bk), v = Wv h (+bv)        [D*H, T], [D*Hkv, T]
 *     q, k = rope(q), rope(k) at the tokens' positions       [D, H, T]
 *     K cache[kv_head .. +T] = k, V cache (transposed) = v
 *     att = softmax(scale * K[:n_kv] . q + mask)             [n_kv, T, H]
 *     o = V[:n_kv] . att                                     [D, T, H]
 *     x = x + Wo o
 *     h = rms_norm(x) * ffn_norm
 *     x = x + Wdown (silu(Wgate h) * Wup h)
 *   logits = Wout (rms_norm(x[out_ids]) * output_norm)      [V, n_out]
 *
 * Grouped-query attention: query head h reads KV head h / (H / Hkv), which is
 * MUL_MAT's broadcast over dimension 2.
 */
#include <math.h>
#include <string.h>

#include "kv/kv.h"
#include "model/model.h"
#include "tensor/dtype.h"
#include "util/error.h"

/* llama.cpp's CPU backend multiplies an F16 cache with F16 copies of q and
 * of the attention weights; rounding them here the same way keeps our logits
 * within float noise of its goldens. */
static graph_tensor *round_like_cache(graph *g, graph_tensor *t, const kv_cache *kv) {
    if (kv->dtype != TSR_DTYPE_F16) return t;
    return graph_cast(g, graph_cast(g, t, TSR_DTYPE_F16), TSR_DTYPE_F32);
}

static graph_tensor *norm_mul(graph *g, graph_tensor *x, const model_weight *w, float eps, const char *name,
                              int il) {
    graph_tensor *t = graph_mul(g, graph_rms_norm(g, x, eps), model_weight_leaf(g, w));
    if (t) graph_tensor_set_name(t, "%s-%d", name, il);
    return t;
}

/* llama.cpp's CPU backend converts the activations of a matrix product to the
 * weight's "vec_dot_type" first: F16 for F16 weights, BF16 for BF16, and an
 * 8-bit block type (Q8_0, Q8_1, Q8_K) for quantized weights. Doing the same
 * rounding here (convert there and back) makes an exact engine such as ref
 * land on llama.cpp's numbers. Only for weights on the host: a GPU computes
 * its layers its own way. */
static graph_tensor *round_like_cpu(graph *g, const model *m, const model_weight *w, graph_tensor *x) {
    if (!m->round_activations || w->dtype == TSR_DTYPE_F32 || w->home_device >= 0 || !x) return x;
    const dtype_traits *tr = dtype_traits_get(w->dtype);
    if (!tr) return x;
    /* (our dtype table pairs F16/BF16 with F32 for its exact dot product) */
    int32_t act = w->dtype == TSR_DTYPE_F16 || w->dtype == TSR_DTYPE_BF16 ? w->dtype : tr->vec_dot_type;
    const dtype_traits *vt = dtype_traits_get(act);
    if (act == TSR_DTYPE_F32 || !vt || !vt->from_f32 || !vt->to_f32 || x->t.ne[0] % vt->block_size != 0)
        return x;
    return graph_cast(g, graph_cast(g, x, act), TSR_DTYPE_F32);
}

static graph_tensor *linear(graph *g, const model *m, const model_weight *w, const model_weight *b,
                            graph_tensor *x) {
    graph_tensor *t = graph_mul_mat(g, model_weight_leaf(g, w), round_like_cpu(g, m, w, x));
    if (b && b->nbytes) t = graph_add(g, t, model_weight_leaf(g, b));
    return t;
}

/* Self-attention of one layer; returns the output before Wo, [D*H, T]. */
static graph_tensor *attention(graph *g, const model *m, kv_cache *kv, int il, graph_tensor *h,
                               const model_batch_graph *io, int32_t kv_head) {
    const model_hparams *hp = &m->hp;
    const model_layer *L = &m->layers[il];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    const int64_t T = io->n_tokens, n_kv = io->n_kv;

    graph_tensor *q = graph_reshape_3d(g, linear(g, m, &L->wq, &L->bq, h), D, H, T);
    graph_tensor *k = graph_reshape_3d(g, linear(g, m, &L->wk, &L->bk, h), D, Hkv, T);
    graph_tensor *v = linear(g, m, &L->wv, &L->bv, h); /* [D*Hkv, T] */

    graph_rope_params rp = {
        .n_dims = hp->n_rot,
        .mode = hp->rope_mode,
        .n_ctx_orig = hp->n_ctx_train,
        .freq_base = hp->rope_freq_base,
        .freq_scale = hp->rope_freq_scale,
        .ext_factor = 0.0f,
        .attn_factor = 1.0f,
        .beta_fast = 32.0f,
        .beta_slow = 1.0f,
    };
    graph_tensor *freqs = m->rope_freqs.nbytes ? model_weight_leaf(g, &m->rope_freqs) : NULL;
    q = graph_rope(g, q, io->pos, freqs, &rp);
    k = graph_rope(g, k, io->pos, freqs, &rp);
    if (q) graph_tensor_set_name(q, "q-%d", il);
    if (k) graph_tensor_set_name(k, "k-%d", il);

    /* Store this batch's keys and values in cells kv_head.. of the cache. */
    graph_tensor *kc = kv_cache_k_leaf(g, kv, il); /* [D*Hkv, n_ctx] */
    graph_tensor *vc = kv_cache_v_leaf(g, kv, il); /* [n_ctx, D*Hkv] */
    if (!kc || !vc) return NULL;
    const uint64_t es = kv->dtype == TSR_DTYPE_F32 ? 4 : 2;
    const uint64_t k_row = kc->t.nb[1], v_row = vc->t.nb[1];
    graph_tensor *k_dst = graph_view_2d(g, kc, D * Hkv, T, k_row, (uint64_t)kv_head * k_row);
    graph_tensor *v_dst = graph_view_2d(g, vc, T, D * Hkv, v_row, (uint64_t)kv_head * es);
    graph_cpy(g, k, k_dst);
    graph_cpy(g, graph_transpose(g, v), v_dst);

    /* Attention over cells 0..n_kv-1 (created after the copies, so computed
     * after them). */
    graph_tensor *K = graph_view_3d(g, kc, D, n_kv, Hkv, k_row, D * es, 0);         /* [D, n_kv, Hkv] */
    graph_tensor *V = graph_view_3d(g, vc, n_kv, D, Hkv, v_row, v_row * D, 0);      /* [n_kv, D, Hkv] */
    /* (rounded while contiguous, then permuted) */
    graph_tensor *qp = graph_permute(g, round_like_cache(g, q, kv), 0, 2, 1, 3);  /* [D, T, H] */
    graph_tensor *kq = graph_mul_mat(g, K, qp);                                     /* [n_kv, T, H] */
    kq = graph_soft_max(g, kq, io->mask, 1.0f / sqrtf((float)D), 0.0f);
    if (kq) graph_tensor_set_name(kq, "kq_soft_max-%d", il);
    graph_tensor *kqv = graph_mul_mat(g, V, round_like_cache(g, kq, kv));          /* [D, T, H] */
    graph_tensor *o = graph_cont(g, graph_permute(g, kqv, 0, 2, 1, 3));             /* [D, H, T] */
    return graph_reshape_2d(g, o, D * H, T);
}

int llama_build_graph(const model *m, kv_cache *kv, int32_t n_tokens, int32_t kv_head,
                      int32_t n_kv, int32_t n_out, model_batch_graph *out) {
    const model_hparams *hp = &m->hp;
    memset(out, 0, sizeof *out);
    if (n_tokens <= 0 || n_out <= 0 || n_out > n_tokens || kv_head < 0 ||
        kv_head + n_tokens > kv->n_ctx || n_kv < kv_head + n_tokens || n_kv > kv->n_ctx)
        return error_set("llama graph: bad batch (%d tokens at cell %d, %d cells attended, %d outputs)",
                         n_tokens, kv_head, n_kv, n_out);
    graph *g = graph_new(64 * hp->n_layer + 64);
    if (!g) return error_set("llama graph: out of memory");
    out->g = g;
    out->n_tokens = n_tokens;
    out->n_kv = n_kv;
    out->n_out = n_out;

    out->tokens = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_tokens));
    out->pos = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_tokens));
    out->mask = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, n_kv, n_tokens));
    if (out->tokens) graph_tensor_set_name(out->tokens, "tokens");
    if (out->pos) graph_tensor_set_name(out->pos, "positions");
    if (out->mask) graph_tensor_set_name(out->mask, "kq_mask");

    graph_tensor *x = graph_get_rows(g, model_weight_leaf(g, &m->tok_embd), out->tokens);
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        graph_tensor *h = norm_mul(g, x, &L->attn_norm, hp->rms_eps, "attn_norm", il);
        graph_tensor *att = attention(g, m, kv, il, h, out, kv_head);
        x = graph_add(g, linear(g, m, &L->wo, NULL, att), x);
        h = norm_mul(g, x, &L->ffn_norm, hp->rms_eps, "ffn_norm", il);
        graph_tensor *gate = linear(g, m, &L->ffn_gate, NULL, h);
        graph_tensor *up = linear(g, m, &L->ffn_up, NULL, h);
        graph_tensor *ffn = linear(g, m, &L->ffn_down, NULL, graph_swiglu(g, gate, up));
        x = graph_add(g, ffn, x);
        if (x) graph_tensor_set_name(x, "l_out-%d", il);
    }
    if (n_out < n_tokens) {
        out->out_ids = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_out));
        if (out->out_ids) graph_tensor_set_name(out->out_ids, "out_ids");
        x = graph_get_rows(g, x, out->out_ids);
    }
    x = norm_mul(g, x, &m->output_norm, hp->rms_eps, "result_norm", 0);
    out->logits = graph_set_output(linear(g, m, &m->output, NULL, x));
    if (out->logits) graph_tensor_set_name(out->logits, "logits");
    if (graph_check(g) != 0 || !out->logits) {
        error_wrap("llama graph");
        graph_free(g);
        out->g = NULL;
        return -1;
    }
    return 0;
}
