/*
 * tessera.h — Tessera's public C API.
 *
 * Every call that can fail returns a status (0 on success, negative on
 * failure) or NULL, and tessera_last_error() then says what went wrong in
 * one line naming the file, key, tensor, flag or device at fault.
 *
 * A typical program:
 *
 *     tessera_init(NULL);
 *     tessera_model_params mp = tessera_model_default_params();
 *     tessera_model *m = tessera_model_load("model.gguf", &mp);
 *     tessera_context_params cp = tessera_context_default_params();
 *     tessera_context *ctx = tessera_context_new(m, &cp);
 *     n = tessera_tokenize(m, text, len, toks, max, true, false);
 *     tessera_decode(ctx, toks, n, 0, 0);          // prompt at positions 0..n-1
 *     const float *logits = tessera_logits(ctx, -1); // last token's logits
 *     ...
 *     tessera_context_free(ctx); tessera_model_free(m); tessera_shutdown();
 *
 * Beside it, with the same conventions, what the tessera binary and its
 * server use beyond this header: tessera_gguf.h (read a GGUF file's
 * metadata and tensors), tessera_vocab.h (a vocabulary alone),
 * tessera_devices.h (device and plugin details), tessera_tools.h (quantize,
 * plugin conformance), tessera_chat.h (tool calls in a reply).
 * libtessera.so exports these headers' functions and nothing else.
 */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The last error of the calling thread, "" if none. */
const char *tessera_last_error(void);

/* The library version, e.g. "0.1.0". */
const char *tessera_version(void);

/* ====================================================================
 * Runtime, models, contexts, tokens, decoding  (engineer "model")
 * ==================================================================== */

typedef int32_t tessera_token;
typedef struct tessera_model tessera_model;
typedef struct tessera_context tessera_context;

/* ------------------------------------------------------------ runtime */

typedef struct tessera_init_params {
    /* Extra plugin directories searched first (--plugin-dir), may be NULL. */
    const char *const *plugin_dirs;
    int32_t n_plugin_dirs;
    /* 0 quiet (warnings and errors), 1 info (--verbose), 2 debug: the
     * library's and plugins' log lines at or below this level go to the log
     * callback (tessera_log_set; none by default: nowhere).
     * TESSERA_VERBOSITY_ERRORS: errors only (no warnings). */
    int32_t verbosity;
} tessera_init_params;

#define TESSERA_VERBOSITY_ERRORS (-1)

/* Discover backend plugins (--plugin-dir, TESSERA_PLUGIN_PATH, next to the
 * executable, install libdir) and register the built-in ref backend. May be
 * called once per process before loading models; params may be NULL. A
 * second call is a no-op returning 0. Plugins that fail to load are listed by
 * `tessera devices`, they never make this call fail. */
int tessera_init(const tessera_init_params *params);
void tessera_shutdown(void);

/* ------------------------------------------------- a guest in the process
 *
 * libtessera is a guest in its process (a JVM, an Android app, a server):
 * unless the application asks, it installs no signal handler, changes no
 * signal mask and no locale, and writes nothing to stdout or stderr. Errors
 * the API returns are told by tessera_last_error(); warnings and, with
 * tessera_init_params.verbosity, info and debug lines (the library's and
 * its plugins') go to the log callback, and nowhere when there is none (the
 * default). */

/* Log levels (a line is passed on when its level is at or below the
 * verbosity tessera_init was given; lines an option asked for, such as a
 * context's verbose summary or explain, always are). */
#define TESSERA_LOG_ERROR 0
#define TESSERA_LOG_WARN 1
#define TESSERA_LOG_INFO 2
#define TESSERA_LOG_DEBUG 3

/* text: one line as the tessera CLI prints it on stderr, ending in '\n',
 * e.g. "tessera: model: warning: -ngl 99 ignored: no GPU device ...\n".
 * Called on whichever thread logs (plugins' worker threads included),
 * possibly on several at once; it must not call back into libtessera. */
typedef void (*tessera_log_fn)(int32_t level, const char *text, void *user);

/* Send the log to fn (NULL: nowhere, the default); user is passed back. Any
 * time, from any thread; calls already in flight may still reach the
 * previous callback. */
void tessera_log_set(tessera_log_fn fn, void *user);

/* Crash isolation for plugins, off by default: a plugin that crashes
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) inside a call from the library
 * is named on stderr ("tessera: plugin 'acme' (/path) crashed with signal
 * 11 (SIGSEGV) in supports_op on acme0 (node ...)") before the signal takes
 * its course (the handler that was there before, or the default action).
 * For a program that owns its process, as the tessera CLI does: enabling
 * it installs process-wide handlers for those five signals, which a
 * runtime using them (the JVM, ART, a sanitizer installed later) must not
 * get by surprise. Disabling restores the handlers found when it was
 * enabled, where ours are still in place. Call it from one thread, before
 * tessera_init or between computations. Returns 0, or -1 with an error. */
int tessera_set_crash_guard(bool enable);

/* One compute device, as `tessera devices` lists it (added for the
 * bindings: Python's tessera.devices(), Java's Tessera.devices()). */
typedef struct tessera_device_info {
    char name[48];        /* "cpu-avx0", "vulkan0", "ref": what --device takes */
    char kind[16];        /* "CPU", "GPU", "accelerator" */
    char description[128];
    char plugin_path[256]; /* the plugin file it came from, "(built-in)" */
    uint64_t memory_total; /* bytes, 0 when unknown */
    uint64_t memory_free;
} tessera_device_info;

/* Fill out[0..max) with the devices tessera_init found, in the default
 * order (GPU, best CPU, ref); returns how many there are (may be more than
 * max), or -1 before tessera_init. */
int32_t tessera_devices(tessera_device_info *out, int32_t max);

/* Ask running computations to stop (async-signal-safe: call it from a SIGINT
 * handler). tessera_decode then fails with "aborted". */
void tessera_abort(void);
/* Clear the abort request (before the next decode). */
void tessera_abort_clear(void);
bool tessera_aborted(void);

/* -------------------------------------------------------------- models */

/* progress in [0, 1]; return false to cancel the load. */
typedef bool (*tessera_progress_fn)(float progress, void *user);

