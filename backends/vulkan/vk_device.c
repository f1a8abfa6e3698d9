/*
 * vk_device — the logical device behind a vk_device, created at first use:
 * one compute queue, the one descriptor set layout every shader shares
 * (bindings 0..4 tensors src0..src3 and dst, binding 5 the parameter
 * block), and compute pipelines built from the embedded SPIR-V on demand.
 */
#include <stdio.h>
#include <string.h>

#include "vk_internal.h"
#include "vk_shaders.h"

enum { VK_N_BINDINGS = 6 };

VkResult vk_raw_buffer_create(vk_device *d, uint64_t size, VkBufferUsageFlags usage, uint32_t mem_type,
                              VkBuffer *buf, VkDeviceMemory *mem, void **mapped) {
    *buf = VK_NULL_HANDLE;
    *mem = VK_NULL_HANDLE;
    if (mapped) *mapped = NULL;
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vkf.vkCreateBuffer(d->dev, &bi, NULL, buf);
    if (r != VK_SUCCESS) return r;
    VkMemoryRequirements req;
    vkf.vkGetBufferMemoryRequirements(d->dev, *buf, &req);
    if (!(req.memoryTypeBits & (1u << mem_type))) {
        vkf.vkDestroyBuffer(d->dev, *buf, NULL);
        *buf = VK_NULL_HANDLE;
        return VK_ERROR_FEATURE_NOT_PRESENT;
    }
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = mem_type,
    };
    r = vkf.vkAllocateMemory(d->dev, &ai, NULL, mem);
    if (r == VK_SUCCESS) r = vkf.vkBindBufferMemory(d->dev, *buf, *mem, 0);
    if (r == VK_SUCCESS && mapped) r = vkf.vkMapMemory(d->dev, *mem, 0, VK_WHOLE_SIZE, 0, mapped);
    if (r != VK_SUCCESS) {
        vk_raw_buffer_destroy(d, *buf, *mem);
        *buf = VK_NULL_HANDLE;
        *mem = VK_NULL_HANDLE;
        if (mapped) *mapped = NULL;
    }
    return r;
}

void vk_raw_buffer_destroy(vk_device *d, VkBuffer buf, VkDeviceMemory mem) {
    if (buf != VK_NULL_HANDLE) vkf.vkDestroyBuffer(d->dev, buf, NULL);
    if (mem != VK_NULL_HANDLE) vkf.vkFreeMemory(d->dev, mem, NULL); /* unmaps too */
}

/* Memory types for tensor buffers and host-side buffers, from a probe
 * buffer's requirements. */
static int pick_memory_types(vk_device *d) {
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = 256,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer probe;
    if (vkf.vkCreateBuffer(d->dev, &bi, NULL, &probe) != VK_SUCCESS) return -1;
    VkMemoryRequirements req;
    vkf.vkGetBufferMemoryRequirements(d->dev, probe, &req);
    vkf.vkDestroyBuffer(d->dev, probe, NULL);
    const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int dev_type = d->unified ? vk_memory_type(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | coherent)
                              : vk_memory_type(d, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (dev_type < 0) dev_type = vk_memory_type(d, req.memoryTypeBits, 0);
    /* Host buffers: prefer cached (fast reads back), else plain coherent. */
    int host_type = vk_memory_type(d, req.memoryTypeBits, coherent | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    if (host_type < 0) host_type = vk_memory_type(d, req.memoryTypeBits, coherent);
    if (dev_type < 0 || host_type < 0) return -1;
    d->device_type = (uint32_t)dev_type;
    d->host_type = (uint32_t)host_type;
    return 0;
}

static int create_layouts(vk_device *d) {
    VkDescriptorSetLayoutBinding b[VK_N_BINDINGS];
    for (uint32_t i = 0; i < VK_N_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = VK_N_BINDINGS,
        .pBindings = b,
    };
    if (vkf.vkCreateDescriptorSetLayout(d->dev, &li, NULL, &d->set_layout) != VK_SUCCESS) return -1;
    VkPipelineLayoutCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &d->set_layout,
    };
    return vkf.vkCreatePipelineLayout(d->dev, &pi, NULL, &d->pipe_layout) == VK_SUCCESS ? 0 : -1;
}

static int create_device(vk_device *d) {
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = d->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkPhysicalDeviceFeatures features = {.shaderFloat64 = d->has_f64 ? VK_TRUE : VK_FALSE};
    const char *ext[VK_MAX_KERNEL_EXTS];
    vk_features_store kern_store; /* what the gpu kernels need (vk_features.c) */
    void *kern_chain;
    const uint32_t n_ext = vk_features_enable(d, ext, &kern_store, &kern_chain);
    VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = kern_chain,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qi,
        .enabledExtensionCount = n_ext,
        .ppEnabledExtensionNames = ext,
        .pEnabledFeatures = &features,
    };
    VkResult r = vkf.vkCreateDevice(d->phys, &di, NULL, &d->dev);
    if (r != VK_SUCCESS) {
        d->dev = VK_NULL_HANDLE;
        vk_log(TSR_LOG_ERROR, "vulkan%d: vkCreateDevice failed (VkResult %d)", d->index, (int)r);
        return -1;
    }
    vkf.vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
    if (pick_memory_types(d) || create_layouts(d)) {
        vk_log(TSR_LOG_ERROR, "vulkan%d: no usable memory type or descriptor layout", d->index);
        return -1;
    }
    r = vk_raw_buffer_create(d, 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, d->device_type, &d->dummy,
                             &d->dummy_mem, NULL);
    if (r != VK_SUCCESS) {
        vk_log(TSR_LOG_ERROR, "vulkan%d: cannot create a 16-byte buffer (VkResult %d)", d->index, (int)r);
        return -1;
    }
    return 0;
}

