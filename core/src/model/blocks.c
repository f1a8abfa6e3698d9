/* The shared blocks of transformer graphs (see blocks.h). */
#include "model/blocks.h"

#include <math.h>

#include "kv/kv.h"
#include "model/lora.h"
#include "tensor/dtype.h"

/* llama.cpp's CPU backend multiplies an F16 cache with F16 copies of q and
 * of the attention weights, and a block-type K cache (flash attention) with
 * q quantized to 8 bits (Q8_0, or Q8_1 whose values are the same). ref's
 * MUL_MAT rounds like that itself, FLASH_ATTN and cpu-avx's and cpu-neon's
 * F16 products do not (they take f32 activations), so the rounding is
 * spelled out here for every device. */
static graph_tensor *round_like_cache(graph *g, graph_tensor *t, int32_t cache_dtype) {
    int32_t via = cache_dtype;
    if (tsr_dtype_block_size(cache_dtype) > 1) via = TSR_DTYPE_Q8_0;
    else if (cache_dtype != TSR_DTYPE_F16) return t;
    return graph_cast(g, graph_cast(g, t, via), TSR_DTYPE_F32);
}

static graph_tensor *named(graph_tensor *t, const char *name, int il) {
    if (t) graph_tensor_set_name(t, "%s-%d", name, il);
    return t;
}

graph_tensor *blk_embed(model_build *b) {
    /* a medium's rows come from its projector, already in the text model's
     * space: no lookup and no embedding scale (llama.cpp scales neither) */
    if (b->io->embd) return b->io->embd;
    graph_tensor *x = graph_get_rows(b->g, model_weight_leaf(b->g, b->m->tok_embd), b->io->tokens);
    if (b->hp->embd_scale != 1.0f) x = graph_scale(b->g, x, b->hp->embd_scale, 0.0f);
    return x;
}

graph_tensor *blk_rms_norm(model_build *b, graph_tensor *x, const model_weight *w, const char *name, int il) {
    graph_tensor *t = graph_rms_norm(b->g, x, b->hp->rms_eps);
    if (w) t = graph_mul(b->g, t, model_weight_leaf(b->g, w));
    return named(t, name, il);
}

graph_tensor *blk_layer_norm(model_build *b, graph_tensor *x, const model_weight *w, const model_weight *bias,
                             const char *name, int il) {
    graph_tensor *t = graph_norm(b->g, x, b->hp->norm_eps);
    if (w) t = graph_mul(b->g, t, model_weight_leaf(b->g, w));
    if (bias) t = graph_add(b->g, t, model_weight_leaf(b->g, bias));
    return named(t, name, il);
}

graph_tensor *blk_linear(model_build *b, const model_weight *w, const model_weight *bias, graph_tensor *x) {
    graph_tensor *t = graph_mul_mat(b->g, model_weight_leaf(b->g, w), x);
    /* each adapter in use: + scale * B (A x) (lora.h) */
    for (int32_t i = 0; b->lora && i < b->lora->n; i++) {
        const model_lora_use *u = &b->lora->use[i];
        const model_lora_pair *p = model_lora_pair_for(u->lora, w);
        if (!p) continue;
        graph_tensor *ax = graph_mul_mat(b->g, model_weight_leaf(b->g, &p->a), x);        /* [r, T] */
        graph_tensor *bax = graph_mul_mat(b->g, model_weight_leaf(b->g, &p->b), ax);      /* [n_out, T] */
        t = graph_add(b->g, t, graph_scale(b->g, bax, model_lora_scale(u->lora, p, u->scale), 0.0f));
    }
    if (bias) t = graph_add(b->g, t, model_weight_leaf(b->g, bias));
    return t;
}

/* Rows [r0, r0 + n) of a [rows, T] tensor as a contiguous [n, T] tensor. */
static graph_tensor *rows_slice(graph *g, graph_tensor *t, int64_t r0, int64_t n) {
    if (!t) return NULL;
    return graph_cont(g, graph_view_2d(g, t, n, t->t.ne[1], t->t.nb[1], (uint64_t)r0 * t->t.nb[0]));
}

