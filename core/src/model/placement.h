/*
 * placement — where a weight lives when its name says so, before the -ngl
 * rule (model_weight_device) decides the rest: llama.cpp's
 * -ot/--override-tensor PATTERN=DEVICE rules and --cpu-moe/--n-cpu-moe.
 *
 * One statement of the rule for both its readers: model loading (which
 * uploads by it) and the memory fit (which counts by it, from the header
 * alone).
 *
 *   - Rules are tried in order; the first whose PATTERN (a PCRE2 regular
 *     expression, searched anywhere in the tensor name, as llama.cpp's
 *     std::regex_search) matches decides. DEVICE is "CPU" (llama.cpp's
 *     name for host memory; any CPU device's name too) or the model's GPU
 *     device (case-insensitive: "Vulkan0" is vulkan0).
 *   - Then n_cpu_moe: the experts (ffn_{up,down,gate,gate_up}_exps, weights and
 *     biases) of blocks 0..n_cpu_moe-1 stay in host memory, the router and
 *     any shared expert going with their layer (llama.cpp's --n-cpu-moe
 *     patterns; --cpu-moe is every block).
 */
#ifndef TESSERA_MODEL_PLACEMENT_H
#define TESSERA_MODEL_PLACEMENT_H

#include <stdint.h>

#include "host/host.h"

enum {
    MODEL_PLACE_RULE = -2, /* no override: the -ngl rule */
    MODEL_PLACE_HOST = -1, /* host memory (the mapping) */
    /* >= 0: that host device index (the model's GPU) */
};

typedef struct model_place_rule {
    void *re;       /* pcre2_code */
    int32_t device; /* MODEL_PLACE_HOST or a host device index */
    char text[128]; /* "PATTERN=DEVICE" as given, for messages */
} model_place_rule;

typedef struct model_placement {
    model_place_rule *rules;
    int32_t n_rules;
    int32_t n_cpu_moe;
} model_placement;

/* Compile overrides (a NULL-terminated list of "PATTERN=DEVICE", may be
 * NULL) against the chosen devices: gpu the one that takes offloaded
 * weights (NULL: none), devices the rest. -1 with an error naming the rule
 * (a pattern that does not compile, with the offset; a device that is not
 * one of them, listing them). */
int model_placement_init(model_placement *pl, const char *const *overrides, int32_t n_cpu_moe,
                         host_device *const *devices, int32_t n_devices, const host_device *gpu);
void model_placement_free(model_placement *pl);

/* Where tensor `name` goes by name alone: MODEL_PLACE_RULE, MODEL_PLACE_HOST
 * or a host device index. */
int32_t model_placement_of(const model_placement *pl, const char *name);

/* Whether the rules or n_cpu_moe place anything at all. */
static inline int model_placement_any(const model_placement *pl) {
    return pl && (pl->n_rules > 0 || pl->n_cpu_moe > 0);
}

#endif
