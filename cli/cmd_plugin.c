/* tessera plugin — check a backend plugin against the reference backend. */
#include <stdio.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "conformance/conformance.h"
#include "util/error.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera plugin check PATH [--device N] [--op NAME] [--verbose]\n"
            "\n"
            "Run the op conformance suite on a backend plugin: every op x dtype x a family\n"
            "of shapes (odd sizes, broadcasting, strided and permuted views, in-place) on\n"
            "each of the plugin's devices, compared with the built-in reference backend\n"
            "within per-op tolerances. Ops a device declines are counted as\n"
            "\"unsupported (falls back)\", not as failures.\n"
            "\n"
            "  PATH          a plugin file (libtessera-backend-NAME.so), or \"ref\" to\n"
            "                check the reference backend against itself (bit-exact)\n"
            "  --device N    check only device N of the plugin (default: all)\n"
            "  --op NAME     check only one op family:\n"
            "               ");
    for (const char *const *f = conformance_families(); *f; f++) fprintf(out, " %s", *f);
    fprintf(out,
            "\n"
            "  --verbose     print one line per case\n"
            "  --help        this text\n"
            "\n"
            "exit status: 0 all cases passed, 1 some failed, 2 the plugin could not be\n"
            "loaded or bad usage, 77 the plugin has no usable device (reason printed)\n");
}

int cmd_plugin(int argc, char **argv) {
    conformance_options opt = {.device = -1, .out = stdout};
    const char *action = NULL;
    long device;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            opt.verbose = true;
        } else if (!strcmp(a, "--device") || !strcmp(a, "--op")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tessera plugin: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--op")) {
                opt.op = v;
            } else if (cli_parse_long(v, 0, 1 << 20, &device) != 0) {
                fprintf(stderr, "tessera plugin: --device '%s' is not a device index\n", v);
                return 2;
            } else {
                opt.device = (int32_t)device;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tessera plugin: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (!action) {
            action = a;
        } else if (!opt.target) {
            opt.target = a;
        } else {
            fprintf(stderr, "tessera plugin: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!action) {
        usage(stderr);
        return 2;
    }
    if (strcmp(action, "check")) {
        fprintf(stderr, "tessera plugin: unknown action '%s' (only 'check'; see --help)\n", action);
        return 2;
    }
    if (!opt.target) {
        fprintf(stderr, "tessera plugin check: which plugin? give a PATH or \"ref\" (see --help)\n");
        return 2;
    }
    int rc = conformance_run(&opt);
    if (rc == CONFORMANCE_ERROR) fprintf(stderr, "tessera plugin check: %s\n", error_get());
    return rc;
}
