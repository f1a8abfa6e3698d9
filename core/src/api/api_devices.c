/* tessera_devices.h: the plugin host's device and plugin records (host/)
 * copied into the public structs. */
#include <tessera/tessera_devices.h>

#include <stdlib.h>

#include "host/host.h"
#include "util/error.h"

static const char *or_empty(const char *s) { return s ? s : ""; }

static void details_of(const host_device *d, tessera_device_details *o) {
    o->index = d->index;
    o->name = d->name;
    o->kind = host_device_kind_name(d->info.kind);
    o->is_cpu = d->info.kind == TSR_DEVICE_CPU;
    o->description = or_empty(d->info.description);
    o->features = or_empty(d->info.features);
    o->memory_total = d->info.memory_total;
    o->memory_free = d->info.memory_free;
    o->host_visible = d->info.host_visible != 0;
    o->reads_host_memory = d->info.reads_host_memory != 0;
    o->priority = d->info.priority;
    o->max_alloc_size = host_device_max_alloc(d);
    o->buffer_alignment = host_device_alignment(d);
    o->plugin_name = d->plugin ? or_empty(d->plugin->name) : "";
    o->plugin_version = d->plugin ? or_empty(d->plugin->version) : "";
    o->plugin_path = or_empty(d->plugin_path);
}

/* The devices host_select_devices(list) or host_default_devices gives. */
static int32_t copy_devices(const char *who, const char *list, bool defaults, tessera_device_details *out,
                            int32_t max) {
    if (!host_is_initialized()) return error_set("%s: call tessera_init first", who);
    if (max <= 0) return 0;
    host_device **devs = malloc((size_t)max * sizeof *devs);
    if (!devs) return error_set("%s: out of memory", who);
    int32_t n = defaults ? host_default_devices(devs, max) : host_select_devices(list, devs, max);
    for (int32_t i = 0; i < n; i++) details_of(devs[i], &out[i]);
    free(devs);
    return n;
}

int32_t tessera_devices_select(const char *list, tessera_device_details *out, int32_t max) {
    return copy_devices("tessera_devices_select", list, false, out, max);
}

int32_t tessera_devices_default(tessera_device_details *out, int32_t max) {
    return copy_devices("tessera_devices_default", NULL, true, out, max);
}

int32_t tessera_plugins(tessera_plugin_record *out, int32_t max) {
    if (!host_is_initialized()) return error_set("tessera_plugins: call tessera_init first");
    int32_t n = host_plugin_count();
    for (int32_t i = 0; i < n && i < max; i++) {
        const host_plugin_record *p = host_plugin_get(i);
        tessera_plugin_record *o = &out[i];
        o->path = or_empty(p->path);
        o->name = or_empty(p->name);
        o->version = or_empty(p->version);
        o->state = p->state;
        o->score = p->score;
        o->n_devices = p->n_devices;
        o->reason = or_empty(p->reason);
    }
    return n;
}
