/*
 * ocl_program — the kernels of one device, built once at first use.
 *
 * The OpenCL C source (kernels/ (*.cl files), embedded at build time) is compiled by
 * the driver, which is slow on some (PoCL runs LLVM: seconds). The built
 * program's binary (CL_PROGRAM_BINARIES) is therefore kept on disk under
 *     <cache_dir>/opencl/<device name>-<driver version>-<hash>.bin
 * where hash covers the source and the build options, so a changed kernel,
 * driver or device never loads a stale binary. A cache file that is
 * unreadable or that the driver rejects is ignored and rewritten.
 *
 * A build failure is logged once with the driver's build log; the device
 * then declines every node (supports_op 0) and the work falls back to the
 * CPU. TESSERA_OPENCL_INJECT_BUILD_ERROR=1 appends a syntax error to the
 * source, to test exactly that path.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ocl_internal.h"

extern const char ocl_kernel_source[];

static const char *const kernel_names[OCL_K_COUNT] = {
    [OCL_K_BINARY] = "k_binary",
    [OCL_K_UNARY] = "k_unary",
    [OCL_K_SWIGLU] = "k_swiglu",
    [OCL_K_CONCAT] = "k_concat",
    [OCL_K_GET_ROWS_FLOAT] = "k_get_rows_float",
    [OCL_K_GET_ROWS_QUANT] = "k_get_rows_quant",
    [OCL_K_CPY_FLOAT] = "k_cpy_float",
    [OCL_K_CPY_DEQUANT] = "k_cpy_dequant",
    [OCL_K_CPY_QUANT] = "k_cpy_quant",
    [OCL_K_ARGMAX] = "k_argmax",
    [OCL_K_NORM] = "k_norm",
    [OCL_K_SOFT_MAX] = "k_soft_max",
    [OCL_K_ROPE] = "k_rope",
    [OCL_K_MUL_MAT] = "k_mul_mat",
    [OCL_K_FLASH_ATTN] = "k_flash_attn",
    [OCL_K_MUL_MAT_ID] = "k_mul_mat_id",
    [OCL_K_TOP_K] = "k_top_k",
    [OCL_K_SUM_ROWS] = "k_sum_rows",
    [OCL_K_SSM_CONV] = "k_ssm_conv",
    [OCL_K_SSM_SCAN] = "k_ssm_scan",
    [OCL_K_SWIGLU_OAI] = "k_swiglu_oai",
    [OCL_K_DELTA_NET] = "k_delta_net",
    [OCL_K_MOE_GROUP] = "k_moe_group",
    [OCL_K_MUL_MAT_ID_TILED] = "k_mul_mat_id_tiled",
};

static const char injected_error[] = "\nkernel void tessera_injected_error( { this is not OpenCL C }\n";

#define CACHE_MAGIC "TSROCLB1"

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(uint64_t h, const char *s) {
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The directory caches go to: the host's, else the user's cache folder
 * (the conformance suite passes none). "" when there is none. */
static void cache_root(char *buf, size_t size) {
    const tsr_host *h = ocl_host();
    const char *dir = NULL;
    if (h && h->struct_size >= offsetof(tsr_host, cache_dir) + sizeof h->cache_dir) dir = h->cache_dir;
    if (dir && dir[0]) {
        snprintf(buf, size, "%s", dir);
        return;
    }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(buf, size, "%s/tessera", xdg);
    else if (home && home[0] == '/')
        snprintf(buf, size, "%s/.cache/tessera", home);
    else
        buf[0] = '\0';
}

/* mkdir -p; true when the directory exists afterwards. */
static bool make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        bool ok = mkdir(path, 0755) == 0 || errno == EEXIST;
        *p = '/';
        if (!ok) return false;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

/* Cache file path for d, or false if there is no cache directory. */
static bool cache_path(const ocl_device *d, const char *source, const char *options, char *buf,
                       size_t size) {
    char root[1024];
    cache_root(root, sizeof root);
    if (!root[0]) return false;
    uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ull, source), "\n"), options);
    char key[200];
    snprintf(key, sizeof key, "%s-%s", d->name, d->driver);
    for (char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '_';
    int n = snprintf(buf, size, "%s/opencl/%s-%016llx.bin", root, key, (unsigned long long)h);
    return n > 0 && (size_t)n < size;
}

/* The cached binary (malloc'ed) or NULL. */
static unsigned char *cache_load(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char magic[8];
    uint64_t n = 0;
    unsigned char *bin = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CACHE_MAGIC, 8) || fread(&n, sizeof n, 1, f) != 1 ||
        n == 0 || n > (256u << 20))
        goto done;
    bin = malloc((size_t)n);
    if (bin && fread(bin, 1, (size_t)n, f) != (size_t)n) {
        free(bin);
        bin = NULL;
    }
    *size = (size_t)n;
done:
    fclose(f);
    return bin;
}

/* Write atomically (temporary file, then rename); failures only log. */
static void cache_store(const char path[1400], const unsigned char *bin, size_t size) {
    char dir[1400], tmp[1500];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    if (!make_dirs(dir)) {
        ocl_log(TSR_LOG_WARN, "cannot create the kernel cache folder %s: %s", dir, strerror(errno));
        return;
    }
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ocl_log(TSR_LOG_WARN, "cannot write the kernel cache %s: %s", tmp, strerror(errno));
        return;
    }
    uint64_t n = size;
    bool ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&n, sizeof n, 1, f) == 1 &&
              fwrite(bin, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        ocl_log(TSR_LOG_WARN, "cannot write the kernel cache %s", path);
        remove(tmp);
    }
}

