/*
 * test_quantize_cli — `tessera quantize` end to end.
 *
 *  - every pure type from synth-s-f32.gguf reproduces the tensors (dtype and
 *    bytes) of llama.cpp's synth-s-<TYPE>.gguf; prints one line per type;
 *  - the default Q4_K_M mixture reproduces synth-s-Q4_K_M-mix.gguf;
 *  - quantized input is refused without --allow-requantize (clear message,
 *    no OUT, an existing OUT untouched) and accepted with it;
 *  - failures (truncated input, unknown type) leave no OUT or temp file;
 *  - SIGINT during a run leaves either the complete OUT or nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "harness.h"
#include "util/error.h"

static const char *bin;
static char workdir[2048];

/* Start `tessera quantize args...` with stderr to errfile; returns the pid. */
static pid_t spawn(const char *errfile, char *const *args) {
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)bin;
    argv[n++] = "quantize";
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
        }
        execv(bin, argv);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) < 0) return -1;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + WTERMSIG(st);
}

static int run(const char *errfile, char *const *args) { return wait_status(spawn(errfile, args)); }

/* The start of a small file as a string, in one of two rotating buffers (so
 * two results can be compared). */
static const char *slurp(const char *path) {
    static char bufs[2][16384];
    static int next;
    char *buf = bufs[next++ % 2];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof bufs[0] - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static const char *first_line(const char *s) {
    static char line[512];
    size_t n = strcspn(s, "\n");
    if (n >= sizeof line) n = sizeof line - 1;
    memcpy(line, s, n);
    line[n] = '\0';
    return line;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

/* Files in workdir whose name starts with prefix (temp files of OUT). */
static int count_prefixed(const char *prefix) {
    DIR *d = opendir(workdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

/* Compare every tensor of got with want: same names, dtypes, bytes. Returns
 * the number of mismatching tensors (or -1 if a file cannot be opened). */
static int compare_tensors(const char *got_path, const char *want_path, int *n_tensors) {
    gguf_file *got = gguf_open(got_path), *want = gguf_open(want_path);
    int bad = 0;
    if (!got || !want) {
        printf("     cannot open: %s\n", error_get());
        gguf_close(got);
        gguf_close(want);
        return -1;
    }
    *n_tensors = (int)gguf_tensor_count(want);
    if (gguf_tensor_count(got) != gguf_tensor_count(want)) bad++;
    for (int64_t i = 0; i < gguf_tensor_count(want); i++) {
        const gguf_tensor_info *w = gguf_tensor(want, i);
        const gguf_tensor_info *g = gguf_find_tensor(got, w->name);
        if (!g) {
            printf("     %s: missing\n", w->name);
            bad++;
        } else if (g->dtype != w->dtype) {
            printf("     %s: dtype %s, llama.cpp has %s\n", w->name, dtype_name(g->dtype),
                   dtype_name(w->dtype));
            bad++;
        } else if (g->size != w->size || memcmp(g->data, w->data, w->size) != 0) {
            printf("     %s (%s): bytes differ\n", w->name, dtype_name(w->dtype));
            bad++;
        }
    }
    uint32_t ft_got = 0, ft_want = 1;
    if (gguf_get_u32(got, "general.file_type", &ft_got) != 0 ||
        gguf_get_u32(want, "general.file_type", &ft_want) != 0 || ft_got != ft_want) {
        printf("     general.file_type %u, llama.cpp has %u\n", ft_got, ft_want);
        bad++;
    }
    gguf_close(got);
    gguf_close(want);
    return bad;
}

static int files_identical(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = 0;
    if (fa && fb) {
        same = 1;
        int ca, cb;
        do {
            ca = getc(fa);
            cb = getc(fb);
            if (ca != cb) same = 0;
        } while (same && ca != EOF);
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

TEST(test_quantize_cli) {
    bin = harness_tessera_bin();
    char src[4096], path[4096], want[4096], err[4096];
    snprintf(src, sizeof src, "%s", harness_model_file("synth-s-f32").s);
    const char *tmp = getenv("TMPDIR");
    snprintf(workdir, sizeof workdir, "%s/tessera-quantize-XXXXXX", tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(workdir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(err, sizeof err, "%s/stderr.txt", workdir);

    /* --help and argument errors */
    EXPECT(run(err, (char *[]){"--help", NULL}) == 0 && strstr(slurp(err), "--allow-requantize"),
           "--help exits 0 and lists the options");
    snprintf(path, sizeof path, "%s/bad-type.gguf", workdir);
    EXPECT(run(err, (char *[]){src, path, "Q9_Z", NULL}) == 2 && strstr(slurp(err), "Q9_Z") &&
              !exists(path),
           "unknown TYPE is refused by name, no OUT");

    /* 1. pure types: byte-exact with llama.cpp */
    static const struct { const char *type, *file; } pure[] = {
        {"F16", "F16"}, {"BF16", "BF16"}, {"Q4_0", "Q4_0"}, {"Q4_1", "Q4_1"},
        {"Q5_0", "Q5_0"}, {"Q5_1", "Q5_1"}, {"Q8_0", "Q8_0"}, {"Q2_K", "Q2_K"},
        {"Q3_K_S", "Q3_K_S"}, {"Q4_K_S", "Q4_K_S"}, {"Q5_K_S", "Q5_K_S"}, {"Q6_K", "Q6_K"},
    };
    for (size_t i = 0; i < sizeof pure / sizeof pure[0]; i++) {
        snprintf(path, sizeof path, "%s/pure-%s.gguf", workdir, pure[i].type);
        char name[64];
        snprintf(name, sizeof name, "synth-s-%s", pure[i].file);
        snprintf(want, sizeof want, "%s", harness_model_file(name).s);
        int rc = run(err, (char *[]){"--pure", "-q", "-t", "2", src, path, (char *)pure[i].type, NULL});
        int n = 0, bad = rc == 0 ? compare_tensors(path, want, &n) : -1;
        EXPECT(rc == 0 && bad == 0, "pure %-6s vs synth-s-%s.gguf: %d tensors, %d differ%s", pure[i].type,
               pure[i].file, n, bad, rc == 0 && files_identical(path, want) ? " (whole file identical)" : "");
        if (rc != 0) printf("     exit %d: %s", rc, slurp(err));
        unlink(path);
    }

    /* 2. the Q4_K_M mixture */
    snprintf(path, sizeof path, "%s/mix.gguf", workdir);
    snprintf(want, sizeof want, "%s", harness_model_file("synth-s-Q4_K_M-mix").s);
    {
        int rc = run(err, (char *[]){"-t", "2", src, path, "Q4_K_M", NULL});
        int n = 0, bad = rc == 0 ? compare_tensors(path, want, &n) : -1;
        EXPECT(rc == 0 && bad == 0, "mixture Q4_K_M vs synth-s-Q4_K_M-mix.gguf: %d tensors, %d differ "
               "(types and bytes)", n, bad);
        EXPECT(strstr(slurp(err), "blk.0.attn_q.weight") != NULL, "progress lines name each tensor");
        unlink(path);
    }

    /* 3. quantized input: refused without the flag, accepted with it */
    char q8[4096];
    snprintf(q8, sizeof q8, "%s", harness_model_file("synth-s-Q8_0").s);
    snprintf(path, sizeof path, "%s/requant.gguf", workdir);
    {
        FILE *f = fopen(path, "w");
        if (f) {
            fputs("previous contents", f);
            fclose(f);
        }
        int rc = run(err, (char *[]){"-q", q8, path, "Q4_0", NULL});
        const char *msg = slurp(err);
        const char *old = slurp(path);
        EXPECT(rc != 0 && strstr(msg, "--allow-requantize") && strstr(msg, "Q8_0"),
               "quantized input refused without --allow-requantize: %s", first_line(msg));
        EXPECT(!strcmp(old, "previous contents"), "an existing OUT is left untouched on failure");
        EXPECT(count_prefixed("requant.gguf.tmp") == 0, "no temporary file left after the refusal");
        unlink(path);
        rc = run(err, (char *[]){"-q", "--allow-requantize", q8, path, "Q4_0", NULL});
        gguf_file *g = rc == 0 ? gguf_open(path) : NULL;
        const gguf_tensor_info *t = g ? gguf_find_tensor(g, "blk.0.attn_q.weight") : NULL;
        EXPECT(rc == 0 && t && t->dtype == TSR_DTYPE_Q4_0,
               "--allow-requantize converts Q8_0 input to Q4_0");
        gguf_close(g);
        unlink(path);
    }

    /* 4. failure leaves nothing behind: truncated input */
    {
        char trunc[4096];
        snprintf(trunc, sizeof trunc, "%s/truncated.gguf", workdir);
        FILE *in = fopen(src, "rb"), *out = fopen(trunc, "wb");
        char buf[100000];
        size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
        if (out) fwrite(buf, 1, n, out);
        if (in) fclose(in);
        if (out) fclose(out);
        snprintf(path, sizeof path, "%s/from-truncated.gguf", workdir);
        int rc = run(err, (char *[]){"-q", trunc, path, "Q4_0", NULL});
        EXPECT(rc != 0 && !exists(path) && count_prefixed("from-truncated.gguf") == 0,
               "truncated input fails (%s) and leaves no OUT or temp file", first_line(slurp(err)));
        unlink(trunc);
    }

    /* 5. SIGINT: either finished completely or nothing at OUT */
    {
        snprintf(path, sizeof path, "%s/interrupted.gguf", workdir);
        pid_t pid = spawn(err, (char *[]){"-t", "1", src, path, "Q2_K", NULL});
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
        kill(pid, SIGINT);
        int rc = wait_status(pid);
        if (rc == 130)
            EXPECT(!exists(path) && count_prefixed("interrupted.gguf") == 0,
                   "SIGINT mid-run: exit 130, no OUT and no temp file");
        else
            EXPECT(rc == 0 && exists(path) && count_prefixed("interrupted.gguf") == 1,
                   "SIGINT arrived after the run finished (exit %d): OUT complete", rc);
        unlink(path);
    }

    unlink(err);
    if (rmdir(workdir) != 0) printf("note: %s not empty\n", workdir);
}

HARNESS_MAIN("quantize CLI", HARNESS_TEST(test_quantize_cli))
