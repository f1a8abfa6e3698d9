/*
 * ocl_internal — what the OpenCL plugin's files share.
 *
 *   ocl_plugin.c   the plugin table: probe platforms/devices, device info
 *   ocl_program.c  build the kernels once per device at first use, with an
 *                  on-disk cache of program binaries
 *   ocl_memory.c   buffers (mapped on unified-memory devices)
 *   ocl_queue.c    queues: compute a node list, write, read, synchronize
 *   ocl_check.c    supports_op: is a (well-formed) node ours to compute
 *   ocl_ops.c      one enqueue function per op
 *
 * Only tessera/plugin.h and CL/cl.h (plus libc) are included: the plugin
 * knows nothing of core.
 *
 * Environment:
 *   TESSERA_OPENCL_DEVICE_TYPE=all|gpu|cpu|accelerator   devices to use
 *   TESSERA_OPENCL_NO_MAP=1          copy instead of mapping on unified memory
 *   TESSERA_OPENCL_WG=N              work-group size of the reduction kernels
 *   TESSERA_OPENCL_INJECT_BUILD_ERROR=1   break the kernel source (tests)
 *   TESSERA_OPENCL_MOE=grouped|token MUL_MAT_ID grouped by expert at every
 *                                    size, or never (default: above
 *                                    OCL_MOE_MIN_TOKENS tokens)
 *   POCL_WORK_GROUP_SPECIALIZATION   set to 0 unless already set (ocl_plugin.c)
 */
#ifndef TESSERA_OCL_INTERNAL_H
#define TESSERA_OCL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <CL/cl.h>
#include <tessera/plugin.h>

#define OCL_PLUGIN_NAME "opencl"
#define OCL_MAX_DEVICES 16

/* The kernels in the program, in kernels/ (*.cl files). */
typedef enum ocl_kernel_id {
    OCL_K_BINARY,
    OCL_K_UNARY,
    OCL_K_SWIGLU,
    OCL_K_CONCAT,
    OCL_K_GET_ROWS_FLOAT,
    OCL_K_GET_ROWS_QUANT,
    OCL_K_CPY_FLOAT,
    OCL_K_CPY_DEQUANT,
    OCL_K_CPY_QUANT,
    OCL_K_ARGMAX,
    OCL_K_NORM,
    OCL_K_SOFT_MAX,
    OCL_K_ROPE,
    OCL_K_MUL_MAT,
    OCL_K_FLASH_ATTN,
    OCL_K_MUL_MAT_ID,
    OCL_K_TOP_K,
    OCL_K_SUM_ROWS,
    OCL_K_SSM_CONV,
    OCL_K_SSM_SCAN,
    OCL_K_SWIGLU_OAI,
    OCL_K_DELTA_NET,
    OCL_K_MOE_GROUP,          /* grouped MUL_MAT_ID: each expert's pairs listed */
    OCL_K_MUL_MAT_ID_TILED,   /* grouped MUL_MAT_ID: the tiled product over those lists */
    OCL_K_COUNT
} ocl_kernel_id;

/* Program state of a device: built at first use, once. */
typedef enum ocl_program_state {
    OCL_PROGRAM_UNBUILT = 0,
    OCL_PROGRAM_READY = 1,
    OCL_PROGRAM_FAILED = 2 /* every supports_op answers 0: the work falls back */
} ocl_program_state;

typedef struct ocl_device {
    tsr_device dev; /* what the host sees; dev.impl points back here */
    int32_t index;
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_device_type type;
    char name[128];        /* CL_DEVICE_NAME */
    char driver[64];       /* CL_DRIVER_VERSION */
    char description[400]; /* "<name> (<platform> <driver>, OpenCL x.y)" */
    char features[128];
    uint64_t mem_total;
    uint64_t max_alloc;
    size_t max_wg;       /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    int32_t wg;          /* work-group size of the reduction kernels (power of 2) */
    bool unified;        /* CL_DEVICE_HOST_UNIFIED_MEMORY: buffers are mapped */
    bool has_fp16;       /* cl_khr_fp16 (informational: kernels compute in F32) */

    pthread_mutex_t build_lock;   /* guards the program build */
    pthread_mutex_t enqueue_lock; /* kernel objects are shared: args + enqueue as one step */
    int32_t program_state;
    cl_program program;
    cl_kernel kernels[OCL_K_COUNT];
    /* The internal queue buffers are allocated and mapped with. */
    cl_command_queue alloc_queue;
} ocl_device;

