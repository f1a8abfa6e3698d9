/*
 * blocks_ssm — the recurrent blocks of the hybrid architectures (see
 * blocks.h): LFM2's gated short convolution, Mamba-2's mixer and Qwen3.5's
 * Gated DeltaNet (also Qwen3-Next's, its products fused). Each reads
 * its sequence's state from the recurrent-state cache (kv_cache_rs_leaf,
 * the row of the micro-batch's slot) and copies the next one back in place
 * after the nodes that read it, as blk_attention writes the KV cache.
 *
 * A layer's state row: the convolution's last K - 1 inputs per channel
 * [K - 1, channels] (time innermost, what SSM_CONV reads in front of the
 * batch), then for Mamba-2 the scan state [d_state, head_dim, heads],
 * for the Gated DeltaNet its state [Dv, Dk, v heads].
 */
#include <math.h>

#include "model/blocks.h"

#include "kv/kv.h"

static graph_tensor *named(graph_tensor *t, const char *name, int il) {
    if (t) graph_tensor_set_name(t, "%s-%d", name, il);
    return t;
}

/* Floats [off, off + ne0 * ne1) of the state row of this micro-batch's
 * sequence in layer il, as [ne0, ne1]. */
static graph_tensor *state_view(model_build *b, graph_tensor *leaf, int64_t off, int64_t ne0, int64_t ne1) {
    if (!leaf) return NULL;
    const uint64_t row = (uint64_t)b->io->rs_slot * leaf->t.nb[1];
    return graph_view_2d(b->g, leaf, ne0, ne1, (uint64_t)ne0 * sizeof(float), row + (uint64_t)off * sizeof(float));
}

/* Causal depthwise convolution of x [C, T] with kernel [K, C] over the
 * state's K - 1 previous inputs; the state takes the last K - 1 inputs.
 * Returns [C, T]. */
static graph_tensor *conv_step(model_build *b, graph_tensor *leaf, const model_weight *kernel, graph_tensor *x,
                               int il) {
    graph *g = b->g;
    const int64_t K = kernel->ne[0], C = kernel->ne[1], T = x->t.ne[1];
    graph_tensor *prev = state_view(b, leaf, 0, K - 1, C);                     /* [K - 1, C] */
    graph_tensor *sx = named(graph_concat(g, prev, graph_transpose(g, x), 0), "conv_in", il); /* [K - 1 + T, C] */
    graph_tensor *y = graph_ssm_conv(g, sx, model_weight_leaf(g, kernel));     /* [C, T] */
    if (!sx || !y) return NULL;
    /* after the convolution read it: the last K - 1 inputs are the state */
    graph_cpy(g, graph_view_2d(g, sx, K - 1, C, sx->t.nb[1], (uint64_t)T * sx->t.nb[0]),
              state_view(b, leaf, 0, K - 1, C));
    return graph_reshape_2d(g, y, C, T);
}

graph_tensor *blk_shortconv(model_build *b, int il, graph_tensor *h) {
    graph *g = b->g;
    const model_layer *L = &b->m->layers[il];
    const int64_t E = b->hp->n_embd, T = b->io->n_tokens;
    graph_tensor *bcx = blk_linear(b, L->conv_in, NULL, h); /* [3E, T]: B, C, x */
    if (!bcx) return NULL;
    const uint64_t nb1 = bcx->t.nb[1], e = (uint64_t)E * sizeof(float);
    graph_tensor *B = graph_view_2d(g, bcx, E, T, nb1, 0);
    graph_tensor *C = graph_view_2d(g, bcx, E, T, nb1, e);
    graph_tensor *X = graph_view_2d(g, bcx, E, T, nb1, 2 * e);
    graph_tensor *bx = named(graph_mul(g, B, X), "conv_bx", il);
    graph_tensor *y = conv_step(b, kv_cache_rs_leaf(g, b->kv, il), L->conv_w, bx, il);
    y = named(graph_mul(g, C, y), "conv_out", il);
    return blk_linear(b, L->conv_out, NULL, y);
}

