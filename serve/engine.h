/*
 * engine — one model's slots and continuous batching (engine.c): requests
 * come in with their prompts tokenized and their samplers made; one thread
 * owns the context and decodes every active slot's next tokens in one
 * batch; each choice's output (text, tokens, logprobs, finish) grows where
 * the HTTP side reads it. No HTTP and no JSON here: formats (format.h) turn
 * requests and their output into bytes, http.c carries them.
 *
 *   engine.c   slots, the queue, the decode loop, the context shift
 *   text.c     generated text: stop strings and what is safe to send
 *   logprobs.c log-probabilities of a token and its alternatives
 *   metrics.c  counters and the Prometheus text of /metrics
 *   view.c     a reader's copy of a request's output
 *
 * Threads and locks, all the rules:
 * - A request's input is fixed once submitted; anyone may read it.
 * - Its output (the fields marked Output below) is written by the engine
 *   thread only, holding the request's own lock (serve_request_lock) and
 *   the engine's, and only by appending: text (cut back only at a stop
 *   string, in the part not yet ready), tokens, logprobs, prompt marks,
 *   then the finish. The engine samples, scores and detokenizes before it
 *   takes a lock; under one it only adds a result.
 * - A reader (an HTTP thread) takes the request's lock, never the
 *   engine's, to copy what is new into its own view
 *   (serve_request_view_sync) and to look at state, error and counts; it
 *   renders JSON from the view after letting go. Its send cursors are the
 *   view's. So a reader waits for the engine only while it adds a token to
 *   that same request, and never for other readers or other requests.
 * - cancelled and refs are a reader's only writes, atomic, through
 *   serve_engine_release.
 * - Slots, the queue and the counters are the engine's, under the engine's
 *   lock (which /metrics and /slots take for a snapshot); embedding work
 *   runs on the engine thread through serve_engine_run. The engine never
 *   holds two requests' locks at once.
 */
#ifndef TESSERA_SERVE_ENGINE_H
#define TESSERA_SERVE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera.h>
#include <tessera/tessera_mtmd.h>

/* ------------------------------------------------------------ requests */

typedef enum serve_state {
    SERVE_QUEUED = 0,
    SERVE_RUNNING,
    SERVE_DONE
} serve_state;

enum { SERVE_MAX_STOP = 4, SERVE_MAX_BIAS = 1024, SERVE_MAX_TOP_LOGPROBS = 20, SERVE_MAX_LORA = 16 };

/* One generated token's log-probabilities (log-softmax of the model's
 * logits, before bias, penalties and temperature), for `logprobs`; or, with
 * post_sampling set, the probabilities (not logs) after the sampler's filters
 * (llama-server's `post_sampling_probs`). */
typedef struct serve_logprob {
    tessera_token token;
    float logprob;   /* post_sampling: a probability in [0, 1] */
    bool post_sampling;
    size_t offset;   /* where its bytes start in its choice's text */
    uint32_t len;    /* its byte count */
    int32_t n_top;
    tessera_token top_id[SERVE_MAX_TOP_LOGPROBS];
    float top_lp[SERVE_MAX_TOP_LOGPROBS];
} serve_logprob;

struct serve_request;

/* llama-server's return_progress: where reading the prompt stood after
 * each batch (the first mark: before any, with the cached tokens). */
typedef struct serve_prompt_mark {
    int32_t processed; /* prompt tokens in the slot: cached plus decoded */
    double ms;         /* since the slot started on the prompt */
} serve_prompt_mark;

