/*
 * vk_ops — which nodes the Vulkan device computes (the truthful
 * supports_op) and how: shader, parameter block and grid for each op.
 *
 * Whether a node is well-formed is the ABI's checker's question
 * (tessera/plugin_check.h); supports_op asks it, then what the shaders
 * implement. Every shader reads and writes through the tensors' own strides, so views
 * (permuted, transposed, padded, KV cache slots) are supported wherever the
 * op list allows them. What is declined falls back to a CPU backend:
 * FLASH_ATTN with a head size above 256, CPY into a quantized type other
 * than the KV cache's (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL), SSM_SCAN with
 * a d_state above 256, and dtypes without a dequantizer in the shaders
 * (the grid IQ types and the ternary ones).
 * Byte offsets are 32-bit in the shaders: a tensor must span less
 * than 2 GiB.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "vk_internal.h"
#include "vk_shaders.h"

#define VK_MAX_SPAN (INT64_C(1) << 31)

/* decline(node, why, why_size, fmt, ...): "OP 'name': ..." into why, returns 0 */
#define decline tsr_node_decline

/* dtypes the shaders dequantize (common.glsl: dequant) */
static bool is_readable(int32_t dt) {
    switch (dt) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16:
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q8_1: case TSR_DTYPE_Q8_K:
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: case TSR_DTYPE_IQ4_NL: case TSR_DTYPE_IQ4_XS:
    case TSR_DTYPE_MXFP4: return true;
    default: return false;
    }
}

/* The grid IQ types: the IQ builds of the matrix products and of eltwise
 * read them (common.glsl with IQ_GRIDS: iq_group, iq_scales, the grids in
 * a buffer the queue binds), as src0 of MUL_MAT, MUL_MAT_ID, GET_ROWS and
 * CPY (into floats) only. */
bool vk_dtype_is_grid_iq(int32_t dt) {
    switch (dt) {
    case TSR_DTYPE_IQ2_XXS: case TSR_DTYPE_IQ2_XS: case TSR_DTYPE_IQ2_S: case TSR_DTYPE_IQ3_XXS:
    case TSR_DTYPE_IQ3_S: case TSR_DTYPE_IQ1_S: case TSR_DTYPE_IQ1_M: return true;
    default: return false;
    }
}

bool vk_op_reads_grid_iq(int32_t op) {
    return op == TSR_OP_MUL_MAT || op == TSR_OP_MUL_MAT_ID || op == TSR_OP_GET_ROWS || op == TSR_OP_CPY;
}

/* Whether tensor i of the node (0 dst, 1 src0, ...) is read in dtype dt. */
static bool node_reads(const tsr_node *node, int i, int32_t dt) {
    if (is_readable(dt)) return true;
    return i == 1 && vk_dtype_is_grid_iq(dt) && vk_op_reads_grid_iq(node->op);
}

/* The KV cache's 32-element block types: flash attention reads them
 * (common.glsl: load1/load2) and CPY writes them (quantize.comp). */
static bool is_kv_block(int32_t dt) {
    switch (dt) {
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_IQ4_NL: return true;
    default: return false;
    }
}

/* MXFP4's blocks are 17 bytes with no 16-bit field: its readers take any
 * byte (common.glsl: t0_block32, units.glsl: load16). */
int64_t vk_dtype_alignment(int32_t dtype) {
    if (dtype == TSR_DTYPE_MXFP4) return 1;
    return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_I32 ? 4 : 2;
}

uint64_t vk_tensor_extent(const tsr_tensor *t) {
    const int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0 || bb <= 0) return 0;
    uint64_t ext = (uint64_t)((t->ne[0] / bs - 1) * t->nb[0] + bb);
    for (int d = 1; d < TSR_MAX_DIMS; d++) ext += (uint64_t)((t->ne[d] - 1) * t->nb[d]);
    return ext;
}

/* Tensor i of the node (0 dst, 1 src0, ...), which the shaders can address
 * (the node is well-formed): a dtype they load, under 2 GiB for their 32-bit offsets, F32/I32 on whole words and
 * everything else at even offsets (common.glsl). NULL, or the problem. */
