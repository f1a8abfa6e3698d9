/*
 * vk_ops — which nodes the Vulkan device computes (the truthful
 * supports_op) and how: shader, parameter block and grid for each op.
 *
 * Every shader reads and writes through the tensors' own strides, so views
 * (permuted, transposed, padded, KV cache slots) are supported wherever the
 * op list allows them. What is declined falls back to a CPU backend:
 * FLASH_ATTN with a head size above 256, quantized dst (CPY into a
 * quantized type), and dtypes without a dequantizer in the shaders.
 * Byte offsets are 32-bit in the shaders: a tensor must span less
 * than 2 GiB.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define VK_MAX_SPAN (INT64_C(1) << 31)

static const char *op_name(int32_t op) {
    static const char *const names[TSR_OP_COUNT] = {
        [TSR_OP_NONE] = "NONE",         [TSR_OP_GET_ROWS] = "GET_ROWS", [TSR_OP_ADD] = "ADD",
        [TSR_OP_MUL] = "MUL",           [TSR_OP_SCALE] = "SCALE",       [TSR_OP_MUL_MAT] = "MUL_MAT",
        [TSR_OP_RMS_NORM] = "RMS_NORM", [TSR_OP_NORM] = "NORM",         [TSR_OP_ROPE] = "ROPE",
        [TSR_OP_SOFT_MAX] = "SOFT_MAX", [TSR_OP_SILU] = "SILU",         [TSR_OP_GELU] = "GELU",
        [TSR_OP_SWIGLU] = "SWIGLU",     [TSR_OP_CPY] = "CPY",           [TSR_OP_CONCAT] = "CONCAT",
        [TSR_OP_ARGMAX] = "ARGMAX",     [TSR_OP_FLASH_ATTN] = "FLASH_ATTN",
    };
    return op >= 0 && op < TSR_OP_COUNT && names[op] ? names[op] : "unknown op";
}

/* ------------------------------------------------------------ checks */

typedef struct checker {
    const tsr_node *node;
    char *why;
    size_t why_size;
} checker;

__attribute__((format(printf, 2, 3))) static int decline(checker *c, const char *fmt, ...) {
    if (c->why && c->why_size) {
        int n = snprintf(c->why, c->why_size, "%s: ", op_name(c->node->op));
        if (n >= 0 && (size_t)n < c->why_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->why + n, c->why_size - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return 0;
}

static bool is_float(int32_t dt) { return dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_BF16; }

/* dtypes the shaders dequantize (common.glsl: dequant) */
static bool is_readable(int32_t dt) {
    switch (dt) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16:
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q8_1: case TSR_DTYPE_Q8_K:
    case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: case TSR_DTYPE_IQ4_NL: return true;
    default: return false;
    }
}

int64_t vk_dtype_alignment(int32_t dtype) {
    return dtype == TSR_DTYPE_F32 || dtype == TSR_DTYPE_I32 ? 4 : 2;
}

uint64_t vk_tensor_extent(const tsr_tensor *t) {
    const int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0 || bb <= 0) return 0;
    uint64_t ext = (uint64_t)((t->ne[0] / bs - 1) * t->nb[0] + bb);
    for (int d = 1; d < TSR_MAX_DIMS; d++) ext += (uint64_t)((t->ne[d] - 1) * t->nb[d]);
    return ext;
}

/* Geometry: positive sizes, usable strides, whole contiguous blocks, and
 * small enough for the shaders' 32-bit indices. */
