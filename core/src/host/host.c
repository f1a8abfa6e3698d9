/*
 * host — plugin registry: discovery, dlopen, ABI negotiation, device list,
 * host services. See host.h.
 */
#include "host/host.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <tessera/plugin_check.h>

#include "host/host_elf.h"
#include "host/host_guard.h"
#include "host/host_log.h"
#include "host/host_probe.h"
#include "ref/ref.h"
#include "util/error.h"

#define PLUGIN_PREFIX "libtessera-backend-"
#define PLUGIN_SUFFIX ".so"
#define BUILTIN_PATH "(built-in)"

enum { PLUGIN_NAME_MAX = 32, PLUGIN_VERSION_MAX = 64 };

/* One plugin file considered, whatever became of it. */
typedef struct plugin_slot {
    host_plugin_record rec; /* points into the arrays below */
    char path[PATH_MAX];
    char name[PLUGIN_NAME_MAX];
    char version[PLUGIN_VERSION_MAX];
    char reason[HOST_REASON_MAX];
    void *dl;               /* dlopen handle; NULL for the built-in */
    const tsr_plugin *table;
    bool needs_shutdown;    /* init succeeded */
    /* Probed in a child and not started here (host_probe.h): its devices'
     * descriptions, which the device list points into until it starts. */
    host_probe_device *probe;
    int32_t n_probe;
    bool deferred;
} plugin_slot;

/* The registry: the library's only global mutable state (docs/design.md). */
static struct {
    bool initialized;
    plugin_slot *plugins;
    int32_t n_plugins, cap_plugins;
    host_device *devices;
    int32_t n_devices;
    tsr_host services;
    char cache_dir[PATH_MAX];
} reg;

/* Written from signal handlers: kept outside the struct, plain int as the
 * ABI's tsr_host.abort_flag requires. */
static volatile int abort_flag;
static int32_t log_verbosity = TSR_LOG_WARN;

/* The supports_op call in progress on this thread, so tsr_host.decline can
 * put the plugin's reason where the asker wants it. */
static _Thread_local struct {
    const tsr_node *node;
    char *why;
    size_t why_size;
    bool said;
} asking;

static void decline_from_plugin(const tsr_node *node, const char *reason) {
    if (!asking.node || node != asking.node || !reason) return; /* not inside supports_op */
    if (asking.why && asking.why_size) snprintf(asking.why, asking.why_size, "%s", reason);
    asking.said = true;
}

/* ---------------------------------------------------------- services */

/* The plugins' log service and host_log: "tessera: who: level: message" to
 * the application's log callback (host_log.h), none by default. */
static void log_line(int level, const char *who, const char *message) {
    static const char *const level_names[] = {"error", "warning", "info", "debug"};
    if (level > log_verbosity || !host_log_wanted()) return;
    const char *lv = level >= 0 && level <= TSR_LOG_DEBUG ? level_names[level] : "log";
    host_log_printf(level, "tessera: %s: %s: %s\n", who ? who : "?", lv, message ? message : "");
}

void host_log(int level, const char *who, const char *fmt, ...) {
    if (level > log_verbosity || !host_log_wanted()) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_line(level, who, msg);
}

void host_set_verbosity(int32_t level) { log_verbosity = level; }

void host_set_n_threads(int32_t n) {
    if (n <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (int32_t)cpus : 1;
    }
    reg.services.n_threads = n;
}

void host_request_abort(void) { abort_flag = 1; }
void host_clear_abort(void) { abort_flag = 0; }
bool host_abort_requested(void) { return abort_flag != 0; }

const tsr_host *host_services(void) { return &reg.services; }

const char *host_device_kind_name(int32_t kind) {
    switch (kind) {
    case TSR_DEVICE_CPU: return "CPU";
    case TSR_DEVICE_GPU: return "GPU";
    case TSR_DEVICE_ACCEL: return "accelerator";
    default: return "unknown";
    }
}

