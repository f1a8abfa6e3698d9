/*
 * qwen3 — Qwen3 dense models: the llama block with an RMS norm on every
 * query and key head (over its D values, before rope), NeoX rope, and a head
 * size of its own (attention.key_length, not embedding / heads).
 */
#include "model/arch/arch.h"

static void qwen3_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        arch_attn_tensors(ld, m, il);
        arch_qk_norm_tensors(ld, m, il);
        arch_ffn_tensors(ld, m, il);
    }
}

const model_arch_desc arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = TSR_ROPE_NEOX,
    .tensors = qwen3_tensors,
    .build = arch_llama_build, /* the llama graph: the differences are in the tensors */
};
