/* Weights placed by name: -ot rules and --n-cpu-moe (see placement.h). */
#include "model/placement.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"

/* DEVICE of a rule: "CPU" or a chosen CPU device is host memory, the GPU
 * its index; anything else is an error listing what it may be. */
static int rule_device(const char *dev, const char *rule, host_device *const *devices, int32_t n_devices,
                       const host_device *gpu, int32_t *out) {
    if (!strcasecmp(dev, "CPU")) {
        *out = MODEL_PLACE_HOST;
        return 0;
    }
    for (int32_t i = 0; i < n_devices; i++) {
        if (strcasecmp(dev, devices[i]->name)) continue;
        if (devices[i]->info.kind == TSR_DEVICE_CPU) {
            *out = MODEL_PLACE_HOST;
            return 0;
        }
        if (devices[i] == gpu) {
            *out = gpu->index;
            return 0;
        }
        return error_set("--override-tensor '%s': %s is not the GPU that holds weights (%s)", rule,
                         devices[i]->name, gpu ? gpu->name : "none");
    }
    char list[256] = "CPU";
    size_t n = strlen(list);
    for (int32_t i = 0; i < n_devices && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, ", %s", devices[i]->name);
    return error_set("--override-tensor '%s': device '%s' is not among the chosen devices (%s)", rule, dev, list);
}

int model_placement_init(model_placement *pl, const char *const *overrides, int32_t n_cpu_moe,
                         host_device *const *devices, int32_t n_devices, const host_device *gpu) {
    memset(pl, 0, sizeof *pl);
    if (n_cpu_moe < 0) return error_set("--n-cpu-moe %d is negative", n_cpu_moe);
    pl->n_cpu_moe = n_cpu_moe;
    int32_t n = 0;
    while (overrides && overrides[n]) n++;
    if (n == 0) return 0;
    pl->rules = calloc((size_t)n, sizeof *pl->rules);
    if (!pl->rules) return error_set("--override-tensor: out of memory");
    for (int32_t i = 0; i < n; i++) {
        const char *rule = overrides[i];
        const char *eq = strrchr(rule, '=');
        if (!eq || eq == rule || !eq[1]) {
            model_placement_free(pl);
            return error_set("--override-tensor '%s': expected PATTERN=DEVICE (e.g. '\\.ffn_.*_exps\\.=CPU')", rule);
        }
        model_place_rule *r = &pl->rules[pl->n_rules];
        snprintf(r->text, sizeof r->text, "%s", rule);
        if (rule_device(eq + 1, r->text, devices, n_devices, gpu, &r->device) != 0) {
            model_placement_free(pl);
            return -1;
        }
        int err;
        PCRE2_SIZE off;
        r->re = pcre2_compile((PCRE2_SPTR)rule, (PCRE2_SIZE)(eq - rule), 0, &err, &off, NULL);
        if (!r->re) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(err, msg, sizeof msg);
            model_placement_free(pl);
            return error_set("--override-tensor '%s': bad pattern at offset %zu: %s", rule, (size_t)off,
                             (const char *)msg);
        }
        pl->n_rules++;
    }
    return 0;
}

void model_placement_free(model_placement *pl) {
    for (int32_t i = 0; i < pl->n_rules; i++) pcre2_code_free(pl->rules[i].re);
    free(pl->rules);
    memset(pl, 0, sizeof *pl);
}

/* An expert tensor of block il: "blk.<il>.ffn_{up,down,gate,gate_up}_exps.*". */
static bool expert_of(const char *name, int32_t *il) {
    int end = 0;
    if (sscanf(name, "blk.%d.%n", il, &end) != 1 || end == 0) return false;
    const char *rest = name + end;
    return !strncmp(rest, "ffn_up_exps.", 12) || !strncmp(rest, "ffn_down_exps.", 14) ||
           !strncmp(rest, "ffn_gate_exps.", 14) || !strncmp(rest, "ffn_gate_up_exps.", 17);
}

int32_t model_placement_of(const model_placement *pl, const char *name) {
    if (!pl) return MODEL_PLACE_RULE;
    for (int32_t i = 0; i < pl->n_rules; i++) {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(pl->rules[i].re, NULL);
        if (!md) continue;
        int rc = pcre2_match(pl->rules[i].re, (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL);
        pcre2_match_data_free(md);
        if (rc >= 0) return pl->rules[i].device;
    }
    int32_t il;
    if (pl->n_cpu_moe > 0 && expert_of(name, &il) && il >= 0 && il < pl->n_cpu_moe) return MODEL_PLACE_HOST;
    return MODEL_PLACE_RULE;
}
