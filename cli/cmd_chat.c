/* tessera chat — talk to a model through its chat template.
 *
 * `tessera chat -m MODEL -p "question"` answers once and exits (for
 * scripts); without -p it is a REPL: a banner, /commands, multi-line input
 * (a trailing \ or a """ block), colours on a terminal (none when piped or
 * with NO_COLOR), the speed after each reply, and notices when a reply is
 * cut or old turns are dropped. `tessera run -cnv` comes here too
 * (chat_run). The conversation itself lives in chat_session.c.
 *
 * On a terminal lines are read with libedit when built with it; through a
 * pipe lines are read until EOF with no prompt and no banner. Ctrl-C stops
 * the reply being generated; at an empty prompt it says how to leave, and a
 * second Ctrl-C leaves. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/tessera.h>

#ifdef TESSERA_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "chat_session.h"
#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"

static const cli_command chat_cmd = {
    .name = "tessera chat",
    .synopsis = "-m MODEL [-p QUESTION] [options]",
    .about = "Chat with a model using its chat template (tokenizer.chat_template).\n"
             "With -p (or -f) it answers that one message and exits; otherwise it\n"
             "reads messages from the terminal (type /help there) or from a pipe,\n"
             "one line per message. Ctrl-C stops a reply.",
    .groups = CLI_G_GENERATE | CLI_G_PROMPT | CLI_G_ESCAPE | CLI_G_CHAT | CLI_G_TEMPLATE | CLI_G_GRAMMAR | CLI_G_SHIFT |
              CLI_G_SPEC | CLI_G_MEDIA,
};

static const char repl_help[] =
    "  /help            this list\n"
    "  /clear           forget the conversation (the system message stays)\n"
    "  /system TEXT     set the system message (/system alone removes it)\n"
    "  /save FILE       write the conversation as JSON ({\"messages\": [...]})\n"
    "  /load FILE       read a conversation written by /save\n"
    "  /image PATH      attach an image to the next message (needs --mmproj)\n"
    "  /bye, /exit      leave (so do Ctrl-D and a second Ctrl-C at the prompt)\n"
    "  a line ending in \\ continues on the next line; \"\"\" starts and ends a\n"
    "  block of several lines. Ctrl-C stops a reply.\n";

/* ------------------------------------------------------------- terminal */

typedef struct repl {
    chat_session s;
    const cli_params *p;
    int tty_in;  /* prompts, banner, line editing */
    int color;   /* ANSI colours on stdout/stderr */
    int one_shot;
} repl;

#define C_PROMPT "\033[1;32m"
#define C_REPLY "\033[36m"
#define C_NOTE "\033[2m"
#define C_ERR "\033[31m"
#define C_OFF "\033[0m"

static const char *col(const repl *r, const char *code) {
    return r->color ? code : "";
}

/* A notice line on stderr, dimmed on a terminal. */
static void note(const repl *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const repl *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(col(r, C_NOTE), stderr);
    vfprintf(stderr, fmt, ap);
    fputs(col(r, C_OFF), stderr);
    fputc('\n', stderr);
    va_end(ap);
}

static volatile sig_atomic_t g_sigint; /* Ctrl-C seen at the prompt */

static void on_sigint(int sig) {
    (void)sig;
    g_sigint = 1;
    tessera_abort(); /* stops a reply being generated; cleared before the next */
}

/* One physical line without its newline, malloc'd; NULL at end of input or
 * on Ctrl-C (g_sigint set). */
