/*
 * Plugin host and scheduler, proven with the test plugins built beside this
 * program (tests/host/plugins/testdev.c):
 *   - testdev      ADD/MUL/MUL_MAT F32 on buffers the host cannot see
 *   - testdev-old  the same plugin name with a lower score: superseded
 *   - testabi      claims ABI major 2: rejected with the reason
 *   - testfail     init fails: listed with its reason
 *   - testrefuse   tsr_plugin_entry returns NULL: rejected
 *   - testnoentry  no tsr_plugin_entry symbol: rejected
 *   - testnodev    init succeeds, zero devices: rejected with its reason
 *   - testcpu      the same kernels as a CPU backend (host-visible, reads host)
 *   - testsmall    plugin table smaller than the ABI needs: rejected
 *   - bogus        a text file named like a plugin: not a loadable library
 *   - testnew      built against ABI 1.1, using every hook it added
 *   - testasync    like testdev, but its queue runs nodes only at the next
 *                  synchronize/write/read (asynchronous, as a GPU)
 * All but testnew are built against the frozen ABI 1.0 header.
 * Graphs run through testdev (with fallbacks to ref) must equal ref alone.
 *
 * usage: test_host_sched PLUGIN_DIR
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/plugin_check.h>

#include "harness.h"
#include "graph/graph.h"
#include "host/host.h"
#include "host/host_weights.h"
#include "sched/sched.h"
#include "util/error.h"

static const host_plugin_record *find_plugin(const char *file_part) {
    for (int32_t i = 0; i < host_plugin_count(); i++) {
        const host_plugin_record *p = host_plugin_get(i);
        const char *slash = strrchr(p->path, '/');
        if (slash && strcmp(slash + 1, file_part) == 0) return p;
    }
    return NULL;
}

TEST(test_registry) {
    host_device *d = host_device_find("testdev0");
    EXPECT(d != NULL, "testdev0 not loaded");
    EXPECT(host_device_ref() != NULL, "ref missing");
    EXPECT(host_device_get(0) == d, "accelerator should sort before CPUs and ref");
    EXPECT(host_device_get(host_device_count() - 1) == host_device_ref(), "ref should be last");
    if (d) {
        EXPECT(d->info.host_visible == 0 && d->info.reads_host_memory == 0, "testdev info");
        EXPECT(strstr(d->plugin_path, "libtessera-backend-testdev.so") != NULL,
               "best score kept, got %s", d->plugin_path);
    }
    const host_plugin_record *p = find_plugin("libtessera-backend-testdev-old.so");
    EXPECT(p && p->state == HOST_PLUGIN_SUPERSEDED && strstr(p->reason, "superseded by"),
           "old build: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testabi.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "ABI 2.0, host speaks 1.x"),
           "ABI 2 plugin: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testfail.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "init failed") &&
              strstr(p->reason, "no test device driver"),
           "failing init: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testrefuse.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "returned NULL for host ABI 1."),
           "refusing plugin: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testnoentry.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "no tsr_plugin_entry symbol"),
           "plugin without entry: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testnodev.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "no devices: no test device present"),
           "plugin without devices: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-testsmall.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "plugin table is 16 bytes"),
           "small table: %s", p ? p->reason : "not listed");
    p = find_plugin("libtessera-backend-bogus.so");
    EXPECT(p && p->state == HOST_PLUGIN_REJECTED && strstr(p->reason, "not a loadable library"),
           "bogus file: %s", p ? p->reason : "not listed");

    host_device *sel[8];
    EXPECT(host_select_devices("ref,testdev0", sel, 8) == 2 && sel[0] == host_device_ref(),
           "select ref,testdev0: %s", error_get());
    EXPECT(host_select_devices("testdev0,nosuch", sel, 8) < 0, "unknown device accepted");
    EXPECT(strstr(error_get(), "unknown device 'nosuch'") && strstr(error_get(), "testdev0") &&
              strstr(error_get(), "ref"),
           "message: %s", error_get());
    EXPECT(host_select_devices("ref,ref", sel, 8) < 0, "duplicate accepted");
    EXPECT(host_select_devices("ref,", sel, 8) < 0, "trailing comma accepted");
}

/* ------------------------------------------------------------- graphs */

typedef struct net {
    graph *g;
    graph_tensor *x, *out_dev, *out_host, *kv_slot_node;
    float w1[16 * 12], b1[12], w2[12 * 8], kv[64];
} net;

/* What sched_explain prints for s (free it). */
static char *explain_text(const sched *s) {
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem) return NULL;
    sched_explain(s, mem);
    fclose(mem);
    return text;
}

static void fill(float *v, int n, float scale, int seed) {
    for (int i = 0; i < n; i++) v[i] = scale * (float)(((i * 37 + seed * 11) % 23) - 11) / 11.0f;
}

/* x[16,3] -> mul_mat(w1) + b1 -> *self -> rms_norm -> silu -> mul_mat(w2) -> add(scale)
 * plus a cpy of the first product into a persistent kv view. */