static int tensor_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!t) return decline(c, "%s is missing", role);
    const int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0 || bb <= 0) return decline(c, "%s has dtype %d, which this device does not handle", role, (int)t->dtype);
    int64_t n = 1;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] < 1 || t->ne[d] >= VK_MAX_SPAN) return decline(c, "%s ne[%d] = %lld", role, d, (long long)t->ne[d]);
        n *= t->ne[d];
        if (n >= VK_MAX_SPAN) return decline(c, "%s has 2^31 elements or more", role);
        if (t->ne[d] > 1 && (t->nb[d] <= 0 || t->nb[d] >= VK_MAX_SPAN))
            return decline(c, "%s nb[%d] = %lld is not a stride this device handles", role, d, (long long)t->nb[d]);
    }
    if (t->ne[0] % bs) return decline(c, "%s ne[0] is not a whole number of blocks", role);
    if (bs > 1 && t->nb[0] != bb) return decline(c, "%s blocks are not contiguous along ne[0]", role);
    if (vk_tensor_extent(t) >= (uint64_t)VK_MAX_SPAN) return decline(c, "%s spans 2 GiB or more", role);
    /* The shaders read F32/I32 as whole words, everything else at even
     * offsets (common.glsl). */
    const int64_t align = vk_dtype_alignment(t->dtype);
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (t->ne[d] > 1 && t->nb[d] % align) return decline(c, "%s nb[%d] is not a multiple of %lld", role, d, (long long)align);
    if (t->buffer && t->offset % (uint64_t)align) return decline(c, "%s offset is not a multiple of %lld", role, (long long)align);
    return 1;
}

static int float_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    return is_float(t->dtype) ? 1 : decline(c, "%s dtype %d is not F32, F16 or BF16", role, (int)t->dtype);
}

static int readable_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    return is_readable(t->dtype) ? 1 : decline(c, "%s dtype %d has no dequantizer here", role, (int)t->dtype);
}

static int i32_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    return t->dtype == TSR_DTYPE_I32 ? 1 : decline(c, "%s is not I32", role);
}

/* dst: a float type (16-bit stores are atomics on the word, f32 stores
 * whole words; tensor_ok checked the alignment). */
static int dst_ok(checker *c, const tsr_tensor *t) { return float_ok(c, t, "dst"); }

static int same_shape(checker *c, const tsr_tensor *a, const tsr_tensor *b, const char *what) {
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d]) return decline(c, "%s shapes differ in ne[%d]", what, d);
    return 1;
}

static int shape_is(checker *c, const tsr_tensor *t, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
    if (t->ne[0] != n0 || t->ne[1] != n1 || t->ne[2] != n2 || t->ne[3] != n3)
        return decline(c, "dst is [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", (long long)t->ne[0],
                       (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)n0, (long long)n1,
                       (long long)n2, (long long)n3);
    return 1;
}

static int n_src_ok(checker *c, int lo, int hi) {
    if (c->node->n_src < lo || c->node->n_src > hi)
        return decline(c, "has %d sources, expected %d..%d", (int)c->node->n_src, lo, hi);
    for (int i = 0; i < lo; i++)
        if (!c->node->src[i]) return decline(c, "src%d is missing", i);
    return 1;
}

static const tsr_tensor *opt_src(const tsr_node *n, int i) { return i < n->n_src ? n->src[i] : NULL; }

