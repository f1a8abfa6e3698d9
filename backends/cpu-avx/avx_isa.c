/*
 * avx_isa — cpu-avx's part of the CPU plugin core (../cpu-common/cpu_isa.h):
 * the names (plugin cpu-avx, TESSERA_AVX_LEVEL, TESSERA_AVX_FORCE_THREADS),
 * the cpuid feature bits and the kernel levels, best first. The plugin
 * itself is ../cpu-common/cpu_plugin.c.
 *
 * TESSERA_AVX_LEVEL=avx2|avxvnni|avx512|avx512-novnni lowers the level
 * (never raises it): avx512 uses VNNI where the CPU has it; avx2 and
 * avx512-novnni leave VNNI out, so the plain kernels are tested on a VNNI
 * machine.
 */
#include <stdio.h>

#include "cpu_features.h"
#include "cpu_isa.h"
#include "kernels.h"

enum { HAS_AVX2 = 1, HAS_AVXVNNI = 2, HAS_AVX512 = 4, HAS_AVX512VNNI = 8 };

static const cpu_level avx_levels[] = {
    {"avx512", HAS_AVX512 | HAS_AVX512VNNI, kernels_init_avx512vnni},
    {"avx512", HAS_AVX512, kernels_init_avx512},
    {"avx512-novnni", HAS_AVX512, kernels_init_avx512},
    {"avxvnni", HAS_AVX2 | HAS_AVXVNNI, kernels_init_avxvnni},
    {"avx2", HAS_AVX2, kernels_init_avx2},
};

static unsigned avx_detect(char *features, size_t features_size, char *cpu_name, size_t name_size) {
    cpu_features f;
    cpu_features_detect(&f);
    cpu_features_string(&f, features, (unsigned)features_size);
    snprintf(cpu_name, name_size, "%s", f.brand[0] ? f.brand : "x86-64 CPU");
    avx_level best = cpu_features_best_level(&f);
    unsigned have = 0;
    if (best >= AVX_LEVEL_AVX2) have |= HAS_AVX2 | (f.avxvnni ? HAS_AVXVNNI : 0);
    if (best >= AVX_LEVEL_AVX512) have |= HAS_AVX512 | (f.avx512vnni ? HAS_AVX512VNNI : 0);
    return have;
}

static void avx_why_none(const char *features, char *reason, size_t reason_size) {
    snprintf(reason, reason_size, "cpu-avx: this CPU (or OS) lacks AVX2+FMA+F16C (has: %s)",
             features[0] ? features : "none of them");
}

static int32_t avx_score(void) {
    cpu_features f;
    cpu_features_detect(&f);
    return (int32_t)cpu_features_best_level(&f) * 10;
}

const cpu_isa cpu_isa_this = {
    .plugin_name = "cpu-avx",
    .level_env = "TESSERA_AVX_LEVEL",
    .threads_env = "TESSERA_AVX_FORCE_THREADS",
    .levels = avx_levels,
    .n_levels = (int)(sizeof avx_levels / sizeof avx_levels[0]),
    .detect = avx_detect,
    .why_none = avx_why_none,
    .score = avx_score,
};
