/*
 * The structs behind the public handles tessera_model and tessera_context,
 * shared by the files implementing the public API of the model module.
 */
#ifndef TESSERA_MODEL_PUBLIC_H
#define TESSERA_MODEL_PUBLIC_H

#include <pthread.h>

#include <tessera/tessera.h>
#include <tessera/tessera_tools.h>

#include "host/host.h"
#include "kv/kv.h"
#include "model/decode.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/mrope.h"
#include "model/step_graph.h"
#include "sched/sched.h"
#include "vocab/vocab.h"

enum { TESSERA_MAX_DEVICES = 32 };

struct tessera_model {
    model *m;
    vocab *vocab;
    host_device *devices[TESSERA_MAX_DEVICES]; /* chosen, in preference order */
    int32_t n_devices;
    double load_ms;
    char desc[256];
    char arch[32];
    char weight_devices[2 * HOST_DEVICE_NAME_MAX + 2]; /* tessera_model_devices: "vulkan0,cpu-avx0" */
    /* The two lists below change after loading, from whichever threads
     * share the model (each with its own context): mu guards them. */
    pthread_mutex_t mu;
    /* NUL-terminated copies handed out by tessera_model_meta_str */
    char **meta_keys;
    char **meta_vals;
    int32_t n_meta;
    tessera_lora **loras; /* adapters loaded for it, freed with it */
    int32_t n_loras, cap_loras;
};

struct tessera_lora {
    tessera_model *model;
    model_lora *l;
};

struct tessera_context {
    tessera_model *model;
    tessera_context_params params;
    kv_cache *kv;
    sched *sched;
    decode_scratch scratch; /* tessera_decode's per-call arrays */
    float *logits;        /* n_logits rows of n_vocab */
    int64_t logits_cap;   /* rows allocated */
    int32_t n_last;       /* tokens of the last decode call */
    bool last_all;        /* the last call kept every row */
    bool explained_prompt, explained_gen;
    tessera_timings timings;
    tessera_step_stats gen_stats; /* one-token steps' device calls */
    step_graph step;  /* the last step's graph, kept for the next one */
    bool graph_reuse; /* use it again when the next step fits (default) */
    bool embeddings;  /* rows of ctx->logits are hidden states (n_embd wide) */
    const float *embd_in; /* during tessera_decode_embd: the next micro-batch's input rows */
    bool non_causal;      /* during tessera_decode_embd with TESSERA_DECODE_NON_CAUSAL */
    mrope_state mrope;    /* M-RoPE's positions past images (qwen2vl) */
    int32_t pooling;  /* an embedding context's tessera_pooling (never unspecified) */
    model_lora_use *lora_use; /* the adapters in use (tessera_context_set_loras) */
    model_lora_set lora;      /* {lora_use, n} as graphs take it */
    /* tessera_context_set_matmul_observer's callback, and the rows it is
     * handed (observe.c) */
    tessera_matmul_observer observer;
    void *observer_user;
    float *observe_rows;
    int64_t observe_cap;
    int32_t *observe_ids;
    int64_t observe_ids_cap;
};

/* Free the model's adapters (api_lora.c; tessera_model_free). */
void model_loras_free(tessera_model *tm);

/* Floats in one row of ctx->logits: n_vocab, or n_embd in an embedding context. */
static inline int64_t context_row_width(const tessera_context *ctx) {
    return ctx->embeddings ? ctx->model->m->hp.n_embd : ctx->model->m->hp.n_vocab;
}

/* Decide whether ctx embeds and how it pools (api_embed.c): 0 or -1. */
int context_embed_setup(tessera_context *ctx);

double tessera_now_ms(void);
/* Graph reuse between decode steps on (the default) or off (every step
 * builds its graph; the results are the same bits: tests compare). The
 * environment variable TESSERA_GRAPH_REUSE=0 turns it off for new
 * contexts (A/B measurements). */
void context_set_graph_reuse(tessera_context *ctx, bool on);

/* Cells of the sliding-window set (api_context.c). */
int32_t context_swa_cells(int32_t n_swa, uint32_t n_seq, uint32_t n_batch);

/* The GGUF type number of a cache type (F16 for an unknown one). */
int32_t context_kv_dtype(tessera_kv_type type);

/* Which of the chosen devices hold what: the first non-CPU device takes
 * offloaded layers, the first CPU device computes the rest. */
void model_pick_devices(host_device *const *devices, int32_t n, host_device **gpu, host_device **cpu);

/* Allocate the compute buffers of the largest step (n_batch tokens over
 * every cell) so an out-of-memory shows at creation (ctx_memory.c). */
int context_reserve(tessera_context *ctx);
/* --verbose: one line per device: weights, KV (of type kv_type), compute. */
void context_print_memory(const tessera_context *ctx, const char *kv_type);

#endif
