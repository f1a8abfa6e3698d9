/* Fuzz target: GBNF grammars and JSON Schema -> GBNF. The first byte picks
 * the mode: even, the input (after it, up to a NUL) is a GBNF grammar; odd,
 * it is a JSON Schema whose GBNF must then parse (the converter's output is
 * never the user's fault). Bytes after the NUL are fed to a matcher of the
 * grammar that parsed, one at a time, with the check and accept calls. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool schema = data[0] & 1;
    const char *src = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(src, '\0', n);
    size_t len = nul ? (size_t)(nul - src) : n;
    const char *text = nul ? nul + 1 : "";
    size_t tlen = nul ? n - len - 1 : 0;

    char *gbnf = NULL;
    if (schema) {
        gbnf = grammar_json_schema_to_gbnf(src, len);
        if (!gbnf) return 0;
        src = gbnf;
        len = strlen(gbnf);
    }
    grammar *g = grammar_parse(src, len, "root");
    if (!g) {
        /* Known gaps (issue 19 report), errors rather than crashes: strings of
         * the schema are copied into the GBNF as they are, so invalid UTF-8
         * (or a lone \\ud800) gives a grammar the parser refuses; a $ref
         * cycle that consumes nothing gives a left-recursive grammar. */
        if (schema && !strstr(error_get(), "invalid UTF-8") && !strstr(error_get(), "left-recursive")) {
            fprintf(stderr, "fuzz_grammar: the GBNF made from a schema does not parse: %s\n%s\n", error_get(),
                    gbnf);
            abort();
        }
        free(gbnf);
        return 0;
    }
    grammar_matcher m;
    if (grammar_matcher_init(&m, g) == 0) {
        for (size_t i = 0; i < tlen && i < 512; i++) {
            if (grammar_matcher_check(&m, text + i, 1) < 0) break;
            if (grammar_matcher_accept(&m, text + i, 1) < 0) break;
        }
        (void)grammar_matcher_complete(&m);
        (void)grammar_matcher_can_continue(&m);
        grammar_matcher_free(&m);
    }
    grammar_free(g);
    free(gbnf);
    return 0;
}
