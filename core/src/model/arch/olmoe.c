/*
 * olmoe — AllenAI's OLMoE (OLMoE-1B-7B): the llama block with an RMS norm
 * over the whole query and key rows (attn_q_norm [heads x head size],
 * attn_k_norm [KV heads x head size], before the heads are split and
 * roped), NeoX rope, and every FFN an MoE one whose chosen experts keep
 * their softmax probabilities as weights (not renormalised):
 *
 *   p = softmax(router h); x = x + sum over the top expert_used_count e of
 *   p_e down_e(silu(gate_e h) * up_e h)
 *
 * The experts are feed_forward_length wide.
 */
#include "model/arch/arch.h"

static int olmoe_hparams(model_hparams *hp, const model_hp_reader *r) {
    return arch_moe_family(hp, r, false, false);
}

static void olmoe_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->q_norm = model_tensor(ld, il, 0, 1, (int64_t)hp->head_dim * hp->n_head, 1, "blk.%d.attn_q_norm.weight");
        L->k_norm =
            model_tensor(ld, il, 0, 1, (int64_t)hp->head_dim * hp->n_head_kv, 1, "blk.%d.attn_k_norm.weight");
    }
}

const model_arch_desc arch_olmoe = {
    .name = "olmoe",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = olmoe_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_FFN,
    .tensors = olmoe_tensors,
    .build = arch_llama_build,
};