typedef struct tessera_model_params {
    /* Comma-separated device list as for --device ("vulkan0,cpu-avx0"), or
     * NULL for the default order (GPU, best CPU, ref). The first CPU device
     * in the list computes the layers kept in host memory; the first GPU
     * device gets the last n_gpu_layers layers (TESSERA_NGL_AUTO: as many
     * as fit in its free memory, see tessera_params_fit). */
    const char *devices;
    int32_t n_gpu_layers;
    tessera_progress_fn progress; /* NULL: none */
    void *progress_user;
    /* Read the weights into allocated memory instead of mapping the file
     * (llama.cpp's --no-mmap). */
    bool no_mmap;
    /* Lock the host weights in RAM (mlock); a refusal (RLIMIT_MEMLOCK) is a
     * warning naming the limit, not an error (llama.cpp's --mlock). */
    bool use_mlock;
    /* Appended: weights placed by name before the n_gpu_layers rule
     * (llama.cpp's -ot/--override-tensor): a NULL-terminated list of
     * "PATTERN=DEVICE" (NULL: none), PATTERN a regular expression (PCRE2)
     * searched in each tensor name, DEVICE "CPU" (host memory; a CPU
     * device's name too) or the GPU device's name; the first rule that
     * matches decides. The strings need only last until the load returns. */
    const char *const *tensor_overrides;
    /* The experts (ffn_{up,down,gate,gate_up}_exps) of the first n_cpu_moe blocks
     * stay in host memory, computed by the CPU device, while the rest of
     * those layers goes where n_gpu_layers says (llama.cpp's --n-cpu-moe;
     * TESSERA_CPU_MOE_ALL: every block, --cpu-moe). 0: none. */
    int32_t n_cpu_moe;
} tessera_model_params;

/* n_gpu_layers: as many layers as fit the GPU device's free memory. */
#define TESSERA_NGL_AUTO (-1)
/* n_cpu_moe: the experts of every block (--cpu-moe). */
#define TESSERA_CPU_MOE_ALL INT32_MAX

tessera_model_params tessera_model_default_params(void);

/* Map a GGUF file and prepare its weights (read in place from the mapping on
 * CPU devices, uploaded to the GPU for offloaded layers). */
tessera_model *tessera_model_load(const char *path, const tessera_model_params *params);
void tessera_model_free(tessera_model *model);

/* A one-line description: "llama 5 layers, dim 64, 8 heads (4 kv), ...". */
const char *tessera_model_desc(const tessera_model *model);
const char *tessera_model_arch(const tessera_model *model);
/* The devices holding the weights, GPU first: "vulkan0,cpu-avx0", "cpu-avx0". */
const char *tessera_model_devices(const tessera_model *model);
int32_t tessera_model_n_vocab(const tessera_model *model);
int32_t tessera_model_n_ctx_train(const tessera_model *model);
int32_t tessera_model_n_embd(const tessera_model *model);
int32_t tessera_model_n_layer(const tessera_model *model);
uint64_t tessera_model_n_params(const tessera_model *model);
uint64_t tessera_model_size_bytes(const tessera_model *model);
/* A string metadata value of the model's GGUF file (e.g.
 * "tokenizer.chat_template"), NUL-terminated copy owned by the model, or NULL
 * when absent / not a string. */
const char *tessera_model_meta_str(const tessera_model *model, const char *key);

/* ---------------------------------------------------------------- tokens */

tessera_token tessera_token_bos(const tessera_model *model); /* -1 if none */
/* Whether the vocabulary asks for BOS at the start of a text
 * (tokenizer.ggml.add_bos_token, or its type's default). */
bool tessera_vocab_adds_bos(const tessera_model *model);
tessera_token tessera_token_eos(const tessera_model *model); /* -1 if none */
tessera_token tessera_token_eot(const tessera_model *model); /* -1 if none */
/* True for tokens that end generation (EOS, EOT, EOM, ...). */
bool tessera_token_is_eog(const tessera_model *model, tessera_token token);

/* Tokenize text[0..len). add_special: add BOS (and EOS) as the vocabulary
 * says; parse_special: recognise special-token strings in the text.
 * Returns the number of tokens written, or when max_tokens is too small the
 * negated number needed (nothing written then); INT32_MIN on error. */
int32_t tessera_tokenize(const tessera_model *model, const char *text, size_t len,
                         tessera_token *tokens, int32_t max_tokens, bool add_special,
                         bool parse_special);

/* The bytes of one token (not NUL-terminated). Returns the length, the
 * negated length needed when buf is too small, INT32_MIN on error (bad id). */
int32_t tessera_token_to_piece(const tessera_model *model, tessera_token token, char *buf,
                               int32_t size, bool render_special);

/* Text of a token sequence, NUL-terminated when it fits. remove_special drops
 * a leading BOS / trailing EOS. Returns the length, or the negated length
 * needed (plus the NUL) when buf is too small; INT32_MIN on error. */
int32_t tessera_detokenize(const tessera_model *model, const tessera_token *tokens,
                           int32_t n_tokens, char *buf, int32_t size, bool remove_special,
                           bool render_special);

/* ------------------------------------------------------------- contexts */

/* KV cache element types (llama.cpp's -ctk/-ctv choices). The block types
 * (Q*, IQ4_NL) need a head size that is a multiple of 32; a quantized V
 * cache needs flash attention. */
typedef enum tessera_kv_type {
    TESSERA_KV_F16 = 0, /* default, as llama.cpp */
    TESSERA_KV_F32 = 1,
    TESSERA_KV_BF16 = 2,
    TESSERA_KV_Q8_0 = 3,
    TESSERA_KV_Q4_0 = 4,
    TESSERA_KV_Q4_1 = 5,
    TESSERA_KV_Q5_0 = 6,
    TESSERA_KV_Q5_1 = 7,
    TESSERA_KV_IQ4_NL = 8,
    TESSERA_KV_TYPE_COUNT
} tessera_kv_type;

/* "f16", "q8_0", ... (llama.cpp's spelling), or NULL for a bad value. */
const char *tessera_kv_type_name(tessera_kv_type type);
/* The type named name (case-insensitive), or -1. */
int tessera_kv_type_from_name(const char *name);

/* Attention as FLASH_ATTN nodes (one fused op; the V cache is then stored
 * like K) or as two MUL_MATs and a SOFT_MAX. AUTO: flash attention when
 * every device that computes an attention can compute it with the cache
 * types, else not. */
typedef enum tessera_flash_attn {
    TESSERA_FLASH_ATTN_OFF = 0,
    TESSERA_FLASH_ATTN_ON = 1,
    TESSERA_FLASH_ATTN_AUTO = 2
} tessera_flash_attn;

