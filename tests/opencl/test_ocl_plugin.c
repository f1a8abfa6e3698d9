/*
 * test_ocl_plugin — the OpenCL plugin through its ABI, on the first OpenCL
 * device (PoCL in CI): what the conformance suite does not cover.
 *
 *   - device info: a description, a kind, host visibility as the features say;
 *   - the kernels build at the first supports_op, the program binary lands in
 *     the cache, and a second start loads it from there (times printed);
 *   - buffers: write/read round trip, mapped memory seen by the host on
 *     unified-memory devices, out-of-range copies refused;
 *   - compute: a small ADD is right; tensors outside this device's buffers
 *     (no buffer, past the end, a foreign pointer) or misaligned are errors,
 *     not crashes;
 *     the abort flag stops compute;
 *   - a kernel build failure (TESSERA_OPENCL_INJECT_BUILD_ERROR=1) logs the
 *     driver's build log once and every node is declined (falls back);
 *   - with --corrupt-cache: a cache file the driver rejects is ignored and
 *     rewritten (a full source build: slow on PoCL).
 *
 * Exits 77 when the plugin finds no OpenCL device (the reason is printed).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tessera/plugin.h>

#include "harness.h"
#include "../plugin_log.h"

static volatile int abort_flag;

static char cache_dir[1024];
static tsr_host host = {PLUGIN_TEST_HOST_FIELDS(&abort_flag, 2), .cache_dir = cache_dir};

static const tsr_plugin *plugin;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* (Re)start the plugin; returns its first device or NULL. */
static tsr_device *restart(char *reason, size_t size) {
    plugin->shutdown();
    reason[0] = '\0';
    if (plugin->init(&host, reason, size) != TSR_OK || plugin->device_count() < 1) return NULL;
    return plugin->device_get(0);
}

static void contiguous(tsr_tensor *t, int32_t dtype, int64_t n0, int64_t n1) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ne[0] = n0;
    t->ne[1] = n1;
    t->ne[2] = t->ne[3] = 1;
    t->nb[0] = 4;
    t->nb[1] = 4 * n0;
    t->nb[2] = t->nb[3] = 4 * n0 * n1;
    t->name = "t";
}

/* An ADD node: a [n0, n1] + b [n0, 1] -> dst [n0, n1]. */
static tsr_node add_node(tsr_tensor *a, tsr_tensor *b, tsr_tensor *dst, int64_t n0, int64_t n1) {
    contiguous(a, TSR_DTYPE_F32, n0, n1);
    contiguous(b, TSR_DTYPE_F32, n0, 1);
    contiguous(dst, TSR_DTYPE_F32, n0, n1);
    tsr_node n = {.op = TSR_OP_ADD, .n_src = 2, .dst = dst, .src = {a, b}};
    return n;
}

