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
#include "cli_util.h"
#include "commands.h"
#include "util/error.h"

#define CHAT_MAX_BIAS 64

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera chat -m MODEL [options]\n"
            "\n"
            "Chat with a model using its chat template (tokenizer.chat_template);\n"
            "one line per message, /exit or end of input to quit, Ctrl-C stops a reply.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH           GGUF model\n"
            "      --system TEXT          system message\n"
            "      --chat-template NAME   use a built-in template instead of the model's:\n"
            "                             chatml, llama2, llama3, gemma, phi3, zephyr, mistral\n"
            "  -n, --n-predict N          most tokens per reply (default -1: until the end\n"
            "                             of the turn or a full context)\n"
            "  -c, --ctx-size N           context size (default: the model's, at most 4096)\n"
            "  -b, --batch-size N         tokens per micro-batch (default 512)\n"
            "  -t, --threads N            CPU threads (default: all)\n"
            "      --kv-type TYPE         KV cache type: f16 (default) or f32\n"
            "      --device LIST          devices to use, e.g. vulkan0,cpu-avx0\n"
            "  -ngl, --n-gpu-layers N     layers offloaded to the GPU device (default 0)\n"
            "      --plugin-dir DIR       look for backend plugins in DIR first\n"
            "      --verbose              load and speed details on stderr\n"
            "  -h, --help                 show this help\n"
            "\n"
            "sampling (llama.cpp's defaults and order):\n"
            "      --seed N               PRNG seed (default: random, printed with --verbose)\n"
            "      --temp T               temperature, <= 0 for greedy (default 0.8)\n"
            "      --top-k N              keep the N most likely tokens, 0 off (default 40)\n"
            "      --top-p P              keep the smallest set with mass >= P (default 0.95)\n"
            "      --min-p P              drop tokens below P x the best (default 0.05)\n"
            "      --typical P            locally typical sampling, 1 off (default 1)\n"
            "      --repeat-penalty R     penalize repeated tokens, 1 off (default 1)\n"
            "      --repeat-last-n N      tokens the penalties look back, -1 the context (64)\n"
            "      --frequency-penalty F  minus F per occurrence (default 0)\n"
            "      --presence-penalty P   minus P if present (default 0)\n"
            "      --logit-bias ID(+|-)B  add B to token ID's logit, e.g. 13+1.5, 2-inf\n");
}

/* ------------------------------------------------------------ arguments */

typedef struct chat_args {
    const char *model;
    const char *system;
    const char *template_name;
    const char *devices;
    const char *plugin_dir;
    tessera_kv_type kv_type;
    int32_t n_predict;
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_threads;
    int32_t n_gpu_layers;
    bool verbose;
    tessera_sampler_params sp;
    tessera_logit_bias bias[CHAT_MAX_BIAS];
} chat_args;

static int bad_value(const char *flag, const char *value, const char *want) {
    fprintf(stderr, "tessera chat: %s expects %s, got '%s'\n", flag, want, value);
    return -1;
}

static int parse_i32(const char *flag, const char *s, int32_t lo, int32_t *out) {
    long v;
    if (cli_parse_long(s, lo, INT32_MAX, &v) != 0)
        return bad_value(flag, s, lo < 0 ? "an integer" : "a non-negative integer");
    *out = (int32_t)v;
    return 0;
}

/* Any number but NaN (inf included). */
static int parse_f32(const char *flag, const char *s, float *out) {
    if (cli_parse_float(s, -INFINITY, INFINITY, out) != 0) return bad_value(flag, s, "a number");
    return 0;
}

/* "ID+B" or "ID-B" (B may be "inf"), llama.cpp's --logit-bias syntax. */
static int parse_bias(const char *s, tessera_logit_bias *out) {
    char *end;
    errno = 0;
    long id = strtol(s, &end, 10);
    if (errno || end == s || id < 0 || id > INT32_MAX || (*end != '+' && *end != '-'))
        return bad_value("--logit-bias", s, "TOKEN+BIAS or TOKEN-BIAS");
    float sign = *end == '-' ? -1.0f : 1.0f;
    const char *num = end + 1;
    float b;
    if (!strcmp(num, "inf")) b = INFINITY;
    else if (parse_f32("--logit-bias", num, &b) < 0) return -1;
    out->token = (tessera_token)id;
    out->bias = sign * b;
    return 0;
}