static const char *tensor_problem(const tsr_node *node, int i, const tsr_tensor *t) {
    if (!node_reads(node, i, t->dtype) && t->dtype != TSR_DTYPE_I32) return "has a dtype the shaders do not read";
    if (tsr_tensor_nelements(t) >= VK_MAX_SPAN) return "has 2^31 elements or more";
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (t->ne[d] > 1 && t->nb[d] >= VK_MAX_SPAN) return "has a stride of 2 GiB or more";
    if (vk_tensor_extent(t) >= (uint64_t)VK_MAX_SPAN) return "spans 2 GiB or more";
    const int64_t align = vk_dtype_alignment(t->dtype);
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (t->ne[d] > 1 && t->nb[d] % align) return "has a stride the shaders cannot load";
    if (t->buffer && t->offset % (uint64_t)align) return "has an offset the shaders cannot load";
    return NULL;
}

/* gallivm (lavapipe, llvmpipe) ends every loop of a shader invocation once
 * it has run 65535 loop iterations in all (each loop's final test counted),
 * silently. flash_attn_inv.comp runs at most 3 * (ceil(D / 8) + 1) + 1 per
 * key (dot, rescale, weighted sum, 8 dimensions written out per iteration)
 * and 2 * (ceil(D / 8) + 1) more: FLASH_ATTN over more keys is left to the
 * CPU on CPU implementations (head size 64: 2339 keys). GPUs have no such
 * limit. */
static bool attn_fits(const vk_device *d, int64_t D, int64_t n_kv) {
    if (d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) return true;
    const int64_t per_loop = (D + 7) / 8 + 1;
    return n_kv * (3 * per_loop + 1) + 2 * per_loop + 16 <= 65535;
}

/* ssm_scan.comp per token: its state loop (VK_SSM_MAX_PER, unrolled or
 * not), the workgroup sum's log2(VK_SSM_WG) steps and the token loop's
 * test; twice VK_SSM_MAX_PER before and after (see attn_fits: lavapipe's
 * limit of 65535 iterations per invocation). About 4000 tokens. */
static bool scan_fits(const vk_device *d, int64_t T) {
    if (!d || d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) return true;
    return T * (VK_SSM_MAX_PER + 5 + 2) + 2 * VK_SSM_MAX_PER + 16 <= 65535;
}

/* GET_ROWS, MUL_MAT, CPY into floats: src0 dequantized, dst F32/F16/BF16. */
static int reads_into_float(const tsr_node *node, char *why, size_t why_size) {
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    if (!node_reads(node, 1, a->dtype))
        return decline(node, why, why_size, "src0 dtype %s has no dequantizer here", tsr_dtype_name(a->dtype));
    /* 16-bit stores are atomics on the word, f32 stores whole words */
    if (!tsr_dtype_is_float(dst->dtype)) return decline(node, why, why_size, "dst dtype %s is not F32, F16 or BF16", tsr_dtype_name(dst->dtype));
    return 1;
}

