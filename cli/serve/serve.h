/*
 * serve — the pieces of `tessera serve`, an OpenAI-compatible HTTP server.
 *
 *   http.c     libmicrohttpd: routing, API key, body limit, waiting for
 *              results, server-sent events, client disconnects
 *   api.c      OpenAI request JSON -> serve_request, results -> JSON
 *   engine.c   slots and continuous batching: one thread owns the context
 *              and decodes every active slot's next tokens in one batch
 *   text.c     generated text: stop strings and what is safe to send
 *   metrics.c  counters and the Prometheus text of /metrics
 *
 * Threads: one engine thread, one thread per HTTP connection. All fields of a
 * request written after submission are guarded by the engine's mutex.
 */
#ifndef TESSERA_SERVE_H
#define TESSERA_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <tessera/tessera.h>

/* ------------------------------------------------------------ requests */

typedef enum serve_state {
    SERVE_QUEUED = 0,
    SERVE_RUNNING,
    SERVE_DONE
} serve_state;

enum { SERVE_MAX_STOP = 4, SERVE_MAX_BIAS = 1024 };

typedef struct serve_request {
    /* Input, fixed once submitted. */
    tessera_token *prompt;
    int32_t n_prompt;
    int32_t max_tokens;        /* -1: until the end of text or the slot is full */
    tessera_sampler *sampler;  /* owned; the prompt is accepted into it already */
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    bool cache_prompt;         /* reuse a slot's cached prefix; leave ours for the next */

    /* Output, guarded by the engine mutex. */
    char *text;                /* generated text, cut at a stop string */
    size_t len, cap;
    size_t n_ready;            /* bytes of text safe to send (no partial stop or UTF-8) */
    int32_t n_gen;             /* tokens generated */
    int32_t n_cached;          /* prompt tokens found in a slot's cache (cache_prompt) */
    serve_state state;
    const char *finish_reason; /* "stop" or "length" once done */
    char error[256];           /* non-empty: the engine failed this request */
    bool cancelled;            /* the client went away */
    int refs;                  /* holders: the HTTP thread and, once submitted, the engine */
    pthread_cond_t cond;       /* signalled on new text and when done */
    double t_submit_ms, t_first_ms, t_done_ms;
} serve_request;

serve_request *serve_request_new(void);
/* Free a request that was never submitted. */
void serve_request_free(serve_request *r);

/* ------------------------------------------------------------ text */

/* Append a token's bytes; returns -1 when out of memory. */
int serve_text_append(serve_request *r, const char *piece, size_t n);
/* After an append: cut the text at the first stop string (true: found) and
 * otherwise update n_ready, holding back a tail that may begin a stop string
 * or an unfinished UTF-8 character. from: the length before the append. */
bool serve_text_check_stop(serve_request *r, size_t from);
/* The length of s[0..n) without an unfinished UTF-8 sequence at its end. */
size_t serve_utf8_complete(const char *s, size_t n);

/* ------------------------------------------------------------ metrics */

typedef struct serve_metrics {
    uint64_t requests[6];     /* by status class: [2] 2xx, [4] 4xx, [5] 5xx */
    uint64_t completions;     /* requests that finished generating */
    uint64_t cancelled;       /* dropped because the client went away */
    uint64_t prompt_tokens;
    uint64_t gen_tokens;
    uint64_t steps;           /* decode calls */
    uint64_t batch_tokens;    /* tokens over all decode calls */
    double decode_ms;         /* time inside decode calls */
    double busy_slot_ms;      /* slot-milliseconds of occupied slots */
    int32_t slots_busy;
    int32_t queued;
    int32_t kv_cells_used;
} serve_metrics;

/* ------------------------------------------------------------ engine */

typedef struct serve_engine serve_engine;

typedef struct serve_engine_params {
    tessera_model *model;
    tessera_context *ctx; /* driven only by the engine thread */
    int32_t n_slots;
    int32_t max_queue;    /* requests waiting for a slot before 503 */
    int32_t slot_ctx;     /* positions one slot may hold */
} serve_engine_params;

