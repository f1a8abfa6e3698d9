/*
 * ocl_check — supports_op: can this device compute the node exactly as
 * tessera/plugin.h defines the op?
 *
 * Two questions in one pass: is the node well-formed (the op's shape rules,
 * as the ABI states them: a malformed node is always declined), and is it
 * within what the kernels implement:
 *   - float tensors are F32, F16 or BF16; indices I32;
 *   - quantized weights (MUL_MAT, GET_ROWS, CPY to float): Q4_0, Q4_1, Q5_0,
 *     Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL; every other type is declined and falls
 *     back to the CPU;
 *   - CPY into a quantized type is declined (the CPU quantizes);
 *   - MUL_MAT activations and result F32; FLASH_ATTN head size <= 256.
 * Strides must be multiples of the element size (kernels load whole
 * elements). Addresses are never looked at.
 */
#include <stdarg.h>
#include <stdio.h>

#include "ocl_internal.h"

#define OCL_MAX_ELEMENTS (INT64_C(1) << 40)
#define OCL_ATTN_MAX_D 256 /* ATTN_MAX_D in kernels/attn.cl */

static const char *const op_names[TSR_OP_COUNT] = {
    [TSR_OP_NONE] = "NONE",         [TSR_OP_GET_ROWS] = "GET_ROWS",
    [TSR_OP_ADD] = "ADD",           [TSR_OP_MUL] = "MUL",
    [TSR_OP_SCALE] = "SCALE",       [TSR_OP_MUL_MAT] = "MUL_MAT",
    [TSR_OP_RMS_NORM] = "RMS_NORM", [TSR_OP_NORM] = "NORM",
    [TSR_OP_ROPE] = "ROPE",         [TSR_OP_SOFT_MAX] = "SOFT_MAX",
    [TSR_OP_SILU] = "SILU",         [TSR_OP_GELU] = "GELU",
    [TSR_OP_SWIGLU] = "SWIGLU",     [TSR_OP_CPY] = "CPY",
    [TSR_OP_CONCAT] = "CONCAT",     [TSR_OP_ARGMAX] = "ARGMAX",
    [TSR_OP_FLASH_ATTN] = "FLASH_ATTN",
};

const char *ocl_op_name(int32_t op) {
    if (op < 0 || op >= TSR_OP_COUNT || !op_names[op]) return "unknown op";
    return op_names[op];
}

bool ocl_dtype_is_quant(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_Q8_0: case TSR_DTYPE_Q2_K: case TSR_DTYPE_Q3_K: case TSR_DTYPE_Q4_K:
    case TSR_DTYPE_Q5_K: case TSR_DTYPE_Q6_K: case TSR_DTYPE_IQ4_NL: return true;
    default: return false;
    }
}

static bool dtype_is_float(int32_t dt) {
    return dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_BF16;
}

typedef struct checker {
    const tsr_node *node;
    char *why;
    size_t why_size;
} checker;

__attribute__((format(printf, 2, 3))) static int no(checker *c, const char *fmt, ...) {
    if (!c->why || !c->why_size) return 0;
    int n = snprintf(c->why, c->why_size, "%s '%s': ", ocl_op_name(c->node->op),
                     c->node->dst && c->node->dst->name ? c->node->dst->name : "");
    if (n < 0 || (size_t)n >= c->why_size) return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + n, c->why_size - (size_t)n, fmt, ap);
    va_end(ap);
    return 0;
}

/* Geometry every tensor needs: sizes >= 1, positive element-aligned
 * strides, whole blocks laid out contiguously along ne[0]. */
