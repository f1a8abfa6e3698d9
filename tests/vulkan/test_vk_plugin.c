/*
 * The Vulkan plugin through its ABI alone (dlopen, as a host would):
 *   - with no loader (TESSERA_VULKAN_LOADER names a missing library) init
 *     succeeds with zero devices and a reason;
 *   - every device describes itself (GPU kind, memory, priority; lavapipe
 *     below the CPU plugins);
 *   - writes and reads round-trip at odd offsets and sizes, in place
 *     (unified memory) and through staging (TESSERA_VULKAN_STAGING=1);
 *     out-of-range copies are refused;
 *   - an impossible allocation is TSR_ERR_NO_MEMORY with a log line saying
 *     how much was needed and what is free;
 *   - compute refuses tensors outside its buffers or in host memory with
 *     TSR_ERR_INVALID, and a chain of dependent nodes in one compute call
 *     (barriers between them) gives the right numbers.
 * Exit 77 when the machine has no Vulkan device.
 *
 * usage: test_vk_plugin PLUGIN.so
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin.h>

#include "harness.h"
#include "../plugin_log.h"

static volatile int abort_flag;
static const tsr_host host = {PLUGIN_TEST_HOST_FIELDS(&abort_flag, 1)};

static const tsr_plugin *open_plugin(const char *path, void **dl) {
    *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) {
        printf("cannot open %s: %s\n", path, dlerror());
        return NULL;
    }
    tsr_plugin_entry_fn entry;
    *(void **)&entry = dlsym(*dl, TSR_PLUGIN_ENTRY_SYMBOL);
    return entry ? entry(TSR_ABI_VERSION) : NULL;
}

static void test_no_loader(const char *path) {
    setenv("TESSERA_VULKAN_LOADER", "libtessera-no-such-vulkan.so.1", 1);
    void *dl;
    const tsr_plugin *p = open_plugin(path, &dl);
    EXPECT(p != NULL, "no plugin table");
    if (p) {
        char reason[256] = "";
        tsr_status st = p->init(&host, reason, sizeof reason);
        EXPECT(st == TSR_OK, "init without a loader returned %d", (int)st);
        EXPECT(p->device_count() == 0, "%d devices without a loader", (int)p->device_count());
        EXPECT(strstr(reason, "no Vulkan loader") && strstr(reason, "libtessera-no-such-vulkan"),
               "reason does not name the missing loader: '%s'", reason);
        printf("no loader: %s\n", reason);
        p->shutdown();
    }
    if (dl) dlclose(dl);
    unsetenv("TESSERA_VULKAN_LOADER");
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void test_copies(tsr_device *dev, tsr_queue *q) {
    tsr_buffer *b = NULL;
    const uint64_t size = 100003; /* odd: the last word is partial */
    EXPECT(dev->api->buffer_alloc(dev, size, &b) == TSR_OK && b, "buffer_alloc(%llu)", (unsigned long long)size);
    if (!b) return;
    uint8_t *src = malloc(size), *got = malloc(size);
    fill(src, size, 1);
    EXPECT(q->api->write(q, b, 0, src, size) == TSR_OK, "write whole");
    memset(got, 0, size);
    EXPECT(q->api->read(q, b, 0, got, size) == TSR_OK && !memcmp(got, src, size), "whole round trip");
    /* odd offsets and lengths leave the neighbours alone */
    uint8_t patch[37];
    fill(patch, sizeof patch, 9);
    EXPECT(q->api->write(q, b, 1001, patch, sizeof patch) == TSR_OK, "write patch");
    memcpy(src + 1001, patch, sizeof patch);
    EXPECT(q->api->read(q, b, 999, got, 41) == TSR_OK && !memcmp(got, src + 999, 41), "patch round trip");
    EXPECT(q->api->read(q, b, size - 3, got, 3) == TSR_OK && !memcmp(got, src + size - 3, 3), "tail read");
    /* out of range */
    EXPECT(q->api->write(q, b, size - 2, patch, 3) == TSR_ERR_INVALID, "write past the end accepted");
    EXPECT(q->api->read(q, b, UINT64_MAX - 1, got, 4) == TSR_ERR_INVALID, "read at a huge offset accepted");
    EXPECT(q->api->read(q, b, 0, NULL, 4) == TSR_ERR_INVALID, "read into NULL accepted");
    EXPECT(q->api->synchronize(q) == TSR_OK, "synchronize");
    void *host_ptr = dev->api->buffer_host_ptr(dev, b);
    tsr_device_info info = {.struct_size = sizeof info};
    dev->api->get_info(dev, &info);
    EXPECT((host_ptr != NULL) == (info.host_visible != 0), "host_visible %d but host ptr %p", (int)info.host_visible,
           host_ptr);
    if (host_ptr) EXPECT(!memcmp(host_ptr, src, size), "the host address does not show the buffer's bytes");
    dev->api->buffer_free(dev, b);
    free(src);
    free(got);
}

