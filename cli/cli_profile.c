/*
 * --profile: the per-op table of a profiled run (tessera run, tessera
 * bench). Device time comes from the devices' own clocks (Vulkan timestamp
 * queries, OpenCL profiling events), bytes and arithmetic from the node
 * shapes; achieved GB/s and GFLOP/s are their ratios. With the device's
 * ceilings (TESSERA_PEAK_GBPS, TESSERA_PEAK_GFLOPS: a GPU session knows its
 * card's) each op also shows the share of the ceiling it reached, which is
 * what says whether a kernel is bandwidth- or compute-bound and how far off.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli_opts.h"

enum { PROFILE_MAX_OPS = 32 };

/* A positive number from the environment, else 0. */
static double env_peak(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return 0.0;
    char *end = NULL;
    double x = strtod(v, &end);
    return end && !*end && x > 0 ? x : 0.0;
}

void cli_print_profile(FILE *out, const char *what, const tessera_context *ctx) {
    tessera_op_profile rows[PROFILE_MAX_OPS];
    const int32_t n = tessera_context_profile(ctx, rows, PROFILE_MAX_OPS);
    const double peak_gbps = env_peak("TESSERA_PEAK_GBPS"), peak_gflops = env_peak("TESSERA_PEAK_GFLOPS");
    double total_ms = 0, total_bytes = 0, total_flops = 0;
    int64_t total_nodes = 0, untimed = 0;
    for (int32_t i = 0; i < n; i++) {
        total_ms += rows[i].device_ms;
        total_bytes += rows[i].bytes;
        total_flops += rows[i].flops;
        total_nodes += rows[i].nodes;
        untimed += rows[i].untimed;
    }
    fprintf(out, "profile of %s: %lld nodes, %.3f ms of device time\n", what, (long long)total_nodes, total_ms);
    fprintf(out, "%-12s %8s %11s %6s %11s %9s %10s", "op", "nodes", "device ms", "time", "MiB moved", "GB/s",
            "GFLOP/s");
    if (peak_gbps > 0 || peak_gflops > 0) fprintf(out, " %8s %8s", "%GB/s", "%FLOP/s");
    fputc('\n', out);
    for (int32_t i = 0; i <= n; i++) {
        const bool sum = i == n;
        const char *op = sum ? "total" : rows[i].op;
        const double ms = sum ? total_ms : rows[i].device_ms;
        const double bytes = sum ? total_bytes : rows[i].bytes, flops = sum ? total_flops : rows[i].flops;
        const long long nodes = sum ? (long long)total_nodes : (long long)rows[i].nodes;
        const double gbps = ms > 0 ? bytes / (ms * 1e6) : 0, gflops = ms > 0 ? flops / (ms * 1e6) : 0;
        fprintf(out, "%-12s %8lld %11.3f %5.1f%% %11.2f %9.2f %10.2f", op, nodes, ms,
                total_ms > 0 ? 100.0 * ms / total_ms : 0.0, bytes / (1024.0 * 1024.0), gbps, gflops);
        if (peak_gbps > 0 || peak_gflops > 0)
            fprintf(out, " %7.1f%% %7.1f%%", peak_gbps > 0 ? 100.0 * gbps / peak_gbps : 0.0,
                    peak_gflops > 0 ? 100.0 * gflops / peak_gflops : 0.0);
        fputc('\n', out);
    }
    if (untimed)
        fprintf(out, "(%lld nodes ran on devices that cannot time their work: counted, not timed)\n",
                (long long)untimed);
    if (peak_gbps <= 0 && peak_gflops <= 0)
        fprintf(out, "(set TESSERA_PEAK_GBPS and TESSERA_PEAK_GFLOPS to the device's ceilings to see shares)\n");
}