static int net_build(net *n) {
    memset(n->kv, 0, sizeof n->kv);
    fill(n->w1, 16 * 12, 0.5f, 1);
    fill(n->b1, 12, 0.1f, 2);
    fill(n->w2, 12 * 8, 0.3f, 3);
    graph *g = graph_new(64);
    n->g = g;
    graph_tensor *w1 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 16, 12), "w1");
    graph_tensor *b1 = graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_F32, 12), "b1");
    graph_tensor *w2 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 12, 8), "w2");
    graph_tensor *kv = graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_F32, 64), "kv");
    graph_tensor_bind(w1, GRAPH_WEIGHT, -1, NULL, 0, n->w1);
    graph_tensor_bind(b1, GRAPH_WEIGHT, -1, NULL, 0, n->b1);
    graph_tensor_bind(w2, GRAPH_WEIGHT, -1, NULL, 0, n->w2);
    graph_tensor_bind(kv, GRAPH_PERSISTENT, -1, NULL, 0, n->kv);
    n->x = graph_set_input(graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 16, 3), "x"));
    graph_tensor *h = graph_tensor_set_name(graph_mul_mat(g, w1, n->x), "h");
    graph_tensor *hb = graph_tensor_set_name(graph_add(g, h, b1), "hb");
    graph_tensor *sq = graph_tensor_set_name(graph_mul(g, hb, hb), "sq");
    n->out_dev = graph_set_output(sq); /* computed on testdev: read back */
    graph_tensor *nrm = graph_tensor_set_name(graph_rms_norm(g, sq, 1e-5f), "norm");
    graph_tensor *act = graph_tensor_set_name(graph_silu(g, nrm), "act");
    graph_tensor *o = graph_tensor_set_name(graph_mul_mat(g, w2, act), "o");
    graph_tensor *os = graph_tensor_set_name(graph_scale(g, o, 2.0f, 0.5f), "o_scaled");
    n->out_host = graph_set_output(os);
    graph_tensor *slot = graph_view_1d(g, kv, 36, 4 * 8);
    n->kv_slot_node = graph_cpy(g, h, slot);
    return graph_check(g);
}

static int run_on(const char *devices, int no_fallback, net *n, float *out_dev, float *out_host,
                  float *kv, sched_stats *stats, FILE *explain) {
    host_device *sel[8];
    int32_t nd = host_select_devices(devices, sel, 8);
    if (nd < 0) return -1;
    sched_params params = {.no_fallback = no_fallback};
    sched *s = sched_new(sel, nd, &params);
    if (!s || net_build(n)) goto fail;
    if (sched_alloc(s, n->g)) goto fail;
    EXPECT(n->x->t.data != NULL && n->x->t.buffer == NULL, "input must be in host memory");
    float xin[48];
    fill(xin, 48, 1.0f, 7);
    memcpy(n->x->t.data, xin, sizeof xin);
    if (sched_compute(s, n->g)) goto fail;
    EXPECT(n->out_dev->t.data && n->out_host->t.data, "outputs must have host addresses");
    memcpy(out_dev, n->out_dev->t.data, 36 * sizeof(float));
    memcpy(out_host, n->out_host->t.data, 24 * sizeof(float));
    memcpy(kv, n->kv, sizeof n->kv);
    if (stats) sched_get_stats(s, stats);
    if (explain) sched_explain(s, explain);
    sched_free(s);
    graph_free(n->g);
    return 0;
fail:
    sched_free(s);
    graph_free(n->g);
    n->g = NULL;
    return -1;
}

static int close_enough(const float *a, const float *b, int n, float tol) {
    for (int i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])))) return 0;
    return 1;
}

TEST(test_split_graph) {
    net n;
    float ref_dev[36], ref_host[24], ref_kv[64];
    float dev_dev[36], dev_host[24], dev_kv[64];
    sched_stats st;
    int rc = run_on("ref", 0, &n, ref_dev, ref_host, ref_kv, &st, NULL);
    EXPECT(rc == 0, "ref run: %s", error_get());
    EXPECT(st.n_splits == 1 && st.n_copies == 0 && st.n_fallbacks == 0,
           "ref alone: %d splits %d copies %d fallbacks", st.n_splits, st.n_copies, st.n_fallbacks);
    EXPECT(ref_kv[8] != 0.0f && ref_kv[7] == 0.0f && ref_kv[44] == 0.0f, "kv slot written in place");

    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    rc = run_on("testdev0", 0, &n, dev_dev, dev_host, dev_kv, &st, mem);
    fclose(mem);
    EXPECT(rc == 0, "testdev run: %s", error_get());
    printf("--- explain (testdev0 with fallback)\n%s", text ? text : "");
    EXPECT(close_enough(dev_dev, ref_dev, 36, 1e-5f), "testdev output read back differs from ref");
    EXPECT(close_enough(dev_host, ref_host, 24, 1e-5f), "final output differs from ref");
    EXPECT(close_enough(dev_kv, ref_kv, 64, 1e-5f), "kv cache differs from ref");
    /* mul_mat+add+mul on testdev; rms_norm, silu on ref; mul_mat on testdev;
     * scale and cpy on ref. */
    EXPECT(st.n_splits == 4, "splits %d", st.n_splits);
    EXPECT(st.n_fallbacks >= 2, "fallbacks %d", st.n_fallbacks);
    EXPECT(st.n_copies >= 4, "copies %d", st.n_copies);
    EXPECT(text && strstr(text, "fallback: rms_norm 'norm' -> ref"), "explain lacks rms_norm fallback");
    EXPECT(text && strstr(text, "fallback: scale 'o_scaled' -> ref"), "explain lacks scale fallback");
    EXPECT(text && strstr(text, "copy 'x' host -> testdev0"), "explain lacks input copy");
    EXPECT(text && strstr(text, "copy 'sq' testdev0 -> ref"), "explain lacks device-to-host copy");
    free(text);

    /* A CPU backend reading host memory needs no copies at all, neither of
     * host inputs and weights nor of ref's host-visible results. */
    rc = run_on("testcpu0", 0, &n, dev_dev, dev_host, dev_kv, &st, NULL);
    EXPECT(rc == 0, "testcpu run: %s", error_get());
    EXPECT(st.n_copies == 0, "testcpu: %d copies", st.n_copies);
    EXPECT(st.n_splits == 4 && st.n_fallbacks >= 2, "testcpu: %d splits %d fallbacks", st.n_splits,
           st.n_fallbacks);
    EXPECT(close_enough(dev_dev, ref_dev, 36, 1e-5f) && close_enough(dev_host, ref_host, 24, 1e-5f) &&
              close_enough(dev_kv, ref_kv, 64, 1e-5f),
           "testcpu results differ from ref");

    /* Without fallback the first unsupported node is an error naming it. */
    rc = run_on("testdev0", 1, &n, dev_dev, dev_host, dev_kv, NULL, NULL);
    EXPECT(rc != 0 && strstr(error_get(), "'norm' (rms_norm): no device supports it (tried testdev0)"),
           "no_fallback: %s", error_get());
}

