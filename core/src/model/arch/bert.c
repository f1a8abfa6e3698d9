/*
 * bert — BERT encoders (bge, all-MiniLM, ...) and the post-norm encoder
 * graph that nomic-bert shares (arch/nomic_bert.c).
 *
 *   x = LayerNorm(token_embd[tokens] + token_types[0] + position_embd[pos])
 *   for each layer (every token sees its whole sequence: no causal mask):
 *     q, k, v = Wq x + bq, ... (or the fused attn_qkv), rope for nomic-bert
 *     x = LayerNorm(x + Wo softmax(q.K / sqrt(D)) V + bo)     attn_output_norm
 *     f = Wdown gelu(Wup x + bup) + bdown                     (nomic-bert: SwiGLU)
 *     x = LayerNorm(x + f)                                    layer_output_norm
 *   the embeddings are x itself (no final norm, no output projection)
 *
 * Every token gets token type 0, as llama.cpp does. A reranker adds a
 * classification head (cls, cls.output), applied to the first token's
 * vector on the host (model/pooling.c).
 */
#include <stdio.h>

#include "model/arch/arch.h"
#include "util/error.h"

int arch_encoder_hparams(model_hparams *hp, const model_hp_reader *r) {
    (void)r;
    hp->causal_attn = false; /* an encoder, whatever attention.causal says */
    return 0;
}

/* The file's tensor name, or NULL, leaving the error of an earlier failed
 * declaration as it was (the loader reports that one). */
static const gguf_tensor_info *find_quiet(const model *m, const char *name) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", error_get());
    const gguf_tensor_info *ti = gguf_find_tensor(m->file, name);
    if (!ti) error_set("%s", saved);
    return ti;
}

/* Rows of a global tensor's second dimension, 0 when the file lacks it. */
static int64_t tensor_rows(const model *m, const char *name) {
    const gguf_tensor_info *ti = find_quiet(m, name);
    return ti && ti->n_dims == 2 ? ti->ne[1] : 0;
}

void arch_encoder_tensors(model_loader *ld, model *m, bool learned_positions, bool gated_ffn) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->head_dim * hp->n_head;
    const int64_t KV = (int64_t)hp->head_dim * hp->n_head_kv;
    const unsigned opt = MODEL_TENSOR_OPTIONAL;
    const int64_t n_types = tensor_rows(m, "token_types.weight");
    if (n_types > 0) m->type_embd = model_tensor(ld, -1, 0, 2, E, n_types, "token_types.weight");
    if (learned_positions)
        m->pos_embd = model_tensor(ld, -1, 0, 2, E, hp->n_ctx_train, "position_embd.weight");
    m->tok_norm = model_tensor(ld, -1, 0, 1, E, 1, "token_embd_norm.weight");
    m->tok_norm_b = model_tensor(ld, -1, opt, 1, E, 1, "token_embd_norm.bias");
    for (int32_t il = 0; il < hp->n_layer; il++) {
        model_layer *L = &m->layers[il];
        L->no_rope = learned_positions;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
        if (find_quiet(m, name)) {
            L->wqkv = model_tensor(ld, il, 0, 2, E, Q + 2 * KV, "blk.%d.attn_qkv.weight");
            L->bqkv = model_tensor(ld, il, opt, 1, Q + 2 * KV, 1, "blk.%d.attn_qkv.bias");
        } else {
            L->wq = model_tensor(ld, il, 0, 2, E, Q, "blk.%d.attn_q.weight");
            L->bq = model_tensor(ld, il, opt, 1, Q, 1, "blk.%d.attn_q.bias");
            L->wk = model_tensor(ld, il, 0, 2, E, KV, "blk.%d.attn_k.weight");
            L->bk = model_tensor(ld, il, opt, 1, KV, 1, "blk.%d.attn_k.bias");
            L->wv = model_tensor(ld, il, 0, 2, E, KV, "blk.%d.attn_v.weight");
            L->bv = model_tensor(ld, il, opt, 1, KV, 1, "blk.%d.attn_v.bias");
        }
        L->wo = model_tensor(ld, il, 0, 2, Q, E, "blk.%d.attn_output.weight");
        L->bo = model_tensor(ld, il, opt, 1, E, 1, "blk.%d.attn_output.bias");
        L->attn_out_norm = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.attn_output_norm.weight");
        L->attn_out_norm_b = model_tensor(ld, il, opt, 1, E, 1, "blk.%d.attn_output_norm.bias");
        L->ffn_up = model_tensor(ld, il, 0, 2, E, F, "blk.%d.ffn_up.weight");
        L->ffn_up_b = model_tensor(ld, il, opt, 1, F, 1, "blk.%d.ffn_up.bias");
        if (gated_ffn) L->ffn_gate = model_tensor(ld, il, 0, 2, E, F, "blk.%d.ffn_gate.weight");
        L->ffn_down = model_tensor(ld, il, 0, 2, F, E, "blk.%d.ffn_down.weight");
        L->ffn_down_b = model_tensor(ld, il, opt, 1, E, 1, "blk.%d.ffn_down.bias");
        L->layer_out_norm = model_tensor(ld, il, 0, 1, E, 1, "blk.%d.layer_output_norm.weight");
        L->layer_out_norm_b = model_tensor(ld, il, opt, 1, E, 1, "blk.%d.layer_output_norm.bias");
    }
    arch_cls_head_tensors(ld, m);
}

