/*
 * model_test.h — what the tests in tests/model share: where a model named
 * on the command line is, the build's CPU plugin device, and the CHECK
 * macro of the tests that count failures themselves.
 *
 * Header-only; include it as "model_test.h" (tests/model is on the include
 * path of the tests that use golden.h too).
 */
#ifndef TESSERA_TESTS_MODEL_TEST_H
#define TESSERA_TESTS_MODEL_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

/* The model NAME: NAME itself when it holds a '/' (a path), else NAME in
 * the cache of scripts/fetch-models.sh: $TESSERA_MODEL_CACHE when it is set
 * and not empty, else ~/.cache/tessera/models. */
static inline void model_cache_path(char *out, size_t size, const char *name) {
    const char *cache = getenv("TESSERA_MODEL_CACHE"), *home = getenv("HOME");
    if (strchr(name, '/'))
        snprintf(out, size, "%s", name);
    else if (cache && cache[0])
        snprintf(out, size, "%s/%s", cache, name);
    else
        snprintf(out, size, "%s/.cache/tessera/models/%s", home ? home : ".", name);
}

/* The name of the first CPU plugin device the host found (cpu-avx0 or
 * cpu-neon0: not ref), or NULL. */
static inline const char *model_test_cpu_plugin(void) {
    for (int32_t i = 0; i < host_device_count(); i++) {
        const host_device *hd = host_device_get(i);
        if (hd != host_device_ref() && hd->info.kind == TSR_DEVICE_CPU) return hd->name;
    }
    return NULL;
}

/* A failed check: "FAIL file:line: message", counted in the including
 * file's own `static int failures`; the test goes on. */
#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
            failures++;                                 \
        }                                               \
    } while (0)

#endif
