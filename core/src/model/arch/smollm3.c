/*
 * smollm3 — SmolLM3: the llama block, with no rotary embedding ("NoPE") in
 * every fourth layer (layers 3, 7, 11, ...: their q and k are not rotated).
 *
 * The GGUF file does not say which layers skip rope: llama.cpp's converter
 * writes no key for it and its loader fixes the step at 4, the interval of
 * the published configs (no_rope_layer_interval = 4, no_rope_layers a 0/1
 * list with the 0s at (il + 1) % 4 == 0). Rope is normal (adjacent pairs):
 * the converter permutes q and k rows as it does for llama.
 */
#include "model/arch/arch.h"

enum { SMOLLM3_NO_ROPE_STEP = 4 };

static void smollm3_tensors(model_loader *ld, model *m) {
    (void)ld; /* the layers' tensors are the sets of the descriptor */
    for (int32_t il = 0; il < m->hp.n_layer; il++) m->layers[il].no_rope = (il + 1) % SMOLLM3_NO_ROPE_STEP == 0;
}

const model_arch_desc arch_smollm3 = {
    .name = "smollm3",
    .rope_mode = TSR_ROPE_NORMAL,
    .tensor_sets = MODEL_SET_ROPE_FREQS | MODEL_SET_ATTN | MODEL_SET_FFN,
    .tensors = smollm3_tensors,
    .build = arch_llama_build, /* blk_rope leaves the no_rope layers alone */
};
