/*
 * qwen35 — Qwen3.5 (dense), llama.cpp's name, keys and tensors: a hybrid of
 * Gated DeltaNet blocks ("linear attention", blk_deltanet in
 * blocks_ssm.c) and, every full_attention_interval-th block (3, 7, 11, ...
 * for 4), gated attention:
 *
 *   x = embd; per block: x += mixer(rms_norm(x)); x += ffn(rms_norm(x))
 *   (the FFN's norm is post_attention_norm); logits = W rms_norm(x)
 *   attention: q|gate = Wq h (per head D values of q, then D of its gate),
 *              per-head q/k RMS norms, partial NeoX rope (rope.dimension_count
 *              of the head; the multimodal sections of rope.dimension_sections
 *              give every pair the text position), attention,
 *              times sigmoid(gate), Wo
 *
 * The DeltaNet sizes come from the ssm.* keys: time_step_rank v heads of
 * inner_size / time_step_rank, group_count q/k heads of state_size, the
 * convolution ssm.conv_kernel wide; its state (the convolution's last
 * inputs, then the delta rule's Dv x Dk per v head) lives in the
 * recurrent-state cache (kv.h, "Recurrent state").
 */
#include <math.h>

#include "model/arch/arch.h"
#include "util/error.h"

/* The DeltaNet's ssm.* keys and which blocks attend: every
 * full_attention_interval-th; a file without the key attends every
 * default_every-th, or is an error naming it when that is 0. */
static int deltanet_hparams(model_hparams *hp, const model_hp_reader *r, int32_t default_every) {
    int32_t every = default_every;
    if (arch_hp_need_int(r, "ssm.conv_kernel", &hp->conv_kernel) ||
        arch_hp_need_int(r, "ssm.inner_size", &hp->ssm_d_inner) ||
        arch_hp_need_int(r, "ssm.state_size", &hp->ssm_d_state) ||
        arch_hp_need_int(r, "ssm.time_step_rank", &hp->ssm_n_head) ||
        arch_hp_need_int(r, "ssm.group_count", &hp->ssm_n_group) ||
        (default_every ? model_hp_int_opt(r, "full_attention_interval", &every)
                       : arch_hp_need_int(r, "full_attention_interval", &every)))
        return -1;
    if (hp->ssm_d_inner % hp->ssm_n_head || hp->ssm_n_head % hp->ssm_n_group)
        return error_set("%s: %s.ssm.inner_size %d is not whole v heads of ssm.time_step_rank %d, or these not "
                         "a multiple of ssm.group_count %d q/k heads", gguf_path(r->f), r->arch, hp->ssm_d_inner,
                         hp->ssm_n_head, hp->ssm_n_group);
    if (hp->conv_kernel < 2 || hp->conv_kernel > 64 || hp->ssm_d_inner > (1 << 20) || hp->ssm_d_state > 4096)
        return error_set("%s: %s.ssm.* sizes out of range", gguf_path(r->f), r->arch);
    for (int32_t il = 0; il < hp->n_layer; il++) hp->layer_recurrent[il] = (il + 1) % every != 0;
    return 0;
}

static int qwen35_hparams(model_hparams *hp, const model_hp_reader *r) { return deltanet_hparams(hp, r, 0); }

static int64_t qwen35_state(const model_hparams *hp, int32_t il) {
    if (!hp->layer_recurrent[il]) return 0;
    const int64_t H = hp->ssm_n_head, Dv = hp->ssm_d_inner / H, Dk = hp->ssm_d_state;
    const int64_t qkv = 2 * (int64_t)hp->ssm_n_group * Dk + H * Dv;
    return (int64_t)(hp->conv_kernel - 1) * qkv + Dv * Dk * H;
}

/* fused: qwen3next's DeltaNet projections, grouped per q/k head
 * (blk_deltanet): beta|alpha in ssm_ba, and q|k|v|z in ssm_in unless the
 * file has qwen35's attn_qkv (then with attn_gate), which llama.cpp reads
 * first when a file has both */
