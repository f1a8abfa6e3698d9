/*
 * ocl_plugin — the plugin table: probe the OpenCL platforms and devices
 * through the ICD loader, describe each device, shut down.
 *
 * No ICD (the loader finds no driver), no platform or no device is not an
 * error: init reports zero devices and a one-line reason, and the host
 * falls back to its CPU backends. Nothing is compiled here; kernels are
 * built at first use (ocl_program.c), so `tessera devices` stays fast.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "ocl_internal.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* The plugin registry's state: set by init, cleared by shutdown. */
static const tsr_host *g_host;
static ocl_device g_devices[OCL_MAX_DEVICES];
static int32_t g_n_devices;

const tsr_host *ocl_host(void) { return g_host; }

void ocl_log(int level, const char *fmt, ...) {
    if (!g_host || !g_host->log) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_host->log(level, OCL_PLUGIN_NAME, msg);
}

const char *ocl_device_label(const ocl_device *d, char *buf, size_t size) {
    snprintf(buf, size, "%s%d", OCL_PLUGIN_NAME, (int)d->index);
    return buf;
}

const char *ocl_error_name(cl_int err) {
    switch (err) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_MAP_FAILURE: return "CL_MAP_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM: return "CL_INVALID_PROGRAM";
    case CL_INVALID_PROGRAM_EXECUTABLE: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_WORK_DIMENSION: return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_OPERATION: return "CL_INVALID_OPERATION";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an unknown OpenCL error";
    }
}

/* ---------------------------------------------------------------- devices */

static tsr_status device_get_info(tsr_device *device, tsr_device_info *info) {
    const ocl_device *d = device ? device->impl : NULL;
    if (!d || !info || info->struct_size < offsetof(tsr_device_info, kind) + sizeof info->kind)
        return TSR_ERR_INVALID;
    /* Fill only the fields the caller's struct has. */
    tsr_device_info full = {
        .struct_size = info->struct_size < sizeof full ? info->struct_size : (uint32_t)sizeof full,
        /* An OpenCL device on the host CPU (PoCL) still computes in its own
         * buffers, so to the host it is an offload device, not a CPU
         * backend that reads host memory in place. */
        .kind = d->type & CL_DEVICE_TYPE_GPU ? TSR_DEVICE_GPU : TSR_DEVICE_ACCEL,
        .description = d->description,
        .features = d->features,
        .memory_total = d->mem_total,
        .memory_free = 0,
        .host_visible = d->unified,
        .reads_host_memory = 0,
        /* a real GPU before a CPU driver; both after Vulkan devices' usual scores */
        .priority = d->type & CL_DEVICE_TYPE_GPU ? 50 : 5,
        /* kernels take byte offsets as arguments: no alignment beyond an
         * element's, so buffer_alignment stays the host's default */
        .max_alloc_size = d->max_alloc,
    };
    memcpy(info, &full, full.struct_size);
    return TSR_OK;
}

static int32_t device_supports_op(tsr_device *device, const tsr_node *node) {
    ocl_device *d = device ? device->impl : NULL;
    if (!d || !node) return 0;
    char why[256];
    if (!ocl_node_supported(d, node, why, sizeof why)) {
        tsr_host_decline(g_host, node, why); /* ABI 1.1: shown by --explain */
        return 0;
    }
    /* A 1.1 host opened the device (the kernels are built); a 1.0 host did
     * not, so they are built here, at the first node we would take. A build
     * failure turns every answer into 0 and the work falls back. */
    if (!ocl_program_ensure(d)) {
        tsr_host_decline(g_host, node, "the OpenCL kernels failed to build (see the log)");
        return 0;
    }
    return 1;
}

/* ABI 1.1: compile the kernels when the host selects the device, not while
 * it places nodes. A failed build still leaves the device usable (it then
 * declines every node), as under a 1.0 host. */