/* One of the request's `n` choices: its own sequence in its own slot. */
typedef struct serve_choice {
    struct serve_request *req;
    int32_t index;
    tessera_sampler *sampler;  /* owned; the prompt is accepted into it already */

    /* Output: the engine thread's, under the request's lock (mu). */
    char *text;                /* generated text (after any prefill), cut at a stop string */
    size_t len, cap;
    size_t n_ready;            /* bytes of text safe to send (no partial stop or UTF-8) */
    int32_t n_gen;             /* tokens generated */
    serve_state state;
    const char *finish_reason; /* "stop" or "length" once done */
    const char *stopped_by;    /* the stop string that ended it (the request's), else NULL */
    serve_logprob *lp;         /* per token when the request asks for logprobs */
    size_t n_lp, cap_lp;
    tessera_token *toks;       /* the generated tokens (end-of-generation ones not) */
    int32_t n_toks, cap_toks;
    const char *stop_type;     /* llama-server's: "eos", "word" or "limit" once done */
    int32_t slot;              /* the slot it ran in (-1 before) */
    bool truncated;            /* its slot filled: a context shift dropped tokens, or the reply was cut */
    int32_t draft_n;           /* speculative decoding: tokens drafted for it (timings' draft_n) */
    int32_t draft_n_accepted;  /* and of those the ones its sampler kept */

    /* What a reader has sent of this choice: meaningful in its view only
     * (serve_request_view_sync keeps them; the engine never reads them). */
    size_t sent_content, sent_reasoning, sent_lp;
    int32_t sent_toks;
    bool opened, closed;
} serve_choice;

/* How the chat reply is split: reasoning markers and tool calls. */
typedef struct serve_reply_rules {
    const char *think_open, *think_close; /* NULL: no reasoning split */
    bool starts_in_think;                 /* the prompt ends inside the open marker */
    bool tools;                           /* parse tool calls out of the text */
    int tool_format;                      /* tessera_tool_format */
    char **tool_names;                    /* owned */
    int n_tool_names;
} serve_reply_rules;

/* A medium's place in a request's prompt (--mmproj): positions
 * start..start+n-1 hold its embedding rows, chunk `chunk` of the request's
 * chunks. Its prompt entries there are all serve_media_token(hash of its
 * content): negative, never a vocabulary id, so a slot's cached prefix
 * matches a medium by its content (the same image: reused; another: the
 * prefix ends at it). */
typedef struct serve_media_span {
    int32_t start, n, chunk;
} serve_media_span;

/* The prompt entry of a medium's rows (hash: tessera_media_hash). */
tessera_token serve_media_token(const char *hash);

typedef struct serve_request {
    /* Input, fixed once submitted. */
    tessera_token *prompt;     /* vocabulary ids; < 0: a medium's row (spans) */
    int32_t n_prompt;
    tessera_mtmd_chunks *chunks; /* the prompt's chunks when it has media (owned), else NULL */
    tessera_media **media;              /* the media they point at (owned) */
    int32_t n_media;
    serve_media_span *spans;   /* one per media chunk (a medium, or a tile of one), in prompt order (owned) */
    int32_t n_spans;
    int32_t max_tokens;        /* -1: until the end of text or the slot is full */
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    bool cache_prompt;         /* reuse a slot's cached prefix; leave ours for the next */
    int32_t id_slot;           /* llama-server's id_slot: run in that slot only; -1: any */
    int32_t top_logprobs;      /* -1: no logprobs; else alternatives per token (0..20) */
    bool post_sampling_probs;  /* those as the sampler's filtered probabilities (/completion) */
    tessera_logit_bias *logit_bias; /* what the samplers add (ignore_eos: -inf on each end-of-generation
                                       token), reported in generation_settings; owned, NULL: none */
    int32_t n_logit_bias;
    bool ignore_eos;           /* llama-server's: its bans are among logit_bias */
    /* What the samplers were made from, for generation_settings: sampling's
     * samplers points at samplers_text (or is NULL), its breakers at
     * dry_breakers (owned, or NULL: the defaults). */
    tessera_sampler_params sampling;
    char samplers_text[256];
    char **dry_breakers;
    int32_t n_dry_breakers;
    const char *grammar_param; /* the field whose grammar constrains the reply, NULL if none */
    bool want_progress;        /* return_progress: the engine records prompt marks */
    bool has_lora;             /* llama-server's `lora`: these scales by adapter id (the others 0) instead of the
                                * server's (POST /lora-adapters) */
    float lora[SERVE_MAX_LORA];
    serve_reply_rules rules;
    char *dialect_echo;        /* a dialect's request settings its reply repeats (JSON object text), or NULL */
    serve_choice *choices;
    int32_t n_choices;

    /* Output: the engine thread's, under the request's lock (mu). */
    uint64_t progress;         /* grows whenever any choice has more ready or ends */
    int32_t n_cached;          /* prompt tokens found in a slot's cache (cache_prompt) */
    serve_state state;         /* SERVE_DONE once every choice is */
    int32_t n_done;            /* choices done */
    char error[256];           /* non-empty: the engine failed this request */
    int error_status;          /* HTTP status of that error (0: 500) */
    bool cut;                  /* ended by a shutdown: finish "length", text kept */
    /* cancelled .. cond: shared by threads, kept together (view.c copies around them) */
    bool cancelled;            /* the client went away (atomic: a reader sets it) */
    int refs;                  /* holders: the HTTP thread and each choice the engine holds (atomic) */
    pthread_mutex_t mu;        /* this request's output (serve_request_lock) */
    pthread_cond_t cond;       /* signalled on progress and when done, under mu */
    double t_submit_ms, t_first_ms, t_done_ms;
    double t_start_ms;         /* when its first choice got a slot (the prompt's timings start) */
    serve_prompt_mark *marks;  /* want_progress: one per batch of its first choice's prompt */
    int32_t n_marks, cap_marks;
    int32_t sent_marks;        /* marks a reader has sent (its view's, as sent_* above) */
} serve_request;

