/*
 * serve — the pieces of `tessera serve`, an OpenAI-compatible HTTP server.
 *
 *   gate.c     the listening socket: request-line check, connection limits
 *              (health answered over them), header and body deadlines
 *   http.c     libmicrohttpd: routing, API key, body limit, waiting for
 *              results, server-sent events, client disconnects
 *   api.c      the request schema: OpenAI / llama-server request JSON -> serve_request
 *   prompt.c   the prompt: chat template rendering, prompt shapes, /infill
 *   response.c OpenAI-shaped results and stream events, /v1/models
 *   native.c   llama-server's /completion results and streams, /tokenize, /detokenize
 *   api_json.c errors, UTF-8-safe strings and typed field getters they share
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
#include <sys/socket.h>

#include <tessera/tessera.h>

/* ------------------------------------------------------------ requests */

typedef enum serve_state {
    SERVE_QUEUED = 0,
    SERVE_RUNNING,
    SERVE_DONE
} serve_state;

enum { SERVE_MAX_STOP = 4, SERVE_MAX_BIAS = 1024, SERVE_MAX_TOP_LOGPROBS = 20 };

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

    /* Output, guarded by the engine mutex. */
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

    /* What a stream has sent of this choice (the HTTP thread, under the lock). */
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

typedef struct serve_request {
    /* Input, fixed once submitted. */
    tessera_token *prompt;
    int32_t n_prompt;
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
    const char *grammar_param; /* the field whose grammar constrains the reply, NULL if none */
    bool want_progress;        /* return_progress: the engine records prompt marks */
    serve_reply_rules rules;
    char *dialect_echo;        /* a dialect's request settings its reply repeats (JSON object text), or NULL */
    serve_choice *choices;
    int32_t n_choices;

    /* Output, guarded by the engine mutex. */
    uint64_t progress;         /* grows whenever any choice has more ready or ends */
    int32_t n_cached;          /* prompt tokens found in a slot's cache (cache_prompt) */
    serve_state state;         /* SERVE_DONE once every choice is */
    int32_t n_done;            /* choices done */
    char error[256];           /* non-empty: the engine failed this request */
    int error_status;          /* HTTP status of that error (0: 500) */
    bool cut;                  /* ended by a shutdown: finish "length", text kept */
    bool cancelled;            /* the client went away */
    int refs;                  /* holders: the HTTP thread and each choice the engine holds */
    pthread_cond_t cond;       /* signalled on progress and when done */
    double t_submit_ms, t_first_ms, t_done_ms;
    double t_start_ms;         /* when its first choice got a slot (the prompt's timings start) */
    serve_prompt_mark *marks;  /* want_progress: one per batch of its first choice's prompt */
    int32_t n_marks, cap_marks;
    int32_t sent_marks;        /* marks a stream has sent (the HTTP thread, under the lock) */
} serve_request;

/* A request with n choices (samplers not made yet); NULL when out of memory. */
serve_request *serve_request_new(int32_t n_choices);
/* Free a request that was never submitted (or whose last holder is gone). */
void serve_request_free(serve_request *r);
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

/* ------------------------------------------------------------ reply */

/* Where a chat choice's text is reasoning and where content that may be
 * shown: [reasoning_at, reasoning_end) and [content_at, content_end). Until
 * final, a tail that may begin a marker or a tool call is held back. */
typedef struct serve_split {
    size_t reasoning_at, reasoning_end;
    size_t content_at, content_end;
} serve_split;

void serve_reply_split(const serve_reply_rules *rules, const char *text, size_t n, bool final,
                       serve_split *out);

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
void serve_engine_lock(serve_engine *e);
void serve_engine_unlock(serve_engine *e);
/* Count an HTTP response by status. */
void serve_engine_count_status(serve_engine *e, int status);
/* A snapshot of the counters. */
void serve_engine_metrics(serve_engine *e, serve_metrics *out, double *uptime_ms);
int32_t serve_engine_slot_ctx(const serve_engine *e);
int32_t serve_engine_n_slots(const serve_engine *e);
long long serve_engine_start_unix(const serve_engine *e);

/* Prometheus text of the metrics into a malloc'd string. */
char *serve_metrics_render(const serve_metrics *m, double uptime_ms, int32_t n_slots, size_t *len);

/* ------------------------------------------------------------ gate */

/* Where a connection MHD holds is: its deadlines depend on it. */
typedef enum gate_phase {
    GATE_HEADERS = 0, /* waiting for a request's headers */
    GATE_BODY,        /* headers in, body arriving */
    GATE_BUSY,        /* request complete: being answered, no deadline */
    GATE_CUT          /* past a deadline: shut down, MHD is closing it */
} gate_phase;