static void services_init(const host_options *opt) {
    memset(&reg.services, 0, sizeof reg.services);
    reg.services.struct_size = sizeof reg.services;
    reg.services.abi_version = TSR_ABI_VERSION;
    reg.services.log = log_line;
    reg.services.abort_flag = &abort_flag;
    reg.services.decline = decline_from_plugin;
    host_set_n_threads(opt ? opt->n_threads : 0);
    if (opt) log_verbosity = opt->verbosity;
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    reg.cache_dir[0] = '\0';
    if (xdg && xdg[0] == '/')
        snprintf(reg.cache_dir, sizeof reg.cache_dir, "%s/tessera", xdg);
    else if (home && home[0])
        snprintf(reg.cache_dir, sizeof reg.cache_dir, "%s/.cache/tessera", home);
    reg.services.cache_dir = reg.cache_dir[0] ? reg.cache_dir : NULL;
}

/* ----------------------------------------------------------- plugins */

static plugin_slot *slot_add(const char *path) {
    if (reg.n_plugins == reg.cap_plugins) {
        int32_t cap = reg.cap_plugins ? reg.cap_plugins * 2 : 8;
        plugin_slot *p = realloc(reg.plugins, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        reg.plugins = p;
        reg.cap_plugins = cap;
    }
    plugin_slot *s = &reg.plugins[reg.n_plugins++];
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->rec.state = HOST_PLUGIN_REJECTED;
    return s;
}

static void slot_reject(plugin_slot *s, const char *fmt, ...) TSR_PRINTF(2, 3);
static void slot_reject(plugin_slot *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof s->reason, fmt, ap);
    va_end(ap);
    s->rec.state = HOST_PLUGIN_REJECTED;
    s->table = NULL;
    if (s->dl) dlclose(s->dl);
    s->dl = NULL;
    host_log(TSR_LOG_INFO, "host", "plugin %s rejected: %s", s->path, s->reason);
}

static bool name_is_valid(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= PLUGIN_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* Check the table a plugin returned; false with s rejected. */
static bool table_accept(plugin_slot *s, const tsr_plugin *p) {
    if (!p) {
        slot_reject(s, "tsr_plugin_entry returned NULL for host ABI %u.%u (the plugin cannot "
                       "serve this host)",
                    TSR_ABI_MAJOR, TSR_ABI_MINOR);
        return false;
    }
    if (TSR_ABI_MAJOR_OF(p->abi_version) != TSR_ABI_MAJOR) {
        slot_reject(s, "ABI %u.%u, host speaks %u.x", TSR_ABI_MAJOR_OF(p->abi_version),
                    TSR_ABI_MINOR_OF(p->abi_version), TSR_ABI_MAJOR);
        return false;
    }
    const size_t need = offsetof(tsr_plugin, shutdown) + sizeof p->shutdown;
    if (p->struct_size < need) {
        slot_reject(s, "plugin table is %u bytes, ABI %u.x needs at least %zu", p->struct_size,
                    TSR_ABI_MAJOR, need);
        return false;
    }
    if (!p->name || !p->init || !p->device_count || !p->device_get) {
        slot_reject(s, "plugin table lacks %s", !p->name ? "a name" : !p->init ? "init"
                                                : !p->device_count ? "device_count"
                                                                   : "device_get");
        return false;
    }
    if (!name_is_valid(p->name)) {
        slot_reject(s, "plugin name '%.40s' is not 1-31 characters of [a-z0-9_-]", p->name);
        return false;
    }
    snprintf(s->name, sizeof s->name, "%s", p->name);
    snprintf(s->version, sizeof s->version, "%s", p->version ? p->version : "");
    if (strcmp(p->name, "ref") == 0 && s->dl) {
        slot_reject(s, "plugin name 'ref' is reserved for the built-in reference backend");
        return false;
    }
    host_guard_enter(s->name, s->path, "score", NULL, NULL);
    s->rec.score = p->score ? p->score() : 1;
    host_guard_leave();
    if (s->rec.score <= 0) {
        slot_reject(s, "score %d: this build cannot run on this machine", s->rec.score);
        return false;
    }
    s->table = p;
    s->rec.state = HOST_PLUGIN_LOADED;
    return true;
}

static void plugin_open(const char *path) {
    plugin_slot *s = slot_add(path);
    if (!s) return;
    char elf_why[HOST_REASON_MAX];
    if (host_elf_check(path, elf_why, sizeof elf_why)) {
        slot_reject(s, "not a loadable library: %s", elf_why);
        return;
    }
    dlerror();
    s->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!s->dl) {
        const char *why = dlerror();
        slot_reject(s, "not a loadable library: %s", why ? why : "dlopen failed");
        return;
    }
    tsr_plugin_entry_fn entry;
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
    *(void **)&entry = dlsym(s->dl, TSR_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        slot_reject(s, "no %s symbol (not a Tessera plugin)", TSR_PLUGIN_ENTRY_SYMBOL);
        return;
    }
    host_guard_enter("?", s->path, "tsr_plugin_entry", NULL, NULL);
    const tsr_plugin *table = entry(TSR_ABI_VERSION);
    host_guard_leave();
    table_accept(s, table);
}