/* A request with n choices (samplers not made yet); NULL when out of memory. */
serve_request *serve_request_new(int32_t n_choices);
/* Append a medium to r's media (r owns it from here). 0, or -1 when out of memory. */
int serve_request_add_media(serve_request *r, tessera_media *m);
/* Free a request that was never submitted (or whose last holder is gone). */
void serve_request_free(serve_request *r);
/* A reader's copy of r's output (view.c): call it with r's lock
 * held (serve_request_lock), then render the view without it. *view is
 * made on the first call (NULL) and brought up to date by later ones,
 * copying only what is new; its send cursors (each choice's sent_* and
 * opened/closed, the request's sent_marks) are the reader's own and are
 * kept. Its input fields point into r, which the reader holds. 0, or -1
 * when out of memory (the view as it was). */
int serve_request_view_sync(serve_request **view, const serve_request *r);
void serve_request_view_free(serve_request *view);
/* Completion tokens over all choices. */
int32_t serve_request_n_gen(const serve_request *r);

/* ------------------------------------------------------------ text */

/* Append a token's bytes; returns -1 when out of memory. */
int serve_text_append(serve_choice *c, const char *piece, size_t n);
/* After an append: cut the text at the first stop string (true: found) and
 * otherwise update n_ready, holding back a tail that may begin a stop string
 * or an unfinished UTF-8 character. from: the length before the append. */
bool serve_text_check_stop(serve_choice *c, size_t from);
/* The length of s[0..n) without an unfinished UTF-8 sequence at its end. */
size_t serve_utf8_complete(const char *s, size_t n);

/* ------------------------------------------------------------ logprobs */

/* The log-softmax of logits[0..n_vocab) at chosen, and the k (<= 20) most
 * likely tokens with theirs (descending; ties: lower id first). */
void serve_logprobs_compute(const float *logits, int32_t n_vocab, tessera_token chosen, int32_t k,
                            serve_logprob *out);
/* The same from the distribution sampler's last draw came from (after its
 * filters, renormalized): chosen's probability and the k most likely, only
 * those with a probability above 0 (fewer than k when fewer are left). */
void serve_logprobs_post_sampling(const tessera_sampler *sampler, tessera_token chosen, int32_t k,
                                  serve_logprob *out);

/* ------------------------------------------------------------ metrics */

