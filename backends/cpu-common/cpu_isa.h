/*
 * cpu_isa — what an ISA folder (cpu-avx, cpu-neon) hands the shared CPU
 * plugin core (cpu_plugin.c): its names, its feature detection and its
 * kernel levels. Each ISA folder defines exactly one `cpu_isa_this`; the
 * rest of the plugin (ABI tables, buffers, queues, the node loop, level
 * choice) is written once.
 */
#ifndef TESSERA_CPU_COMMON_CPU_ISA_H
#define TESSERA_CPU_COMMON_CPU_ISA_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"

/* One kernel table the plugin can run, named as the level variable names
 * it. Several entries may share a name (the first usable one wins: e.g.
 * avx512 with VNNI, else without). */
typedef struct cpu_level {
    const char *name;                 /* a value of level_env, e.g. "avx2" */
    unsigned needs;                   /* the ISA's feature bits it needs */
    void (*init)(cpu_kernels *k);     /* fills the table (kernels_*.c) */
} cpu_level;

typedef struct cpu_isa {
    const char *plugin_name;  /* "cpu-avx": its one device is plugin_name + "0" */
    const char *level_env;    /* e.g. "TESSERA_AVX_LEVEL": lowers the level */
    const char *threads_env;  /* e.g. "TESSERA_AVX_FORCE_THREADS"=1: every
                               * thread even for tiny node lists (tests) */
    /* Best first. With no level_env the first usable entry runs; a name
     * this CPU cannot run falls back to the first usable entry after the
     * last one of that name. */
    const cpu_level *levels;
    int n_levels;
    /* The running CPU's feature bits (as cpu_level.needs counts them); also
     * writes the features string for `tessera devices` and the CPU's name
     * for the device description. */
    unsigned (*detect)(char *features, size_t features_size, char *cpu_name, size_t name_size);
    /* Why no level can run here (features: what detect wrote). */
    void (*why_none)(const char *features, char *reason, size_t reason_size);
    int32_t (*score)(void); /* tsr_plugin.score */
} cpu_isa;

extern const cpu_isa cpu_isa_this;

/* For detect's features string: the names of the int flags (at offsets
 * in a feature struct) that are non-zero, space-separated. */
typedef struct cpu_feature_name {
    size_t off;
    const char *name;
} cpu_feature_name;
void cpu_feature_list(const void *features, const cpu_feature_name *names, int n, char *out, size_t size);

#endif
