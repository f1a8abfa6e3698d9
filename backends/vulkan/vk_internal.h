/*
 * vk_internal — the Vulkan plugin's shared state: the loader's function
 * table (libvulkan is opened with dlopen, so a machine without it gets zero
 * devices and a reason instead of a plugin that fails to load), devices,
 * buffers, queues and the shader parameter block.
 */
#ifndef TESSERA_VK_INTERNAL_H
#define TESSERA_VK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <tessera/plugin.h>
#include <vulkan/vulkan.h>

#define VK_PLUGIN_NAME "vulkan"

/* --------------------------------------------------------------- loader */

/* Every Vulkan entry point the plugin calls, fetched with
 * vkGetInstanceProcAddr (device-level ones through the loader's trampolines). */
#define VK_GLOBAL_FUNCS(X)                                                                        \
    X(vkCreateInstance)                                                                           \
    X(vkEnumerateInstanceExtensionProperties)

#define VK_INSTANCE_FUNCS(X)                                                                      \
    X(vkDestroyInstance)                                                                          \
    X(vkEnumeratePhysicalDevices)                                                                 \
    X(vkGetPhysicalDeviceProperties)                                                              \
    X(vkGetPhysicalDeviceProperties2)                                                             \
    X(vkGetPhysicalDeviceFeatures)                                                                \
    X(vkGetPhysicalDeviceFeatures2)                                                               \
    X(vkGetPhysicalDeviceMemoryProperties)                                                        \
    X(vkGetPhysicalDeviceMemoryProperties2)                                                       \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                                   \
    X(vkEnumerateDeviceExtensionProperties)                                                       \
    X(vkCreateDevice)                                                                             \
    X(vkDestroyDevice)                                                                            \
    X(vkGetDeviceQueue)                                                                           \
    X(vkDeviceWaitIdle)                                                                           \
    X(vkCreateBuffer)                                                                             \
    X(vkDestroyBuffer)                                                                            \
    X(vkGetBufferMemoryRequirements)                                                              \
    X(vkAllocateMemory)                                                                           \
    X(vkFreeMemory)                                                                               \
    X(vkBindBufferMemory)                                                                         \
    X(vkMapMemory)                                                                                \
    X(vkUnmapMemory)                                                                              \
    X(vkCreateShaderModule)                                                                       \
    X(vkDestroyShaderModule)                                                                      \
    X(vkCreateDescriptorSetLayout)                                                                \
    X(vkDestroyDescriptorSetLayout)                                                               \
    X(vkCreatePipelineLayout)                                                                     \
    X(vkDestroyPipelineLayout)                                                                    \
    X(vkCreateComputePipelines)                                                                   \
    X(vkDestroyPipeline)                                                                          \
    X(vkCreateDescriptorPool)                                                                     \
    X(vkDestroyDescriptorPool)                                                                    \
    X(vkResetDescriptorPool)                                                                      \
    X(vkAllocateDescriptorSets)                                                                   \
    X(vkUpdateDescriptorSets)                                                                     \
    X(vkCreateCommandPool)                                                                        \
    X(vkDestroyCommandPool)                                                                       \
    X(vkAllocateCommandBuffers)                                                                   \
    X(vkResetCommandBuffer)                                                                       \
    X(vkBeginCommandBuffer)                                                                       \
    X(vkEndCommandBuffer)                                                                         \
    X(vkCmdBindPipeline)                                                                          \
    X(vkCmdBindDescriptorSets)                                                                    \
    X(vkCmdDispatch)                                                                              \
    X(vkCmdPipelineBarrier)                                                                       \
    X(vkCmdCopyBuffer)                                                                            \
    X(vkQueueSubmit)                                                                              \
    X(vkCreateFence)                                                                              \
    X(vkDestroyFence)                                                                             \
    X(vkWaitForFences)                                                                            \
    X(vkResetFences)                                                                              \
    X(vkCreateQueryPool)                                                                          \
    X(vkDestroyQueryPool)                                                                         \
    X(vkCmdResetQueryPool)                                                                        \
    X(vkCmdWriteTimestamp)                                                                        \
    X(vkGetQueryPoolResults)