int vk_op_supported(const vk_device *d, const tsr_node *node, char *why, size_t why_size) {
    if (tsr_node_check(node, why, why_size)) return 0;
    /* The shaders cover the ops up to GELU_ERF; one appended later falls
     * back until it has its own (docs/ops.md). */
    if (node->op > TSR_OP_GELU_ERF) return decline(node, why, why_size, "not implemented on this device");
    /* Debugging aid: decline the listed ops (e.g. "ROPE,MUL_MAT") to find
     * which one a numerical difference comes from. */
    const char *off = getenv("TESSERA_VULKAN_DECLINE");
    if (off && strstr(off, tsr_op_name(node->op))) return decline(node, why, why_size, "declined by TESSERA_VULKAN_DECLINE");
    const char *roles[1 + TSR_MAX_SRC] = {"dst", "src0", "src1", "src2", "src3"};
    for (int i = 0; i <= node->n_src; i++) {
        const tsr_tensor *t = i == 0 ? node->dst : node->src[i - 1];
        const char *p = t ? tensor_problem(node, i, t) : NULL;
        if (p) return decline(node, why, why_size, "%s (%s) %s", roles[i], tsr_dtype_name(t->dtype), p);
        /* One binding holds a whole tensor: a larger one (Gemma 3's 178 MB
         * embedding on lavapipe's 128 MiB) would fail at compute. */
        const uint64_t bind = d ? d->props.limits.maxStorageBufferRange : 0;
        const uint64_t slack = d ? d->props.limits.minStorageBufferOffsetAlignment + 4 : 0; /* as vk_queue binds */
        if (t && bind && vk_tensor_extent(t) + slack > bind)
            return decline(node, why, why_size, "%s (%s) spans %llu bytes, more than one binding holds (%llu)",
                           roles[i], tsr_dtype_name(t->dtype), (unsigned long long)vk_tensor_extent(t),
                           (unsigned long long)bind);
    }
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    switch (node->op) {
    case TSR_OP_CPY:
        if (tsr_dtype_is_quantized(dst->dtype)) /* quantize.comp; the checker allows float sources only */
            return is_kv_block(dst->dtype)
                       ? 1
                       : decline(node, why, why_size,
                                 "dst dtype %s: only Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL are quantized here",
                                 tsr_dtype_name(dst->dtype));
        return reads_into_float(node, why, why_size);
    case TSR_OP_GET_ROWS:
    case TSR_OP_MUL_MAT:
    case TSR_OP_MUL_MAT_ID: return reads_into_float(node, why, why_size);
    case TSR_OP_FLASH_ATTN: /* k and v: any KV cache type (the checker's list) */
        if (a->ne[0] > 256) return decline(node, why, why_size, "head size %lld is above 256", (long long)a->ne[0]);
        if (!attn_fits(d, a->ne[0], node->src[1]->ne[1]))
            return decline(node, why, why_size, "%lld keys of head size %lld: more loop iterations than a CPU implementation runs",
                           (long long)node->src[1]->ne[1], (long long)a->ne[0]);
        return 1;
    case TSR_OP_DELTA_NET: /* long prompts in chunks of tokens (vk_delta_net_chunks) */
        if (vk_delta_net_chunk_tokens(d, node) < 1)
            return decline(node, why, why_size, "state rows %lld: more loop iterations per token than a CPU "
                           "implementation runs", (long long)a->ne[1]);
        return 1;
    case TSR_OP_SSM_SCAN: {
        /* ssm_scan.comp: N state elements over VK_SSM_WG invocations, at
         * most VK_SSM_MAX_PER each */
        const int64_t N = a->ne[0], T = node->src[1]->ne[1];
        if (N > VK_SSM_WG * VK_SSM_MAX_PER)
            return decline(node, why, why_size, "d_state %lld is above %d", (long long)N, VK_SSM_WG * VK_SSM_MAX_PER);
        if (!scan_fits(d, T))
            return decline(node, why, why_size, "%lld tokens: more loop iterations than a CPU implementation runs",
                           (long long)T);
        return 1;
    }
    default:
        return 1;
    }
}

/* ------------------------------------------------------------ plans */

/* Shader ids to the names of their SPIR-V modules (meson.build's
 * vk_shader_variants). */
