/*
 * qwen3 — Qwen3 dense models: the llama block with an RMS norm on every
 * query and key head (over its D values, before rope), NeoX rope, and a head
 * size of its own (attention.key_length, not embedding / heads).
 */
#include "model/arch/arch.h"

static void qwen3_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        arch_attn_tensors(ld, m, il);
        L->q_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_q_norm.weight");
        L->k_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_k_norm.weight");
        arch_ffn_tensors(ld, m, il);
    }
}

const model_arch_desc arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = TSR_ROPE_NEOX,
    .tensors = qwen3_tensors,
    .build = arch_llama_build, /* the llama graph: the differences are in the tensors */
};
