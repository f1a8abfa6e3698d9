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

#include <tessera/tessera.h>

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

/* The model at path loaded again on the build's first CPU plugin device
 * (model_test_cpu_plugin) with the caller's params otherwise: 0 with *out
 * set, or with *out NULL and skip saying why when the build has none; -1
 * (printed) when the load fails. */
static inline int model_test_load_on_cpu_plugin(const char *path, tessera_model_params mp, tessera_model **out,
                                                char *skip, size_t skip_size) {
    *out = NULL;
    const char *cpu = model_test_cpu_plugin(), *build = getenv("TESSERA_BUILD_ROOT");
    if (!cpu) {
        snprintf(skip, skip_size, "no CPU plugin device in %s", build ? build : "(no TESSERA_BUILD_ROOT)");
        return 0;
    }
    mp.devices = cpu;
    *out = tessera_model_load(path, &mp);
    if (!*out) {
        printf("%s on %s: %s\n", path, cpu, tessera_last_error());
        return -1;
    }
    return 0;
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