static const char *const shader_names[VK_SHADER_COUNT] = {
    [VK_SHADER_ELTWISE] = "eltwise",
    [VK_SHADER_MUL_MAT_VEC] = "mul_mat_vec",
    [VK_SHADER_MUL_MAT_VEC_SG] = "mul_mat_vec_sg",
    [VK_SHADER_MUL_MAT_TILED] = "mul_mat_tiled",
    [VK_SHADER_MUL_MAT_VEC_IDOT] = "mul_mat_vec_idot",
    [VK_SHADER_MUL_MAT_VEC_IDOT_SG] = "mul_mat_vec_idot_sg",
    [VK_SHADER_MUL_MAT_VEC_INV] = "mul_mat_vec_inv",
    [VK_SHADER_MUL_MAT_INV] = "mul_mat_inv",
    [VK_SHADER_MUL_MAT_VEC_INV64] = "mul_mat_vec_inv64",
    [VK_SHADER_MUL_MAT_INV64] = "mul_mat_inv64",
    [VK_SHADER_ROW_NORM] = "row_norm",
    [VK_SHADER_ROW_NORM_SG] = "row_norm_sg",
    [VK_SHADER_SOFT_MAX] = "soft_max",
    [VK_SHADER_SOFT_MAX_SG] = "soft_max_sg",
    [VK_SHADER_ROPE] = "rope",
    [VK_SHADER_ROPE_F64] = "rope_f64",
    [VK_SHADER_FLASH_ATTN] = "flash_attn",
    [VK_SHADER_FLASH_ATTN_SG] = "flash_attn_sg",
    [VK_SHADER_FLASH_ATTN_INV] = "flash_attn_inv",
    [VK_SHADER_FLASH_ATTN_REDUCE] = "flash_attn_reduce",
    [VK_SHADER_FLASH_ATTN_TILED] = "flash_attn_tiled",
    [VK_SHADER_QUANTIZE] = "quantize",
    [VK_SHADER_MUL_MAT_COOPMAT] = "mul_mat_coopmat",
    [VK_SHADER_MUL_MAT_COOPMAT_F16ACC] = "mul_mat_coopmat_f16acc",
    [VK_SHADER_MUL_MAT_COOPMAT_EMU] = "mul_mat_coopmat_emu",
    [VK_SHADER_MUL_MAT_ID] = "mul_mat_id",
    [VK_SHADER_MUL_MAT_ID_GROUP] = "mul_mat_id_group",
    [VK_SHADER_MUL_MAT_ID_TILED] = "mul_mat_id_tiled",
    [VK_SHADER_MUL_MAT_VEC_IQ] = "mul_mat_vec_iq",
    [VK_SHADER_MUL_MAT_VEC_SG_IQ] = "mul_mat_vec_sg_iq",
    [VK_SHADER_MUL_MAT_TILED_IQ] = "mul_mat_tiled_iq",
    [VK_SHADER_MUL_MAT_VEC_INV_IQ] = "mul_mat_vec_inv_iq",
    [VK_SHADER_MUL_MAT_INV_IQ] = "mul_mat_inv_iq",
    [VK_SHADER_MUL_MAT_ID_IQ] = "mul_mat_id_iq",
    [VK_SHADER_MUL_MAT_ID_TILED_IQ] = "mul_mat_id_tiled_iq",
    [VK_SHADER_ELTWISE_IQ] = "eltwise_iq",
    [VK_SHADER_SSM_CONV] = "ssm_conv",
    [VK_SHADER_SSM_SCAN] = "ssm_scan",
    [VK_SHADER_DELTA_NET] = "delta_net",
};

bool vk_shader_embedded(vk_shader_id id) {
    const char *name = vk_shader_name(id);
    for (int i = 0; i < vk_spirv_count; i++)
        if (strcmp(vk_spirv_table[i].name, name) == 0) return true;
    return false;
}

const char *vk_shader_name(vk_shader_id id) {
    return id >= 0 && id < VK_SHADER_COUNT && shader_names[id] ? shader_names[id] : "?";
}


enum { ELT_ADD, ELT_MUL, ELT_SCALE, ELT_SILU, ELT_GELU, ELT_SWIGLU, ELT_CPY, ELT_GET_ROWS, ELT_CONCAT, ELT_ARGMAX,
       ELT_DIV, ELT_SUM_ROWS, ELT_TOP_K, ELT_SWIGLU_OAI, ELT_GELU_ERF };

void vk_grid(uint64_t n, uint32_t groups[3]) {
    if (n == 0) n = 1;
    uint64_t x = n < 65535 ? n : 65535;
    groups[0] = (uint32_t)x;
    groups[1] = (uint32_t)((n + x - 1) / x);
    groups[2] = 1;
}

static void put_tensor(vk_params *p, int k, const tsr_tensor *t) {
    p->dt[k] = (uint32_t)t->dtype;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        p->ne[k][d] = (uint32_t)t->ne[d];
        p->nb[k][d] = (uint32_t)t->nb[d];
    }
}

