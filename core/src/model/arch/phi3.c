/*
 * phi3 — Phi-3 / Phi-3.5 / Phi-4-mini: the llama block with fused weights
 * and partial rotary embeddings.
 *
 *   q|k|v = Wqkv h          (one [E, D*H + 2*D*Hkv] matrix, rows in that order)
 *   gate|up = Wup h         (one [E, 2*F] matrix, gate rows first)
 *   rope turns only the first rope.dimension_count dims of each head (NeoX
 *   pairs); LongRoPE files carry per-frequency factors, short ones within
 *   the original context and long ones beyond it.
 *   q is scaled by 1/sqrt(D) before the product, as llama.cpp does.
 */
#include "model/arch/arch.h"

static int phi3_hparams(model_hparams *hp, const model_hp_reader *r) {
    (void)r;
    hp->attn_scale_q = true;
    return 0;
}

static void phi3_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    const int64_t n_q = (int64_t)hp->head_dim * hp->n_head, n_kv = (int64_t)hp->head_dim * hp->n_head_kv;
    m->rope_long = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 1, hp->n_rot / 2, 1, "rope_factors_long.weight");
    m->rope_short = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 1, hp->n_rot / 2, 1, "rope_factors_short.weight");
    if (m->rope_long && !m->rope_short) m->rope_short = m->rope_long;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->attn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1, "blk.%d.attn_norm.weight");
        L->wqkv = model_tensor(ld, il, 0, 2, hp->n_embd, n_q + 2 * n_kv, "blk.%d.attn_qkv.weight");
        L->wo = model_tensor(ld, il, 0, 2, n_q, hp->n_embd, "blk.%d.attn_output.weight");
        L->ffn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1, "blk.%d.ffn_norm.weight");
        L->ffn_up = model_tensor(ld, il, 0, 2, hp->n_embd, 2 * (int64_t)hp->n_ff, "blk.%d.ffn_up.weight");
        L->ffn_down = model_tensor(ld, il, 0, 2, hp->n_ff, hp->n_embd, "blk.%d.ffn_down.weight");
    }
}

const model_arch_desc arch_phi3 = {
    .name = "phi3",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = phi3_hparams,
    .tensors = phi3_tensors,
    .build = arch_llama_build, /* blk_qkv and blk_ffn split the fused weights */
};
