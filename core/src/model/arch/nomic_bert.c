/*
 * nomic-bert — Nomic Embed text encoders (nomic-embed-text v1, v1.5).
 *
 * The post-norm encoder of arch/bert.c with three differences: positions
 * are rotary (NeoX, rope.freq_base) instead of learned, q/k/v come from
 * one fused attn_qkv, and the FFN is SwiGLU: Wdown (silu(Wgate x) * Wup x).
 */
#include "model/arch/arch.h"

static void nomic_bert_tensors(model_loader *ld, model *m) { arch_encoder_tensors(ld, m, false, true); }

const model_arch_desc arch_nomic_bert = {
    .name = "nomic-bert",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = arch_encoder_hparams,
    .tensors = nomic_bert_tensors,
    .build = arch_encoder_build,
};
