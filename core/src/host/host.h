/*
 * host — the plugin registry: discovery, loading, ABI negotiation, devices.
 *
 * Plugins are files named libtessera-backend-*.so, looked for in order in the
 * directories given by the caller (--plugin-dir), TESSERA_PLUGIN_PATH
 * (colon-separated), the directory of the running executable and the install
 * libdir. Each is dlopen'ed (RTLD_NOW | RTLD_LOCAL) and asked for its table
 * through tsr_plugin_entry(). Anything wrong with a file — not a library, no
 * entry symbol, another ABI major, a failing init, zero devices, a better
 * build of the same plugin — puts it on the list of rejected plugins with a
 * one-line reason; it never stops the program. The reference backend is
 * built in and always present (device "ref").
 *
 * The registry is the only global mutable state of the library (DESIGN.md).
 * host_init() loads it once; host_shutdown() unloads it (and host_init may
 * then be called again, e.g. with other directories).
 */
#ifndef TESSERA_HOST_H
#define TESSERA_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>

enum { HOST_DEVICE_NAME_MAX = 48, HOST_REASON_MAX = 320 };

typedef struct host_options {
    const char *const *plugin_dirs; /* --plugin-dir values, searched first */
    int32_t n_plugin_dirs;
    /* Only the plugin_dirs: ignore TESSERA_PLUGIN_PATH, the executable's
     * directory and the install libdir (tests). */
    bool only_plugin_dirs;
    int32_t verbosity; /* TSR_LOG_ERROR..TSR_LOG_DEBUG: plugin messages shown */
    int32_t n_threads; /* 0: the number of online CPUs */
} host_options;

typedef struct host_device {
    int32_t index;                    /* position in the device list         */
    char name[HOST_DEVICE_NAME_MAX];  /* "cpu-avx0", "vulkan0", "ref"        */
    /* NULL until the device is opened when its plugin was probed in a child
     * and not started here (a device the defaults do not use, host_probe.h):
     * info is what the probe reported. host_device_open starts it. */
    tsr_device *dev;
    const tsr_plugin *plugin;
    const char *plugin_path;          /* file it came from, "(built-in)"     */
    tsr_device_info info;             /* as reported at load                 */
    tsr_queue *queue;                 /* created on first host_device_queue */
    /* ABI 1.1 open hook: 0 not yet, 1 open, -1 open failed (open_reason). */
    int32_t open_state;
    int32_t plugin_slot;   /* the plugin's registry slot (deferred start)  */
    int32_t plugin_device; /* index among that plugin's devices             */
    char open_reason[HOST_REASON_MAX];
} host_device;

/* Why a plugin file is not serving devices. */
typedef enum host_plugin_state {
    HOST_PLUGIN_LOADED = 0,
    HOST_PLUGIN_REJECTED = 1,   /* not loadable, ABI, init failed, no devices */
    HOST_PLUGIN_SUPERSEDED = 2  /* same name, a better-scoring build kept    */
} host_plugin_state;

typedef struct host_plugin_record {
    const char *path;   /* file, or "(built-in)" */
    const char *name;   /* plugin name, "" if it never got that far */
    const char *version;
    int32_t state;      /* host_plugin_state */
    int32_t score;
    int32_t n_devices;
    const char *reason; /* "" when loaded */
} host_plugin_record;

/* Load the registry (no-op if already loaded). opt may be NULL. Bad plugins
 * are recorded, not fatal; fails only if the built-in reference backend
 * cannot start (out of memory). */
int host_init(const host_options *opt);
void host_shutdown(void);
bool host_is_initialized(void);

/* Devices, ordered by preference: GPUs and accelerators first, then CPUs,
 * each by their reported priority; "ref" last. */
int32_t host_device_count(void);
host_device *host_device_get(int32_t index);
host_device *host_device_find(const char *name);
/* The built-in reference device (always present after host_init). */
host_device *host_device_ref(void);
/* The queue of a device, created on first use; NULL with an error. */
tsr_queue *host_device_queue(host_device *d);

/* Start the device's plugin if it was only probed (dev == NULL), then run
 * the device's open hook (ABI 1.1) once; 0 if open (or it has no
 * hook), -1 with an error naming the device and its reason. Selecting a
 * device (host_select_devices, host_default_devices) opens it; every use
 * through the functions here does too. */
int host_device_open(host_device *d);

/* May d compute node? The node is validated first with the ABI's checker
 * (tessera/plugin_check.h); only a well-formed node reaches the device's
 * supports_op. On "no", why[why_size] (may be NULL) says why: the
 * checker's message, the reason the plugin gave through tsr_host.decline,
 * or "<device> does not support it" from a plugin that gave none. */
bool host_device_supports(host_device *d, const tsr_node *node, char *why, size_t why_size);

/* A new queue of d for one user (a scheduler); destroy with
 * q->api->destroy. NULL with an error. */
tsr_queue *host_device_queue_new(host_device *d);

/* The device's ABI 1.1 memory limits: largest single allocation (0: none
 * known) and tensor offset alignment (at least 64). */
uint64_t host_device_max_alloc(const host_device *d);
uint64_t host_device_alignment(const host_device *d);

/* Every plugin file considered (loaded, rejected or superseded). */
int32_t host_plugin_count(void);
const host_plugin_record *host_plugin_get(int32_t index);

/* The devices a model uses when the user names none, in the default order:
 * every device except non-CPU ones that rank below the best CPU device
 * (software GPU implementations such as lavapipe), which are used only when
 * named with --device. */
int32_t host_default_devices(host_device **out, int32_t max);

/* Parse a --device list ("vulkan0,cpu-avx0") into out[max]; NULL or "" gives
 * every device in the default order. Returns the count, or -1 with an error
 * listing the available devices when a name is unknown. */
int32_t host_select_devices(const char *list, host_device **out, int32_t max);

/* Host services handed to plugins. */
const tsr_host *host_services(void);
void host_set_verbosity(int32_t level);
void host_set_n_threads(int32_t n);
/* Async-signal-safe: raise the abort flag (e.g. from a SIGINT handler). */
void host_request_abort(void);
void host_clear_abort(void);
bool host_abort_requested(void);
/* Log through the host's logger (the application's log callback, none by
 * default; honouring the verbosity). */
void host_log(int level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *host_device_kind_name(int32_t kind);

#endif
