/*
 * hybrid — the recurrent architectures: LFM2 (short convolutions and
 * attention), Mamba-2 (its mixer alone) and Granite 4.0 H (`granitehybrid`:
 * Mamba-2 and attention blocks, each with a SwiGLU FFN, Granite's
 * multipliers). llama.cpp's names, keys and tensors; which blocks are
 * recurrent comes from the zeros of attention.head_count_kv (every block
 * of mamba2). Their state lives in the recurrent-state cache beside the
 * KV cache (kv.h, "Recurrent state"; the blocks are in blocks_ssm.c).
 *
 *   lfm2:           x = embd; per block: x += conv_or_attn(rms_norm(x));
 *                   x += ffn(rms_norm(x)); logits = Wembd rms_norm(x)
 *                   (token_embd_norm is the final norm; q/k norms, NeoX rope)
 *   mamba2:         x = embd; per block: x += mamba2(rms_norm(x))
 *   granitehybrid:  granite's block (embedding, residual, attention and
 *                   logit multipliers) with Mamba-2 mixers in the recurrent
 *                   blocks, and granitemoe's experts (softmax router, the
 *                   chosen weights renormalised, a shared expert) in every
 *                   block's FFN when the file has expert_count; rope in the attention blocks unless
 *                   rope.scaling.finetuned = false (as granite; llama.cpp's
 *                   golden moves by 7.6e-4 without it)
 */
#include <math.h>

#include "model/arch/arch.h"
#include "util/error.h"

/* ------------------------------------------------------------ keys */

int arch_hp_need_int(const model_hp_reader *r, const char *suffix, int32_t *out) {
    if (!model_hp_has(r, suffix))
        return error_set("%s: key '%s.%s' not found (a %s file needs it)", gguf_path(r->f), r->arch, suffix, r->arch);
    return model_hp_int(r, suffix, out);
}

static int mamba2_keys(model_hparams *hp, const model_hp_reader *r) {
    if (arch_hp_need_int(r, "ssm.conv_kernel", &hp->conv_kernel) ||
        arch_hp_need_int(r, "ssm.inner_size", &hp->ssm_d_inner) ||
        arch_hp_need_int(r, "ssm.state_size", &hp->ssm_d_state) ||
        arch_hp_need_int(r, "ssm.time_step_rank", &hp->ssm_n_head) ||
        arch_hp_need_int(r, "ssm.group_count", &hp->ssm_n_group))
        return -1;
    if (hp->ssm_d_inner % hp->ssm_n_head || hp->ssm_n_head % hp->ssm_n_group)
        return error_set("%s: %s.ssm.inner_size %d is not whole heads of ssm.time_step_rank %d in "
                         "ssm.group_count %d groups", gguf_path(r->f), r->arch, hp->ssm_d_inner, hp->ssm_n_head,
                         hp->ssm_n_group);
    if (hp->conv_kernel > 64 || hp->ssm_d_inner > (1 << 20) || hp->ssm_d_state > 4096)
        return error_set("%s: %s.ssm.* sizes out of range", gguf_path(r->f), r->arch);
    return 0;
}

static int lfm2_hparams(model_hparams *hp, const model_hp_reader *r) {
    if (arch_hp_need_int(r, "shortconv.l_cache", &hp->conv_kernel)) return -1;
    if (hp->conv_kernel < 2 || hp->conv_kernel > 64)
        return error_set("%s: lfm2.shortconv.l_cache %d is not 2..64", gguf_path(r->f), hp->conv_kernel);
    return 0;
}

