/*
 * test_suite_detects — the conformance suite fails what is wrong and passes
 * what is right: run it on broken_plugin (see there for its planted bugs)
 * one op family at a time and check each verdict; then check that a plugin
 * with zero devices is a skip (77) and a file that is not a plugin an error.
 *
 * usage: test_suite_detects PATH-OF-BROKEN-PLUGIN
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conformance.h"
#include "util/error.h"

static int failures;

static int run(const char *target, const char *op, char *report, size_t report_size) {
    FILE *out = tmpfile();
    if (!out) {
        fprintf(stderr, "cannot create a temporary file\n");
        exit(1);
    }
    conformance_options opt = {.target = target, .device = -1, .op = op, .out = out};
    int rc = conformance_run(&opt);
    rewind(out);
    size_t n = fread(report, 1, report_size - 1, out);
    report[n] = '\0';
    fclose(out);
    return rc;
}

static void expect(const char *target, const char *op, int want_rc, const char *want_text) {
    static char report[1 << 16];
    int rc = run(target, op, report, sizeof report);
    int ok = rc == want_rc && (!want_text || strstr(report, want_text));
    printf("%s %-10s exit %d (want %d)%s%s\n", ok ? "ok  " : "FAIL", op ? op : "(all)", rc, want_rc,
           want_text ? ", report mentions: " : "", want_text ? want_text : "");
    if (!ok) {
        failures++;
        printf("---- report ----\n%s---- error: %s\n", report, error_get());
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-OF-BROKEN-PLUGIN\n", argv[0]);
        return 2;
    }
    const char *broken = argv[1];
    /* correct ops pass, every planted bug is caught with the right reason */
    expect(broken, "ADD", 0, "0 failed");
    expect(broken, "MUL", 1, "x allowed");
    expect(broken, "GELU", 1, "FAIL GELU [17, 3, 1] permuted/padded");
    expect(broken, "SCALE", 1, "lies outside dst and was changed");
    expect(broken, "MUL_MAT", 1, "FAIL");
    expect(broken, "MALFORMED", 1, "supports_op accepted a malformed node");
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
    expect(argv[0], "ADD", 2, NULL);
    if (!strstr(error_get(), argv[0])) {
        printf("FAIL error for a non-plugin does not name the file: %s\n", error_get());
        failures++;
    }
    expect("/nonexistent/libtessera-backend-x.so", "ADD", 2, NULL);

    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