typedef struct tessera_context_params {
    uint32_t n_ctx;    /* 0: the model's training context */
    uint32_t n_batch;  /* tokens per micro-batch (default 512) */
    int32_t n_threads; /* 0: number of online CPUs */
    tessera_kv_type kv_type;
    /* Print the scheduler's placement (splits, copies, fallbacks) to stderr
     * for the first graph of each shape (prompt and single-token). */
    bool explain;
    bool verbose; /* timings and sizes to stderr */
    /* Appended: per-cache types. Where one is left at F16 (the default),
     * kv_type (the older field, which sets both) decides it. */
    tessera_kv_type type_k, type_v;
    tessera_flash_attn flash_attn; /* default OFF */
    /* Sequences decoded side by side (tessera_decode_batch; 0 means 1):
     * sliding-window layers keep a window per sequence plus a batch. */
    uint32_t n_seq_max;
    /* Sliding-window layers keep every position too (llama.cpp's --swa-full):
     * more memory, but any rewind keeps what precedes it. */
    bool swa_full;
    /* Appended: an embedding context (tessera_embed) instead of one that
     * gives logits (llama.cpp's --embeddings). Encoder models (bert,
     * nomic-bert) always make one. pooling: TESSERA_POOLING_UNSPECIFIED
     * (the default) takes the file's <arch>.pooling_type, none when absent. */
    bool embeddings;
    int32_t pooling; /* a tessera_pooling */
} tessera_context_params;

tessera_context_params tessera_context_default_params(void);

/* Fit layers and context to the devices' free memory, before loading
 * (llama.cpp's -ngl auto): with the devices of mp as tessera_model_load
 * would choose them,
 *  - mp->n_gpu_layers TESSERA_NGL_AUTO becomes the most layers the first
 *    GPU-like device holds with their KV cache and compute buffers (the
 *    weights mp->tensor_overrides and n_cpu_moe keep in host memory
 *    counted on the host, those they send to the GPU on the GPU); an
 *    explicit count that does not fit is an error naming the device and the
 *    sizes;
 *  - cp->n_ctx 0 becomes the training context (at most n_ctx_default_max
 *    when not 0) for each of cp->n_seq_max sequences; it is halved (not
 *    below 4096) while the GPU cannot hold every layer asked for, and then
 *    lowered until the host holds it; an explicit n_ctx that does not fit
 *    is an error naming the device and the sizes.
 * report (may be NULL) gets one line saying what was decided. 0 or -1. */
int tessera_params_fit(const char *path, tessera_model_params *mp, tessera_context_params *cp,
                       uint32_t n_ctx_default_max, char *report, size_t report_size);

tessera_context *tessera_context_new(tessera_model *model, const tessera_context_params *params);
void tessera_context_free(tessera_context *ctx);

/* ------------------------------------------------------------ LoRA adapters */

/* A LoRA adapter for one model, as llama.cpp's convert_lora_to_gguf.py
 * writes it (general.type "adapter", adapter.type "lora",
 * adapter.lora.alpha, a "<weight>.lora_a" and "<weight>.lora_b" per adapted
 * weight): llama.cpp's llama_adapter_lora. A context using it adds
 * scale * alpha / rank * B (A x) to every product W x with an adapted
 * weight, in the graph (the weights are not changed), on every device. */
typedef struct tessera_lora tessera_lora;

/* Load and check the adapter at path against model (architecture, every
 * tensor's base weight and shape); the pairs of offloaded weights go to the
 * GPU with them. The adapter belongs to the model: tessera_model_free frees
 * the ones still loaded. NULL and tessera_last_error() naming the file and
 * key or tensor on failure. Threads sharing the model may load and free
 * adapters at the same time (and decode with their own contexts). */
tessera_lora *tessera_lora_load(tessera_model *model, const char *path);
/* Free an adapter no context is using any longer (NULL: nothing). */
void tessera_lora_free(tessera_lora *lora);
/* adapter.lora.alpha (0 when the file has none: the scale is then the
 * user's alone); the path it was loaded from; the weights it adapts. */
float tessera_lora_alpha(const tessera_lora *lora);
const char *tessera_lora_path(const tessera_lora *lora);
int32_t tessera_lora_n_weights(const tessera_lora *lora);

/* Use adapters loras[0..n) with scales[0..n) in ctx from its next decode
 * on, replacing the set in use (n 0: none; llama.cpp's
 * llama_set_adapters_lora). Each must be of ctx's model; an adapter with
 * scale 0 costs nothing. Tokens already in the KV cache stay as they were
 * computed: a caller that changes the set drops what no longer matches
 * (the server's slots and the prompt cache do). 0 or -1. */
int tessera_context_set_loras(tessera_context *ctx, tessera_lora *const *loras, const float *scales, int32_t n);

/* What a context holds on one device. The device computing the layers kept
 * in host memory also gets the host's share: weights read from the mapping
 * (or the --no-mmap copy), host KV cache, the scheduler's host arena. */
typedef struct tessera_memory {
    char device[48];  /* "vulkan0", "cpu-avx0" */
    uint64_t weights; /* bytes */
    uint64_t kv;
    uint64_t compute; /* compute buffers, reserved at creation */
} tessera_memory;

/* Fill out[0..max) with one row per device holding anything; returns the
 * rows written. */
int32_t tessera_context_memory(const tessera_context *ctx, tessera_memory *out, int32_t max);

uint32_t tessera_context_n_ctx(const tessera_context *ctx);
uint32_t tessera_context_n_batch(const tessera_context *ctx);
const tessera_model *tessera_context_model(const tessera_context *ctx);
int tessera_context_set_threads(tessera_context *ctx, int32_t n_threads);

/* ------------------------------------------------------------- decoding */

enum {
    /* Keep the logits of every token of the call (perplexity); default is
     * the last token only. */
    TESSERA_DECODE_ALL_LOGITS = 1 << 0,
    /* tessera_decode_embd: the rows attend to each other both ways (a
     * Gemma 3 image's, as llama.cpp's libmtmd decodes them); they must fit
     * one batch (n_batch). */
    TESSERA_DECODE_NON_CAUSAL = 1 << 1
};

/* Run tokens[0..n) at positions pos..pos+n-1 of sequence 0. The cache keeps
 * positions < pos and forgets anything at or after pos (so pos lower than the
 * current length rewinds, e.g. to re-use a chat prefix). Calls longer than
 * n_batch are split into micro-batches. Errors: pos + n > n_ctx ("context
 * full"), pos greater than the current length, token id out of range,
 * aborted. On error the cache holds positions < pos, or none when a
 * sliding-window cache had dropped positions the token at pos sees (then
 * also a pos lower than the current length fails, and clears the cache:
 * tessera_kv_len says what it holds). */