typedef struct ocl_buffer {
    uint64_t magic; /* OCL_BUFFER_MAGIC while alive */
    ocl_device *dev;
    cl_mem mem;
    uint64_t size;
    void *host; /* the mapped address on unified-memory devices, else NULL */
} ocl_buffer;

#define OCL_BUFFER_MAGIC 0x6f636c6275660001ull /* "oclbuf" */

typedef struct ocl_queue {
    tsr_queue q;
    ocl_device *dev;
    cl_command_queue cq;
    tsr_queue_stats stats;   /* get_stats's running totals */
    /* Writes enqueued without blocking: their source copies, freed once the
     * queue is finished (synchronize, a blocking read, destroy). */
    void **held;
    uint32_t n_held, cap_held;
    /* Profiling (set_profiling): cq was created with profiling on; a marker
     * before the first node and after each one, in flight until finished. */
    bool profiling;
    cl_event *marks;
    int32_t *mark_ops;       /* op of the node each mark (but the first) ends */
    uint32_t n_marks, cap_marks;
    /* Scratch for kernels that need more than their node's tensors (the
     * lists of a grouped MUL_MAT_ID), grown on demand. */
    cl_mem scratch;
    uint64_t scratch_bytes;
} ocl_queue;

/* ------------------------------------------------------------ ocl_plugin */

/* The host's services (log, abort flag, cache dir); NULL before init. */
const tsr_host *ocl_host(void);
/* Log one printf-style line through the host. */
void ocl_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The name of an OpenCL error code, e.g. "CL_OUT_OF_RESOURCES". */
const char *ocl_error_name(cl_int err);
/* Device name as the host shows it ("opencl0"). */
const char *ocl_device_label(const ocl_device *d, char *buf, size_t size);

/* ----------------------------------------------------------- ocl_program */

/* Build (or load from the cache) the program of d if not done yet. Returns
 * true when the kernels are ready; false after a failed build (logged once,
 * with the build log). Thread-safe. */
bool ocl_program_ensure(ocl_device *d);
void ocl_program_release(ocl_device *d);

/* ------------------------------------------------------------ ocl_memory */

tsr_status ocl_buffer_alloc(tsr_device *device, uint64_t size, tsr_buffer **out);
void ocl_buffer_free(tsr_device *device, tsr_buffer *buffer);
void *ocl_buffer_host_ptr(tsr_device *device, tsr_buffer *buffer);
/* The buffer behind a tsr_buffer handed to d, or NULL if it is not ours. */
ocl_buffer *ocl_buffer_of(const ocl_device *d, tsr_buffer *buffer);

/* ------------------------------------------------------------- ocl_queue */

tsr_status ocl_queue_create(tsr_device *device, tsr_queue **out);
/* q's scratch buffer of at least bytes (grown: the old one is released,
 * which OpenCL defers until the work enqueued on it is done), or NULL. */
cl_mem ocl_queue_scratch(ocl_queue *q, uint64_t bytes);

/* ------------------------------------------------------------- ocl_check */

/* 1 if d can compute the node exactly as the ABI defines it, else 0 (with
 * the reason in why when why_size > 0). Looks at shapes, dtypes and params,
 * never at addresses. */
int ocl_node_supported(const ocl_device *d, const tsr_node *node, char *why, size_t why_size);
/* Whether kernels read this dtype as a quantized row (dequant32). */
bool ocl_dtype_is_quant(int32_t dtype);
/* The KV cache's block types: quantized by CPY (kernels/quant.cl) and read
 * by FLASH_ATTN. */
bool ocl_dtype_is_kv_block(int32_t dtype);
/* Byte alignment the kernels need for a tensor's offset and strides: whole
 * elements (F32/I32 4, F16/BF16 2), 2 for blocks (F16 scales), 1 for MXFP4. */
int64_t ocl_dtype_alignment(int32_t dtype);

/* --------------------------------------------------------------- ocl_ops */

/* Enqueue the kernels of one node on q (the node passed ocl_node_supported
 * and its tensors live in d's buffers). */
tsr_status ocl_op_enqueue(ocl_device *d, ocl_queue *q, const tsr_node *node);

/* MUL_MAT_ID grouped by expert (kernels/moe.cl: k_moe_group, then
 * k_mul_mat_id_tiled): prompts of more than OCL_MOE_MIN_TOKENS tokens, up
 * to OCL_MOE_MAX_EXPERTS experts (MOE_MAX_E, its local counters), on
 * devices with work-groups of 64. */
enum { OCL_MOE_MIN_TOKENS = 8, OCL_MOE_MAX_EXPERTS = 1024, OCL_MOE_TILE = 32 };
bool ocl_moe_grouped(const ocl_device *d, const tsr_node *node);

#endif