typedef struct vk_funcs {
    void *lib; /* dlopen handle of libvulkan */
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    /* Optional (NULL where the loader lacks it): VK_KHR_cooperative_matrix's
     * property query, typed in vk_features.c (Debian 12's headers predate
     * the extension). */
    PFN_vkVoidFunction coopmat_properties;
#define VK_FN_FIELD(name) PFN_##name name;
    VK_GLOBAL_FUNCS(VK_FN_FIELD)
    VK_INSTANCE_FUNCS(VK_FN_FIELD)
#undef VK_FN_FIELD
} vk_funcs;

/* The one function table (filled by vk_loader_open, cleared by close). */
extern vk_funcs vkf;

/* Open libvulkan and create the instance; -1 with reason filled on failure. */
int vk_loader_open(VkInstance *instance, char *reason, size_t reason_size);
void vk_loader_close(VkInstance instance);

/* ------------------------------------------------------------- devices */

/* Shaders the plugin runs; each is one SPIR-V module in vk_spirv_table. */
typedef enum vk_shader_id {
    VK_SHADER_ELTWISE,
    VK_SHADER_MUL_MAT_VEC,      /* few columns: VK_MMV_ROWS rows, one column per workgroup */
    VK_SHADER_MUL_MAT_VEC_SG,   /* the same with subgroup reductions     */
    VK_SHADER_MUL_MAT_TILED,    /* many columns: 64 x 64 tiles (GEMM)    */
    VK_SHADER_MUL_MAT_VEC_IDOT, /* mul_mat_vec with integer dot products */
    VK_SHADER_MUL_MAT_VEC_IDOT_SG,
    VK_SHADER_MUL_MAT_VEC_INV,  /* one output per invocation (CPU devices) */
    VK_SHADER_MUL_MAT_INV,      /* VK_MUL_MAT_COLS columns per invocation */
    VK_SHADER_MUL_MAT_VEC_INV64, /* the same accumulating in double (fp64) */
    VK_SHADER_MUL_MAT_INV64,
    VK_SHADER_ROW_NORM,
    VK_SHADER_ROW_NORM_SG,
    VK_SHADER_SOFT_MAX,
    VK_SHADER_SOFT_MAX_SG,
    VK_SHADER_ROPE,
    VK_SHADER_ROPE_F64,         /* sin/cos in double (shaderFloat64) */
    VK_SHADER_FLASH_ATTN,
    VK_SHADER_FLASH_ATTN_SG,
    VK_SHADER_FLASH_ATTN_INV,   /* one output row per invocation (CPU devices) */
    VK_SHADER_FLASH_ATTN_REDUCE, /* combines the partials of FLASH_ATTN split over keys */
    VK_SHADER_FLASH_ATTN_TILED, /* prompts: query blocks sharing K/V tiles */
    VK_SHADER_QUANTIZE,         /* CPY into the KV cache's block types */
    VK_SHADER_MUL_MAT_COOPMAT,  /* prompts on cooperative matrices, f32 accumulators */
    VK_SHADER_MUL_MAT_COOPMAT_F16ACC, /* the same accumulating in f16 */
    VK_SHADER_MUL_MAT_COOPMAT_EMU, /* its plain-GLSL emulation (tests on any device) */
    VK_SHADER_MUL_MAT_ID,       /* MUL_MAT_ID: one output per invocation */
    VK_SHADER_MUL_MAT_ID_GROUP, /* grouped MUL_MAT_ID: each expert's (token, slot) pairs listed */
    VK_SHADER_MUL_MAT_ID_TILED, /* grouped MUL_MAT_ID: the tiled GEMM over those lists */
    VK_SHADER_SSM_CONV,         /* SSM_CONV: one output per invocation */
    VK_SHADER_SSM_SCAN,         /* SSM_SCAN: one state row per workgroup */
    VK_SHADER_DELTA_NET,        /* DELTA_NET: one state column per invocation */
    /* The matrix products built with IQ_GRIDS, for the grid IQ weight types
     * (their tables cost every pipeline of a module compile time: ~3x on
     * lavapipe, so the other types keep the modules without them). */
    VK_SHADER_MUL_MAT_VEC_IQ,
    VK_SHADER_MUL_MAT_VEC_SG_IQ,
    VK_SHADER_MUL_MAT_TILED_IQ,
    VK_SHADER_MUL_MAT_VEC_INV_IQ,
    VK_SHADER_MUL_MAT_INV_IQ,
    VK_SHADER_MUL_MAT_ID_IQ,
    VK_SHADER_MUL_MAT_ID_TILED_IQ,
    VK_SHADER_ELTWISE_IQ, /* GET_ROWS and CPY of the grid IQ types */
    VK_SHADER_COUNT
} vk_shader_id;