typedef struct gate_conn gate_conn;
typedef struct serve_gate serve_gate;

typedef struct serve_gate_stats {
    uint64_t refused;           /* answered 429/503 over a connection limit */
    uint64_t timeouts;          /* 408s: a request line, headers or body too late */
    uint64_t bad_request_lines; /* 400/414/505 before MHD saw them */
    int64_t open;               /* connections MHD holds */
} serve_gate_stats;

typedef struct serve_gate_params {
    const char *host;
    int port;
    int max_conns;        /* connections handed to MHD at once */
    int max_conns_per_ip; /* of them from one address; 0: no limit */
    int header_timeout_ms, body_timeout_ms;
    /* Hand an accepted socket with a well-formed request line to MHD: 0, or
     * -1 when it was refused (the socket is closed then). */
    int (*admit)(void *cls, int fd, const struct sockaddr *sa, socklen_t len);
    /* The body (malloc'd) of GET /health or /metrics over the limits. */
    char *(*quick)(void *cls, const char *path, int *status, const char **ctype);
    void *cls;
} serve_gate_params;

/* Bind and listen (errors printed); serve_gate_start starts accepting. */
serve_gate *serve_gate_new(const serve_gate_params *p);
int serve_gate_start(serve_gate *g);
int serve_gate_port(const serve_gate *g);
/* Close the listening socket; later connections are refused by the OS,
 * idle kept-alive ones are closed. */
void serve_gate_stop_accepting(serve_gate *g);
void serve_gate_free(serve_gate *g);
/* MHD's side: the gate's record of the connection on fd (NULL: none), its
 * phase changes, and its end (before MHD closes the socket). */
gate_conn *serve_gate_find(serve_gate *g, int fd);
void serve_gate_phase(serve_gate *g, gate_conn *c, gate_phase phase);
void serve_gate_closed(serve_gate *g, gate_conn *c);
void serve_gate_stats_get(serve_gate *g, serve_gate_stats *out);
/* 0 for "METHOD SP TARGET SP HTTP/1.x", else the status to answer. */
int serve_gate_check_request_line(const char *line, size_t n);

/* ------------------------------------------------------------ API */

typedef enum serve_kind {
    SERVE_CHAT = 0,       /* /v1/chat/completions */
    SERVE_COMPLETION = 1, /* /v1/completions */
    SERVE_NATIVE = 2,     /* llama-server's /completion */
    SERVE_INFILL = 3      /* llama-server's /infill (a /completion whose prompt is made from FIM parts) */
} serve_kind;

typedef struct serve_api {
    tessera_model *model;
    const char *model_id;        /* name shown in responses and /v1/models */
    const char *aliases;         /* --alias as given: names, comma-separated (NULL: model_id only) */
    const char *tags;            /* --tags, comma-separated (NULL: none) */
    const char *model_path;      /* the GGUF file (/props) */
    long long created;           /* /v1/models "created": the file's modification time */
    char owned_by[64];           /* /v1/models "owned_by": general.organization/author, else "tessera" */
    const tessera_chat_template *tmpl; /* renders every chat request */
    int32_t n_slots;             /* the most choices (`n`) one request may ask */
    int32_t slot_ctx;
    int32_t default_max_tokens;  /* for a request without max_tokens (-n); 0: no limit */
    struct serve_embed *embed;   /* --embeddings / --reranking endpoints (embed_api.h); NULL: none */
    const tessera_sampler_params *sampling; /* the server's defaults (--temp, ...); NULL: the library's */
    const char *reasoning_format; /* --reasoning-format: "none" keeps <think> in content; NULL: split */
    int enable_thinking;         /* --reasoning: 1 on, 0 off (the template's enable_thinking), -1 auto (on) */
    bool verbose;                /* --verbose: every response carries __verbose (a request's "verbose" wins) */
} serve_api;

