/*
 * model — transformer architectures: hyperparameters from GGUF keys, weight
 * tensors (checked by name and shape), and the forward graph of a micro-batch.
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

typedef struct kv_cache kv_cache;

/* ------------------------------------------------------------ hparams */

typedef enum model_arch {
    MODEL_ARCH_LLAMA = 0,
    MODEL_ARCH_QWEN2 = 1,
    MODEL_ARCH_COUNT
} model_arch;

typedef struct model_hparams {
    model_arch arch;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_ff;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;  /* n_embd / n_head unless attention.key_length says */
    int32_t n_rot;     /* rotated dims per head (rope.dimension_count) */
    float rms_eps;
    float rope_freq_base;
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling */
    int32_t rope_mode;     /* TSR_ROPE_NORMAL (llama) or TSR_ROPE_NEOX (qwen2) */
    bool qkv_bias;         /* qwen2: attn_q/k/v have biases */
} model_hparams;

/* The architecture named by general.architecture, with its graph builder.
 * NULL plus an error listing the supported names when unknown. */
typedef struct model_arch_info {
    const char *name;
    model_arch arch;
    int32_t rope_mode;
    bool qkv_bias;
} model_arch_info;

const model_arch_info *model_arch_find(const char *name, size_t len);
/* "llama, qwen2" */
const char *model_arch_list(void);

/* Fill hp from f's metadata (and token_embd's shape for n_vocab). */
int model_hparams_load(model_hparams *hp, const gguf_file *f);

/* ------------------------------------------------------------ weights */

/* Where a weight's bytes are: plain host memory (the mapping) or a buffer of
 * host device home_device. */
typedef struct model_weight {
    const char *name;
    int32_t dtype;
    int32_t n_dims;
    int64_t ne[4];
    uint64_t nbytes;
    int32_t home_device; /* -1: host memory at data */
    tsr_buffer *buffer;
    uint64_t offset;
    void *data;
} model_weight;

typedef struct model_layer {
    model_weight attn_norm;
    model_weight wq, wk, wv, wo;
    model_weight bq, bk, bv; /* qwen2 only (nbytes 0 when absent) */
    model_weight ffn_norm;
    model_weight ffn_gate, ffn_up, ffn_down;
} model_layer;

typedef struct model {
    gguf_file *file;
    model_hparams hp;
    model_weight tok_embd;
    model_weight output_norm;
    model_weight output;      /* token_embd itself when tied */
    model_weight rope_freqs;  /* Llama-3 frequency factors (nbytes 0: none) */
    model_layer *layers;      /* hp.n_layer */
    int32_t n_gpu_layers;     /* the last n_gpu_layers layers live on gpu_device */
    int32_t gpu_device;       /* host device index, -1 if none */
    int32_t cpu_device;       /* host device index computing host layers */
    bool round_activations;   /* see model_load_params */
    tsr_device *gpu;
    tsr_buffer *gpu_buffer;   /* one buffer holding the offloaded weights */
    uint64_t n_params;
    uint64_t nbytes;
} model;

typedef bool (*model_progress_fn)(float progress, void *user);

typedef struct model_load_params {
    int32_t n_gpu_layers;
    int32_t gpu_device; /* host device index or -1 */
    tsr_device *gpu;    /* that device (NULL: no offload) */
    int32_t cpu_device; /* host device index */
    /* Round matrix-product activations as llama.cpp's CPU backend does (for
     * an exact engine such as ref; fast CPU backends do it in their kernels). */
    bool round_activations;
    model_progress_fn progress;
    void *progress_user;
} model_load_params;

/* Takes ownership of f (closed by model_free, also on failure). */
model *model_load(gguf_file *f, const model_load_params *p);
void model_free(model *m);

/* Home device of layer il's weights and KV cache (-1: host memory). */
int32_t model_layer_device(const model *m, int32_t il);

/* A graph leaf for a weight, bound to its memory. */
graph_tensor *model_weight_leaf(graph *g, const model_weight *w);

/* ------------------------------------------------------------ forward */

/* The inputs of one micro-batch graph, filled by the caller after allocation. */
typedef struct model_batch_graph {
    graph *g;
    graph_tensor *tokens;  /* I32 [n_tokens] */
    graph_tensor *pos;     /* I32 [n_tokens] */
    graph_tensor *mask;    /* F32 [n_kv, n_tokens] causal mask */
    graph_tensor *out_ids; /* I32 [n_out] rows whose logits are wanted */
    graph_tensor *logits;  /* F32 [n_vocab, n_out] output */
    int32_t n_tokens;
    int32_t n_kv;          /* cache cells attended to */
    int32_t n_out;
} model_batch_graph;

/* Build the forward graph for n_tokens tokens written to cache cells
 * kv_head..kv_head+n_tokens-1, attending to cells 0..n_kv-1, with logits
 * for n_out rows. Returns 0, or -1 with the first shape error. */
int model_build_graph(const model *m, kv_cache *kv, int32_t n_tokens, int32_t kv_head,
                      int32_t n_kv, int32_t n_out, model_batch_graph *out);

/* The llama-family builder (llama, qwen2). */
int llama_build_graph(const model *m, kv_cache *kv, int32_t n_tokens, int32_t kv_head,
                      int32_t n_kv, int32_t n_out, model_batch_graph *out);

#endif
