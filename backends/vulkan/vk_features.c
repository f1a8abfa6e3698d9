/*
 * vk_features — what the gpu kernels may use on a device, and what must be
 * enabled on its logical device for that: integer dot products
 * (VK_KHR_shader_integer_dot_product and its shaderIntegerDotProduct; the
 * instance asks for Vulkan 1.1, so the extension even where 1.3 has it in
 * core) for the mat-vec's integer path; cooperative matrices
 * (VK_KHR_cooperative_matrix, with VK_KHR_shader_float16_int8 and
 * VK_KHR_vulkan_memory_model, which glslang's cooperative-matrix SPIR-V
 * declares) for the prompt GEMM mul_mat_coopmat.comp.
 *
 * A kernel variant is used only where the device has the feature, the
 * plugin was built with the variant (vk_shader_embedded: the build's glslc
 * may lack the extension) and no switch turns it off:
 *   TESSERA_VULKAN_NO_IDOT=1   never the integer dot product path
 *   TESSERA_VULKAN_COOPMAT=1   the cooperative-matrix GEMM for prompts; off
 *                              by default until a GPU run has proven it
 *                              (bench/gpu-check.sh)
 *   TESSERA_VULKAN_MATMUL=coopmat           that GEMM at every column count
 *   TESSERA_VULKAN_MATMUL=coopmat-emulated  its plain-GLSL emulation at
 *                              every column count, on any device with
 *                              shaderFloat16 (tests on lavapipe)
 * The cooperative-matrix kernel needs a 16 x 16 x 16 F16 x F16 product with
 * F32 (else F16) accumulators at subgroup scope among the device's reported
 * properties, and a subgroup size of 32 (its workgroup is 4 subgroups);
 * anything else leaves prompts on the tiled kernel and says why in the
 * device's features ("coopmat-unusable(...)").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

/* VK_KHR_cooperative_matrix as the registry defines it: Debian 12's
 * Vulkan headers (1.3.239) predate it. */
enum {
    VKX_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR = 1000506000,
    VKX_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506001,
    VKX_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506002,
    VKX_COMPONENT_TYPE_FLOAT16_KHR = 0,
    VKX_COMPONENT_TYPE_FLOAT32_KHR = 1,
    VKX_SCOPE_SUBGROUP_KHR = 3,
};
typedef struct vkx_coopmat_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
    VkBool32 saturatingAccumulation;
    int32_t scope;                            /* VkScopeKHR */
} vkx_coopmat_properties;
typedef struct vkx_coopmat_device_properties {
    VkStructureType sType;
    void *pNext;
    VkShaderStageFlags cooperativeMatrixSupportedStages;
} vkx_coopmat_device_properties;
typedef VkResult (*vkx_get_coopmat_properties)(VkPhysicalDevice, uint32_t *, vkx_coopmat_properties *);

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

static void probe_integer_dot(vk_device *d) {
    if (!vk_device_has_extension(d->phys, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME)) return;
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

/* shaderFloat16 and vulkanMemoryModel, each with its extension */
static bool has_float16(const vk_device *d) {
    if (!vk_device_has_extension(d->phys, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) return false;
    VkPhysicalDeviceShaderFloat16Int8FeaturesKHR f16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f16};
    vkf.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    return f16.shaderFloat16;
}

static bool has_memory_model(const vk_device *d) {
    if (!vk_device_has_extension(d->phys, VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME)) return false;
    VkPhysicalDeviceVulkanMemoryModelFeaturesKHR mm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &mm};
    vkf.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    return mm.vulkanMemoryModel;
}

/* The accumulator type of a 16 x 16 x 16 F16 product at subgroup scope the
 * device lists (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR): F32
 * where offered, else F16, else NONE. */
static vk_coopmat_acc coopmat_shape(const vk_device *d) {
    vkx_get_coopmat_properties get = (vkx_get_coopmat_properties)vkf.coopmat_properties;
    uint32_t n = 0;
    if (!get || get(d->phys, &n, NULL) != VK_SUCCESS || n == 0) return VK_COOPMAT_NONE;
    vkx_coopmat_properties *props = calloc(n, sizeof *props);
    if (!props) return VK_COOPMAT_NONE;
    for (uint32_t i = 0; i < n; i++) props[i].sType = (VkStructureType)VKX_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    vk_coopmat_acc best = VK_COOPMAT_NONE;
    VkResult r = get(d->phys, &n, props);
    for (uint32_t i = 0; (r == VK_SUCCESS || r == VK_INCOMPLETE) && i < n; i++) {
        const vkx_coopmat_properties *p = &props[i];
        if (p->MSize != 16 || p->NSize != 16 || p->KSize != 16 || p->scope != VKX_SCOPE_SUBGROUP_KHR ||
            p->AType != VKX_COMPONENT_TYPE_FLOAT16_KHR || p->BType != VKX_COMPONENT_TYPE_FLOAT16_KHR ||
            p->CType != p->ResultType || p->saturatingAccumulation)
            continue;
        if (p->CType == VKX_COMPONENT_TYPE_FLOAT32_KHR) best = VK_COOPMAT_F32;
        else if (p->CType == VKX_COMPONENT_TYPE_FLOAT16_KHR && best == VK_COOPMAT_NONE) best = VK_COOPMAT_F16;
    }
    free(props);
    return best;
}

static bool coopmat_feature(const vk_device *d) {
    vkx_coopmat_device_properties cp = {
        .sType = (VkStructureType)VKX_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &cp};
    vkf.vkGetPhysicalDeviceProperties2(d->phys, &p2);
    vk_features_store s = {.coopmat = {.sType = (VkStructureType)VKX_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR}};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s.coopmat};
    vkf.vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    return s.coopmat.cooperativeMatrix && (cp.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
}

