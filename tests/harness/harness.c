/*
 * harness.c — expectations, skips, the runner and the file fixtures of
 * harness.h. The counters below are the one process-wide state a test
 * program has (one test runs at a time).
 */
#include "harness.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_failures;       /* EXPECTs failed in this process */
static int g_test_failures;  /* ... in the running test        */
static int g_skipped;        /* tests (or fixtures) that skipped */
static bool g_in_test;
static int g_argc;
static char **g_argv;

static void harness_vprint_(const char *fmt, va_list ap) {
    if (fmt && fmt[0]) {
        printf(": ");
        vprintf(fmt, ap);
    }
    printf("\n");
    fflush(stdout);
}

static void count_failure(void) {
    g_failures++;
    g_test_failures++;
}

/* The rest of a FAIL line: ": <the caller's printf message>". */
#define PRINT_MESSAGE(fmt)              \
    do {                                \
        va_list ap_;                    \
        va_start(ap_, fmt);             \
        harness_vprint_(fmt, ap_);      \
        va_end(ap_);                    \
    } while (0)

int harness_expect_(int ok, const char *expr, const char *file, int line, const char *fmt, ...) {
    if (ok) return 1;
    count_failure();
    printf("FAIL %s:%d: %s", file, line, expr);
    PRINT_MESSAGE(fmt);
    return 0;
}

int harness_expect_near_(double got, double want, double tol, const char *expr, const char *file, int line,
                         const char *fmt, ...) {
    if (fabs(got - want) <= tol) return 1; /* false for a NaN on either side */
    count_failure();
    printf("FAIL %s:%d: %s = %.9g, want %.9g within %.3g (off by %.3g)", file, line, expr, got, want, tol,
           fabs(got - want));
    PRINT_MESSAGE(fmt);
    return 0;
}

int harness_expect_bytes_(const void *got, const void *want, size_t n, const char *expr, const char *file,
                          int line, const char *fmt, ...) {
    const unsigned char *g = got, *w = want;
    size_t i = 0;
    if (g && w)
        while (i < n && g[i] == w[i]) i++;
    if (g && w && i == n) return 1;
    count_failure();
    if (!g || !w)
        printf("FAIL %s:%d: %s: %s is NULL", file, line, expr, g ? "want" : "got");
    else
        printf("FAIL %s:%d: %s: byte %zu of %zu is 0x%02x, want 0x%02x", file, line, expr, i, n, g[i], w[i]);
    PRINT_MESSAGE(fmt);
    return 0;
}

int harness_expect_str_(const char *got, const char *want, int contains, const char *expr, const char *file,
                        int line, const char *fmt, ...) {
    bool ok = contains ? (got && want && strstr(got, want))
                       : (got == want || (got && want && !strcmp(got, want)));
    if (ok) return 1;
    count_failure();
    printf("FAIL %s:%d: %s is \"%s\", %s \"%s\"", file, line, expr, got ? got : "(null)",
           contains ? "which lacks" : "want", want ? want : "(null)");
    PRINT_MESSAGE(fmt);
    return 0;
}

int harness_expect_error_(int failed, const char *msg, const char *needle, const char *file, int line,
                          const char *fmt, ...) {
    const char *why = !failed                           ? "succeeded"
                      : !msg || !msg[0]                 ? "failed without a message"
                      : needle && !strstr(msg, needle)  ? "message lacks the needle"
                      : strchr(msg, '\n')               ? "message is not one line"
                                                        : NULL;
    va_list ap;
    va_start(ap, fmt);
    if (why) {
        count_failure();
        printf("FAIL %s:%d: %s (needle '%s', message '%s'): ", file, line, why, needle ? needle : "", msg ? msg : "");
    } else {
        printf("ok   ");
    }
    vprintf(fmt, ap);
    va_end(ap);
    printf(why ? "\n" : " -> %s\n", msg);
    fflush(stdout);
    return why == NULL;
}

int harness_failures(void) {
    return g_failures;
}

void harness_skip(const char *fmt, ...) {
    printf("SKIP: ");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    g_skipped++;
    if (!g_in_test) exit(77);
    skip();
}

int harness_setup_(void **state) {
    (void)state;
    g_test_failures = 0;
    g_in_test = true;
    return 0;
}

int harness_teardown_(void **state) {
    (void)state;
    g_in_test = false;
    if (g_test_failures) {
        printf("%d expectation(s) failed\n", g_test_failures);
        fflush(stdout);
        return -1; /* cmocka counts the test as failed */
    }
    return 0;
}

