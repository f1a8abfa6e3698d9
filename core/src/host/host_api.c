/* The public entry points of the plugin host: start it, stop it, abort. */
#include <tessera/tessera.h>

#include "host/host.h"

int tessera_init(const tessera_init_params *params) {
    if (host_is_initialized()) return 0;
    host_options opt = {0};
    if (params) {
        opt.plugin_dirs = params->plugin_dirs;
        opt.n_plugin_dirs = params->n_plugin_dirs;
        /* 0 quiet (errors only), 1 info, 2 debug */
        opt.verbosity = params->verbosity <= 0 ? TSR_LOG_WARN
                        : params->verbosity == 1 ? TSR_LOG_INFO : TSR_LOG_DEBUG;
    } else {
        opt.verbosity = TSR_LOG_WARN;
    }
    return host_init(&opt);
}

void tessera_shutdown(void) { host_shutdown(); }

void tessera_abort(void) { host_request_abort(); }
void tessera_abort_clear(void) { host_clear_abort(); }
bool tessera_aborted(void) { return host_abort_requested(); }