int vk_device_ready(vk_device *d) {
    pthread_mutex_lock(&d->lock);
    if (!d->ready && !d->failed) {
        if (create_device(d) == 0) {
            d->ready = true;
        } else {
            d->failed = true;
            vk_device_release(d);
        }
    }
    int rc = d->ready ? 0 : -1;
    pthread_mutex_unlock(&d->lock);
    return rc;
}

void vk_device_release(vk_device *d) {
    if (d->dev == VK_NULL_HANDLE) return;
    vkf.vkDeviceWaitIdle(d->dev);
    for (int i = 0; i < d->n_pipelines; i++) vkf.vkDestroyPipeline(d->dev, d->pipelines[i].pipe, NULL);
    d->n_pipelines = 0;
    vk_raw_buffer_destroy(d, d->dummy, d->dummy_mem);
    d->dummy = VK_NULL_HANDLE;
    d->dummy_mem = VK_NULL_HANDLE;
    if (d->pipe_layout != VK_NULL_HANDLE) vkf.vkDestroyPipelineLayout(d->dev, d->pipe_layout, NULL);
    if (d->set_layout != VK_NULL_HANDLE) vkf.vkDestroyDescriptorSetLayout(d->dev, d->set_layout, NULL);
    d->pipe_layout = VK_NULL_HANDLE;
    d->set_layout = VK_NULL_HANDLE;
    vkf.vkDestroyDevice(d->dev, NULL);
    d->dev = VK_NULL_HANDLE;
    d->ready = false;
}

static const vk_spirv *find_spirv(const char *name) {
    for (int i = 0; i < vk_spirv_count; i++)
        if (strcmp(vk_spirv_table[i].name, name) == 0) return &vk_spirv_table[i];
    return NULL;
}

static VkPipeline create_pipeline(vk_device *d, vk_shader_id id, const uint32_t spec[2]) {
    const vk_spirv *spv = find_spirv(vk_shader_name(id));
    VkShaderModule mod = VK_NULL_HANDLE;
    VkResult r = VK_ERROR_INITIALIZATION_FAILED;
    VkPipeline pipe = VK_NULL_HANDLE;
    if (spv) {
        VkShaderModuleCreateInfo mi = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            .codeSize = spv->size,
            .pCode = spv->words,
        };
        r = vkf.vkCreateShaderModule(d->dev, &mi, NULL, &mod);
    }
    if (r == VK_SUCCESS) {
        const VkSpecializationMapEntry map[2] = {
            {.constantID = 0, .offset = 0, .size = sizeof(uint32_t)},
            {.constantID = 1, .offset = sizeof(uint32_t), .size = sizeof(uint32_t)},
        };
        const VkSpecializationInfo si = {.mapEntryCount = 2, .pMapEntries = map, .dataSize = 2 * sizeof(uint32_t),
                                         .pData = spec};
        VkComputePipelineCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .stage = {
                .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = mod,
                .pName = "main",
                .pSpecializationInfo = &si,
            },
            .layout = d->pipe_layout,
        };
        r = vkf.vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &ci, NULL, &pipe);
        vkf.vkDestroyShaderModule(d->dev, mod, NULL);
    }
    if (r != VK_SUCCESS) {
        vk_log(TSR_LOG_ERROR, "vulkan%d: cannot create the pipeline of shader '%s' (%s, VkResult %d)", d->index,
               vk_shader_name(id), spv ? "driver refused it" : "not embedded", (int)r);
        return VK_NULL_HANDLE;
    }
    return pipe;
}

VkPipeline vk_pipeline_get(vk_device *d, vk_shader_id id, const uint32_t spec[2]) {
    if (id < 0 || id >= VK_SHADER_COUNT) return VK_NULL_HANDLE;
    pthread_mutex_lock(&d->lock);
    VkPipeline pipe = VK_NULL_HANDLE;
    for (int i = 0; i < d->n_pipelines && pipe == VK_NULL_HANDLE; i++) {
        const vk_pipeline_entry *e = &d->pipelines[i];
        if (e->shader == id && e->spec[0] == spec[0] && e->spec[1] == spec[1]) pipe = e->pipe;
    }
    if (pipe == VK_NULL_HANDLE) {
        if (d->n_pipelines == VK_MAX_PIPELINES) {
            vk_log(TSR_LOG_ERROR, "vulkan%d: more than %d pipelines", d->index, VK_MAX_PIPELINES);
        } else {
            pipe = create_pipeline(d, id, spec);
            if (pipe != VK_NULL_HANDLE)
                d->pipelines[d->n_pipelines++] = (vk_pipeline_entry){.shader = id, .spec = {spec[0], spec[1]}, .pipe = pipe};
        }
    }
    pthread_mutex_unlock(&d->lock);
    return pipe;
}