void blk_qkv(model_build *b, int il, graph_tensor *h, graph_tensor **q, graph_tensor **k, graph_tensor **v) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, T = b->io->n_tokens;
    graph_tensor *tq, *tk, *tv;
    if (L->wqkv) {
        graph_tensor *qkv = blk_linear(b, L->wqkv, L->bqkv, h); /* [D*H + 2*D*Hkv, T] */
        tq = rows_slice(g, qkv, 0, D * H);
        tk = rows_slice(g, qkv, D * H, D * Hkv);
        tv = rows_slice(g, qkv, D * H + D * Hkv, D * Hkv);
    } else {
        tq = blk_linear(b, L->wq, L->bq, h);
        tk = blk_linear(b, L->wk, L->bk, h);
        tv = blk_linear(b, L->wv, L->bv, h);
    }
    /* q/k norms: per head [D] (qwen3, gemma3) or over the whole row [D*H]
     * (olmoe), then the heads apart */
    const bool row_norm = L->q_norm && L->q_norm->ne[0] != D;
    if (row_norm) tq = blk_rms_norm(b, tq, L->q_norm, "q_norm", il);
    if (row_norm && L->k_norm) tk = blk_rms_norm(b, tk, L->k_norm, "k_norm", il);
    *q = graph_reshape_3d(g, tq, D, H, T);
    *k = graph_reshape_3d(g, tk, D, Hkv, T);
    *v = tv;
    if (L->q_norm && !row_norm) *q = blk_rms_norm(b, *q, L->q_norm, "q_norm", il);
    if (L->k_norm && !row_norm) *k = blk_rms_norm(b, *k, L->k_norm, "k_norm", il);
}

graph_rope_params blk_rope_params(const model_build *b, int il) {
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const bool yarn = hp->rope_scaling == MODEL_ROPE_SCALING_YARN;
    return (graph_rope_params){
        .n_dims = hp->n_rot,
        .mode = hp->rope_mode,
        .n_ctx_orig = hp->n_ctx_orig,
        .freq_base = L->swa ? hp->rope_freq_base_swa : hp->rope_freq_base,
        .freq_scale = L->swa ? hp->rope_freq_scale_swa : hp->rope_freq_scale,
        .ext_factor = yarn ? hp->yarn_ext_factor : 0.0f,
        .attn_factor = hp->yarn_attn_factor,
        .beta_fast = yarn ? hp->yarn_beta_fast : 32.0f,
        .beta_slow = yarn ? hp->yarn_beta_slow : 1.0f,
    };
}

graph_tensor *blk_rope_at(model_build *b, graph_tensor *x, int il, graph_tensor *pos,
                          const graph_rope_params *rp) {
    if (b->m->layers[il].no_rope) return x;
    /* Per-frequency divisors: Llama 3's, or Phi-3's LongRoPE factors (the
     * long ones once the context passes the original one). */
    const model_weight *ff = b->m->rope_freqs;
    if (b->m->rope_long) ff = b->kv->n_ctx > b->hp->n_ctx_orig ? b->m->rope_long : b->m->rope_short;
    return graph_rope(b->g, x, pos, ff ? model_weight_leaf(b->g, ff) : NULL, rp);
}

/* M-RoPE as ROPE ops: NeoX pair i (dims i and i + n_rot/2) turns by
 * pos_s(i) * freq_scale * base^(-2i/n_rot), pos_s the row of positions of
 * the section i falls in. A section of n pairs from pair a is its two runs
 * of dims side by side, [a, a+n) then [n_rot/2 + a, ...), which is a NeoX
 * rope of n_dims 2n whose pair j turns by pos_s * freq_scale * base^(-2a/n_rot)
 * * (base^(2n/n_rot))^(-2j/2n): the same angle with that section's base and
 * freq_scale. The runs go back to their places afterwards, so the cache
 * holds K as plain rope would (a shift by d turns every section by d: plain
 * rope's K-shift stays right). */