static tsr_status device_open(tsr_device *device, char *reason, size_t reason_size) {
    ocl_device *d = device ? device->impl : NULL;
    if (!d) {
        snprintf(reason, reason_size, "no device");
        return TSR_ERR_INVALID;
    }
    ocl_program_ensure(d);
    return TSR_OK;
}

static const tsr_device_api device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = device_get_info,
    .supports_op = device_supports_op,
    .buffer_alloc = ocl_buffer_alloc,
    .buffer_free = ocl_buffer_free,
    .buffer_host_ptr = ocl_buffer_host_ptr,
    .queue_create = ocl_queue_create,
    .open = device_open,
};

/* String device info into buf, cut to fit ("" on failure). */
static void info_string(cl_device_id id, cl_device_info what, char *buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    if (clGetDeviceInfo(id, what, 0, NULL, &n) != CL_SUCCESS || n == 0) return;
    char *all = malloc(n + 1);
    if (!all) return;
    if (clGetDeviceInfo(id, what, n, all, NULL) == CL_SUCCESS) {
        all[n] = '\0';
        snprintf(buf, size, "%s", all);
    }
    free(all);
}

static bool has_extension(cl_device_id id, const char *ext) {
    size_t n = 0;
    if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || n == 0) return false;
    char *all = malloc(n + 1);
    if (!all) return false;
    bool found = false;
    if (clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, n, all, NULL) == CL_SUCCESS) {
        all[n] = '\0';
        size_t len = strlen(ext);
        for (const char *p = strstr(all, ext); p && !found; p = strstr(p + 1, ext))
            found = (p == all || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0');
    }
    free(all);
    return found;
}

