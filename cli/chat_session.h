/* chat_session — a conversation with a model through its chat template,
 * shared by `tessera chat` (REPL and one-shot -p) and `tessera run -cnv`.
 *
 * Every turn the whole conversation is rendered again through the template
 * and tokenized; the tokens already in the KV cache that match the new
 * rendering are kept and only the rest is decoded (KV reuse). When the
 * conversation no longer fits the context, the oldest turns are dropped
 * (the system message stays) and the turn says how many.
 *
 * Errors are printed on stderr starting with the session's cmd. */
#ifndef TESSERA_CLI_CHAT_SESSION_H
#define TESSERA_CLI_CHAT_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include <tessera/tessera.h>
#include <tessera/tessera_mtmd.h>

#include "cli_opts.h"
#include "cli_setup.h"

typedef struct token_list {
    tessera_token *ids;
    int32_t n, cap;
} token_list;

typedef struct conversation {
    tessera_chat_message *msgs; /* roles are static strings, contents malloc'd copies */
    size_t n, cap;
} conversation;

typedef struct chat_session {
    const char *cmd;
    const cli_params *p;
    tessera_model *model;
    tessera_context *ctx;
    tessera_sampler *sampler;
    cli_chat chat;
    int32_t n_ctx;
    bool context_shift; /* --context-shift, where the model can shift (cli_context_shift_usable) */
    conversation conv;
    token_list cached; /* the tokens held in the KV cache, in order */
    token_list prompt; /* scratch: the latest rendering, tokenized */
    cli_spec spec;     /* -md / --spec-type: replies through speculative steps */
    /* --mmproj: the media of the conversation's messages in the order of
     * their markers, then the n_pending ones (/image, --image) the next
     * message will carry; a medium's positions are in prompt and cached as
     * a negative id made from its content hash, so an unchanged
     * conversation reuses the cache around it */
    tessera_mtmd *mm;
    tessera_media **media;
    int32_t n_media, cap_media, n_pending;
    tessera_mtmd_chunks *chunks; /* the latest rendering's chunks */
} chat_session;

/* How a reply ended. */
typedef enum chat_end {
    CHAT_END_EOG,         /* the model ended its turn */
    CHAT_END_LIMIT,       /* -n tokens were generated */
    CHAT_END_FULL,        /* the context filled up */
    CHAT_END_INTERRUPTED, /* Ctrl-C (tessera_abort) */
    CHAT_END_NOT_SENT,    /* the message alone does not fit the context */
} chat_end;

typedef struct chat_turn_info {
    chat_end end;
    int32_t n_prompt, n_reused; /* tokens of the rendering, and those the cache held */
    int32_t n_gen;              /* tokens generated (the end-of-turn token not counted) */
    double gen_ms;              /* from the first sampled token to the last */
    double prompt_ms;
    int n_dropped;              /* old turns (user + reply) dropped to fit the context */
} chat_turn_info;

/* Called with each piece of the reply as it is generated. */
typedef void (*chat_piece_fn)(const char *piece, size_t len, void *user);

/* Load the model, context, sampler and template from p (runtime already
 * initialized); p->system, when set, is the first message. 0 or -1. */
int chat_session_open(chat_session *s, const char *cmd, const cli_params *p);
void chat_session_close(chat_session *s);

/* One user message: render, decode, generate the reply (each piece to
 * on_piece), add both to the conversation. 0 (see info->end), -1 on a
 * fatal error (printed). */
int chat_session_turn(chat_session *s, const char *text, chat_piece_fn on_piece, void *user,
                      chat_turn_info *info);

/* Forget the conversation (keeping the system message unless keep_system
 * is false) and the cache. */
void chat_session_clear(chat_session *s, bool keep_system);
/* Attach the image (or sound) at path to the next message (needs
 * --mmproj). 0, or -1 with the error printed. */
int chat_session_add_media(chat_session *s, const char *path);
/* Set, replace or (text NULL) remove the system message. 0 or -1. */
int chat_session_set_system(chat_session *s, const char *text);

/* The conversation as a JSON file: {"messages": [{"role": ..., "content":
 * ...}, ...]} (what the OpenAI API and llama-server take). 0, or -1 with a
 * message naming the file (printed). Loading replaces the conversation. */
int chat_session_save(chat_session *s, const char *path);
int chat_session_load(chat_session *s, const char *path);

#endif
