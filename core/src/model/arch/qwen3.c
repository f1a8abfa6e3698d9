/*
 * qwen3 — Qwen3 dense models: the llama block with an RMS norm on every
 * query and key head (over its D values, before rope), NeoX rope, and a head
 * size of its own (attention.key_length, not embedding / heads).
 */
#include "model/arch/arch.h"

const model_arch_desc arch_qwen3 = {
    .name = "qwen3",
    .rope_mode = TSR_ROPE_NEOX,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QK_NORM | MODEL_SET_FFN,
    .build = arch_llama_build, /* the llama graph: the differences are in the tensors */
};