static graph_tensor *blk_mrope(model_build *b, graph_tensor *x, int il) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    if (!x) return NULL;
    if (!graph_tensor_is_contiguous(x)) x = graph_cont(g, x);
    const graph_rope_params base_rp = blk_rope_params(b, il);
    const int64_t D = x->t.ne[0], H = x->t.ne[1], T = x->t.ne[2], half = hp->n_rot / 2;
    const uint64_t es = x->t.nb[0], nb1 = x->t.nb[1], nb2 = x->t.nb[2];
    graph_tensor *lo = NULL, *hi = NULL;
    int64_t a = 0;
    for (int s = 0; s < 4; s++) {
        const int64_t n = hp->rope_sections[s];
        if (n == 0) continue;
        graph_tensor *xl = graph_view_3d(g, x, n, H, T, nb1, nb2, (uint64_t)a * es);
        graph_tensor *xh = graph_view_3d(g, x, n, H, T, nb1, nb2, (uint64_t)(half + a) * es);
        graph_tensor *xs = graph_concat(g, xl, xh, 0); /* [2n, H, T] */
        graph_rope_params rp = base_rp;
        rp.n_dims = (int32_t)(2 * n);
        rp.mode = TSR_ROPE_NEOX;
        rp.freq_base = (float)pow((double)base_rp.freq_base, (double)(2 * n) / (double)hp->n_rot);
        rp.freq_scale = (float)((double)base_rp.freq_scale *
                                pow((double)base_rp.freq_base, -2.0 * (double)a / (double)hp->n_rot));
        graph_tensor *ps = graph_view_1d(g, b->io->pos_mrope, T, (uint64_t)s * (uint64_t)T * sizeof(int32_t));
        graph_tensor *r = graph_rope(g, xs, ps, NULL, &rp);
        const uint64_t rb1 = r ? r->t.nb[1] : 0, rb2 = r ? r->t.nb[2] : 0;
        graph_tensor *rl = graph_view_3d(g, r, n, H, T, rb1, rb2, 0);
        graph_tensor *rh = graph_view_3d(g, r, n, H, T, rb1, rb2, (uint64_t)n * es);
        lo = lo ? graph_concat(g, lo, rl, 0) : rl;
        hi = hi ? graph_concat(g, hi, rh, 0) : rh;
        a += n;
    }
    graph_tensor *y = graph_concat(g, lo, hi, 0);
    if (hp->n_rot < D) /* the dims past n_rot are not turned */
        y = graph_concat(g, y, graph_view_3d(g, x, D - hp->n_rot, H, T, nb1, nb2, (uint64_t)hp->n_rot * es), 0);
    return named(y, "mrope", il);
}

graph_tensor *blk_rope(model_build *b, graph_tensor *x, int il) {
    if (b->io->pos_mrope && !b->m->layers[il].no_rope) return blk_mrope(b, x, il);
    const graph_rope_params rp = blk_rope_params(b, il);
    return blk_rope_at(b, x, il, b->io->pos, &rp);
}

graph_tensor *blk_rotate_heads(model_build *b, graph_tensor *x) {
    graph *g = b->g;
    if (!b->kv_rot) b->kv_rot = kv_cache_rot_leaf(g, b->kv);
    if (!x || !b->kv_rot) return NULL;
    if (!graph_tensor_is_contiguous(x)) x = graph_cont(g, x);
    const int64_t D = b->kv->head_dim, n = graph_tensor_nelements(x);
    graph_tensor *r = graph_mul_mat(g, b->kv_rot, graph_reshape_2d(g, x, D, n / D)); /* H^T x = H x */
    if (!r) return NULL;
    return graph_reshape_4d(g, r, x->t.ne[0], x->t.ne[1], x->t.ne[2], x->t.ne[3]);
}