/* Same plugin name from several files: keep the best score (first found on
 * ties), mark the others superseded. */
static void resolve_duplicates(void) {
    for (int32_t i = 0; i < reg.n_plugins; i++) {
        plugin_slot *a = &reg.plugins[i];
        if (a->rec.state != HOST_PLUGIN_LOADED) continue;
        for (int32_t j = i + 1; j < reg.n_plugins; j++) {
            plugin_slot *b = &reg.plugins[j];
            if (b->rec.state != HOST_PLUGIN_LOADED || strcmp(a->name, b->name) != 0) continue;
            plugin_slot *loser = b->rec.score > a->rec.score ? a : b;
            plugin_slot *winner = loser == a ? b : a;
            snprintf(loser->reason, sizeof loser->reason,
                     "superseded by %.200s (score %d vs %d)", winner->path, winner->rec.score,
                     loser->rec.score);
            loser->rec.state = HOST_PLUGIN_SUPERSEDED;
            loser->table = NULL;
            if (loser->dl) dlclose(loser->dl);
            loser->dl = NULL;
            if (loser == a) break;
        }
    }
}

/* Init a kept plugin and add its devices. */
static void plugin_start(plugin_slot *s) {
    const tsr_plugin *p = s->table;
    char why[HOST_REASON_MAX] = "";
    host_guard_enter(s->name, s->path, "init", NULL, NULL);
    tsr_status st = p->init(&reg.services, why, sizeof why);
    host_guard_leave();
    why[sizeof why - 1] = '\0';
    if (st != TSR_OK) {
        slot_reject(s, "init failed (status %d): %s", (int)st, why[0] ? why : "no reason given");
        return;
    }
    s->needs_shutdown = true;
    host_guard_enter(s->name, s->path, "device_count", NULL, NULL);
    int32_t n = p->device_count();
    host_guard_leave();
    if (n <= 0) {
        if (p->shutdown) p->shutdown();
        s->needs_shutdown = false;
        slot_reject(s, "no devices: %s", why[0] ? why : "the plugin found none");
        return;
    }
    host_device *grown = realloc(reg.devices, (size_t)(reg.n_devices + n) * sizeof *grown);
    if (!grown) {
        slot_reject(s, "out of memory listing %d devices", n);
        return;
    }
    reg.devices = grown;
    int32_t added = 0;
    for (int32_t i = 0; i < n; i++) {
        host_guard_enter(s->name, s->path, "device_get", NULL, NULL);
        tsr_device *dev = p->device_get(i);
        host_guard_leave();
        const size_t api_need = offsetof(tsr_device_api, queue_create) + sizeof(void *);
        if (!dev || !dev->api || dev->api->struct_size < api_need || !dev->api->get_info ||
            !dev->api->supports_op || !dev->api->buffer_alloc || !dev->api->queue_create) {
            host_log(TSR_LOG_WARN, s->name, "device %d has an incomplete table; skipped", i);
            continue;
        }
        host_device *d = &reg.devices[reg.n_devices];
        memset(d, 0, sizeof *d);
        d->info.struct_size = sizeof d->info;
        host_guard_enter(s->name, s->path, "get_info", NULL, NULL);
        tsr_status info_st = dev->api->get_info(dev, &d->info);
        host_guard_leave();
        if (info_st != TSR_OK) {
            host_log(TSR_LOG_WARN, s->name, "device %d: get_info failed; skipped", i);
            continue;
        }
        if (!d->info.description) d->info.description = "";
        if (!d->info.features) d->info.features = "";
        d->dev = dev;
        d->plugin = p;
        d->plugin_path = BUILTIN_PATH; /* fixed up once the slots stop moving */
        d->plugin_slot = (int32_t)(s - reg.plugins);
        d->plugin_device = i;
        if (strcmp(s->name, "ref") == 0)
            snprintf(d->name, sizeof d->name, "ref");
        else
            snprintf(d->name, sizeof d->name, "%s%d", s->name, i);
        reg.n_devices++;
        added++;
    }
    s->rec.n_devices = added;
    if (added == 0) {
        if (p->shutdown) p->shutdown();
        s->needs_shutdown = false;
        slot_reject(s, "no usable devices (device tables incomplete or get_info failed)");
    }
}