int tessera_decode(tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens,
                   int32_t pos, uint32_t flags);

/* Logits (n_vocab floats) of token i of the last decode call; i = -1 means
 * its last token. NULL (with an error) when i was not kept (no
 * TESSERA_DECODE_ALL_LOGITS) or is out of range. Valid until the next decode. */
const float *tessera_logits(tessera_context *ctx, int32_t i);

/* Number of positions held in the KV cache of sequence 0. */
int32_t tessera_kv_len(const tessera_context *ctx);
/* Forget positions >= pos (0 clears). A model with sliding-window layers
 * keeps only their window: when positions that a token at pos would see
 * were dropped, everything is forgotten (check tessera_kv_len). */
int tessera_kv_truncate(tessera_context *ctx, int32_t pos);

/* Timings of the context since creation (or the last reset). */
typedef struct tessera_timings {
    double load_ms;     /* model load */
    double prompt_ms;   /* decode calls with more than one token */
    int64_t n_prompt;   /* tokens in those calls */
    double gen_ms;      /* decode calls with one token */
    int64_t n_gen;
} tessera_timings;
void tessera_context_timings(const tessera_context *ctx, tessera_timings *out);
void tessera_context_timings_reset(tessera_context *ctx);

/* What the context's one-token decode steps (generation) asked of the
 * devices since creation or the last timings reset, summed over the steps
 * (`--verbose` prints them per step). On a GPU a compute is one submission;
 * uploads and reads are copies between host and device memory. */
typedef struct tessera_step_stats {
    int64_t n_steps;        /* one-token decode steps measured */
    int64_t n_graphs_built; /* steps that built their graph (the others reused the last one) */
    int64_t n_splits;       /* splits of the last step's graph */
    int64_t n_computes;     /* device compute calls (one per split) */
    int64_t n_submits;      /* batches handed to the devices (vkQueueSubmit, ...) */
    int64_t n_replayed;     /* computes that replayed device commands recorded before */
    int64_t n_uploads;      /* copies into a device */
    int64_t upload_bytes;
    int64_t n_reads;        /* copies back from a device (kept logits, ...) */
    int64_t read_bytes;
    int64_t n_waits;        /* waits for a device */
} tessera_step_stats;
void tessera_context_step_stats(const tessera_context *ctx, tessera_step_stats *out);

/* Profiling (`--profile`): from now on the context's devices time every
 * node (Vulkan timestamp queries, OpenCL profiling events; the nodes then
 * run one after another) and the context sums per op type the nodes, the
 * bytes they read and write and their arithmetic. Turning it on again
 * starts new totals. Returns how many of the context's devices cannot time
 * their work (their nodes count without time), or -1. */
int tessera_context_set_profiling(tessera_context *ctx, bool on);

typedef struct tessera_op_profile {
    const char *op;    /* "MUL_MAT", "FLASH_ATTN", ... */
    int64_t nodes;     /* nodes computed */
    int64_t untimed;   /* of those, on devices that do not time */
    double device_ms;  /* device time of the timed ones */
    double bytes;      /* bytes read and written (each source once) */
    double flops;      /* floating-point operations */
} tessera_op_profile;
/* The per-op totals since profiling was turned on, ops with nodes only,
 * the most device time first; returns how many were written (at most
 * max). */
int32_t tessera_context_profile(const tessera_context *ctx, tessera_op_profile *out, int32_t max);

/* ====================================================================
 * Sampling and chat templates  (engineer "sample")
 * ==================================================================== */

/* ------------------------------------------------------------- sampling
 * Logit bias first, then the steps in the order `samplers` names,
 * llama.cpp's by default: repetition / frequency / presence penalties ->
 * DRY -> top-n-sigma -> top-k -> typical -> top-p -> min-p -> XTC ->
 * temperature (dynamic with a range) -> draw. With mirostat 1 or 2 the
 * chain is logit bias -> temperature -> mirostat, as in llama.cpp. temp <= 0
 * (without a dynamic range) is greedy: the highest logit after the steps.
 * Each step does what llama.cpp's sampler of that name does, and the draw
 * is llama.cpp's too (std::mt19937 from the seed, libstdc++'s uniform
 * double, the candidates walked in the order the steps left them), so one
 * seed gives llama.cpp's tokens on the same logits, on every machine. */

typedef struct tessera_sampler tessera_sampler;

typedef struct tessera_logit_bias {
    tessera_token token;
    float bias; /* added to the logit; -INFINITY bans the token */
} tessera_logit_bias;

/* Seed value that asks for a seed from the clock (tessera_sampler_seed()
 * tells which one was used). */
#define TESSERA_SEED_RANDOM 0xFFFFFFFFu

typedef struct tessera_sampler_params {
    uint32_t seed;           /* default TESSERA_SEED_RANDOM */
    float temp;              /* 0.8; <= 0: greedy */
    int32_t top_k;           /* 40; <= 0: off */
    float top_p;             /* 0.95; 1: off */
    float min_p;             /* 0.05; 0: off */
    float typical_p;         /* 1 (off) */
    int32_t penalty_last_n;  /* 64 last tokens; 0: penalties off */
    float penalty_repeat;    /* 1 (off): logit > 0 ? logit / r : logit * r */
    float penalty_freq;      /* 0 (off): minus freq * occurrences */
    float penalty_present;   /* 0 (off): minus present if it occurred */
    const tessera_logit_bias *logit_bias; /* copied by tessera_sampler_new */
    int32_t n_logit_bias;
    /* DRY: a token that would extend a sequence repeating earlier in the
     * last dry_penalty_last_n tokens by n >= dry_allowed_length loses
     * dry_multiplier * dry_base^(n - dry_allowed_length); a repeat stops at
     * a sequence breaker (tokenized with the model's vocabulary, so DRY
     * with breakers needs tessera_sampler_new_model). */
    float dry_multiplier;        /* 0 (off) */
    float dry_base;              /* 1.75 */
    int32_t dry_allowed_length;  /* 2 */
    int32_t dry_penalty_last_n;  /* 64; 0: off; -1: the context (new_model: the training context) */
    const char *const *dry_sequence_breakers; /* NULL: llama.cpp's "\n", ":", "\"", "*" */
    int32_t n_dry_sequence_breakers;          /* of a non-NULL list (0: none) */
    /* XTC: with chance xtc_probability, every candidate at least
     * xtc_threshold likely but the least likely of them is dropped. */
    float xtc_probability;   /* 0 (off) */
    float xtc_threshold;     /* 0.1; above 0.5: off */
    float top_n_sigma;       /* -1 (off, as any <= 0): keep logits >= max - n * sigma */
    float dynatemp_range;    /* 0 (off): temperature in [temp - range, temp + range] by entropy */
    float dynatemp_exponent; /* 1 */
    int32_t mirostat;        /* 0 (off), 1 Mirostat, 2 Mirostat 2.0 */
    float mirostat_tau;      /* 5: target entropy */
    float mirostat_eta;      /* 0.1: learning rate */
    /* The steps in order, llama.cpp's names separated by ';' (or ','):
     * penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc,
     * temperature (and its other spellings: top-k, nucleus, typical_p,
     * temp, ...). NULL: llama.cpp's default order; "": no step. */
    const char *samplers;
} tessera_sampler_params;

