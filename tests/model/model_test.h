/*
 * model_test.h — what the tests in tests/model share besides harness.h: a
 * model on ref (or given devices) and again on the build's CPU plugin.
 *
 * Header-only; include it as "model_test.h" (tests/model is on the include
 * path of the tests that use golden.h too).
 */
#ifndef TESSERA_TESTS_MODEL_TEST_H
#define TESSERA_TESTS_MODEL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"

/* Starts the host (harness_host_start) and loads the model at path on
 * devices; with cpu not NULL also on the build's first CPU plugin device
 * (*cpu NULL when the build has none: model_test_need_cpu skips then). A
 * model that does not load fails the test. */
static inline tessera_model *model_test_open(const char *path, const char *devices, tessera_model **cpu) {
    harness_require_file(path);
    harness_host_start();
    tessera_model *m = harness_model_load(path, devices, NULL);
    if (cpu) {
        const char *dev = harness_cpu_plugin();
        *cpu = dev ? harness_model_load(path, dev, NULL) : NULL;
    }
    return m;
}

/* Frees what model_test_open made (cpu may be NULL) and stops Tessera. */
static inline void model_test_close(tessera_model *m, tessera_model *cpu) {
    tessera_model_free(cpu);
    tessera_model_free(m);
    tessera_shutdown();
}

/* Skips the test, saying why, when the build has no CPU plugin device. */
static inline void model_test_need_cpu(const tessera_model *cpu) {
    const char *build = getenv("TESSERA_BUILD_ROOT");
    if (!cpu) harness_skip("no CPU plugin device in %s", build ? build : "(no TESSERA_BUILD_ROOT)");
}

#endif
