/*
 * model — transformer architectures: hyperparameters from GGUF keys, weight
 * tensors (checked by name and shape), and the forward graph of a micro-batch.
 *
 * An architecture is a descriptor (model_arch_desc) in one file under arch/:
 * the GGUF keys it reads beyond the common ones, the tensors it expects, and
 * a graph builder written with the shared blocks of blocks.h. Adding one is a
 * new file plus a line in arch.c's table (docs/architectures.md).
 *
 * A model keeps its GGUF file mapped; weights of layers that stay on the host
 * are read in place from the mapping, weights of offloaded layers are copied
 * once into a buffer of the chosen GPU device.
 */
#ifndef TESSERA_MODEL_H
#define TESSERA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

#include "gguf/gguf.h"
#include "graph/graph.h"
#include "host/host_weights.h"
#include "kv/kv.h"

typedef struct model model;
typedef struct model_arch_desc model_arch_desc;
typedef struct model_lora_set model_lora_set; /* lora.h */

/* ------------------------------------------------------------ hparams */

/* How positions are stretched beyond the training context. */
typedef enum model_rope_scaling {
    MODEL_ROPE_SCALING_NONE = 0,
    MODEL_ROPE_SCALING_LINEAR, /* positions divided by the factor */
    MODEL_ROPE_SCALING_YARN,   /* NTK-by-parts (ext_factor, beta_fast/slow) */
    MODEL_ROPE_SCALING_LLAMA3, /* carried by the rope_freqs.weight tensor */
    MODEL_ROPE_SCALING_LONGROPE, /* Phi-3: rope_factors_short/long tensors */
} model_rope_scaling;

enum { MODEL_MAX_LAYERS = 4096 };

/* What every architecture has, read from "<arch>.<key>" by hparams.c; the
 * fields below "architecture extras" have neutral defaults that an
 * architecture's own hparams hook may change. */
typedef struct model_hparams {
    const model_arch_desc *arch;
    int32_t n_vocab;     /* rows of token_embd */
    int32_t n_ctx_train; /* context_length */
    int32_t n_embd;      /* embedding_length */
    int32_t n_layer;     /* block_count */
    int32_t n_ff;        /* feed_forward_length */
    int32_t n_head;      /* attention.head_count */
    int32_t n_head_kv;   /* attention.head_count_kv (default n_head) */
    int32_t head_dim;    /* attention.key_length (default n_embd / n_head) */
    int32_t head_dim_v;  /* attention.value_length (default head_dim) */
    int32_t n_rot;       /* rope.dimension_count: rotated dims per head */
    float rms_eps;       /* attention.layer_norm_rms_epsilon */
    int32_t rope_mode;   /* TSR_ROPE_NORMAL or TSR_ROPE_NEOX (the descriptor's) */
    float rope_freq_base;
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear and YaRN */
    model_rope_scaling rope_scaling;
    int32_t n_ctx_orig;    /* rope.scaling.original_context_length (YaRN, LongRoPE) */
    float yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;

    /* architecture extras */
    int32_t n_swa;            /* sliding window of SWA layers (0: none) */
    int32_t swa_pattern;      /* > 0: the last layer of every swa_pattern sees the whole context, the others
                               * the window (model_layer_is_swa); 0: every layer uses the window */
    float rope_freq_base_swa; /* rope base of SWA layers */
    float rope_freq_scale_swa; /* rope scale of SWA layers (1: gemma3's local layers are not stretched) */
    float attn_scale;         /* scale of q.k (0: 1/sqrt(head_dim)) */
    bool attn_scale_q;        /* apply attn_scale to q before q.k (gemma3, phi3, as llama.cpp does), not
                               * in the softmax */
    float embd_scale;         /* token embeddings times this (1: none) */
    float residual_scale;     /* granite: branch outputs times this before the residual add */
    float logit_scale;        /* logits times this (granite divides: 1/logit_scale) */
    float logit_softcap;      /* logits = cap * tanh(logits / cap) (0: none) */
    float attn_temp_scale;    /* mistral3/llama4: q times 1 + scale*log(floor((p+offset)/floor)+1) */
    int32_t attn_temp_floor;
    int32_t attn_temp_offset; /* mistral3: 0 (Hugging Face's Ministral 3), llama4: 1 */
    bool causal_attn;         /* attention.causal (default true); false: every token sees its whole
                               * sequence (encoders: bert, nomic-bert) */
    int32_t pooling;          /* pooling_type (TESSERA_POOLING_*), -1 when the file does not say */
    float norm_eps;           /* attention.layer_norm_epsilon: LayerNorm of encoders (default 1e-12) */

    /* mixture of experts (n_expert 0: a dense FFN); the gating is the
     * family's, set by its hparams hook (model_moe_gating) */
    int32_t n_expert;      /* expert_count */
    int32_t n_expert_used; /* expert_used_count: experts each token is routed to */
    int32_t n_ff_exp;      /* an expert's FFN size (expert_feed_forward_length, or the family's rule) */
    int32_t n_ff_shexp;    /* the shared expert's (expert_shared_feed_forward_length; 0: none) */
    int32_t moe_gating;    /* MODEL_MOE_SOFTMAX (default) or MODEL_MOE_SIGMOID: router logits to probabilities */
    bool moe_norm_w;       /* the chosen experts' weights divided by their sum */
    float swiglu_alpha, swiglu_limit; /* gpt-oss: the experts' SwiGLU clamped (SWIGLU_OAI); limit 0: plain */
    /* recurrent hybrids (lfm2, mamba2, granitehybrid, qwen35): which blocks are
     * recurrent (an attention.head_count_kv array's zeros; every block of an
     * architecture without attention), the convolution's width (lfm2:
     * shortconv.l_cache, mamba2: ssm.conv_kernel) and Mamba-2's sizes
     * (ssm.inner_size, state_size, time_step_rank = heads, group_count);
     * qwen35's Gated DeltaNet reads the same keys: v heads of inner_size /
     * time_step_rank, group_count q/k heads of state_size */
    bool layer_recurrent[MODEL_MAX_LAYERS];
    int32_t conv_kernel;
    int32_t ssm_d_inner, ssm_d_state, ssm_n_head, ssm_n_group;
    /* M-RoPE (qwen2vl: rope.dimension_sections): the rotated pairs split in
     * runs of these sizes, each turned by its own row of positions (t, h, w,
     * and a 4th, 0 for Qwen2-VL); all 0: plain rope */
    int32_t rope_sections[4];
} model_hparams;