tessera_sampler_params tessera_sampler_default_params(void);

/* A sampler for rows of n_vocab logits (tessera_model_n_vocab()). NULL with
 * an error naming the parameter when one is out of range. */
tessera_sampler *tessera_sampler_new(int32_t n_vocab, const tessera_sampler_params *params);
/* The same for model's vocabulary, which also tokenizes DRY's sequence
 * breakers (tessera_sampler_new refuses DRY with breakers) and resolves a
 * dry_penalty_last_n of -1 to the model's training context. */
tessera_sampler *tessera_sampler_new_model(const tessera_model *model, const tessera_sampler_params *params);
void tessera_sampler_free(tessera_sampler *sampler);
/* A sampler order in llama.cpp's spelling: text holds names (as `samplers`)
 * or, with letters, --sampling-seq's letters (e penalties, d dry, s
 * top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, t temperature);
 * NULL is the default order. Writes the names separated by ';' to out
 * (NUL-terminated) and returns their length, or -1 with an error naming
 * the unknown name or letter (or a too small out). */
int32_t tessera_sampler_order(const char *text, bool letters, char *out, size_t cap);
/* llama.cpp's default DRY sequence breakers ("\n", ":", "\"", "*"), what a
 * NULL dry_sequence_breakers means; their number in *n. */
const char *const *tessera_sampler_default_breakers(int32_t *n);
/* Pick a token from a row of logits (not modified). */
tessera_token tessera_sampler_sample(tessera_sampler *sampler, const float *logits);
/* Record a token of the sequence (prompt or generated) for the penalties. */
void tessera_sampler_accept(tessera_sampler *sampler, tessera_token token);
/* Forget the recorded tokens and restart the PRNG from the seed. */
void tessera_sampler_reset(tessera_sampler *sampler);
uint32_t tessera_sampler_seed(const tessera_sampler *sampler);

/* The distribution the last tessera_sampler_sample drew from: the tokens left
 * after the chain's filters (bias, penalties, top-k, typical, top-p, min-p,
 * temperature; the grammar's mask when it rejected the first pick), each with
 * its probability renormalized over them, most likely first (ties: lower id).
 * Greedy (temp <= 0) reports the pick alone with probability 1. Copies up to
 * cap of them into out and returns how many there are in all (may be more
 * than cap); 0 before the first sample and after a reset, -1 on a NULL
 * sampler or out (with cap > 0). llama-server's `post_sampling_probs`. */
typedef struct tessera_token_prob {
    tessera_token token;
    float prob;
} tessera_token_prob;
int32_t tessera_sampler_last_probs(const tessera_sampler *sampler, tessera_token_prob *out, int32_t cap);

/* ------------------------------------------------------------- grammars
 * Constrained generation: a sampler with a grammar only returns tokens
 * whose text keeps the output a prefix of something the grammar matches,
 * and end-of-generation tokens only once the output is complete.
 * Grammars use llama.cpp's GBNF syntax:
 *
 *     root   ::= answer "."
 *     answer ::= "yes" | "no" | [0-9]{1,3}      # comments run to the end of line
 *
 * (rules `name ::= ...`, alternatives |, grouping (), literals "..." and
 * classes [a-z] [^...] with \n \t \" \xHH \uHHHH escapes, . for any
 * character, repetition * + ? {m} {m,} {m,n}). Left recursion is an
 * error. A JSON Schema converts to such a grammar. */

typedef struct tessera_grammar tessera_grammar;

/* Parse GBNF text[0..len) with start rule root (NULL: "root"). NULL on
 * error: "grammar: line L, column C: what". */
tessera_grammar *tessera_grammar_parse(const char *gbnf, size_t len, const char *root);
/* A grammar for the JSON values a JSON Schema (JSON text) allows: types,
 * properties, required, additionalProperties, enum, const, items,
 * minItems/maxItems, minLength/maxLength, anyOf/oneOf, local $ref, formats
 * date, time, date-time, uuid. NULL on error: "json schema: #/path: what"
 * (a keyword it cannot follow, such as pattern or minimum, is an error). */
tessera_grammar *tessera_grammar_from_json_schema(const char *schema, size_t len);
/* The GBNF text a JSON Schema converts to (malloc'd: free() it), or NULL. */
char *tessera_json_schema_to_gbnf(const char *schema, size_t len);
/* Any JSON object (the OpenAI API's response_format "json_object"). */
tessera_grammar *tessera_grammar_json_object(void);
void tessera_grammar_free(tessera_grammar *grammar);

/* Constrain sampler to grammar (copied: free it when you like; NULL
 * removes the constraint) for the tokens of model. Tokens accepted from
 * now on (tessera_sampler_accept) advance the grammar, so accept the
 * prompt first, or call tessera_sampler_grammar_restart after it. When the
 * grammar allows no token, tessera_sampler_sample returns -1 with an
 * error. */
int tessera_sampler_set_grammar(tessera_sampler *sampler, const tessera_model *model,
                                const tessera_grammar *grammar);
/* Put the grammar back at its start (e.g. before each reply of a chat);
 * tessera_sampler_reset does it too. */
int tessera_sampler_grammar_restart(tessera_sampler *sampler);
/* The tokens accepted since the start make a complete match. */
bool tessera_sampler_grammar_complete(const tessera_sampler *sampler);