/* Copies in and out of testdev buffers, many sizes, exact. */
TEST(test_copies) {
    host_device *d = host_device_find("testdev0");
    if (!d) return;
    sched *s = sched_new(&d, 1, NULL);
    for (int len = 1; len <= 300; len += 37) {
        graph *g = graph_new(8);
        graph_tensor *a = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, len));
        graph_tensor *b = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, len));
        graph_tensor *c = graph_set_output(graph_add(g, a, b));
        EXPECT(sched_alloc(s, g) == 0, "alloc: %s", error_get());
        float *pa = a->t.data, *pb = b->t.data;
        for (int i = 0; i < len; i++) {
            pa[i] = (float)i * 0.25f;
            pb[i] = 1000.0f - (float)i;
        }
        EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
        EXPECT(c->t.buffer == NULL && c->t.data != NULL, "output in host memory");
        const float *pc = c->t.data;
        int bad = 0;
        for (int i = 0; i < len && pc; i++) bad += pc[i] != (float)i * 0.25f + 1000.0f - (float)i;
        EXPECT(bad == 0, "len %d: %d wrong elements", len, bad);
        host_device *where = sched_node_device(s, 0);
        EXPECT(where == d, "add must run on testdev0, ran on %s", where ? where->name : "?");
        graph_free(g);
    }
    sched_free(s);
}

/* A weight that lives in a testdev buffer (as -ngl puts it on a GPU) pulls
 * its mul_mat there with no copy of the weight; only the input is copied. */
TEST(test_weight_on_device) {
    host_device *d = host_device_find("testdev0");
    if (!d) return;
    float w[8 * 4], xin[8 * 2], want[4 * 2];
    fill(w, 32, 1.0f, 5);
    fill(xin, 16, 1.0f, 6);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++) {
            double acc = 0;
            for (int k = 0; k < 8; k++) acc += (double)w[i * 8 + k] * xin[j * 8 + k];
            want[j * 4 + i] = (float)acc;
        }
    tsr_buffer *wbuf = NULL;
    EXPECT(d->dev->api->buffer_alloc(d->dev, 512, &wbuf) == TSR_OK, "buffer_alloc");
    tsr_queue *q = host_device_queue(d);
    EXPECT(q && q->api->write(q, wbuf, 128, w, sizeof w) == TSR_OK, "write weights");
    host_device *sel[2] = {host_device_ref(), d}; /* ref first: the weight decides */
    sched *s = sched_new(sel, 2, NULL);
    graph *g = graph_new(8);
    graph_tensor *wt = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 4), "w.dev");
    graph_tensor_bind(wt, GRAPH_WEIGHT, d->index, wbuf, 128, NULL);
    graph_tensor *x = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 2));
    graph_tensor *y = graph_set_output(graph_mul_mat(g, wt, x));
    EXPECT(sched_alloc(s, g) == 0, "alloc: %s", error_get());
    memcpy(x->t.data, xin, sizeof xin);
    EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
    EXPECT(sched_node_device(s, 0) == d, "mul_mat should follow its weight to testdev0");
    sched_stats st;
    sched_get_stats(s, &st);
    EXPECT(st.n_copies == 1 && st.n_splits == 1, "copies %d splits %d", st.n_copies, st.n_splits);
    EXPECT(y->t.data && close_enough(y->t.data, want, 8, 1e-6f), "result differs");
    graph_free(g);

    /* A KV cache in testdev memory, written by a CPY testdev cannot do and
     * ref cannot reach: an error naming the node, not a wrong answer. */
    g = graph_new(8);
    graph_tensor *kv = graph_tensor_set_name(graph_tensor_new_1d(g, TSR_DTYPE_F32, 16), "kv.dev");
    graph_tensor_bind(kv, GRAPH_PERSISTENT, d->index, wbuf, 0, NULL);
    x = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, 4));
    graph_tensor_set_name(graph_cpy(g, x, graph_view_1d(g, kv, 4, 16)), "store");
    EXPECT(sched_alloc(s, g) != 0 && strstr(error_get(), "'store' (cpy): no device can run it") &&
              strstr(error_get(), "destination storage is not reachable"),
           "unreachable KV: %s", error_get());
    graph_free(g);
    sched_free(s);
    d->dev->api->buffer_free(d->dev, wbuf);
}

/* After a fallback, weightless nodes return to the first chosen device as
 * soon as it can run them without copies (a CPU backend reading ref's
 * host-visible results), instead of staying on ref. */
