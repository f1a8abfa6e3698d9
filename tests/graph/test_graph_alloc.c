/*
 * The graph allocator (sched's liveness planner) reuses memory: on a chain
 * graph the compute buffer peak is far below the sum of all intermediates,
 * and the results equal a straightforward computation. Runs on ref.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "graph/graph.h"
#include "host/host.h"
#include "sched/sched.h"
#include "util/error.h"

enum { N = 1000 };

/* The chain, step by step in plain C: what ref must produce. */
static void chain_expected(const float *x, int steps, float *out) {
    static float cur[N];
    memcpy(cur, x, sizeof cur);
    for (int s = 0; s < steps; s++) {
        switch (s % 4) {
        case 0:
            for (int i = 0; i < N; i++) cur[i] = cur[i] * 1.5f + 0.25f;
            break;
        case 1: {
            double ss = 0;
            for (int i = 0; i < N; i++) ss += (double)cur[i] * cur[i];
            float k = (float)(1.0 / sqrt(ss / N + 1e-6));
            for (int i = 0; i < N; i++) cur[i] *= k;
            break;
        }
        case 2:
            for (int i = 0; i < N; i++) cur[i] = cur[i] / (1.0f + expf(-cur[i]));
            break;
        default:
            for (int i = 0; i < N; i++) cur[i] += x[i];
        }
    }
    memcpy(out, cur, sizeof cur);
}

static graph *chain_build(int steps, graph_tensor **in, graph_tensor **out) {
    graph *g = graph_new(steps + 4);
    graph_tensor *x = graph_set_input(graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_F32, N), "x"));
    graph_tensor *cur = x;
    for (int s = 0; s < steps; s++) {
        switch (s % 4) {
        case 0: cur = graph_scale(g, cur, 1.5f, 0.25f); break;
        case 1: cur = graph_rms_norm(g, cur, 1e-6f); break;
        case 2: cur = graph_silu(g, cur); break;
        default: cur = graph_add(g, cur, x);
        }
    }
    *in = x;
    *out = graph_set_output(cur);
    return g;
}

static int run_chain(sched *s, int steps, sched_stats *st) {
    graph_tensor *x, *y;
    graph *g = chain_build(steps, &x, &y);
    int ok = 0;
    if (sched_alloc(s, g)) {
        ADD_FAILURE("alloc %d steps: %s", steps, error_get());
        goto done;
    }
    static float xin[N], want[N];
    for (int i = 0; i < N; i++) xin[i] = (float)((i * 7919) % 201 - 100) / 50.0f;
    memcpy(x->t.data, xin, sizeof xin);
    if (sched_compute(s, g)) {
        ADD_FAILURE("compute %d steps: %s", steps, error_get());
        goto done;
    }
    chain_expected(xin, steps, want);
    const float *got = y->t.data;
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (!(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])))) {
            if (!bad) fprintf(stderr, "  element %d: got %g want %g\n", i, got[i], want[i]);
            bad++;
        }
    EXPECT(bad == 0, "%d steps: %d elements differ from the plain computation", steps, bad);
    sched_get_stats(s, st);
    ok = bad == 0;
done:
    graph_free(g);
    return ok;
}

/* add(a, a[0] broadcast): in-place reuse of a would overwrite a[0] before
 * the other elements read it; the planner must not do that. */
static void test_no_unsafe_in_place(sched *s) {
    graph *g = graph_new(8);
    graph_tensor *x = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, 8));
    graph_tensor *a = graph_silu(g, x);
    graph_tensor *y = graph_set_output(graph_add(g, a, graph_view_1d(g, a, 1, 0)));
    EXPECT(sched_alloc(s, g) == 0, "alloc: %s", error_get());
    float *px = x->t.data;
    for (int i = 0; i < 8; i++) px[i] = (float)i - 2.0f;
    EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
    const float *py = y->t.data;
    const float a0 = -2.0f / (1.0f + expf(2.0f));
    for (int i = 0; i < 8 && py; i++) {
        float xi = (float)i - 2.0f, want = xi / (1.0f + expf(-xi)) + a0;
        EXPECT(fabsf(py[i] - want) <= 1e-5f, "element %d: got %g want %g", i, py[i], want);
    }
    graph_free(g);
}

TEST(test_graph_alloc) {
    host_options opt = {.only_plugin_dirs = true, .verbosity = TSR_LOG_WARN};
    REQUIRE(host_init(&opt) == 0, "host_init: %s", error_get());
    host_device *ref = host_device_ref();
    sched *s = sched_new(&ref, 1, NULL);
    sched_stats st;
    const uint64_t one = (N * 4 + 255) / 256 * 256; /* one intermediate, aligned */

    if (run_chain(s, 40, &st)) {
        printf("chain of 40: peak %llu bytes, %llu without reuse\n",
               (unsigned long long)st.peak_bytes, (unsigned long long)st.intermediate_bytes);
        EXPECT(st.intermediate_bytes == 40 * one, "intermediate sum %llu",
               (unsigned long long)st.intermediate_bytes);
        EXPECT(st.peak_bytes < st.intermediate_bytes, "no reuse");
        /* rms_norm needs its input alive while it writes: at most 2 at once. */
        EXPECT(st.peak_bytes <= 2 * one, "peak %llu > two intermediates",
               (unsigned long long)st.peak_bytes);
    }
    /* Same scheduler, a longer graph, then a shorter one: buffers grow and
     * are reused; results stay right. */
    run_chain(s, 81, &st);
    EXPECT(st.peak_bytes <= 2 * one, "81 steps: peak %llu", (unsigned long long)st.peak_bytes);
    run_chain(s, 3, &st);
    run_chain(s, 40, &st);
    test_no_unsafe_in_place(s);
    sched_free(s);
    host_shutdown();
}

HARNESS_MAIN("graph allocator", HARNESS_TEST(test_graph_alloc))
