/*
 * vk_loader — open the Vulkan loader with dlopen and create the instance.
 *
 * Linking libvulkan would make the whole plugin fail to load on a machine
 * without it; opening it here lets the plugin say "no Vulkan loader" and
 * report zero devices. TESSERA_VULKAN_LOADER names another library (tests
 * use a missing one).
 */
#include <dirent.h>
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

#ifdef TESSERA_SANITIZE
/* Sanitizer builds only: a driver written in C++ (Mesa's lavapipe, with LLVM)
 * keeps one-time allocations of its C++ runtime, and the loader unloads the
 * driver again at instance destruction (and between its probes). LeakSanitizer
 * then reports those blocks from "<unknown module>", where no suppression can
 * name them. Loading every installed driver once more with RTLD_NODELETE
 * before the loader does keeps them mapped, so their allocations stay
 * reachable. The manifests are the loader's default ones (or the files in
 * VK_DRIVER_FILES / VK_ICD_FILENAMES); "library_path" is read as the loader
 * reads it. Release builds do not do this. */
static void pin_manifest(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *k = strstr(buf, "\"library_path\"");
    char *q = k ? strchr(k + 14, '"') : NULL;
    char *e = q ? strchr(q + 1, '"') : NULL;
    if (!e) return;
    *e = 0;
    dlopen(q + 1, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); /* (the handle is kept on purpose) */
}

static void pin_drivers(void) {
    const char *files = getenv("VK_DRIVER_FILES");
    if (!files || !files[0]) files = getenv("VK_ICD_FILENAMES");
    if (files && files[0]) {
        char list[4096];
        snprintf(list, sizeof list, "%s", files);
        for (char *save = NULL, *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save))
            pin_manifest(p);
        return;
    }
    const char *dirs[] = {"/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        DIR *d = opendir(dirs[i]);
        if (!d) continue;
        for (struct dirent *de; (de = readdir(d));) {
            if (!strstr(de->d_name, ".json")) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dirs[i], de->d_name);
            pin_manifest(path);
        }
        closedir(d);
    }
}
#endif

int vk_loader_open(VkInstance *instance, char *reason, size_t reason_size) {
#ifdef TESSERA_SANITIZE
    pin_drivers();
#endif
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
    /* optional: a loader older than VK_KHR_cooperative_matrix returns NULL */
    vkf.coopmat_properties = vkf.vkGetInstanceProcAddr(*instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
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