enum { VK_MUL_MAT_COLS = 8 }; /* must match NCOLS of the mul_mat_inv variants */
/* ssm_scan.comp's WG and MAX_PER: it holds d_state up to their product */
enum { VK_SSM_WG = 32, VK_SSM_MAX_PER = 8 };

/* ---- gpu kernels (matrix products): variants and their choice ---- */
enum {
    VK_MMV_ROWS = 4,     /* rows per workgroup of mul_mat_vec.comp (its ROWS) */
    VK_MMV_MAX_COLS = 8, /* up to this many columns the product is a mat-vec */
    VK_TILE_M = 64,      /* mul_mat_tiled.comp's BM x BN output tile */
    VK_TILE_N = 64,
    VK_COOPMAT_TILE = 64, /* mul_mat_coopmat.comp's BM = BN */
    VK_COOPMAT_SUBGROUP = 32, /* its 128 invocations are 4 subgroups of this size */
    VK_COOPMAT_SHARED = 2 * 64 * 72 * 2 + 4 * 256 * 4, /* its shared bytes (f32 staging) */
};

/* The embedded SPIR-V module (vk_spirv_table name) of a shader. */
const char *vk_shader_name(vk_shader_id id);
/* Whether the plugin was built with that shader (a glslc without an
 * extension leaves its variants out). */
bool vk_shader_embedded(vk_shader_id id);

/* What the kernels may use on a device: its features, each also off when
 * the shader variant is not embedded or an environment switch says so
 * (vk_features.c). Probed with the physical device; the extensions and
 * features they need are enabled on the logical device. */
/* The cooperative-matrix GEMM's accumulators, as the device's properties
 * allow (f32 preferred), or NONE: the tiled kernel runs prompts. */
typedef enum vk_coopmat_acc { VK_COOPMAT_NONE, VK_COOPMAT_F32, VK_COOPMAT_F16 } vk_coopmat_acc;

typedef struct vk_kernel_caps {
    bool integer_dot;      /* VK_KHR_shader_integer_dot_product's shaderIntegerDotProduct */
    bool integer_dot_fast; /* the device says 4x8-bit packed signed dots are accelerated */
    vk_coopmat_acc coopmat; /* mul_mat_coopmat.comp runs prompts (switched on: see vk_features.c) */
    bool coopmat_all;      /* TESSERA_VULKAN_MATMUL=coopmat: at every column count */
    bool coopmat_emulated; /* TESSERA_VULKAN_MATMUL=coopmat-emulated: the emulation at every column count */
    bool float16;          /* shaderFloat16 enabled (the coopmat kernels' F16 tiles) */
    bool coopmat2;         /* VK_NV_cooperative_matrix2 exposed (reported; no kernel yet) */
} vk_kernel_caps;

