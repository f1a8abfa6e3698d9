/* The public entry points of the plugin host: start it, stop it, abort,
 * list its devices. */
#include <tessera/tessera.h>

#include <stdio.h>

#include "host/host.h"
#include "host/host_guard.h"
#include "host/host_log.h"
#include "util/error.h"

int tessera_init(const tessera_init_params *params) {
    if (host_is_initialized()) return 0;
    host_options opt = {0};
    if (params) {
        opt.plugin_dirs = params->plugin_dirs;
        opt.n_plugin_dirs = params->n_plugin_dirs;
        /* -1 errors only, 0 quiet (warnings and errors), 1 info, 2 debug */
        opt.verbosity = params->verbosity < 0 ? TSR_LOG_ERROR
                        : params->verbosity == 0 ? TSR_LOG_WARN
                        : params->verbosity == 1 ? TSR_LOG_INFO : TSR_LOG_DEBUG;
    } else {
        opt.verbosity = TSR_LOG_WARN;
    }
    return host_init(&opt);
}

void tessera_shutdown(void) { host_shutdown(); }

void tessera_log_set(tessera_log_fn fn, void *user) { host_log_set(fn, user); }

int tessera_set_crash_guard(bool enable) { return host_guard_enable(enable); }

void tessera_abort(void) { host_request_abort(); }
void tessera_abort_clear(void) { host_clear_abort(); }
bool tessera_aborted(void) { return host_abort_requested(); }

int32_t tessera_devices(tessera_device_info *out, int32_t max) {
    if (!host_is_initialized()) return error_set("tessera_devices: call tessera_init first");
    int32_t n = host_device_count();
    for (int32_t i = 0; i < n && i < max; i++) {
        const host_device *d = host_device_get(i);
        tessera_device_info *o = &out[i];
        snprintf(o->name, sizeof o->name, "%s", d->name);
        snprintf(o->kind, sizeof o->kind, "%s", host_device_kind_name(d->info.kind));
        snprintf(o->description, sizeof o->description, "%s",
                 d->info.description ? d->info.description : "");
        snprintf(o->plugin_path, sizeof o->plugin_path, "%s", d->plugin_path ? d->plugin_path : "");
        o->memory_total = d->info.memory_total;
        o->memory_free = d->info.memory_free;
    }
    return n;
}