static int cache_files(const char *dir, char *first, size_t size) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s/opencl/*.bin 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int n = 0;
    char line[1100];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (n++ == 0 && first) snprintf(first, size, "%s", line);
    }
    pclose(p);
    return n;
}

static void test_compute(tsr_device *dev) {
    const tsr_device_api *api = dev->api;
    tsr_device_info info = {.struct_size = sizeof info};
    EXPECT(api->get_info(dev, &info) == TSR_OK, "get_info");
    tsr_queue *q = NULL;
    EXPECT(api->queue_create(dev, &q) == TSR_OK && q, "queue_create");
    if (!q) return;
    enum { N0 = 37, N1 = 3 };
    tsr_tensor a, b, dst;
    tsr_node node = add_node(&a, &b, &dst, N0, N1);
    /* one buffer: a at 0, b after it, dst after b */
    const uint64_t size = 4 * (N0 * N1 * 2 + N0);
    tsr_buffer *buf = NULL;
    EXPECT(api->buffer_alloc(dev, size, &buf) == TSR_OK && buf, "buffer_alloc(%llu)", (unsigned long long)size);
    if (!buf) return;
    float in[N0 * N1 + N0], out[N0 * N1];
    for (int i = 0; i < N0 * N1 + N0; i++) in[i] = (float)(i % 13) * 0.25f - 1.0f;
    EXPECT(q->api->write(q, buf, 0, in, sizeof in) == TSR_OK, "write");
    a.buffer = b.buffer = dst.buffer = buf;
    b.offset = 4 * N0 * N1;
    dst.offset = 4 * (N0 * N1 + N0);
    EXPECT(api->supports_op(dev, &node) == 1, "supports_op(ADD)");
    EXPECT(q->api->compute(q, &node, 1) == TSR_OK && q->api->synchronize(q) == TSR_OK, "compute ADD");
    EXPECT(q->api->read(q, buf, dst.offset, out, sizeof out) == TSR_OK, "read");
    int wrong = 0;
    for (int i = 0; i < N0 * N1; i++) wrong += out[i] != in[i] + in[N0 * N1 + i % N0];
    EXPECT(wrong == 0, "ADD: %d of %d elements wrong", wrong, N0 * N1);

    void *hp = api->buffer_host_ptr(dev, buf);
    EXPECT(!!hp == !!info.host_visible, "buffer_host_ptr %p but host_visible %d", hp, (int)info.host_visible);
    if (hp) EXPECT(!memcmp((char *)hp + dst.offset, out, sizeof out), "the mapped bytes differ from read()");

    /* copies out of range */
    EXPECT(q->api->write(q, buf, size - 4, in, 8) == TSR_ERR_INVALID, "write past the end accepted");
    EXPECT(q->api->read(q, buf, size + 1, out, 0) == TSR_ERR_INVALID, "read at offset past the end accepted");

    /* tensors that are not in this device's buffers */
    plugin_log_clear();
    dst.offset = size - 8;
    EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_INVALID, "dst past the buffer's end accepted");
    EXPECT(strstr(plugin_log_all, "runs past its buffer") != NULL, "no message for a dst past the end: %s",
           plugin_log_all);
    dst.offset = 4 * (N0 * N1 + N0) - 2;
    EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_INVALID, "a misaligned F32 dst accepted");
    dst.offset = 4 * (N0 * N1 + N0);
    a.buffer = NULL;
    a.data = in;
    EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_INVALID, "a host-memory source accepted");
    struct { uint64_t junk[8]; } fake = {{0}};
    a.buffer = (tsr_buffer *)(void *)&fake;
    EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_INVALID, "a foreign buffer accepted");
    a.buffer = buf;

    /* the abort flag */
    abort_flag = 1;
    EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_ABORTED, "compute ignored the abort flag");
    abort_flag = 0;
    EXPECT(q->api->synchronize(q) == TSR_OK, "synchronize");
    api->buffer_free(dev, buf);
    q->api->destroy(q);
}

/* Overwrite the cached binary with a valid header and garbage: the driver
 * must refuse it, the plugin rebuild from source and rewrite the file. */
static void test_corrupt_cache(void) {
    char file[1100], reason[256];
    if (cache_files(cache_dir, file, sizeof file) < 1) {
        ADD_FAILURE("no cache file to corrupt");
        return;
    }
    FILE *f = fopen(file, "wb");
    uint64_t n = 4096;
    EXPECT(f && fwrite("TSROCLB1", 1, 8, f) == 8 && fwrite(&n, sizeof n, 1, f) == 1, "write %s", file);
    for (uint64_t i = 0; f && i < n; i++) fputc((int)(i * 131 % 251), f);
    if (f) fclose(f);
    plugin_log_clear();
    tsr_device *dev = restart(reason, sizeof reason);
    tsr_tensor a, b, dst;
    tsr_node node = add_node(&a, &b, &dst, 8, 2);
    double t0 = now_ms();
    EXPECT(dev && dev->api->supports_op(dev, &node) == 1, "no kernels after a corrupt cache: %s", plugin_log_all);
    printf("rebuild after a corrupt cache file: %.0f ms\n", now_ms() - t0);
    struct stat st;
    EXPECT(stat(file, &st) == 0 && st.st_size > 4096 + 16, "the cache file was not rewritten");
}

