/*
 * tessera_devices.h — everything the plugin host knows about its devices
 * and plugin files (`tessera devices`): what tessera_devices() in tessera.h
 * gives plus the ABI 1.1 memory limits, features and plugin names, the
 * devices chosen by a --device list, and the plugins that were rejected.
 *
 * Call tessera_init first. Conventions as in tessera.h: a negative count on
 * failure, and tessera_last_error() says why.
 */
#ifndef TESSERA_TESSERA_DEVICES_H
#define TESSERA_TESSERA_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One compute device. The strings are owned by the library and valid until
 * tessera_shutdown; none is NULL ("" when unknown). */
typedef struct tessera_device_details {
    int32_t index;           /* position in the host's device list */
    const char *name;        /* "cpu-avx0", "vulkan0", "ref": what --device takes */
    const char *kind;        /* "CPU", "GPU", "accelerator" */
    bool is_cpu;             /* a CPU device (kind "CPU") */
    const char *description; /* "AMD Radeon 780M (RADV)" */
    const char *features;    /* space-separated, "avx2 fma f16c", or "" */
    uint64_t memory_total;   /* bytes, 0 when unknown */
    uint64_t memory_free;
    bool host_visible;       /* its buffers have host addresses */
    bool reads_host_memory;  /* it computes on tensors in plain host memory */
    int32_t priority;        /* higher is preferred when no order is given */
    uint64_t max_alloc_size; /* largest single allocation, 0: no limit reported */
    uint64_t buffer_alignment; /* a tensor's offset alignment in bytes (at least 64) */
    const char *plugin_name;
    const char *plugin_version;
    const char *plugin_path; /* the plugin file it came from, "(built-in)" */
} tessera_device_details;

/* The devices a --device list names ("vulkan0,cpu-avx0"), in its order,
 * each opened (its plugin's per-device setup, which may compile kernels);
 * NULL or "" lists every device in the host's order (GPUs and accelerators,
 * then CPUs, then "ref") without opening any. Fills out[0..max) and returns
 * how many it wrote; -1 with an error when a name is unknown (listing the
 * available devices), listed twice, more than max, or a device does not
 * open, and before tessera_init. */
int32_t tessera_devices_select(const char *list, tessera_device_details *out, int32_t max);

/* The devices a model uses when no --device is given, opened, in the
 * default order: every device except GPUs that rank below the best CPU
 * device (software GPUs such as lavapipe) and devices that fail to open (a
 * warning says why). Returns how many it wrote to out[0..max), or -1 before
 * tessera_init. */
int32_t tessera_devices_default(tessera_device_details *out, int32_t max);

/* Why a plugin file serves devices or not. */
typedef enum tessera_plugin_state {
    TESSERA_PLUGIN_LOADED = 0,
    TESSERA_PLUGIN_REJECTED = 1,  /* not loadable, wrong ABI, init failed, no devices */
    TESSERA_PLUGIN_SUPERSEDED = 2 /* a better-scoring build of the same plugin was kept */
} tessera_plugin_state;

/* One plugin file tessera_init looked at. Strings as above. */
typedef struct tessera_plugin_record {
    const char *path;    /* the file, or "(built-in)" */
    const char *name;    /* "" when it never got that far */
    const char *version; /* "" when unknown */
    int32_t state;       /* tessera_plugin_state */
    int32_t score;       /* how well its build suits this machine */
    int32_t n_devices;
    const char *reason;  /* why rejected or superseded; "" when loaded */
} tessera_plugin_record;

/* Fill out[0..max) with the plugin files tessera_init looked at, in the
 * order it did; returns how many there are (may be more than max), or -1
 * before tessera_init. */
int32_t tessera_plugins(tessera_plugin_record *out, int32_t max);

#ifdef __cplusplus
}
#endif

#endif