static int check_node(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *b = n->n_src > 1 ? n->src[1] : NULL, *dst = n->dst;
    switch (n->op) {
    case TSR_OP_GET_ROWS:
        if (!n_src_ok(c, 2, 2) || !readable_ok(c, a, "src0") || !i32_ok(c, b, "src1") || !dst_ok(c, dst)) return 0;
        if (b->ne[3] != 1 || b->ne[1] != a->ne[2] || b->ne[2] != a->ne[3])
            return decline(c, "src1 batch dims do not match src0");
        return shape_is(c, dst, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    case TSR_OP_ADD:
    case TSR_OP_MUL:
        if (!n_src_ok(c, 2, 2) || !float_ok(c, a, "src0") || !float_ok(c, b, "src1") || !dst_ok(c, dst) ||
            !same_shape(c, a, dst, "src0 and dst"))
            return 0;
        for (int d = 0; d < TSR_MAX_DIMS; d++)
            if (a->ne[d] % b->ne[d]) return decline(c, "src1 ne[%d] does not divide src0's", d);
        return 1;
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
        return n_src_ok(c, 1, 1) && float_ok(c, a, "src0") && dst_ok(c, dst) && same_shape(c, a, dst, "src0 and dst");
    case TSR_OP_SWIGLU:
        return n_src_ok(c, 2, 2) && float_ok(c, a, "src0") && float_ok(c, b, "src1") && dst_ok(c, dst) &&
               same_shape(c, a, b, "src0 and src1") && same_shape(c, a, dst, "src0 and dst");
    case TSR_OP_MUL_MAT:
        if (!n_src_ok(c, 2, 2) || !readable_ok(c, a, "src0") || !float_ok(c, b, "src1") || !dst_ok(c, dst)) return 0;
        if (a->ne[0] != b->ne[0]) return decline(c, "src0 and src1 differ in ne[0]");
        if (a->nb[0] != tsr_dtype_block_bytes(a->dtype)) return decline(c, "src0 rows are not contiguous");
        if (b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3]) return decline(c, "src0 batch dims do not divide src1's");
        return shape_is(c, dst, a->ne[1], b->ne[1], b->ne[2], b->ne[3]);
    case TSR_OP_ROPE: {
        const tsr_tensor *ff = opt_src(n, 2);
        if (!n_src_ok(c, 2, 3) || !float_ok(c, a, "src0") || !i32_ok(c, b, "src1") || !dst_ok(c, dst) ||
            !same_shape(c, a, dst, "src0 and dst"))
            return 0;
        const int32_t n_dims = n->iparams[0], mode = n->iparams[1];
        if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0]) return decline(c, "n_dims %d is not even and <= head_dim", (int)n_dims);
        if (mode != TSR_ROPE_NORMAL && mode != TSR_ROPE_NEOX) return decline(c, "mode %d is not normal or NeoX", (int)mode);
        if (b->ne[0] != a->ne[2] || b->ne[1] * b->ne[2] * b->ne[3] != 1)
            return decline(c, "src1 (positions) does not have one entry per token");
        if (ff) {
            if (!tensor_ok(c, ff, "src2") || ff->dtype != TSR_DTYPE_F32) return decline(c, "src2 (freq factors) is not F32");
            if (ff->ne[0] < n_dims / 2) return decline(c, "src2 (freq factors) is shorter than n_dims/2");
        }
        return 1;
    }
    case TSR_OP_SOFT_MAX: {
        const tsr_tensor *mask = opt_src(n, 1);
        if (!n_src_ok(c, 1, 2) || !float_ok(c, a, "src0") || !dst_ok(c, dst) || !same_shape(c, a, dst, "src0 and dst"))
            return 0;
        if (mask) {
            if (!tensor_ok(c, mask, "src1 (mask)")) return 0;
            if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16) return decline(c, "mask is not F32 or F16");
            if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1]) return decline(c, "mask is too small");
            if (a->ne[2] % mask->ne[2] || a->ne[3] % mask->ne[3]) return decline(c, "mask batch dims do not divide src0's");
        }
        return 1;
    }
    case TSR_OP_CPY:
        if (!n_src_ok(c, 1, 1) || !readable_ok(c, a, "src0") || !dst_ok(c, dst)) return 0;
        if (tsr_tensor_nelements(a) != tsr_tensor_nelements(dst)) return decline(c, "element counts differ");
        return 1;
    case TSR_OP_ARGMAX:
        if (!n_src_ok(c, 1, 1) || !float_ok(c, a, "src0") || !i32_ok(c, dst, "dst")) return 0;
        if (tsr_tensor_nelements(dst) != a->ne[1] * a->ne[2] * a->ne[3]) return decline(c, "dst has not one entry per row");
        return 1;
    case TSR_OP_CONCAT: {
        if (!n_src_ok(c, 2, 2) || !float_ok(c, a, "src0") || !float_ok(c, b, "src1") || !dst_ok(c, dst)) return 0;
        const int32_t dim = n->iparams[0];
        if (dim < 0 || dim >= TSR_MAX_DIMS) return decline(c, "dimension %d is not 0..3", (int)dim);
        int64_t want[TSR_MAX_DIMS];
        for (int d = 0; d < TSR_MAX_DIMS; d++) {
            if (d != dim && a->ne[d] != b->ne[d]) return decline(c, "src0 and src1 differ in ne[%d]", d);
            want[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
        }
        return shape_is(c, dst, want[0], want[1], want[2], want[3]);
    }
    case TSR_OP_FLASH_ATTN: {
        const tsr_tensor *v = opt_src(n, 2), *mask = opt_src(n, 3);
        if (!n_src_ok(c, 3, 4) || !float_ok(c, a, "src0 (q)") || !float_ok(c, b, "src1 (k)") ||
            !float_ok(c, v, "src2 (v)") || !dst_ok(c, dst))
            return 0;
        if (dst->dtype != TSR_DTYPE_F32) return decline(c, "dst is not F32");
        const int64_t D = a->ne[0], n_q = a->ne[1], H = a->ne[2];
        if (D > 256) return decline(c, "head size %lld is above 256", (long long)D);
        if (a->ne[3] != 1 || b->ne[0] != D || b->ne[3] != 1) return decline(c, "q and k shapes do not fit");
        if (!same_shape(c, b, v, "k and v")) return 0;
        if (H % b->ne[2]) return decline(c, "query heads are not a multiple of kv heads");
        if (mask) {
            if (!tensor_ok(c, mask, "src3 (mask)")) return 0;
            if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16) return decline(c, "mask is not F32 or F16");
            if (mask->ne[0] != b->ne[1] || mask->ne[1] < n_q || mask->ne[2] != 1 || mask->ne[3] != 1)
                return decline(c, "mask shape does not fit");
        }
        return shape_is(c, dst, D, H, n_q, 1);
    }
    default:
        return decline(c, "not implemented on this device");
    }
}