typedef struct serve_metrics {
    uint64_t requests[6];     /* by status class: [2] 2xx, [4] 4xx, [5] 5xx */
    uint64_t completions;     /* requests that finished generating */
    uint64_t cancelled;       /* dropped because the client went away */
    uint64_t prompt_tokens;   /* decoded (cached ones not) */
    uint64_t prompt_tokens_cached; /* reused from a slot's cache */
    uint64_t gen_tokens;
    double prompt_ms;         /* requests' prompt times (slot start to first token) */
    double gen_ms;            /* requests' generation times (first token to the end) */
    uint64_t busy_slot_steps; /* slots with a row in each decode, summed over decodes */
    int32_t n_tokens_max;     /* the most positions one slot has held */
    uint64_t steps;           /* decode calls */
    uint64_t batch_tokens;    /* tokens over all decode calls */
    double decode_ms;         /* time inside decode calls */
    double busy_slot_ms;      /* slot-milliseconds of occupied slots */
    int32_t slots_busy;
    int32_t queued;
    int32_t kv_cells_used;
    /* The inference gateway's load signals (serve_engine_metrics fills them) */
    int32_t requests_running;  /* requests with a choice in a slot */
    double kv_usage;           /* 0..1: the cache that running requests hold (see metrics.c) */
    /* speculative decoding (serve_engine_params.spec): draft tokens made and kept */
    uint64_t spec_drafts, spec_drafted, spec_accepted;
    bool spec;                 /* the server speculates: /metrics and timings report it */
    /* from the gate (filled by http.c) */
    uint64_t conn_refused, conn_timeouts, bad_request_lines;
    int64_t conn_open;
} serve_metrics;

/* ------------------------------------------------------------ engine */

typedef struct serve_engine serve_engine;

/* Milliseconds of CLOCK_MONOTONIC: the one clock of the server's timings
 * (requests, slots, the gate, the log, embeddings). */
double serve_now_ms(void);

typedef struct serve_engine_params {
    tessera_model *model;
    tessera_context *ctx; /* driven only by the engine thread */
    int32_t n_slots;
    int32_t max_queue;    /* requests waiting for a slot before 503 */
    int32_t slot_ctx;     /* positions one slot may hold */
    bool unified;         /* --kv-unified: slot_ctx is the whole cache, which the slots share */
    bool context_shift;   /* a full slot drops half of what follows n_keep (else "length") */
    int32_t n_keep;       /* --keep: tokens after BOS a shift keeps; -1: the whole prompt */
    /* Speculative decoding (-md, --spec-type; NULL: none), made on ctx with
     * a draft context of n_slots sequences when a draft model is used: a
     * generating slot whose request wants no logprobs takes a step of it
     * (tessera_spec_step on its sequence) instead of a row of the batch. */
    tessera_spec *spec;
    /* LoRA adapters loaded with ctx (--lora, --lora-scaled), by id, and
     * their scales for requests without a `lora` field (POST
     * /lora-adapters changes them; 0 with --lora-init-without-apply). A
     * decode step runs the slots of one set of scales; a slot's cached
     * prefix is reused only by a request with the same scales. */
    tessera_lora *loras[SERVE_MAX_LORA];
    const char *lora_paths[SERVE_MAX_LORA];
    float lora_scales[SERVE_MAX_LORA];
    int32_t n_loras;
    /* --mmproj: the projector that encodes the media of requests' prompts
     * (serve_request.spans), on the engine thread; NULL: text only. */
    tessera_mtmd *mtmd;
} serve_engine_params;

serve_engine *serve_engine_new(const serve_engine_params *p);
int serve_engine_start(serve_engine *e);
/* Stop the thread and fail what is queued or running; new submissions get
 * -1. The HTTP side may still wait on and release its requests. */
void serve_engine_stop(serve_engine *e);
/* Stop (if needed) and free; no HTTP thread may use it any more. */
void serve_engine_free(serve_engine *e);

/* Hand a request to the engine. 0, -1 when the queue is full (503), -2
 * when the server is shutting down (503). */