static int tensor_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!t) return no(c, "%s is missing", role);
    int64_t bs = tsr_dtype_block_size(t->dtype), bytes = tsr_dtype_block_bytes(t->dtype);
    if (bs <= 0 || bytes <= 0 || !(dtype_is_float(t->dtype) || t->dtype == TSR_DTYPE_I32 ||
                                   ocl_dtype_is_quant(t->dtype)))
        return no(c, "%s dtype %d is not one the kernels read", role, (int)t->dtype);
    int64_t n = 1;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] < 1) return no(c, "%s ne[%d] = %lld", role, d, (long long)t->ne[d]);
        if (t->ne[d] > OCL_MAX_ELEMENTS / n) return no(c, "%s has too many elements", role);
        n *= t->ne[d];
        if (t->ne[d] > 1 && (t->nb[d] <= 0 || t->nb[d] > OCL_MAX_ELEMENTS))
            return no(c, "%s nb[%d] = %lld is not a usable stride", role, d, (long long)t->nb[d]);
        /* element-aligned (2 bytes for blocks: their scales are F16) */
        int64_t align = bs > 1 ? 2 : bytes;
        if (t->ne[d] > 1 && (d > 0 || bs == 1) && t->nb[d] % align)
            return no(c, "%s nb[%d] = %lld is not a multiple of %lld", role, d, (long long)t->nb[d],
                      (long long)align);
    }
    if (bs > 1 && (t->ne[0] % bs || t->nb[0] != bytes))
        return no(c, "%s: quantized rows must be whole contiguous blocks", role);
    return 1;
}

static int float_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    if (!dtype_is_float(t->dtype)) return no(c, "%s dtype %d is not F32, F16 or BF16", role, (int)t->dtype);
    return 1;
}

static int f32_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    if (t->dtype != TSR_DTYPE_F32) return no(c, "%s dtype %d is not F32", role, (int)t->dtype);
    return 1;
}

static int i32_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    if (t->dtype != TSR_DTYPE_I32) return no(c, "%s dtype %d is not I32", role, (int)t->dtype);
    return 1;
}

static int readable_ok(checker *c, const tsr_tensor *t, const char *role) {
    if (!tensor_ok(c, t, role)) return 0;
    if (!dtype_is_float(t->dtype) && !ocl_dtype_is_quant(t->dtype))
        return no(c, "%s dtype %d is not supported", role, (int)t->dtype);
    return 1;
}

static int shape_is(checker *c, const tsr_tensor *t, const char *role, int64_t n0, int64_t n1,
                    int64_t n2, int64_t n3) {
    if (t->ne[0] != n0 || t->ne[1] != n1 || t->ne[2] != n2 || t->ne[3] != n3)
        return no(c, "%s is [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", role,
                  (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                  (long long)n0, (long long)n1, (long long)n2, (long long)n3);
    return 1;
}

static int same_shape(checker *c, const tsr_tensor *t, const char *role, const tsr_tensor *like) {
    return shape_is(c, t, role, like->ne[0], like->ne[1], like->ne[2], like->ne[3]);
}

static int n_src_ok(checker *c, int lo, int hi) {
    int32_t n = c->node->n_src;
    if (n < lo || n > hi) return no(c, "has %d sources, expected %d..%d", (int)n, lo, hi);
    for (int i = 0; i < lo; i++)
        if (!c->node->src[i]) return no(c, "src%d is missing", i);
    return 1;
}

static const tsr_tensor *opt_src(const tsr_node *n, int i) { return i < n->n_src ? n->src[i] : NULL; }

/* ----------------------------------------------------------------- per op */

static int get_rows_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *rows = c->node->src[1], *dst = c->node->dst;
    if (!n_src_ok(c, 2, 2) || !readable_ok(c, a, "src0") || !i32_ok(c, rows, "src1 (rows)") ||
        !float_ok(c, dst, "dst"))
        return 0;
    if (rows->ne[3] != 1 || rows->ne[1] != a->ne[2] || rows->ne[2] != a->ne[3])
        return no(c, "src1 (rows) batch dims do not match src0's");
    return shape_is(c, dst, "dst", a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2]);
}