struct vk_device;
/* The physical device offers extension name (vk_plugin.c). */
bool vk_device_has_extension(VkPhysicalDevice phys, const char *name);
/* Fill d->kern and append to d->features ("integer-dot ..."). */
void vk_features_probe(struct vk_device *d);
/* The device extensions (names into ext[], at most VK_MAX_KERNEL_EXTS) and
 * feature structs (a pNext chain into *chain, storage in *store) the
 * kernels need enabled. */
enum { VK_MAX_KERNEL_EXTS = 8 };
typedef struct vk_features_store {
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR idot;
    VkPhysicalDeviceShaderFloat16Int8FeaturesKHR float16;
    VkPhysicalDeviceVulkanMemoryModelFeaturesKHR memory_model;
    struct {                   /* VkPhysicalDeviceCooperativeMatrixFeaturesKHR */
        VkStructureType sType;
        void *pNext;
        VkBool32 cooperativeMatrix;
        VkBool32 cooperativeMatrixRobustBufferAccess;
    } coopmat;
} vk_features_store;
uint32_t vk_features_enable(const struct vk_device *d, const char *ext[VK_MAX_KERNEL_EXTS], vk_features_store *store,
                            void **chain);

/* A pipeline is a shader with its two specialization constants (the
 * matrix products take their dtypes that way). */
typedef struct vk_pipeline_entry {
    vk_shader_id shader;
    uint32_t spec[2];
    VkPipeline pipe;
} vk_pipeline_entry;

enum { VK_MAX_PIPELINES = 256 };

typedef struct vk_device {
    tsr_device base; /* what the host sees; base.impl points here */
    int32_t index;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    bool has_budget;          /* VK_EXT_memory_budget */
    bool subgroup_arith;      /* subgroupAdd/Max in compute shaders */
    uint32_t subgroup_size;
    uint64_t max_alloc;       /* maxMemoryAllocationSize (Vulkan 1.1) */
    uint32_t queue_family;
    uint32_t timestamp_bits;  /* valid bits of the queue's timestamps; 0: it cannot time */
    bool unified;             /* device-local memory is host-visible: no staging */
    bool matmul_per_invocation; /* CPU implementations: no workgroup reductions */
    bool attn_per_invocation;   /* the same for FLASH_ATTN (flash_attn_inv.comp) */
    int attn_mode;            /* VK_ATTN_*: which gpu FLASH_ATTN kernel (vk_fused.c) */
    bool fuse;                /* norm x MUL, ROPE + CPY: one dispatch each (TESSERA_VULKAN_NO_FUSE=1: off) */
    bool has_f64;             /* shaderFloat64, enabled on the logical device */
    vk_kernel_caps kern;      /* gpu kernels: what they may use (vk_features.c) */
    /* TESSERA_VULKAN_MEMORY_LIMIT_MIB (tests): the device pretends to have
     * only this much memory (0 = no limit); allocated counts our buffers. */
    uint64_t memory_limit;
    uint64_t allocated;
    char description[300];
    char features[200];

    /* Created at first use (buffer or queue), under lock. */
    pthread_mutex_t lock;
    bool ready;
    bool failed;
    VkDevice dev;
    VkQueue queue;
    pthread_mutex_t submit_lock; /* vkQueueSubmit needs external sync */
    /* Bumped (under lock) whenever a buffer is freed: a queue replays a
     * recorded command buffer only while it is unchanged, since a new
     * buffer may reuse a freed one's handle (vk_queue.c). */
    uint64_t buffers_freed;
    struct vk_queue *queues;  /* every live queue (under lock): buffer_free drops their uploads to it */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    vk_pipeline_entry pipelines[VK_MAX_PIPELINES];
    int n_pipelines;
    VkBuffer dummy;              /* bound to unused tensor slots */
    VkDeviceMemory dummy_mem;
    uint32_t device_type;        /* memory type index of tensor buffers */
    uint32_t host_type;          /* memory type index of staging/params */
} vk_device;

/* Plugin-wide state (vk_plugin.c). */
extern const tsr_host *vk_host;
void vk_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool vk_abort_requested(void);