/* -------------------------------------------------------- chat templates
 * Chat templates are Jinja texts (tokenizer.chat_template), rendered
 * exactly as Hugging Face transformers renders them with Python's jinja2:
 * sandboxed, trim_blocks and lstrip_blocks on, break/continue, a tojson
 * filter that keeps non-ASCII, and the globals raise_exception(msg) and
 * strftime_now(fmt). Rendering is bounded in time, memory and output; a
 * template error (raise_exception included) is an error naming its line. */

typedef struct tessera_chat_template tessera_chat_template;

/* Compile a template. bos_text / eos_text (NULL: "") are the bos_token and
 * eos_token variables unless a render's variables give them. NULL with an
 * error ("template line N: ...") when the text does not compile. */
tessera_chat_template *tessera_chat_template_new(const char *jinja, size_t len, const char *bos_text,
                                                 const char *eos_text);
/* A built-in template by name ("chatml", "llama2", "llama3", "gemma",
 * "phi3", "zephyr", "mistral"); NULL with an error listing the names. */
tessera_chat_template *tessera_chat_template_builtin(const char *name, const char *bos_text,
                                                     const char *eos_text);
/* The model's template (tokenizer.chat_template) with the vocabulary's BOS
 * and EOS texts. A model without a template, or whose template does not
 * compile, gets ChatML and *fallback = true (fallback may be NULL); in the
 * second case tessera_last_error() says why. */
tessera_chat_template *tessera_chat_template_from_model(const tessera_model *model, bool *fallback);
void tessera_chat_template_free(tessera_chat_template *tmpl);

/* Render with the members of vars_json, a JSON object, as the template's
 * variables: messages (role, content, and optionally tool_calls,
 * reasoning_content, name, tool_call_id), tools, add_generation_prompt,
 * bos_token, eos_token, and extra keyword arguments such as
 * enable_thinking. Returns a malloc'd NUL-terminated string (free() it),
 * its length in *len when len is not NULL; NULL with an error. */
char *tessera_chat_template_apply(const tessera_chat_template *tmpl, const char *vars_json, size_t *len);

typedef struct tessera_chat_message {
    const char *role; /* "system", "user", "assistant", "tool", ... */
    const char *content;
} tessera_chat_message;

/* Render plain role/content messages (tessera_chat_template_apply with
 * {"messages": [...], "add_generation_prompt": ...}). */
char *tessera_chat_template_render(const tessera_chat_template *tmpl, const tessera_chat_message *messages,
                                   size_t n_messages, bool add_generation_prompt, size_t *len);

/* The template's Jinja text, and its default bos_token / eos_token. */
const char *tessera_chat_template_source(const tessera_chat_template *tmpl);
const char *tessera_chat_template_bos_token(const tessera_chat_template *tmpl);
const char *tessera_chat_template_eos_token(const tessera_chat_template *tmpl);

/* Whether a rendered text starts with the template's bos_token text: then
 * tokenize it without adding BOS (add_special false), or BOS comes twice. */
bool tessera_chat_template_text_has_bos(const tessera_chat_template *tmpl, const char *text, size_t len);

/* Split a model's complete reply into content, reasoning and tool calls,
 * reading the calls in the format the template's text asks for (Hermes
 * <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS], Qwen3-Coder XML, gpt-oss
 * Harmony), with a bare JSON object {"name", "arguments"} (or
 * {"tool_call": ...}, {"tool_calls": [...]}) accepted for any template.
 * tool_names[0..n_tool_names) are the tools offered; a bare JSON call must
 * name one of them. Returns malloc'd JSON text (free() it):
 *   {"content": "...", "reasoning_content": "..." or null,
 *    "tool_calls": [{"id": "..." or null, "name": "...", "arguments": "{...}"}]}
 * where arguments is a JSON object as text (the OpenAI API's shape). A call
 * that does not parse stays in the content. NULL only when out of memory.
 * (Added for the bindings; the server parses with the same code.) */
char *tessera_chat_parse_reply(const tessera_chat_template *tmpl, const char *text, size_t len,
                               const char *const *tool_names, size_t n_tool_names);

/* ====================================================================
 * Several sequences in one context  (added for `tessera serve`)
 * ==================================================================== */

/* Sequence ids of tessera_decode_batch are 0..TESSERA_MAX_SEQ-1. */
#define TESSERA_MAX_SEQ 64

/* Decode tokens of several sequences together (continuous batching): token
 * i goes to sequence seq[i] at position pos[i]. All sequences share the
 * context's n_ctx cache cells; each sees only its own positions. A sequence
 * forgets what it held at or after the first position given for it (as
 * tessera_decode does). want_logits (may be NULL: none) marks the tokens
 * whose logits are kept: afterwards tessera_logits(ctx, j) is the j-th kept
 * row in token order. Fails with "context full" when fewer cells are free
 * than tokens given. A context is driven either by tessera_decode or by this
 * call, not both. */
int tessera_decode_batch(tessera_context *ctx, const tessera_token *tokens, const int32_t *pos,
                         const int32_t *seq, const bool *want_logits, int32_t n_tokens);
/* Forget positions >= pos of sequence seq (0: all of it), freeing its cells;
 * all of it when a sliding-window cache dropped what pos would see (check
 * tessera_seq_len). */
int tessera_seq_remove(tessera_context *ctx, int32_t seq, int32_t pos);
/* One past the highest position sequence seq holds (0: none). */
int32_t tessera_seq_len(const tessera_context *ctx, int32_t seq);
/* Cache cells holding a position of some sequence. */
int32_t tessera_kv_cells_used(const tessera_context *ctx);

/* ====================================================================
 * Saved state  (a prompt cache, a server slot's save/restore)
 * ==================================================================== */

/* A context's state as bytes or a file: the caller's tokens (vocabulary
 * ids, or negative values the caller keys a medium's rows with, as
 * tessera serve does: kept as they are), the KV cache
 * cells (positions, sequences, K/V bytes of the cells in use), the last
 * decode's last row of logits, and optionally a sampler's PRNG, penalty
 * window and grammar state (not its parameters; loading a grammar's state
 * needs a sampler with the same grammar attached). The header records the
 * model (architecture, n_layer, n_embd, n_vocab, a hash of the GGUF's
 * metadata and tensor infos) and the
 * settings (KV types, widths, n_ctx); loading into another model or with
 * other KV settings is an error naming what differs, and a truncated,
 * corrupt (checksummed) or hostile file is an error, never a crash. A
 * smaller context works when the cells fit.
 *
 * seq -1 saves / replaces the whole cache (every sequence, cells laid out
 * as saved, logits included, so tessera_logits(ctx, -1) after a load is what
 * it was at the save); seq s >= 0 saves only sequence s's cells, and loads
 * them into sequence s (whatever sequence they came from) in free cells,
 * leaving the other sequences alone. On a load error the context's cells are
 * as before. */