int serve_engine_submit(serve_engine *e, serve_request *r);
/* Shutdown, first part: refuse new requests and wait up to grace_ms for the
 * running and queued ones to finish; returns early when they have, or when
 * `interrupt` (may be NULL) returns true. serve_engine_stop then ends what is
 * left: running requests with their text so far and finish_reason "length"
 * (cut), queued ones with a 503. */
void serve_engine_drain(serve_engine *e, int grace_ms, bool (*interrupt)(void *), void *cls);
/* Wait until the request's progress is past `seen` or it is done, at most
 * timeout_ms. Returns true when that happened. */
bool serve_engine_wait(serve_engine *e, serve_request *r, uint64_t seen, int timeout_ms);
/* The HTTP side is done with r (finished or the client left): the engine
 * drops its slot at its next step; the last holder frees r. */
void serve_engine_release(serve_engine *e, serve_request *r);
/* r's lock: its output only changes under it (see the rules at the top). */
void serve_request_lock(serve_request *r);
void serve_request_unlock(serve_request *r);
/* Run fn(arg) on the engine thread between two steps (embeddings and
 * reranking decode there: one thread computes with the model), without the
 * engine's lock held; blocks until it ran. 0, or -1 when the engine
 * stopped (or never started) and fn did not run. */
int serve_engine_run(serve_engine *e, void (*fn)(void *), void *arg);
/* Count an HTTP response by status. */
void serve_engine_count_status(serve_engine *e, int status);
/* A snapshot of the counters. */
void serve_engine_metrics(serve_engine *e, serve_metrics *out, double *uptime_ms);
int32_t serve_engine_slot_ctx(const serve_engine *e);
int32_t serve_engine_n_slots(const serve_engine *e);
long long serve_engine_start_unix(const serve_engine *e);

/* GET and POST /lora-adapters: the adapters' count and paths, and the
 * scales of requests without a `lora` field (get: into out[0..n_loras);
 * set: from scales[0..n_loras), taking effect for requests that start
 * after it). */
int32_t serve_engine_lora_count(const serve_engine *e);
const char *serve_engine_lora_path(const serve_engine *e, int32_t id);
void serve_engine_lora_get(serve_engine *e, float *out);
void serve_engine_lora_set(serve_engine *e, const float *scales);

/* The HTTP status of a request whose grammar failed (setting it up or
 * matching): out of memory is the server's, 500; anything else (too
 * ambiguous, nested too deep, no token allowed) is the request's, 400. */
int serve_grammar_failure_status(const char *error);

/* Prometheus text of the metrics into a malloc'd string. */
char *serve_metrics_render(const serve_metrics *m, double uptime_ms, int32_t n_slots, const char *model_name,
                           size_t *len);

/* ------------------------------------------------------------ /props, /slots */

typedef struct serve_slot_info {
    bool busy;
    int32_t n_past;             /* positions the slot holds in the cache */
    int32_t n_prompt, n_gen;    /* of the request in it (0 when idle) */
    int32_t n_remain;           /* tokens it may still generate (-1: no limit, or idle) */
    bool cache_prompt;
} serve_slot_info;

/* A snapshot of the slots into out[0..n_slots). Returns n_slots. */
int32_t serve_engine_slot_info(serve_engine *e, serve_slot_info *out, int32_t max);

/* llama-server's POST /slots/{id}?action=save|restore|erase: the engine
 * thread saves the slot's sequence to path, restores it from path, or
 * forgets it, between two steps. A slot that is generating is refused. */
typedef enum serve_slot_op { SERVE_SLOT_SAVE, SERVE_SLOT_RESTORE, SERVE_SLOT_ERASE } serve_slot_op;

typedef struct serve_slot_action {
    int32_t slot;
    serve_slot_op op;
    const char *path;   /* save / restore */
    /* results */
    int status;         /* 200, or the HTTP status of the error */
    char error[512];
    int32_t n_tokens;   /* saved, restored or erased */
    double ms;
} serve_slot_action;

/* 0 when done; -1 with a->status and a->error. Blocks until the engine ran it. */
int serve_engine_slot_action(serve_engine *e, serve_slot_action *a);

#endif