static void device_close(host_device *d);

/* List the devices of a plugin probed in a child, without starting it. */
static void plugin_defer(plugin_slot *s) {
    host_device *grown = realloc(reg.devices, (size_t)(reg.n_devices + s->n_probe) * sizeof *grown);
    if (!grown) {
        slot_reject(s, "out of memory listing %d devices", s->n_probe);
        return;
    }
    reg.devices = grown;
    for (int32_t i = 0; i < s->n_probe; i++) {
        host_device *d = &reg.devices[reg.n_devices++];
        memset(d, 0, sizeof *d);
        d->info = s->probe[i].info;
        d->plugin = s->table;
        d->plugin_path = BUILTIN_PATH; /* fixed up once the slots stop moving */
        d->plugin_slot = (int32_t)(s - reg.plugins);
        d->plugin_device = i;
        snprintf(d->name, sizeof d->name, "%s%d", s->name, i);
    }
    s->rec.n_devices = s->n_probe;
    s->deferred = true;
    host_log(TSR_LOG_DEBUG, "host", "plugin %s: %d device(s) probed, started on first use", s->path, s->n_probe);
}

/* Start a deferred plugin here and bind its listed devices. -1 with the
 * reason in each device's open_reason. */
static int plugin_start_deferred(plugin_slot *s) {
    const tsr_plugin *p = s->table;
    char why[HOST_REASON_MAX] = "";
    const char *fail = NULL;
    host_guard_enter(s->name, s->path, "init", NULL, NULL);
    tsr_status st = p->init(&reg.services, why, sizeof why);
    host_guard_leave();
    why[sizeof why - 1] = '\0';
    if (st != TSR_OK) fail = why[0] ? why : "init failed";
    else s->needs_shutdown = true;
    s->deferred = false;
    for (int32_t j = 0; j < reg.n_devices; j++) {
        host_device *d = &reg.devices[j];
        if (d->plugin_slot != (int32_t)(s - reg.plugins) || d->dev) continue;
        tsr_device *dev = NULL;
        if (!fail) {
            host_guard_enter(s->name, s->path, "device_get", NULL, NULL);
            dev = p->device_get(d->plugin_device);
            host_guard_leave();
        }
        tsr_device_info info = {.struct_size = sizeof info};
        if (dev && dev->api && dev->api->get_info && dev->api->get_info(dev, &info) == TSR_OK) {
            if (!info.description) info.description = "";
            if (!info.features) info.features = "";
            d->dev = dev;
            d->info = info;
        } else {
            d->open_state = -1;
            snprintf(d->open_reason, sizeof d->open_reason, "starting the plugin failed: %.200s",
                     fail ? fail : "the device is gone");
        }
    }
    return fail ? -1 : 0;
}

