/*
 * libtessera is a guest in its process (issue 40): an application (a JVM,
 * ART, a server) that loads a real model through the public API and
 * generates with it finds its signal handlers, its signal mask and its
 * locale as it left them, and nothing written to its stdout or stderr.
 * Lines the library logs (a warning, a context's verbose summary, explain)
 * reach the application's log callback when it sets one, and nowhere when
 * it does not. Crash isolation is there only when asked for
 * (tessera_set_crash_guard), and asking for it off again puts the
 * application's handlers back. That the tessera CLI, which asks for it,
 * still names a crashing plugin is test_devices_cli.sh's check.
 *
 * The model: SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-models.sh), on
 * the first CPU plugin device (a GPU driver is another guest in the
 * process and may print as it pleases; that is not the library).
 */
#include "harness.h"

#include <fcntl.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const int watched[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
enum { N_WATCHED = sizeof watched / sizeof watched[0] };

/* The application's handlers: SIGSEGV with SA_SIGINFO as the JVM's is. */
static void app_handler(int sig) { (void)sig; }
static void app_action(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)info;
    (void)uc;
}

/* What the process looked like before the library ran. */
typedef struct process_state {
    struct sigaction act[N_WATCHED];
    sigset_t mask;
    char locale[512];
} process_state;

static void state_take(process_state *s) {
    for (int k = 0; k < N_WATCHED; k++) sigaction(watched[k], NULL, &s->act[k]);
    pthread_sigmask(SIG_SETMASK, NULL, &s->mask);
    const char *loc = setlocale(LC_ALL, NULL);
    snprintf(s->locale, sizeof s->locale, "%s", loc ? loc : "(null)");
}

/* How now differs from before: "" when it does not. */
static void state_diff(const process_state *before, const process_state *now, char *out, size_t size) {
    out[0] = '\0';
    size_t len = 0;
    for (int k = 0; k < N_WATCHED; k++) {
        const struct sigaction *a = &before->act[k], *b = &now->act[k];
        bool info = a->sa_flags & SA_SIGINFO;
        bool same = (a->sa_flags & SA_SIGINFO) == (b->sa_flags & SA_SIGINFO) &&
                    (info ? a->sa_sigaction == b->sa_sigaction : a->sa_handler == b->sa_handler);
        if (!same) len += (size_t)snprintf(out + len, len < size ? size - len : 0, "handler of %s replaced; ",
                                           strsignal(watched[k]));
    }
    for (int sig = 1; sig < 65; sig++)
        if (sigismember(&before->mask, sig) != sigismember(&now->mask, sig))
            len += (size_t)snprintf(out + len, len < size ? size - len : 0, "signal %d %s in the mask; ", sig,
                                    sigismember(&now->mask, sig) ? "blocked" : "unblocked");
    if (strcmp(before->locale, now->locale))
        snprintf(out + len, len < size ? size - len : 0, "locale '%s' became '%s'", before->locale, now->locale);
}

/* fds 1 and 2 into files while the library runs. */
typedef struct capture {
    int saved[2];
    char path[2][4200];
} capture;

static bool capture_start(capture *c) {
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < 2; i++) {
        snprintf(c->path[i], sizeof c->path[i], "%s/fd%d-XXXXXX", harness_tmpdir(), i + 1);
        int fd = mkstemp(c->path[i]);
        if (fd < 0) return false;
        c->saved[i] = dup(i + 1);
        dup2(fd, i + 1);
        close(fd);
    }
    return true;
}

/* Puts fds 1 and 2 back; returns what was written to them (malloc'd,
 * "" when nothing was). */
static char *capture_stop(capture *c) {
    fflush(stdout);
    fflush(stderr);
    size_t cap = 64, len = 0;
    char *all = calloc(1, cap);
    for (int i = 0; i < 2; i++) {
        dup2(c->saved[i], i + 1);
        close(c->saved[i]);
        size_t n = 0;
        char *text = harness_read_file(c->path[i], &n);
        unlink(c->path[i]);
        if (!text || !n) {
            free(text);
            continue;
        }
        cap += n + 32;
        all = realloc(all, cap);
        len += (size_t)snprintf(all + len, cap - len, "fd %d: %s", i + 1, text);
        free(text);
    }
    return all;
}