/* Create the logical device, pipelines and dummy buffer; -1 on failure
 * (logged). Safe to call repeatedly. */
int vk_device_ready(vk_device *d);
void vk_device_release(vk_device *d);

/* The compute pipeline of a shader with specialization constants spec[0..1],
 * created at first use; VK_NULL_HANDLE on failure (logged). */
VkPipeline vk_pipeline_get(vk_device *d, vk_shader_id id, const uint32_t spec[2]);

/* Memory type index with the wanted flags among type_bits, or -1. */
int vk_memory_type(const vk_device *d, uint32_t type_bits, VkMemoryPropertyFlags want);

/* Device-local memory: total and free (budget - usage where known) bytes. */
void vk_device_memory(const vk_device *d, uint64_t *total, uint64_t *free_bytes);

/* ------------------------------------------------------------- buffers */

#define VK_BUFFER_MAGIC 0x564b4246u /* "VKBF" */

typedef struct vk_buffer {
    uint32_t magic;
    vk_device *owner;
    VkBuffer buf;
    VkDeviceMemory mem;
    uint64_t size;       /* as asked */
    uint64_t alloc_size; /* VkBuffer size: size rounded up to 4 bytes */
    uint8_t *mapped;     /* host address when unified memory, else NULL */
} vk_buffer;

/* A plain buffer + memory with the given usage and memory type. */
VkResult vk_raw_buffer_create(vk_device *d, uint64_t size, VkBufferUsageFlags usage, uint32_t mem_type,
                              VkBuffer *buf, VkDeviceMemory *mem, void **mapped);
void vk_raw_buffer_destroy(vk_device *d, VkBuffer buf, VkDeviceMemory mem);

tsr_status vk_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out);
void vk_buffer_free(tsr_device *device, tsr_buffer *buffer);
void *vk_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer);
/* The plugin's buffer behind a tsr_buffer of device d, or NULL. */
vk_buffer *vk_buffer_of(const vk_device *d, tsr_buffer *buffer);

/* ------------------------------------------------------------- queues */

/* A growable host-visible buffer (staging, parameter blocks). */
typedef struct vk_host_buffer {
    VkBuffer buf;
    VkDeviceMemory mem;
    uint8_t *mapped;
    uint64_t size;
} vk_host_buffer;

/* What one recorded dispatch depends on besides its parameter block
 * (vk_queue.c: a compute() that plans to the same list replays the
 * command buffer recorded last instead of recording it again). */
typedef struct vk_rec_node {
    VkPipeline pipe;
    VkDescriptorBufferInfo infos[6];
    uint32_t groups[3];
    bool barrier;
} vk_rec_node;

/* A host write deferred into the next submission (vk_queue.c). */
typedef struct vk_upload {
    VkBuffer dst;
    VkBufferCopy region; /* srcOffset in the queue's upload ring */
} vk_upload;

