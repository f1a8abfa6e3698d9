/*
 * vk_plugin — the Vulkan backend as a tsr_plugin: the loader and instance,
 * one device per physical device (discrete, integrated, virtual and CPU
 * implementations such as Mesa's lavapipe), and the device table.
 *
 * Devices are named vulkan0.. in enumeration order. Every Vulkan device
 * reports kind GPU (it has its own memory and takes offloaded layers); the
 * priority orders them discrete > integrated > virtual > CPU implementation,
 * the last below the CPU plugins. The logical device, pipelines and queues
 * are created at first use.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "vk_internal.h"

enum { VK_MAX_DEVICES = 16 };

const tsr_host *vk_host;
static VkInstance vk_instance = VK_NULL_HANDLE;
static vk_device *vk_devices;
static int32_t vk_n_devices;

void vk_log(int level, const char *fmt, ...) {
    if (!vk_host || !vk_host->log) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vk_host->log(level, VK_PLUGIN_NAME, msg);
}

bool vk_abort_requested(void) { return vk_host && vk_host->abort_flag && *vk_host->abort_flag; }

static bool env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* ------------------------------------------------------------ probing */

bool vk_device_has_extension(VkPhysicalDevice phys, const char *name) {
    uint32_t n = 0;
    if (vkf.vkEnumerateDeviceExtensionProperties(phys, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext) return false;
    bool found = false;
    if (vkf.vkEnumerateDeviceExtensionProperties(phys, NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

int vk_memory_type(const vk_device *d, uint32_t type_bits, VkMemoryPropertyFlags want) {
    for (uint32_t i = 0; i < d->mem_props.memoryTypeCount; i++)
        if ((type_bits & (1u << i)) && (d->mem_props.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

static void device_memory_real(const vk_device *d, uint64_t *total, uint64_t *free_bytes);

void vk_device_memory(const vk_device *d, uint64_t *total, uint64_t *free_bytes) {
    device_memory_real(d, total, free_bytes);
    if (d->memory_limit) {
        uint64_t left = d->memory_limit > d->allocated ? d->memory_limit - d->allocated : 0;
        *total = d->memory_limit < *total || *total == 0 ? d->memory_limit : *total;
        *free_bytes = *free_bytes && *free_bytes < left ? *free_bytes : left;
    }
}

static void device_memory_real(const vk_device *d, uint64_t *total, uint64_t *free_bytes) {
    *total = 0;
    *free_bytes = 0;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = d->has_budget ? &budget : NULL};
    vkf.vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
    for (uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; h++) {
        if (!(mp.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
        *total += mp.memoryProperties.memoryHeaps[h].size;
        if (d->has_budget && budget.heapBudget[h] > budget.heapUsage[h])
            *free_bytes += budget.heapBudget[h] - budget.heapUsage[h];
    }
}

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU implementation";
    default: return "other";
    }
}

static int32_t type_priority(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 300;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 250;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 200;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 10; /* below the CPU plugins (cpu-avx: 100) */
    default: return 150;
    }
}

/* Fill d from its physical device; -1 (with why) when it cannot serve. */
static int probe_device(vk_device *d, VkPhysicalDevice phys, char *why, size_t why_size) {
    d->phys = phys;
    vkf.vkGetPhysicalDeviceProperties(phys, &d->props);
    vkf.vkGetPhysicalDeviceMemoryProperties(phys, &d->mem_props);
    const VkPhysicalDeviceProperties *p = &d->props;
    if (p->apiVersion < VK_API_VERSION_1_1) {
        snprintf(why, why_size, "%.100s speaks Vulkan %u.%u (1.1 needed)", p->deviceName,
                 VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion));
        return -1;
    }
    uint32_t n_fam = 0;
    vkf.vkGetPhysicalDeviceQueueFamilyProperties(phys, &n_fam, NULL);
    VkQueueFamilyProperties fams[32];
    if (n_fam > 32) n_fam = 32;
    vkf.vkGetPhysicalDeviceQueueFamilyProperties(phys, &n_fam, fams);
    int fam = -1;
    /* Prefer a compute queue without graphics (async compute), else any. */
    for (uint32_t i = 0; i < n_fam && fam < 0; i++)
        if ((fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(fams[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
            fam = (int)i;
    for (uint32_t i = 0; i < n_fam && fam < 0; i++)
        if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = (int)i;
    if (fam < 0) {
        snprintf(why, why_size, "%.100s has no compute queue", p->deviceName);
        return -1;
    }
    d->queue_family = (uint32_t)fam;
    d->timestamp_bits = fams[fam].timestampValidBits;
    if (vk_memory_type(d, ~0u, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) < 0) {
        snprintf(why, why_size, "%.100s has no host-visible coherent memory for staging", p->deviceName);
        return -1;
    }

    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                             .pNext = &m3};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    vkf.vkGetPhysicalDeviceProperties2(phys, &p2);
    d->subgroup_size = sg.subgroupSize;
    d->max_alloc = m3.maxMemoryAllocationSize;
    d->subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                        (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                        sg.subgroupSize >= 1 && !env_flag("TESSERA_VULKAN_NO_SUBGROUPS");
    d->has_budget = vk_device_has_extension(phys, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkPhysicalDeviceFeatures feats;
    vkf.vkGetPhysicalDeviceFeatures(phys, &feats);
    d->has_f64 = feats.shaderFloat64 && !env_flag("TESSERA_VULKAN_NO_F64");
    const char *limit = getenv("TESSERA_VULKAN_MEMORY_LIMIT_MIB");
    if (limit && limit[0]) d->memory_limit = (uint64_t)(strtod(limit, NULL) * 1048576.0);

    /* Unified memory (SoCs, CPU implementations): device-local memory the
     * host can map, used in place without staging copies. */
    const bool uma = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                     p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const VkMemoryPropertyFlags unified = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT |
                                          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                          VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    d->unified = uma && vk_memory_type(d, ~0u, unified) >= 0 && !env_flag("TESSERA_VULKAN_STAGING");
    /* A CPU implementation runs a workgroup barrier as a coroutine switch:
     * matrix products there go one output per invocation instead. */
    const char *mm = getenv("TESSERA_VULKAN_MATMUL");
    d->matmul_per_invocation = mm && mm[0] ? strcmp(mm, "invocation") == 0
                                           : p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const char *fa = getenv("TESSERA_VULKAN_FLASH_ATTN");
    d->attn_per_invocation = fa && fa[0] ? strcmp(fa, "invocation") == 0
                                         : p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    /* workgroup: one workgroup per (query, head), never split or tiled;
     * split, tiled: that kernel at every size (tests; vk_fused.c); else
     * split for decoding, tiled for prompts. */
    d->attn_mode = !fa ? VK_ATTN_AUTO
                   : strcmp(fa, "workgroup") == 0 ? VK_ATTN_WORKGROUP
                   : strcmp(fa, "split") == 0     ? VK_ATTN_SPLIT
                   : strcmp(fa, "tiled") == 0     ? VK_ATTN_TILED
                                                  : VK_ATTN_AUTO;
    d->fuse = !env_flag("TESSERA_VULKAN_NO_FUSE");

    snprintf(d->description, sizeof d->description, "%.200s (Vulkan %u.%u, %s)", p->deviceName,
             VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion),
             type_name(p->deviceType));
    snprintf(d->features, sizeof d->features, "%s%s%s%s%s",
             d->subgroup_arith ? "subgroups " : "", d->has_f64 ? "fp64 " : "",
             d->unified ? "unified-memory " : "staging ",
             d->has_budget ? "memory-budget " : "",
             p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "cpu-implementation" : "");
    size_t len = strlen(d->features);
    if (len && d->features[len - 1] == ' ') d->features[len - 1] = '\0';
    char sgs[32];
    if (d->subgroup_arith) {
        snprintf(sgs, sizeof sgs, " subgroup-size-%u", d->subgroup_size);
        strncat(d->features, sgs, sizeof d->features - strlen(d->features) - 1);
    }
    vk_features_probe(d); /* the gpu kernels' features */
    return 0;
}

/* -------------------------------------------------------------- device */

static vk_device *device_of(tsr_device *device) { return device ? (vk_device *)device->impl : NULL; }

static tsr_status device_get_info(tsr_device *device, tsr_device_info *info) {
    vk_device *d = device_of(device);
    if (!d || !info || info->struct_size < offsetof(tsr_device_info, kind) + sizeof info->kind)
        return TSR_ERR_INVALID;
    uint64_t total, free_bytes;
    vk_device_memory(d, &total, &free_bytes);
    tsr_device_info full = {
        .struct_size = info->struct_size,
        .kind = TSR_DEVICE_GPU,
        .description = d->description,
        .features = d->features,
        .memory_total = total,
        .memory_free = free_bytes,
        .host_visible = d->unified ? 1 : 0,
        .reads_host_memory = 0,
        .priority = type_priority(d->props.deviceType),
        /* ABI 1.1: the largest vkAllocateMemory (a tensor's binding is
         * also held under maxStorageBufferRange, per node) */
        .max_alloc_size = d->max_alloc,
        .buffer_alignment = d->props.limits.minStorageBufferOffsetAlignment,
    };
    size_t n = info->struct_size < sizeof full ? info->struct_size : sizeof full;
    memcpy(info, &full, n);
    return TSR_OK;
}

static int32_t device_supports_op(tsr_device *device, const tsr_node *node) {
    vk_device *d = device_of(device);
    if (!d || !node) return 0;
    char why[256];
    if (vk_op_supported(d, node, why, sizeof why)) return 1;
    tsr_host_decline(vk_host, node, why); /* ABI 1.1: shown by --explain */
    return 0;
}

static const tsr_device_api vk_device_api = {
    .struct_size = sizeof(tsr_device_api),
    .get_info = device_get_info,
    .supports_op = device_supports_op,
    .buffer_alloc = vk_buffer_alloc,
    .buffer_free = vk_buffer_free,
    .buffer_host_ptr = vk_buffer_host_ptr,
    .queue_create = vk_queue_create,
};

/* -------------------------------------------------------------- plugin */

static int32_t plugin_score(void) { return 1; }

static void release_all(void) {
    for (int32_t i = 0; i < vk_n_devices; i++) {
        vk_device_release(&vk_devices[i]);
        pthread_mutex_destroy(&vk_devices[i].lock);
        pthread_mutex_destroy(&vk_devices[i].submit_lock);
    }
    free(vk_devices);
    vk_devices = NULL;
    vk_n_devices = 0;
    if (vkf.lib) vk_loader_close(vk_instance);
    vk_instance = VK_NULL_HANDLE;
}

static tsr_status plugin_init(const tsr_host *host, char *reason, size_t reason_size) {
    char scratch[256];
    if (!reason || reason_size == 0) {
        reason = scratch;
        reason_size = sizeof scratch;
    }
    reason[0] = '\0';
    if (vk_devices || vkf.lib) release_all(); /* init twice: start over */
    vk_host = host;
    if (vk_loader_open(&vk_instance, reason, reason_size)) return TSR_OK; /* zero devices */

    uint32_t n = 0;
    VkResult r = vkf.vkEnumeratePhysicalDevices(vk_instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(reason, reason_size, r != VK_SUCCESS ? "vkEnumeratePhysicalDevices failed (VkResult %d)"
                                                      : "the Vulkan loader found no device (no ICD installed?)",
                 (int)r);
        release_all();
        return TSR_OK;
    }
    if (n > VK_MAX_DEVICES) n = VK_MAX_DEVICES;
    VkPhysicalDevice phys[VK_MAX_DEVICES];
    r = vkf.vkEnumeratePhysicalDevices(vk_instance, &n, phys);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(reason, reason_size, "vkEnumeratePhysicalDevices failed (VkResult %d)", (int)r);
        release_all();
        return TSR_OK;
    }
    vk_devices = calloc(n, sizeof *vk_devices);
    if (!vk_devices) {
        snprintf(reason, reason_size, "out of memory");
        release_all();
        return TSR_ERR_NO_MEMORY;
    }
    char skipped[200] = "";
    for (uint32_t i = 0; i < n; i++) {
        vk_device *d = &vk_devices[vk_n_devices];
        memset(d, 0, sizeof *d);
        char why[200];
        if (probe_device(d, phys[i], why, sizeof why)) {
            vk_log(TSR_LOG_INFO, "skipping physical device %u: %s", i, why);
            snprintf(skipped, sizeof skipped, "%s", why);
            continue;
        }
        d->index = vk_n_devices;
        d->base.api = &vk_device_api;
        d->base.impl = d;
        pthread_mutex_init(&d->lock, NULL);
        pthread_mutex_init(&d->submit_lock, NULL);
        vk_n_devices++;
    }
    if (vk_n_devices == 0) {
        snprintf(reason, reason_size, "no usable Vulkan device: %.200s", skipped);
        release_all();
    }
    return TSR_OK;
}

static int32_t plugin_device_count(void) { return vk_n_devices; }

static tsr_device *plugin_device_get(int32_t index) {
    return index >= 0 && index < vk_n_devices ? &vk_devices[index].base : NULL;
}

static void plugin_shutdown(void) {
    release_all();
    vk_host = NULL;
}

static const tsr_plugin vk_plugin = {
    .abi_version = TSR_ABI_VERSION,
    .struct_size = sizeof(tsr_plugin),
    .name = VK_PLUGIN_NAME,
    .version = "0.1.0",
    .score = plugin_score,
    .init = plugin_init,
    .device_count = plugin_device_count,
    .device_get = plugin_device_get,
    .shutdown = plugin_shutdown,
};

TSR_PLUGIN_EXPORT const tsr_plugin *tsr_plugin_entry(uint32_t host_abi_version) {
    if (TSR_ABI_MAJOR_OF(host_abi_version) != TSR_ABI_MAJOR) return NULL;
    return &vk_plugin;
}
