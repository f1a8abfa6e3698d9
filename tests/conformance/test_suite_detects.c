/*
 * test_suite_detects — the conformance suite fails what is wrong and passes
 * what is right: run it on broken_plugin (see there for its planted bugs)
 * one op family at a time and check each verdict; then check that a plugin
 * with zero devices is a skip (77) and a file that is not a plugin an error.
 *
 * Also: a crash in one case is named (case, signal, re-run command) and the
 * family is failed; a crash while discovering devices names the plugin; a
 * family's verdict is the same with and without --op; a 1.0 plugin must
 * decline malformed nodes itself, a 1.1 plugin need not (the host checks).
 *
 * usage: test_suite_detects BROKEN-PLUGIN BROKEN-PLUGIN-BUILT-FOR-1.0
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "conformance/conformance.h"
#include "util/error.h"


static int run(const char *target, const char *op, bool verbose, char *report, size_t report_size) {
    FILE *out = tmpfile();
    if (!out) {
        fprintf(stderr, "cannot create a temporary file\n");
        exit(1);
    }
    conformance_options opt = {.target = target, .device = -1, .op = op, .verbose = verbose, .out = out};
    int rc = conformance_run(&opt);
    rewind(out);
    size_t n = fread(report, 1, report_size - 1, out);
    report[n] = '\0';
    fclose(out);
    return rc;
}

/* verbose: every case's line (the report lists only the first failures) */
static void expect_report(const char *target, const char *op, bool verbose, int want_rc, const char *want_text) {
    static char report[1 << 18];
    int rc = run(target, op, verbose, report, sizeof report);
    int ok = rc == want_rc && (!want_text || strstr(report, want_text));
    if (!EXPECT(ok, "%-10s exit %d (want %d)%s%s", op ? op : "(all)", rc, want_rc,
                want_text ? ", report mentions: " : "", want_text ? want_text : ""))
        printf("---- report ----\n%s---- error: %s\n", report, error_get());
}

static void expect(const char *target, const char *op, int want_rc, const char *want_text) {
    expect_report(target, op, false, want_rc, want_text);
}

TEST(test_suite_detects) {
    REQUIRE(harness_argc() >= 3, "usage: test_suite_detects BROKEN-PLUGIN BROKEN-PLUGIN-10");
    const char *broken = harness_arg(1), *broken10 = harness_arg(2), *self = harness_arg(0);
    /* correct ops pass, every planted bug is caught with the right reason */
    expect(broken, "ADD", 0, "0 failed");
    expect(broken, "MUL", 1, "x allowed");
    expect(broken, "GELU", 1, "GELU [17, 3, 1] permuted/padded");
    expect(broken, "GELU", 1, "re-run one case: tessera plugin check");
    expect(broken, "SCALE", 1, "lies outside dst and was changed");
    expect(broken, "MUL_MAT", 1, "FAIL");
    /* MUL_MAT_ID: slot rows (n_b = n_used) and ids out of range, clamped */
    expect(broken, "MUL_MAT_ID", 1, "x F32 [17, 2, 5], 2 of 3 per token: element");
    expect_report(broken, "MUL_MAT_ID", true, 1, "F32 [64, 6, 4] with ids 4 and 7 of 4 experts: element 0");
    expect(broken, "SSM_CONV", 1, "FAIL");
    expect(broken, "SSM_SCAN", 1, "FAIL");
    expect(broken, "SWIGLU_OAI", 1, "FAIL");
    /* DELTA_NET's head rule: the untiled cases pass (the 600-token ones
     * too), the tiled ones fail */
    expect(broken, "DELTA_NET", 1, "10 passed, 4 failed");
    /* GELU_ERF computed with GELU's tanh form: every F32 case fails */
    expect(broken, "GELU_ERF", 1, "0 passed, 12 failed");
    /* 1.1: the host validates, the device is never asked; 1.0: must decline */
    expect(broken, "MALFORMED", 0, "0 failed");
    expect(broken10, "MALFORMED", 1, "supports_op accepted a malformed node");
    expect(broken10, "MUL", 1, "x allowed");

    /* a crash names the case and the signal; the family fails, the run goes on */
    setenv("BROKEN_PLUGIN_CRASH", "ADD", 1);
    expect(broken, "ADD", 1, "crashed with signal 11");
    expect(broken, "ADD", 1, "--op ADD --case 2 --no-fork");
    expect(broken, NULL, 1, "  MUL_MAT");
    setenv("BROKEN_PLUGIN_CRASH", "DISCOVERY", 1);
    expect(broken, "ADD", 1, NULL);
    if (!strstr(error_get(), "crashed with signal 11") || !strstr(error_get(), "discovering devices")) {
        ADD_FAILURE("a crash in device_count is not named: %s", error_get());
    }
    unsetenv("BROKEN_PLUGIN_CRASH");

    /* the same verdict and counts with and without --op */
    static char full[1 << 16], one[1 << 16];
    run(broken, NULL, false, full, sizeof full);
    const char *fams[] = {"ADD", "MUL", "GELU", "SCALE", "MUL_MAT", "ROPE", "GRAPH", "MALFORMED"};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        run(broken, fams[i], false, one, sizeof one);
        char *line = strstr(one, "\n  ");
        char *end = line ? strchr(line + 1, '\n') : NULL;
        if (!line || !end) continue;
        *end = '\0';
        if (!strstr(full, line + 1)) {
            ADD_FAILURE("--op %s gives '%s', not found in the full run", fams[i], line + 1);
        }
    }
    /* declined ops are counted, not failed */
    expect(broken, "ROPE", 0, "unsupported (falls back)");
    /* ref against itself passes bit-exact */
    expect("ref", "MUL_MAT", 0, "bit-exact");
    expect("ref", "nonsense", 2, NULL);

    /* zero devices: skip with the plugin's reason */
    setenv("BROKEN_PLUGIN_NO_DEVICE", "1", 1);
    expect(broken, "ADD", 77, "BROKEN_PLUGIN_NO_DEVICE is set");
    unsetenv("BROKEN_PLUGIN_NO_DEVICE");

    /* not a plugin: an error naming the file */
    expect(self, "ADD", 2, NULL);
    if (!strstr(error_get(), self)) {
        ADD_FAILURE("error for a non-plugin does not name the file: %s", error_get());
    }
    expect("/nonexistent/libtessera-backend-x.so", "ADD", 2, NULL);
}

HARNESS_MAIN("conformance suite detects bugs", HARNESS_TEST(test_suite_detects))
