/* tessera chat — interactive chat through the model's chat template.
 *
 * Every turn the whole conversation is rendered again through the template
 * and tokenized; the tokens already in the KV cache that match the new
 * rendering are kept and only the rest is decoded (KV reuse). When the
 * conversation no longer fits the context, the oldest turns are dropped
 * (the system message stays).
 *
 * On a terminal lines are read with libedit (history, editing) when built
 * with it; through a pipe lines are read until EOF with no prompt. "/exit"
 * or EOF ends the chat; Ctrl-C stops the reply being generated (at the
 * prompt it ends the program, as usual). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/tessera.h>

#ifdef TESSERA_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "chat/chat.h"
#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"
#include "util/error.h"

static const cli_command chat_cmd = {
    .name = "tessera chat",
    .synopsis = "-m MODEL [options]",
    .about = "Chat with a model using its chat template (tokenizer.chat_template);\n"
             "one line per message, /exit or end of input to quit, Ctrl-C stops a reply.",
    .groups = CLI_G_GENERATE | CLI_G_CHAT | CLI_G_TEMPLATE,
};

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, cli_params *a) {
    cli_params_init(a);
    int rc = cli_parse(&chat_cmd, argc, argv, a, NULL);
    if (rc != 0) return rc;
    if (!a->model) {
        fprintf(stderr, "tessera chat: -m MODEL is required (see 'tessera chat --help')\n");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------- small lists */

typedef struct token_list {
    tessera_token *ids;
    int32_t n, cap;
} token_list;

static int token_list_reserve(token_list *t, int32_t cap) {
    if (cap <= t->cap) return 0;
    tessera_token *p = realloc(t->ids, (size_t)cap * sizeof *p);
    if (!p) return -1;
    t->ids = p;
    t->cap = cap;
    return 0;
}

static int token_list_push(token_list *t, tessera_token id) {
    if (t->n == t->cap && token_list_reserve(t, t->cap ? t->cap * 2 : 256) < 0) return -1;
    t->ids[t->n++] = id;
    return 0;
}

/* Tokenize text into t (replacing its contents), growing it as needed. */
static int tokenize_into(const tessera_model *m, const char *text, size_t len, bool add_special,
                         token_list *t) {
    for (;;) {
        int32_t n = tessera_tokenize(m, text, len, t->ids, t->cap, add_special, true);
        if (n == INT32_MIN) return -1;
        if (n >= 0) {
            t->n = n;
            return 0;
        }
        if (token_list_reserve(t, -n) < 0) return error_set("out of memory for %d tokens", -n);
    }
}

typedef struct conversation {
    tessera_chat_message *msgs; /* contents are malloc'd copies */
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        tessera_chat_message *p = realloc(c->msgs, cap * sizeof *p);
        if (!p) return -1;
        c->msgs = p;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, content, len);
    copy[len] = '\0';
    c->msgs[c->n++] = (tessera_chat_message){.role = role, .content = copy};
    return 0;
}

static void conv_remove(conversation *c, size_t i) {
    free((char *)c->msgs[i].content);
    memmove(&c->msgs[i], &c->msgs[i + 1], (c->n - i - 1) * sizeof *c->msgs);
    c->n--;
}

static void conv_free(conversation *c) {
    for (size_t i = 0; i < c->n; i++) free((char *)c->msgs[i].content);
    free(c->msgs);
}

/* A growable byte string for the reply being generated. */
typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf;