static int parse_seed(const char *flag, const char *s, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v > UINT32_MAX)
        return bad_value(flag, s, "an integer in 0..4294967295");
    *out = (uint32_t)v;
    return 0;
}

static int parse_kv_type(const char *flag, const char *s, tessera_kv_type *out) {
    if (!strcmp(s, "f16")) *out = TESSERA_KV_F16;
    else if (!strcmp(s, "f32")) *out = TESSERA_KV_F32;
    else return bad_value(flag, s, "f16 or f32");
    return 0;
}

typedef enum flag_kind { FLAG_STR, FLAG_I32, FLAG_F32, FLAG_SEED, FLAG_KV, FLAG_BIAS } flag_kind;

typedef struct flag_spec {
    const char *name, *alias; /* alias may be NULL */
    flag_kind kind;
    void *dst;
    int32_t min; /* FLAG_I32 */
} flag_spec;

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, chat_args *a) {
    tessera_sampler_params *sp = &a->sp;
    const flag_spec flags[] = {
        {"-m", "--model", FLAG_STR, &a->model, 0},
        {"--system", NULL, FLAG_STR, &a->system, 0},
        {"--chat-template", NULL, FLAG_STR, &a->template_name, 0},
        {"--device", NULL, FLAG_STR, &a->devices, 0},
        {"--plugin-dir", NULL, FLAG_STR, &a->plugin_dir, 0},
        {"--kv-type", NULL, FLAG_KV, &a->kv_type, 0},
        {"-n", "--n-predict", FLAG_I32, &a->n_predict, -1},
        {"-c", "--ctx-size", FLAG_I32, &a->n_ctx, 0},
        {"-b", "--batch-size", FLAG_I32, &a->n_batch, 1},
        {"-t", "--threads", FLAG_I32, &a->n_threads, 0},
        {"-ngl", "--n-gpu-layers", FLAG_I32, &a->n_gpu_layers, 0},
        {"--seed", NULL, FLAG_SEED, &sp->seed, 0},
        {"--temp", NULL, FLAG_F32, &sp->temp, 0},
        {"--top-k", NULL, FLAG_I32, &sp->top_k, INT32_MIN},
        {"--top-p", NULL, FLAG_F32, &sp->top_p, 0},
        {"--min-p", NULL, FLAG_F32, &sp->min_p, 0},
        {"--typical", NULL, FLAG_F32, &sp->typical_p, 0},
        {"--repeat-penalty", NULL, FLAG_F32, &sp->penalty_repeat, 0},
        {"--repeat-last-n", NULL, FLAG_I32, &sp->penalty_last_n, -1},
        {"--frequency-penalty", NULL, FLAG_F32, &sp->penalty_freq, 0},
        {"--presence-penalty", NULL, FLAG_F32, &sp->penalty_present, 0},
        {"--logit-bias", NULL, FLAG_BIAS, NULL, 0},
    };
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(f, "--verbose")) {
            a->verbose = true;
            continue;
        }
        const flag_spec *spec = NULL;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0] && !spec; k++)
            if (!strcmp(f, flags[k].name) || (flags[k].alias && !strcmp(f, flags[k].alias)))
                spec = &flags[k];
        if (!spec) {
            fprintf(stderr, "tessera chat: unknown flag '%s' (see tessera chat --help)\n", f);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tessera chat: flag %s needs a value\n", f);
            return -1;
        }
        const char *v = argv[++i];
        int rc = 0;
        switch (spec->kind) {
        case FLAG_STR: *(const char **)spec->dst = v; break;
        case FLAG_I32: rc = parse_i32(f, v, spec->min, spec->dst); break;
        case FLAG_F32: rc = parse_f32(f, v, spec->dst); break;
        case FLAG_SEED: rc = parse_seed(f, v, spec->dst); break;
        case FLAG_KV: rc = parse_kv_type(f, v, spec->dst); break;
        case FLAG_BIAS:
            if (sp->n_logit_bias >= CHAT_MAX_BIAS) {
                fprintf(stderr, "tessera chat: more than %d --logit-bias flags\n", CHAT_MAX_BIAS);
                return -1;
            }
            rc = parse_bias(v, &a->bias[sp->n_logit_bias]);
            if (rc == 0) sp->n_logit_bias++;
            break;
        }
        if (rc < 0) return -1;
    }
    if (!a->model) {
        fprintf(stderr, "tessera chat: missing -m MODEL (see tessera chat --help)\n");
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

/* user: the last percentage printed, so each is printed once. */
static bool on_progress(float progress, void *user) {
    int *last = user;
    int pct = (int)(progress * 100.0f + 0.5f);
    if (pct == *last) return true;
    *last = pct;
    fprintf(stderr, "\rloading %3d%%", pct);
    if (pct >= 100) fputs("\r            \r", stderr);
    return true;
}

/* ------------------------------------------------------------- the chat */

typedef struct chat_state {
    const chat_args *args;
    tessera_model *model;
    tessera_context *ctx;
    tessera_sampler *sampler;
    tessera_chat_format format;
    char bos_text[64], eos_text[64];
    int32_t n_ctx;
    int load_pct; /* progress shown so far */
    conversation conv;
    token_list cached; /* the tokens held in the KV cache, in order */
    token_list prompt; /* scratch: the latest rendering, tokenized */
} chat_state;

/* The special token's text for the template's bos_token / eos_token. */
static void special_text(const tessera_model *m, tessera_token id, char *buf, int32_t size) {
    buf[0] = '\0';
    if (id < 0) return;
    int32_t n = tessera_token_to_piece(m, id, buf, size - 1, true);
    buf[n > 0 ? n : 0] = '\0';
}

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
    const chat_args *a = st->args;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = a->devices;
    mp.n_gpu_layers = a->n_gpu_layers;
    if (isatty(STDERR_FILENO)) {
        st->load_pct = -1;
        mp.progress = on_progress;
        mp.progress_user = &st->load_pct;
    }
    st->model = tessera_model_load(a->model, &mp);
    if (!st->model) return -1;

    tessera_context_params cp = tessera_context_default_params();
    int32_t train = tessera_model_n_ctx_train(st->model);
    cp.n_ctx = (uint32_t)(a->n_ctx > 0 ? a->n_ctx : (train > 0 && train < 4096 ? train : 4096));
    if (a->n_batch > 0) cp.n_batch = (uint32_t)a->n_batch;
    cp.n_threads = a->n_threads;
    cp.kv_type = a->kv_type;
    cp.verbose = a->verbose;
    st->ctx = tessera_context_new(st->model, &cp);
    if (!st->ctx) return -1;
    st->n_ctx = (int32_t)tessera_context_n_ctx(st->ctx);

    tessera_sampler_params sp = a->sp;
    sp.logit_bias = a->bias;
    if (sp.penalty_last_n < 0) sp.penalty_last_n = st->n_ctx;
    st->sampler = tessera_sampler_new(tessera_model_n_vocab(st->model), &sp);
    if (!st->sampler) return -1;

    if (a->template_name) {
        if (tessera_chat_format_from_name(a->template_name, &st->format) < 0) return -1;
    } else {
        const char *jinja = tessera_model_meta_str(st->model, "tokenizer.chat_template");
        st->format = tessera_chat_format_detect(jinja);
        if (st->format.fallback)
            fprintf(stderr,
                    jinja ? "tessera chat: note: the model's chat template is not one of the "
                            "built-in families; using ChatML (--chat-template to choose)\n"
                          : "tessera chat: note: the model has no chat template; using ChatML "
                            "(--chat-template to choose)\n");
    }
    special_text(st->model, tessera_token_bos(st->model), st->bos_text, sizeof st->bos_text);
    special_text(st->model, tessera_token_eos(st->model), st->eos_text, sizeof st->eos_text);
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
    chat_args a = {.n_predict = -1, .kv_type = TESSERA_KV_F16,
                   .sp = tessera_sampler_default_params()};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;

    const char *dirs[1] = {a.plugin_dir};
    tessera_init_params ip = {.plugin_dirs = dirs, .n_plugin_dirs = a.plugin_dir ? 1 : 0,
                              .verbosity = a.verbose ? 1 : 0};
    if (tessera_init(&ip) < 0) {
        fprintf(stderr, "tessera chat: %s\n", tessera_last_error());
        return 1;
    }
    chat_state st = {.args = &a};
    int status = 1;
    if (chat_setup(&st) < 0) {
        fprintf(stderr, "tessera chat: %s\n", tessera_last_error());
        goto done;
    }
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