/* Fill d from the driver; false (with reason) if the device is unusable. */
static bool device_probe(ocl_device *d, cl_platform_id platform, cl_device_id id, char *why,
                         size_t why_size) {
    d->platform = platform;
    d->id = id;
    cl_bool available = CL_FALSE, compiler = CL_FALSE, unified = CL_FALSE;
    cl_ulong mem = 0, max_alloc = 0;
    size_t max_wg = 0;
    char pname[96], version[128];
    info_string(id, CL_DEVICE_NAME, d->name, sizeof d->name);
    info_string(id, CL_DRIVER_VERSION, d->driver, sizeof d->driver);
    info_string(id, CL_DEVICE_VERSION, version, sizeof version);
    size_t pn = 0;
    pname[0] = '\0';
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, 0, NULL, &pn) == CL_SUCCESS && pn <= sizeof pname &&
        clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL) != CL_SUCCESS)
        pname[0] = '\0';
    pname[sizeof pname - 1] = '\0';
    clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
    clGetDeviceInfo(id, CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
    clGetDeviceInfo(id, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
    clGetDeviceInfo(id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, NULL);
    clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
    if (!available) {
        snprintf(why, why_size, "device '%s' is not available", d->name);
        return false;
    }
    if (!compiler) {
        snprintf(why, why_size, "device '%s' has no OpenCL C compiler", d->name);
        return false;
    }
    /* OpenCL 1.2 or later: "OpenCL <major>.<minor> ..." */
    int major = 0, minor = 0;
    if (sscanf(version, "OpenCL %d.%d", &major, &minor) != 2 || major * 10 + minor < 12) {
        snprintf(why, why_size, "device '%s' speaks '%s', this plugin needs OpenCL 1.2", d->name,
                 version);
        return false;
    }
    d->max_wg = max_wg;
    /* Work-group size of the reduction kernels (one group per row): 64 on
     * GPUs. A CPU driver (PoCL) runs a group's items as loops split at each
     * barrier, so fewer items per group is faster there: 8 measured ~2x
     * faster decoding than 64. TESSERA_OPENCL_WG (a power of 2) overrides. */
    const int32_t wg_max = d->type & CL_DEVICE_TYPE_CPU ? 8 : 64;
    d->wg = 1;
    while (d->wg < wg_max && (size_t)d->wg * 2 <= max_wg) d->wg *= 2;
    const char *wg_env = getenv("TESSERA_OPENCL_WG");
    if (wg_env && wg_env[0]) {
        int wg = atoi(wg_env);
        if (wg >= 1 && wg <= 256 && !(wg & (wg - 1)) && (size_t)wg <= max_wg) d->wg = wg;
    }
    d->mem_total = mem;
    d->max_alloc = max_alloc;
    d->has_fp16 = has_extension(id, "cl_khr_fp16");
    /* TESSERA_OPENCL_NO_MAP=1 treats a unified-memory device as discrete
     * (copies instead of mapped buffers): tests the other path on PoCL. */
    const char *no_map = getenv("TESSERA_OPENCL_NO_MAP");
    d->unified = unified && !(no_map && no_map[0] == '1');
    char name[sizeof d->name], driver[sizeof d->driver];
    memcpy(name, d->name, sizeof name);
    memcpy(driver, d->driver, sizeof driver);
    snprintf(d->description, sizeof d->description, "%s (%s %s, OpenCL %d.%d)", name, pname, driver,
             major, minor);
    snprintf(d->features, sizeof d->features, "%s%s", d->has_fp16 ? "fp16" : "no-fp16",
             d->unified ? " unified-memory" : "");
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    d->ctx = clCreateContext(props, 1, &id, NULL, NULL, &err);
    if (!d->ctx) {
        snprintf(why, why_size, "device '%s': clCreateContext failed: %s", d->name, ocl_error_name(err));
        return false;
    }
    d->alloc_queue = clCreateCommandQueue(d->ctx, id, 0, &err);
    if (!d->alloc_queue) {
        clReleaseContext(d->ctx);
        d->ctx = NULL;
        snprintf(why, why_size, "device '%s': clCreateCommandQueue failed: %s", d->name,
                 ocl_error_name(err));
        return false;
    }
    pthread_mutex_init(&d->build_lock, NULL);
    pthread_mutex_init(&d->enqueue_lock, NULL);
    d->dev.api = &device_api;
    d->dev.impl = d;
    return true;
}

static void device_release(ocl_device *d) {
    ocl_program_release(d);
    if (d->alloc_queue) clReleaseCommandQueue(d->alloc_queue);
    if (d->ctx) clReleaseContext(d->ctx);
    pthread_mutex_destroy(&d->build_lock);
    pthread_mutex_destroy(&d->enqueue_lock);
    memset(d, 0, sizeof *d);
}

/* ----------------------------------------------------------------- plugin */

/* TESSERA_OPENCL_DEVICE_TYPE picks the kinds of device to use (e.g. "gpu"
 * on a machine with both a GPU driver and PoCL); unset or "all": every one. */
static bool device_type_from_name(const char *name, cl_device_type *out) {
    static const struct { const char *name; cl_device_type type; } types[] = {
        {"all", CL_DEVICE_TYPE_ALL}, {"gpu", CL_DEVICE_TYPE_GPU},
        {"cpu", CL_DEVICE_TYPE_CPU}, {"accelerator", CL_DEVICE_TYPE_ACCELERATOR},
    };
    if (!name || !name[0]) return true;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(name, types[i].name)) {
            *out = types[i].type;
            return true;
        }
    return false;
}

static int32_t plugin_score(void) { return 1; }

static void plugin_shutdown(void);

