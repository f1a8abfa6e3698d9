/*
 * mistral3 — the text model of Ministral 3 and Mistral Small 3.x as
 * llama.cpp names it: the llama block (its own head size possible,
 * attention.key_length), YaRN rope, and Llama-4-style query temperature.
 *
 *   q = rope_yarn(Wq h) * (1 + temperature_scale * log(1 + floor(p / L)))
 *
 * at position p, with L = rope.scaling.original_context_length (the
 * training context before YaRN's stretch; the context length when absent).
 * attention.temperature_scale absent or 0: no temperature.
 *
 * YaRN's magnitude: ggml's rope multiplies cos/sin by attn_factor times
 * (1 + 0.1 ln s) for a stretch s. Hugging Face's YaRN with mscale 1 and
 * mscale_all_dim m (rope.scaling.yarn_log_multiplier) wants
 * (1 + 0.1 ln s) / (1 + 0.1 m ln s) instead, so attn_factor is divided by
 * (1 + 0.1 m ln s), as llama.cpp does (Ministral 3 has m = 1: magnitude 1).
 */
#include <math.h>
#include <stdio.h>

#include "model/arch/arch.h"
#include "util/error.h"

static int mistral3_hparams(model_hparams *hp, const model_hp_reader *r) {
    const char *path = gguf_path(r->f);
    float log_mul = 0.0f;
    if (model_hp_f32_opt(r, "rope.scaling.yarn_log_multiplier", &log_mul) ||
        model_hp_f32_opt(r, "attention.temperature_scale", &hp->attn_temp_scale))
        return -1;
    if (log_mul < 0.0f)
        return error_set("%s: key '%s.rope.scaling.yarn_log_multiplier' = %g must not be negative", path, r->arch,
                         log_mul);
    if (hp->attn_temp_scale < 0.0f)
        return error_set("%s: key '%s.attention.temperature_scale' = %g must not be negative", path, r->arch,
                         hp->attn_temp_scale);
    const float stretch = 1.0f / hp->rope_freq_scale;
    if (hp->rope_scaling == MODEL_ROPE_SCALING_YARN && log_mul != 0.0f && stretch > 1.0f)
        hp->yarn_attn_factor /= 1.0f + 0.1f * log_mul * logf(stretch);
    hp->attn_temp_floor = hp->n_ctx_orig;
    hp->attn_temp_offset = 0;
    return 0;
}

/* llama.cpp also accepts per-matrix scales (blk.N.attn_q.scale, ...: weights
 * kept as stored in an FP8 checkpoint); a file with them would be computed
 * wrongly here, so it is refused. */
static int mistral3_no_scales(const model *m) {
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    char name[64];
    for (int32_t il = 0; il < m->hp.n_layer; il++)
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.scale", il, mats[i]);
            if (gguf_find_tensor(m->file, name))
                return error_set("%s: tensor '%s': per-matrix scales are not supported", gguf_path(m->file), name);
        }
    return 0;
}

static void mistral3_tensors(model_loader *ld, model *m) {
    if (!ld->failed && mistral3_no_scales(m) != 0) ld->failed = 1;
}

const model_arch_desc arch_mistral3 = {
    .name = "mistral3",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = mistral3_hparams,
    .tensor_sets = MODEL_SET_ROPE_FREQS | MODEL_SET_ATTN | MODEL_SET_FFN,
    .tensors = mistral3_tensors,
    .build = arch_llama_build, /* blk_attention applies io->attn_temp */
};
