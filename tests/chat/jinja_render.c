/* jinja_render TEMPLATE VARS.json — render a chat template with the JSON
 * object's members as variables and print the text (no newline added); on a
 * template error print it to stderr and exit 1. The Python side of
 * tests/chat/compare_jinja.py does the same with jinja2. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja.h"
#include "harness.h"
#include "util/error.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: jinja_render TEMPLATE VARS.json\n");
        return 2;
    }
    size_t tlen, vlen;
    char *tmpl = harness_read_file(argv[1], &tlen), *vars = harness_read_file(argv[2], &vlen);
    if (!tmpl || !vars) {
        fprintf(stderr, "jinja_render: cannot read %s\n", tmpl ? argv[2] : argv[1]);
        return 2;
    }
    int rc = 1;
    jinja_template *t = jinja_parse(tmpl, tlen);
    if (t) {
        size_t len;
        char *out = jinja_render(t, vars, vlen, NULL, NULL, &len);
        if (out) {
            fwrite(out, 1, len, stdout);
            free(out);
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "%s\n", error_get());
    jinja_template_free(t);
    free(tmpl);
    free(vars);
    return rc;
}