/* --------------------------------------------------------- discovery */

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool is_plugin_file(const char *name) {
    size_t n = strlen(name), lp = strlen(PLUGIN_PREFIX), ls = strlen(PLUGIN_SUFFIX);
    return n > lp + ls && strncmp(name, PLUGIN_PREFIX, lp) == 0 &&
           strcmp(name + n - ls, PLUGIN_SUFFIX) == 0;
}

/* True if path (resolved) was already considered. */
static bool already_seen(const char *path) {
    char real[PATH_MAX];
    if (!realpath(path, real)) snprintf(real, sizeof real, "%s", path);
    for (int32_t i = 0; i < reg.n_plugins; i++) {
        char other[PATH_MAX];
        if (!realpath(reg.plugins[i].path, other))
            snprintf(other, sizeof other, "%s", reg.plugins[i].path);
        if (strcmp(real, other) == 0) return true;
    }
    return false;
}

static void scan_dir(const char *dir) {
    if (!dir || !dir[0]) return;
    DIR *d = opendir(dir);
    if (!d) {
        host_log(TSR_LOG_DEBUG, "host", "plugin directory %s: cannot open", dir);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_plugin_file(e->d_name)) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            char **grown = realloc(names, nc * sizeof *grown);
            if (!grown) break;
            names = grown;
            cap = nc;
        }
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_names); /* qsort(NULL, 0) is UB */
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX];
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len > 0 && (size_t)len < sizeof path && !already_seen(path)) plugin_open(path);
        free(names[i]);
    }
    free(names);
}

static void scan_path_list(const char *list) {
    if (!list) return;
    char *copy = strdup(list);
    if (!copy) return;
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        scan_dir(dir);
    free(copy);
}

static void scan_exe_dir(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    scan_dir(exe[0] ? exe : "/");
}

/* The directory "tessera" beside the file holding this code: for an
 * installed libtessera.so that is <libdir>/tessera, where meson installs the
 * plugins, wherever the tree was installed or moved to (DESTDIR, a wheel).
 * Linked statically into an executable it names <exe dir>/tessera. */
static void scan_library_dir(void) {
    Dl_info info;
    if (!dladdr((void *)scan_library_dir, &info) || !info.dli_fname) return;
    char dir[PATH_MAX];
    int n = snprintf(dir, sizeof dir, "%s", info.dli_fname);
    if (n <= 0 || (size_t)n >= sizeof dir) return;
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    size_t used = strlen(dir);
    if (used + sizeof "/tessera" > sizeof dir) return;
    memcpy(dir + used, "/tessera", sizeof "/tessera");
    scan_dir(dir);
}

/* ------------------------------------------------------------ devices */

static int device_rank(const host_device *d) {
    if (strcmp(d->name, "ref") == 0) return 3;
    switch (d->info.kind) {
    case TSR_DEVICE_GPU: return 0;
    case TSR_DEVICE_ACCEL: return 1;
    default: return 2;
    }
}

static int cmp_devices(const void *pa, const void *pb) {
    const host_device *a = pa, *b = pb;
    int ra = device_rank(a), rb = device_rank(b);
    if (ra != rb) return ra - rb;
    if (a->info.priority != b->info.priority) return a->info.priority > b->info.priority ? -1 : 1;
    return a->index - b->index; /* load order */
}

static void add_builtin_ref(void) {
    plugin_slot *s = slot_add(BUILTIN_PATH);
    if (!s) return;
    if (table_accept(s, ref_plugin_entry(TSR_ABI_VERSION))) plugin_start(s);
}

/* Probe every kept plugin in a child; start here those whose devices the
 * defaults may use (any CPU device; a GPU or accelerator not ranked below
 * the best CPU device, as host_default_devices decides), defer the rest.
 * A plugin whose probe fails is started here, which reports why. */