static int binary_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (!n_src_ok(c, 2, 2) || !float_ok(c, a, "src0") || !float_ok(c, b, "src1") ||
        !float_ok(c, dst, "dst") || !same_shape(c, dst, "dst", a))
        return 0;
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->ne[d] % b->ne[d]) return no(c, "src1 ne[%d] does not divide src0's", d);
    return 1;
}

static int unary_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    return n_src_ok(c, 1, 1) && float_ok(c, a, "src0") && float_ok(c, dst, "dst") &&
           same_shape(c, dst, "dst", a);
}

static int swiglu_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    return n_src_ok(c, 2, 2) && float_ok(c, a, "src0") && float_ok(c, b, "src1") &&
           float_ok(c, dst, "dst") && same_shape(c, b, "src1", a) && same_shape(c, dst, "dst", a);
}

static int mul_mat_ok(checker *c) {
    const tsr_tensor *w = c->node->src[0], *x = c->node->src[1], *dst = c->node->dst;
    if (!n_src_ok(c, 2, 2) || !readable_ok(c, w, "src0 (weights)") || !float_ok(c, x, "src1") ||
        !float_ok(c, dst, "dst"))
        return 0;
    if (w->ne[0] != x->ne[0]) return no(c, "src0 ne[0] differs from src1 ne[0]");
    if (x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3]) return no(c, "src0 batch dims do not divide src1's");
    if (!shape_is(c, dst, "dst", w->ne[1], x->ne[1], x->ne[2], x->ne[3])) return 0;
    if (x->dtype != TSR_DTYPE_F32 || dst->dtype != TSR_DTYPE_F32)
        return no(c, "activations and result must be F32 on this device");
    return 1;
}

static int rope_ok(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *pos = n->src[1], *ff = opt_src(n, 2), *dst = n->dst;
    if (!n_src_ok(c, 2, 3) || !float_ok(c, a, "src0") || !i32_ok(c, pos, "src1 (positions)") ||
        !float_ok(c, dst, "dst") || !same_shape(c, dst, "dst", a))
        return 0;
    int32_t n_dims = n->iparams[0], mode = n->iparams[1];
    if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0]) return no(c, "n_dims = %d is not usable", (int)n_dims);
    if (mode != TSR_ROPE_NORMAL && mode != TSR_ROPE_NEOX) return no(c, "mode %d is unknown", (int)mode);
    if (pos->ne[0] != a->ne[2] || pos->ne[1] * pos->ne[2] * pos->ne[3] != 1)
        return no(c, "src1 (positions) has %lld entries for %lld tokens", (long long)pos->ne[0],
                  (long long)a->ne[2]);
    if (ff && (!f32_ok(c, ff, "src2 (freq factors)") || ff->ne[0] < n_dims / 2))
        return no(c, "src2 (freq factors) is not F32 with n_dims/2 entries");
    return 1;
}

static int soft_max_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *mask = opt_src(c->node, 1), *dst = c->node->dst;
    if (!n_src_ok(c, 1, 2) || !float_ok(c, a, "src0") || !float_ok(c, dst, "dst") ||
        !same_shape(c, dst, "dst", a))
        return 0;
    if (mask) {
        if (!tensor_ok(c, mask, "src1 (mask)")) return 0;
        if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16)
            return no(c, "src1 (mask) is not F32 or F16");
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || a->ne[2] % mask->ne[2] ||
            a->ne[3] % mask->ne[3])
            return no(c, "src1 (mask) shape does not fit src0");
    }
    return 1;
}

static int cpy_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (!n_src_ok(c, 1, 1) || !readable_ok(c, a, "src0") || !tensor_ok(c, dst, "dst")) return 0;
    if (a->ne[0] * a->ne[1] * a->ne[2] * a->ne[3] != dst->ne[0] * dst->ne[1] * dst->ne[2] * dst->ne[3])
        return no(c, "src0 and dst hold different numbers of elements");
    if (!dtype_is_float(dst->dtype)) return no(c, "converting into dtype %d is left to the CPU", (int)dst->dtype);
    return 1;
}