void arch_cls_head_tensors(model_loader *ld, model *m) {
    const int64_t E = m->hp.n_embd;
    m->cls = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 2, E, E, "cls.weight");
    m->cls_b = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 1, E, 1, "cls.bias");
    const int64_t n_cls = tensor_rows(m, "cls.output.weight");
    if (n_cls > 0) {
        m->cls_out = model_tensor(ld, -1, 0, 2, E, n_cls, "cls.output.weight");
        m->cls_out_b = model_tensor(ld, -1, MODEL_TENSOR_OPTIONAL, 1, n_cls, 1, "cls.output.bias");
    }
}

graph_tensor *arch_encoder_build(model_build *b) {
    graph *g = b->g;
    const model *m = b->m;
    const model_hparams *hp = b->hp;
    graph_tensor *x = blk_embed(b);
    if (m->type_embd) /* token type 0 for every token */
        x = graph_add(g, x, graph_view_1d(g, model_weight_leaf(g, m->type_embd), hp->n_embd, 0));
    if (m->pos_embd) x = graph_add(g, x, graph_get_rows(g, model_weight_leaf(g, m->pos_embd), b->io->pos));
    x = blk_layer_norm(b, x, m->tok_norm, m->tok_norm_b, "inp_norm", 0);
    for (int il = 0; il < hp->n_layer; il++) {
        const model_layer *L = &m->layers[il];
        graph_tensor *a = blk_self_attention(b, il, x);
        x = blk_layer_norm(b, graph_add(g, a, x), L->attn_out_norm, L->attn_out_norm_b, "attn_out_norm", il);
        graph_tensor *f;
        if (L->ffn_gate) {
            f = blk_ffn(b, il, x, BLK_FFN_SILU);
        } else {
            graph_tensor *up = graph_gelu(g, blk_linear(b, L->ffn_up, L->ffn_up_b, x));
            f = blk_linear(b, L->ffn_down, L->ffn_down_b, up);
        }
        x = blk_layer_norm(b, graph_add(g, f, x), L->layer_out_norm, L->layer_out_norm_b, "layer_out_norm", il);
    }
    return blk_logits(b, x);
}

static void bert_tensors(model_loader *ld, model *m) { arch_encoder_tensors(ld, m, true, false); }

const model_arch_desc arch_bert = {
    .name = "bert",
    .rope_mode = TSR_ROPE_NORMAL,
    .hparams = arch_encoder_hparams,
    .tensors = bert_tensors,
    .build = arch_encoder_build,
};
