/*
 * vk_loader — open the Vulkan loader with dlopen and create the instance.
 *
 * Linking libvulkan would make the whole plugin fail to load on a machine
 * without it; opening it here lets the plugin say "no Vulkan loader" and
 * report zero devices. TESSERA_VULKAN_LOADER names another library (tests
 * use a missing one).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

vk_funcs vkf;

static const char *loader_name(void) {
    const char *env = getenv("TESSERA_VULKAN_LOADER");
    return env && env[0] ? env : "libvulkan.so.1";
}

static bool instance_has_extension(const char *name) {
    uint32_t n = 0;
    if (vkf.vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    if (!ext) return false;
    bool found = false;
    if (vkf.vkEnumerateInstanceExtensionProperties(NULL, &n, ext) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ext[i].extensionName, name) == 0;
    free(ext);
    return found;
}

int vk_loader_open(VkInstance *instance, char *reason, size_t reason_size) {
    *instance = VK_NULL_HANDLE;
    memset(&vkf, 0, sizeof vkf);
    const char *lib = loader_name();
    vkf.lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!vkf.lib) {
        const char *err = dlerror();
        snprintf(reason, reason_size, "no Vulkan loader: cannot open %s (%s)", lib, err ? err : "?");
        return -1;
    }
    *(void **)&vkf.vkGetInstanceProcAddr = dlsym(vkf.lib, "vkGetInstanceProcAddr");
    if (!vkf.vkGetInstanceProcAddr) {
        snprintf(reason, reason_size, "%s has no vkGetInstanceProcAddr: not a Vulkan loader", lib);
        goto fail;
    }
#define LOAD_GLOBAL(name)                                                                         \
    vkf.name = (PFN_##name)vkf.vkGetInstanceProcAddr(VK_NULL_HANDLE, #name);                      \
    if (!vkf.name) {                                                                              \
        snprintf(reason, reason_size, "%s lacks %s", lib, #name);                                 \
        goto fail;                                                                                \
    }
    VK_GLOBAL_FUNCS(LOAD_GLOBAL)
#undef LOAD_GLOBAL

    /* Vulkan 1.1 is the floor: subgroups, vkGetPhysicalDeviceProperties2. */
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)vkf.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
    uint32_t version = VK_API_VERSION_1_0;
    if (enum_version) enum_version(&version);
    if (version < VK_API_VERSION_1_1) {
        snprintf(reason, reason_size, "the Vulkan loader speaks %u.%u; the plugin needs 1.1",
                 VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
        goto fail;
    }

    const char *exts[1];
    uint32_t n_ext = 0;
    VkInstanceCreateFlags flags = 0;
    /* Also list portability (non-conformant) implementations, e.g. MoltenVK. */
    if (instance_has_extension("VK_KHR_portability_enumeration")) {
        exts[n_ext++] = "VK_KHR_portability_enumeration";
        flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "tessera",
        .pEngineName = "tessera",
        .apiVersion = VK_API_VERSION_1_1,
    };
    VkInstanceCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = n_ext ? exts : NULL,
    };
    VkResult r = vkf.vkCreateInstance(&ci, NULL, instance);
    if (r != VK_SUCCESS) {
        snprintf(reason, reason_size, "vkCreateInstance failed (VkResult %d)", (int)r);
        *instance = VK_NULL_HANDLE;
        goto fail;
    }
#define LOAD_INSTANCE(name)                                                                       \
    vkf.name = (PFN_##name)vkf.vkGetInstanceProcAddr(*instance, #name);                           \
    if (!vkf.name) {                                                                              \
        snprintf(reason, reason_size, "the Vulkan instance lacks %s", #name);                     \
        goto fail;                                                                                \
    }
    VK_INSTANCE_FUNCS(LOAD_INSTANCE)
#undef LOAD_INSTANCE
    return 0;

fail:
    vk_loader_close(*instance);
    *instance = VK_NULL_HANDLE;
    return -1;
}

void vk_loader_close(VkInstance instance) {
    if (instance != VK_NULL_HANDLE && vkf.vkDestroyInstance) vkf.vkDestroyInstance(instance, NULL);
    if (vkf.lib) dlclose(vkf.lib);
    memset(&vkf, 0, sizeof vkf);
}