/* Whether mul_mat_coopmat.comp can run on the device, and with which
 * accumulators; *why (a word for the features line) when it cannot. */
static vk_coopmat_acc coopmat_usable(const vk_device *d, const char **why) {
    if (!coopmat_feature(d)) { *why = "no-compute-feature"; return VK_COOPMAT_NONE; }
    const vk_coopmat_acc acc = coopmat_shape(d);
    if (acc == VK_COOPMAT_NONE) { *why = "no-16x16x16-f16"; return VK_COOPMAT_NONE; }
    if (!vk_shader_embedded(acc == VK_COOPMAT_F32 ? VK_SHADER_MUL_MAT_COOPMAT : VK_SHADER_MUL_MAT_COOPMAT_F16ACC)) {
        *why = "not-built"; /* the build's glslc lacks GL_KHR_cooperative_matrix */
        return VK_COOPMAT_NONE;
    }
    if (d->subgroup_size != VK_COOPMAT_SUBGROUP) { *why = "subgroup-size"; return VK_COOPMAT_NONE; }
    if (d->props.limits.maxComputeSharedMemorySize < VK_COOPMAT_SHARED) { *why = "shared-memory"; return VK_COOPMAT_NONE; }
    if (!has_float16(d)) { *why = "no-shaderFloat16"; return VK_COOPMAT_NONE; }
    if (!has_memory_model(d)) { *why = "no-vulkanMemoryModel"; return VK_COOPMAT_NONE; }
    return acc;
}

/* Cooperative matrices: d->kern.coopmat (and the emulation's switch), and
 * the features word: coopmat(f32|f16) in use, coopmat-off(...) usable but
 * not switched on, coopmat-unusable(why) exposed but not usable. */
static void probe_coopmat(vk_device *d) {
    const char *mm = getenv("TESSERA_VULKAN_MATMUL");
    const bool forced = mm && strcmp(mm, "coopmat") == 0;
    d->kern.coopmat_emulated = mm && strcmp(mm, "coopmat-emulated") == 0 && has_float16(d) &&
                               vk_shader_embedded(VK_SHADER_MUL_MAT_COOPMAT_EMU);
    char word[64];
    if (vk_device_has_extension(d->phys, "VK_KHR_cooperative_matrix")) {
        const char *why = "";
        const vk_coopmat_acc acc = coopmat_usable(d, &why);
        const char *acc_name = acc == VK_COOPMAT_F32 ? "f32" : "f16";
        const bool on = forced || env_flag("TESSERA_VULKAN_COOPMAT");
        if (acc != VK_COOPMAT_NONE && on) {
            d->kern.coopmat = acc;
            d->kern.coopmat_all = forced;
            snprintf(word, sizeof word, "coopmat(%s)", acc_name);
        } else if (acc != VK_COOPMAT_NONE) {
            snprintf(word, sizeof word, "coopmat-off(%s)", acc_name);
        } else {
            snprintf(word, sizeof word, "coopmat-unusable(%s)", why);
        }
        append_feature(d, word);
    }
    if (d->kern.coopmat_emulated) append_feature(d, "coopmat-emulated");
    if (forced && d->kern.coopmat == VK_COOPMAT_NONE)
        vk_log(TSR_LOG_WARN, "vulkan%d: TESSERA_VULKAN_MATMUL=coopmat, but the device cannot run the cooperative-matrix "
               "kernel (features: %s); matrix products use the other kernels", d->index, d->features);
    d->kern.float16 = d->kern.coopmat != VK_COOPMAT_NONE || d->kern.coopmat_emulated;
}

void vk_features_probe(vk_device *d) {
    memset(&d->kern, 0, sizeof d->kern);
    if (!vkf.vkGetPhysicalDeviceFeatures2) return;
    probe_integer_dot(d);
    if (d->kern.integer_dot) append_feature(d, d->kern.integer_dot_fast ? "integer-dot" : "integer-dot(emulated)");
    probe_coopmat(d);
    d->kern.coopmat2 = vk_device_has_extension(d->phys, "VK_NV_cooperative_matrix2");
    if (d->kern.coopmat2) append_feature(d, "coopmat2");
}

uint32_t vk_features_enable(const vk_device *d, const char *ext[VK_MAX_KERNEL_EXTS], vk_features_store *store,
                            void **chain) {
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
    if (d->kern.float16) {
        store->float16 = (VkPhysicalDeviceShaderFloat16Int8FeaturesKHR){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES_KHR,
            .pNext = *chain,
            .shaderFloat16 = VK_TRUE,
        };
        *chain = &store->float16;
        ext[n++] = VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME;
    }
    if (d->kern.coopmat != VK_COOPMAT_NONE) {
        store->memory_model = (VkPhysicalDeviceVulkanMemoryModelFeaturesKHR){
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES_KHR,
            .pNext = *chain,
            .vulkanMemoryModel = VK_TRUE,
        };
        *chain = &store->memory_model;
        ext[n++] = VK_KHR_VULKAN_MEMORY_MODEL_EXTENSION_NAME;
        store->coopmat.sType = (VkStructureType)VKX_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR;
        store->coopmat.pNext = *chain;
        store->coopmat.cooperativeMatrix = VK_TRUE;
        *chain = &store->coopmat;
        ext[n++] = "VK_KHR_cooperative_matrix";
    }
    return n;
}