static void deltanet_tensors(model_loader *ld, model *m, bool fused) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, D = hp->head_dim, Q = D * hp->n_head, KV = D * hp->n_head_kv;
    const int64_t H = hp->ssm_n_head, Dv = hp->ssm_d_inner / H, Dk = hp->ssm_d_state;
    const int64_t QKV = 2 * (int64_t)hp->ssm_n_group * Dk + H * Dv;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->attn_norm = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.attn_norm.weight");
        if (hp->n_expert > 0) /* qwen35moe's shared expert is scaled by sigmoid(this . x) */
            L->ffn_gate_inp_shexp = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.ffn_gate_inp_shexp.weight");
        if (!hp->layer_recurrent[il]) {
            L->wq = model_tensor(ld, il, 0, 2, E, 2 * Q, "blk.%d.attn_q.weight"); /* q and its gate */
            L->wk = model_tensor(ld, il, 0, 2, E, KV, "blk.%d.attn_k.weight");
            L->wv = model_tensor(ld, il, 0, 2, E, KV, "blk.%d.attn_v.weight");
            L->wo = model_tensor(ld, il, 0, 2, Q, E, "blk.%d.attn_output.weight");
            L->q_norm = model_tensor(ld, il, 0, 1, D, 1, "blk.%d.attn_q_norm.weight");
            L->k_norm = model_tensor(ld, il, 0, 1, D, 1, "blk.%d.attn_k_norm.weight");
            continue;
        }
        L->wqkv = model_tensor(ld, il, fused ? MODEL_TENSOR_OPTIONAL : 0, 2, E, QKV, "blk.%d.attn_qkv.weight");
        if (L->wqkv || !fused)
            L->attn_gate = model_tensor(ld, il, 0, 2, E, H * Dv, "blk.%d.attn_gate.weight");
        else
            L->ssm_in = model_tensor(ld, il, 0, 2, E, QKV + H * Dv, "blk.%d.ssm_in.weight");
        if (fused) {
            L->ssm_ba = model_tensor(ld, il, 0, 2, E, 2 * H, "blk.%d.ssm_ba.weight");
        } else {
            L->ssm_beta = model_tensor(ld, il, 0, 2, E, H, "blk.%d.ssm_beta.weight");
            L->ssm_alpha = model_tensor(ld, il, 0, 2, E, H, "blk.%d.ssm_alpha.weight");
        }
        L->ssm_conv1d = model_tensor(ld, il, 0, 2, hp->conv_kernel, QKV, "blk.%d.ssm_conv1d.weight");
        L->ssm_dt_b = model_tensor(ld, il, 0, 1, H, 1, "blk.%d.ssm_dt.bias");
        L->ssm_a = model_tensor(ld, il, 0, 1, H, 1, "blk.%d.ssm_a");
        L->ssm_norm = model_tensor(ld, il, 0, 1, Dv, 1, "blk.%d.ssm_norm.weight");
        L->ssm_out = model_tensor(ld, il, 0, 2, H * Dv, E, "blk.%d.ssm_out.weight");
    }
}

static void qwen35_tensors(model_loader *ld, model *m) { deltanet_tensors(ld, m, false); }

/* Gated attention: Wq gives per head D values of q, then D of the gate;
 * the attention's output times sigmoid(gate), then Wo. [E, T]. */
static graph_tensor *gated_attention(model_build *b, int il, graph_tensor *h) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    const int64_t D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv, T = b->io->n_tokens;
    const uint64_t f = sizeof(float);
    graph_tensor *qg = blk_linear(b, L->wq, NULL, h); /* [2*D*H, T] */
    if (!qg) return NULL;
    graph_tensor *q = graph_cont(g, graph_view_3d(g, qg, D, H, T, 2 * D * f, qg->t.nb[1], 0));
    graph_tensor *gate = graph_cont(g, graph_view_3d(g, qg, D, H, T, 2 * D * f, qg->t.nb[1], D * f));
    graph_tensor *k = graph_reshape_3d(g, blk_linear(b, L->wk, NULL, h), D, Hkv, T);
    graph_tensor *v = blk_linear(b, L->wv, NULL, h);
    q = blk_rms_norm(b, q, L->q_norm, "q_norm", il);
    k = blk_rms_norm(b, k, L->k_norm, "k_norm", il);
    q = blk_rope(b, q, il);
    k = blk_rope(b, k, il); /* right before blk_attention's copy of k (see blk_self_attention) */
    graph_tensor *att = blk_attention(b, il, q, k, v, 1.0f / sqrtf((float)D)); /* [D*H, T] */
    att = graph_mul(g, att, graph_sigmoid(g, graph_reshape_2d(g, gate, D * H, T)));
    return blk_linear(b, L->wo, NULL, att);
}

/* kv_tiled: v head h reads q/k head h % Hk (qwen35), or h / (H / Hk)
 * (qwen3next, whose v heads are grouped by their q/k head) */
