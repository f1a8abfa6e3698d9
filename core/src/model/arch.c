/* The architecture registry, the tensors most architectures share, and the
 * driver that builds a micro-batch graph around an architecture's builder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kv/kv.h"
#include "model/arch/arch.h"
#include "model/lora.h"
#include "util/error.h"

/* One line per architecture (general.architecture names). */
static const model_arch_desc *const model_archs[] = {
    &arch_llama, &arch_qwen2, &arch_qwen3, &arch_gemma3, &arch_phi3,
    &arch_smollm3, &arch_granite, &arch_mistral3, &arch_bert, &arch_nomic_bert,
    &arch_qwen2moe, &arch_qwen3moe, &arch_olmoe, &arch_granitemoe, &arch_gptoss,
    &arch_lfm2, &arch_mamba2, &arch_granitehybrid, &arch_qwen2vl, &arch_qwen35, &arch_qwen35moe,
    &arch_qwen3next,
};
enum { N_ARCHS = sizeof model_archs / sizeof model_archs[0] };

const char *model_arch_list(void) {
    static char list[256]; /* written once from the constant table */
    if (!list[0]) {
        size_t n = 0;
        for (int i = 0; i < N_ARCHS && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", model_archs[i]->name);
    }
    return list;
}

const model_arch_desc *model_arch_find(const char *name, size_t len) {
    for (int i = 0; i < N_ARCHS; i++)
        if (strlen(model_archs[i]->name) == len && !memcmp(model_archs[i]->name, name, len))
            return model_archs[i];
    error_set("architecture '%.*s' is not supported (supported: %s)", (int)(len > 64 ? 64 : len), name,
              model_arch_list());
    return NULL;
}

static void attn_tensors(model_loader *ld, model *m, int32_t il, unsigned sets) {
    const model_hparams *hp = &m->hp;
    model_layer *L = &m->layers[il];
    const int64_t n_q = (int64_t)hp->head_dim * hp->n_head, n_kv = (int64_t)hp->head_dim * hp->n_head_kv;
    L->attn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1, "blk.%d.attn_norm.weight");
    L->wq = model_tensor(ld, il, 0, 2, hp->n_embd, n_q, "blk.%d.attn_q.weight");
    L->wk = model_tensor(ld, il, 0, 2, hp->n_embd, n_kv, "blk.%d.attn_k.weight");
    L->wv = model_tensor(ld, il, 0, 2, hp->n_embd, n_kv, "blk.%d.attn_v.weight");
    L->wo = model_tensor(ld, il, 0, 2, n_q, hp->n_embd, "blk.%d.attn_output.weight");
    if (sets & MODEL_SET_QKV_BIAS) {
        L->bq = model_tensor(ld, il, 0, 1, n_q, 1, "blk.%d.attn_q.bias");
        L->bk = model_tensor(ld, il, 0, 1, n_kv, 1, "blk.%d.attn_k.bias");
        L->bv = model_tensor(ld, il, 0, 1, n_kv, 1, "blk.%d.attn_v.bias");
    }
    if (sets & MODEL_SET_QK_NORM) {
        L->q_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_q_norm.weight");
        L->k_norm = model_tensor(ld, il, 0, 1, hp->head_dim, 1, "blk.%d.attn_k_norm.weight");
    }
}

