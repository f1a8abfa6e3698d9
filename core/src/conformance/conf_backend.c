/*
 * conf_backend — load the backend under test: the built-in ref, or a plugin
 * shared object opened with dlopen exactly as the host would (one symbol,
 * tsr_plugin_entry; ABI major must match; init with host services).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance/conf_internal.h"
#include "host/host_elf.h"
#include "host/host_log.h"
#include "ref/ref.h"
#include "util/error.h"

static void conf_log(int level, const char *plugin_name, const char *message) {
    static const char *const names[] = {"error", "warning", "info", "debug"};
    if (level > TSR_LOG_WARN) return; /* the report is the output; keep it readable */
    host_log_printf(level, "[%s] %s: %s\n", plugin_name ? plugin_name : "?",
                    level >= 0 && level <= TSR_LOG_DEBUG ? names[level] : "log", message ? message : "");
}

/* The supports_op call in progress, for tsr_host.decline. */
static _Thread_local struct {
    char *why;
    size_t size;
    const tsr_node *node;
} asking;

void conf_backend_asking(char *why, size_t why_size, const tsr_node *node) {
    asking.why = why;
    asking.size = why_size;
    asking.node = node;
}

static void conf_decline(const tsr_node *node, const char *reason) {
    if (asking.why && asking.size && node == asking.node && reason)
        snprintf(asking.why, asking.size, "%s", reason);
}

/* The table must have the fields the suite calls. */
static int plugin_table_ok(const tsr_plugin *p, const char *target) {
    if (TSR_ABI_MAJOR_OF(p->abi_version) != TSR_ABI_MAJOR)
        return error_set("plugin %s: built for ABI %u.%u, this host speaks %u.%u", target,
                         TSR_ABI_MAJOR_OF(p->abi_version), TSR_ABI_MINOR_OF(p->abi_version),
                         (unsigned)TSR_ABI_MAJOR, (unsigned)TSR_ABI_MINOR);
    if (p->struct_size < offsetof(tsr_plugin, shutdown) + sizeof p->shutdown)
        return error_set("plugin %s: tsr_plugin struct_size %u is too small", target,
                         (unsigned)p->struct_size);
    if (!p->init || !p->device_count || !p->device_get)
        return error_set("plugin %s: init, device_count or device_get is NULL", target);
    return 0;
}

int conf_backend_open(conf_backend *b, const char *target) {
    memset(b, 0, sizeof *b);
    b->host = (tsr_host){
        .struct_size = sizeof(tsr_host),
        .abi_version = TSR_ABI_VERSION,
        .log = conf_log,
        .abort_flag = &b->abort_flag,
        .n_threads = 1,
        .cache_dir = NULL,
        .decline = conf_decline,
    };
    /* the host's cache directory: compiled kernels survive between the
     * per-family child processes */
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s/tessera", xdg);
    else if (home && home[0])
        snprintf(b->cache_dir, sizeof b->cache_dir, "%s/.cache/tessera", home);
    b->host.cache_dir = b->cache_dir[0] ? b->cache_dir : NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 0) b->host.n_threads = ncpu > 64 ? 64 : (int32_t)ncpu;

    if (!strcmp(target, "ref")) {
        b->plugin = ref_plugin_entry(TSR_ABI_VERSION);
    } else {
        struct stat st;
        if (stat(target, &st) != 0) return error_set("plugin %s: no such file", target);
        /* dlopen searches the library path for names without a slash */
        char path[4096];
        snprintf(path, sizeof path, "%s%s", strchr(target, '/') ? "" : "./", target);
        char elf_why[256];
        if (host_elf_check(path, elf_why, sizeof elf_why))
            return error_set("plugin %s: cannot load: %s", target, elf_why);
        b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!b->dl) return error_set("plugin %s: cannot load: %s", target, dlerror());
        tsr_plugin_entry_fn entry;
        *(void **)&entry = dlsym(b->dl, TSR_PLUGIN_ENTRY_SYMBOL);
        if (!entry) {
            conf_backend_close(b);
            return error_set("plugin %s: no symbol %s (not a Tessera plugin)", target,
                             TSR_PLUGIN_ENTRY_SYMBOL);
        }
        b->plugin = entry(TSR_ABI_VERSION);
        if (!b->plugin) {
            conf_backend_close(b);
            return error_set("plugin %s: declines host ABI %u.%u (tsr_plugin_entry returned NULL)",
                             target, (unsigned)TSR_ABI_MAJOR, (unsigned)TSR_ABI_MINOR);
        }
    }
    if (!b->plugin) return error_set("plugin %s: no plugin table", target);
    if (plugin_table_ok(b->plugin, target)) {
        conf_backend_close(b);
        return -1;
    }
    if (b->plugin->score && b->plugin->score() <= 0) {
        snprintf(b->reason, sizeof b->reason, "plugin '%s' scores 0: it cannot run on this machine",
                 b->plugin->name ? b->plugin->name : "?");
        return 0;
    }
    char why[256] = "";
    tsr_status st = b->plugin->init(&b->host, why, sizeof why);
    why[sizeof why - 1] = '\0';
    if (st != TSR_OK) {
        snprintf(b->reason, sizeof b->reason, "plugin '%s' init failed (status %d): %s",
                 b->plugin->name ? b->plugin->name : "?", (int)st, why[0] ? why : "no reason given");
        return 0;
    }
    b->initialized = true;
    if (b->plugin->device_count() <= 0)
        snprintf(b->reason, sizeof b->reason, "plugin '%s' reports no devices: %s",
                 b->plugin->name ? b->plugin->name : "?", why[0] ? why : "no reason given");
    return 0;
}

int32_t conf_backend_device_count(const conf_backend *b) {
    if (!b->plugin || !b->initialized) return 0;
    int32_t n = b->plugin->device_count();
    return n > 0 ? n : 0;
}

void conf_backend_close(conf_backend *b) {
    if (b->initialized && b->plugin && b->plugin->shutdown) b->plugin->shutdown();
    b->initialized = false;
    if (b->dl) dlclose(b->dl);
    b->dl = NULL;
    b->plugin = NULL;
}
