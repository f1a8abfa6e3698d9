/*
 * gemma3 — Gemma 3 text models (270M, 1B, ...).
 *
 *   x = token_embd[tokens] * sqrt(E)
 *   for each layer (5 of every 6 attend through a sliding window of n_swa
 *   positions with their own rope base; every 6th sees the whole context):
 *     h = rms_norm(x) * attn_norm
 *     q = rms_norm_per_head(Wq h) * q_norm, k likewise, v = Wv h; rope (NeoX)
 *     a = Wo softmax((q * attn_scale).K + mask) V
 *     x = x + rms_norm(a) * post_attention_norm
 *     h = rms_norm(x) * ffn_norm
 *     f = Wdown (gelu(Wgate h) * Wup h)
 *     x = x + rms_norm(f) * post_ffw_norm
 *   logits = token_embd (rms_norm(x) * output_norm)         (tied)
 *
 * The norm weights in GGUF files already include Gemma's "1 +".
 * attn_scale is 1/sqrt(attention.query_pre_attn_scalar), by default
 * 1/sqrt(head size); q is scaled before the product, as llama.cpp does.
 */
#include <math.h>

#include "model/arch/arch.h"
#include "util/error.h"

enum { GEMMA3_SWA_PATTERN = 6 }; /* every 6th layer is global */

static int gemma3_hparams(model_hparams *hp, const model_hp_reader *r) {
    hp->n_swa = 0;
    if (model_hp_int_opt(r, "attention.sliding_window", &hp->n_swa)) return -1;
    hp->swa_pattern = GEMMA3_SWA_PATTERN;
    hp->rope_freq_base_swa = 10000.0f; /* rope_local_base_freq of the published configs */
    if (model_hp_f32_opt(r, "rope.freq_base_swa", &hp->rope_freq_base_swa)) return -1;
    int32_t pre_attn = hp->head_dim;
    if (model_hp_int_opt(r, "attention.query_pre_attn_scalar", &pre_attn)) return -1;
    hp->attn_scale = 1.0f / sqrtf((float)pre_attn);
    hp->attn_scale_q = true;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    float softcap = 0.0f;
    if (model_hp_f32_opt(r, "final_logit_softcapping", &softcap)) return -1;
    if (softcap > 0.0f)
        return error_set("%s: %s.final_logit_softcapping is not supported yet", gguf_path(r->f), r->arch);
    return 0;
}

static void gemma3_tensors(model_loader *ld, model *m) {
    const model_hparams *hp = &m->hp;
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->post_attn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1, "blk.%d.post_attention_norm.weight");
        L->post_ffn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1, "blk.%d.post_ffw_norm.weight");
        L->swa = model_layer_is_swa(hp, il);
    }
}

static graph_tensor *gemma3_build(model_build *b) {
    graph *g = b->g;
    const model_hparams *hp = b->hp;
    graph_tensor *x = blk_embed(b);
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &b->m->layers[il];
        graph_tensor *h = blk_rms_norm(b, x, L->attn_norm, "attn_norm", il);
        graph_tensor *a = blk_self_attention(b, il, h);
        x = graph_add(g, blk_rms_norm(b, a, L->post_attn_norm, "attn_post_norm", il), x);

        h = blk_rms_norm(b, x, L->ffn_norm, "ffn_norm", il);
        graph_tensor *f = blk_ffn(b, il, h, BLK_FFN_GELU);
        x = graph_add(g, blk_rms_norm(b, f, L->post_ffn_norm, "ffn_post_norm", il), x);
    }
    return blk_logits(b, x);
}

const model_arch_desc arch_gemma3 = {
    .name = "gemma3",
    .rope_mode = TSR_ROPE_NEOX,
    .hparams = gemma3_hparams,
    .tensor_sets = MODEL_SET_ATTN | MODEL_SET_QK_NORM | MODEL_SET_FFN,
    .tensors = gemma3_tensors,
    .build = gemma3_build,
};