static void start_plugins(void) {
    int32_t best_cpu = INT32_MIN;
    for (int32_t i = 0; i < reg.n_plugins; i++) {
        plugin_slot *s = &reg.plugins[i];
        if (s->rec.state != HOST_PLUGIN_LOADED) continue;
        s->n_probe = host_probe_plugin(s->table, &reg.services, &s->probe);
        for (int32_t k = 0; k < s->n_probe; k++)
            if (s->probe[k].info.kind == TSR_DEVICE_CPU && s->probe[k].info.priority > best_cpu)
                best_cpu = s->probe[k].info.priority;
    }
    for (int32_t i = 0; i < reg.n_plugins; i++) {
        plugin_slot *s = &reg.plugins[i];
        if (s->rec.state != HOST_PLUGIN_LOADED) continue;
        bool unused = s->n_probe > 0;
        for (int32_t k = 0; k < s->n_probe; k++)
            if (s->probe[k].info.kind == TSR_DEVICE_CPU || s->probe[k].info.priority >= best_cpu) unused = false;
        if (unused) {
            plugin_defer(s);
        } else {
            free(s->probe);
            s->probe = NULL;
            s->n_probe = 0;
            plugin_start(s);
        }
    }
}

int host_init(const host_options *opt) {
    if (reg.initialized) return 0;
    services_init(opt);
    if (opt)
        for (int32_t i = 0; i < opt->n_plugin_dirs; i++) scan_dir(opt->plugin_dirs[i]);
    if (!opt || !opt->only_plugin_dirs) {
        scan_path_list(getenv("TESSERA_PLUGIN_PATH"));
        scan_exe_dir();
        scan_library_dir();
#ifdef TESSERA_PLUGIN_DIR
        scan_dir(TESSERA_PLUGIN_DIR);
#endif
    }
    resolve_duplicates();
    start_plugins();
    add_builtin_ref();
    for (int32_t i = 0; i < reg.n_devices; i++) reg.devices[i].index = i;
    qsort(reg.devices, (size_t)reg.n_devices, sizeof *reg.devices, cmp_devices);
    for (int32_t i = 0; i < reg.n_devices; i++) reg.devices[i].index = i;
    /* Records and devices point into the slots, which no longer move. */
    for (int32_t i = 0; i < reg.n_plugins; i++) {
        plugin_slot *s = &reg.plugins[i];
        s->rec.path = s->path;
        s->rec.name = s->name;
        s->rec.version = s->version;
        s->rec.reason = s->reason;
        for (int32_t j = 0; j < reg.n_devices; j++)
            if (s->table && reg.devices[j].plugin == s->table) reg.devices[j].plugin_path = s->path;
    }
    reg.initialized = true;
    if (!host_device_ref()) return error_set("host: the built-in reference backend failed to load: %s",
                                             reg.n_plugins ? reg.plugins[reg.n_plugins - 1].reason
                                                           : "out of memory");
    return 0;
}

void host_shutdown(void) {
    for (int32_t i = 0; i < reg.n_devices; i++) {
        host_device *d = &reg.devices[i];
        if (d->queue && d->queue->api && d->queue->api->destroy) d->queue->api->destroy(d->queue);
        d->queue = NULL;
        device_close(d);
    }
    /* Shut plugins down in reverse load order, then unload them. */
    for (int32_t i = reg.n_plugins - 1; i >= 0; i--) {
        plugin_slot *s = &reg.plugins[i];
        if (s->needs_shutdown && s->table && s->table->shutdown) s->table->shutdown();
        if (s->dl) dlclose(s->dl);
        free(s->probe);
    }
    free(reg.devices);
    free(reg.plugins);
    memset(&reg, 0, sizeof reg);
}

bool host_is_initialized(void) { return reg.initialized; }

int32_t host_device_count(void) { return reg.n_devices; }

host_device *host_device_get(int32_t index) {
    if (index < 0 || index >= reg.n_devices) return NULL;
    return &reg.devices[index];
}

host_device *host_device_find(const char *name) {
    for (int32_t i = 0; i < reg.n_devices; i++)
        if (strcmp(reg.devices[i].name, name) == 0) return &reg.devices[i];
    return NULL;
}

