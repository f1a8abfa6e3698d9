/*
 * llama — Llama 2/3, TinyLlama, SmolLM2, Mistral 7B (no sliding window),
 * and Mixtral (llama with expert_count: every FFN an MoE one, softmax
 * router, the chosen experts' weights renormalised, blk_moe_ffn).
 *
 *   x = token_embd[tokens]                                  [E, T]
 *   for each layer:
 *     h = rms_norm(x) * attn_norm
 *     q, k, v = Wq h, Wk h, Wv h; q, k = rope(q), rope(k)
 *     x = x + Wo softmax(q.K / sqrt(D) + causal mask) V
 *     h = rms_norm(x) * ffn_norm
 *     x = x + Wdown (silu(Wgate h) * Wup h)
 *   logits = Wout (rms_norm(x) * output_norm)
 */
#include "model/arch/arch.h"

graph_tensor *arch_llama_build(model_build *b) {
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < b->hp->n_layer; il++) x = blk_prenorm_layer(b, il, x, BLK_FFN_SILU);
    return blk_logits(b, x);
}

/* Mixtral's routing, when the file has experts. */
static int llama_hparams(model_hparams *hp, const model_hp_reader *r) {
    (void)r;
    hp->moe_norm_w = true;
    return 0;
}

const model_arch_desc arch_llama = {
    .name = "llama",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = llama_hparams,
    .tensor_sets = MODEL_SET_ROPE_FREQS | MODEL_SET_ATTN | MODEL_SET_FFN,
    .build = arch_llama_build,
};