static void test_no_memory(tsr_device *dev) {
    tsr_buffer *b = NULL;
    plugin_log_clear();
    tsr_status st = dev->api->buffer_alloc(dev, UINT64_C(1) << 52, &b);
    EXPECT(st == TSR_ERR_NO_MEMORY && b == NULL, "a 4 PiB buffer: status %d", (int)st);
    EXPECT(strstr(plugin_log_last, "out of device memory") && strstr(plugin_log_last, "MiB"),
           "no message saying how much was needed and free: '%s'", plugin_log_last);
    printf("out of memory: %s\n", plugin_log_last);
}

static void contiguous(tsr_tensor *t, int32_t dtype, int64_t n0, int64_t n1, tsr_buffer *b, uint64_t off) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ne[0] = n0;
    t->ne[1] = n1;
    t->ne[2] = t->ne[3] = 1;
    t->nb[0] = dtype == TSR_DTYPE_F32 ? 4 : 2;
    t->nb[1] = t->nb[0] * n0;
    t->nb[2] = t->nb[3] = t->nb[1] * n1;
    t->buffer = b;
    t->offset = off;
    t->name = "t";
}

/* y = silu(scale(x) + x) * x, chained in one compute call through one
 * buffer: each node reads what the previous wrote. */
static void test_chain(tsr_device *dev, tsr_queue *q) {
    enum { N = 1000 };
    tsr_buffer *b = NULL;
    EXPECT(dev->api->buffer_alloc(dev, 4 * N * 4, &b) == TSR_OK, "buffer_alloc");
    if (!b) return;
    float x[N], got[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 37) * 0.125f - 2.0f;
    q->api->write(q, b, 0, x, sizeof x);
    tsr_tensor tx, t1, t2, t3;
    contiguous(&tx, TSR_DTYPE_F32, N, 1, b, 0);
    contiguous(&t1, TSR_DTYPE_F32, N, 1, b, 4 * N);
    contiguous(&t2, TSR_DTYPE_F32, N, 1, b, 8 * N);
    contiguous(&t3, TSR_DTYPE_F32, N, 1, b, 12 * N);
    tsr_node nodes[3] = {
        {.op = TSR_OP_SCALE, .n_src = 1, .dst = &t1, .src = {&tx}, .fparams = {3.0f, 0.5f}},
        {.op = TSR_OP_ADD, .n_src = 2, .dst = &t2, .src = {&t1, &tx}},
        {.op = TSR_OP_SWIGLU, .n_src = 2, .dst = &t3, .src = {&t2, &tx}},
    };
    for (int i = 0; i < 3; i++) EXPECT(dev->api->supports_op(dev, &nodes[i]), "node %d not supported", i);
    EXPECT(q->api->compute(q, nodes, 3) == TSR_OK, "compute");
    EXPECT(q->api->synchronize(q) == TSR_OK, "synchronize");
    EXPECT(q->api->read(q, b, 12 * N, got, sizeof got) == TSR_OK, "read");
    double worst = 0;
    for (int i = 0; i < N; i++) {
        float s = x[i] * 3.0f + 0.5f + x[i];
        float want = s / (1.0f + expf(-s)) * x[i];
        double e = fabs((double)got[i] - want) / (1e-6 + fabs(want));
        if (e > worst) worst = e;
    }
    EXPECT(worst < 1e-5, "chained result off by %.3g (relative)", worst);

    /* A tensor outside its buffer, and one in host memory: refused. */
    tsr_tensor outside;
    contiguous(&outside, TSR_DTYPE_F32, N, 1, b, 14 * N);
    tsr_node bad = {.op = TSR_OP_SILU, .n_src = 1, .dst = &t1, .src = {&outside}};
    EXPECT(q->api->compute(q, &bad, 1) == TSR_ERR_INVALID, "a tensor past the buffer's end was accepted");
    tsr_tensor in_host;
    contiguous(&in_host, TSR_DTYPE_F32, N, 1, NULL, 0);
    in_host.data = x;
    bad.src[0] = &in_host;
    EXPECT(q->api->compute(q, &bad, 1) == TSR_ERR_INVALID, "a tensor in host memory was accepted");
    /* Declined: ops this device does not run */
    tsr_node argmax = {.op = TSR_OP_ARGMAX, .n_src = 1, .dst = &t1, .src = {&tx}};
    EXPECT(!dev->api->supports_op(dev, &argmax), "ARGMAX into an F32 dst claimed");
    tsr_node attn = {.op = TSR_OP_FLASH_ATTN, .n_src = 3, .dst = &t1, .src = {&tx, &tx, &tx}};
    EXPECT(!dev->api->supports_op(dev, &attn), "FLASH_ATTN with head size 1000 claimed");
    /* CPY into a KV cache block type runs here (tests/vulkan/test_vk_kv.c) */
    tsr_tensor x32, q8;
    contiguous(&x32, TSR_DTYPE_F32, 32, 1, b, 0);
    contiguous(&q8, TSR_DTYPE_F32, 32, 1, b, 4 * N);
    q8.dtype = TSR_DTYPE_Q8_0;
    q8.nb[0] = q8.nb[1] = q8.nb[2] = q8.nb[3] = 34;
    tsr_node quantize = {.op = TSR_OP_CPY, .n_src = 1, .dst = &q8, .src = {&x32}};
    EXPECT(dev->api->supports_op(dev, &quantize), "CPY into Q8_0 declined");
    /* abort flag */
    abort_flag = 1;
    EXPECT(q->api->compute(q, nodes, 3) == TSR_ERR_ABORTED, "compute ignored the abort flag");
    abort_flag = 0;
    dev->api->buffer_free(dev, b);
}