/* The application's log: every line in one buffer. */
typedef struct log_book {
    char text[1 << 20];
    size_t len;
    int lines, warnings, not_one_line;
} log_book;

static void log_keep(int32_t level, const char *text, void *user) {
    log_book *b = user;
    int n = snprintf(b->text + b->len, sizeof b->text - b->len, "%s", text);
    if (n > 0) b->len += (size_t)n < sizeof b->text - b->len ? (size_t)n : sizeof b->text - b->len - 1;
    b->lines++;
    const char *nl = strchr(text, '\n');
    if (!nl || nl[1]) b->not_one_line++;
    if (level == TESSERA_LOG_WARN) b->warnings++;
}

/* Load, generate n tokens greedily after the prompt, free. What went wrong
 * goes to why (nothing may be printed while fds 1 and 2 are captured). */
static int generate(const char *model_path, const char *device, int n, char *text, size_t text_size, char *why,
                    size_t why_size) {
    int rc = -1;
    tessera_context *ctx = NULL;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = device;
    mp.n_gpu_layers = 99; /* no GPU among the devices: a warning */
    tessera_model *m = tessera_model_load(model_path, &mp);
    if (!m) goto fail;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 2;
    cp.verbose = true; /* a summary of sizes */
    cp.explain = true; /* and the placement: for the log, if there is one */
    ctx = tessera_context_new(m, &cp);
    if (!ctx) goto fail;
    const char *prompt = "The capital of France is";
    tessera_token toks[64];
    int32_t n_prompt = tessera_tokenize(m, prompt, strlen(prompt), toks, 64, true, false);
    if (n_prompt <= 0 || tessera_decode(ctx, toks, n_prompt, 0, 0) != 0) goto fail;
    int32_t n_vocab = tessera_model_n_vocab(m);
    size_t len = 0;
    text[0] = '\0';
    for (int i = 0; i < n; i++) {
        const float *logits = tessera_logits(ctx, -1);
        if (!logits) goto fail;
        tessera_token best = 0;
        for (tessera_token t = 1; t < n_vocab; t++)
            if (logits[t] > logits[best]) best = t;
        char piece[64];
        int32_t k = tessera_token_to_piece(m, best, piece, sizeof piece - 1, false);
        if (k > 0 && len + (size_t)k < text_size) {
            memcpy(text + len, piece, (size_t)k);
            len += (size_t)k;
            text[len] = '\0';
        }
        if (tessera_decode(ctx, &best, 1, n_prompt + i, 0) != 0) goto fail;
    }
    rc = 0;
fail:
    if (rc) snprintf(why, why_size, "%s", tessera_last_error());
    tessera_context_free(ctx);
    tessera_model_free(m);
    return rc;
}

/* The first CPU device that is not ref (a CPU plugin's), else "ref". */
static void cpu_device(char *out, size_t size) {
    tessera_device_info devs[16];
    int32_t n = tessera_devices(devs, 16);
    snprintf(out, size, "ref");
    for (int32_t i = 0; i < n && i < 16; i++)
        if (!strcmp(devs[i].kind, "CPU") && strcmp(devs[i].name, "ref")) {
            snprintf(out, size, "%s", devs[i].name);
            return;
        }
}

