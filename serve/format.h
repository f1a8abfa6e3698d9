/*
 * format — one interface for every shape the server speaks: OpenAI's chat
 * and completions, llama-server's /completion and /infill, Anthropic's
 * messages, OpenAI's Responses, embeddings, reranking, and the endpoints
 * that turn text into text (tokenize, apply-template, token counts).
 *
 * A generation format parses a body into requests (a list of prompts makes
 * several), renders their whole response, or their stream event by event;
 * an answer format (answer set) replies at once without the engine. The
 * route table (route.h) names each endpoint's format; http.c moves bytes
 * and calls these, and knows no shape.
 *
 *   api.c       the request schema: OpenAI / llama-server request JSON -> serve_request
 *   prompt.c    the prompt: chat template rendering, prompt shapes, /infill
 *   response.c  OpenAI-shaped results and stream events, /v1/models
 *   native.c    llama-server's /completion results and streams, /tokenize, /detokenize
 *   api_json.c  errors, UTF-8-safe strings and typed field getters they share
 *   reply.c     the reasoning / content / tool-call split of a chat reply
 *   info.c      /props and /slots; slots.c the slot actions
 *   format.c    the OpenAI and llama-server formats behind the interface below
 *   anthropic.c, responses.c (dialect.h)  Anthropic's messages, OpenAI's Responses
 *   embed_api.c embeddings and reranking; gcp.c Vertex AI's predictions
 */
#ifndef TESSERA_SERVE_FORMAT_H
#define TESSERA_SERVE_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* ------------------------------------------------------------ requests and responses */

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
    int32_t n_loras;             /* adapters loaded (--lora): ids a request's `lora` may name */
    struct tessera_mtmd *mtmd;   /* --mmproj: media parts become media chunks (tokenize only: the engine
                                  * thread encodes); NULL: a medium is a 400 */
    bool allow_remote_media;     /* --allow-remote-media: only changes the 400 of an http(s) image URL */
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
/* The whole non-streamed response (of a view, engine.h, or of r under the engine lock). */
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
 * records the request's progress consumed. Call it on the reader's view
 * (engine.h: serve_request_view_sync), whose send cursors it moves. */
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
/* The sampler settings of sp under llama-server's names (temperature,
 * dynatemp_range, ..., dry_sequence_breakers, mirostat_eta, samplers), as
 * /props' default_generation_settings and /completion's generation_settings
 * report them (info.c). */
void serve_json_add_sampling(struct cJSON *o, const tessera_sampler_params *sp);
/* The next prompt_progress of r not yet sent (with timings when timed)
 * into o; false when none is left. On a reader's view (engine.h). */
bool serve_json_add_progress(struct cJSON *o, serve_request *r, bool timed);
/* The bytes of token t (up to cap); its length. */
size_t serve_token_piece(const serve_api *api, tessera_token t, char *buf, size_t cap);

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

/* The whole endpoint (slots.c): id and action from the URL, {"filename"}
 * from the body, checked (no path separators, no ".."); a malloc'd JSON
 * body and *status. dir: --slot-save-path (NULL: save/restore refused). */
char *serve_slots_post(serve_engine *e, const char *dir, const char *id, const char *action, const char *body,
                       size_t len, int *status);

/* llama-server's LoRA adapters (lora.c): the JSON of GET /lora-adapters,
 * POST /lora-adapters with its *status; and a [{id, scale}] array v (the
 * POST body, a request's `lora` field) into out[0..n_loras): listed
 * adapters get their scale, the others 0; a bad entry is a 400 naming
 * field (-1). */
char *serve_lora_list(serve_engine *e);
char *serve_lora_post(serve_engine *e, const char *body, size_t len, int *status);
struct cJSON;
int serve_lora_parse(const struct cJSON *v, const char *field, int32_t n_loras, float *out, serve_error *err);

/* llama-server's GET /props and GET /slots, malloc'd JSON (info.c). */
char *serve_api_props(const serve_api *api, serve_engine *e);
char *serve_api_slots(const serve_api *api, serve_engine *e);

/* ------------------------------------------------------------ the interface */

typedef struct serve_format {
    const char *name;
    /* How many requests the body makes (a list of prompts); NULL: one. */
    int (*count)(const char *body, size_t len);
    /* The index-th of them: 0 with *call and *out (not submitted), or -1
     * with *err (OpenAI-shaped; error_body turns it into the format's). */
    int (*parse)(const serve_api *api, const char *body, size_t len, int index, serve_call *call,
                 serve_request **out, serve_error *err);
    /* The whole response of reqs[0..n): readers' views (engine.h). */
    char *(*response)(const serve_api *api, const serve_call *calls, serve_request *const *reqs, int n);
    /* The next server-sent events of r (as serve_api_stream_next); *state
     * starts NULL and is the format's (free_state frees it, may be NULL). */
    char *(*stream_next)(const serve_api *api, const serve_call *call, serve_request *r, uint64_t *seen,
                         bool *finished, void **state);
    void (*free_state)(void *state);
    /* An endpoint answered at once: JSON, or NULL with *err. */
    char *(*answer)(const serve_api *api, const char *body, size_t len, serve_error *err);
    /* An OpenAI-shaped error body (taken) in the format's shape; NULL:
     * errors stay OpenAI's. */
    char *(*error_body)(int status, char *openai_body);
} serve_format;

/* OpenAI's and llama-server's generations (format.c). */
extern const serve_format serve_format_chat, serve_format_completion, serve_format_native, serve_format_infill;
/* The chat path in other shapes (anthropic.c, responses.c; dialect.h). */
extern const serve_format serve_anthropic_messages, serve_anthropic_count_tokens, serve_responses,
    serve_responses_input_tokens;
/* Answered without the engine (format.c): embeddings in OpenAI's and
 * llama-server's shapes, reranking, and the text endpoints. */
extern const serve_format serve_format_embeddings_oai, serve_format_embeddings, serve_format_rerank,
    serve_format_apply_template, serve_format_tokenize, serve_format_detokenize, serve_format_input_tokens;

#endif
