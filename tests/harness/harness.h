/*
 * harness.h — the one way Tessera's C tests say "expect", on cmocka.
 *
 * A test file is a set of cmocka test functions run by HARNESS_MAIN:
 *
 *     #include "harness.h"
 *
 *     TEST(test_add) {
 *         EXPECT(1 + 1 == 2, "one and one");
 *         EXPECT_NEAR(0.1f + 0.2f, 0.3f, 1e-6, "sum");
 *     }
 *
 *     HARNESS_MAIN("arith", HARNESS_TEST(test_add))
 *
 * Two kinds of check:
 *  - EXPECT*: a failure is printed ("FAIL file:line: expr: message") and
 *    counted, and the test goes on (so one run shows every mismatch); the
 *    test function fails when it returns. Each returns whether it held.
 *  - REQUIRE and cmocka's assert_*: a failure ends the test function at
 *    once (use them where what follows would crash on the failure).
 *
 * Exit status (meson's convention): 0 every test passed, 1 one failed, 77
 * (skipped) none failed and at least one skipped. A test skips with
 * harness_skip("why"); every fixture that looks for a file skips, naming
 * it, when the file is absent: a missing reference file is never a
 * failure. Reference files are found through $TESSERA_SHARED only
 * (tests/meson.build sets it).
 *
 * Fixtures: the shared directory and files in it, a model by name, the
 * host with this build's plugins, a model and a context (harness_*).
 *
 * A new test is one line in its area's table in tests/<area>/meson.build,
 * [name, sources, test() options], e.g.
 *     ['vec_dot', ['test_vec_dot.c'], {}],
 * built with harness_dep (tests/harness/meson.build: suite 'unit', 120 s,
 * test_env unless the options say otherwise).
 */
#ifndef TESSERA_TESTS_HARNESS_H
#define TESSERA_TESTS_HARNESS_H

/* cmocka wants these before it */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#if defined(__GNUC__)
#define HARNESS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define HARNESS_PRINTF(f, a)
#endif

/* ---- expectations (non-fatal) ------------------------------------------ */

/* cond holds; else "FAIL file:line: cond: <printf message>". */
#define EXPECT(cond, ...) harness_expect_((cond) != 0, #cond, __FILE__, __LINE__, __VA_ARGS__)