/* How an MoE router turns its logits into expert probabilities. */
enum {
    MODEL_MOE_SOFTMAX = 0,        /* softmax over all experts, the top K of those probabilities */
    MODEL_MOE_SIGMOID = 1,        /* sigmoid of each logit, the top K */
    MODEL_MOE_SOFTMAX_WEIGHT = 2, /* gpt-oss: the top K logits, weights the softmax over those K */
};

/* Reads "<arch>.<suffix>" keys of one file, naming file and key in errors. */
typedef struct model_hp_reader {
    const gguf_file *f;
    char arch[32];
} model_hp_reader;

/* A required positive integer; an optional one (untouched when absent);
 * an optional finite float; an optional bool. */
int model_hp_int(const model_hp_reader *r, const char *suffix, int32_t *out);
int model_hp_int_opt(const model_hp_reader *r, const char *suffix, int32_t *out);
int model_hp_f32_opt(const model_hp_reader *r, const char *suffix, float *out);
int model_hp_bool_opt(const model_hp_reader *r, const char *suffix, bool *out);
/* Whether "<arch>.<suffix>" exists. */
bool model_hp_has(const model_hp_reader *r, const char *suffix);

/* Fill hp from f's metadata: the common keys, then the architecture's hook,
 * then the checks every model must pass (finite positive epsilon, heads and
 * dims consistent, ...). */
int model_hparams_load(model_hparams *hp, const gguf_file *f);

/* Whether layer il attends through the sliding window (from n_swa and
 * swa_pattern: known from the header alone, for the memory fit too). */
bool model_layer_is_swa(const model_hparams *hp, int32_t il);
/* Whether the model turns positions by M-RoPE (rope_sections). */
static inline bool model_hparams_mrope(const model_hparams *hp) {
    return hp->rope_sections[0] + hp->rope_sections[1] + hp->rope_sections[2] + hp->rope_sections[3] > 0;
}

/* ------------------------------------------------------------ weights */

/* Where a weight's bytes are: plain host memory (the mapping) or a buffer of
 * host device home_device. */
typedef struct model_weight {
    const char *name;
    int32_t dtype;
    int32_t n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    int32_t layer;       /* the block it belongs to, -1 for global tensors */
    int32_t place;       /* by name (placement.h): MODEL_PLACE_RULE (-ngl decides), _HOST or a device */
    int32_t home_device; /* -1: host memory at data */
    tsr_buffer *buffer;
    uint64_t offset;
    void *data;
} model_weight;