static uint64_t rows_of(const tsr_tensor *t) { return (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]); }

/* The matrix product kernel for a node, by device and shape:
 *   CPU implementations   mul_mat.comp PER_INVOCATION (INV64 with fp64)
 *   N <= VK_MMV_MAX_COLS  mul_mat_vec.comp: the bandwidth kernel of decoding
 *                         (its integer dot product variant where the device
 *                         has them, for the weight types it covers)
 *   larger N              mul_mat_tiled.comp: the compute kernel of prompts,
 *                         or mul_mat_coopmat.comp on the matrix units where
 *                         the device runs it and it is switched on
 *                         (vk_features.c), for every weight type but F32
 * TESSERA_VULKAN_MATMUL forces one: invocation, matvec or tiled (at every
 * N), coopmat or coopmat-emulated (at every N, for the weight types it
 * takes, where the device runs it), or workgroup (the GPU choice by shape,
 * on any device). */
/* Weight types with an integer dot product path (units.glsl: idot_type) */
static bool idot_weight(int32_t dt) {
    switch (dt) {
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q8_1: case TSR_DTYPE_Q4_K: case TSR_DTYPE_Q6_K: return true;
    default: return false;
    }
}

typedef enum mm_kernel { MM_INVOCATION, MM_MATVEC, MM_TILED, MM_COOPMAT } mm_kernel;

/* mul_mat_coopmat.comp rounds weights to F16 in its tiles: F32 weights
 * (tolerance 1e-5 of the largest output) stay on the f32 kernels; the grid
 * IQ types take the tiled kernel's IQ_GRIDS build (no coopmat one). */
static bool coopmat_weight(int32_t dt) { return dt != TSR_DTYPE_F32 && !vk_dtype_is_grid_iq(dt); }

vk_shader_id vk_shader_for_weights(vk_shader_id s, int32_t dtype) {
    if (!vk_dtype_is_grid_iq(dtype)) return s;
    switch (s) {
    case VK_SHADER_MUL_MAT_VEC:
    case VK_SHADER_MUL_MAT_VEC_IDOT: return VK_SHADER_MUL_MAT_VEC_IQ;
    case VK_SHADER_MUL_MAT_VEC_SG:
    case VK_SHADER_MUL_MAT_VEC_IDOT_SG: return VK_SHADER_MUL_MAT_VEC_SG_IQ;
    case VK_SHADER_MUL_MAT_TILED: return VK_SHADER_MUL_MAT_TILED_IQ;
    case VK_SHADER_MUL_MAT_VEC_INV:
    case VK_SHADER_MUL_MAT_VEC_INV64: return VK_SHADER_MUL_MAT_VEC_INV_IQ;
    case VK_SHADER_MUL_MAT_INV:
    case VK_SHADER_MUL_MAT_INV64: return VK_SHADER_MUL_MAT_INV_IQ;
    case VK_SHADER_MUL_MAT_ID: return VK_SHADER_MUL_MAT_ID_IQ;
    case VK_SHADER_MUL_MAT_ID_TILED: return VK_SHADER_MUL_MAT_ID_TILED_IQ;
    case VK_SHADER_ELTWISE: return VK_SHADER_ELTWISE_IQ;
    default: return s;
    }
}

static mm_kernel mul_mat_kernel(const vk_device *d, int32_t wdt, uint32_t N) {
    if (d->matmul_per_invocation) return MM_INVOCATION;
    const bool coopmat = (d->kern.coopmat != VK_COOPMAT_NONE || d->kern.coopmat_emulated) && coopmat_weight(wdt);
    if (coopmat && (d->kern.coopmat_all || d->kern.coopmat_emulated)) return MM_COOPMAT;
    const char *forced = getenv("TESSERA_VULKAN_MATMUL");
    if (forced && strcmp(forced, "matvec") == 0) return MM_MATVEC;
    if (forced && strcmp(forced, "tiled") == 0) return MM_TILED;
    if (N <= VK_MMV_MAX_COLS) return MM_MATVEC;
    return coopmat ? MM_COOPMAT : MM_TILED;
}

