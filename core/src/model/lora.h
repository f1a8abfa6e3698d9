/*
 * lora — LoRA adapters for a loaded model, as llama.cpp's
 * convert_lora_to_gguf.py writes them: a GGUF with general.type "adapter",
 * adapter.type "lora", adapter.lora.alpha, general.architecture the base
 * model's, and for each adapted weight W [n_in, n_out] (GGUF order) the
 * pair "<W's name>.lora_a" [n_in, r] and "<W's name>.lora_b" [r, n_out].
 *
 * An adapter is applied in the graph, never merged into the weights: every
 * product with an adapted weight becomes
 *
 *     y = W x + scale * B (A x),    scale = user_scale * alpha / r
 *
 * (alpha 0: scale = user_scale, as llama.cpp), one MUL_MAT, MUL_MAT,
 * SCALE, ADD per adapter in use (blk_linear), so it runs on every device.
 * The pair of a weight on the GPU is uploaded beside it at load.
 */
#ifndef TESSERA_MODEL_LORA_H
#define TESSERA_MODEL_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "host/host_weights.h"
#include "model/model.h"

typedef struct model_lora_pair {
    model_weight a, b; /* [n_in, r], [r, n_out] */
} model_lora_pair;

typedef struct model_lora {
    gguf_file *file;
    const model *base;
    float alpha;
    int32_t *pair_of;       /* [base->n_weights]: index into pairs, -1 when not adapted */
    model_lora_pair *pairs; /* n_pairs */
    int32_t n_pairs;
    host_device *gpu_hd;    /* where the pairs of offloaded weights went */
    host_weight_set gpu_weights;
} model_lora;

/* One adapter in use with its user scale (what a context holds). */
typedef struct model_lora_use {
    const model_lora *lora;
    float scale;
} model_lora_use;

/* Adapters in use while building a graph (n 0: none). */
struct model_lora_set {
    const model_lora_use *use;
    int32_t n;
};

/* The checks shared by loading and export-lora (lora_export.c), each
 * naming the file and the key or tensor at fault:
 * the adapter's keys (general.type, adapter.type, general.architecture
 * equal to arch, adapter.lora.alpha -> *alpha, 0 when absent) and that it
 * has tensors; */
int lora_file_check(const gguf_file *f, const char *arch, float *alpha);
/* ti is "<base>.lora_a" or ".lora_b" (*is_a), 2-D, of a type Tessera
 * computes with: *base_len is the length of <base>; */
int lora_tensor_base(const gguf_file *f, const gguf_tensor_info *ti, size_t *base_len, bool *is_a);
/* both halves (names not NULL) and A [n_in, r], B [r, n_out] for the base
 * weight W [n_in, n_out]. */
int lora_pair_check(const gguf_file *f, const char *w_name, const int64_t *w_ne, const char *a_name,
                    const int64_t *a_ne, const char *b_name, const int64_t *b_ne);

/* Open and validate the adapter at path for model m: its type keys, its
 * architecture against m's, every tensor a lora_a/lora_b of a weight m
 * has, with both halves, equal ranks and the weight's shape; the pairs of
 * offloaded weights are uploaded. NULL with an error naming the file and
 * the key or tensor at fault. */
model_lora *model_lora_load(const model *m, const char *path);
void model_lora_free(model_lora *l);

/* The pair adapting weight w (one of l->base->weights), NULL if none. */
const model_lora_pair *model_lora_pair_for(const model_lora *l, const model_weight *w);

/* The scale of B (A x) for a user scale: user_scale * alpha / r. */
float model_lora_scale(const model_lora *l, const model_lora_pair *p, float user_scale);

#endif
