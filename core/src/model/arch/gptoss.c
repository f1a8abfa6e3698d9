/*
 * gpt-oss — OpenAI's gpt-oss-20b and gpt-oss-120b (llama.cpp's "gpt-oss").
 *
 *   for each layer (even layers attend through a sliding window of
 *   attention.sliding_window positions, odd ones see the whole context):
 *     h = rms_norm(x) * attn_norm
 *     q = Wq h + bq, k = Wk h + bk, v = Wv h + bv; rope (NeoX, YaRN)
 *     a = softmax over [q.K / sqrt(D) + mask, sink_h], the sink dropped, times V
 *     x = x + Wo a + bo
 *     h = rms_norm(x) * post_attention_norm
 *     l = router h + router_b; the top expert_used_count logits e,
 *     w = softmax over those logits only
 *     x = x + sum_e w_e (down_e(swiglu_oai(gate_e h + bg_e, up_e h + bu_e)) + bd_e)
 *   logits = output (rms_norm(x) * output_norm)
 *
 * The sinks are one learned logit per head (attn_sinks) that joins every
 * softmax row and takes a share of it, so a head can attend to nothing.
 * swiglu_oai (Hugging Face's GptOssExperts, alpha 1.702, limit 7):
 *   g = min(gate, 7), u = clamp(up, -7, 7), g * sigmoid(1.702 g) * (u + 1)
 * YaRN stretches every layer's rope, the windowed ones' too. The experts
 * are MXFP4 in OpenAI's files (any weight type works here).
 */
#include "model/arch/arch.h"
#include "util/error.h"

enum { GPTOSS_SWA_PATTERN = 2 }; /* layers 0, 2, 4, ... windowed; 1, 3, 5, ... full */

static int gptoss_hparams(model_hparams *hp, const model_hp_reader *r) {
    if (arch_moe_family(hp, r, false, false)) return -1;
    hp->moe_gating = MODEL_MOE_SOFTMAX_WEIGHT;
    hp->swiglu_alpha = 1.702f;
    hp->swiglu_limit = 7.0f;
    if (model_hp_int(r, "attention.sliding_window", &hp->n_swa)) return -1;
    hp->swa_pattern = GPTOSS_SWA_PATTERN;
    hp->rope_freq_scale_swa = hp->rope_freq_scale;
    return 0;
}

static void gptoss_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, X = hp->n_expert, Fx = hp->n_ff_exp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->bo = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.attn_output.bias");
        L->attn_sinks = model_tensor(ld, il, 0, 1, hp->n_head, 1, "blk.%d.attn_sinks.weight");
        L->ffn_norm = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.post_attention_norm.weight");
        L->ffn_gate_inp = model_tensor(ld, il, 0, 2, E, X, "blk.%d.ffn_gate_inp.weight");
        L->ffn_gate_inp_b = model_tensor(ld, il, 0, 1, X, 1, "blk.%d.ffn_gate_inp.bias");
        L->ffn_gate_exps = model_tensor_3d(ld, il, 0, E, Fx, X, "blk.%d.ffn_gate_exps.weight");
        L->ffn_up_exps = model_tensor_3d(ld, il, 0, E, Fx, X, "blk.%d.ffn_up_exps.weight");
        L->ffn_down_exps = model_tensor_3d(ld, il, 0, Fx, E, X, "blk.%d.ffn_down_exps.weight");
        L->ffn_gate_exps_b = model_tensor(ld, il, 0, 2, Fx, X, "blk.%d.ffn_gate_exps.bias");
        L->ffn_up_exps_b = model_tensor(ld, il, 0, 2, Fx, X, "blk.%d.ffn_up_exps.bias");
        L->ffn_down_exps_b = model_tensor(ld, il, 0, 2, E, X, "blk.%d.ffn_down_exps.bias");
        L->swa = model_layer_is_swa(hp, il);
    }
}

const model_arch_desc arch_gptoss = {
    .name = "gpt-oss",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = gptoss_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QKV_BIAS,
    .tensors = gptoss_tensors,
    .build = arch_llama_build,
};
