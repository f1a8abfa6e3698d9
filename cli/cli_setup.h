/* cli_setup — the model + context set-up every subcommand that runs a model
 * uses (run, chat, perplexity, bench, serve): runtime init with the plugin
 * directories, model load with progress and device warnings, context with
 * the shared defaults, sampler, prompt text and chat template.
 *
 * Functions taking cmd print their one error line themselves, starting
 * with cmd ("tessera run: ..."). */
#ifndef TESSERA_CLI_SETUP_H
#define TESSERA_CLI_SETUP_H

#include <stddef.h>

#include <tessera/tessera.h>

#include "cli_opts.h"

/* Default context when -c is 0: the model's training context, at most this. */
enum { CLI_DEFAULT_MAX_CTX = 4096 };

/* tessera_init with p's --plugin-dir list and --verbose. 0 or -1. */
int cli_runtime_init(const char *cmd, const cli_params *p);

/* Load the model at path with p's --device and -ngl, fitted to the devices'
 * free memory (tessera_params_fit; --verbose prints the decision). n_ctx
 * (may be NULL: p->n_ctx) is the context asked for, 0 for the default, and
 * becomes the context that fits. A progress line on a terminal for large
 * files; a warning when -ngl cannot place layers on a GPU. NULL after
 * printing the error. */
tessera_model *cli_model_load(const char *cmd, const cli_params *p, const char *path, int32_t *n_ctx);

/* n_ctx 0: the model's training context, at most CLI_DEFAULT_MAX_CTX. A
 * warning when n_ctx exceeds the training context. NULL after printing. */
int32_t cli_ctx_size(const tessera_model *m, int32_t n_ctx);
tessera_context *cli_context_new(const char *cmd, const cli_params *p, tessera_model *m, int32_t n_ctx);

/* Load p's --lora/--lora-scaled adapters for m and use them in ctx (at
 * scale 0 with --lora-init-without-apply); out (may be NULL) gets the
 * p->n_lora handles. cli_context_new calls it. 0, or -1 after printing the
 * error naming the file. */
int cli_loras_apply(const char *cmd, const cli_params *p, tessera_model *m, tessera_context *ctx,
                    tessera_lora **out);

/* tessera_context_shift (tessera.h) with the error printed after cmd, and the
 * shift itself with --verbose. */
int cli_context_shift(const char *cmd, tessera_context *ctx, int32_t seq, int32_t keep, tessera_token *tokens,
                      int32_t *pos, bool verbose);

/* --context-shift as ctx can make it: false when not asked, or (with a
 * warning after cmd) when the model's recurrent state cannot shift. */
bool cli_context_shift_usable(const char *cmd, const cli_params *p, const tessera_context *ctx);

/* p's sampling options; --repeat-last-n -1 becomes n_ctx. NULL after printing. */
/* p's sampling settings with its --samplers, --dry-sequence-breaker and
 * --logit-bias lists in place (pointing into p: valid while p is). */
tessera_sampler_params cli_sampling(const cli_params *p);
tessera_sampler *cli_sampler_new(const char *cmd, const cli_params *p, const tessera_model *m, int32_t n_ctx);

/* Attach the grammar of --grammar, --grammar-file, --json-schema or
 * --json-schema-file (at most one) to s; call it after accepting the
 * prompt. 0 (also when none is given), -1 after printing the error, which
 * names the flag. */
int cli_grammar_attach(const char *cmd, const cli_params *p, const tessera_model *m, tessera_sampler *s);

/* The usual set: runtime, model p->model, context p->n_ctx. */
typedef struct cli_session {
    tessera_model *model;
    tessera_context *ctx;
    int32_t n_ctx;
    int initialized;
} cli_session;

/* 0, or -1 after printing the error; call cli_session_close() either way. */
int cli_session_open(cli_session *s, const char *cmd, const cli_params *p);
void cli_session_close(cli_session *s);

/* Speculative decoding for s's context as p asks (-md, --spec-type
 * ngram-simple): the draft model and its context (on -devd, with -ngld,
 * the target's context size and sequences) and the speculation. 0 with
 * out->spec NULL when p asks for none; -1 after printing the error (a
 * vocabulary that differs is named). Free with cli_spec_close. */
typedef struct cli_spec {
    tessera_model *draft_model;
    tessera_context *draft_ctx;
    tessera_spec *spec;
} cli_spec;

int cli_spec_open(cli_spec *out, const char *cmd, const cli_params *p, cli_session *s);
void cli_spec_close(cli_spec *sp);
/* --verbose's line: drafted, accepted and the rate. */
void cli_spec_print_stats(const char *cmd, const cli_spec *sp);

/* The prompt of -p (escapes processed unless --no-escape, when the command
 * takes CLI_G_ESCAPE) or the contents of -f; malloc'd, NUL-terminated.
 * NULL after printing. */
char *cli_prompt_text(const char *cmd, const cli_params *p, int escapes, size_t *len);

/* A chat set-up: the Jinja template of --chat-template-file, of
 * --chat-template (a built-in name or Jinja text) or the model's, with a
 * note on stderr when the model's falls back to ChatML. `source` says which
 * ("model", "chatml (fallback)", a file name, a built-in name). */
typedef struct cli_chat {
    tessera_chat_template *tmpl;
    char source[128];
} cli_chat;

int cli_chat_setup(const char *cmd, const cli_params *p, const tessera_model *m, int quiet, cli_chat *out);
void cli_chat_free(cli_chat *c);

#endif