/* softmax over each row of kq_scale * kq + mask with one more logit per
 * head, the layer's sink, that takes its share of the row and is dropped:
 *   p[j] = e^(s_j) / (sum_i e^(s_i) + e^(sink_h))
 * (gpt-oss; Hugging Face's eager attention concatenates the sinks to the
 * scores the same way). kq [n_kv, T, H], q [D, H, T] gives the shape of
 * the sink column (its values times 0, plus the sinks). */
static graph_tensor *soft_max_sinks(model_build *b, int il, graph_tensor *kq, graph_tensor *q,
                                    graph_tensor *mask, float kq_scale) {
    graph *g = b->g;
    const int64_t n_kv = kq->t.ne[0], T = kq->t.ne[1], H = kq->t.ne[2];
    graph_tensor *s = graph_scale(g, kq, kq_scale, 0.0f);
    if (mask) s = graph_add(g, s, mask); /* [n_kv, T] over the heads */
    graph_tensor *q0 = graph_cont(g, graph_view_3d(g, q, 1, H, T, q->t.nb[1], q->t.nb[2], 0)); /* [1, H, T] */
    graph_tensor *sink = graph_add(g, graph_scale(g, q0, 0.0f, 0.0f),
                                   graph_reshape_3d(g, model_weight_leaf(g, b->m->layers[il].attn_sinks), 1, H, 1));
    sink = graph_cont(g, graph_permute(g, sink, 0, 2, 1, 3));          /* [1, T, H] */
    graph_tensor *p = graph_soft_max(g, graph_concat(g, s, sink, 0), NULL, 1.0f, 0.0f); /* [n_kv + 1, T, H] */
    if (!p) return NULL;
    return graph_cont(g, graph_view_3d(g, p, n_kv, T, H, p->t.nb[1], p->t.nb[2], 0));
}