/* P.u (every mul_mat shader): [0] M, [1] N, [2] row groups (mat-vec), row
 * tiles (tiled) or column blocks (per invocation), [3] r2, [4] r3, [5] K,
 * [6] B2, [7] B2*B3 */
static void plan_mul_mat(const vk_device *d, const tsr_node *node, vk_dispatch *out) {
    const tsr_tensor *a = node->src[0], *x = node->src[1];
    vk_params *p = &out->p;
    const uint32_t N = (uint32_t)x->ne[1], M = (uint32_t)a->ne[1];
    out->spec[0] = (uint32_t)a->dtype;
    out->spec[1] = (uint32_t)x->dtype;
    p->u[0] = M;
    p->u[1] = N;
    p->u[3] = (uint32_t)(x->ne[2] / a->ne[2]);
    p->u[4] = (uint32_t)(x->ne[3] / a->ne[3]);
    p->u[5] = (uint32_t)a->ne[0];
    p->u[6] = (uint32_t)x->ne[2];
    p->u[7] = (uint32_t)(x->ne[2] * x->ne[3]);
    switch (mul_mat_kernel(d, a->dtype, N)) {
    case MM_MATVEC:
        if (d->kern.integer_dot && idot_weight(a->dtype))
            out->shader = d->subgroup_arith ? VK_SHADER_MUL_MAT_VEC_IDOT_SG : VK_SHADER_MUL_MAT_VEC_IDOT;
        else
            out->shader = d->subgroup_arith ? VK_SHADER_MUL_MAT_VEC_SG : VK_SHADER_MUL_MAT_VEC;
        p->u[2] = (M + VK_MMV_ROWS - 1) / VK_MMV_ROWS;
        vk_grid((uint64_t)p->u[2] * N * p->u[7], out->groups);
        return;
    case MM_TILED:
        out->shader = VK_SHADER_MUL_MAT_TILED;
        p->u[2] = (M + VK_TILE_M - 1) / VK_TILE_M;
        vk_grid((uint64_t)p->u[2] * ((N + VK_TILE_N - 1) / VK_TILE_N) * p->u[7], out->groups);
        return;
    case MM_COOPMAT:
        out->shader = d->kern.coopmat_emulated         ? VK_SHADER_MUL_MAT_COOPMAT_EMU
                      : d->kern.coopmat == VK_COOPMAT_F32 ? VK_SHADER_MUL_MAT_COOPMAT
                                                        : VK_SHADER_MUL_MAT_COOPMAT_F16ACC;
        p->u[2] = (M + VK_COOPMAT_TILE - 1) / VK_COOPMAT_TILE;
        vk_grid((uint64_t)p->u[2] * ((N + VK_COOPMAT_TILE - 1) / VK_COOPMAT_TILE) * p->u[7], out->groups);
        return;
    case MM_INVOCATION: {
        const uint32_t cols = N == 1 ? 1 : VK_MUL_MAT_COLS;
        out->shader = d->has_f64 ? (N == 1 ? VK_SHADER_MUL_MAT_VEC_INV64 : VK_SHADER_MUL_MAT_INV64)
                                 : (N == 1 ? VK_SHADER_MUL_MAT_VEC_INV : VK_SHADER_MUL_MAT_INV);
        p->u[2] = (N + cols - 1) / cols;
        const uint64_t blocks = (uint64_t)M * p->u[2] * p->u[7];
        vk_grid((blocks + 63) / 64, out->groups);
        return;
    }
    }
}

