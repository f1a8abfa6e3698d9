/*
 * harness_tessera.c — the fixtures of harness.h that start Tessera: the
 * host with this build's plugins, a model, a context.
 */
#include "harness.h"

#include <stdlib.h>

#include "host/host.h"

void harness_host_start(void) {
    /* ref, and the plugins built in this tree (nothing installed elsewhere) */
    const char *build = getenv("TESSERA_BUILD_ROOT");
    const char *dirs[1] = {build};
    host_options ho = {.plugin_dirs = dirs, .n_plugin_dirs = build ? 1 : 0, .only_plugin_dirs = true};
    tessera_init_params ip = {0};
    REQUIRE(host_init(&ho) == 0 && tessera_init(&ip) == 0, "init: %s", tessera_last_error());
}

const char *harness_cpu_plugin(void) {
    for (int32_t i = 0; i < host_device_count(); i++) {
        const host_device *hd = host_device_get(i);
        if (hd != host_device_ref() && hd->info.kind == TSR_DEVICE_CPU) return hd->name;
    }
    return NULL;
}

tessera_model *harness_model_load(const char *path, const char *devices, const tessera_model_params *mp) {
    tessera_model_params p = mp ? *mp : tessera_model_default_params();
    if (devices) p.devices = devices;
    tessera_model *m = tessera_model_load(path, &p);
    REQUIRE(m != NULL, "%s on %s: %s", path, p.devices ? p.devices : "the default devices", tessera_last_error());
    return m;
}

tessera_context *harness_context(tessera_model *model, const tessera_context_params *cp) {
    tessera_context_params p = cp ? *cp : tessera_context_default_params();
    tessera_context *ctx = tessera_context_new(model, &p);
    REQUIRE(ctx != NULL, "context: %s", tessera_last_error());
    return ctx;
}
