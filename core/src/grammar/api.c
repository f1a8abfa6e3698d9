/* api — the public tessera_grammar_* calls. */
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "grammar/grammar.h"
#include "util/error.h"

static tessera_grammar *wrap(grammar *g) {
    if (!g) return NULL;
    tessera_grammar *t = malloc(sizeof *t);
    if (!t) {
        grammar_free(g);
        error_set("grammar: out of memory");
        return NULL;
    }
    t->g = g;
    return t;
}

tessera_grammar *tessera_grammar_parse(const char *gbnf, size_t len, const char *root) {
    if (!gbnf) {
        error_set("grammar: the text is NULL");
        return NULL;
    }
    return wrap(grammar_parse(gbnf, len, root));
}

char *tessera_json_schema_to_gbnf(const char *schema, size_t len) {
    if (!schema) {
        error_set("json schema: the text is NULL");
        return NULL;
    }
    return grammar_json_schema_to_gbnf(schema, len);
}

tessera_grammar *tessera_grammar_from_json_schema(const char *schema, size_t len) {
    char *gbnf = tessera_json_schema_to_gbnf(schema, len);
    if (!gbnf) return NULL;
    grammar *g = grammar_parse(gbnf, strlen(gbnf), "root");
    /* A schema that converts to a grammar the parser rejects (a $ref
     * cycle that matches nothing first, say): say it was the schema. */
    if (!g) error_wrap("json schema: the grammar it gives is invalid");
    free(gbnf);
    return wrap(g);
}

tessera_grammar *tessera_grammar_json_object(void) {
    const char *gbnf = grammar_json_object_gbnf();
    return wrap(grammar_parse(gbnf, strlen(gbnf), "root"));
}

void tessera_grammar_free(tessera_grammar *grammar) {
    if (!grammar) return;
    grammar_free(grammar->g);
    free(grammar);
}