typedef struct vk_queue {
    tsr_queue base;
    vk_device *dev;
    VkCommandPool pool;
    VkCommandBuffer cmd;      /* compute: recorded by compute(), replayed while the nodes plan the same */
    VkCommandBuffer xfer;     /* staging copies */
    VkCommandBuffer up_cmd;   /* deferred uploads, submitted with cmd */
    VkFence fence;
    bool pending;             /* cmd submitted, fence not yet waited */
    VkDescriptorPool desc_pool;
    uint32_t desc_capacity;   /* sets the pool holds */
    vk_host_buffer params;    /* one parameter block per dispatch */
    vk_host_buffer iq_grids;  /* the IQ grids (vk_iq_grids.h), made at first use */
    vk_host_buffer staging;
    /* Device memory for partial results between two dispatches of one node
     * (FLASH_ATTN split over keys: vk_fused.c); grown, never shrunk. */
    VkBuffer scratch;
    VkDeviceMemory scratch_mem;
    uint64_t scratch_size;
    /* The command buffer cmd holds (valid while rec_valid). */
    vk_rec_node *rec, *plan;  /* [cap_rec]: recorded, and this call's */
    uint32_t n_rec, cap_rec;
    bool rec_valid;
    uint64_t rec_freed;       /* dev->buffers_freed when cmd was recorded */
    uint64_t n_recorded, n_replayed; /* compute() calls of each kind */
    tsr_queue_stats stats;    /* the rest of get_stats's totals */
    /* Profiling (set_profiling): a timestamp after every node. */
    bool profiling, rec_profiled;
    VkQueryPool qpool;
    uint32_t qpool_cap;
    int32_t *prof_ops;        /* [cap_rec] op of each dispatch planned or in flight */
    uint32_t prof_n;          /* dispatches timed by the submission in flight (0: none) */
    /* Host writes waiting for the next submission. */
    vk_host_buffer upload;    /* their bytes */
    uint64_t upload_used;
    vk_upload *uploads;       /* under up_lock: buffer_free may drop some from another thread */
    uint32_t n_uploads, cap_uploads;
    pthread_mutex_t up_lock;
    struct vk_queue *next;    /* in dev->queues */
} vk_queue;

/* A buffer is being freed: drop every deferred upload into it (its bytes
 * can no longer be observed). Called with d->lock held. */
void vk_queues_forget_buffer(vk_device *d, VkBuffer buf);

tsr_status vk_queue_create(tsr_device *device, tsr_queue **out);

/* ------------------------------------------------------------- ops */

/* The parameter block every shader reads at binding 5 (std430; keep in
 * step with shaders/common.glsl). Tensors: 0..3 sources, 4 dst. */
typedef struct vk_params {
    uint32_t off[8];     /* byte offset of each tensor within its bound range */
    uint32_t ne[5][4];
    uint32_t nb[5][4];
    uint32_t dt[8];      /* dtypes of the tensors, then op-specific codes */
    int32_t ip[8];       /* the node's iparams */
    float fp[8];         /* the node's fparams */
    uint32_t u[8];       /* op-specific integers */
    float f[8];          /* op-specific floats */
} vk_params;

enum { VK_PARAMS_STRIDE = 512 }; /* >= sizeof(vk_params), a multiple of every offset alignment */

/* How to run one node: which shader, its parameters and its grid. */
typedef struct vk_dispatch {
    vk_shader_id shader;
    uint32_t spec[2]; /* specialization constants (0 where unused) */
    vk_params p;
    uint32_t groups[3];
} vk_dispatch;

/* 1 if the device computes this node (the truthful supports_op). When
 * why is given, a reason is written for a 0. */
int vk_op_supported(const vk_device *d, const tsr_node *node, char *why, size_t why_size);

/* Fill the shader choice, parameters (all but off[]) and grid for a node
 * that passed vk_op_supported. */
void vk_op_plan(const vk_device *d, const tsr_node *node, vk_dispatch *out);

/* ------------------------------------------------- fused and split plans */

/* vk_fused.c: nodes that are not one dispatch each. */
/* TESSERA_VULKAN_FLASH_ATTN on a GPU: auto (split for decoding, tiled for
 * prompts), workgroup (neither), split or tiled (at every size). */
enum { VK_ATTN_AUTO, VK_ATTN_WORKGROUP, VK_ATTN_SPLIT, VK_ATTN_TILED };

/* nodes[i] (RMS_NORM or NORM) and nodes[i + 1] (MUL of its result by a
 * weight) can run as one dispatch; *keep_mid: the normalized rows must
 * still be stored (the MUL does not overwrite them in place). */
bool vk_norm_mul_fusable(const vk_device *d, const tsr_node *norm, const tsr_node *mul, bool *keep_mid);
/* The dispatch of the pair: tensors src0 x, src1 weight, src2 the norm's
 * dst (written when keep_mid), dst the MUL's dst. */
