/*
 * qwen2 — Qwen2 / Qwen2.5: the llama block with biases on the q, k and v
 * projections and NeoX-style rotary pairs (i, i + n_rot/2).
 */
#include "model/arch/arch.h"

static void qwen2_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    const int64_t n_q = (int64_t)hp->head_dim * hp->n_head, n_kv = (int64_t)hp->head_dim * hp->n_head_kv;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        arch_attn_tensors(ld, m, il);
        L->bq = model_tensor(ld, il, 0, 1, n_q, 1, "blk.%d.attn_q.bias");
        L->bk = model_tensor(ld, il, 0, 1, n_kv, 1, "blk.%d.attn_k.bias");
        L->bv = model_tensor(ld, il, 0, 1, n_kv, 1, "blk.%d.attn_v.bias");
        arch_ffn_tensors(ld, m, il);
    }
}

const model_arch_desc arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = TSR_ROPE_NEOX,
    .tensors = qwen2_tensors,
    .build = arch_llama_build, /* the llama graph: the differences are in the tensors */
};
