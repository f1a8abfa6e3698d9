/*
 * qwen2moe — Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B: qwen2's attention (q/k/v
 * biases, NeoX rope) with every FFN an MoE one whose chosen experts keep
 * their softmax probabilities (not renormalised), plus a shared expert
 * scaled by its own sigmoid gate:
 *
 *   x = x + sum_e p_e expert_e(h) + sigmoid(gate_inp_shexp . h) shexp(h)
 *
 * Experts are expert_feed_forward_length wide, the shared one
 * expert_shared_feed_forward_length (both required).
 */
#include "model/arch/arch.h"
#include "util/error.h"

static int qwen2moe_hparams(model_hparams *hp, const model_hp_reader *r) {
    if (arch_moe_family(hp, r, false, true)) return -1;
    if (!model_hp_has(r, "expert_feed_forward_length") || hp->n_ff_shexp == 0)
        return error_set("%s: key '%s.%s' not found (a qwen2moe file has it)", gguf_path(r->f), r->arch,
                         hp->n_ff_shexp == 0 ? "expert_shared_feed_forward_length" : "expert_feed_forward_length");
    return 0;
}

static void qwen2moe_tensors(model_loader *ld, model *m) {
    for (int32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].ffn_gate_inp_shexp =
            model_tensor(ld, il, 0, 1, m->hp.n_embd, 1, "blk.%d.ffn_gate_inp_shexp.weight");
}

const model_arch_desc arch_qwen2moe = {
    .name = "qwen2moe",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen2moe_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QKV_BIAS | MODEL_SET_FFN,
    .tensors = qwen2moe_tensors,
    .build = arch_llama_build,
};