TEST(test_return_after_fallback) {
    host_device *cpu = host_device_find("testcpu0");
    if (!cpu) {
        ADD_FAILURE("testcpu0 not loaded");
        return;
    }
    sched *s = sched_new(&cpu, 1, NULL);
    graph *g = graph_new(16);
    graph_tensor *x = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, 8));
    graph_tensor *a = graph_add(g, x, x);                  /* testcpu0 */
    graph_tensor *n = graph_rms_norm(g, a, 1e-5f);         /* ref: fallback */
    graph_tensor *b = graph_set_output(graph_mul(g, n, x)); /* back to testcpu0 */
    EXPECT(sched_alloc(s, g) == 0, "alloc: %s", error_get());
    EXPECT(sched_node_device(s, 0) == cpu && sched_node_device(s, 2) == cpu,
           "add/mul should run on testcpu0 (mul ran on %s)",
           sched_node_device(s, 2) ? sched_node_device(s, 2)->name : "?");
    EXPECT(sched_node_device(s, 1) == host_device_ref(), "rms_norm should fall back to ref");
    float *px = x->t.data;
    for (int i = 0; i < 8; i++) px[i] = (float)i + 1.0f;
    EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
    double ss = 0;
    for (int i = 0; i < 8; i++) ss += 4.0 * (i + 1) * (i + 1);
    const float k = (float)(1.0 / sqrt(ss / 8 + 1e-5));
    const float *pb = b->t.data;
    for (int i = 0; i < 8 && pb; i++) {
        float want = 2.0f * (float)(i + 1) * k * (float)(i + 1);
        EXPECT(fabsf(pb[i] - want) <= 1e-5f * (1 + fabsf(want)), "element %d: %g vs %g", i, pb[i], want);
    }
    sched_stats st;
    sched_get_stats(s, &st);
    EXPECT(st.n_copies == 0 && st.n_splits == 3, "copies %d splits %d", st.n_copies, st.n_splits);
    graph_free(g);
    sched_free(s);
}

TEST(test_abort) {
    host_device *ref = host_device_ref();
    sched *s = sched_new(&ref, 1, NULL);
    graph *g = graph_new(8);
    graph_tensor *a = graph_set_input(graph_tensor_new_1d(g, TSR_DTYPE_F32, 4));
    graph_set_output(graph_silu(g, a));
    EXPECT(sched_alloc(s, g) == 0, "alloc: %s", error_get());
    memset(a->t.data, 0, 16);
    host_request_abort();
    EXPECT(sched_compute(s, g) != 0 && strstr(error_get(), "aborted"), "abort: %s", error_get());
    host_clear_abort();
    EXPECT(sched_compute(s, g) == 0, "after clearing abort: %s", error_get());
    /* an input bound to the caller's memory stays there */
    float mine[4] = {1, 2, 3, 4};
    graph *g3 = graph_new(8);
    graph_tensor *in = graph_tensor_new_1d(g3, TSR_DTYPE_F32, 4);
    graph_tensor_bind(in, GRAPH_INPUT, -1, NULL, 0, mine);
    graph_tensor *sc = graph_set_output(graph_scale(g3, in, 2.0f, 0.0f));
    EXPECT(sched_alloc(s, g3) == 0 && in->t.data == mine, "bound input moved: %s", error_get());
    EXPECT(sched_compute(s, g3) == 0 && sc->t.data && ((float *)sc->t.data)[3] == 8.0f,
           "bound input result: %s", error_get());
    graph_free(g3);
    /* a weight that was never bound is an error naming it */
    graph *g2 = graph_new(8);
    graph_tensor *w = graph_tensor_set_name(graph_tensor_new_2d(g2, TSR_DTYPE_F32, 4, 4), "w.unbound");
    w->flags |= GRAPH_WEIGHT;
    graph_tensor *x = graph_set_input(graph_tensor_new_1d(g2, TSR_DTYPE_F32, 4));
    graph_mul_mat(g2, w, x);
    EXPECT(sched_alloc(s, g2) != 0 && strstr(error_get(), "weight 'w.unbound' is not bound"),
           "unbound weight: %s", error_get());
    EXPECT(sched_compute(s, g) != 0, "compute of a graph that is not the allocated one");
    graph_free(g2);
    graph_free(g);
    sched_free(s);
}

/* ------------------------------------------------------------ ABI 1.1 */

enum { ST_OPENS, ST_CLOSES, ST_CLAIMS, ST_WEIGHT_WRITES, ST_ASKED, ST_THREADS, ST_OPEN_NOW };

static const char *plugin_dir;

/* testnew's hook counters (testdev_stats, exported for this test). */
static void testnew_stats(int out[7]) {
    memset(out, 0, 7 * sizeof *out);
    char path[4096];
    snprintf(path, sizeof path, "%s/libtessera-backend-testnew.so", plugin_dir);
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!dl) return;
    void (*fn)(int *);
    *(void **)&fn = dlsym(dl, "testdev_stats");
    if (fn) fn(out);
    dlclose(dl);
}