/* An MoE layer's FFN: the router, the stacked experts, the shared expert. */
static void moe_tensors(model_loader *ld, model *m, int32_t il) {
    const model_hparams *hp = &m->hp;
    model_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, X = hp->n_expert, Fx = hp->n_ff_exp, Fs = hp->n_ff_shexp;
    L->ffn_gate_inp = model_tensor(ld, il, 0, 2, E, X, "blk.%d.ffn_gate_inp.weight");
    /* gate and up as one tensor [E, 2 Fx, X] (gate rows, then up rows), as
     * newer converters write for some families (llama.cpp of October 2026
     * reads it for qwen35moe and qwen3next), or as two */
    L->ffn_up_exps = model_tensor_3d(ld, il, MODEL_TENSOR_OPTIONAL, E, 2 * Fx, X, "blk.%d.ffn_gate_up_exps.weight");
    if (!L->ffn_up_exps) {
        L->ffn_gate_exps = model_tensor_3d(ld, il, 0, E, Fx, X, "blk.%d.ffn_gate_exps.weight");
        L->ffn_up_exps = model_tensor_3d(ld, il, 0, E, Fx, X, "blk.%d.ffn_up_exps.weight");
    }
    L->ffn_down_exps = model_tensor_3d(ld, il, 0, Fx, E, X, "blk.%d.ffn_down_exps.weight");
    if (Fs > 0) {
        L->ffn_gate_shexp = model_tensor(ld, il, 0, 2, E, Fs, "blk.%d.ffn_gate_shexp.weight");
        L->ffn_up_shexp = model_tensor(ld, il, 0, 2, E, Fs, "blk.%d.ffn_up_shexp.weight");
        L->ffn_down_shexp = model_tensor(ld, il, 0, 2, Fs, E, "blk.%d.ffn_down_shexp.weight");
    }
}

static void ffn_tensors(model_loader *ld, model *m, int32_t il, unsigned sets) {
    const model_hparams *hp = &m->hp;
    model_layer *L = &m->layers[il];
    L->ffn_norm = model_tensor(ld, il, 0, 1, hp->n_embd, 1,
                               sets & MODEL_SET_FFN_POST_ATTN_NORM ? "blk.%d.post_attention_norm.weight"
                                                                   : "blk.%d.ffn_norm.weight");
    if (hp->n_expert > 0) {
        moe_tensors(ld, m, il);
        return;
    }
    L->ffn_gate = model_tensor(ld, il, 0, 2, hp->n_embd, hp->n_ff, "blk.%d.ffn_gate.weight");
    L->ffn_up = model_tensor(ld, il, 0, 2, hp->n_embd, hp->n_ff, "blk.%d.ffn_up.weight");
    L->ffn_down = model_tensor(ld, il, 0, 2, hp->n_ff, hp->n_embd, "blk.%d.ffn_down.weight");
}

void arch_tensor_sets(model_loader *ld, model *m, unsigned sets) {
    if (sets & MODEL_SET_ROPE_FREQS)
        m->rope_freqs = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 1, m->hp.n_rot / 2, 1, "rope_freqs.weight");
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        if (sets & MODEL_SET_ATTN) attn_tensors(ld, m, il, sets);
        if (sets & MODEL_SET_FFN) ffn_tensors(ld, m, il, sets);
    }
}

int arch_moe_family(model_hparams *hp, const model_hp_reader *r, bool norm_w, bool shared_expert) {
    if (hp->n_expert == 0)
        return error_set("%s: key '%s.expert_count' not found (a %s file has experts)", gguf_path(r->f), r->arch,
                         r->arch);
    hp->moe_gating = MODEL_MOE_SOFTMAX;
    hp->moe_norm_w = norm_w;
    if (!shared_expert) hp->n_ff_shexp = 0;
    return 0;
}

/* ------------------------------------------------------------ the graph */

int model_build_graph(const model *m, kv_cache *kv, const model_lora_set *lora, int32_t n_tokens,
                      const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, model_batch_graph *out) {
    return model_build_graph_ex(m, kv, lora, n_tokens, kv_head, n_kv, n_out, false, out);
}