/* |got - want| <= tol (a NaN never is); the message gets both values. */
#define EXPECT_NEAR(got, want, tol, ...) \
    harness_expect_near_((double)(got), (double)(want), (double)(tol), #got, __FILE__, __LINE__, __VA_ARGS__)

/* The n bytes at got equal those at want; the message names the first
 * offset that differs and both bytes there. */
#define EXPECT_BYTES(got, want, n, ...) \
    harness_expect_bytes_((got), (want), (n), #got, __FILE__, __LINE__, __VA_ARGS__)

/* Two strings equal (NULL equals only NULL). */
#define EXPECT_STR(got, want, ...) harness_expect_str_((got), (want), 0, #got, __FILE__, __LINE__, __VA_ARGS__)

/* got (an error message, an output) holds needle; a NULL got never does. */
#define EXPECT_HAS(got, needle, ...) \
    harness_expect_str_((got), (needle), 1, #got, __FILE__, __LINE__, __VA_ARGS__)

/* A call that had to fail did (failed), with a message (msg: e.g.
 * tessera_last_error()) of one line that holds needle (NULL: any). */
#define EXPECT_ERROR(failed, msg, needle, ...) \
    harness_expect_error_((failed) != 0, (msg), (needle), __FILE__, __LINE__, __VA_ARGS__)

/* A failure found by the test's own logic: printed and counted like a
 * failed EXPECT; the test goes on. */
#define ADD_FAILURE(...) harness_expect_(0, "failure", __FILE__, __LINE__, __VA_ARGS__)

/* cond holds; else the failure is printed and the test function ends. */
#define REQUIRE(cond, ...)                                                        \
    do {                                                                          \
        if (!harness_expect_((cond) != 0, #cond, __FILE__, __LINE__, __VA_ARGS__)) \
            fail();                                                               \
    } while (0)

int harness_expect_(int ok, const char *expr, const char *file, int line, const char *fmt, ...)
    HARNESS_PRINTF(5, 6);
int harness_expect_near_(double got, double want, double tol, const char *expr, const char *file, int line,
                         const char *fmt, ...) HARNESS_PRINTF(7, 8);
int harness_expect_bytes_(const void *got, const void *want, size_t n, const char *expr, const char *file,
                          int line, const char *fmt, ...) HARNESS_PRINTF(7, 8);
int harness_expect_str_(const char *got, const char *want, int contains, const char *expr, const char *file,
                        int line, const char *fmt, ...) HARNESS_PRINTF(7, 8);
int harness_expect_error_(int failed, const char *msg, const char *needle, const char *file, int line,
                          const char *fmt, ...) HARNESS_PRINTF(6, 7);

/* How many EXPECTs failed in this process so far (a test that wants to
 * stop after its first mismatch compares before and after). */
int harness_failures(void);

/* ---- skipping ------------------------------------------------------------ */

/* Prints "SKIP: <why>" and ends the current test as skipped (outside a
 * test: exits 77 at once). The process exits 77 unless a test failed. */
void harness_skip(const char *fmt, ...) HARNESS_PRINTF(1, 2);

/* ---- running ------------------------------------------------------------- */

/* Defines a test function that does not use cmocka's state:
 *     TEST(test_add) { EXPECT(1 + 1 == 2, "sum"); }
 * (one that reads *state, e.g. an initial_state, is written out in full).
 * FIXTURE(name) likewise defines a group setup or teardown: it returns 0,
 * or fails through REQUIRE. */
#if defined(__GNUC__)
#define TEST(name) static void name(void **harness_state_ __attribute__((unused)))
#define FIXTURE(name) static int name(void **harness_state_ __attribute__((unused)))
#else
#define TEST(name) static void name(void **harness_state_)
#define FIXTURE(name) static int name(void **harness_state_)
#endif

/* A test function with the harness's bookkeeping around it. */
#define HARNESS_TEST(fn) cmocka_unit_test_setup_teardown(fn, harness_setup_, harness_teardown_)
int harness_setup_(void **state);
int harness_teardown_(void **state);

/* Runs the tests, returns the exit status (0, 1 or 77). argc/argv are kept
 * for harness_arg. setup (may be NULL) runs once before the tests, with
 * harness_arg usable; when it fails (returns non-zero, or a REQUIRE in it)
 * every test fails; teardown (may be NULL) runs once after them. */
int harness_run(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                CMFixtureFunction teardown, int argc, char **argv);
#define HARNESS_RUN(name, tests, argc, argv) \
    harness_run(name, tests, sizeof(tests) / sizeof((tests)[0]), NULL, NULL, argc, argv)
#define HARNESS_RUN_GROUP(name, tests, setup, teardown, argc, argv) \
    harness_run(name, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown, argc, argv)

/* main() that runs the listed HARNESS_TEST(...)s; HARNESS_MAIN_GROUP with
 * a setup and a teardown around them all. */
#define HARNESS_MAIN_GROUP(name, setup, teardown, ...)                                \
    int main(int argc, char **argv) {                                                 \
        const struct CMUnitTest harness_tests_[] = {__VA_ARGS__};                     \
        return HARNESS_RUN_GROUP(name, harness_tests_, setup, teardown, argc, argv);  \
    }

#define HARNESS_MAIN(name, ...)                                           \
    int main(int argc, char **argv) {                                     \
        const struct CMUnitTest harness_tests_[] = {__VA_ARGS__};         \
        return HARNESS_RUN(name, harness_tests_, argc, argv);             \
    }

/* The command line harness_run was given: argument i (0 is the program),
 * or NULL past the end. */
const char *harness_arg(int i);
int harness_argc(void);

/* ---- test data ----------------------------------------------------------- */

/* Uniform in [0, 1) from *state (xorshift64*; state not 0). */
static inline double harness_urand(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (double)((*state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* A standard normal variate from *state (Box-Muller on harness_urand). */
static inline double harness_grand(uint64_t *state) {
    double u = harness_urand(state) + 1e-300, v = harness_urand(state);
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* ---- files ----------------------------------------------------------------- */

/* A path, returned by value (no allocation to free). */
typedef struct harness_path {
    char s[4096];
} harness_path;

/* $TESSERA_SHARED; skips when it is unset or not a directory. */
const char *harness_shared_dir(void);
/* $TESSERA_SHARED/rel, which must exist (else a skip naming it). */
harness_path harness_shared_file(const char *rel);
/* $TESSERA_SHARED/rel whether or not it exists (an optional file: check
 * with harness_file_exists); $TESSERA_TEST_DATA/rel instead when only that
 * exists. Skips only when TESSERA_SHARED is unset. */
harness_path harness_shared_path(const char *rel);
/* $TESSERA_SOURCE_ROOT/rel (files kept in the repository, e.g.
 * tests/data/...), which must exist (else a skip naming it). */
harness_path harness_source_file(const char *rel);
/* A model by name: a name holding '/' is a path; a FILE.gguf is
 * $TESSERA_SHARED/models/FILE.gguf when that exists, else a file of
 * scripts/fetch-models.sh's cache ($TESSERA_MODEL_CACHE, else
 * ~/.cache/tessera/models); any other NAME is $TESSERA_SHARED/models/NAME.gguf.
 * The file must exist (else a skip naming it). */
harness_path harness_model_file(const char *name);
/* The golden of a model: $TESSERA_SHARED/golden/NAME.jsonl (must exist). */
harness_path harness_golden_file(const char *name);
/* The tessera binary of this build ($TESSERA_BIN); skips when it is unset
 * or absent. */
const char *harness_tessera_bin(void);
/* path itself, which must exist (else a skip naming it). */
harness_path harness_file(const char *path);
/* Skips, naming path, unless it can be opened for reading. */
void harness_require_file(const char *path);
bool harness_file_exists(const char *path);
/* The whole file, NUL-terminated, in a malloc'd buffer (free it); NULL when
 * it cannot be read. *len (if not NULL) gets its length. */
char *harness_read_file(const char *path, size_t *len);
/* A fresh directory for this test's outputs (under $TMPDIR or /tmp), made
 * once per process. */
const char *harness_tmpdir(void);

/* ---- Tessera fixtures (harness_tessera.c) --------------------------------- */

#include <tessera/tessera.h>

/* Starts the host with ref and the plugins built in this tree only
 * ($TESSERA_BUILD_ROOT; nothing installed elsewhere) and tessera_init; the
 * test fails when either fails. Stop with tessera_shutdown(). */
void harness_host_start(void);
/* The name of the host's first CPU plugin device (cpu-avx0, cpu-neon0: not
 * ref), or NULL when the build has none. */
const char *harness_cpu_plugin(void);
/* The model at path (harness_model_file) on devices (NULL: the defaults)
 * with the other params from mp (NULL: the defaults); the test fails, with
 * Tessera's error, when it does not load. */
tessera_model *harness_model_load(const char *path, const char *devices, const tessera_model_params *mp);
/* A context on model with params cp (NULL: the defaults); the test fails
 * when it cannot be made. */
tessera_context *harness_context(tessera_model *model, const tessera_context_params *cp);

#endif