static int concat_ok(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *b = n->src[1], *dst = n->dst;
    if (!n_src_ok(c, 2, 2) || !float_ok(c, a, "src0") || !float_ok(c, b, "src1") || !float_ok(c, dst, "dst"))
        return 0;
    int32_t dim = n->iparams[0];
    if (dim < 0 || dim >= TSR_MAX_DIMS) return no(c, "dimension %d is not 0..3", (int)dim);
    int64_t want[TSR_MAX_DIMS];
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (d != dim && a->ne[d] != b->ne[d]) return no(c, "src0 and src1 differ in ne[%d]", d);
        want[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
    }
    return shape_is(c, dst, "dst", want[0], want[1], want[2], want[3]);
}

static int argmax_ok(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (!n_src_ok(c, 1, 1) || !float_ok(c, a, "src0") || !i32_ok(c, dst, "dst")) return 0;
    if (dst->ne[0] * dst->ne[1] * dst->ne[2] * dst->ne[3] != a->ne[1] * a->ne[2] * a->ne[3])
        return no(c, "dst does not hold one index per row");
    return 1;
}

static int flash_attn_ok(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *mask = opt_src(n, 3), *dst = n->dst;
    if (!n_src_ok(c, 3, 4) || !float_ok(c, q, "src0 (q)") || !float_ok(c, k, "src1 (k)") ||
        !float_ok(c, v, "src2 (v)") || !f32_ok(c, dst, "dst"))
        return 0;
    int64_t D = q->ne[0], n_q = q->ne[1], H = q->ne[2];
    if (q->ne[3] != 1 || !shape_is(c, k, "src1 (k)", D, k->ne[1], k->ne[2], 1) ||
        !same_shape(c, v, "src2 (v)", k))
        return 0;
    if (H % k->ne[2]) return no(c, "query heads are not a multiple of kv heads");
    if (mask) {
        if (!tensor_ok(c, mask, "src3 (mask)")) return 0;
        if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16)
            return no(c, "src3 (mask) is not F32 or F16");
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < n_q || mask->ne[2] != 1 || mask->ne[3] != 1)
            return no(c, "src3 (mask) shape does not fit");
    }
    if (D > OCL_ATTN_MAX_D) return no(c, "head size %lld is over %d", (long long)D, OCL_ATTN_MAX_D);
    return shape_is(c, dst, "dst", D, H, n_q, 1);
}

int ocl_node_supported(const ocl_device *d, const tsr_node *node, char *why, size_t why_size) {
    (void)d;
    checker c = {node, why, why_size};
    if (why && why_size) why[0] = '\0';
    if (!node || node->n_src < 0 || node->n_src > TSR_MAX_SRC || !node->dst) {
        if (why && why_size) snprintf(why, why_size, "a malformed node");
        return 0;
    }
    switch (node->op) {
    case TSR_OP_GET_ROWS: return get_rows_ok(&c);
    case TSR_OP_ADD:
    case TSR_OP_MUL: return binary_ok(&c);
    case TSR_OP_SCALE:
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
    case TSR_OP_SILU:
    case TSR_OP_GELU: return unary_ok(&c);
    case TSR_OP_MUL_MAT: return mul_mat_ok(&c);
    case TSR_OP_ROPE: return rope_ok(&c);
    case TSR_OP_SOFT_MAX: return soft_max_ok(&c);
    case TSR_OP_SWIGLU: return swiglu_ok(&c);
    case TSR_OP_CPY: return cpy_ok(&c);
    case TSR_OP_CONCAT: return concat_ok(&c);
    case TSR_OP_ARGMAX: return argmax_ok(&c);
    case TSR_OP_FLASH_ATTN: return flash_attn_ok(&c);
    default: return no(&c, "op %d is not one this device computes", (int)node->op);
    }
}
