/*
 * quant_override — llama-quantize's per-tensor overrides: --tensor-type
 * PATTERN=TYPE entries, and the type names of --output-tensor-type and
 * --token-embedding-type. How they combine with the mixtures is in
 * quant_model.c's plan_tensors (and docs/quantize.md, "Per-tensor
 * overrides"); this file only parses and matches.
 *
 * PATTERN is a regular expression searched anywhere in the tensor name.
 * llama-quantize lower-cases the whole pattern first (so "ATTN_V" matches
 * attn_v, and "\W" becomes "\w"); we do the same, then compile it as a
 * POSIX extended expression with "\d" spelled [0-9] (glibc's ERE knows \w
 * and \s but not \d).
 */
#include <ctype.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "tensor/dtype.h"
#include "util/error.h"

struct quant_override {
    regex_t re;
    int32_t dtype;
    const char *spec;
};

int32_t quant_override_type(const char *flag, const char *value, const char *name) {
    if (!name || !*name)
        return error_set("%s '%s': no type given (a tensor type such as q8_0, q6_k or f16)", flag, value);
    int32_t d = dtype_from_name(name);
    if (d < 0 || !dtype_is_known(d))
        return error_set("%s '%s': unknown type '%s' (a tensor type such as q4_0, q8_0, q4_k, q6_k, "
                         "iq4_xs, f16, bf16 or f32; mixture names such as Q4_K_M are not tensor types)",
                         flag, value, name);
    return d;
}

/* The pattern lower-cased, with \d as [0-9]; NULL when out of memory. */
static char *pattern_prepare(const char *p, size_t len) {
    char *out = malloc(len * 5 + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = (char)tolower((unsigned char)p[i]);
        if (c == '\\' && i + 1 < len) {
            char n = (char)tolower((unsigned char)p[i + 1]);
            if (n == 'd') {
                memcpy(out + o, "[0-9]", 5);
                o += 5;
            } else {
                out[o++] = c;
                out[o++] = n;
            }
            i++;
            continue;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

void quant_overrides_free(quant_override *ov, int n) {
    if (!ov) return;
    for (int i = 0; i < n; i++) regfree(&ov[i].re);
    free(ov);
}

int quant_overrides_parse(const char *const *specs, int n, quant_override **out) {
    *out = NULL;
    if (n <= 0) return 0;
    if (!specs) return error_set("--tensor-type: %d entries announced, none given", n);
    quant_override *ov = calloc((size_t)n, sizeof *ov);
    if (!ov) return error_set("--tensor-type: out of memory");
    int done = 0, rc = -1;
    for (; done < n; done++) {
        const char *spec = specs[done];
        const char *eq = spec ? strrchr(spec, '=') : NULL;
        if (!eq) {
            error_set("--tensor-type '%s': expected PATTERN=TYPE (e.g. attn_v=q8_0)", spec ? spec : "(null)");
            goto out;
        }
        if (eq == spec) {
            error_set("--tensor-type '%s': no tensor name or pattern before '='", spec);
            goto out;
        }
        int32_t d = quant_override_type("--tensor-type", spec, eq + 1);
        if (d < 0) goto out;
        char *pat = pattern_prepare(spec, (size_t)(eq - spec));
        if (!pat) {
            error_set("--tensor-type: out of memory");
            goto out;
        }
        int err = regcomp(&ov[done].re, pat, REG_EXTENDED | REG_NOSUB);
        free(pat);
        if (err != 0) {
            char why[128];
            regerror(err, &ov[done].re, why, sizeof why);
            error_set("--tensor-type '%s': bad pattern '%.*s': %s", spec, (int)(eq - spec), spec, why);
            goto out;
        }
        ov[done].dtype = d;
        ov[done].spec = spec;
    }
    rc = 0;
out:
    if (rc != 0) {
        quant_overrides_free(ov, done);
        return -1;
    }
    *out = ov;
    return 0;
}

int32_t quant_overrides_match(const quant_override *ov, int n, const char *name, const char **spec) {
    for (int i = 0; i < n; i++) {
        if (regexec(&ov[i].re, name, 0, NULL, 0) == 0) {
            if (spec) *spec = ov[i].spec;
            return ov[i].dtype;
        }
    }
    return -1;
}
