/*
 * ref_check — is a node well-formed, and can ref compute it?
 *
 * The op list in tessera/plugin.h is the spec; this file turns it into
 * checks. A node that passes may be computed without any further shape test
 * (the ops trust it); one that fails gets a one-line reason.
 */
#include <stdarg.h>
#include <stdio.h>

#include "ref/ref.h"
#include "ref/ref_internal.h"
#include "tensor/dtype.h"

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

const char *ref_op_name(int32_t op) {
    if (op < 0 || op >= TSR_OP_COUNT || !op_names[op]) return "unknown";
    return op_names[op];
}

const char *ref_node_label(const tsr_node *node) {
    if (node->dst && node->dst->name && node->dst->name[0]) return node->dst->name;
    return ref_op_name(node->op);
}

/* Largest element count ref accepts for one tensor (2^48): keeps every
 * index and byte offset computation far from int64 overflow. */
#define REF_MAX_ELEMENTS (INT64_C(1) << 48)
#define REF_MAX_SPAN (INT64_C(1) << 60)

typedef struct checker {
    const tsr_node *node;
    char *why;
    size_t why_size;
} checker;

/* Record the reason (prefixed with the op and node name) and return -1. */
__attribute__((format(printf, 2, 3))) static int fail(checker *c, const char *fmt, ...) {
    if (!c->why || c->why_size == 0) return -1;
    int n = snprintf(c->why, c->why_size, "%s '%s': ", ref_op_name(c->node->op),
                     c->node->dst && c->node->dst->name ? c->node->dst->name : "");
    if (n < 0 || (size_t)n >= c->why_size) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why + n, c->why_size - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Geometry every tensor must have: positive sizes, sane strides, whole
 * blocks with contiguous blocks along ne[0]. */
static int check_tensor(checker *c, const tsr_tensor *t, const char *role) {
    if (!t) return fail(c, "%s is missing", role);
    if (!dtype_is_known(t->dtype)) return fail(c, "%s has unknown dtype %d", role, (int)t->dtype);
    int64_t n = 1;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] < 1) return fail(c, "%s ne[%d] = %lld (must be >= 1)", role, d, (long long)t->ne[d]);
        if (t->ne[d] > REF_MAX_ELEMENTS / n) return fail(c, "%s has too many elements", role);
        n *= t->ne[d];
        if (t->ne[d] > 1 && (t->nb[d] <= 0 || t->nb[d] > REF_MAX_ELEMENTS))
            return fail(c, "%s nb[%d] = %lld is not a usable stride", role, d, (long long)t->nb[d]);
    }
    const int64_t bs = tsr_dtype_block_size(t->dtype);
    if (bs > 1) {
        if (t->ne[0] % bs)
            return fail(c, "%s %s ne[0] = %lld is not a multiple of the block size %lld", role,
                        dtype_name(t->dtype), (long long)t->ne[0], (long long)bs);
        if (t->nb[0] != tsr_dtype_block_bytes(t->dtype))
            return fail(c, "%s %s blocks are not contiguous along ne[0] (nb[0] = %lld)", role,
                        dtype_name(t->dtype), (long long)t->nb[0]);
    }
    /* The byte span (the last element's offset) must stay far from overflow. */
    int64_t span = 0;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        const int64_t steps = (d == 0 && bs > 1 ? t->ne[0] / bs : t->ne[d]) - 1;
        if (steps <= 0) continue;
        if (t->nb[d] > REF_MAX_SPAN / steps || steps * t->nb[d] > REF_MAX_SPAN - span)
            return fail(c, "%s spans more than 2^60 bytes", role);
        span += steps * t->nb[d];
    }
    return 0;
}

static int check_float(checker *c, const tsr_tensor *t, const char *role) {
    if (check_tensor(c, t, role)) return -1;
    if (!ref_dtype_is_float(t->dtype))
        return fail(c, "%s dtype %s is not F32, F16 or BF16", role, dtype_name(t->dtype));
    return 0;
}

static int check_f32(checker *c, const tsr_tensor *t, const char *role) {
    if (check_tensor(c, t, role)) return -1;
    if (t->dtype != TSR_DTYPE_F32) return fail(c, "%s dtype %s is not F32", role, dtype_name(t->dtype));
    return 0;
}

static int check_readable(checker *c, const tsr_tensor *t, const char *role) {
    if (check_tensor(c, t, role)) return -1;
    if (!ref_dtype_is_readable(t->dtype))
        return fail(c, "%s dtype %s is not supported", role, dtype_name(t->dtype));
    return 0;
}

