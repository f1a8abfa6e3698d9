/*
 * vk_features — what the gpu kernels may use on a device, and what must be
 * enabled on its logical device for that: integer dot products
 * (VK_KHR_shader_integer_dot_product and its shaderIntegerDotProduct; the
 * instance asks for Vulkan 1.1, so the extension even where 1.3 has it in
 * core) for the mat-vec's integer path; the
 * cooperative matrix extensions are detected and reported.
 *
 * A kernel variant is used only where the device has the feature, the
 * plugin was built with the variant (vk_shader_embedded: the build's glslc
 * may lack the extension) and no switch turns it off:
 *   TESSERA_VULKAN_NO_IDOT=1   never the integer dot product path
 */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static bool env_flag(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

static void append_feature(vk_device *d, const char *word) {
    size_t len = strlen(d->features);
    if (len + 1 + strlen(word) + 1 > sizeof d->features) return;
    if (len) d->features[len++] = ' ';
    strcpy(d->features + len, word);
}

void vk_features_probe(vk_device *d) {
    memset(&d->kern, 0, sizeof d->kern);
    if (vk_device_has_extension(d->phys, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME) && vkf.vkGetPhysicalDeviceFeatures2) {
        VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idf = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
        VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &idf};
        vkf.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
        VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR idp = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &idp};
        vkf.vkGetPhysicalDeviceProperties2(d->phys, &p2);
        d->kern.integer_dot = idf.shaderIntegerDotProduct && !env_flag("TESSERA_VULKAN_NO_IDOT") &&
                              vk_shader_embedded(VK_SHADER_MUL_MAT_VEC_IDOT) &&
                              vk_shader_embedded(VK_SHADER_MUL_MAT_VEC_IDOT_SG);
        d->kern.integer_dot_fast = idp.integerDotProduct4x8BitPackedSignedAccelerated;
    }
    d->kern.coopmat = vk_device_has_extension(d->phys, "VK_KHR_cooperative_matrix");
    d->kern.coopmat2 = vk_device_has_extension(d->phys, "VK_NV_cooperative_matrix2");
    if (d->kern.integer_dot) append_feature(d, d->kern.integer_dot_fast ? "integer-dot" : "integer-dot(emulated)");
    if (d->kern.coopmat) append_feature(d, "coopmat");
    if (d->kern.coopmat2) append_feature(d, "coopmat2");
}

uint32_t vk_features_enable(const vk_device *d, const char *ext[4], vk_features_store *store, void **chain) {
    uint32_t n = 0;
    memset(store, 0, sizeof *store);
    *chain = NULL;
    if (d->kern.integer_dot) {
        store->idot = (VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR,
            .pNext = *chain,
            .shaderIntegerDotProduct = VK_TRUE,
        };
        *chain = &store->idot;
        ext[n++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    }
    return n;
}
