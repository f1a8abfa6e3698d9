/*
 * granite — IBM Granite 3.x dense models: the llama block with four
 * multipliers from the file; granitemoe — Granite 3.x MoE (1B-A400M,
 * 3B-A800M; GraniteMoeShared's files too): the same block with every FFN
 * an MoE one (softmax router, the chosen experts' weights renormalised,
 * experts feed_forward_length wide), and a shared expert beside them when
 * expert_shared_feed_forward_length says so.
 *
 *   x = token_embd[tokens] * embedding_scale
 *   for each layer:
 *     x = x + residual_scale * Wo softmax(attention.scale * q.K + mask) V
 *     x = x + residual_scale * ffn(rms_norm(x))
 *   logits = (Wout rms_norm(x)) / logit_scale
 *
 * The four keys are required (llama.cpp refuses a granite file without
 * them) and must be positive. rope.scaling.finetuned = false turns rope off
 * in every layer (Granite's switch for position-free variants; absent:
 * rope on).
 */
#include <math.h>
#include <stdio.h>

#include "model/arch/arch.h"
#include "util/error.h"

/* A required, positive "<arch>.<suffix>". */
static int granite_scale(const model_hp_reader *r, const char *suffix, float *out) {
    if (!model_hp_has(r, suffix))
        return error_set("%s: key '%s.%s' not found (a granite file needs it)", gguf_path(r->f), r->arch, suffix);
    float v = NAN;
    if (model_hp_f32_opt(r, suffix, &v)) return -1;
    if (!(v > 0.0f))
        return error_set("%s: key '%s.%s' = %g must be positive", gguf_path(r->f), r->arch, suffix, v);
    *out = v;
    return 0;
}

static int granite_hparams(model_hparams *hp, const model_hp_reader *r) {
    float logit_scale = 1.0f;
    if (granite_scale(r, "embedding_scale", &hp->embd_scale) ||
        granite_scale(r, "residual_scale", &hp->residual_scale) ||
        granite_scale(r, "attention.scale", &hp->attn_scale) || granite_scale(r, "logit_scale", &logit_scale))
        return -1;
    hp->logit_scale = 1.0f / logit_scale; /* blk_logits multiplies */
    return 0;
}

static int granitemoe_hparams(model_hparams *hp, const model_hp_reader *r) {
    return granite_hparams(hp, r) || arch_moe_family(hp, r, true, true) ? -1 : 0;
}

static void granite_tensors(model_loader *ld, model *m) {
    model_hp_reader r = {.f = m->file};
    snprintf(r.arch, sizeof r.arch, "%s", m->hp.arch->name);
    bool use_rope = true;
    if (!ld->failed && model_hp_bool_opt(&r, "rope.scaling.finetuned", &use_rope) != 0) ld->failed = 1;
    for (int32_t il = 0; il < m->hp.n_layer; il++) m->layers[il].no_rope = !use_rope;
}

const model_arch_desc arch_granite = {
    .name = "granite",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = granite_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_FFN,
    .tensors = granite_tensors,
    .build = arch_llama_build, /* blk_prenorm_layer applies the multipliers */
};

const model_arch_desc arch_granitemoe = {
    .name = "granitemoe",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = granitemoe_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_FFN,
    .tensors = granite_tensors,
    .build = arch_llama_build,
};