int vk_op_supported(const vk_device *d, const tsr_node *node, char *why, size_t why_size) {
    (void)d;
    checker c = {node, why, why_size};
    if (why && why_size) why[0] = '\0';
    if (!node) return 0;
    if (node->n_src < 0 || node->n_src > TSR_MAX_SRC) return decline(&c, "n_src %d", (int)node->n_src);
    if (!node->dst) return decline(&c, "dst is missing");
    /* Debugging aid: decline the listed ops (e.g. "ROPE,MUL_MAT") to find
     * which one a numerical difference comes from. */
    const char *off = getenv("TESSERA_VULKAN_DECLINE");
    if (off && strstr(off, op_name(node->op))) return decline(&c, "declined by TESSERA_VULKAN_DECLINE");
    return check_node(&c);
}

/* ------------------------------------------------------------ plans */

enum { ELT_ADD, ELT_MUL, ELT_SCALE, ELT_SILU, ELT_GELU, ELT_SWIGLU, ELT_CPY, ELT_GET_ROWS, ELT_CONCAT, ELT_ARGMAX };

/* n workgroups as an x * y grid within the guaranteed 65535 per dimension */
static void grid(uint64_t n, uint32_t groups[3]) {
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

void vk_op_plan(const vk_device *d, const tsr_node *node, vk_dispatch *out) {
    memset(out, 0, sizeof *out);
    vk_params *p = &out->p;
    for (int k = 0; k < 4; k++)
        if (k < node->n_src && node->src[k]) put_tensor(p, k, node->src[k]);
    put_tensor(p, 4, node->dst);
    memcpy(p->ip, node->iparams, sizeof p->ip);
    memcpy(p->fp, node->fparams, sizeof p->fp);
    const bool sg = d->subgroup_arith;
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    const uint64_t n_dst = (uint64_t)tsr_tensor_nelements(dst);

    switch (node->op) {
    case TSR_OP_MUL_MAT: {
        const tsr_tensor *x = node->src[1];
        const uint32_t N = (uint32_t)x->ne[1], cols = N == 1 ? 1 : VK_MUL_MAT_COLS;
        if (d->matmul_per_invocation && d->has_f64)
            out->shader = N == 1 ? VK_SHADER_MUL_MAT_VEC_INV64 : VK_SHADER_MUL_MAT_INV64;
        else if (d->matmul_per_invocation)
            out->shader = N == 1 ? VK_SHADER_MUL_MAT_VEC_INV : VK_SHADER_MUL_MAT_INV;
        else
            out->shader = N == 1 ? (sg ? VK_SHADER_MUL_MAT_VEC_SG : VK_SHADER_MUL_MAT_VEC)
                                 : (sg ? VK_SHADER_MUL_MAT_SG : VK_SHADER_MUL_MAT);
        out->spec[0] = (uint32_t)a->dtype;
        out->spec[1] = (uint32_t)x->dtype;
        p->u[0] = (uint32_t)a->ne[1];
        p->u[1] = N;
        p->u[2] = (N + cols - 1) / cols;
        p->u[3] = (uint32_t)(x->ne[2] / a->ne[2]);
        p->u[4] = (uint32_t)(x->ne[3] / a->ne[3]);
        p->u[5] = (uint32_t)a->ne[0];
        p->u[6] = (uint32_t)x->ne[2];
        p->u[7] = (uint32_t)(x->ne[2] * x->ne[3]);
        const uint64_t blocks = (uint64_t)p->u[0] * p->u[2] * p->u[7];
        grid(d->matmul_per_invocation ? (blocks + 63) / 64 : blocks, out->groups);
        return;
    }
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
        out->shader = sg ? VK_SHADER_ROW_NORM_SG : VK_SHADER_ROW_NORM;
        p->u[0] = node->op == TSR_OP_NORM;
        grid(rows_of(a), out->groups);
        return;
    case TSR_OP_SOFT_MAX: {
        out->shader = sg ? VK_SHADER_SOFT_MAX_SG : VK_SHADER_SOFT_MAX;
        const tsr_tensor *mask = node->n_src > 1 ? node->src[1] : NULL;
        p->u[0] = mask != NULL;
        const float max_bias = node->fparams[1];
        if (mask && max_bias > 0.0f) {
            /* ALiBi slopes as ggml defines them (ref_ops_norm.c) */
            const uint32_t n_head_log2 = 1u << (uint32_t)floor(log2((double)a->ne[2]));
            p->u[1] = n_head_log2;
            p->u[2] = 1;
            p->f[0] = powf(2.0f, -max_bias / (float)n_head_log2);
            p->f[1] = powf(2.0f, -(max_bias / 2.0f) / (float)n_head_log2);
        }
        grid(rows_of(a), out->groups);
        return;
    }
    case TSR_OP_ROPE: {
        out->shader = d->has_f64 ? VK_SHADER_ROPE_F64 : VK_SHADER_ROPE;
        const int32_t n_dims = node->iparams[0], n_ctx_orig = node->iparams[2];
        const float freq_base = node->fparams[0], freq_scale = node->fparams[1];
        const float beta_fast = node->fparams[4], beta_slow = node->fparams[5];
        p->u[0] = (uint32_t)n_dims;
        p->u[1] = node->iparams[1] == TSR_ROPE_NEOX;
        p->u[2] = node->n_src > 2 && node->src[2] != NULL;
        p->f[0] = powf(freq_base, -2.0f / (float)n_dims);
        /* YaRN correction dims (ref_rope.c: yarn_corr_dims) */
        const float start = floorf((float)n_dims * logf((float)n_ctx_orig / (beta_fast * 2.0f * (float)M_PI)) /
                                   (2.0f * logf(freq_base)));
        const float end = ceilf((float)n_dims * logf((float)n_ctx_orig / (beta_slow * 2.0f * (float)M_PI)) /
                                (2.0f * logf(freq_base)));
        p->f[1] = fmaxf(0.0f, start);
        p->f[2] = fminf((float)(n_dims - 1), end);
        p->f[3] = 1.0f + 0.1f * logf(1.0f / freq_scale);
        const uint64_t rows = rows_of(a);
        grid((rows + 63) / 64, out->groups);
        return;
    }
    case TSR_OP_FLASH_ATTN:
        out->shader = sg ? VK_SHADER_FLASH_ATTN_SG : VK_SHADER_FLASH_ATTN;
        p->u[0] = node->n_src > 3 && node->src[3] != NULL;
        grid((uint64_t)(a->ne[1] * a->ne[2]), out->groups);
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
    case TSR_OP_SWIGLU: p->u[0] = ELT_SWIGLU; break;
    case TSR_OP_CPY: p->u[0] = ELT_CPY; break;
    case TSR_OP_GET_ROWS: p->u[0] = ELT_GET_ROWS; break;
    case TSR_OP_CONCAT: p->u[0] = ELT_CONCAT; break;
    case TSR_OP_ARGMAX: p->u[0] = ELT_ARGMAX; break;
    default: break;
    }
    grid((n_dst + 255) / 256, out->groups);
}
