/*
 * qwen2 — Qwen2 / Qwen2.5: the llama block with biases on the q, k and v
 * projections and NeoX-style rotary pairs (i, i + n_rot/2).
 */
#include "model/arch/arch.h"

const model_arch_desc arch_qwen2 = {
    .name = "qwen2",
    .rope_mode = TSR_ROPE_NEOX,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QKV_BIAS | MODEL_SET_FFN,
    .build = arch_llama_build, /* the llama graph: the differences are in the tensors */
};