/* Usage: test_ocl_plugin [--corrupt-cache] */
TEST(test_ocl_plugin) {
    const char *build = getenv("TESSERA_BUILD_ROOT");
    bool corrupt = harness_arg(1) && !strcmp(harness_arg(1), "--corrupt-cache");
    plugin_log_quiet = true; /* the checks read plugin_log_all; the build log is long */
    if (!build) harness_skip("TESSERA_BUILD_ROOT is not set");
    const char *xdg = getenv("XDG_CACHE_HOME");
    snprintf(cache_dir, sizeof cache_dir, "%s/tessera%s", xdg ? xdg : "/tmp", corrupt ? "-corrupt" : "");
    char path[1024];
    snprintf(path, sizeof path, "%s/libtessera-backend-opencl.so", build);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(dl != NULL, "cannot load %s: %s", path, dlerror());
    tsr_plugin_entry_fn entry;
    *(void **)&entry = dlsym(dl, TSR_PLUGIN_ENTRY_SYMBOL);
    plugin = entry ? entry(TSR_ABI_VERSION) : NULL;
    REQUIRE(plugin != NULL, "%s has no usable tsr_plugin_entry", path);
    EXPECT(entry(TSR_ABI_VERSION + (1u << 16)) == NULL, "accepted another ABI major");
    char reason[256] = "";
    if (plugin->init(&host, reason, sizeof reason) != TSR_OK || plugin->device_count() < 1)
        harness_skip("no OpenCL device: %s", reason);
    tsr_device *dev = plugin->device_get(0);
    EXPECT(plugin->device_get(plugin->device_count()) == NULL, "device_get past the end");
    tsr_device_info info = {.struct_size = sizeof info};
    EXPECT(dev->api->get_info(dev, &info) == TSR_OK, "get_info");
    printf("opencl0: %s [%s]\n", info.description, info.features);
    EXPECT(info.description && info.description[0], "no description");
    EXPECT(info.kind == TSR_DEVICE_GPU || info.kind == TSR_DEVICE_ACCEL, "kind %d", (int)info.kind);
    EXPECT(!info.reads_host_memory, "an OpenCL device cannot read host memory in place");
    EXPECT(info.host_visible == (strstr(info.features, "unified-memory") != NULL),
           "host_visible %d does not match features '%s'", (int)info.host_visible, info.features);

    if (corrupt) {
        /* This mode's own cache directory starts empty: a build tree kept
         * across changes of the kernels or their options would otherwise
         * hold binaries no start reads again, and the one broken below
         * might be such a file. */
        char rm[1200];
        snprintf(rm, sizeof rm, "rm -f %s/opencl/*.bin", cache_dir);
        EXPECT(system(rm) == 0, "%s", rm);
        /* make sure there is a cache file, then break it */
        dev = restart(reason, sizeof reason);
        tsr_tensor a, b, dst;
        tsr_node node = add_node(&a, &b, &dst, 8, 2);
        EXPECT(dev && dev->api->supports_op(dev, &node) == 1, "supports_op");
        test_corrupt_cache();
    } else {
        /* first use builds (or loads) the kernels and leaves a cache file */
        tsr_tensor a, b, dst;
        tsr_node node = add_node(&a, &b, &dst, 8, 2);
        plugin_log_clear();
        double t0 = now_ms();
        EXPECT(dev->api->supports_op(dev, &node) == 1, "supports_op(ADD) on first use: %s", plugin_log_all);
        double t_first = now_ms() - t0;
        EXPECT(cache_files(cache_dir, NULL, 0) >= 1, "no program binary in %s/opencl", cache_dir);
        test_compute(dev);

        /* a second start loads the binary */
        dev = restart(reason, sizeof reason);
        EXPECT(dev != NULL, "restart: %s", reason);
        plugin_log_clear();
        t0 = now_ms();
        EXPECT(dev && dev->api->supports_op(dev, &node) == 1, "supports_op after restart: %s", plugin_log_all);
        double t_second = now_ms() - t0;
        EXPECT(strstr(plugin_log_all, "kernels loaded from") != NULL, "the second start did not use the cache: %s",
               plugin_log_all);
        printf("kernels ready: first start %.0f ms, second start (cache) %.0f ms\n", t_first, t_second);
        if (dev) test_compute(dev);

        /* a build failure: the build log, once, then every node declined */
        setenv("TESSERA_OPENCL_INJECT_BUILD_ERROR", "1", 1);
        dev = restart(reason, sizeof reason);
        plugin_log_clear();
        EXPECT(dev && dev->api->supports_op(dev, &node) == 0, "a failed build still accepts nodes");
        EXPECT(dev && dev->api->supports_op(dev, &node) == 0, "a failed build accepts nodes the 2nd time");
        EXPECT(strstr(plugin_log_all, "building the kernels failed") && strstr(plugin_log_all, "Build log"),
               "no build failure message: %s", plugin_log_all);
        EXPECT(strstr(plugin_log_all, "fall back to the CPU") != NULL, "the message does not say what happens");
        const char *first = strstr(plugin_log_all, "building the kernels failed");
        EXPECT(!first || !strstr(first + 1, "building the kernels failed"), "the failure was logged twice");
        printf("build failure message:\n%.600s\n", plugin_log_all);
        if (dev) {
            tsr_queue *q = NULL;
            EXPECT(dev->api->queue_create(dev, &q) == TSR_OK, "queue_create after a failed build");
            if (q) {
                EXPECT(q->api->compute(q, &node, 1) == TSR_ERR_UNSUPPORTED, "compute after a failed build");
                q->api->destroy(q);
            }
        }
        unsetenv("TESSERA_OPENCL_INJECT_BUILD_ERROR");
    }
    plugin->shutdown();
}

HARNESS_MAIN("opencl plugin", HARNESS_TEST(test_ocl_plugin))
