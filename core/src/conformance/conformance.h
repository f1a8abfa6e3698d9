/*
 * conformance — the op conformance suite: every op x dtype x a family of
 * shapes, run on a backend's devices through the plugin ABI and compared with
 * the ref backend.
 *
 * For each case the suite builds one node — or, in the GRAPH family, a short
 * chain of dependent nodes computed in one call — (sources with deterministic
 * random data, sometimes as strided, padded or permuted views, sometimes
 * computing in place), computes it with ref on host memory, then on the device under
 * test: device buffers from buffer_alloc, inputs uploaded with queue write,
 * compute + synchronize, results read back with queue read. It checks
 *   - dst's values against ref's within the op's tolerance (see the
 *     table in conf_tolerance.c; a backend checked against itself — "ref" — must
 *     match bit for bit);
 *   - that bytes of dst's buffer outside dst's elements, and every source
 *     buffer, were left untouched;
 *   - that malformed nodes are declined by supports_op.
 * A node the device declines (supports_op == 0) is counted as "unsupported
 * (falls back)", not as a failure; in a GRAPH case the declined nodes run on
 * ref between the device's (as the scheduler would run them). Nodes are
 * validated with the ABI's checker first, as a 1.1 host does.
 *
 * Each family runs in its own child process (unless no_fork): a crash or a
 * hang names the case and the signal, and the other families still run.
 * Each case's data comes from a seed derived from its family and number
 * only, so a run with --op (and --case N) sees exactly the data of a full
 * run; failures print the seed and the command that re-runs the case.
 *
 * The same program serves a vendor checking their own plugin
 * (`tessera plugin check PATH`) and the project's tests.
 */
#ifndef TESSERA_CONFORMANCE_H
#define TESSERA_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tessera/tessera_tools.h>

/* The options are tessera_plugin_check's params (tessera_tools.h): the
 * plugin, one device or all, one op family or all, one case, verbose,
 * no_fork, and the report's stream (stdout if NULL). */
typedef tessera_plugin_check_params conformance_options;

/* Exit statuses of conformance_run. */
enum {
    CONFORMANCE_PASS = 0,
    CONFORMANCE_FAIL = 1,    /* at least one case failed */
    CONFORMANCE_ERROR = 2,   /* could not load the plugin / bad options; error_get() says why */
    CONFORMANCE_NO_DEVICE = 77 /* the plugin has no usable device (reason printed) */
};

/* Run the suite and print one line per op family and a summary per device. */
int conformance_run(const conformance_options *opt);

/* The op family names the suite knows, NULL-terminated ("GET_ROWS", ...). */
const char *const *conformance_families(void);

#endif
