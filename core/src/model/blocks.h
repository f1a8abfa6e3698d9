/*
 * blocks — the pieces transformer graphs are built from, shared by every
 * architecture in arch/. Shapes use GGUF order (innermost first); T is the
 * number of tokens of the micro-batch, E the embedding width, D the head
 * size, H and Hkv the query and key/value heads.
 *
 * Each block returns NULL when the graph ran out of memory or a shape did
 * not fit; graph_check reports the first such error, so builders chain
 * blocks without testing every result.
 */
#ifndef TESSERA_MODEL_BLOCKS_H
#define TESSERA_MODEL_BLOCKS_H

#include "model/model.h"

/* token_embd rows of the batch's tokens, times hp->embd_scale: [E, T]. */
graph_tensor *blk_embed(model_build *b);

/* rms_norm(x) * w over the first dimension (w NULL: no weight). */
graph_tensor *blk_rms_norm(model_build *b, graph_tensor *x, const model_weight *w, const char *name, int il);

/* LayerNorm: (x - mean) / sqrt(var + norm_eps) over the first dimension,
 * times w, plus bias (either may be NULL). Encoders use it. */
graph_tensor *blk_layer_norm(model_build *b, graph_tensor *x, const model_weight *w, const model_weight *bias,
                             const char *name, int il);

/* w x (+ bias): x [K, T] -> [rows of w, T]. */
graph_tensor *blk_linear(model_build *b, const model_weight *w, const model_weight *bias, graph_tensor *x);

/* q [D, H, T], k [D, Hkv, T], v [D*Hkv, T] of layer il from its input h:
 * separate or fused (wqkv, bias bqkv) projections, biases, per-head q/k norms. */
void blk_qkv(model_build *b, int il, graph_tensor *h, graph_tensor **q, graph_tensor **k, graph_tensor **v);

/* Rotary position embedding of x [D, heads, T] at the batch's positions,
 * with layer il's base (SWA layers may have their own) and the model's
 * scaling; x itself for a layer without rope. */
graph_tensor *blk_rope(model_build *b, graph_tensor *x, int il);
/* The rope of layer il (its base, the model's scaling), and x rotated by it
 * at positions pos [heads' third dimension] (what blk_rope does with the
 * batch's positions; the context shift rotates cached keys by a delta). */
graph_rope_params blk_rope_params(const model_build *b, int il);
graph_tensor *blk_rope_at(model_build *b, graph_tensor *x, int il, graph_tensor *pos,
                          const graph_rope_params *rp);

/* x [D*n, ...] with every run of D = head_dim values (a head) turned by
 * the cache's rotation H (kv.h: Rotation; only when kv->rot_k or rot_v).
 * H is its own inverse: the same call turns back. */
graph_tensor *blk_rotate_heads(model_build *b, graph_tensor *x);

/* Self-attention of layer il: stores k and v in the cache at the batch's
 * cells, then softmax(kq_scale * K.q + mask) over the cells attended to,
 * with the layer's mask (sliding-window or causal). q [D, H, T], k
 * [D, Hkv, T] already roped, v [D*Hkv, T]. Returns [D*H, T], before Wo.
 * A rotated cache (kv->rot_k, rot_v) gets H k and H v, q is turned like k,
 * and the output is turned back: the result is the same up to rounding. */
graph_tensor *blk_attention(model_build *b, int il, graph_tensor *q, graph_tensor *k, graph_tensor *v,
                            float kq_scale);

/* Layer il's self-attention on its normed input h, through Wo (and bo):
 * q, k, v (blk_qkv), rope (blk_rope), blk_attention scaled by
 * hp->attn_scale (0: 1/sqrt(D)), on q before the product when
 * hp->attn_scale_q. [E, T]. */
graph_tensor *blk_self_attention(model_build *b, int il, graph_tensor *h);

typedef enum blk_ffn_act { BLK_FFN_SILU, BLK_FFN_GELU } blk_ffn_act;

/* down(act(gate x) * up x) of layer il; gate and up fused in ffn_up
 * (gate rows first) when ffn_gate is NULL; an MoE layer's blk_moe_ffn
 * when it has a router (act is then SiLU, the experts' own). */
graph_tensor *blk_ffn(model_build *b, int il, graph_tensor *x, blk_ffn_act act);

/* A mixture-of-experts FFN of layer il on x [E, T]:
 *   p = softmax(router x)          (or sigmoid: hp->moe_gating)   [X, T]
 *   chosen = the K largest p of each token                       [K, T]
 *   w = p[chosen]                  (divided by its sum: hp->moe_norm_w)
 *   out = sum over the K slots of w * down_e(silu(gate_e x) * up_e x)
 *         (+ the shared expert's FFN, when the layer has one, times
 *          sigmoid(ffn_gate_inp_shexp . x) when it has that gate) [E, T] */
graph_tensor *blk_moe_ffn(model_build *b, int il, graph_tensor *x);

/* The rows of x whose logits are wanted, final norm, output projection,
 * logit scale and soft-cap: [n_vocab, n_out]. In an embedding context
 * (kv->embd_out) it stops after the norm: [n_embd, n_out]. */
graph_tensor *blk_logits(model_build *b, graph_tensor *x);

/* The usual pre-norm block: x + attn(norm(x)), then + ffn(norm(.)). The
 * llama, qwen2, qwen3, phi3, smollm3, granite and mistral3 graphs are this
 * block in a loop (arch_llama_build). */
graph_tensor *blk_prenorm_layer(model_build *b, int il, graph_tensor *x, blk_ffn_act act);

/* Recurrent blocks (blocks_ssm.c), on h [n_embd, T] of one sequence:
 * LFM2's gated short convolution, out_proj(C * conv(B * x)) with B, C, x
 * from in_proj, and Mamba-2's mixer (in_proj to z, xBC, dt; causal conv +
 * SiLU; selective scan; + x D; gated by SiLU(z); grouped RMS norm;
 * out_proj). Both read and update the sequence's recurrent state. */
graph_tensor *blk_shortconv(model_build *b, int il, graph_tensor *h);
graph_tensor *blk_mamba2(model_build *b, int il, graph_tensor *h);
/* Qwen3.5's Gated DeltaNet block: q|k|v (attn_qkv) through the causal conv
 * + SiLU, the gated delta rule (DELTA_NET) with beta = sigmoid(ssm_beta x)
 * and decay exp(A softplus(ssm_alpha x + dt_bias)), an RMS norm per v head
 * times silu(attn_gate x), ssm_out. kv_tiled: which q/k head a v head
 * reads (DELTA_NET's parameter). qwen3next fuses products per q/k head:
 * beta|alpha in ssm_ba, and q|k|v|z in ssm_in where the file has no
 * attn_qkv. */
graph_tensor *blk_deltanet(model_build *b, int il, graph_tensor *h, bool kv_tiled);

#endif