/* One transformer block. Every architecture uses a subset; an absent tensor
 * is NULL. */
typedef struct model_layer {
    const model_weight *attn_norm;
    const model_weight *wq, *wk, *wv, *wo;
    const model_weight *wqkv;           /* fused q|k|v rows (phi3) */
    const model_weight *bq, *bk, *bv;   /* qwen2 biases */
    const model_weight *q_norm, *k_norm; /* per-head RMS norms (qwen3, gemma3) */
    const model_weight *post_attn_norm; /* gemma3: norm of the attention output */
    const model_weight *ffn_norm;
    const model_weight *ffn_gate, *ffn_up, *ffn_down; /* ffn_up is gate|up when ffn_gate is NULL */
    const model_weight *post_ffn_norm;  /* gemma3: norm of the FFN output */
    /* mixture of experts: the router [E, X], the experts stacked [E, Fx, X]
     * (down [Fx, E, X]; ffn_up_exps is gate|up [E, 2 Fx, X], the file's
     * ffn_gate_up_exps, when ffn_gate_exps is NULL), a shared expert beside
     * them (granitemoe) */
    const model_weight *ffn_gate_inp;
    const model_weight *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps;
    const model_weight *ffn_gate_shexp, *ffn_up_shexp, *ffn_down_shexp;
    const model_weight *ffn_gate_inp_shexp; /* qwen2moe: the shared expert times sigmoid(this . x) [E] */
    /* gpt-oss: the router's bias [X], each expert's biases [Fx, X] / [E, X],
     * and one sink logit per head [H] that joins every softmax row */
    const model_weight *ffn_gate_inp_b, *ffn_gate_exps_b, *ffn_up_exps_b, *ffn_down_exps_b;
    const model_weight *attn_sinks;
    /* encoders (bert, nomic-bert): biases and the post-norms (LayerNorm weight, bias) */
    const model_weight *bqkv, *bo, *ffn_up_b, *ffn_down_b;
    const model_weight *attn_out_norm, *attn_out_norm_b;   /* after the attention's residual add */
    const model_weight *layer_out_norm, *layer_out_norm_b; /* after the FFN's residual add */
    /* recurrent blocks: LFM2's short convolution, Mamba-2's mixer */
    const model_weight *conv_in, *conv_w, *conv_out;         /* shortconv.in_proj, .conv, .out_proj */
    const model_weight *ssm_in, *ssm_conv1d, *ssm_conv1d_b;  /* Mamba-2 */
    const model_weight *ssm_dt_b, *ssm_a, *ssm_d, *ssm_norm, *ssm_out;
    /* Gated DeltaNet (qwen35; q|k|v in wqkv): the output gate z, beta's and
     * the decay's projections; qwen3next fuses them per q/k head:
     * beta|alpha in ssm_ba, and q|k|v|z in ssm_in unless the file has
     * attn_qkv and attn_gate */
    const model_weight *attn_gate, *ssm_beta, *ssm_alpha, *ssm_ba;
    bool swa;     /* attends through the sliding-window mask */
    bool no_rope; /* positions are not rotated in this layer (smollm3; bert's learned positions) */
} model_layer;

struct model {
    gguf_file *file;
    model_hparams hp;
    const model_weight *tok_embd;
    const model_weight *output_norm;
    const model_weight *output;       /* token_embd itself when tied */
    const model_weight *rope_freqs;   /* Llama-3 frequency factors (NULL: none) */
    const model_weight *rope_long, *rope_short; /* Phi-3 LongRoPE factors */
    /* encoders: token type rows, learned positions, the LayerNorm of the input */
    const model_weight *type_embd, *pos_embd, *tok_norm, *tok_norm_b;
    /* classification head of rerankers: tanh(cls x + cls_b), then cls_out . + cls_out_b */
    const model_weight *cls, *cls_b, *cls_out, *cls_out_b;
    model_layer *layers;              /* hp.n_layer */
    model_weight *weights;            /* every weight found, for placement loops */
    int32_t n_weights;
    int32_t n_gpu_layers;     /* the last n_gpu_layers layers live on gpu_device */
    bool offload_globals;     /* -ngl above n_layer: embeddings, output norm and output too */
    int32_t gpu_device;       /* host device index, -1 if none */
    int32_t cpu_device;       /* host device index computing host layers */
    tsr_device *gpu;
    host_device *gpu_hd;          /* gpu's host entry, once weights are there */
    host_weight_set gpu_weights;  /* the offloaded weights' buffers (split to the device's limits) */
    uint64_t n_params;
    uint64_t nbytes;
};