/* Usage: test_vk_plugin PLUGIN.so */
TEST(test_loader) {
    REQUIRE(harness_arg(1) != NULL, "usage: test_vk_plugin PLUGIN.so");
    test_no_loader(harness_arg(1));
}

TEST(test_devices) {
    REQUIRE(harness_arg(1) != NULL, "usage: test_vk_plugin PLUGIN.so");
    void *dl;
    const tsr_plugin *p = open_plugin(harness_arg(1), &dl);
    REQUIRE(p != NULL, "%s is not a plugin", harness_arg(1));
    char reason[256] = "";
    if (p->init(&host, reason, sizeof reason) != TSR_OK || p->device_count() == 0)
        harness_skip("no Vulkan device: %s", reason);
    for (int32_t i = 0; i < p->device_count(); i++) {
        tsr_device *dev = p->device_get(i);
        tsr_device_info info = {.struct_size = sizeof info};
        EXPECT(dev && dev->api->get_info(dev, &info) == TSR_OK, "get_info of device %d", (int)i);
        if (!dev) continue;
        printf("vulkan%d: %s [%s], %.0f MiB total, %.0f MiB free, host-visible %d, priority %d\n", (int)i,
               info.description, info.features, (double)info.memory_total / 1048576.0,
               (double)info.memory_free / 1048576.0, (int)info.host_visible, (int)info.priority);
        EXPECT(info.kind == TSR_DEVICE_GPU, "kind %d", (int)info.kind);
        EXPECT(info.reads_host_memory == 0, "reads_host_memory");
        EXPECT(info.memory_total > 0, "no memory reported");
        if (strstr(info.features, "cpu-implementation")) EXPECT(info.priority < 100, "CPU implementation priority %d",
                                                                (int)info.priority);
        tsr_queue *q = NULL;
        EXPECT(dev->api->queue_create(dev, &q) == TSR_OK && q, "queue_create");
        if (!q) continue;
        test_copies(dev, q);
        test_chain(dev, q);
        test_no_memory(dev);
        q->api->destroy(q);
    }
    p->shutdown();
    dlclose(dl);
}

HARNESS_MAIN("vulkan plugin", HARNESS_TEST(test_loader), HARNESS_TEST(test_devices))