static int granitehybrid_hparams(model_hparams *hp, const model_hp_reader *r) {
    float logit_scale = 1.0f;
    const char *const keys[] = {"embedding_scale", "residual_scale", "attention.scale", "logit_scale"};
    float *const vals[] = {&hp->embd_scale, &hp->residual_scale, &hp->attn_scale, &logit_scale};
    for (int i = 0; i < 4; i++) {
        if (!model_hp_has(r, keys[i])) continue; /* llama.cpp's defaults: 1 */
        if (model_hp_f32_opt(r, keys[i], vals[i])) return -1;
        if (!(*vals[i] > 0.0f))
            return error_set("%s: key '%s.%s' = %g must be positive", gguf_path(r->f), r->arch, keys[i], *vals[i]);
    }
    hp->logit_scale = 1.0f / logit_scale;
    /* Granite 4.0 H Tiny and Small: granitemoe's experts in every block */
    if (hp->n_expert > 0 && arch_moe_family(hp, r, true, true)) return -1;
    return mamba2_keys(hp, r);
}

/* ------------------------------------------------------------ state sizes */

static int64_t lfm2_state(const model_hparams *hp, int32_t il) {
    return hp->layer_recurrent[il] ? (int64_t)(hp->conv_kernel - 1) * hp->n_embd : 0;
}

static int64_t mamba2_state(const model_hparams *hp, int32_t il) {
    if (!hp->layer_recurrent[il]) return 0;
    const int64_t cc = (int64_t)hp->ssm_d_inner + 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state;
    return (int64_t)(hp->conv_kernel - 1) * cc + (int64_t)hp->ssm_d_state * hp->ssm_d_inner;
}

/* ------------------------------------------------------------ tensors */

static void attn_tensors(model_loader *ld, model *m, int32_t il, bool qk_norm) {
    const model_hparams *hp = &m->hp;
    model_layer *L = &m->layers[il];
    const int64_t q = (int64_t)hp->head_dim * hp->n_head, kv = (int64_t)hp->head_dim * hp->n_head_kv;
    L->wq = model_tensor(ld, il, 0, 2, hp->n_embd, q, "blk.%d.attn_q.weight");
    L->wk = model_tensor(ld, il, 0, 2, hp->n_embd, kv, "blk.%d.attn_k.weight");
    L->wv = model_tensor(ld, il, 0, 2, hp->n_embd, kv, "blk.%d.attn_v.weight");
    L->wo = model_tensor(ld, il, 0, 2, q, hp->n_embd, "blk.%d.attn_output.weight");
    if (qk_norm) {
        L->q_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_q_norm.weight");
        L->k_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_k_norm.weight");
    }
}

static void mamba2_tensors_of(model_loader *ld, model *m, int32_t il) {
    const model_hparams *hp = &m->hp;
    model_layer *L = &m->layers[il];
    const int64_t DI = hp->ssm_d_inner, N = hp->ssm_d_state, H = hp->ssm_n_head, G = hp->ssm_n_group;
    const int64_t CC = DI + 2 * G * N;
    L->ssm_in = model_tensor(ld, il, 0, 2, hp->n_embd, 2 * DI + 2 * G * N + H, "blk.%d.ssm_in.weight");
    L->ssm_conv1d = model_tensor(ld, il, 0, 2, hp->conv_kernel, CC, "blk.%d.ssm_conv1d.weight");
    L->ssm_conv1d_b = model_tensor(ld, il, 0, 1, CC, 1, "blk.%d.ssm_conv1d.bias");
    L->ssm_dt_b = model_tensor(ld, il, 0, 1, H, 1, "blk.%d.ssm_dt.bias");
    L->ssm_a = model_tensor(ld, il, 0, 2, 1, H, "blk.%d.ssm_a");
    L->ssm_d = model_tensor(ld, il, 0, 2, 1, H, "blk.%d.ssm_d");
    L->ssm_norm = model_tensor(ld, il, 0, 2, DI / G, G, "blk.%d.ssm_norm.weight");
    L->ssm_out = model_tensor(ld, il, 0, 2, DI, hp->n_embd, "blk.%d.ssm_out.weight");
}

