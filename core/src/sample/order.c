/* order — the names of the sampler steps, as llama.cpp spells them in
 * --samplers, the server's "samplers" field and --sampling-seq. */
#include <string.h>

#include "sample/sample.h"
#include "util/error.h"

/* One row per step: the name llama.cpp writes, its --sampling-seq letter,
 * and the other spellings it accepts. */
static const struct {
    sample_step step;
    const char *name;
    char letter;
    const char *alias[5];
} steps[] = {
    {SAMPLE_STEP_PENALTIES, "penalties", 'e', {NULL}},
    {SAMPLE_STEP_DRY, "dry", 'd', {NULL}},
    {SAMPLE_STEP_TOP_N_SIGMA, "top_n_sigma", 's', {"top-n-sigma", NULL}},
    {SAMPLE_STEP_TOP_K, "top_k", 'k', {"top-k", NULL}},
    {SAMPLE_STEP_TYPICAL, "typ_p", 'y', {"typ-p", "typical_p", "typical-p", "typical", NULL}},
    {SAMPLE_STEP_TOP_P, "top_p", 'p', {"top-p", "nucleus", NULL}},
    {SAMPLE_STEP_MIN_P, "min_p", 'm', {"min-p", NULL}},
    {SAMPLE_STEP_XTC, "xtc", 'x', {NULL}},
    {SAMPLE_STEP_TEMPERATURE, "temperature", 't', {"temp", NULL}},
};
enum { N_STEPS = sizeof steps / sizeof *steps };

const char *sample_step_name(sample_step s) {
    for (int i = 0; i < N_STEPS; i++)
        if (steps[i].step == s) return steps[i].name;
    return "?";
}

int sample_order_default(sample_step *out) {
    for (int i = 0; i < N_STEPS; i++) out[i] = steps[i].step;
    return N_STEPS;
}

static int find_name(const char *s, size_t len) {
    for (int i = 0; i < N_STEPS; i++) {
        if (strlen(steps[i].name) == len && !memcmp(steps[i].name, s, len)) return i;
        for (int a = 0; steps[i].alias[a]; a++)
            if (strlen(steps[i].alias[a]) == len && !memcmp(steps[i].alias[a], s, len)) return i;
    }
    return -1;
}

int sample_order_parse(const char *text, bool letters, sample_step *out, int cap) {
    if (!text) return sample_order_default(out);
    int n = 0;
    if (letters) {
        for (const char *p = text; *p; p++) {
            int k = -1;
            for (int i = 0; i < N_STEPS && k < 0; i++)
                if (steps[i].letter == *p) k = i;
            if (k < 0)
                return error_set("sampler: '%c' in the sampler sequence '%s' is no sampler (letters: edskypmxt)", *p,
                                 text);
            if (n == cap) return error_set("sampler: more than %d samplers in '%s'", cap, text);
            out[n++] = steps[k].step;
        }
        return n;
    }
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ";,");
        if (len > 0) {
            int k = find_name(p, len);
            if (k < 0)
                return error_set("sampler: '%.*s' is no sampler (names: penalties, dry, top_n_sigma, top_k, typ_p, "
                                 "top_p, min_p, xtc, temperature)",
                                 (int)len, p);
            if (n == cap) return error_set("sampler: more than %d samplers in '%s'", cap, text);
            out[n++] = steps[k].step;
        }
        p += len;
        if (*p) p++;
    }
    return n;
}