static int text_append(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return -1;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* ---------------------------------------------------------------- input */

static bool g_tty;

/* One line without its newline, malloc'd; NULL at end of input. */
static char *read_line(void) {
#ifdef TESSERA_HAVE_LIBEDIT
    if (g_tty) {
        char *line = readline("> ");
        if (line && *line) add_history(line);
        return line;
    }
#endif
    if (g_tty) {
        fputs("> ", stdout);
        fflush(stdout);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    return line;
}

/* --------------------------------------------------------------- Ctrl-C */

static volatile sig_atomic_t g_generating, g_interrupted;

static void on_sigint(int sig) {
    if (g_generating) {
        g_interrupted = 1;
        tessera_abort();
        return;
    }
    /* At the prompt: end the program as Ctrl-C normally does. */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* ------------------------------------------------------------- the chat */

typedef struct chat_state {
    const cli_params *args;
    tessera_model *model;
    tessera_context *ctx;
    tessera_sampler *sampler;
    tessera_chat_format format;
    char bos_text[64], eos_text[64];
    int32_t n_ctx;
    conversation conv;
    token_list cached; /* the tokens held in the KV cache, in order */
    token_list prompt; /* scratch: the latest rendering, tokenized */
} chat_state;

/* Render the conversation and tokenize it into st->prompt, dropping the
 * oldest turns until it leaves a quarter of the context for the reply.
 * Returns 0, 1 when even the newest message alone does not fit (it is
 * removed), -1 on error. */
static int render_fitting(chat_state *st) {
    int32_t room = st->n_ctx / 4 > 0 ? st->n_ctx / 4 : 1;
    for (;;) {
        size_t len = 0;
        char *text = chat_render_alloc(&st->format, st->conv.msgs, st->conv.n, true, st->bos_text,
                                       st->eos_text, &len);
        int rc = text ? tokenize_into(st->model, text, len, !st->format.bos_in_text, &st->prompt)
                      : -1;
        free(text);
        if (rc < 0) {
            fprintf(stderr, "tessera chat: %s\n", tessera_last_error());
            return -1;
        }
        if (st->prompt.n <= st->n_ctx - room) return 0;
        /* Drop the oldest user turn and the reply after it; keep a system message. */
        size_t first = st->conv.n > 0 && !strcmp(st->conv.msgs[0].role, "system") ? 1 : 0;
        if (first + 1 >= st->conv.n) {
            fprintf(stderr,
                    "tessera chat: the message (%d tokens with the template) does not fit the "
                    "context of %d tokens (-c); it was not sent\n",
                    (int)st->prompt.n, (int)st->n_ctx);
            conv_remove(&st->conv, st->conv.n - 1);
            return 1;
        }
        conv_remove(&st->conv, first);
        if (first < st->conv.n - 1 && !strcmp(st->conv.msgs[first].role, "assistant"))
            conv_remove(&st->conv, first);
        if (st->args->verbose) fprintf(stderr, "[dropped the oldest turn to fit the context]\n");
    }
}

/* Decode the part of st->prompt that differs from what the cache holds.
 * 0 ok, 1 interrupted, -1 error. */
static int decode_prompt(chat_state *st) {
    int32_t common = 0;
    while (common < st->cached.n && common < st->prompt.n &&
           st->cached.ids[common] == st->prompt.ids[common])
        common++;
    if (st->prompt.n == 0) {
        fprintf(stderr, "tessera chat: the template rendered no tokens\n");
        return -1;
    }
    /* Decode at least one token so there are logits to sample from. */
    if (common == st->prompt.n) common--;
    int32_t n_new = st->prompt.n - common;
    if (st->args->verbose)
        fprintf(stderr, "[prompt: %d tokens, %d reused from the cache, %d decoded]\n",
                (int)st->prompt.n, (int)common, (int)n_new);
    int rc = tessera_decode(st->ctx, st->prompt.ids + common, n_new, common, 0);
    if (rc < 0) {
        /* The cache keeps what it held before the call, up to common. */
        st->cached.n = common < st->cached.n ? common : st->cached.n;
        tessera_kv_truncate(st->ctx, st->cached.n);
        if (g_interrupted || tessera_aborted()) return 1;
        fprintf(stderr, "tessera chat: %s\n", tessera_last_error());
        return -1;
    }
    if (token_list_reserve(&st->cached, st->prompt.n) < 0) {
        fprintf(stderr, "tessera chat: out of memory\n");
        return -1;
    }
    memcpy(st->cached.ids, st->prompt.ids, (size_t)st->prompt.n * sizeof *st->prompt.ids);
    st->cached.n = st->prompt.n;
    for (int32_t i = common; i < st->prompt.n; i++)
        tessera_sampler_accept(st->sampler, st->prompt.ids[i]);
    return 0;
}

/* Sample, print and decode the reply token by token into reply.
 * 0 ok (end of turn, limit, full context or Ctrl-C), -1 error; *full says
 * the context filled up. */
static int generate_reply(chat_state *st, text_buf *reply, bool *full) {
    char piece[256];
    for (int32_t n = 0; st->args->n_predict < 0 || n < st->args->n_predict; n++) {
        if (g_interrupted) break;
        if (st->cached.n >= st->n_ctx) {
            *full = true;
            break;
        }
        const float *logits = tessera_logits(st->ctx, -1);
        if (!logits) {
            fprintf(stderr, "tessera chat: %s\n", tessera_last_error());
            return -1;
        }
        tessera_token tok = tessera_sampler_sample(st->sampler, logits);
        if (tok < 0) {
            fprintf(stderr, "tessera chat: sampling failed: %s\n", tessera_last_error());
            return -1;
        }
        tessera_sampler_accept(st->sampler, tok);
        if (tessera_token_is_eog(st->model, tok)) break;
        int32_t len = tessera_token_to_piece(st->model, tok, piece, sizeof piece, false);
        if (len > 0) {
            fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
            if (text_append(reply, piece, (size_t)len) < 0) {
                fprintf(stderr, "tessera chat: out of memory\n");
                return -1;
            }
        }
        int rc = tessera_decode(st->ctx, &tok, 1, st->cached.n, 0);
        if (rc < 0) {
            if (g_interrupted || tessera_aborted()) break;
            fprintf(stderr, "\ntessera chat: %s\n", tessera_last_error());
            return -1;
        }
        if (token_list_push(&st->cached, tok) < 0) {
            fprintf(stderr, "tessera chat: out of memory\n");
            return -1;
        }
    }
    return 0;
}

/* One user line: render, decode, reply. 0 ok, -1 fatal error. */
static int chat_turn(chat_state *st, const char *line) {
    if (conv_add(&st->conv, "user", line, strlen(line)) < 0) {
        fprintf(stderr, "tessera chat: out of memory\n");
        return -1;
    }
    int rc = render_fitting(st);
    if (rc != 0) return rc < 0 ? -1 : 0;
    /* From here to the end of the reply Ctrl-C stops the reply only. */
    g_interrupted = 0;
    tessera_abort_clear();
    g_generating = 1;
    rc = decode_prompt(st);
    text_buf reply = {0};
    bool full = false;
    if (rc == 0) rc = generate_reply(st, &reply, &full);
    if (rc > 0) rc = 0; /* interrupted while reading the prompt */
    g_generating = 0;
    putchar('\n');
    fflush(stdout);
    /* Notes go to stderr after the reply's line is complete. */
    if (g_interrupted) fputs("[interrupted]\n", stderr);
    else if (full)
        fprintf(stderr, "[context full: %d tokens; the reply was cut]\n", (int)st->n_ctx);
    tessera_abort_clear();
    if (rc == 0 && conv_add(&st->conv, "assistant", reply.data ? reply.data : "", reply.len) < 0) {
        fprintf(stderr, "tessera chat: out of memory\n");
        rc = -1;
    }
    free(reply.data);
    return rc;
}

static int chat_setup(chat_state *st) {
    const cli_params *a = st->args;
    const char *cmd = "tessera chat";
    st->model = cli_model_load(cmd, a, a->model);
    if (!st->model) return -1;
    st->ctx = cli_context_new(cmd, a, st->model, a->n_ctx);
    if (!st->ctx) return -1;
    st->n_ctx = (int32_t)tessera_context_n_ctx(st->ctx);
    st->sampler = cli_sampler_new(cmd, a, st->model, st->n_ctx);
    if (!st->sampler) return -1;
    cli_chat chat;
    if (cli_chat_setup(cmd, a, st->model, 0, &chat) < 0) return -1;
    st->format = chat.format;
    memcpy(st->bos_text, chat.bos_text, sizeof st->bos_text);
    memcpy(st->eos_text, chat.eos_text, sizeof st->eos_text);
    if (a->verbose)
        fprintf(stderr, "[%s; template %s%s; context %d; seed %u]\n",
                tessera_model_desc(st->model), tessera_chat_family_name(st->format.family),
                st->format.bos_in_text ? " (writes BOS)" : "", (int)st->n_ctx,
                tessera_sampler_seed(st->sampler));
    if (a->system && conv_add(&st->conv, "system", a->system, strlen(a->system)) < 0) {
        fprintf(stderr, "tessera chat: out of memory\n");
        return -1;
    }
    return 0;
}

int cmd_chat(int argc, char **argv) {
    cli_params a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (cli_runtime_init("tessera chat", &a) < 0) return 1;
    chat_state st = {.args = &a};
    int status = 1;
    if (chat_setup(&st) < 0) goto done;
    g_tty = isatty(STDIN_FILENO);
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: let reads see the signal */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    status = 0;
    for (;;) {
        char *line = read_line();
        if (!line) break;
        if (!strcmp(line, "/exit")) {
            free(line);
            break;
        }
        if (*line == '\0') {
            free(line);
            continue;
        }
        rc = chat_turn(&st, line);
        free(line);
        if (rc < 0) {
            status = 1;
            break;
        }
    }
    signal(SIGINT, SIG_DFL);
    if (a.verbose) {
        tessera_timings t;
        tessera_context_timings(st.ctx, &t);
        fprintf(stderr, "[prompt %lld tokens %.1f tok/s; generation %lld tokens %.1f tok/s]\n",
                (long long)t.n_prompt, t.prompt_ms > 0 ? t.n_prompt * 1e3 / t.prompt_ms : 0.0,
                (long long)t.n_gen, t.gen_ms > 0 ? t.n_gen * 1e3 / t.gen_ms : 0.0);
    }
done:
    conv_free(&st.conv);
    free(st.cached.ids);
    free(st.prompt.ids);
    tessera_sampler_free(st.sampler);
    tessera_context_free(st.ctx);
    tessera_model_free(st.model);
    tessera_shutdown();
    return status;
}