/* What a parsed request asks beyond generation. */
typedef struct serve_call {
    serve_kind kind;
    bool stream;
    bool include_usage;  /* stream_options.include_usage */
    bool single_tool_call; /* parallel_tool_calls: false */
    bool return_tokens;  /* native: the generated ids in "tokens" */
    int32_t n_probs;     /* native: completion_probabilities with this many alternatives; 0: none */
    char response_fields[512]; /* native: JSON array text of the fields to keep; "": all */
    int32_t prompt_index;  /* which of a list of prompts this request is */
    bool verbose;          /* __verbose in the response: the prompt as text, the raw reply */
    bool timings_per_token; /* llama-server's timings in each stream chunk */
    bool return_progress;  /* llama-server's prompt_progress stream events */
    char id[48];
    long long created;
    char ignored[160];   /* fields not known, comma-separated (for the request log) */
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
/* The same for the index-th of a list of prompts (serve_api_count_prompts:
 * how many the body's "prompt" holds; 1 for chat and infill). */
int serve_api_parse_at(const serve_api *api, serve_kind kind, const char *body, size_t len, int index,
                       serve_call *call, serve_request **out, serve_error *err);
int serve_api_count_prompts(serve_kind kind, const char *body, size_t len);
/* {"error": {...}} as a malloc'd string. param may be NULL. */
char *serve_api_error_json(const char *message, const char *type, const char *param, const char *code);
/* The whole non-streamed response (call r's fields under the engine lock). */
char *serve_api_response(const serve_api *api, const serve_call *call, const serve_request *r);
/* The same over the requests of a list of prompts: their choices (each
 * with the index its request gave it) in one response, usage summed. */
char *serve_api_response_list(const serve_api *api, const serve_call *call, const serve_request *const *reqs,
                              int n);
/* The next server-sent events of a stream ("data: {...}\n\n" each, malloc'd;
 * NULL when there is nothing new): the opening chunk of each chat choice,
 * the content, reasoning, logprobs and tool-call deltas that became ready,
 * each choice's final chunk, then usage (when asked) and [DONE] once the
 * request is done (*finished set), or an error event if it failed. *seen
 * records the request's progress consumed. Call under the engine lock. */
char *serve_api_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                            bool *finished);
char *serve_api_models(const serve_api *api);
/* GET /v1/models/{id}: the model object when id is its name or an alias, else NULL. */
char *serve_api_model(const serve_api *api, const char *id);
/* POST /apply-template (as llama-server): the body's messages (and tools)
 * through the chat template, as {"prompt": "..."}; NULL with *err filled. */
char *serve_api_apply_template(const serve_api *api, const char *body, size_t len, serve_error *err);
/* POST /v1/chat/completions/input_tokens (llama-server's): a chat request's
 * prompt tokens, {"input_tokens": N}, generating nothing; NULL with *err. */
char *serve_api_input_tokens(const serve_api *api, const char *body, size_t len, serve_error *err);

/* The HTTP status of a request whose grammar failed (setting it up or
 * matching): out of memory is the server's, 500; anything else (too
 * ambiguous, nested too deep, no token allowed) is the request's, 400. */
int serve_grammar_failure_status(const char *error);
/* A request the engine failed (r->error set): its HTTP status, and its
 * OpenAI error body (invalid_request_error naming the grammar's field for
 * a 4xx, server_error otherwise). */
int serve_request_error_status(const serve_request *r);
char *serve_request_error_json(const serve_request *r);