int model_build_graph_ex(const model *m, kv_cache *kv, const model_lora_set *lora, int32_t n_tokens,
                         const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, bool embd_in,
                         model_batch_graph *out) {
    const model_hparams *hp = &m->hp;
    memset(out, 0, sizeof *out);
    if (n_tokens <= 0 || n_out <= 0 || n_out > n_tokens)
        return error_set("%s graph: bad batch (%d tokens, %d outputs)", hp->arch->name, n_tokens, n_out);
    for (int32_t s = 0; s < kv->n_sets; s++) {
        const int32_t size = kv_cache_set_size(kv, s);
        if (kv_head[s] < 0 || kv_head[s] + n_tokens > size || n_kv[s] < kv_head[s] + n_tokens || n_kv[s] > size)
            return error_set("%s graph: bad batch (%d tokens at cell %d of set %d, %d of %d cells attended)",
                             hp->arch->name, n_tokens, kv_head[s], s, n_kv[s], size);
        out->kv_head[s] = kv_head[s];
        out->n_kv[s] = n_kv[s];
    }
    /* a rotated cache adds 4 turns of 3 tensors per layer (blk_rotate_heads),
     * experts about 40 tensors and 2 per chosen expert (blk_moe_ffn), an
     * adapter up to 6 tensors per product, 8 products per layer and the
     * output (blk_linear) */
    const int32_t n_lora = lora ? lora->n : 0;
    const bool mrope = model_hparams_mrope(hp);
    const int32_t per_layer = 96 + (mrope ? 64 : 0) + (kv->rot_k || kv->rot_v ? 16 : 0) + (hp->n_expert ? 40 + 2 * hp->n_expert_used : 0) +
                              48 * n_lora;
    graph *g = graph_new(per_layer * hp->n_layer + 64 + 8 * n_lora);
    if (!g) return error_set("%s graph: out of memory", hp->arch->name);
    out->g = g;
    out->n_tokens = n_tokens;
    out->n_out = n_out;
    out->rs_slot = kv_cache_rs_slot(kv);

    if (embd_in) {
        out->embd = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, hp->n_embd, n_tokens));
        if (out->embd) graph_tensor_set_name(out->embd, "inp_embd");
    } else {
        out->tokens = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_tokens));
    }
    out->pos = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, n_tokens));
    out->mask = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, n_kv[0], n_tokens));
    if (out->tokens) graph_tensor_set_name(out->tokens, "tokens");
    if (out->pos) graph_tensor_set_name(out->pos, "positions");
    if (mrope) {
        out->pos_mrope = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_I32, 4 * (int64_t)n_tokens));
        if (out->pos_mrope) graph_tensor_set_name(out->pos_mrope, "positions_mrope");
    }
    if (out->mask) graph_tensor_set_name(out->mask, "kq_mask");
    if (hp->n_swa > 0) {
        out->mask_swa =
            graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, n_kv[kv_cache_swa_set(kv)], n_tokens));
        if (out->mask_swa) graph_tensor_set_name(out->mask_swa, "kq_mask_swa");
    }
    if (hp->attn_temp_scale != 0.0f) {
        out->attn_temp = graph_set_input(graph_tensor_new_3d(g, TSR_DTYPE_F32, 1, 1, n_tokens));
        if (out->attn_temp) graph_tensor_set_name(out->attn_temp, "attn_temp");
    }

    model_build b = {.g = g, .m = m, .hp = hp, .kv = kv, .io = out, .lora = n_lora ? lora : NULL};
    out->logits = graph_set_output(hp->arch->build(&b));
    if (out->logits) graph_tensor_set_name(out->logits, "logits");
    if (graph_check(g) != 0 || !out->logits) {
        error_wrap("%s graph", hp->arch->name);
        graph_free(g);
        out->g = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ masks */

void model_fill_attn_temp(const model_hparams *hp, int32_t n_tokens, const int32_t *pos, float *out) {
    const double floor_scale = hp->attn_temp_floor > 0 ? hp->attn_temp_floor : 8192;
    for (int32_t t = 0; t < n_tokens; t++)
        out[t] = (float)(1.0 + hp->attn_temp_scale *
                                   log(floor(((double)pos[t] + hp->attn_temp_offset) / floor_scale) + 1.0));
}