TEST(test_abi11) {
    host_device *d = host_device_find("testnew0");
    EXPECT(d != NULL, "testnew0 (ABI 1.1 plugin) not loaded");
    if (!d) return;
    int st[7];
    testnew_stats(st);
    EXPECT(st[ST_OPENS] == 0, "listing devices must not open them (%d opens)", st[ST_OPENS]);
    EXPECT(host_device_max_alloc(d) == 4096 && host_device_alignment(d) == 128, "limits %llu %llu",
           (unsigned long long)host_device_max_alloc(d), (unsigned long long)host_device_alignment(d));
    EXPECT(host_device_max_alloc(host_device_find("testdev0")) == 0 &&
              host_device_alignment(host_device_find("testdev0")) == 256,
           "a 1.0 plugin has no limits");

    /* The host validates before asking: a malformed node never reaches
     * supports_op and the reason is the checker's. */
    float buf[64] = {0};
    tsr_tensor a = {.dtype = TSR_DTYPE_F32, .ne = {4, 2, 1, 1}, .nb = {4, 16, 32, 32}, .data = buf, .name = "a"};
    tsr_tensor b = a, out = a;
    b.ne[0] = 3; /* does not divide 4 */
    out.name = "sum";
    tsr_node add = {.op = TSR_OP_ADD, .n_src = 2, .dst = &out, .src = {&a, &b}};
    char why[256];
    testnew_stats(st);
    int asked = st[ST_ASKED];
    EXPECT(!host_device_supports(d, &add, why, sizeof why) && strstr(why, "ADD 'sum'") &&
              strstr(why, "does not divide"),
           "malformed ADD: %s", why);
    testnew_stats(st);
    EXPECT(st[ST_ASKED] == asked, "supports_op was asked about a malformed node");
    EXPECT(st[ST_OPENS] == 0, "a malformed node opened the device");
    /* A well-formed node it does not compute: the plugin's own reason. */
    tsr_node silu = {.op = TSR_OP_SILU, .n_src = 1, .dst = &out, .src = {&a}};
    EXPECT(!host_device_supports(d, &silu, why, sizeof why) && strstr(why, "computes ADD, MUL and MUL_MAT only"),
           "decline reason: %s", why);
    testnew_stats(st);
    EXPECT(st[ST_OPENS] == 1 && st[ST_OPEN_NOW] == 1, "device opened once before use (%d)", st[ST_OPENS]);
    b.ne[0] = 4;
    EXPECT(host_device_supports(d, &add, why, sizeof why) && why[0] == 0, "ADD declined: %s", why);
    /* a 1.0 plugin that gives no reason */
    EXPECT(!host_device_supports(host_device_find("testdev0"), &silu, why, sizeof why) &&
              strstr(why, "testdev0 does not support it"),
           "1.0 decline: %s", why);
    /* An op newer than the plugin's ABI (its TSR_OPS line) is never asked
     * about: testnew is built for this header's minor, testdev for 1.0. */
    int32_t ids[2] = {0, 1};
    tsr_tensor we = a, xr = a, ti = {.dtype = TSR_DTYPE_I32, .ne = {2, 1, 1, 1}, .nb = {4, 8, 8, 8}, .data = ids,
                                   .name = "ids"};
    we.ne[2] = 2, we.nb[2] = 32, we.nb[3] = 64;
    xr.ne[1] = 1, xr.nb[2] = 16, xr.nb[3] = 16;
    tsr_tensor o = {.dtype = TSR_DTYPE_F32, .ne = {2, 2, 1, 1}, .nb = {4, 8, 16, 16}, .data = buf, .name = "moe"};
    tsr_node moe = {.op = TSR_OP_MUL_MAT_ID, .n_src = 3, .dst = &o, .src = {&we, &xr, &ti}};
    EXPECT(tsr_node_check(&moe, why, sizeof why) == 0, "the MUL_MAT_ID node is malformed: %s", why);
    EXPECT(!host_device_supports(host_device_find("testdev0"), &moe, why, sizeof why) &&
              strstr(why, "plugin built for ABI 1.0, MUL_MAT_ID needs 1."),
           "1.0 plugin asked about MUL_MAT_ID: %s", why);
    testnew_stats(st);
    asked = st[ST_ASKED];
    EXPECT(!host_device_supports(d, &moe, why, sizeof why) && !strstr(why, "needs 1."), "testnew: %s", why);
    testnew_stats(st);
    EXPECT(st[ST_ASKED] == asked + 1, "a plugin of this minor is asked about MUL_MAT_ID");
    /* and ABI 1.6's GELU_ERF: left to a newer plugin or ref */
    tsr_node ge = {.op = TSR_OP_GELU_ERF, .n_src = 1, .dst = &out, .src = {&a}};
    EXPECT(!host_device_supports(host_device_find("testdev0"), &ge, why, sizeof why) &&
              strstr(why, "plugin built for ABI 1.0, GELU_ERF needs 1.6"),
           "1.0 plugin asked about GELU_ERF: %s", why);

    /* Weights: split over buffers of at most 4096 bytes, aligned to 128,
     * sized by weight_size (repacked +64), stored by weight_write. */
    enum { K = 16, M = 25 };
    static float w[3][K * M];
    for (int j = 0; j < 3; j++) fill(w[j], K * M, 1.0f, 20 + j);
    host_weight hw[3];
    memset(hw, 0, sizeof hw);
    const char *names[3] = {"w0", "w1", "w2"};
    for (int j = 0; j < 3; j++) {
        hw[j].t = (tsr_tensor){.dtype = TSR_DTYPE_F32, .ne = {K, M, 1, 1}, .nb = {4, 4 * K, 4 * K * M, 4 * K * M},
                               .flags = TSR_TENSOR_WEIGHT, .name = names[j]};
        hw[j].src = w[j];
        hw[j].name = names[j];
    }
    host_weight_set set;
    EXPECT(host_weights_alloc(d, hw, 3, &set) == 0, "weights alloc: %s", error_get());
    EXPECT(set.n_buffers == 2, "3 weights of %d bytes in buffers of 4096: %d buffers", 4 * K * M + 64,
           set.n_buffers);
    for (int j = 0; j < 3; j++) {
        EXPECT(hw[j].size == 4 * K * M + 64 && hw[j].offset % 128 == 0 && set.sizes[hw[j].buffer] <= 4096,
               "weight %d: size %llu offset %llu", j, (unsigned long long)hw[j].size,
               (unsigned long long)hw[j].offset);
        EXPECT(host_weights_upload(d, &set, &hw[j]) == 0, "upload: %s", error_get());
    }
    testnew_stats(st);
    EXPECT(st[ST_WEIGHT_WRITES] == 3, "weight_write calls: %d", st[ST_WEIGHT_WRITES]);
    /* read() returns the plain bytes of a repacked weight */
    tsr_queue *q = host_device_queue(d);
    static float back[K * M];
    EXPECT(q && q->api->read(q, set.buffers[hw[2].buffer], hw[2].offset, back, sizeof back) == TSR_OK &&
              q->api->synchronize(q) == TSR_OK && memcmp(back, w[2], sizeof back) == 0,
           "read-back of a repacked weight differs");
    host_weight big = {.t = {.dtype = TSR_DTYPE_F32, .ne = {1024, 2, 1, 1}, .nb = {4, 4096, 8192, 8192}},
                       .src = NULL, .name = "too.big"};
    host_weight_set none;
    EXPECT(host_weights_alloc(d, &big, 1, &none) != 0 && strstr(error_get(), "weight 'too.big'") &&
              strstr(error_get(), "largest allocation (4096 bytes)"),
           "oversized weight: %s", error_get());

    /* A graph on the repacked weight: y = scale(w2 x) claimed as one run;
     * rms_norm falls back with the plugin's reason; threads set per queue. */
    float xin[K * 2], want[M * 2];
    fill(xin, K * 2, 1.0f, 9);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < M; i++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)w[2][i * K + k] * xin[j * K + k];
            float p = (float)acc;
            want[j * M + i] = p * 0.5f + 1.0f;
        }
    sched_params sp = {.n_threads = 3};
    host_device *sel[1] = {d};
    sched *s = sched_new(sel, 1, &sp);
    graph *g = graph_new(16);
    graph_tensor *wt = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, K, M), "w2");
    graph_tensor_bind(wt, GRAPH_WEIGHT, d->index, set.buffers[hw[2].buffer], hw[2].offset, NULL);
    graph_tensor *x = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, K, 2));
    graph_tensor *y = graph_tensor_set_name(graph_scale(g, graph_mul_mat(g, wt, x), 0.5f, 1.0f), "y");
    graph_set_output(y);
    graph_tensor *nrm = graph_set_output(graph_tensor_set_name(graph_rms_norm(g, y, 1e-5f), "nrm"));
    const int allocated = s && sched_alloc(s, g) == 0;
    EXPECT(allocated, "alloc: %s", error_get());
    if (allocated) {
        memcpy(x->t.data, xin, sizeof xin);
        EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
        EXPECT(y->t.data && close_enough(y->t.data, want, 2 * M, 1e-5f), "claimed run result differs");
        EXPECT(nrm->t.data != NULL, "norm output");
        EXPECT(sched_node_device(s, 1) == d, "SCALE claimed with its MUL_MAT should run on testnew0");
        sched_stats sst;
        sched_get_stats(s, &sst);
        EXPECT(sst.n_claimed == 2 && sst.n_fallbacks == 1, "claimed %d fallbacks %d", sst.n_claimed,
               sst.n_fallbacks);
        char *text = explain_text(s);
        EXPECT(text && strstr(text, "computes ADD, MUL and MUL_MAT only") && strstr(text, "2 nodes claimed"),
               "explain:\n%s", text ? text : "");
        free(text);
        testnew_stats(st);
        EXPECT(st[ST_THREADS] == 3, "set_n_threads got %d, want 3", st[ST_THREADS]);
        sched_set_n_threads(s, 5);
        EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
        testnew_stats(st);
        EXPECT(st[ST_THREADS] == 5, "set_n_threads after change got %d, want 5", st[ST_THREADS]);
    }
    graph_free(g);
    sched_free(s);
    host_weights_free(d, &set);
}