static char *read_raw_line(const repl *r, const char *prompt) {
#ifdef TESSERA_HAVE_LIBEDIT
    if (r->tty_in) {
        /* \001 ... \002 tell libedit the colour codes take no room on screen. */
        char full[64];
        if (r->color) snprintf(full, sizeof full, "\001%s\002%s\001%s\002", C_PROMPT, prompt, C_OFF);
        else snprintf(full, sizeof full, "%s", prompt);
        char *line = readline(full);
        if (r->color) fputs(C_OFF, stdout); /* what the user typed was in the prompt's colour */
        if (line && *line) add_history(line);
        return line;
    }
#endif
    if (r->tty_in) {
        printf("%s%s%s", col(r, C_PROMPT), prompt, col(r, C_OFF));
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

static int append(char **buf, size_t *len, const char *s, size_t n) {
    char *p = realloc(*buf, *len + n + 1);
    if (!p) return -1;
    memcpy(p + *len, s, n);
    *len += n;
    p[*len] = '\0';
    *buf = p;
    return 0;
}

/* One message: a line, lines joined by a trailing backslash, or a """
 * block. NULL at end of input or on Ctrl-C. */
static char *read_message(const repl *r) {
    char *line = read_raw_line(r, "> ");
    if (!line) return NULL;
    size_t n = strlen(line);
    char *msg = NULL;
    size_t len = 0;
    if (!strncmp(line, "\"\"\"", 3)) {
        /* """ block: until a line ending in """ (the first line may hold text). */
        const char *rest = line + 3;
        for (;;) {
            size_t rn = strlen(rest);
            int closes = rn >= 3 && !strcmp(rest + rn - 3, "\"\"\"");
            if (closes) rn -= 3;
            if (closes && rn == 0 && rest != line + 3) break; /* a closing line alone */
            if ((len && append(&msg, &len, "\n", 1) < 0) || append(&msg, &len, rest, rn) < 0) goto oom;
            if (closes) break;
            free(line);
            line = read_raw_line(r, "... ");
            if (!line) {
                free(msg);
                return NULL;
            }
            rest = line;
        }
        free(line);
        if (!msg && append(&msg, &len, "", 0) < 0) return NULL;
        return msg;
    }
    while (n > 0 && line[n - 1] == '\\') {
        if (append(&msg, &len, line, n - 1) < 0 || append(&msg, &len, "\n", 1) < 0) goto oom;
        free(line);
        line = read_raw_line(r, "... ");
        if (!line) {
            free(msg);
            return NULL;
        }
        n = strlen(line);
    }
    if (append(&msg, &len, line, n) < 0) goto oom;
    free(line);
    return msg;
oom:
    free(line);
    free(msg);
    return NULL;
}

/* -------------------------------------------------------------- a turn */

static void emit_piece(const char *piece, size_t len, void *user) {
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
}

/* Send text and show the reply with what a person needs to know about it.
 * 0 ok, -1 fatal error. */
static int turn(repl *r, const char *text) {
    chat_turn_info info;
    g_sigint = 0;
    tessera_abort_clear();
    fputs(col(r, C_REPLY), stdout);
    int rc = chat_session_turn(&r->s, text, emit_piece, NULL, &info);
    fputs(col(r, C_OFF), stdout);
    if (info.end != CHAT_END_NOT_SENT) putchar('\n');
    fflush(stdout);
    tessera_abort_clear();
    g_sigint = 0;
    if (rc < 0) return -1;
    if (info.n_dropped)
        note(r, "[dropped the %d oldest turn%s to fit the context of %d tokens (-c)]", info.n_dropped,
             info.n_dropped > 1 ? "s" : "", (int)r->s.n_ctx);
    if (info.end == CHAT_END_INTERRUPTED) note(r, "[interrupted]");
    else if (info.end == CHAT_END_LIMIT) note(r, "[cut: the reply reached -n %d tokens]", (int)r->p->n_predict);
    else if (info.end == CHAT_END_FULL) note(r, "[context full: %d tokens; the reply was cut]", (int)r->s.n_ctx);
    if (info.end != CHAT_END_NOT_SENT && (!r->one_shot || r->p->verbose))
        note(r, "[%d tokens in %.2f s, %.1f tokens/s; prompt %d tokens, %d from the cache]", (int)info.n_gen,
             info.gen_ms / 1e3, info.gen_ms > 0 ? info.n_gen * 1e3 / info.gen_ms : 0.0, (int)info.n_prompt,
             (int)info.n_reused);
    return 0;
}

/* ----------------------------------------------------------- /commands */

/* 1: leave, 0: go on, -1: fatal. */
static int command(repl *r, char *line) {
    char *arg = line + strcspn(line, " \t");
    if (*arg) *arg++ = '\0';
    arg += strspn(arg, " \t");
    if (!strcmp(line, "/bye") || !strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/help") || !strcmp(line, "/?")) {
        fputs(repl_help, stdout);
    } else if (!strcmp(line, "/clear")) {
        chat_session_clear(&r->s, true);
        note(r, "[conversation cleared]");
    } else if (!strcmp(line, "/system")) {
        if (chat_session_set_system(&r->s, *arg ? arg : NULL) < 0) return -1;
        note(r, *arg ? "[system message set]" : "[system message removed]");
    } else if (!strcmp(line, "/image") || !strcmp(line, "/audio")) {
        if (!*arg) note(r, "[%s needs a PATH]", line);
        else if (chat_session_add_media(&r->s, arg) == 0) note(r, "[%s attached to the next message]", arg);
    } else if (!strcmp(line, "/save") || !strcmp(line, "/load")) {
        if (!*arg) {
            note(r, "[%s needs a FILE]", line);
        } else if (line[1] == 's') {
            if (chat_session_save(&r->s, arg) == 0) note(r, "[saved %zu messages to %s]", r->s.conv.n, arg);
        } else if (chat_session_load(&r->s, arg) == 0) {
            note(r, "[loaded %zu messages from %s]", r->s.conv.n, arg);
        }
    } else {
        note(r, "[unknown command %s; /help lists them]", line);
    }
    return 0;
}

static void banner(const repl *r, const char *model_path) {
    const char *base = strrchr(model_path, '/');
    printf("%s%s%s: %s, chat template %s, context %d\n", col(r, C_PROMPT), base ? base + 1 : model_path,
           col(r, C_OFF), tessera_model_desc(r->s.model), r->s.chat.source,
           (int)r->s.n_ctx);
    printf("Type a message and press Enter. /help for commands, /bye or Ctrl-D to leave;\n"
           "Ctrl-C stops a reply.\n");
    fflush(stdout);
}

/* ------------------------------------------------------------- running */

static int repl_loop(repl *r) {
    int ctrl_c = 0; /* Ctrl-C at the prompt once already */
    for (;;) {
        g_sigint = 0;
        char *msg = read_message(r);
        if (!msg) {
            if (g_sigint && r->tty_in && !ctrl_c) {
                ctrl_c = 1;
                putchar('\n');
                note(r, "[Ctrl-C again, /bye or Ctrl-D to leave]");
                continue;
            }
            if (r->tty_in) putchar('\n');
            return 0;
        }
        ctrl_c = 0;
        int rc = 0;
        if (msg[0] == '/') rc = command(r, msg);
        else if (msg[strspn(msg, " \t\n")]) rc = turn(r, msg);
        free(msg);
        if (rc) return rc > 0 ? 0 : -1;
    }
}

int chat_run(const char *cmd, const cli_params *p, int interactive) {
    cli_params q = *p;
    q.sp.logit_bias = q.bias;
    char *system = NULL, *first = NULL;
    size_t first_len = 0;
    int status = 1;
    repl r = {.p = &q};
    if ((q.prompt || q.prompt_file) && !(first = cli_prompt_text(cmd, &q, 1, &first_len))) return 1;
    if (q.system && !q.no_escape) {
        if (!(system = strdup(q.system))) goto done;
        cli_unescape(system);
        q.system = system;
    }
    if (cli_runtime_init(cmd, &q) < 0) goto done;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: let reads see the signal */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (chat_session_open(&r.s, cmd, &q) == 0) {
        r.tty_in = isatty(STDIN_FILENO);
        const char *no_color = getenv("NO_COLOR");
        const char *term = getenv("TERM");
        r.color = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO) && !(no_color && *no_color) &&
                  !(term && !strcmp(term, "dumb"));
        r.one_shot = first && !interactive;
        status = 0;
        if (interactive && r.tty_in) banner(&r, q.model);
        if (first && turn(&r, first) < 0) status = 1;
        if (status == 0 && interactive && repl_loop(&r) < 0) status = 1;
    }
    signal(SIGINT, SIG_DFL);
    chat_session_close(&r.s);
    tessera_shutdown();
done:
    free(first);
    free(system);
    return status;
}

int cmd_chat(int argc, char **argv) {
    cli_params p;
    cli_params_init(&p);
    int rc = cli_parse(&chat_cmd, argc, argv, &p, NULL);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!p.model) {
        fprintf(stderr, "tessera chat: -m MODEL is required (see 'tessera chat --help')\n");
        return 2;
    }
    if (p.prompt && p.prompt_file) {
        fprintf(stderr, "tessera chat: give either -p or -f, not both\n");
        return 2;
    }
    if (p.n_media > 0 && !p.mmproj) {
        fprintf(stderr, "tessera chat: --%s needs --mmproj FILE (the model's multimodal projector)\n",
                p.media_kind[0] == 'a' ? "audio" : "image");
        return 2;
    }
    /* -p / -f: one turn and out; else the REPL. */
    return chat_run("tessera chat", &p, !(p.prompt || p.prompt_file));
}
