/*
 * neon_isa — cpu-neon's part of the CPU plugin core (../cpu-common/cpu_isa.h):
 * the names (plugin cpu-neon, TESSERA_NEON_LEVEL, TESSERA_NEON_FORCE_THREADS),
 * the AT_HWCAP feature bits and the kernel levels, best first. The plugin
 * itself is ../cpu-common/cpu_plugin.c.
 *
 * TESSERA_NEON_LEVEL=neon|dotprod|i8mm lowers the level (never raises it).
 */
#include <stdio.h>
#include <unistd.h>

#include "cpu_features.h"
#include "cpu_isa.h"
#include "kernels.h"

enum { HAS_ASIMD = 1, HAS_DOTPROD = 2, HAS_I8MM = 4 };

static const cpu_level neon_levels[] = {
    {"i8mm", HAS_ASIMD | HAS_DOTPROD | HAS_I8MM, kernels_init_i8mm},
    {"dotprod", HAS_ASIMD | HAS_DOTPROD, kernels_init_dotprod},
    {"neon", HAS_ASIMD, kernels_init_neon},
};

static unsigned neon_detect(char *features, size_t features_size, char *cpu_name, size_t name_size) {
    cpu_features f;
    cpu_features_detect(&f);
    cpu_features_string(&f, features, (unsigned)features_size);
    snprintf(cpu_name, name_size, "aarch64 CPU, %ld cores", sysconf(_SC_NPROCESSORS_ONLN));
    return (f.asimd ? HAS_ASIMD : 0) | (f.asimddp ? HAS_DOTPROD : 0) | (f.i8mm ? HAS_I8MM : 0);
}

static void neon_why_none(const char *features, char *reason, size_t reason_size) {
    (void)features;
    snprintf(reason, reason_size, "cpu-neon: this CPU (or kernel) reports no Advanced SIMD (asimd) in AT_HWCAP");
}

static int32_t neon_score(void) {
    cpu_features f;
    cpu_features_detect(&f);
    return (int32_t)cpu_features_best_level(&f) * 10;
}

const cpu_isa cpu_isa_this = {
    .plugin_name = "cpu-neon",
    .level_env = "TESSERA_NEON_LEVEL",
    .threads_env = "TESSERA_NEON_FORCE_THREADS",
    .levels = neon_levels,
    .n_levels = (int)(sizeof neon_levels / sizeof neon_levels[0]),
    .detect = neon_detect,
    .why_none = neon_why_none,
    .score = neon_score,
};
