/*
 * vk_test_open — the Vulkan plugin of a test: open PLUGIN.so, initialise
 * it with the test's host table, take vulkan0 and a queue on it. Exits 77
 * (harness_skip) when the machine has no Vulkan device, 1 when the plugin
 * cannot be opened or gives no queue. Header-only (one caller per test).
 */
#ifndef TESSERA_VK_TEST_OPEN_H
#define TESSERA_VK_TEST_OPEN_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#include <tessera/plugin.h>

typedef struct vk_test_plugin {
    void *dl;
    const tsr_plugin *plugin;
    tsr_device *dev;
    tsr_queue *queue;
} vk_test_plugin;

static vk_test_plugin vk_test_open(const char *path, const tsr_host *host) {
    vk_test_plugin t = {0};
    t.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!t.dl) {
        printf("cannot open %s: %s\n", path, dlerror());
        exit(1);
    }
    tsr_plugin_entry_fn entry;
    *(void **)&entry = dlsym(t.dl, TSR_PLUGIN_ENTRY_SYMBOL);
    t.plugin = entry ? entry(TSR_ABI_VERSION) : NULL;
    char reason[256] = "";
    if (!t.plugin || t.plugin->init(host, reason, sizeof reason) != TSR_OK || t.plugin->device_count() == 0) {
        if (t.plugin) t.plugin->shutdown();
        dlclose(t.dl);
        harness_skip("no Vulkan device: %s", t.plugin ? reason : "no plugin table");
    }
    t.dev = t.plugin->device_get(0);
    if (t.dev->api->queue_create(t.dev, &t.queue) != TSR_OK) {
        printf("vulkan0: no queue\n");
        exit(1);
    }
    return t;
}

static void vk_test_close(vk_test_plugin *t) {
    if (t->queue) t->queue->api->destroy(t->queue);
    t->plugin->shutdown();
    dlclose(t->dl);
}

#endif