int harness_run(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                CMFixtureFunction teardown, int argc, char **argv) {
    g_argc = argc;
    g_argv = argv;
    fflush(stdout); /* what the test printed before, ahead of cmocka's lines */
    int failed = _cmocka_run_group_tests(name, tests, n, setup, teardown);
    if (failed || g_failures) return 1;
    return g_skipped ? 77 : 0;
}

const char *harness_arg(int i) {
    return i >= 0 && i < g_argc ? g_argv[i] : NULL;
}

int harness_argc(void) {
    return g_argc;
}

/* ---- files ---- */

static harness_path path_join(const char *dir, const char *rel) {
    harness_path p;
    int w = snprintf(p.s, sizeof p.s, "%s/%s", dir, rel);
    if (w < 0 || (size_t)w >= sizeof p.s) {
        printf("path too long: %s/%s\n", dir, rel);
        exit(1);
    }
    return p;
}

bool harness_file_exists(const char *path) {
    return access(path, R_OK) == 0;
}

void harness_require_file(const char *path) {
    if (!harness_file_exists(path)) harness_skip("missing reference file %s (%s)", path, strerror(errno));
}

const char *harness_tessera_bin(void) {
    const char *bin = getenv("TESSERA_BIN");
    if (!bin || !bin[0]) harness_skip("TESSERA_BIN is not set (tests/meson.build sets it)");
    harness_require_file(bin);
    return bin;
}

const char *harness_shared_dir(void) {
    const char *dir = getenv("TESSERA_SHARED");
    struct stat st;
    if (!dir || !dir[0]) harness_skip("TESSERA_SHARED is not set (tests/meson.build sets it)");
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) harness_skip("shared directory %s is missing", dir);
    return dir;
}

harness_path harness_file(const char *path) {
    harness_path p;
    int w = snprintf(p.s, sizeof p.s, "%s", path);
    if (w < 0 || (size_t)w >= sizeof p.s) harness_skip("path too long: %s", path);
    harness_require_file(p.s);
    return p;
}

harness_path harness_shared_path(const char *rel) {
    harness_path p = path_join(harness_shared_dir(), rel);
    /* ../shared lacks the files added to tests/data since it was made (the
     * IQ and ternary synth models and their goldens): take the repository's
     * copy then, so the GPU goldens that only the default setup runs check them */
    const char *data = getenv("TESSERA_TEST_DATA");
    if (!harness_file_exists(p.s) && data && data[0]) {
        harness_path own = path_join(data, rel);
        if (harness_file_exists(own.s)) return own;
    }
    return p;
}

harness_path harness_shared_file(const char *rel) {
    harness_path p = harness_shared_path(rel);
    harness_require_file(p.s);
    return p;
}

harness_path harness_source_file(const char *rel) {
    const char *src = getenv("TESSERA_SOURCE_ROOT");
    harness_path p = path_join(src && src[0] ? src : ".", rel);
    harness_require_file(p.s);
    return p;
}

harness_path harness_model_file(const char *name) {
    size_t len = strlen(name);
    harness_path p;
    if (strchr(name, '/'))
        return harness_file(name);
    if (len > 5 && !strcmp(name + len - 5, ".gguf")) {
        const char *cache = getenv("TESSERA_MODEL_CACHE"), *home = getenv("HOME"), *shared = getenv("TESSERA_SHARED");
        harness_path in_shared = path_join(shared && shared[0] ? shared : "/nonexistent", "models");
        in_shared = path_join(in_shared.s, name);
        if (shared && shared[0] && harness_file_exists(in_shared.s))
            p = in_shared;
        else if (cache && cache[0])
            p = path_join(cache, name);
        else {
            harness_path dir = path_join(home ? home : ".", ".cache/tessera/models");
            p = path_join(dir.s, name);
        }
    } else {
        char rel[512];
        snprintf(rel, sizeof rel, "models/%s.gguf", name);
        p = harness_shared_path(rel);
    }
    harness_require_file(p.s);
    return p;
}

harness_path harness_golden_file(const char *name) {
    char rel[512];
    snprintf(rel, sizeof rel, "golden/%s.jsonl", name);
    return harness_shared_file(rel);
}

char *harness_read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    fclose(fp);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

const char *harness_tmpdir(void) {
    static char dir[512]; /* made once per process */
    if (dir[0]) return dir;
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tessera-test-XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(dir)) {
        printf("mkdtemp %s: %s\n", dir, strerror(errno));
        exit(1);
    }
    return dir;
}