void vk_op_plan(const vk_device *d, const tsr_node *node, vk_dispatch *out) {
    memset(out, 0, sizeof *out);
    vk_params *p = &out->p;
    for (int k = 0; k < 4; k++)
        if (k < node->n_src && node->src[k]) put_tensor(p, k, node->src[k]);
    put_tensor(p, 4, node->dst);
    /* the node's parameter slots as they are: shaders read P.ip / P.fp at
     * the TSR_<OP>_I_* / TSR_<OP>_F_* slots of tessera/plugin.h */
    memcpy(p->ip, node->iparams, sizeof p->ip);
    memcpy(p->fp, node->fparams, sizeof p->fp);
    const bool sg = d->subgroup_arith;
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint64_t n_dst = (uint64_t)tsr_tensor_nelements(dst);

    switch (node->op) {
    case TSR_OP_MUL_MAT:
        plan_mul_mat(d, node, out);
        out->shader = vk_shader_for_weights(out->shader, a->dtype);
        return;
    case TSR_OP_MUL_MAT_ID: /* P.u: [0] N, [1] n_used, [2] T, [3] K, [4] E, [5] n_b */
        out->shader = vk_shader_for_weights(VK_SHADER_MUL_MAT_ID, a->dtype);
        out->spec[0] = (uint32_t)a->dtype;
        p->u[0] = (uint32_t)a->ne[1];
        p->u[1] = (uint32_t)node->src[2]->ne[0];
        p->u[2] = (uint32_t)node->src[2]->ne[1];
        p->u[3] = (uint32_t)a->ne[0];
        p->u[4] = (uint32_t)a->ne[2];
        p->u[5] = (uint32_t)node->src[1]->ne[1];
        vk_grid((n_dst + 63) / 64, out->groups);
        return;
    case TSR_OP_SSM_CONV: /* P.u[1]: dst elements, one per invocation */
        out->shader = VK_SHADER_SSM_CONV;
        p->u[1] = (uint32_t)n_dst;
        vk_grid((n_dst + 63) / 64, out->groups);
        return;
    case TSR_OP_DELTA_NET: { /* P.u[1]: state columns (i, h, s), one per invocation; [2], [3]: the tokens
                               * t0..t1-1 (all: vk_plan_delta_net_chunk picks a chunk); slots as they are */
        const uint64_t cols = (uint64_t)(a->ne[0] * a->ne[2] * a->ne[3]);
        out->shader = VK_SHADER_DELTA_NET;
        p->u[1] = (uint32_t)cols;
        p->u[2] = 0;
        p->u[3] = (uint32_t)node->src[1]->ne[1];
        vk_grid((cols + 63) / 64, out->groups);
        return;
    }
    case TSR_OP_SSM_SCAN: /* one workgroup per (p, h, s) of the state */
        out->shader = VK_SHADER_SSM_SCAN;
        vk_grid((uint64_t)(a->ne[1] * a->ne[2] * a->ne[3]), out->groups);
        return;
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
        out->shader = sg ? VK_SHADER_ROW_NORM_SG : VK_SHADER_ROW_NORM;
        p->u[0] = node->op == TSR_OP_NORM;
        vk_grid(rows_of(a), out->groups);
        return;
    case TSR_OP_SOFT_MAX: {
        out->shader = sg ? VK_SHADER_SOFT_MAX_SG : VK_SHADER_SOFT_MAX;
        const tsr_tensor *mask = node->n_src > 1 ? node->src[1] : NULL;
        p->u[0] = mask != NULL;
        const tsr_soft_max_params sm = tsr_soft_max_params_of(node);
        if (mask && sm.max_bias > 0.0f) {
            /* ALiBi slopes as ggml defines them (tsr_soft_max_params_of) */
            p->u[1] = (uint32_t)sm.n_head_log2;
            p->u[2] = 1;
            p->f[0] = sm.m0;
            p->f[1] = sm.m1;
        }
        vk_grid(rows_of(a), out->groups);
        return;
    }
    case TSR_OP_ROPE: {
        out->shader = d->has_f64 ? VK_SHADER_ROPE_F64 : VK_SHADER_ROPE;
        const tsr_rope_params rp = tsr_rope_params_of(node);
        p->u[0] = (uint32_t)rp.n_dims;
        p->u[1] = rp.mode == TSR_ROPE_NEOX;
        p->u[2] = node->n_src > 2 && node->src[2] != NULL;
        p->f[0] = rp.theta_scale;
        p->f[1] = rp.corr_dims[0]; /* YaRN correction dims */
        p->f[2] = rp.corr_dims[1];
        p->f[3] = rp.yarn_mscale;
        const uint64_t rows = rows_of(a);
        vk_grid((rows + 63) / 64, out->groups);
        return;
    }
    case TSR_OP_CPY:
        if (!tsr_dtype_is_quantized(dst->dtype)) break; /* eltwise */
        out->shader = VK_SHADER_QUANTIZE;
        out->spec[0] = (uint32_t)dst->dtype;
        p->u[1] = (uint32_t)(n_dst / 32); /* blocks, one per invocation */
        vk_grid((n_dst / 32 + 63) / 64, out->groups);
        return;
    case TSR_OP_FLASH_ATTN:
        out->spec[0] = (uint32_t)node->src[1]->dtype; /* k, v: one pipeline per pair */
        out->spec[1] = (uint32_t)node->src[2]->dtype;
        p->u[0] = node->n_src > 3 && node->src[3] != NULL;
        if (d->attn_per_invocation) { /* one (query, head) per invocation, 8 per workgroup */
            out->shader = VK_SHADER_FLASH_ATTN_INV;
            vk_grid((uint64_t)(a->ne[1] * a->ne[2] + 7) / 8, out->groups);
        } else if (vk_attn_tiled(d, node)) { /* 8 queries of one head per workgroup */
            out->shader = VK_SHADER_FLASH_ATTN_TILED;
            vk_grid((uint64_t)((a->ne[1] + 7) / 8 * a->ne[2]), out->groups);
        } else { /* one (query, head) per workgroup */
            out->shader = sg ? VK_SHADER_FLASH_ATTN_SG : VK_SHADER_FLASH_ATTN;
            vk_grid((uint64_t)(a->ne[1] * a->ne[2]), out->groups);
        }
        return;
    default:
        break;
    }
    out->shader = VK_SHADER_ELTWISE;
    p->u[1] = (uint32_t)n_dst;
    switch (node->op) {
    case TSR_OP_ADD: p->u[0] = ELT_ADD; break;
    case TSR_OP_MUL: p->u[0] = ELT_MUL; break;
    case TSR_OP_SCALE: p->u[0] = ELT_SCALE; break;
    case TSR_OP_SILU: p->u[0] = ELT_SILU; break;
    case TSR_OP_GELU: p->u[0] = ELT_GELU; break;
    case TSR_OP_GELU_ERF: p->u[0] = ELT_GELU_ERF; break;
    case TSR_OP_SWIGLU: p->u[0] = ELT_SWIGLU; break;
    case TSR_OP_SWIGLU_OAI: { /* alpha and limit from the accessor, not the slots */
        const tsr_swiglu_oai_params sp = tsr_swiglu_oai_params_of(node);
        p->u[0] = ELT_SWIGLU_OAI;
        p->f[0] = sp.alpha;
        p->f[1] = sp.limit;
        break;
    }
    case TSR_OP_CPY: /* a grid IQ src0 (into floats): eltwise's IQ_GRIDS build */
        p->u[0] = ELT_CPY;
        out->shader = vk_shader_for_weights(out->shader, a->dtype);
        break;
    case TSR_OP_GET_ROWS:
        p->u[0] = ELT_GET_ROWS;
        out->shader = vk_shader_for_weights(out->shader, a->dtype);
        break;
    case TSR_OP_CONCAT: p->u[0] = ELT_CONCAT; break;
    case TSR_OP_ARGMAX: p->u[0] = ELT_ARGMAX; break;
    case TSR_OP_DIV: p->u[0] = ELT_DIV; break;
    case TSR_OP_SUM_ROWS: p->u[0] = ELT_SUM_ROWS; break;
    case TSR_OP_TOP_K: /* one invocation per src0 element */
        p->u[0] = ELT_TOP_K;
        p->u[1] = (uint32_t)tsr_tensor_nelements(a);
        vk_grid(((uint64_t)p->u[1] + 255) / 256, out->groups);
        return;
    default: break;
    }
    vk_grid((n_dst + 255) / 256, out->groups);
}