graph_tensor *blk_attention(model_build *b, int il, graph_tensor *q, graph_tensor *k, graph_tensor *v,
                            float kq_scale) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    kv_cache *kv = b->kv;
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    const int32_t set = kv->layers[il].set; /* sliding-window layers may have their own cells */
    const int64_t T = b->io->n_tokens, n_kv = b->io->n_kv[set];
    const uint64_t kv_head = (uint64_t)b->io->kv_head[set];
    named(q, "q", il);
    named(k, "k", il);
    if (kv->rot_k) k = named(blk_rotate_heads(b, k), "k_rot", il);
    if (kv->rot_v) v = named(blk_rotate_heads(b, v), "v_rot", il);

    /* Store this batch's keys and values in cells kv_head.. of the cache. */
    graph_tensor *kc = kv_cache_k_leaf(g, kv, il); /* [D*Hkv, cells] */
    graph_tensor *vc = kv_cache_v_leaf(g, kv, il); /* [cells, D*Hkv], or [D*Hkv, cells] for FLASH_ATTN */
    if (!kc || !vc) return NULL;
    const uint64_t k_row = kc->t.nb[1], v_row = vc->t.nb[1];
    const uint64_t k_head = kv_row_bytes(kv->dtype_k, D), v_head = kv_row_bytes(kv->dtype_v, D);
    graph_tensor *k_dst = graph_view_2d(g, kc, D * Hkv, T, k_row, kv_head * k_row);
    graph_cpy(g, k, k_dst);
    if (!kv->flash_attn)
        graph_cpy(g, graph_transpose(g, v),
                  graph_view_2d(g, vc, T, D * Hkv, v_row, kv_row_bytes(kv->dtype_v, (int64_t)kv_head)));
    else
        graph_cpy(g, v, graph_view_2d(g, vc, D * Hkv, T, v_row, kv_head * v_row));

    /* Attention over cells 0..n_kv-1 (created after the copies, so computed
     * after them). Grouped-query attention: query head h reads KV head
     * h / (H / Hkv), which is MUL_MAT's broadcast over dimension 2 and
     * FLASH_ATTN's own rule. */
    graph_tensor *K = graph_view_3d(g, kc, D, n_kv, Hkv, k_row, k_head, 0); /* [D, n_kv, Hkv] */
    graph_tensor *mask = b->m->layers[il].swa ? b->io->mask_swa : b->io->mask;
    if (b->io->attn_temp) q = graph_mul(g, q, b->io->attn_temp);
    if (kv->rot_k) q = named(blk_rotate_heads(b, q), "q_rot", il); /* (H q).(H k) = q.k */
    const bool sinks = b->m->layers[il].attn_sinks != NULL;
    if (kv->flash_attn && !sinks) {
        graph_tensor *V = graph_view_3d(g, vc, D, n_kv, Hkv, v_row, v_head, 0); /* [D, n_kv, Hkv] */
        graph_tensor *qp = graph_permute(g, round_like_cache(g, q, kv->dtype_k), 0, 2, 1, 3); /* [D, T, H] */
        graph_tensor *o = named(graph_flash_attn(g, qp, K, V, mask, kq_scale), "fattn", il); /* [D, H, T] */
        if (kv->rot_v) o = named(blk_rotate_heads(b, o), "fattn_unrot", il); /* sum p H v = H sum p v */
        return graph_reshape_2d(g, o, D * H, T);
    }
    /* FLASH_ATTN has no sink: with sinks, a flash-attention cache
     * ([D*Hkv, cells] values) is read through a transposed copy. */
    graph_tensor *V = kv->flash_attn
                          ? graph_cont(g, graph_permute(g, graph_view_3d(g, vc, D, n_kv, Hkv, v_row, v_head, 0),
                                                        1, 0, 2, 3))
                          : graph_view_3d(g, vc, n_kv, D, Hkv, v_row, v_row * D, 0); /* [n_kv, D, Hkv] */
    /* (rounded while contiguous, then permuted) */
    graph_tensor *qp = graph_permute(g, round_like_cache(g, q, kv->dtype_k), 0, 2, 1, 3); /* [D, T, H] */
    graph_tensor *kq = graph_mul_mat(g, K, qp);                                          /* [n_kv, T, H] */
    kq = sinks ? soft_max_sinks(b, il, kq, q, mask, kq_scale) : graph_soft_max(g, kq, mask, kq_scale, 0.0f);
    named(kq, "kq_soft_max", il);
    graph_tensor *kqv = graph_mul_mat(g, V, round_like_cache(g, kq, kv->dtype_v)); /* [D, T, H] */
    graph_tensor *o = graph_cont(g, graph_permute(g, kqv, 0, 2, 1, 3));             /* [D, H, T] */
    if (kv->rot_v) o = named(blk_rotate_heads(b, o), "kqv_unrot", il);
    return graph_reshape_2d(g, o, D * H, T);
}

graph_tensor *blk_self_attention(model_build *b, int il, graph_tensor *h) {
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const float scale = hp->attn_scale > 0.0f ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim);
    graph_tensor *q, *k, *v;
    blk_qkv(b, il, h, &q, &k, &v);
    /* q's nodes first, then rope(k), each in its own statement: rope(k) must
     * be the node right before blk_attention's copy of k into the KV cache
     * (the Vulkan plugin fuses that pair: backends/vulkan/vk_fused.c), and C
     * leaves the order of argument evaluation open. Same nodes, same numbers. */
    q = blk_rope(b, q, il);
    if (hp->attn_scale_q) q = graph_scale(b->g, q, scale, 0.0f);
    k = blk_rope(b, k, il);
    graph_tensor *att = blk_attention(b, il, q, k, v, hp->attn_scale_q ? 1.0f : scale);
    return blk_linear(b, L->wo, L->bo, att);
}

/* y [N, K, T] (the chosen experts' products) plus each chosen expert's
 * bias, bias [N, X] (gpt-oss); y itself without one. */