host_device *host_device_ref(void) { return host_device_find("ref"); }

int host_device_open(host_device *d) {
    if (d->open_state == 1) return 0;
    if (!d->dev && d->open_state == 0 && d->plugin_slot >= 0 && d->plugin_slot < reg.n_plugins)
        plugin_start_deferred(&reg.plugins[d->plugin_slot]);
    if (d->open_state == 0) {
        const tsr_device_api *api = d->dev->api;
        d->open_state = 1;
        if (TSR_HAS_FIELD(tsr_device_api, api->struct_size, open) && api->open) {
            char why[HOST_REASON_MAX] = "";
            host_guard_enter(d->plugin->name, d->plugin_path, "open", d->name, NULL);
            tsr_status st = api->open(d->dev, why, sizeof why);
            host_guard_leave();
            why[sizeof why - 1] = '\0';
            if (st != TSR_OK) {
                d->open_state = -1;
                snprintf(d->open_reason, sizeof d->open_reason, "open failed (status %d): %s", (int)st,
                         why[0] ? why : "no reason given");
            }
        }
    }
    if (d->open_state < 0) return error_set("device %s: %s", d->name, d->open_reason);
    return 0;
}

static void device_close(host_device *d) {
    if (!d->dev) return; /* a deferred plugin's device, never started */
    const tsr_device_api *api = d->dev->api;
    if (d->open_state == 1 && TSR_HAS_FIELD(tsr_device_api, api->struct_size, close) && api->close)
        api->close(d->dev);
    d->open_state = 0;
}

/* Nodes whose contract is newer than the plugin's ABI: the minor version
 * they need (0: none) and what needs it. An op added after the plugin's
 * minor (its TSR_OPS line says which) is unknown to the plugin's own
 * checker, and a plugin that answers by op number alone would misread it;
 * a plugin built for 1.0/1.1 may accept FLASH_ATTN by op alone, without
 * reading block-type k/v. */
static uint32_t node_newer_than_plugin(const host_device *d, const tsr_node *node, const char **what) {
    const uint32_t minor = TSR_ABI_MINOR_OF(d->plugin->abi_version);
    const tsr_op_traits *op = tsr_op_traits_get(node->op);
    if (op && (uint32_t)op->abi_minor > minor) {
        *what = op->name;
        return (uint32_t)op->abi_minor;
    }
    if (minor < 2 && node->op == TSR_OP_FLASH_ATTN &&
        (tsr_dtype_block_size(node->src[1]->dtype) != 1 || tsr_dtype_block_size(node->src[2]->dtype) != 1)) {
        *what = "FLASH_ATTN with quantized k/v";
        return 2;
    }
    return 0;
}

bool host_device_supports(host_device *d, const tsr_node *node, char *why, size_t why_size) {
    if (tsr_node_check(node, why, why_size)) return false;
    const char *what = "";
    const uint32_t needs = node_newer_than_plugin(d, node, &what);
    if (needs) {
        if (why && why_size)
            snprintf(why, why_size, "%s: plugin built for ABI %u.%u, %s needs %u.%u", d->name,
                     TSR_ABI_MAJOR_OF(d->plugin->abi_version), TSR_ABI_MINOR_OF(d->plugin->abi_version), what,
                     TSR_ABI_MAJOR, needs);
        return false;
    }
    if (host_device_open(d)) {
        if (why && why_size) snprintf(why, why_size, "%s: %s", d->name, d->open_reason);
        return false;
    }
    if (why && why_size) why[0] = '\0';
    asking.node = node;
    asking.why = why;
    asking.why_size = why_size;
    asking.said = false;
    host_guard_enter(d->plugin->name, d->plugin_path, "supports_op", d->name,
                     node->dst && node->dst->name ? node->dst->name : NULL);
    int32_t yes = d->dev->api->supports_op(d->dev, node);
    host_guard_leave();
    bool said = asking.said;
    asking.node = NULL;
    if (yes) {
        if (why && why_size) why[0] = '\0';
        return true;
    }
    if (!said && why && why_size) snprintf(why, why_size, "%s does not support it", d->name);
    return false;
}