/* ------------------------------------------------------------ loading */

/* Collects the tensors an architecture declares. The first error is kept
 * and later declarations do nothing, so a descriptor lists its tensors
 * without checking each call; model_load reports the error. */
typedef struct model_loader {
    model *m;
    int failed;
} model_loader;

enum {
    MODEL_TENSOR_REQUIRED = 0,
    MODEL_TENSOR_OPTIONAL = 1 << 0,
};

/* Declare the tensor named by fmt (printf-style; "%d" takes il when il >= 0)
 * with exactly the shape [ne0] or [ne0, ne1]. Returns it, or NULL when it is
 * optional and absent or when loading already failed. */
const model_weight *model_tensor(model_loader *ld, int32_t il, unsigned flags, int n_dims, int64_t ne0,
                                 int64_t ne1, const char *fmt);
/* The same for a stack of ne2 matrices [ne0, ne1] (an MoE layer's experts). */
const model_weight *model_tensor_3d(model_loader *ld, int32_t il, unsigned flags, int64_t ne0, int64_t ne1,
                                    int64_t ne2, const char *fmt);

/* ------------------------------------------------------------ forward */

/* The inputs of one micro-batch graph, filled by the caller after allocation. */
typedef struct model_batch_graph {
    graph *g;
    graph_tensor *tokens;   /* I32 [n_tokens] (NULL when embd is the input) */
    graph_tensor *embd;     /* F32 [n_embd, n_tokens] input embeddings (a medium's rows; NULL: tokens) */
    graph_tensor *pos;      /* I32 [n_tokens] */
    graph_tensor *pos_mrope; /* I32 [4 * n_tokens]: M-RoPE's rows of positions t, h, w, e (NULL: plain rope) */
    graph_tensor *mask;     /* F32 [n_kv[0], n_tokens] causal mask */
    graph_tensor *mask_swa; /* F32 [n_kv[swa set], n_tokens] sliding-window mask (NULL: no SWA layer) */
    graph_tensor *attn_temp; /* F32 [n_tokens] query temperature (NULL: none) */
    graph_tensor *out_ids;  /* I32 [n_out] rows whose logits are wanted */
    graph_tensor *logits;   /* F32 [n_vocab, n_out] output ([n_embd, n_out] hidden states when
                             * the cache's embd_out is set: an embedding context) */
    int32_t n_tokens;
    /* Per cell set of the cache: the first cell the batch writes, and the
     * cells attended to (0..n_kv-1). */
    int32_t kv_head[KV_MAX_SETS], n_kv[KV_MAX_SETS];
    int32_t n_out;
    int32_t rs_slot; /* recurrent models: the state slot the graph reads and writes */
} model_batch_graph;

/* What a graph builder works with; the blocks of blocks.h take it. */
typedef struct model_build {
    graph *g;
    const model *m;
    const model_hparams *hp;
    kv_cache *kv;
    model_batch_graph *io;
    graph_tensor *kv_rot; /* the cache's rotation H, made on first use (blk_rotate_heads) */
    const model_lora_set *lora; /* adapters added to every product with a weight (NULL: none) */
} model_build;

/* The tensor sets most architectures share, or-ed in a descriptor's
 * tensor_sets; arch.c declares them (every layer's in this order) after the
 * descriptor's own tensors. */
enum {
    MODEL_SET_ROPE_FREQS = 1 << 0, /* Llama 3's rope_freqs.weight, when the file has it */
    MODEL_SET_ATTN = 1 << 1,       /* attn_norm, attn_q/k/v/output with the shapes of hp */
    MODEL_SET_QKV_BIAS = 1 << 2,   /* attn_q/k/v.bias */
    MODEL_SET_QK_NORM = 1 << 3,    /* attn_q_norm, attn_k_norm: per-head RMS norm weights [head_dim] */
    MODEL_SET_FFN = 1 << 4,        /* ffn_norm, ffn_gate, ffn_up, ffn_down; when hp.n_expert > 0
                                    * instead the router ffn_gate_inp, the experts ffn_{gate,up,down}_exps
                                    * and, when hp.n_ff_shexp > 0, the shared ffn_{gate,up,down}_shexp */
    MODEL_SET_FFN_POST_ATTN_NORM = 1 << 5, /* with _FFN: the FFN's norm is named post_attention_norm
                                            * (qwen35, qwen35moe) */
};