static int check_i32(checker *c, const tsr_tensor *t, const char *role) {
    if (check_tensor(c, t, role)) return -1;
    if (t->dtype != TSR_DTYPE_I32) return fail(c, "%s dtype %s is not I32", role, dtype_name(t->dtype));
    return 0;
}

static int check_shape(checker *c, const tsr_tensor *t, const char *role, int64_t n0, int64_t n1,
                       int64_t n2, int64_t n3) {
    if (t->ne[0] != n0 || t->ne[1] != n1 || t->ne[2] != n2 || t->ne[3] != n3)
        return fail(c, "%s is [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", role,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                    (long long)n0, (long long)n1, (long long)n2, (long long)n3);
    return 0;
}

static int check_same_shape(checker *c, const tsr_tensor *t, const char *role, const tsr_tensor *like) {
    return check_shape(c, t, role, like->ne[0], like->ne[1], like->ne[2], like->ne[3]);
}

static int check_n_src(checker *c, int lo, int hi) {
    int32_t n = c->node->n_src;
    if (n < lo || n > hi) return fail(c, "has %d sources, expected %d..%d", (int)n, lo, hi);
    for (int i = 0; i < lo; i++)
        if (!c->node->src[i]) return fail(c, "src%d is missing", i);
    return 0;
}

/* src[i] if present (optional sources may be NULL or beyond n_src). */
static const tsr_tensor *opt_src(const tsr_node *node, int i) {
    return i < node->n_src ? node->src[i] : NULL;
}

/* --------------------------------------------------------- per op checks */

static int check_get_rows(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *rows = n->src[1], *dst = n->dst;
    if (check_n_src(c, 2, 2) || check_readable(c, a, "src0") || check_i32(c, rows, "src1 (rows)") ||
        check_float(c, dst, "dst"))
        return -1;
    /* a [n, r, b2, b3], rows [m, b2, b3] -> dst [n, m, b2, b3] */
    if (rows->ne[3] != 1) return fail(c, "src1 (rows) must have ne[3] = 1");
    if (rows->ne[1] != a->ne[2] || rows->ne[2] != a->ne[3])
        return fail(c, "src1 (rows) batch dims [%lld, %lld] differ from src0's [%lld, %lld]",
                    (long long)rows->ne[1], (long long)rows->ne[2], (long long)a->ne[2],
                    (long long)a->ne[3]);
    return check_shape(c, dst, "dst", a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2]);
}

static int check_binary_broadcast(checker *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (check_n_src(c, 2, 2) || check_float(c, a, "src0") || check_float(c, b, "src1") ||
        check_float(c, dst, "dst") || check_same_shape(c, dst, "dst", a))
        return -1;
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->ne[d] % b->ne[d])
            return fail(c, "src1 ne[%d] = %lld does not divide src0 ne[%d] = %lld", d,
                        (long long)b->ne[d], d, (long long)a->ne[d]);
    return 0;
}

static int check_unary(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (check_n_src(c, 1, 1) || check_float(c, a, "src0") || check_float(c, dst, "dst") ||
        check_same_shape(c, dst, "dst", a))
        return -1;
    return 0;
}

static int check_swiglu(checker *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (check_n_src(c, 2, 2) || check_float(c, a, "src0") || check_float(c, b, "src1") ||
        check_float(c, dst, "dst") || check_same_shape(c, b, "src1", a) ||
        check_same_shape(c, dst, "dst", a))
        return -1;
    return 0;
}

static int check_mul_mat(checker *c) {
    const tsr_tensor *w = c->node->src[0], *x = c->node->src[1], *dst = c->node->dst;
    if (check_n_src(c, 2, 2) || check_readable(c, w, "src0 (weights)") || check_float(c, x, "src1") ||
        check_float(c, dst, "dst"))
        return -1;
    /* w [K, M, B2/r2, B3/r3], x [K, N, B2, B3] -> dst [M, N, B2, B3] */
    if (w->ne[0] != x->ne[0])
        return fail(c, "src0 ne[0] = %lld differs from src1 ne[0] = %lld", (long long)w->ne[0],
                    (long long)x->ne[0]);
    if (x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3])
        return fail(c, "src0 batch dims [%lld, %lld] do not divide src1's [%lld, %lld]",
                    (long long)w->ne[2], (long long)w->ne[3], (long long)x->ne[2], (long long)x->ne[3]);
    return check_shape(c, dst, "dst", w->ne[1], x->ne[1], x->ne[2], x->ne[3]);
}