serve_engine *serve_engine_new(const serve_engine_params *p);
int serve_engine_start(serve_engine *e);
/* Stop the thread and fail what is queued or running; new submissions get
 * -1. The HTTP side may still wait on and release its requests. */
void serve_engine_stop(serve_engine *e);
/* Stop (if needed) and free; no HTTP thread may use it any more. */
void serve_engine_free(serve_engine *e);

/* Hand a request to the engine. 0, or -1 when the queue is full (503). */
int serve_engine_submit(serve_engine *e, serve_request *r);
/* Wait until the request has more than `sent` bytes ready or is done, at
 * most timeout_ms. Returns true when that happened. */
bool serve_engine_wait(serve_engine *e, serve_request *r, size_t sent, int timeout_ms);
/* The HTTP side is done with r (finished or the client left): the engine
 * drops its slot at its next step; the last holder frees r. */
void serve_engine_release(serve_engine *e, serve_request *r);
void serve_engine_lock(serve_engine *e);
void serve_engine_unlock(serve_engine *e);
/* Count an HTTP response by status. */
void serve_engine_count_status(serve_engine *e, int status);
/* A snapshot of the counters. */
void serve_engine_metrics(serve_engine *e, serve_metrics *out, double *uptime_ms);
int32_t serve_engine_slot_ctx(const serve_engine *e);
int32_t serve_engine_n_slots(const serve_engine *e);

/* Prometheus text of the metrics into a malloc'd string. */
char *serve_metrics_render(const serve_metrics *m, double uptime_ms, int32_t n_slots, size_t *len);

/* ------------------------------------------------------------ API */

typedef enum serve_kind {
    SERVE_CHAT = 0,       /* /v1/chat/completions */
    SERVE_COMPLETION = 1  /* /v1/completions */
} serve_kind;

typedef struct serve_api {
    tessera_model *model;
    const char *model_id;        /* name shown in responses and /v1/models */
    tessera_chat_format format;  /* the model's chat template */
    char bos_text[64], eos_text[64];
    int32_t slot_ctx;
} serve_api;

/* What a parsed request asks beyond generation. */
typedef struct serve_call {
    serve_kind kind;
    bool stream;
    bool include_usage;  /* stream_options.include_usage */
    char id[48];
    long long created;
} serve_call;

/* An OpenAI-shaped error: status plus JSON body (malloc'd). */
typedef struct serve_error {
    int status;
    char *body;
} serve_error;

/* Parse and check a request body; on success fills *out (a new request, not
 * submitted) and returns 0; else fills *err and returns -1. */
int serve_api_parse(const serve_api *api, serve_kind kind, const char *body, size_t len,
                    serve_call *call, serve_request **out, serve_error *err);
/* {"error": {...}} as a malloc'd string. param may be NULL. */
char *serve_api_error_json(const char *message, const char *type, const char *param, const char *code);
/* The whole non-streamed response (call r's fields under the engine lock). */
char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r);
/* One SSE event "data: {...}\n\n" carrying text[0..n) (first: the chunk that
 * opens a chat reply with the role), or the final one with finish_reason
 * (finish != NULL) and, when asked, usage. */
char *serve_api_chunk(const serve_api *api, const serve_call *call, const char *text, size_t n,
                      bool first, const char *finish, const serve_request *r);
char *serve_api_models(const serve_api *api);

/* ------------------------------------------------------------ HTTP */

typedef struct serve_http_params {
    const char *host;
    int port;
    const char *api_key;   /* NULL: no key */
    size_t max_body;       /* bytes; larger bodies get 413 */
    int max_connections;
} serve_http_params;

typedef struct serve_http serve_http;

serve_http *serve_http_start(const serve_http_params *p, serve_engine *e, const serve_api *api);
/* The port actually bound (for --port 0). */
int serve_http_port(const serve_http *h);
void serve_http_stop(serve_http *h);

#endif