static graph_tensor *expert_bias(model_build *b, graph_tensor *y, const model_weight *bias, graph_tensor *sel) {
    if (!bias || !y || !sel) return y;
    graph *g = b->g;
    const int64_t K = sel->t.ne[0], T = sel->t.ne[1];
    graph_tensor *rows = graph_get_rows(g, model_weight_leaf(g, bias), graph_reshape_2d(g, sel, K * T, 1));
    return graph_add(g, y, graph_reshape_3d(g, rows, y->t.ne[0], K, T));
}

graph_tensor *blk_moe_ffn(model_build *b, int il, graph_tensor *x) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert, K = hp->n_expert_used, T = b->io->n_tokens;

    /* Route: each token's K most probable experts and their weights. */
    graph_tensor *logits =
        named(blk_linear(b, L->ffn_gate_inp, L->ffn_gate_inp_b, x), "ffn_moe_logits", il); /* [X, T] */
    graph_tensor *probs = hp->moe_gating == MODEL_MOE_SIGMOID      ? graph_sigmoid(g, logits)
                          : hp->moe_gating == MODEL_MOE_SOFTMAX_WEIGHT ? logits
                                                                   : graph_soft_max(g, logits, NULL, 1.0f, 0.0f);
    named(probs, "ffn_moe_probs", il);
    graph_tensor *sel = named(graph_top_k(g, probs, K), "ffn_moe_topk", il);             /* I32 [K, T] */
    graph_tensor *w = graph_get_rows(g, graph_reshape_3d(g, probs, 1, X, T), sel);    /* [1, K, T] */
    if (hp->moe_gating == MODEL_MOE_SOFTMAX_WEIGHT) /* softmax over the K chosen logits */
        w = graph_reshape_3d(g, graph_soft_max(g, graph_reshape_2d(g, w, K, T), NULL, 1.0f, 0.0f), 1, K, T);
    if (hp->moe_norm_w) {
        graph_tensor *w2 = graph_reshape_2d(g, w, K, T);
        w = graph_reshape_3d(g, graph_div(g, w2, graph_sum_rows(g, w2)), 1, K, T);
    }
    named(w, "ffn_moe_weights", il);

    /* The shared expert, before the routed ones: with the experts kept on
     * the host (--cpu-moe) it then joins the router's split on the GPU,
     * and the sum below the experts' split, so a layer is two splits,
     * not four. */
    graph_tensor *sh = NULL;
    if (L->ffn_up_shexp) {
        graph_tensor *sg = blk_linear(b, L->ffn_gate_shexp, NULL, x), *su = blk_linear(b, L->ffn_up_shexp, NULL, x);
        sh = named(blk_linear(b, L->ffn_down_shexp, NULL, graph_swiglu(g, sg, su)), "ffn_shexp", il);
        if (L->ffn_gate_inp_shexp) /* qwen2moe: scaled by its own gate, sigmoid(w . x) [1, T] */
            sh = graph_mul(g, sh, graph_sigmoid(g, blk_linear(b, L->ffn_gate_inp_shexp, NULL, x)));
    }

    /* The chosen experts' SwiGLU FFNs, weighted, summed over the K slots. */
    graph_tensor *xe = graph_reshape_3d(g, x, E, 1, T);
    graph_tensor *up, *gate;
    if (L->ffn_gate_exps) {
        up = named(graph_mul_mat_id(g, model_weight_leaf(g, L->ffn_up_exps), xe, sel), "ffn_moe_up", il);
        gate = named(graph_mul_mat_id(g, model_weight_leaf(g, L->ffn_gate_exps), xe, sel), "ffn_moe_gate", il);
    } else { /* one product [2 Fx, K, T], gate rows then up rows; SWIGLU reads the two views */
        const int64_t Fx = hp->n_ff_exp;
        graph_tensor *gu =
            named(graph_mul_mat_id(g, model_weight_leaf(g, L->ffn_up_exps), xe, sel), "ffn_moe_gate_up", il);
        if (!gu) return NULL;
        gate = graph_view_3d(g, gu, Fx, K, T, gu->t.nb[1], gu->t.nb[2], 0);
        up = graph_view_3d(g, gu, Fx, K, T, gu->t.nb[1], gu->t.nb[2], (uint64_t)Fx * gu->t.nb[0]);
    }
    up = expert_bias(b, up, L->ffn_up_exps_b, sel);
    gate = expert_bias(b, gate, L->ffn_gate_exps_b, sel);
    graph_tensor *h = hp->swiglu_limit > 0.0f ? graph_swiglu_oai(g, gate, up, hp->swiglu_alpha, hp->swiglu_limit)
                                              : graph_swiglu(g, gate, up); /* [Fx, K, T] */
    graph_tensor *down =
        named(graph_mul_mat_id(g, model_weight_leaf(g, L->ffn_down_exps), h, sel), "ffn_moe_down", il);
    down = expert_bias(b, down, L->ffn_down_exps_b, sel);
    down = graph_mul(g, down, w); /* [E, K, T] */
    graph_tensor *out = NULL;
    for (int64_t k = 0; k < K && down; k++) {
        graph_tensor *slot = graph_view_2d(g, down, E, T, down->t.nb[2], (uint64_t)k * down->t.nb[1]);
        out = out ? graph_add(g, out, slot) : slot;
    }
    if (K == 1) out = graph_cont(g, out);
    if (L->ffn_up_shexp) out = graph_add(g, out, sh);
    return named(out, "ffn_moe_out", il);
}