/* A split waits only for the devices it reads from: silu on ref does not
 * wait for testdev0's mul_mat; the mul that reads ref's result does. */
TEST(test_waits) {
    host_device *d = host_device_find("testdev0");
    if (!d) return;
    host_device *sel[2] = {d, host_device_ref()};
    sched *s = sched_new(sel, 2, NULL);
    graph *g = graph_new(16);
    float w[8 * 8], xin[8 * 2];
    fill(w, 64, 1.0f, 3);
    fill(xin, 16, 1.0f, 4);
    tsr_buffer *wbuf = NULL;
    EXPECT(d->dev->api->buffer_alloc(d->dev, sizeof w, &wbuf) == TSR_OK, "buffer_alloc");
    tsr_queue *wq = host_device_queue(d);
    EXPECT(wq && wq->api->write(wq, wbuf, 0, w, sizeof w) == TSR_OK, "write weights");
    graph_tensor *wt = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 8), "w");
    graph_tensor_bind(wt, GRAPH_WEIGHT, d->index, wbuf, 0, NULL);
    graph_tensor *x = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 2));
    graph_tensor *p = graph_tensor_set_name(graph_mul_mat(g, wt, x), "p");  /* testdev0 */
    graph_tensor *q = graph_tensor_set_name(graph_silu(g, x), "q");         /* ref, independent */
    graph_tensor *r = graph_tensor_set_name(graph_add(g, p, p), "r");       /* testdev0 */
    graph_tensor *o = graph_set_output(graph_tensor_set_name(graph_mul(g, r, q), "o")); /* reads ref's q */
    const int ok = s && sched_alloc(s, g) == 0;
    EXPECT(ok, "alloc: %s", error_get());
    if (ok) {
        memcpy(x->t.data, xin, sizeof xin);
        EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
        char *text = explain_text(s);
        EXPECT(text && strstr(text, "split 1: ref, nodes 1..1 (1: 'q' .. 'q')\n") &&
                  strstr(text, "split 2: testdev0, nodes 2..3 (2: 'r' .. 'o'), waits for ref"),
               "waits:\n%s", text ? text : "");
        free(text);
        const float *po = o->t.data;
        for (int j = 0; j < 2 && po; j++)
            for (int i = 0; i < 8; i++) {
                double acc = 0;
                for (int k = 0; k < 8; k++) acc += (double)w[i * 8 + k] * xin[j * 8 + k];
                const float xv = xin[j * 8 + i], want = 2.0f * (float)acc * (xv / (1.0f + expf(-xv)));
                EXPECT(fabsf(po[j * 8 + i] - want) <= 1e-5f * (1 + fabsf(want)), "o[%d,%d] = %g, want %g", i, j,
                       po[j * 8 + i], want);
            }
    }
    graph_free(g);
    sched_free(s);
    d->dev->api->buffer_free(d->dev, wbuf);
}

/* One step of q = w2 (w1 x) with host weights and x of n columns on
 * testdev0 + testcpu0 under op offload threshold `offload`; the explain
 * text goes to *text (free it). 0 if q matched the product in double. */