static int check_rope(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *pos = n->src[1], *ff = opt_src(n, 2), *dst = n->dst;
    if (check_n_src(c, 2, 3) || check_float(c, a, "src0") || check_i32(c, pos, "src1 (positions)") ||
        check_float(c, dst, "dst") || check_same_shape(c, dst, "dst", a))
        return -1;
    int32_t n_dims = n->iparams[0], mode = n->iparams[1];
    if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0])
        return fail(c, "n_dims = %d must be even and in 2..head_dim (%lld)", (int)n_dims,
                    (long long)a->ne[0]);
    if (mode != TSR_ROPE_NORMAL && mode != TSR_ROPE_NEOX)
        return fail(c, "mode %d is neither normal (0) nor NeoX (2)", (int)mode);
    /* a [head_dim, n_head, n_tokens, b3], positions [n_tokens] */
    if (tsr_tensor_nelements(pos) != a->ne[2] || pos->ne[0] != a->ne[2])
        return fail(c, "src1 (positions) has %lld entries for %lld tokens", (long long)pos->ne[0],
                    (long long)a->ne[2]);
    if (ff) {
        if (check_f32(c, ff, "src2 (freq factors)")) return -1;
        if (ff->ne[0] < n_dims / 2)
            return fail(c, "src2 (freq factors) has %lld entries, needs n_dims/2 = %d",
                        (long long)ff->ne[0], (int)(n_dims / 2));
    }
    return 0;
}

static int check_soft_max(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *mask = opt_src(n, 1), *dst = n->dst;
    if (check_n_src(c, 1, 2) || check_float(c, a, "src0") || check_float(c, dst, "dst") ||
        check_same_shape(c, dst, "dst", a))
        return -1;
    if (mask) {
        if (check_tensor(c, mask, "src1 (mask)")) return -1;
        if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16)
            return fail(c, "src1 (mask) dtype %s is not F32 or F16", dtype_name(mask->dtype));
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1])
            return fail(c, "src1 (mask) is [%lld, %lld], needs [%lld, >= %lld]",
                        (long long)mask->ne[0], (long long)mask->ne[1], (long long)a->ne[0],
                        (long long)a->ne[1]);
        if (a->ne[2] % mask->ne[2] || a->ne[3] % mask->ne[3])
            return fail(c, "src1 (mask) ne[2..3] = [%lld, %lld] do not divide src0's [%lld, %lld]",
                        (long long)mask->ne[2], (long long)mask->ne[3], (long long)a->ne[2],
                        (long long)a->ne[3]);
    }
    return 0;
}

static int check_cpy(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (check_n_src(c, 1, 1) || check_readable(c, a, "src0") || check_tensor(c, dst, "dst")) return -1;
    bool a_float = ref_dtype_is_float(a->dtype), a_quant = tsr_dtype_block_size(a->dtype) > 1;
    if (!a_float && !a_quant)
        return fail(c, "src0 dtype %s cannot be converted", dtype_name(a->dtype));
    if (ref_dtype_is_float(dst->dtype)) {
        /* any float or quantized source into F32; quantized into F16/BF16 too */
    } else if (ref_dtype_can_quantize(dst->dtype)) {
        if (!a_float)
            return fail(c, "%s to %s: only F32/F16/BF16 can be quantized", dtype_name(a->dtype),
                        dtype_name(dst->dtype));
    } else {
        return fail(c, "dst dtype %s is not supported", dtype_name(dst->dtype));
    }
    if (tsr_tensor_nelements(a) != tsr_tensor_nelements(dst))
        return fail(c, "src0 has %lld elements, dst %lld", (long long)tsr_tensor_nelements(a),
                    (long long)tsr_tensor_nelements(dst));
    return 0;
}

static int check_concat(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *b = n->src[1], *dst = n->dst;
    if (check_n_src(c, 2, 2) || check_float(c, a, "src0") || check_float(c, b, "src1") ||
        check_float(c, dst, "dst"))
        return -1;
    int32_t dim = n->iparams[0];
    if (dim < 0 || dim >= TSR_MAX_DIMS) return fail(c, "dimension %d is not 0..3", (int)dim);
    int64_t want[TSR_MAX_DIMS];
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (d != dim && a->ne[d] != b->ne[d])
            return fail(c, "src0 and src1 differ in ne[%d] (%lld vs %lld)", d, (long long)a->ne[d],
                        (long long)b->ne[d]);
        want[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
    }
    return check_shape(c, dst, "dst", want[0], want[1], want[2], want[3]);
}

