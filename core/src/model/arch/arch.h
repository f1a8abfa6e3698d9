/*
 * arch — one descriptor per architecture (arch/<name>.c), listed in arch.c.
 * The tensors most architectures share are named by the descriptor's
 * tensor_sets (model.h), so a descriptor spells out only what is its own.
 */
#ifndef TESSERA_MODEL_ARCH_H
#define TESSERA_MODEL_ARCH_H

#include "model/blocks.h"
#include "model/model.h"

extern const model_arch_desc arch_llama;
extern const model_arch_desc arch_qwen2;
extern const model_arch_desc arch_qwen2vl;
extern const model_arch_desc arch_qwen3;
extern const model_arch_desc arch_gemma3;
extern const model_arch_desc arch_phi3;
extern const model_arch_desc arch_smollm3;
extern const model_arch_desc arch_granite;
extern const model_arch_desc arch_mistral3;
extern const model_arch_desc arch_bert;
extern const model_arch_desc arch_nomic_bert;
extern const model_arch_desc arch_qwen2moe;
extern const model_arch_desc arch_qwen3moe;
extern const model_arch_desc arch_olmoe;
extern const model_arch_desc arch_granitemoe;
extern const model_arch_desc arch_gptoss;
extern const model_arch_desc arch_lfm2;
extern const model_arch_desc arch_mamba2;
extern const model_arch_desc arch_granitehybrid;
extern const model_arch_desc arch_qwen35;
extern const model_arch_desc arch_qwen35moe;
extern const model_arch_desc arch_qwen3next;

/* The llama graph (arch/llama.c): pre-norm blocks of attention and a SiLU-gated
 * FFN; also the graph of qwen2 and qwen3, which differ in their tensors. */
graph_tensor *arch_llama_build(model_build *b);

/* The routing of an MoE family (hparams hook helper): the file must have
 * experts (expert_count, naming the key when absent); the chosen experts'
 * weights renormalised or not (norm_w); a family without a shared expert
 * ignores expert_shared_feed_forward_length, as llama.cpp does. */
int arch_moe_family(model_hparams *hp, const model_hp_reader *r, bool norm_w, bool shared_expert);

/* A required integer key of the recurrent families (arch/hybrid.c): "key
 * '<arch>.<suffix>' not found (a <arch> file needs it)" when absent. */
int arch_hp_need_int(const model_hp_reader *r, const char *suffix, int32_t *out);

/* The post-norm encoders (arch/bert.c): their keys (never causal), their
 * tensors (learned positions: position_embd and no rope, bert; otherwise
 * rotary positions, nomic-bert; gated FFN: ffn_gate, nomic-bert), and their
 * graph. */
int arch_encoder_hparams(model_hparams *hp, const model_hp_reader *r);
void arch_encoder_tensors(model_loader *ld, model *m, bool learned_positions, bool gated_ffn);
graph_tensor *arch_encoder_build(model_build *b);
/* A reranker's classification head when the file has one: cls (optional,
 * then tanh) and cls.output with their biases. model.c declares it for
 * every architecture (decoder rerankers score their last token with it). */
void arch_cls_head_tensors(model_loader *ld, model *m);

/* The tensors of sets (MODEL_SET_*, model.h), for every layer. QKV_BIAS and
 * QK_NORM go with ATTN. */
void arch_tensor_sets(model_loader *ld, model *m, unsigned sets);

#endif