struct model_arch_desc {
    const char *name;  /* general.architecture */
    int32_t rope_mode; /* TSR_ROPE_NORMAL or TSR_ROPE_NEOX */
    /* Keys beyond the common ones (may be NULL). */
    int (*hparams)(model_hparams *hp, const model_hp_reader *r);
    unsigned tensor_sets; /* MODEL_SET_* */
    /* Declare the tensors beyond the sets (model_tensor) and set per-layer
     * flags (may be NULL). */
    void (*tensors)(model_loader *ld, model *m);
    /* The forward graph: returns the logits [n_vocab, n_out] (NULL on error). */
    graph_tensor *(*build)(model_build *b);
    /* Appended for the recurrent hybrids: the file has no attention
     * (mamba2: head counts and feed_forward_length are not read), and the
     * tensors hook declares the final norm itself (lfm2's token_embd_norm). */
    bool no_attention;
    bool own_output_norm;
    /* Floats of recurrent state per sequence of block il (0: none). */
    int64_t (*state_floats)(const model_hparams *hp, int32_t il);
};

/* The architecture named by general.architecture; NULL plus an error listing
 * the supported names when unknown. */
const model_arch_desc *model_arch_find(const char *name, size_t len);
/* "llama, qwen2, ..." */
const char *model_arch_list(void);

typedef bool (*model_progress_fn)(float progress, void *user);

typedef struct model_load_params {
    int32_t n_gpu_layers; /* above n_layer: the global weights too (model_weight_device) */
    int32_t gpu_device; /* host device index or -1 */
    tsr_device *gpu;    /* that device (NULL: no offload) */
    int32_t cpu_device; /* host device index */
    /* weights placed by name before -ngl (-ot, --n-cpu-moe; NULL: none) */
    const struct model_placement *placement;
    model_progress_fn progress;
    void *progress_user;
    bool prefault; /* touch every page of the mapping once (not for a read image) */
} model_load_params;

/* Takes ownership of f (closed by model_free, also on failure). */
model *model_load(gguf_file *f, const model_load_params *p);
void model_free(model *m);

/* Home device of layer il's weights and KV cache (-1: host memory). */
int32_t model_layer_device(const model *m, int32_t il);
/* Home device of weight w (-1: host memory): where its name places it
 * (-ot, --n-cpu-moe: placement.h), else its layer's, and for the global
 * weights the GPU once -ngl exceeds the layer count. The one rule model
 * loading uploads by. */
int32_t model_weight_device(const model *m, const model_weight *w);

/* Upload weights mw[0..n) into a new set of buffers of device hd (host
 * device index device) and bind each there; uploaded (may be NULL) is
 * called after each and may return false to cancel. On failure the set
 * holds what was allocated (host_weights_free it). */
int model_weights_upload(host_device *hd, int32_t device, model_weight *const *mw, int32_t n, host_weight_set *set,
                         bool (*uploaded)(const model_weight *w, void *user), void *user);

/* A graph leaf for a weight, bound to its memory. */
graph_tensor *model_weight_leaf(graph *g, const model_weight *w);

/* Build the forward graph for n_tokens tokens written, in each cell set s
 * of the cache (kv->n_sets), to cells kv_head[s]..kv_head[s]+n_tokens-1,
 * attending to cells 0..n_kv[s]-1, with logits for n_out rows, and the
 * LoRA adapters of lora (NULL: none) in every weight product. Returns 0,
 * or -1 with the first shape error. */
int model_build_graph(const model *m, kv_cache *kv, const model_lora_set *lora, int32_t n_tokens,
                      const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, model_batch_graph *out);
/* The same with embd_in: the graph takes embedding rows (out->embd) in
 * place of tokens, for the rows a multimodal encoder produced. */
int model_build_graph_ex(const model *m, kv_cache *kv, const model_lora_set *lora, int32_t n_tokens,
                         const int32_t *kv_head, const int32_t *n_kv, int32_t n_out, bool embd_in,
                         model_batch_graph *out);

/* ------------------------------------------------------------ masks */

/* The query temperature of llama 4 / mistral 3 at each position:
 * 1 + attn_temp_scale * log(floor((pos + attn_temp_offset) / attn_temp_floor) + 1). */
void model_fill_attn_temp(const model_hparams *hp, int32_t n_tokens, const int32_t *pos, float *out);

#endif