tsr_queue *host_device_queue_new(host_device *d) {
    if (host_device_open(d)) return NULL;
    tsr_queue *q = NULL;
    tsr_status st = d->dev->api->queue_create(d->dev, &q);
    if (st != TSR_OK || !q || !q->api) {
        error_set("device %s: queue_create failed (status %d)", d->name, (int)st);
        return NULL;
    }
    return q;
}

uint64_t host_device_max_alloc(const host_device *d) {
    return TSR_HAS_FIELD(tsr_device_info, d->info.struct_size, max_alloc_size) ? d->info.max_alloc_size : 0;
}

uint64_t host_device_alignment(const host_device *d) {
    uint64_t a = TSR_HAS_FIELD(tsr_device_info, d->info.struct_size, buffer_alignment)
                     ? d->info.buffer_alignment : 0;
    if (a == 0) a = 256;
    return a < 64 ? 64 : a;
}

tsr_queue *host_device_queue(host_device *d) {
    if (!d->queue) d->queue = host_device_queue_new(d);
    return d->queue;
}

int32_t host_plugin_count(void) { return reg.n_plugins; }

const host_plugin_record *host_plugin_get(int32_t index) {
    if (index < 0 || index >= reg.n_plugins) return NULL;
    return &reg.plugins[index].rec;
}

/* "cpu-avx0, ref" */
static void available_list(char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < reg.n_devices && len + 1 < size; i++) {
        int w = snprintf(buf + len, size - len, "%s%s", i ? ", " : "", reg.devices[i].name);
        if (w < 0) break;
        len += (size_t)w;
    }
}

int32_t host_default_devices(host_device **out, int32_t max) {
    /* A non-CPU device that ranks itself below the best CPU device (a
     * software implementation such as Mesa's lavapipe) would only slow
     * things down: it is used when named with --device, not by default. */
    int32_t best_cpu = INT32_MIN;
    for (int32_t i = 0; i < reg.n_devices; i++) {
        const host_device *d = &reg.devices[i];
        if (d->info.kind == TSR_DEVICE_CPU && strcmp(d->name, "ref") != 0 &&
            d->info.priority > best_cpu)
            best_cpu = d->info.priority;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < reg.n_devices && n < max; i++) {
        host_device *d = &reg.devices[i];
        if (d->info.kind != TSR_DEVICE_CPU && d->info.priority < best_cpu) continue;
        if (host_device_open(d)) {
            host_log(TSR_LOG_WARN, d->name, "not used: %s", d->open_reason);
            continue;
        }
        out[n++] = d;
    }
    return n;
}

int32_t host_select_devices(const char *list, host_device **out, int32_t max) {
    if (!list || !list[0]) {
        int32_t n = reg.n_devices < max ? reg.n_devices : max;
        /* every device, for listing: not opened (opening may compile) */
        for (int32_t i = 0; i < n; i++) out[i] = &reg.devices[i];
        return n;
    }
    char avail[512];
    available_list(avail, sizeof avail);
    int32_t n = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[HOST_DEVICE_NAME_MAX];
        while (len && (*p == ' ' || *p == '\t')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (len == 0) return error_set("--device '%s': empty device name (available: %s)", list, avail);
        if (len >= sizeof name)
            return error_set("--device: unknown device '%.*s' (available: %s)", (int)len, p, avail);
        memcpy(name, p, len);
        name[len] = '\0';
        host_device *d = host_device_find(name);
        if (!d) return error_set("--device: unknown device '%s' (available: %s)", name, avail);
        for (int32_t i = 0; i < n; i++)
            if (out[i] == d) return error_set("--device: device '%s' is listed twice", name);
        if (n == max) return error_set("--device: more than %d devices listed", max);
        if (host_device_open(d)) return -1;
        out[n++] = d;
        if (!end) break;
        p = end + 1;
        if (!*p) return error_set("--device '%s': empty device name (available: %s)", list, avail);
    }
    return n;
}