static void lfm2_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    m->output_norm = model_tensor(ld, -1, 0, 1, E, 1, "token_embd_norm.weight");
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->attn_norm = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.attn_norm.weight");
        if (!hp->layer_recurrent[il]) {
            attn_tensors(ld, m, il, true);
            continue;
        }
        L->conv_in = model_tensor(ld, il, 0, 2, E, 3 * E, "blk.%d.shortconv.in_proj.weight");
        L->conv_w = model_tensor(ld, il, 0, 2, hp->conv_kernel, E, "blk.%d.shortconv.conv.weight");
        L->conv_out = model_tensor(ld, il, 0, 2, E, E, "blk.%d.shortconv.out_proj.weight");
    }
}

static void mamba2_tensors(model_loader *ld, model *m) {
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        m->layers[il].attn_norm = model_tensor(ld, il, 0, 1, m->hp.n_embd, 1, "blk.%d.attn_norm.weight");
        mamba2_tensors_of(ld, m, il);
    }
}

static void granitehybrid_tensors(model_loader *ld, model *m) {
    model_hp_reader r = {.f = m->file, .arch = "granitehybrid"};
    bool use_rope = true;
    if (!ld->failed && model_hp_bool_opt(&r, "rope.scaling.finetuned", &use_rope) != 0) ld->failed = 1;
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->attn_norm = model_tensor(ld, il, 0, 1, m->hp.n_embd, 1, "blk.%d.attn_norm.weight");
        L->no_rope = !use_rope;
        if (m->hp.layer_recurrent[il]) mamba2_tensors_of(ld, m, il);
        else attn_tensors(ld, m, il, false);
    }
}

/* ------------------------------------------------------------ graphs */

/* One pre-norm block whose mixer is attention or the recurrent block. */
static graph_tensor *hybrid_layer(model_build *b, int il, graph_tensor *x, bool ffn,
                                  graph_tensor *(*recurrent)(model_build *b, int il, graph_tensor *h)) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    const model_layer *L = &b->m->layers[il];
    graph_tensor *h = blk_rms_norm(b, x, L->attn_norm, "attn_norm", il);
    graph_tensor *o = hp->layer_recurrent[il] ? recurrent(b, il, h) : blk_self_attention(b, il, h);
    if (hp->residual_scale != 1.0f) o = graph_scale(g, o, hp->residual_scale, 0.0f);
    x = graph_add(g, o, x);
    if (!ffn) return x;
    h = blk_rms_norm(b, x, L->ffn_norm, "ffn_norm", il);
    graph_tensor *f = blk_ffn(b, il, h, BLK_FFN_SILU);
    if (hp->residual_scale != 1.0f) f = graph_scale(g, f, hp->residual_scale, 0.0f);
    x = graph_add(g, f, x);
    if (x) graph_tensor_set_name(x, "l_out-%d", il);
    return x;
}

static graph_tensor *lfm2_build(model_build *b) {
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < b->hp->n_layer; il++) x = hybrid_layer(b, il, x, true, blk_shortconv);
    return blk_logits(b, x);
}

static graph_tensor *mamba2_build(model_build *b) {
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < b->hp->n_layer; il++) x = hybrid_layer(b, il, x, false, blk_mamba2);
    return blk_logits(b, x);
}

static graph_tensor *granitehybrid_build(model_build *b) {
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < b->hp->n_layer; il++) x = hybrid_layer(b, il, x, true, blk_mamba2);
    return blk_logits(b, x);
}

const model_arch_desc arch_lfm2 = {
    .name = "lfm2",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = lfm2_hparams,
    .tensor_sets = MODEL_SET_FFN,
    .tensors = lfm2_tensors,
    .build = lfm2_build,
    .own_output_norm = true,
    .state_floats = lfm2_state,
};

const model_arch_desc arch_mamba2 = {
    .name = "mamba2",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = mamba2_keys,
    .tensors = mamba2_tensors,
    .build = mamba2_build,
    .no_attention = true,
    .state_floats = mamba2_state,
};

const model_arch_desc arch_granitehybrid = {
    .name = "granitehybrid",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = granitehybrid_hparams,
    .tensor_sets = MODEL_SET_FFN,
    .tensors = granitehybrid_tensors,
    .build = granitehybrid_build,
    .state_floats = mamba2_state,
};