static int offload_step(int32_t offload, int n, sched_stats *st, char **text) {
    host_device *sel[2] = {host_device_find("testdev0"), host_device_find("testcpu0")};
    *text = NULL;
    if (!sel[0] || !sel[1]) return -1;
    sched *s = sched_new(sel, 2, &(sched_params){.offload_min_batch = offload});
    if (!s) return -1;
    graph *g = graph_new(16);
    float w1[8 * 8], w2[8 * 8], xin[8 * 8];
    fill(w1, 64, 1.0f, 11);
    fill(w2, 64, 1.0f, 12);
    fill(xin, 64, 1.0f, 13);
    graph_tensor *t1 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 8), "w1");
    graph_tensor *t2 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 8), "w2");
    graph_tensor_bind(t1, GRAPH_WEIGHT, -1, NULL, 0, w1);
    graph_tensor_bind(t2, GRAPH_WEIGHT, -1, NULL, 0, w2);
    graph_tensor *x = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, n));
    graph_tensor *p = graph_tensor_set_name(graph_mul_mat(g, t1, x), "p");
    graph_tensor *q = graph_set_output(graph_tensor_set_name(graph_mul_mat(g, t2, p), "q"));
    int rc = sched_alloc(s, g);
    if (rc == 0) {
        memcpy(x->t.data, xin, (size_t)n * 8 * sizeof(float));
        rc = sched_compute(s, g);
    }
    if (rc == 0) {
        *text = explain_text(s);
        sched_get_stats(s, st);
        const float *qo = q->t.data;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < 8; i++) {
                double want = 0;
                for (int k = 0; k < 8; k++) {
                    double pk = 0;
                    for (int l = 0; l < 8; l++) pk += (double)w1[k * 8 + l] * xin[j * 8 + l];
                    want += (double)w2[i * 8 + k] * (float)pk;
                }
                if (fabs(qo[j * 8 + i] - want) > 1e-4 * (1 + fabs(want))) rc = -1;
            }
    }
    graph_free(g);
    sched_free(s);
    return rc;
}

/* Op offload: from `offload` columns on, products whose weights are in host
 * memory run on the accelerator (the weights copied in for the step);
 * below it, and when off, on the CPU device where the weights are. */
TEST(test_op_offload) {
    sched_stats st;
    char *text = NULL;
    int rc = offload_step(4, 4, &st, &text);
    EXPECT(rc == 0, "offload at 4 columns: %s", error_get());
    EXPECT(text && strstr(text, "split 0: testdev0, nodes 0..1") && strstr(text, "copy 'w1' host -> testdev0") &&
              strstr(text, "copy 'w2' host -> testdev0") && !strstr(text, "testcpu0, nodes"),
           "offloaded placement:\n%s", text ? text : "");
    EXPECT(st.n_splits == 1, "%d splits", st.n_splits);
    free(text);
    rc = offload_step(4, 3, &st, &text);
    EXPECT(rc == 0 && text && strstr(text, "split 0: testcpu0, nodes 0..1") && st.n_copies == 0,
           "3 columns stay on the CPU: %s\n%s", error_get(), text ? text : "");
    free(text);
    /* 0: the environment decides; a bad value is an error naming it */
    setenv("TESSERA_OP_OFFLOAD", "2", 1);
    rc = offload_step(0, 3, &st, &text);
    EXPECT(rc == 0 && text && strstr(text, "copy 'w1' host -> testdev0"), "TESSERA_OP_OFFLOAD=2:\n%s",
           text ? text : "");
    free(text);
    rc = offload_step(-1, 3, &st, &text);
    EXPECT(rc == 0 && text && !strstr(text, "copy 'w1'"), "offload -1 is off whatever the environment says");
    free(text);
    setenv("TESSERA_OP_OFFLOAD", "lots", 1);
    rc = offload_step(0, 3, &st, &text);
    EXPECT(rc != 0 && strstr(error_get(), "TESSERA_OP_OFFLOAD='lots'"), "bad TESSERA_OP_OFFLOAD: %s", error_get());
    free(text);
    unsetenv("TESSERA_OP_OFFLOAD");
}

/* A test plugin's exported function (testdev.c), or NULL. */
static void *plugin_fn(const char *plugin, const char *fn) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libtessera-backend-%s.so", plugin_dir, plugin);
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!dl) return NULL;
    void *f = dlsym(dl, fn);
    dlclose(dl); /* the host keeps it loaded */
    return f;
}

/* The tick at which plugin first ran op (testdev_log), or -1. */
static int first_tick(const char *plugin, int op) {
    int (*log_fn)(int *, int *, int);
    *(void **)&log_fn = plugin_fn(plugin, "testdev_log");
    int ops[64], ticks[64];
    int n = log_fn ? log_fn(ops, ticks, 64) : 0;
    for (int i = 0; i < n; i++)
        if (ops[i] == op) return ticks[i];
    return -1;
}

/* CPU and GPU splits overlap: testasync0 only records a split's nodes and
 * runs them at its queue's next synchronize, write or read (as a GPU runs
 * its command buffers later). The CPU split that does not depend on it
 * must run before that: had the scheduler waited for every device before
 * each split, testasync0's product would have run first. Order comes from a
 * clock both plugins tick, not from time. */