void vk_plan_norm_mul(const vk_device *d, const tsr_node *norm, const tsr_node *mul, bool keep_mid, vk_dispatch *out);

/* nodes[i] (ROPE) and nodes[i + 1] (CPY of its F32 result into an F32,
 * F16 or BF16 tensor: the KV cache) can run as one dispatch. */
bool vk_rope_cpy_fusable(const vk_device *d, const tsr_node *rope, const tsr_node *cpy);
/* The dispatch of the pair: rope.comp with P.u[3] = 1, tensors src0 x,
 * src1 positions, src2 factors, src3 the ROPE's dst, dst the CPY's dst. */
void vk_plan_rope_cpy(const vk_device *d, const tsr_node *rope, const tsr_node *cpy, vk_dispatch *out);

/* Splits of a FLASH_ATTN node over its keys (1: none) and the keys each. */
uint32_t vk_attn_splits(const vk_device *d, const tsr_node *node, uint32_t *keys_per_split);
/* FLASH_ATTN runs flash_attn_tiled.comp (not split). */
bool vk_attn_tiled(const vk_device *d, const tsr_node *node);
/* Scratch bytes the partial states of that many splits take. */
uint64_t vk_attn_scratch_bytes(const tsr_node *node, uint32_t splits);
/* The two dispatches: partial (dst slot bound to the scratch) and reduce
 * (src0 slot bound to the scratch, dst the node's). */
void vk_plan_attn_split(const vk_device *d, const tsr_node *node, uint32_t splits, uint32_t keys_per_split,
                        vk_dispatch *partial, vk_dispatch *reduce);

/* MUL_MAT_ID grouped by expert (mul_mat_id_group.comp, then
 * mul_mat_tiled.comp with MUL_MAT_ID): prompts on GPUs. */
enum { VK_MOE_MAX_EXPERTS = 1024 }; /* mul_mat_id_group.comp's MAX_E */
bool vk_moe_grouped(const vk_device *d, const tsr_node *node);
/* Scratch bytes its lists take. */
uint64_t vk_moe_scratch_bytes(const tsr_node *node);
/* The two dispatches: the lists (scratch in slot 3, written; dst zeroed
 * where an id is out of range) and the GEMM (scratch in slot 3, read). */
void vk_plan_moe_grouped(const vk_device *d, const tsr_node *node, vk_dispatch *group, vk_dispatch *gemm);

/* The shader a product with weights of dtype runs: s, or its IQ_GRIDS
 * build for the grid IQ types (vk_ops.c). */
vk_shader_id vk_shader_for_weights(vk_shader_id s, int32_t dtype);
/* IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: read through the
 * grid buffer (common.glsl: IQ_GRIDS). */
bool vk_dtype_is_grid_iq(int32_t dtype);
/* The ops that read a grid IQ src0 (with the grids bound at slot 2, or 3
 * for MUL_MAT_ID): MUL_MAT, MUL_MAT_ID, GET_ROWS, CPY into floats. */
bool vk_op_reads_grid_iq(int32_t op);

/* DELTA_NET in chunks of tokens (vk_fused.c): tokens a dispatch may take
 * on d (< 1: not one), the dispatches of the node, and chunk c's plan. */
int64_t vk_delta_net_chunk_tokens(const vk_device *d, const tsr_node *node);
uint32_t vk_delta_net_chunks(const vk_device *d, const tsr_node *node);
void vk_plan_delta_net_chunk(const vk_device *d, const tsr_node *node, uint32_t chunk, vk_dispatch *out);

/* n workgroups as an x * y grid within the guaranteed 65535 per dimension */
void vk_grid(uint64_t n, uint32_t groups[3]);

/* Bytes [lo, hi) a tensor touches relative to its offset start (lo = 0). */
uint64_t vk_tensor_extent(const tsr_tensor *t);

/* Byte alignment the shaders need for a tensor of this dtype. */
int64_t vk_dtype_alignment(int32_t dtype);

#endif