TEST(test_guest) {
    harness_path model = harness_model_file("SmolLM2-135M-Instruct.Q4_1.gguf");
    const char *build = getenv("TESSERA_BUILD_ROOT");

    /* The application: its own handlers, a mask, a locale. */
    struct sigaction harness_act[N_WATCHED];
    for (int k = 0; k < N_WATCHED; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        if (watched[k] == SIGSEGV) {
            sa.sa_sigaction = app_action;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        } else {
            sa.sa_handler = app_handler;
        }
        sigaction(watched[k], &sa, &harness_act[k]);
    }
    sigset_t block, harness_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR2);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &harness_mask);
    char harness_locale[256];
    snprintf(harness_locale, sizeof harness_locale, "%s", setlocale(LC_ALL, NULL));
    if (!setlocale(LC_ALL, "C.UTF-8")) setlocale(LC_ALL, "POSIX");

    process_state before, after;
    state_take(&before);

    /* 1. No log callback: a warning, a verbose summary and explain, all
     * asked for, go nowhere; the process is left as it was. */
    capture cap;
    REQUIRE(capture_start(&cap), "capturing fds 1 and 2 under %s", harness_tmpdir());
    const char *dirs[1] = {build};
    tessera_init_params ip = {.plugin_dirs = dirs, .n_plugin_dirs = build ? 1 : 0, .verbosity = 2};
    char why[512] = "", text[256] = "", device[48] = "ref";
    int init_rc = tessera_init(&ip);
    if (init_rc) snprintf(why, sizeof why, "%s", tessera_last_error());
    else cpu_device(device, sizeof device);
    int gen_rc = init_rc ? -1 : generate(model.s, device, 8, text, sizeof text, why, sizeof why);
    state_take(&after);
    char *written = capture_stop(&cap);
    printf("on %s, no log callback: 'The capital of France is%s'\n", device, text);
    EXPECT(init_rc == 0 && gen_rc == 0, "generating: %s", why);
    EXPECT(strlen(text) > 0, "8 tokens generated");
    EXPECT_STR(written, "", "written to stdout and stderr by the library");
    free(written);
    char diff[2048];
    state_diff(&before, &after, diff, sizeof diff);
    EXPECT_STR(diff, "", "the process after a generation, no log callback");

    /* 2. With a log callback: the same lines reach it, and nothing else. */
    static log_book book;
    tessera_log_set(log_keep, &book);
    REQUIRE(capture_start(&cap), "capturing fds 1 and 2");
    char text2[256] = "";
    gen_rc = generate(model.s, device, 8, text2, sizeof text2, why, sizeof why);
    tessera_log_set(NULL, NULL);
    state_take(&after);
    written = capture_stop(&cap);
    EXPECT(gen_rc == 0, "generating with a log callback: %s", why);
    EXPECT_STR(text2, text, "the same text with a log callback");
    EXPECT_STR(written, "", "written to stdout and stderr with a log callback");
    free(written);
    state_diff(&before, &after, diff, sizeof diff);
    EXPECT_STR(diff, "", "the process after a generation, with a log callback");
    EXPECT(book.warnings >= 1, "a warning logged (%d lines)", book.lines);
    EXPECT_HAS(book.text, "ignored: no GPU device among the chosen devices", "the -ngl warning");
    EXPECT_HAS(book.text, "tessera: context n_ctx 256", "the verbose summary");
    EXPECT_HAS(book.text, "tessera: placement of the prompt graph", "explain");
    EXPECT(book.not_one_line == 0, "%d of %d calls of the log callback did not get one line ending in '\\n'",
           book.not_one_line, book.lines);
    printf("the log callback got %d lines, %zu bytes\n", book.lines, book.len);

    /* 3. Crash isolation when asked for, and the application's handlers
     * back when it is turned off again. */
    REQUIRE(capture_start(&cap), "capturing fds 1 and 2");
    int on_rc = tessera_set_crash_guard(true);
    process_state guarded;
    state_take(&guarded);
    int off_rc = tessera_set_crash_guard(false);
    tessera_shutdown();
    state_take(&after);
    written = capture_stop(&cap);
    EXPECT(on_rc == 0 && off_rc == 0, "tessera_set_crash_guard: %s", tessera_last_error());
    for (int k = 0; k < N_WATCHED; k++) {
        bool same = (guarded.act[k].sa_flags & SA_SIGINFO) == (before.act[k].sa_flags & SA_SIGINFO) &&
                    guarded.act[k].sa_handler == before.act[k].sa_handler;
        EXPECT(!same, "the crash guard handles %s when enabled", strsignal(watched[k]));
    }
    state_diff(&before, &after, diff, sizeof diff);
    EXPECT_STR(diff, "", "the process after the crash guard on and off, and shutdown");
    EXPECT_STR(written, "", "written to stdout and stderr by the crash guard and shutdown");
    free(written);

    /* the harness's own state back */
    setlocale(LC_ALL, harness_locale);
    pthread_sigmask(SIG_SETMASK, &harness_mask, NULL);
    for (int k = 0; k < N_WATCHED; k++) sigaction(watched[k], &harness_act[k], NULL);
}

HARNESS_MAIN("guest", HARNESS_TEST(test_guest))
