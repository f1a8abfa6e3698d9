/* tessera plugin — check a backend plugin against the reference backend. */
#include <stdio.h>
#include <string.h>

#include <tessera/tessera.h>
#include <tessera/tessera_tools.h>

#include "cli_util.h"
#include "cli_opts.h"
#include "commands.h"

static void op_list(FILE *out) {
    fprintf(out, "\nop families (--op):");
    for (const char *const *f = tessera_plugin_check_families(); *f; f++) fprintf(out, " %s", *f);
    fprintf(out,
            "\n\nexit status: 0 all cases passed, 1 some failed, 2 the plugin could not be\n"
            "loaded or bad usage, 77 the plugin has no usable device (reason printed)\n");
}

typedef struct plugin_opts {
    int32_t device;
    const char *op;
    int32_t case_index;
    int no_fork;
    int verbose;
} plugin_opts;

static const cli_option plugin_own[] = {
    {NULL, "--device", "N", "check only device N of the plugin; -1: all", CLI_INT, CLI_OWN(plugin_opts, device),
     -1, 1 << 20, NULL, 0, 0},
    {NULL, "--op", "NAME", "check only one op family (listed below)", CLI_STR, CLI_OWN(plugin_opts, op), 0, 0,
     NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--case", "N", "with --op: only case N of that family (failures print N and the command)",
     CLI_INT, CLI_OWN(plugin_opts, case_index), -1, 1 << 20, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--no-fork", NULL, "run every family in this process (for a debugger); by default each runs in a "
     "child process so that a crash names its case", CLI_SWITCH, CLI_OWN(plugin_opts, no_fork), 0, 0, NULL, 0, 0},
    {"-v", "--verbose", NULL, "print one line per case", CLI_SWITCH, CLI_OWN(plugin_opts, verbose), 0, 0, NULL,
     0, 0},
    CLI_END,
};

static const cli_command plugin_cmd = {
    .name = "tessera plugin",
    .synopsis = "check PATH [--device N] [--op NAME [--case N]] [--no-fork] [--verbose]",
    .about = "Run the op conformance suite on a backend plugin: every op x dtype x a family\n"
             "of shapes (odd sizes, broadcasting, strided and permuted views, in-place) on\n"
             "each of the plugin's devices, compared with the built-in reference backend\n"
             "within per-op tolerances. Ops a device declines are counted as\n"
             "\"unsupported (falls back)\", not as failures. PATH is a plugin file\n"
             "(libtessera-backend-NAME.so), or \"ref\" to check the reference backend\n"
             "against itself (bit-exact).",
    .own = plugin_own,
    .max_positional = 2,
    .more_help = op_list,
};

int cmd_plugin(int argc, char **argv) {
    tessera_plugin_check_params opt = {.device = -1, .out = stdout};
    plugin_opts po = {.device = -1, .case_index = -1};
    cli_params p;
    cli_params_init(&p);
    int prc = cli_parse(&plugin_cmd, argc, argv, &p, &po);
    if (prc != 0) return prc > 0 ? 0 : 2;
    opt.device = po.device;
    opt.op = po.op;
    opt.verbose = po.verbose;
    opt.one_case = po.case_index >= 0;
    opt.case_index = po.case_index;
    opt.no_fork = po.no_fork;
    const char *action = p.n_positional > 0 ? p.positional[0] : NULL;
    opt.target = p.n_positional > 1 ? p.positional[1] : NULL;
    if (!action) {
        fprintf(stderr, "tessera plugin: which action? 'tessera plugin check PATH' (see 'tessera plugin --help')\n");
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
    int rc = tessera_plugin_check(&opt);
    if (rc == TESSERA_CHECK_ERROR) fprintf(stderr, "tessera plugin check: %s\n", tessera_last_error());
    return rc;
}