static graph_tensor *deltanet_hybrid_build(model_build *b, bool kv_tiled) {
    graph *g = b->g;
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < b->hp->n_layer; il++) {
        const model_layer *L = &b->m->layers[il];
        graph_tensor *h = blk_rms_norm(b, x, L->attn_norm, "attn_norm", il);
        h = b->hp->layer_recurrent[il] ? blk_deltanet(b, il, h, kv_tiled) : gated_attention(b, il, h);
        x = graph_add(g, h, x);
        h = blk_rms_norm(b, x, L->ffn_norm, "ffn_norm", il);
        x = graph_add(g, blk_ffn(b, il, h, BLK_FFN_SILU), x);
        if (x) graph_tensor_set_name(x, "l_out-%d", il);
    }
    return blk_logits(b, x);
}

static graph_tensor *qwen35_build(model_build *b) { return deltanet_hybrid_build(b, true); }

const model_arch_desc arch_qwen35 = {
    .name = "qwen35",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen35_hparams,
    .tensor_sets = MODEL_SET_FFN | MODEL_SET_FFN_POST_ATTN_NORM,
    .tensors = qwen35_tensors,
    .build = qwen35_build,
    .state_floats = qwen35_state,
};

/* qwen35moe: qwen35's blocks with qwen3moe's experts (softmax router, the
 * chosen weights renormalised, expert_feed_forward_length wide) and a
 * shared expert scaled by sigmoid(ffn_gate_inp_shexp . x), as qwen2moe's. */
static int moe_keys(model_hparams *hp, const model_hp_reader *r) {
    if (arch_moe_family(hp, r, true, true)) return -1;
    if (!model_hp_has(r, "expert_feed_forward_length") || hp->n_ff_shexp == 0)
        return error_set("%s: key '%s.%s' not found (a %s file has it)", gguf_path(r->f), r->arch,
                         hp->n_ff_shexp == 0 ? "expert_shared_feed_forward_length" : "expert_feed_forward_length",
                         r->arch);
    return 0;
}

static int qwen35moe_hparams(model_hparams *hp, const model_hp_reader *r) {
    return deltanet_hparams(hp, r, 0) || moe_keys(hp, r) ? -1 : 0;
}

const model_arch_desc arch_qwen35moe = {
    .name = "qwen35moe",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen35moe_hparams,
    .tensor_sets = MODEL_SET_FFN | MODEL_SET_FFN_POST_ATTN_NORM,
    .tensors = qwen35_tensors,
    .build = qwen35_build,
    .state_floats = qwen35_state,
};

/* qwen3next: Qwen3-Next (80B-A3B), qwen35moe's graph as llama.cpp runs it
 * but for the DeltaNet's projections, fused per q/k head g as the Hugging
 * Face checkpoint has them: ssm_ba's rows are, for each g, beta then alpha
 * of its H / Hk v heads; ssm_in's, q [Dk], k [Dk], then v and z [Dv] of
 * those heads (or attn_qkv and attn_gate as qwen35's, which llama.cpp
 * also reads). Either way v head h reads q/k head h / (H / Hk), not
 * qwen35's h % Hk. Without full_attention_interval every 4th block
 * attends, as llama.cpp does; no rope sections (text only). */
static int qwen3next_hparams(model_hparams *hp, const model_hp_reader *r) {
    if (deltanet_hparams(hp, r, 4) || moe_keys(hp, r)) return -1;
    /* llama.cpp sizes a v head as a q/k head (ssm.state_size), whatever
     * inner_size says: a file where they differ is not one it reads */
    if (hp->ssm_d_inner != hp->ssm_n_head * hp->ssm_d_state)
        return error_set("%s: %s.ssm.inner_size %d is not ssm.time_step_rank %d v heads of ssm.state_size %d "
                         "(a qwen3next v head is as wide as a q/k head)", gguf_path(r->f), r->arch, hp->ssm_d_inner,
                         hp->ssm_n_head, hp->ssm_d_state);
    return 0;
}

static void qwen3next_tensors(model_loader *ld, model *m) { deltanet_tensors(ld, m, true); }

static graph_tensor *qwen3next_build(model_build *b) { return deltanet_hybrid_build(b, false); }

const model_arch_desc arch_qwen3next = {
    .name = "qwen3next",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen3next_hparams,
    .tensor_sets = MODEL_SET_FFN | MODEL_SET_FFN_POST_ATTN_NORM,
    .tensors = qwen3next_tensors,
    .build = qwen3next_build,
    .state_floats = qwen35_state,
};