/* Fill err (status, OpenAI error body naming param) and return -1. */
int serve_fail(serve_error *err, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* llama-server's native shapes (native.c): the result of each of n
 * requests of /completion or /infill (one object, or a list for several
 * prompts), their stream events (as serve_api_stream_next), /tokenize and
 * /detokenize (NULL with *err filled). */
char *serve_native_response(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n);
char *serve_native_stream_next(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                               bool *finished);
char *serve_native_tokenize(const serve_api *api, const char *body, size_t len, serve_error *err);
char *serve_native_detokenize(const serve_api *api, const char *body, size_t len, serve_error *err);

/* JSON helpers shared by the response writers (api.c). */
struct cJSON;
/* Add s[0..n) as a string (bad UTF-8 bytes become U+FFFD). */
struct cJSON *serve_json_add_text(struct cJSON *obj, const char *key, const char *s, size_t n);
/* "data: JSON\n\n" of event (taken) appended to the malloc'd acc (NULL:
 * empty); acc as it was when out of memory. A server-sent event. */
char *serve_sse_append(char *acc, struct cJSON *event);
/* The same for an event whose data is text ("[DONE]", JSON already printed). */
char *serve_sse_append_text(char *acc, const char *text);
bool serve_utf8_valid(const char *s, size_t n);
/* r's prompt as text, its special tokens written out ("<s> Once..."), as
 * key of o (native.c). */
void serve_json_add_prompt(const serve_api *api, struct cJSON *o, const char *key, const serve_request *r);
/* llama-server's "timings" of r (prompt) and ch (generation) so far. */
void serve_json_add_timings(struct cJSON *o, const serve_request *r, const serve_choice *ch);
/* The next prompt_progress of r not yet sent (with timings when timed)
 * into o; false when none is left. Under the engine lock. */
bool serve_json_add_progress(struct cJSON *o, serve_request *r, bool timed);
/* The bytes of token t (up to cap); its length. */
size_t serve_token_piece(const serve_api *api, tessera_token t, char *buf, size_t cap);

/* ------------------------------------------------------------ tools */

struct cJSON;

typedef enum serve_tool_choice {
    SERVE_TOOLS_NONE = 0,  /* no tools, or tool_choice "none": not offered, output not parsed */
    SERVE_TOOLS_AUTO,
    SERVE_TOOLS_REQUIRED,
    SERVE_TOOLS_NAMED
} serve_tool_choice;

typedef struct serve_tools {
    int n;
    char **json;   /* each tool as JSON text */
    char **names;  /* each tool's function name */
    serve_tool_choice choice;
    char *named;   /* SERVE_TOOLS_NAMED: the function */
    bool parallel; /* parallel_tool_calls */
} serve_tools;

/* tools, tool_choice and parallel_tool_calls of a request body. */
int serve_tools_parse(const struct cJSON *root, serve_tools *t, serve_error *err);
void serve_tools_free(serve_tools *t);
/* The system-message text offering the tools (malloc'd). */
char *serve_tools_system_text(const serve_tools *t);
/* An assistant message's tool_calls array as the text the model writes. */
char *serve_tools_calls_text(const struct cJSON *calls, serve_error *err);
/* The start of a call that tool_choice required / a named function forces
 * after the generation prompt (malloc'd), or NULL when nothing is forced.
 * This is where the grammar constraint plugs in. */
char *serve_tools_prefill(const serve_tools *t, int format);
/* The GBNF grammar that constrains the reply after that prefill to one call
 * of an offered tool (arguments following its parameters' JSON Schema), or
 * NULL: none (err->status 0) or an error (err filled). */
char *serve_tools_grammar(const serve_tools *t, serve_error *err);

/* ------------------------------------------------------------ request log */

typedef enum serve_log_format { SERVE_LOG_TEXT = 0, SERVE_LOG_JSON = 1, SERVE_LOG_OFF = 2 } serve_log_format;

/* One line per request on stderr (log.c): time, method, path, status,
 * tokens in/out, milliseconds. */
typedef struct serve_log_entry {
    char method[8];
    char path[96];
    double t0_ms;        /* CLOCK_MONOTONIC when the request arrived */
    int status;          /* 0 until a response is queued */
    int32_t n_in, n_out; /* prompt and generated tokens; -1: not a generation */
    bool handed_off;     /* a stream writes the line when it ends */
    char ignored[160];   /* request fields not known, ignored (comma-separated) */
} serve_log_entry;

void serve_log_begin(serve_log_entry *e, const char *method, const char *path);
void serve_log_write(serve_log_format f, const serve_log_entry *e);

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

/* The whole endpoint (slots.c): id and action from the URL, {"filename"}
 * from the body, checked (no path separators, no ".."); a malloc'd JSON
 * body and *status. dir: --slot-save-path (NULL: save/restore refused). */
char *serve_slots_post(serve_engine *e, const char *dir, const char *id, const char *action, const char *body,
                       size_t len, int *status);

/* llama-server's GET /props and GET /slots, malloc'd JSON (info.c). */
char *serve_api_props(const serve_api *api, serve_engine *e);
char *serve_api_slots(const serve_api *api, serve_engine *e);

/* The chat page served at GET / (page.html, embedded at build time). */
extern const char serve_page_html[];

/* ------------------------------------------------------------ HTTP */

typedef struct serve_http_params {
    const char *host;
    int port;
    const char *api_key;   /* NULL: no key */
    size_t max_body;       /* bytes; larger bodies get 413 */
    int max_connections;
    int max_conns_per_ip;  /* 0: no limit */
    int header_timeout_ms; /* request line and headers, from the connection's start */
    int body_timeout_ms;   /* the body, from its headers */
    serve_log_format log_format;
    const char *slot_save_path; /* NULL: slot save/restore refused (501) */
    const char *cors_origin;    /* --cors-origin: "*", "localhost" or origins, comma-separated; NULL: no CORS */
    bool no_webui, no_slots, no_metrics; /* GET /, GET /slots, GET /metrics answer 404 */
    const char *gcp_predict_route; /* Vertex AI's prediction route (AIP_MODE=PREDICTION, gcp.h); NULL: off */
    const char *gcp_health_route;  /* and its health route, answered as /health; NULL: none */
} serve_http_params;

typedef struct serve_http serve_http;

/* Starts answering at once: until serve_http_set_ready, /health and every
 * other endpoint answer 503 "Loading model" (e may be NULL then, and api's
 * model fields unset). */
serve_http *serve_http_start(const serve_http_params *p, serve_engine *e, const serve_api *api);
/* The model is loaded and e runs: serve everything (api filled before). */
void serve_http_set_ready(serve_http *h, serve_engine *e);
/* The port actually bound (for --port 0). */
int serve_http_port(const serve_http *h);
/* Close the listening socket (connections already open go on). */
void serve_http_stop_accepting(serve_http *h);
void serve_http_stop(serve_http *h);

#endif