static tsr_status plugin_init(const tsr_host *host, char *reason, size_t reason_size) {
    char why[256] = "";
    if (g_n_devices) plugin_shutdown();
    if (!host || host->struct_size < offsetof(tsr_host, log) + sizeof host->log) {
        snprintf(reason, reason_size, "the host services struct is missing or too small");
        return TSR_ERR_INVALID;
    }
    g_host = host;

    /* PoCL compiles a specialized copy of a kernel for every new launch
     * size unless told otherwise; with the KV cache growing by one cell per
     * token that is a compile per token (a cold first run of a small model:
     * 15 s instead of 0.5 s). Ask for its generic work-group code, unless
     * the user chose. Only PoCL reads this variable, before it loads. */
    setenv("POCL_WORK_GROUP_SPECIALIZATION", "0", 0);

    cl_uint n_platforms = 0;
    cl_platform_id platforms[8];
    cl_int err = clGetPlatformIDs(8, platforms, &n_platforms);
    if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n_platforms == 0)) {
        snprintf(reason, reason_size, "no OpenCL platform: the ICD loader found no driver "
                                      "(install one, e.g. pocl-opencl-icd; see /etc/OpenCL/vendors)");
        return TSR_OK;
    }
    if (err != CL_SUCCESS) {
        snprintf(reason, reason_size, "clGetPlatformIDs failed: %s", ocl_error_name(err));
        return TSR_OK;
    }
    if (n_platforms > 8) n_platforms = 8;
    cl_device_type want = CL_DEVICE_TYPE_ALL;
    const char *type_env = getenv("TESSERA_OPENCL_DEVICE_TYPE");
    if (!device_type_from_name(type_env, &want)) {
        snprintf(reason, reason_size, "TESSERA_OPENCL_DEVICE_TYPE='%s' is not one of all, gpu, cpu, "
                                      "accelerator", type_env);
        return TSR_OK;
    }
    int n_seen = 0;
    for (cl_uint p = 0; p < n_platforms && g_n_devices < OCL_MAX_DEVICES; p++) {
        cl_device_id ids[OCL_MAX_DEVICES];
        cl_uint n_ids = 0;
        if (clGetDeviceIDs(platforms[p], want, OCL_MAX_DEVICES, ids, &n_ids) != CL_SUCCESS) continue;
        if (n_ids > OCL_MAX_DEVICES) n_ids = OCL_MAX_DEVICES;
        for (cl_uint i = 0; i < n_ids && g_n_devices < OCL_MAX_DEVICES; i++) {
            n_seen++;
            ocl_device *d = &g_devices[g_n_devices];
            memset(d, 0, sizeof *d);
            d->index = g_n_devices;
            if (device_probe(d, platforms[p], ids[i], why, sizeof why)) {
                g_n_devices++;
                ocl_log(TSR_LOG_INFO, "opencl%d: %s", (int)d->index, d->description);
            } else {
                ocl_log(TSR_LOG_INFO, "skipping %s", why);
                memset(d, 0, sizeof *d);
            }
        }
    }
    if (g_n_devices == 0) {
        if (n_seen == 0)
            snprintf(reason, reason_size, "%u OpenCL platform(s) but no %sdevice", (unsigned)n_platforms,
                     want == CL_DEVICE_TYPE_ALL ? "" : want == CL_DEVICE_TYPE_GPU ? "GPU "
                     : want == CL_DEVICE_TYPE_CPU ? "CPU " : "accelerator ");
        else
            snprintf(reason, reason_size, "no usable OpenCL device: %s", why);
    }
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return g_n_devices; }

static tsr_device *plugin_device_get(int32_t index) {
    if (index < 0 || index >= g_n_devices) return NULL;
    return &g_devices[index].dev;
}

static void plugin_shutdown(void) {
    for (int32_t i = 0; i < g_n_devices; i++) device_release(&g_devices[i]);
    g_n_devices = 0;
    g_host = NULL;
}

static const tsr_plugin plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = OCL_PLUGIN_NAME,
    .version = "0.1.0",
    .score = plugin_score,
    .init = plugin_init,
    .device_count = plugin_device_count,
    .device_get = plugin_device_get,
    .shutdown = plugin_shutdown,
};

TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
    if (TSR_ABI_MAJOR_OF(host_abi_version) != TSR_ABI_MAJOR) return NULL;
    return &plugin;
}