void *tessera_state_save(tessera_context *ctx, int32_t seq, const tessera_token *tokens, int32_t n_tokens,
                         const tessera_sampler *sampler, size_t *len); /* malloc'd: free() it */
/* tokens[0..max_tokens) receives the saved tokens (*n_tokens their number;
 * more than max_tokens is an error); sampler may be NULL (its state in the
 * file is then ignored). label names the data in errors (NULL: "(memory)"). */
int tessera_state_load(tessera_context *ctx, int32_t seq, const void *data, size_t len, const char *label,
                       tessera_token *tokens, int32_t max_tokens, int32_t *n_tokens, tessera_sampler *sampler);
/* The same to a file (written beside it and renamed over it) and from one. */
int tessera_state_save_file(tessera_context *ctx, int32_t seq, const char *path, const tessera_token *tokens,
                            int32_t n_tokens, const tessera_sampler *sampler);
int tessera_state_load_file(tessera_context *ctx, int32_t seq, const char *path, tessera_token *tokens,
                            int32_t max_tokens, int32_t *n_tokens, tessera_sampler *sampler);

/* A sampler's PRNG and penalty window as bytes, then, when it has a
 * grammar, the tokens the grammar accepted since its last restart and a
 * fingerprint of the grammar (set replays them; it refuses a state saved
 * with another grammar, or with or without one when this sampler differs).
 * set validates the bytes before changing the sampler. */
size_t tessera_sampler_state_size(const tessera_sampler *sampler);
int tessera_sampler_state_get(const tessera_sampler *sampler, void *buf, size_t size);
int tessera_sampler_state_set(tessera_sampler *sampler, const void *buf, size_t size);

/* ==================================================================== */

/* ====================================================================
 * Context shift  (added for --context-shift)
 * ==================================================================== */

/* Sequence seq forgets positions [n_keep, n_keep + n_discard) and its later
 * positions move down by n_discard, their cached keys turned (RoPE) to the
 * new positions, so decoding goes on at tessera_seq_len(ctx, seq), which is
 * n_discard less (llama.cpp's seq_rm + seq_add). A quantized K cache is
 * dequantized, turned and quantized again. Errors: a bad range; on a failed
 * computation the sequence is cleared. */
int tessera_seq_shift(tessera_context *ctx, int32_t seq, int32_t n_keep, int32_t n_discard);

/* The context shift as run, chat and the server's slots make it when a
 * sequence is full. tessera_shift_keep: the positions it keeps, n_keep
 * (--keep) after a BOS, the whole prompt for -1, never more than the
 * prompt. tessera_context_shift: sequence seq holds positions 0..*n_past-1;
 * drop half of what follows its first keep (tessera_seq_shift), from tokens
 * too when given (tokens[i] at position i), and lower *n_past by as much.
 * 0, or -1 with the reason in tessera_last_error(). */
int32_t tessera_shift_keep(int32_t n_keep, int32_t n_prompt, bool has_bos);
/* Whether ctx can make a context shift: false for a model with a recurrent
 * state (Mamba-2, LFM2, Granite 4 H), which holds everything before it and
 * cannot drop positions from its middle. llama.cpp turns --context-shift
 * off for such memory; run, chat and serve do the same, with a warning. */
bool tessera_context_can_shift(const tessera_context *ctx);
int tessera_context_shift(tessera_context *ctx, int32_t seq, int32_t keep, tessera_token *tokens,
                          int32_t *n_past);

/* ====================================================================
 * Speculative decoding  (added for -md / --spec-type)
 * ==================================================================== */
/*
 * A draft of the next tokens, from a small draft model sharing the
 * target's vocabulary or from n-grams of the text so far (prompt lookup),
 * verified by the target in one batch: the target's sampler picks each
 * token from the target's logits as plain decoding would, a draft token is
 * kept while it equals the pick, and the cache forgets the rest. So the
 * output is the target's: greedy gives the same tokens, and sampling the
 * same tokens for the same seed (the drafts are deterministic, for which
 * keeping x when the target's own draw is x is the standard acceptance
 * rule, min(1, p/q) with q 1 at x). The gain is one batch of 1 + k tokens
 * in place of up to 1 + k one-token steps.
 */
typedef struct tessera_spec tessera_spec;

typedef struct tessera_spec_params {
    int32_t n_max;   /* --draft-max: most tokens drafted per step (16) */
    int32_t n_min;   /* --draft-min: a shorter draft is not used (0) */
    float p_min;     /* --draft-p-min: the draft model stops before a token it gives less (0.75) */
    int32_t ngram_n; /* --spec-ngram-simple-size-n: the n-gram looked up (12) */
    int32_t ngram_m; /* --spec-ngram-simple-size-m: most tokens an n-gram drafts (48) */
} tessera_spec_params;

tessera_spec_params tessera_spec_default_params(void);

/* Whether draft can draft for target (llama.cpp's rules): the same
 * tokenizer type, the same BOS and EOS and whether they are added,
 * vocabulary sizes within 128, and the same text for every token from id 5
 * up to the smaller size. 0, or -1 with an error naming what differs. */
int tessera_spec_compatible(const tessera_model *target, const tessera_model *draft);

/* Speculation for the target context: with draft (a context of a
 * compatible model, as many sequences and cells as the target's) from the
 * draft model, else (NULL) from n-grams. Neither context is owned. NULL
 * with an error naming the parameter or the difference. */
tessera_spec *tessera_spec_new(tessera_context *target, tessera_context *draft, const tessera_spec_params *params);
void tessera_spec_free(tessera_spec *spec);

/* One step of sequence seq, instead of "decode the last token, sample":
 * tokens[0..n_tokens) is the whole text so far (prompt and output), the
 * target's cache holds all but its last token (which the caller sampled and
 * accepted into sampler). The step drafts up to min(n_max, max_out - 1)
 * tokens, decodes the last token and the draft together, and writes the
 * tokens the sampler picks to out: the draft tokens it agreed with and the
 * pick that followed (stopping at an end-of-generation token), each
 * accepted into sampler. Returns how many (1..max_out); the cache then
 * holds tokens and out but the last of out. *n_drafted (may be NULL) gets
 * the draft's length; the accepted drafts are the returned count less one.
 * -1 on error (context full, aborted, a sampler error), the target's cache
 * for seq then holding tokens but their last. */
