/* Fuzz target: the Jinja engine on hostile chat templates. The input is a
 * template, optionally followed by a NUL byte and the variables as JSON
 * (default: a short conversation). Parsing and rendering must end with a
 * result or an error message within the limits, never a sanitizer report;
 * the limits here are tighter than the defaults so each run stays short. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char default_vars[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Hi \\u00e9\"}, {\"role\": \"assistant\", \"content\": \"Hello\", \"tool_calls\": [{\"type\": "
    "\"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, {\"role\": \"tool\", "
    "\"content\": \"42\"}], \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *src = (const char *)data;
    const char *nul = memchr(src, '\0', size);
    size_t tlen = nul ? (size_t)(nul - src) : size;
    const char *vars = nul ? nul + 1 : default_vars;
    size_t vlen = nul ? size - tlen - 1 : sizeof default_vars - 1;

    jinja_template *t = jinja_parse(src, tlen);
    if (!t) {
        if (!error_get()[0]) {
            fprintf(stderr, "fuzz_jinja: a parse failed without a message\n");
            abort();
        }
        return 0;
    }
    jinja_limits lim = jinja_default_limits();
    lim.max_output = 1 << 16;
    lim.max_memory = 16 << 20;
    lim.max_loop_iters = 20000;
    lim.max_steps = 200000;
    lim.max_seconds = 2.0;
    size_t n = 0;
    char *out = jinja_render(t, vars, vlen, NULL, &lim, &n);
    if (out) {
        if (n > lim.max_output || strlen(out) > n) {
            fprintf(stderr, "fuzz_jinja: %zu bytes of output past the limit of %zu\n", n, lim.max_output);
            abort();
        }
        free(out);
    } else if (!error_get()[0]) {
        fprintf(stderr, "fuzz_jinja: a render failed without a message\n");
        abort();
    }
    jinja_template_free(t);
    return 0;
}