graph_tensor *blk_ffn(model_build *b, int il, graph_tensor *x, blk_ffn_act act) {
    graph *g = b->g;
    const model_layer *L = &b->m->layers[il];
    if (L->ffn_gate_inp) return blk_moe_ffn(b, il, x);
    graph_tensor *gate, *up;
    if (L->ffn_gate) {
        gate = blk_linear(b, L->ffn_gate, NULL, x);
        up = blk_linear(b, L->ffn_up, NULL, x);
    } else {
        graph_tensor *gu = blk_linear(b, L->ffn_up, NULL, x); /* [2*n_ff, T]: gate rows, then up */
        gate = rows_slice(g, gu, 0, b->hp->n_ff);
        up = rows_slice(g, gu, b->hp->n_ff, b->hp->n_ff);
    }
    graph_tensor *h = act == BLK_FFN_GELU ? graph_mul(g, graph_gelu(g, gate), up) : graph_swiglu(g, gate, up);
    return blk_linear(b, L->ffn_down, NULL, h);
}

graph_tensor *blk_logits(model_build *b, graph_tensor *x) {
    graph *g = b->g;
    model_batch_graph *io = b->io;
    if (io->n_out < io->n_tokens) {
        io->out_ids = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, io->n_out));
        if (io->out_ids) graph_tensor_set_name(io->out_ids, "out_ids");
        x = graph_get_rows(g, x, io->out_ids);
    }
    if (b->m->output_norm) x = blk_rms_norm(b, x, b->m->output_norm, "result_norm", 0);
    if (b->kv->embd_out) return x; /* the embeddings of an embedding context */
    x = blk_linear(b, b->m->output, NULL, x);
    if (b->hp->logit_scale != 1.0f) x = graph_scale(g, x, b->hp->logit_scale, 0.0f);
    return x;
}

graph_tensor *blk_prenorm_layer(model_build *b, int il, graph_tensor *x, blk_ffn_act act) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];

    graph_tensor *h = blk_rms_norm(b, x, L->attn_norm, "attn_norm", il);
    graph_tensor *o = blk_self_attention(b, il, h);
    if (hp->residual_scale != 1.0f) o = graph_scale(g, o, hp->residual_scale, 0.0f);
    x = graph_add(g, o, x);

    h = blk_rms_norm(b, x, L->ffn_norm, "ffn_norm", il);
    graph_tensor *f = blk_ffn(b, il, h, act);
    if (hp->residual_scale != 1.0f) f = graph_scale(g, f, hp->residual_scale, 0.0f);
    return named(graph_add(g, f, x), "l_out", il);
}