int32_t tessera_spec_step(tessera_spec *spec, int32_t seq, tessera_sampler *sampler, const tessera_token *tokens,
                          int32_t n_tokens, tessera_token *out, int32_t max_out, int32_t *n_drafted);

/* The draft model reads tokens[0..n_tokens) into sequence seq now, as the
 * target reads its prompt: call it after the target's prompt so that the
 * draft's share of the prompt is spent (and timed) with it, as llama.cpp
 * does, rather than at the first step. Optional: a step catches the draft
 * up on whatever it has not read. Nothing to do without a draft model.
 * 0, or -1 with an error. */
int tessera_spec_prefill(tessera_spec *spec, int32_t seq, const tessera_token *tokens, int32_t n_tokens);

/* Tokens drafted and accepted, and verifying steps, since creation or the
 * last reset, of sequence seq (-1: all). */
typedef struct tessera_spec_stats {
    int64_t n_steps;
    int64_t n_drafted;
    int64_t n_accepted;
} tessera_spec_stats;
void tessera_spec_stats_get(const tessera_spec *spec, int32_t seq, tessera_spec_stats *out);
void tessera_spec_stats_reset(tessera_spec *spec);

/* ====================================================================
 * Self-Extend  (added for --grp-attn-n / --grp-attn-w)
 * ==================================================================== */

/* Sequence seq's positions in [p0, p1) (p1 < 0: to the end) move by delta
 * (llama.cpp's seq_add; a position moved below 0 is forgotten), or become
 * pos / d (seq_div), their cached keys turned (RoPE) to the new positions.
 * Errors: a bad range or divisor, a cache with a sliding-window cell set
 * or a recurrent state (tessera_context_can_shift is false); on a failed
 * computation the sequence is cleared. */
int tessera_seq_add(tessera_context *ctx, int32_t seq, int32_t p0, int32_t p1, int32_t delta);
int tessera_seq_div(tessera_context *ctx, int32_t seq, int32_t p0, int32_t p1, int32_t d);

/* Self-Extend (group attention), as llama.cpp's completion tool does it:
 * a model reads past its training context by dividing the positions of
 * all but the last window of ga_w tokens by ga_n, one window at a time.
 * Call it before each decode of sequence seq with *n_past the position the
 * next token goes to and *ga_i the group state (0 at the start); it moves
 * positions while *n_past >= *ga_i + ga_w and lowers *n_past (the cache
 * keeps every token: n_ctx must hold them all). ga_n 1 does nothing.
 * tessera_self_extend_check says whether ga_n and ga_w are usable (ga_n >=
 * 1; ga_w a positive multiple of ga_n), naming the flags. 0, or -1. */
int tessera_self_extend_check(int32_t ga_n, int32_t ga_w);
int tessera_self_extend(tessera_context *ctx, int32_t seq, int32_t ga_n, int32_t ga_w, int32_t *ga_i,
                        int32_t *n_past);

/* ====================================================================
 * Embeddings and reranking  (added for `tessera embed`, /v1/embeddings)
 * ==================================================================== */

/* How the hidden states of a sequence's tokens become its vector (the
 * numbers are llama.cpp's, as in <arch>.pooling_type). */
typedef enum tessera_pooling {
    TESSERA_POOLING_UNSPECIFIED = -1, /* the file's pooling_type */
    TESSERA_POOLING_NONE = 0,         /* one vector per token */
    TESSERA_POOLING_MEAN = 1,         /* the mean over the tokens */
    TESSERA_POOLING_CLS = 2,          /* the first token's (BERT's [CLS]) */
    TESSERA_POOLING_LAST = 3,         /* the last token's (decoder embedders, Qwen3-Embedding) */
    TESSERA_POOLING_RANK = 4          /* the classification head (cls.output) on an encoder's first
                                       * token or a decoder's last: scores */
} tessera_pooling;

/* "none", "mean", "cls", "last", "rank" (NULL for a bad value), and back
 * (-1 for an unknown name; "unspecified" is TESSERA_POOLING_UNSPECIFIED). */
const char *tessera_pooling_name(int32_t pooling);
int32_t tessera_pooling_from_name(const char *name);

/* The pooling an embedding context uses (never UNSPECIFIED), or -1 when ctx
 * gives logits. */
int32_t tessera_context_pooling(const tessera_context *ctx);
/* Floats in one pooled vector: n_embd, or the classification head's
 * outputs (scores) with rank pooling. */
int32_t tessera_embed_dim(const tessera_context *ctx);

/* Normalisations of tessera_embed (llama.cpp's --embd-normalize): -1 none,
 * 0 max-abs scaled to int16's range, 1 taxicab, 2 Euclidean (L2, the usual
 * one), p > 2 the p-norm. */
#define TESSERA_EMBD_NORM_NONE (-1)
#define TESSERA_EMBD_NORM_L2 2

/* Run one sequence of tokens through an embedding context (alone: the cache
 * is emptied before and after) and write its vector to out: dim floats
 * (tessera_embed_dim) when pooled, n_tokens * dim (one row per token) with
 * pooling none. Each vector is normalised by embd_norm; rank scores are
 * never normalised. An encoder sees its whole input at once, so its input
 * must fit one batch (n_batch). Returns the floats written, or -1: not an
 * embedding context, no tokens, a token out of range, an input longer than
 * the context (or an encoder's batch), max_out too small. */
int64_t tessera_embed(tessera_context *ctx, const tessera_token *tokens, int32_t n_tokens, int32_t embd_norm,
                      float *out, int64_t max_out);

/* The tokens a reranker scores for a query and a document, as llama.cpp
 * lays them out: BOS, query, EOS, SEP, document, EOS, SEP, each special
 * token where the vocabulary adds it (WordPiece: [CLS] query [SEP]
 * document [SEP]).
 * Returns the count, the negated count needed when max_tokens is too small,
 * INT32_MIN on error. */
int32_t tessera_rerank_tokens(const tessera_model *model, const char *query, size_t query_len, const char *doc,
                              size_t doc_len, tessera_token *tokens, int32_t max_tokens);

/* The same pair as llama-server's /rerank lays it out: without that final
 * SEP (WordPiece: [CLS] query [SEP] document). Same returns. */
int32_t tessera_rerank_tokens_server(const tessera_model *model, const char *query, size_t query_len,
                                     const char *doc, size_t doc_len, tessera_token *tokens, int32_t max_tokens);

#ifdef __cplusplus
}
#endif

#endif
