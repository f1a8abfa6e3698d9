/*
 * qwen3moe — Qwen3 mixture-of-experts models (Qwen3-30B-A3B, 235B-A22B,
 * Qwen3-Coder-30B-A3B): qwen3's attention (per-head q/k norms, NeoX rope,
 * head size from key_length) with every FFN an MoE one (blk_moe_ffn):
 *
 *   p = softmax(router h); w = the top expert_used_count of p, divided by
 *   their sum; x = x + sum_e w_e down_e(silu(gate_e h) * up_e h)
 *
 * The experts are expert_feed_forward_length wide; a file without that key
 * gets feed_forward_length / expert_used_count, as llama.cpp does. No
 * shared expert.
 */
#include "model/arch/arch.h"

static int qwen3moe_hparams(model_hparams *hp, const model_hp_reader *r) {
    if (arch_moe_family(hp, r, true, false)) return -1;
    if (!model_hp_has(r, "expert_feed_forward_length") && hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    return 0;
}

const model_arch_desc arch_qwen3moe = {
    .name = "qwen3moe",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = qwen3moe_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QK_NORM | MODEL_SET_FFN,
    .build = arch_llama_build,
};