graph_tensor *blk_mamba2(model_build *b, int il, graph_tensor *h) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const int64_t DI = hp->ssm_d_inner, N = hp->ssm_d_state, H = hp->ssm_n_head, G = hp->ssm_n_group;
    const int64_t P = DI / H, CC = DI + 2 * G * N, K = hp->conv_kernel, T = b->io->n_tokens;
    graph_tensor *zxbcdt = blk_linear(b, L->ssm_in, NULL, h); /* [2 DI + 2 G N + H, T] */
    if (!zxbcdt) return NULL;
    const uint64_t nb1 = zxbcdt->t.nb[1], f = sizeof(float);
    graph_tensor *z = graph_view_2d(g, zxbcdt, DI, T, nb1, 0);
    graph_tensor *xbc = graph_view_2d(g, zxbcdt, CC, T, nb1, (uint64_t)DI * f);
    graph_tensor *dt = graph_view_2d(g, zxbcdt, H, T, nb1, (uint64_t)(DI + CC) * f);

    graph_tensor *leaf = kv_cache_rs_leaf(g, b->kv, il);
    xbc = conv_step(b, leaf, L->ssm_conv1d, xbc, il);
    xbc = graph_add(g, xbc, model_weight_leaf(g, L->ssm_conv1d_b));
    xbc = named(graph_silu(g, xbc), "ssm_xbc", il); /* [CC, T]: x, B, C */
    dt = graph_add(g, dt, model_weight_leaf(g, L->ssm_dt_b)); /* softplus is the scan's */

    const int64_t s_off = (K - 1) * CC; /* the scan state after the conv state */
    graph_tensor *state = state_view(b, leaf, s_off, N * P * H, 1);
    state = state ? graph_reshape_4d(g, state, N, P, H, 1) : NULL;
    graph_tensor *ys = named(graph_ssm_scan(g, state, xbc, dt, model_weight_leaf(g, L->ssm_a)), "ssm_scan", il);
    if (!ys) return NULL;
    graph_cpy(g, graph_view_1d(g, ys, N * P * H, (uint64_t)(P * H * T) * f), state_view(b, leaf, s_off, N * P * H, 1));
    graph_tensor *y = graph_view_3d(g, ys, P, H, T, P * f, P * H * f, 0); /* [P, H, T] */

    /* D skip: y + x * D, D one number per head */
    graph_tensor *x = graph_view_3d(g, xbc, P, H, T, P * f, xbc->t.nb[1], 0);
    y = graph_add(g, y, graph_mul(g, x, model_weight_leaf(g, L->ssm_d)));
    /* gate, then the grouped RMS norm (Mamba-2's norm_before_gate = False) */
    y = graph_swiglu(g, graph_cont(g, z), graph_reshape_2d(g, y, DI, T));
    y = graph_reshape_3d(g, y, DI / G, G, T);
    y = graph_mul(g, graph_rms_norm(g, y, hp->rms_eps), model_weight_leaf(g, L->ssm_norm));
    y = named(graph_reshape_2d(g, y, DI, T), "ssm_y", il);
    return blk_linear(b, L->ssm_out, NULL, y);
}

/* Qwen3-Next's fused DeltaNet products, grouped per q/k head g of the R =
 * H / Hk v heads g R .. g R + R - 1 it serves. ssm_ba's rows are, for
 * each g, beta's then alpha's R: gives beta and alpha [H, T]. */
static void deltanet_ba(model_build *b, const model_layer *L, graph_tensor *h, graph_tensor **beta,
                        graph_tensor **alpha) {
    graph *g = b->g;
    const int64_t H = b->hp->ssm_n_head, Hk = b->hp->ssm_n_group, R = H / Hk, T = b->io->n_tokens;
    const uint64_t f = sizeof(float);
    *beta = *alpha = NULL;
    graph_tensor *ba = blk_linear(b, L->ssm_ba, NULL, h); /* [2 H, T] */
    if (!ba) return;
    graph_tensor *bt = graph_cont(g, graph_view_3d(g, ba, R, Hk, T, 2 * R * f, ba->t.nb[1], 0));
    graph_tensor *al = graph_cont(g, graph_view_3d(g, ba, R, Hk, T, 2 * R * f, ba->t.nb[1], R * f));
    if (!bt || !al) return;
    *beta = graph_reshape_2d(g, bt, H, T);
    *alpha = graph_reshape_2d(g, al, H, T);
}

/* ssm_in's rows are, for each g, q [Dk], k [Dk], then v and z [Dv] of its
 * R v heads: gives qkv [QKV, T] as DELTA_NET and the convolution read it
 * (all q, all k, all v; attn_qkv's layout) and z [Dv*H, T]. */
