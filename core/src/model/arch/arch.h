/*
 * arch — one descriptor per architecture (arch/<name>.c), listed in arch.c.
 * The helpers below declare the tensors most architectures share, so a
 * descriptor spells out only what is its own.
 */
#ifndef TESSERA_MODEL_ARCH_H
#define TESSERA_MODEL_ARCH_H

#include "model/blocks.h"
#include "model/model.h"

extern const model_arch_desc arch_llama;
extern const model_arch_desc arch_qwen2;
extern const model_arch_desc arch_qwen3;
extern const model_arch_desc arch_gemma3;
extern const model_arch_desc arch_phi3;
extern const model_arch_desc arch_smollm3;
extern const model_arch_desc arch_granite;
extern const model_arch_desc arch_mistral3;
extern const model_arch_desc arch_bert;
extern const model_arch_desc arch_nomic_bert;

/* The llama graph (arch/llama.c): pre-norm blocks of attention and a SiLU-gated
 * FFN; also the graph of qwen2 and qwen3, which differ in their tensors. */
graph_tensor *arch_llama_build(model_build *b);

/* The post-norm encoders (arch/bert.c): their tensors (learned positions:
 * position_embd, bert; gated FFN: ffn_gate, nomic-bert), and their graph
 * (rope: rotary positions, nomic-bert). */
void arch_encoder_tensors(model_loader *ld, model *m, bool learned_positions, bool gated_ffn);
graph_tensor *arch_encoder_build(model_build *b, bool rope);
/* A reranker's classification head when the file has one: cls (optional,
 * then tanh) and cls.output with their biases. model.c declares it for
 * every architecture (decoder rerankers score their last token with it). */
void arch_cls_head_tensors(model_loader *ld, model *m);

/* attn_norm, and attn_q/k/v/output with the shapes of hp. */
void arch_attn_tensors(model_loader *ld, model *m, int32_t il);
/* ffn_norm, ffn_gate, ffn_up, ffn_down. */
void arch_ffn_tensors(model_loader *ld, model *m, int32_t il);
/* attn_q_norm and attn_k_norm: per-head RMS norm weights [head_dim]. */
void arch_qk_norm_tensors(model_loader *ld, model *m, int32_t il);
/* Llama 3's rope_freqs.weight, when the file has it. */
void arch_rope_freqs_tensor(model_loader *ld, model *m);

#endif