static int check_argmax(checker *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (check_n_src(c, 1, 1) || check_float(c, a, "src0") || check_i32(c, dst, "dst")) return -1;
    int64_t rows = a->ne[1] * a->ne[2] * a->ne[3];
    if (tsr_tensor_nelements(dst) != rows)
        return fail(c, "dst has %lld elements for %lld rows", (long long)tsr_tensor_nelements(dst),
                    (long long)rows);
    return 0;
}

static int check_kv(checker *c, const tsr_tensor *t, const char *role) {
    if (check_tensor(c, t, role)) return -1;
    if (t->dtype != TSR_DTYPE_F32 && t->dtype != TSR_DTYPE_F16 && t->dtype != TSR_DTYPE_BF16)
        return fail(c, "%s dtype %s is not F32, F16 or BF16", role, dtype_name(t->dtype));
    return 0;
}

static int check_flash_attn(checker *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *mask = opt_src(n, 3);
    const tsr_tensor *dst = n->dst;
    if (check_n_src(c, 3, 4) || check_float(c, q, "src0 (q)") || check_kv(c, k, "src1 (k)") ||
        check_kv(c, v, "src2 (v)") || check_f32(c, dst, "dst"))
        return -1;
    /* q [D, n_q, H, 1], k/v [D, n_kv, H_kv, 1] -> dst [D, H, n_q, 1] */
    int64_t D = q->ne[0], n_q = q->ne[1], H = q->ne[2];
    if (q->ne[3] != 1) return fail(c, "src0 (q) must have ne[3] = 1");
    if (check_shape(c, k, "src1 (k)", D, k->ne[1], k->ne[2], 1) ||
        check_same_shape(c, v, "src2 (v)", k))
        return -1;
    if (H % k->ne[2])
        return fail(c, "%lld query heads are not a multiple of %lld kv heads", (long long)H,
                    (long long)k->ne[2]);
    if (mask) {
        if (check_kv(c, mask, "src3 (mask)")) return -1;
        if (mask->dtype == TSR_DTYPE_BF16) return fail(c, "src3 (mask) dtype BF16 is not F32 or F16");
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < n_q || mask->ne[2] != 1 || mask->ne[3] != 1)
            return fail(c, "src3 (mask) is [%lld, %lld, %lld, %lld], needs [%lld, >= %lld, 1, 1]",
                        (long long)mask->ne[0], (long long)mask->ne[1], (long long)mask->ne[2],
                        (long long)mask->ne[3], (long long)k->ne[1], (long long)n_q);
    }
    return check_shape(c, dst, "dst", D, H, n_q, 1);
}

int ref_node_check(const tsr_node *node, char *why, size_t why_size) {
    checker c = {node, why, why_size};
    if (why && why_size) why[0] = '\0';
    if (!node) {
        if (why && why_size) snprintf(why, why_size, "node is NULL");
        return -1;
    }
    if (node->n_src < 0 || node->n_src > TSR_MAX_SRC)
        return fail(&c, "n_src = %d is not 0..%d", (int)node->n_src, TSR_MAX_SRC);
    if (!node->dst) return fail(&c, "dst is missing");
    switch (node->op) {
    case TSR_OP_GET_ROWS: return check_get_rows(&c);
    case TSR_OP_ADD:
    case TSR_OP_MUL: return check_binary_broadcast(&c);
    case TSR_OP_SCALE:
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
    case TSR_OP_SILU:
    case TSR_OP_GELU: return check_unary(&c);
    case TSR_OP_MUL_MAT: return check_mul_mat(&c);
    case TSR_OP_ROPE: return check_rope(&c);
    case TSR_OP_SOFT_MAX: return check_soft_max(&c);
    case TSR_OP_SWIGLU: return check_swiglu(&c);
    case TSR_OP_CPY: return check_cpy(&c);
    case TSR_OP_CONCAT: return check_concat(&c);
    case TSR_OP_ARGMAX: return check_argmax(&c);
    case TSR_OP_FLASH_ATTN: return check_flash_attn(&c);
    default: return fail(&c, "op %d is not a computable op", (int)node->op);
    }
}