static void deltanet_qkvz(model_build *b, const model_layer *L, graph_tensor *h, graph_tensor **qkv,
                          graph_tensor **z) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const int64_t H = hp->ssm_n_head, Dv = hp->ssm_d_inner / H, Dk = hp->ssm_d_state, Hk = hp->ssm_n_group;
    const int64_t R = H / Hk, W = 2 * Dk + 2 * R * Dv, T = b->io->n_tokens;
    const uint64_t f = sizeof(float);
    *qkv = *z = NULL;
    graph_tensor *in = blk_linear(b, L->ssm_in, NULL, h); /* [Hk W, T] */
    if (!in) return;
    const uint64_t nb1 = in->t.nb[1];
    /* q and k of every head side by side along dim 1: [Dk, 2 Hk, T] is q
     * [Dk, Hk] then k [Dk, Hk] per token */
    graph_tensor *qk = graph_concat(g, graph_view_3d(g, in, Dk, Hk, T, W * f, nb1, 0),
                                    graph_view_3d(g, in, Dk, Hk, T, W * f, nb1, Dk * f), 1);
    graph_tensor *v = graph_cont(g, graph_view_3d(g, in, R * Dv, Hk, T, W * f, nb1, 2 * Dk * f));
    graph_tensor *zz = graph_cont(g, graph_view_3d(g, in, R * Dv, Hk, T, W * f, nb1, (2 * Dk + R * Dv) * f));
    if (!qk || !v || !zz) return;
    *qkv = graph_concat(g, graph_reshape_2d(g, qk, 2 * Dk * Hk, T), graph_reshape_2d(g, v, Dv * H, T), 0);
    *z = graph_reshape_2d(g, zz, Dv * H, T);
}

graph_tensor *blk_deltanet(model_build *b, int il, graph_tensor *h, bool kv_tiled) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const int64_t H = hp->ssm_n_head, Dv = hp->ssm_d_inner / H, Dk = hp->ssm_d_state, Hk = hp->ssm_n_group;
    const int64_t QKV = 2 * Hk * Dk + H * Dv, K = hp->conv_kernel, T = b->io->n_tokens;
    const uint64_t f = sizeof(float);
    graph_tensor *qkv, *z, *beta, *alpha;
    if (L->ssm_in) { /* qwen3next's fused q|k|v|z */
        deltanet_qkvz(b, L, h, &qkv, &z);
    } else {
        qkv = blk_linear(b, L->wqkv, NULL, h);    /* [QKV, T]: q [Dk, Hk], k [Dk, Hk], v [Dv, H] */
        z = blk_linear(b, L->attn_gate, NULL, h); /* [Dv*H, T] */
    }
    if (L->ssm_ba) { /* qwen3next's fused beta|alpha */
        deltanet_ba(b, L, h, &beta, &alpha);
    } else {
        beta = blk_linear(b, L->ssm_beta, NULL, h); /* [H, T] */
        alpha = blk_linear(b, L->ssm_alpha, NULL, h);
    }
    alpha = graph_add(g, alpha, model_weight_leaf(g, L->ssm_dt_b)); /* softplus is the op's */
    if (!qkv || !beta || !alpha) return NULL;
    graph_tensor *gates = graph_concat(g, graph_reshape_3d(g, beta, H, 1, T), graph_reshape_3d(g, alpha, H, 1, T), 1);

    graph_tensor *leaf = kv_cache_rs_leaf(g, b->kv, il);
    qkv = conv_step(b, leaf, L->ssm_conv1d, qkv, il);
    qkv = named(graph_silu(g, qkv), "dn_qkv", il);

    const int64_t s_off = (K - 1) * QKV; /* the delta state after the conv state */
    graph_tensor *state = state_view(b, leaf, s_off, Dv * Dk * H, 1);
    state = state ? graph_reshape_4d(g, state, Dv, Dk, H, 1) : NULL;
    gates = gates ? graph_reshape_4d(g, gates, H, 2, T, 1) : NULL;
    graph_tensor *ys = named(graph_delta_net(g, state, qkv, gates, model_weight_leaf(g, L->ssm_a), hp->rms_eps,
                                             1.0f / sqrtf((float)Dk), kv_tiled),
                             "delta_net", il);
    if (!ys) return NULL;
    graph_cpy(g, graph_view_1d(g, ys, Dv * Dk * H, (uint64_t)(Dv * H * T) * f),
              state_view(b, leaf, s_off, Dv * Dk * H, 1));
    graph_tensor *y = graph_view_2d(g, ys, Dv, H * T, Dv * f, 0); /* [Dv, H*T] */
    /* the gated RMS norm: each head's norm times the weight, times silu(z) */
    y = graph_mul(g, graph_rms_norm(g, y, hp->rms_eps), model_weight_leaf(g, L->ssm_norm));
    y = graph_swiglu(g, graph_reshape_2d(g, z, Dv, H * T), y);
    y = named(graph_reshape_2d(g, y, Dv * H, T), "dn_y", il);
    return blk_linear(b, L->ssm_out, NULL, y);
}