/* The program's binary for its one device (malloc'ed) or NULL. */
static unsigned char *program_binary(cl_program prog, size_t *size) {
    size_t n = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0)
        return NULL;
    unsigned char *bin = malloc(n);
    if (!bin) return NULL;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) != CL_SUCCESS) {
        free(bin);
        return NULL;
    }
    *size = n;
    return bin;
}

/* Log the build failure with the driver's build log, in one message. */
static void log_build_failure(const ocl_device *d, cl_program prog, cl_int err) {
    char label[32];
    size_t n = 0;
    char *text = NULL;
    if (prog && clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS &&
        n > 0 && (text = malloc(n + 1)) != NULL) {
        if (clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, n, text, NULL) != CL_SUCCESS) n = 0;
        text[n] = '\0';
    }
    /* keep the message readable: the first errors say what went wrong */
    if (text && strlen(text) > 3000) strcpy(text + 2980, "\n... (build log cut)");
    ocl_log(TSR_LOG_ERROR,
            "%s (%s): building the kernels failed (%s); its ops fall back to the CPU. Build log:\n%s",
            ocl_device_label(d, label, sizeof label), d->name, ocl_error_name(err),
            text && text[0] ? text : "(the driver gave no build log)");
    free(text);
}

/* Build from the cached binary; NULL if there is none or the driver refuses it. */
static cl_program build_from_cache(ocl_device *d, const char *path, const char *options) {
    size_t size = 0;
    unsigned char *bin = cache_load(path, &size);
    if (!bin) return NULL;
    const unsigned char *bins[1] = {bin};
    cl_int status = CL_SUCCESS, err;
    cl_program prog = clCreateProgramWithBinary(d->ctx, 1, &d->id, &size, bins, &status, &err);
    free(bin);
    if (prog && err == CL_SUCCESS && status == CL_SUCCESS &&
        clBuildProgram(prog, 1, &d->id, options, NULL, NULL) == CL_SUCCESS)
        return prog;
    if (prog) clReleaseProgram(prog);
    ocl_log(TSR_LOG_INFO, "ignoring the kernel cache %s: the driver refused it", path);
    return NULL;
}

/* Correctly rounded f32 division where the device can: the quantizing
 * CPY (kernels/quant.cl) then writes ref's bytes. */
static bool exact_divide(const ocl_device *d) {
    cl_device_fp_config fp = 0;
    return clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL) == CL_SUCCESS &&
           (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
}

static bool build(ocl_device *d) {
    char options[160], path[1400], label[32];
    snprintf(options, sizeof options, "-cl-std=CL1.2 -DWG=%d%s", (int)d->wg,
             exact_divide(d) ? " -cl-fp32-correctly-rounded-divide-sqrt" : "");
    const char *inject = getenv("TESSERA_OPENCL_INJECT_BUILD_ERROR");
    bool broken = inject && inject[0] == '1';
    size_t len = strlen(ocl_kernel_source);
    char *source = malloc(len + sizeof injected_error);
    if (!source) {
        ocl_log(TSR_LOG_ERROR, "out of memory for the kernel source");
        return false;
    }
    memcpy(source, ocl_kernel_source, len + 1);
    if (broken) memcpy(source + len, injected_error, sizeof injected_error);
    bool cached = cache_path(d, source, options, path, sizeof path);

    cl_program prog = cached ? build_from_cache(d, path, options) : NULL;
    if (prog) {
        ocl_log(TSR_LOG_DEBUG, "%s: kernels loaded from %s", ocl_device_label(d, label, sizeof label),
                path);
    } else {
        cl_int err;
        const char *srcs[1] = {source};
        prog = clCreateProgramWithSource(d->ctx, 1, srcs, NULL, &err);
        if (!prog) {
            log_build_failure(d, NULL, err);
            free(source);
            return false;
        }
        err = clBuildProgram(prog, 1, &d->id, options, NULL, NULL);
        if (err != CL_SUCCESS) {
            log_build_failure(d, prog, err);
            clReleaseProgram(prog);
            free(source);
            return false;
        }
        size_t size = 0;
        unsigned char *bin = cached ? program_binary(prog, &size) : NULL;
        if (bin) cache_store(path, bin, size);
        free(bin);
    }
    free(source);

    for (int k = 0; k < OCL_K_COUNT; k++) {
        cl_int err;
        d->kernels[k] = clCreateKernel(prog, kernel_names[k], &err);
        if (!d->kernels[k]) {
            ocl_log(TSR_LOG_ERROR, "%s (%s): kernel %s: %s; its ops fall back to the CPU",
                    ocl_device_label(d, label, sizeof label), d->name, kernel_names[k],
                    ocl_error_name(err));
            for (int j = 0; j < k; j++) clReleaseKernel(d->kernels[j]);
            memset(d->kernels, 0, sizeof d->kernels);
            clReleaseProgram(prog);
            return false;
        }
    }
    d->program = prog;
    return true;
}

bool ocl_program_ensure(ocl_device *d) {
    pthread_mutex_lock(&d->build_lock);
    if (d->program_state == OCL_PROGRAM_UNBUILT)
        d->program_state = build(d) ? OCL_PROGRAM_READY : OCL_PROGRAM_FAILED;
    bool ok = d->program_state == OCL_PROGRAM_READY;
    pthread_mutex_unlock(&d->build_lock);
    return ok;
}

void ocl_program_release(ocl_device *d) {
    for (int k = 0; k < OCL_K_COUNT; k++)
        if (d->kernels[k]) clReleaseKernel(d->kernels[k]);
    memset(d->kernels, 0, sizeof d->kernels);
    if (d->program) clReleaseProgram(d->program);
    d->program = NULL;
    d->program_state = OCL_PROGRAM_UNBUILT;
}