TEST(test_overlap) {
    host_device *gpu = host_device_find("testasync0"), *cpu = host_device_find("testcpu0");
    void (*set_clock)(int *);
    *(void **)&set_clock = plugin_fn("testasync", "testdev_set_clock");
    void (*set_clock_cpu)(int *);
    *(void **)&set_clock_cpu = plugin_fn("testcpu", "testdev_set_clock");
    EXPECT(gpu && cpu && set_clock && set_clock_cpu, "testasync0/testcpu0 or their clocks are missing");
    if (!gpu || !cpu || !set_clock || !set_clock_cpu) return;
    static int clock;
    clock = 0;
    set_clock(&clock);
    set_clock_cpu(&clock);
    host_device *sel[2] = {gpu, cpu};
    sched *s = sched_new(sel, 2, NULL);
    graph *g = graph_new(16);
    float wg[8 * 8], wh[8 * 8], xin[8 * 2];
    fill(wg, 64, 1.0f, 5);
    fill(wh, 64, 1.0f, 6);
    fill(xin, 16, 1.0f, 7);
    tsr_buffer *wbuf = NULL;
    EXPECT(gpu->dev->api->buffer_alloc(gpu->dev, sizeof wg, &wbuf) == TSR_OK, "buffer_alloc");
    tsr_queue *wq = host_device_queue(gpu);
    EXPECT(wq && wq->api->write(wq, wbuf, 0, wg, sizeof wg) == TSR_OK && wq->api->synchronize(wq) == TSR_OK,
           "write weights");
    graph_tensor *w1 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 8), "w_gpu");
    graph_tensor_bind(w1, GRAPH_WEIGHT, gpu->index, wbuf, 0, NULL);
    graph_tensor *w2 = graph_tensor_set_name(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 8), "w_host");
    graph_tensor_bind(w2, GRAPH_WEIGHT, -1, NULL, 0, wh);
    graph_tensor *x = graph_set_input(graph_tensor_new_2d(g, TSR_DTYPE_F32, 8, 2));
    graph_tensor *p = graph_tensor_set_name(graph_mul_mat(g, w1, x), "p"); /* testasync0 */
    graph_tensor *q = graph_tensor_set_name(graph_mul_mat(g, w2, x), "q"); /* testcpu0, independent */
    graph_tensor *o = graph_set_output(graph_tensor_set_name(graph_add(g, p, q), "o")); /* testasync0 */
    const int ok = s && sched_alloc(s, g) == 0;
    EXPECT(ok, "alloc: %s", error_get());
    if (ok) {
        char *text = explain_text(s);
        EXPECT(text && strstr(text, "split 1: testcpu0, nodes 1..1 (1: 'q' .. 'q')\n") &&
                  strstr(text, "split 2: testasync0, nodes 2..2 (1: 'o' .. 'o'), waits for testcpu0\n"),
               "placement:\n%s", text ? text : "");
        free(text);
        memcpy(x->t.data, xin, sizeof xin);
        EXPECT(sched_compute(s, g) == 0, "compute: %s", error_get());
        const int t_gpu = first_tick("testasync", TSR_OP_MUL_MAT), t_cpu = first_tick("testcpu", TSR_OP_MUL_MAT);
        EXPECT(t_cpu > 0 && t_gpu > t_cpu,
               "the CPU split ran at tick %d, the GPU product it does not need at %d: the CPU split waited", t_cpu,
               t_gpu);
        const float *po = o->t.data;
        for (int j = 0; j < 2 && po; j++)
            for (int i = 0; i < 8; i++) {
                double acc = 0;
                for (int k = 0; k < 8; k++) acc += ((double)wg[i * 8 + k] + wh[i * 8 + k]) * xin[j * 8 + k];
                EXPECT(fabs(po[j * 8 + i] - acc) <= 1e-5 * (1 + fabs(acc)), "o[%d,%d] = %g, want %g", i, j,
                       po[j * 8 + i], acc);
            }
    }
    set_clock(NULL);
    set_clock_cpu(NULL);
    graph_free(g);
    sched_free(s);
    gpu->dev->api->buffer_free(gpu->dev, wbuf);
}

/* A file named like a plugin that is no library at all. */
static char bogus_dir[] = "/tmp/tessera-host-test-XXXXXX";
static char bogus[sizeof bogus_dir + 64];

/* The host with the plugins of PLUGIN_DIR (argument 1) and the bogus one. */
FIXTURE(start_host) {
    plugin_dir = harness_arg(1);
    REQUIRE(plugin_dir != NULL, "usage: test_host_sched PLUGIN_DIR");
    REQUIRE(mkdtemp(bogus_dir) != NULL, "mkdtemp %s", bogus_dir);
    snprintf(bogus, sizeof bogus, "%s/libtessera-backend-bogus.so", bogus_dir);
    FILE *f = fopen(bogus, "w");
    REQUIRE(f != NULL, "%s", bogus);
    fputs("this is not an ELF file\n", f);
    fclose(f);
    const char *dirs[] = {plugin_dir, bogus_dir};
    host_options opt = {.plugin_dirs = dirs, .n_plugin_dirs = 2, .only_plugin_dirs = true,
                        .verbosity = TSR_LOG_WARN};
    REQUIRE(host_init(&opt) == 0, "host_init: %s", error_get());
    return 0;
}

/* Keep testnew loaded across host_shutdown to see that it closed. */
TEST(test_shutdown) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libtessera-backend-testnew.so", plugin_dir);
    void *keep = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    host_shutdown();
    int st[7];
    testnew_stats(st);
    EXPECT(keep && st[ST_OPENS] == 1 && st[ST_CLOSES] == 1 && st[ST_OPEN_NOW] == 0,
           "open/close: %d opens, %d closes", st[ST_OPENS], st[ST_CLOSES]);
    if (keep) dlclose(keep);
}

FIXTURE(remove_bogus) {
    unlink(bogus);
    rmdir(bogus_dir);
    return 0;
}

HARNESS_MAIN_GROUP("host and scheduler", start_host, remove_bogus, HARNESS_TEST(test_registry),
                   HARNESS_TEST(test_split_graph), HARNESS_TEST(test_copies), HARNESS_TEST(test_weight_on_device),
                   HARNESS_TEST(test_return_after_fallback), HARNESS_TEST(test_abort), HARNESS_TEST(test_waits),
                   HARNESS_TEST(test_overlap), HARNESS_TEST(test_op_offload), HARNESS_TEST(test_abi11),
                   HARNESS_TEST(test_shutdown))
