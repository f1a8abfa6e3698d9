/*
 * tessera/plugin_check.h — is a node well-formed? The op rules of
 * tessera/plugin.h as code, the same checks the host runs (ABI 1.1).
 *
 *     char why[256];
 *     if (tsr_node_check(node, why, sizeof why) != 0) ... // why: "ROPE 'q': mode 5 is ..."
 *
 * A 1.1 host validates every node with this function before it calls
 * supports_op, so supports_op only has to answer "can this device do it"
 * (dtypes, sizes, parameters its kernels handle). Calling it again inside
 * supports_op is cheap and keeps a plugin safe under a 1.0 host, which did
 * not validate. A node that passes may be computed without any further
 * shape test: every size is >= 1, every stride usable, every byte span far
 * from overflow (under 2^60 bytes, 2^48 elements per tensor).
 *
 * What is NOT checked: tensor locations (buffer, offset, data), whether
 * views of one storage overlap, and what a device implements.
 *
 * Header-only, C99; includes <stdarg.h>, <stdio.h> and tessera/plugin_util.h.
 */
#ifndef TESSERA_PLUGIN_CHECK_H
#define TESSERA_PLUGIN_CHECK_H

#include <stdarg.h>
#include <stdio.h>

#include "plugin_util.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TSR_CHECK_PRINTF_ __attribute__((format(printf, 2, 3)))
#define TSR_CHECK_PRINTF4_ __attribute__((format(printf, 4, 5)))
#else
#define TSR_CHECK_PRINTF_
#define TSR_CHECK_PRINTF4_
#endif

/* Largest element count ref accepts for one tensor (2^48): keeps every
 * index and byte offset computation far from int64 overflow. */
#define TSR_CHECK_MAX_ELEMENTS (INT64_C(1) << 48)
#define TSR_CHECK_MAX_SPAN (INT64_C(1) << 60)

typedef struct tsr_checker_ {
    const tsr_node *node;
    char *why;
    size_t why_size;
} tsr_checker_;

/* why[why_size] = "OP 'dst name': " + the formatted text; why may be NULL. */
static inline void tsr_node_vwhy_(const tsr_node *node, char *why, size_t why_size, const char *fmt, va_list ap) {
    if (!why || why_size == 0) return;
    int n = snprintf(why, why_size, "%s '%s': ", tsr_op_name(node->op),
                     node->dst && node->dst->name ? node->dst->name : "");
    if (n < 0 || (size_t)n >= why_size) return;
    vsnprintf(why + n, why_size - (size_t)n, fmt, ap);
}

/* For supports_op: write why this device declines node into why[why_size]
 * ("OP 'dst name': ...", in the checker's form; why may be NULL) and
 * return 0, so each refusal reads as one line:
 *     if (w->dtype == TSR_DTYPE_IQ2_XS)
 *         return tsr_node_decline(node, why, why_size, "IQ2_XS weights are not implemented");
 * then hand why to the host with tsr_host_decline. */
TSR_CHECK_PRINTF4_ static inline int tsr_node_decline(const tsr_node *node, char *why, size_t why_size,
                                                      const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tsr_node_vwhy_(node, why, why_size, fmt, ap);
    va_end(ap);
    return 0;
}

static inline int tsr_node_check(const tsr_node *node, char *why, size_t why_size);

/* For supports_op: 1 if node is well-formed (tsr_node_check) and every
 * tensor of it (dst, then the sources) passes the device's own test
 * `problem` (NULL: fine, else what is wrong, e.g. "has a stride the kernels
 * cannot load"); else 0 with why = the checker's reason or "OP 'name':
 * src1 (F16) has a stride the kernels cannot load". */
static inline int tsr_node_fits(const tsr_node *node, const char *(*problem)(const tsr_tensor *t), char *why,
                                size_t why_size) {
    static const char *const roles[1 + TSR_MAX_SRC] = {"dst", "src0", "src1", "src2", "src3"};
    if (tsr_node_check(node, why, why_size)) return 0;
    for (int i = 0; i <= node->n_src && i <= TSR_MAX_SRC; i++) {
        const tsr_tensor *t = i == 0 ? node->dst : node->src[i - 1];
        const char *p = t ? problem(t) : NULL;
        if (p) return tsr_node_decline(node, why, why_size, "%s (%s) %s", roles[i], tsr_dtype_name(t->dtype), p);
    }
    return 1;
}

/* Give the host the reason supports_op declines node (ABI 1.1
 * tsr_host.decline; nothing under a 1.0 host or with an empty reason).
 * Call it only from supports_op, with the node it was given. */
static inline void tsr_host_decline(const tsr_host *host, const tsr_node *node, const char *why) {
    if (host && why && why[0] && TSR_HAS_FIELD(tsr_host, host->struct_size, decline) && host->decline)
        host->decline(node, why);
}

/* Record the reason (prefixed with the op and node name) and return -1. */
TSR_CHECK_PRINTF_ static inline int tsr_chk_fail_(tsr_checker_ *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tsr_node_vwhy_(c->node, c->why, c->why_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* Geometry every tensor must have: positive sizes, sane strides, whole
 * blocks with contiguous blocks along ne[0]. */
static inline int tsr_chk_tensor_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    if (!t) return tsr_chk_fail_(c, "%s is missing", role);
    if (!tsr_dtype_traits_get(t->dtype)) return tsr_chk_fail_(c, "%s has unknown dtype %d", role, (int)t->dtype);
    int64_t n = 1;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (t->ne[d] < 1) return tsr_chk_fail_(c, "%s ne[%d] = %lld (must be >= 1)", role, d, (long long)t->ne[d]);
        if (t->ne[d] > TSR_CHECK_MAX_ELEMENTS / n) return tsr_chk_fail_(c, "%s has too many elements", role);
        n *= t->ne[d];
        if (t->ne[d] > 1 && (t->nb[d] <= 0 || t->nb[d] > TSR_CHECK_MAX_ELEMENTS))
            return tsr_chk_fail_(c, "%s nb[%d] = %lld is not a usable stride", role, d, (long long)t->nb[d]);
    }
    const int64_t bs = tsr_dtype_traits_get(t->dtype)->block_size;
    if (bs > 1) {
        if (t->ne[0] % bs)
            return tsr_chk_fail_(c, "%s %s ne[0] = %lld is not a multiple of the block size %lld", role,
                        tsr_dtype_name(t->dtype), (long long)t->ne[0], (long long)bs);
        if (t->nb[0] != tsr_dtype_traits_get(t->dtype)->block_bytes)
            return tsr_chk_fail_(c, "%s %s blocks are not contiguous along ne[0] (nb[0] = %lld)", role,
                        tsr_dtype_name(t->dtype), (long long)t->nb[0]);
    }
    /* The byte span (the last element's offset) must stay far from overflow. */
    int64_t span = 0;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        const int64_t steps = (d == 0 && bs > 1 ? t->ne[0] / bs : t->ne[d]) - 1;
        if (steps <= 0) continue;
        if (t->nb[d] > TSR_CHECK_MAX_SPAN / steps || steps * t->nb[d] > TSR_CHECK_MAX_SPAN - span)
            return tsr_chk_fail_(c, "%s spans more than 2^60 bytes", role);
        span += steps * t->nb[d];
    }
    return 0;
}

static inline int tsr_chk_float_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    if (tsr_chk_tensor_(c, t, role)) return -1;
    if (!tsr_dtype_is_float(t->dtype))
        return tsr_chk_fail_(c, "%s dtype %s is not F32, F16 or BF16", role, tsr_dtype_name(t->dtype));
    return 0;
}

static inline int tsr_chk_f32_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    if (tsr_chk_tensor_(c, t, role)) return -1;
    if (t->dtype != TSR_DTYPE_F32) return tsr_chk_fail_(c, "%s dtype %s is not F32", role, tsr_dtype_name(t->dtype));
    return 0;
}

static inline int tsr_chk_readable_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    /* any known dtype: which ones a device reads is its own business */
    return tsr_chk_tensor_(c, t, role);
}

static inline int tsr_chk_i32_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    if (tsr_chk_tensor_(c, t, role)) return -1;
    if (t->dtype != TSR_DTYPE_I32) return tsr_chk_fail_(c, "%s dtype %s is not I32", role, tsr_dtype_name(t->dtype));
    return 0;
}

static inline int tsr_chk_shape_(tsr_checker_ *c, const tsr_tensor *t, const char *role, int64_t n0, int64_t n1,
                       int64_t n2, int64_t n3) {
    if (t->ne[0] != n0 || t->ne[1] != n1 || t->ne[2] != n2 || t->ne[3] != n3)
        return tsr_chk_fail_(c, "%s is [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, %lld]", role,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                    (long long)n0, (long long)n1, (long long)n2, (long long)n3);
    return 0;
}

static inline int tsr_chk_same_shape_(tsr_checker_ *c, const tsr_tensor *t, const char *role, const tsr_tensor *like) {
    return tsr_chk_shape_(c, t, role, like->ne[0], like->ne[1], like->ne[2], like->ne[3]);
}

/* n_src within the op's TSR_OPS range, the required sources present. */
static inline int tsr_chk_n_src_(tsr_checker_ *c) {
    const tsr_op_traits *op = tsr_op_traits_get(c->node->op);
    const int lo = op->min_src, hi = op->max_src;
    int32_t n = c->node->n_src;
    if (n < lo || n > hi) return tsr_chk_fail_(c, "has %d sources, expected %d..%d", (int)n, lo, hi);
    for (int i = 0; i < lo; i++)
        if (!c->node->src[i]) return tsr_chk_fail_(c, "src%d is missing", i);
    return 0;
}

/* src[i] if present (optional sources may be NULL or beyond n_src). */
static inline const tsr_tensor *tsr_chk_opt_src_(const tsr_node *node, int i) {
    return i < node->n_src ? node->src[i] : NULL;
}

/* --------------------------------------------------------- per op checks */

static inline int tsr_chk_get_rows_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *rows = n->src[1], *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_readable_(c, a, "src0") || tsr_chk_i32_(c, rows, "src1 (rows)") ||
        tsr_chk_float_(c, dst, "dst"))
        return -1;
    /* a [n, r, b2, b3], rows [m, b2, b3] -> dst [n, m, b2, b3] */
    if (rows->ne[3] != 1) return tsr_chk_fail_(c, "src1 (rows) must have ne[3] = 1");
    if (rows->ne[1] != a->ne[2] || rows->ne[2] != a->ne[3])
        return tsr_chk_fail_(c, "src1 (rows) batch dims [%lld, %lld] differ from src0's [%lld, %lld]",
                    (long long)rows->ne[1], (long long)rows->ne[2], (long long)a->ne[2],
                    (long long)a->ne[3]);
    return tsr_chk_shape_(c, dst, "dst", a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2]);
}

static inline int tsr_chk_binary_broadcast_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_float_(c, b, "src1") ||
        tsr_chk_float_(c, dst, "dst") || tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->ne[d] % b->ne[d])
            return tsr_chk_fail_(c, "src1 ne[%d] = %lld does not divide src0 ne[%d] = %lld", d,
                        (long long)b->ne[d], d, (long long)a->ne[d]);
    return 0;
}

static inline int tsr_chk_unary_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_float_(c, dst, "dst") ||
        tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    return 0;
}

static inline int tsr_chk_norm_(tsr_checker_ *c) {
    const float eps = tsr_norm_params_of(c->node).eps;
    if (!(eps >= 0.0f && eps <= 3.0e38f)) return tsr_chk_fail_(c, "eps = %g is not finite and >= 0", (double)eps);
    return tsr_chk_unary_(c);
}

static inline int tsr_chk_swiglu_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_float_(c, b, "src1") ||
        tsr_chk_float_(c, dst, "dst") || tsr_chk_same_shape_(c, b, "src1", a) ||
        tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    return 0;
}

static inline int tsr_chk_swiglu_oai_(tsr_checker_ *c) {
    const tsr_swiglu_oai_params p = tsr_swiglu_oai_params_of(c->node);
    if (!(p.alpha > 0.0f && p.alpha <= 3.0e38f))
        return tsr_chk_fail_(c, "alpha = %g is not finite and > 0", (double)p.alpha);
    if (!(p.limit > 0.0f && p.limit <= 3.0e38f))
        return tsr_chk_fail_(c, "limit = %g is not finite and > 0", (double)p.limit);
    /* all F32, as plugin.h states (SWIGLU also takes F16 and BF16) */
    const tsr_tensor *a = c->node->src[0], *b = c->node->src[1], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, a, "src0") || tsr_chk_f32_(c, b, "src1") || tsr_chk_f32_(c, dst, "dst") ||
        tsr_chk_same_shape_(c, b, "src1", a) || tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    return 0;
}

static inline int tsr_chk_mul_mat_(tsr_checker_ *c) {
    const tsr_tensor *w = c->node->src[0], *x = c->node->src[1], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_readable_(c, w, "src0 (weights)") || tsr_chk_float_(c, x, "src1") ||
        tsr_chk_float_(c, dst, "dst"))
        return -1;
    /* w [K, M, B2/r2, B3/r3], x [K, N, B2, B3] -> dst [M, N, B2, B3] */
    if (w->ne[0] != x->ne[0])
        return tsr_chk_fail_(c, "src0 ne[0] = %lld differs from src1 ne[0] = %lld", (long long)w->ne[0],
                    (long long)x->ne[0]);
    if (x->ne[2] % w->ne[2] || x->ne[3] % w->ne[3])
        return tsr_chk_fail_(c, "src0 batch dims [%lld, %lld] do not divide src1's [%lld, %lld]",
                    (long long)w->ne[2], (long long)w->ne[3], (long long)x->ne[2], (long long)x->ne[3]);
    return tsr_chk_shape_(c, dst, "dst", w->ne[1], x->ne[1], x->ne[2], x->ne[3]);
}

static inline int tsr_chk_rope_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *pos = n->src[1], *ff = tsr_chk_opt_src_(n, 2), *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_i32_(c, pos, "src1 (positions)") ||
        tsr_chk_float_(c, dst, "dst") || tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    const tsr_rope_params p = tsr_rope_params_of(n);
    const int32_t n_dims = p.n_dims, mode = p.mode;
    if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0])
        return tsr_chk_fail_(c, "n_dims = %d must be even and in 2..head_dim (%lld)", (int)n_dims,
                    (long long)a->ne[0]);
    if (mode != TSR_ROPE_NORMAL && mode != TSR_ROPE_NEOX)
        return tsr_chk_fail_(c, "mode %d is neither normal (0) nor NeoX (2)", (int)mode);
    /* a [head_dim, n_head, n_tokens, b3], positions [n_tokens] */
    if (tsr_tensor_nelements(pos) != a->ne[2] || pos->ne[0] != a->ne[2])
        return tsr_chk_fail_(c, "src1 (positions) has %lld entries for %lld tokens", (long long)pos->ne[0],
                    (long long)a->ne[2]);
    if (ff) {
        if (tsr_chk_f32_(c, ff, "src2 (freq factors)")) return -1;
        if (ff->ne[0] < n_dims / 2)
            return tsr_chk_fail_(c, "src2 (freq factors) has %lld entries, needs n_dims/2 = %d",
                        (long long)ff->ne[0], (int)(n_dims / 2));
    }
    return 0;
}

static inline int tsr_chk_soft_max_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *mask = tsr_chk_opt_src_(n, 1), *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_float_(c, dst, "dst") ||
        tsr_chk_same_shape_(c, dst, "dst", a))
        return -1;
    if (mask) {
        if (tsr_chk_tensor_(c, mask, "src1 (mask)")) return -1;
        if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16)
            return tsr_chk_fail_(c, "src1 (mask) dtype %s is not F32 or F16", tsr_dtype_name(mask->dtype));
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1])
            return tsr_chk_fail_(c, "src1 (mask) is [%lld, %lld], needs [%lld, >= %lld]",
                        (long long)mask->ne[0], (long long)mask->ne[1], (long long)a->ne[0],
                        (long long)a->ne[1]);
        if (a->ne[2] % mask->ne[2] || a->ne[3] % mask->ne[3])
            return tsr_chk_fail_(c, "src1 (mask) ne[2..3] = [%lld, %lld] do not divide src0's [%lld, %lld]",
                        (long long)mask->ne[2], (long long)mask->ne[3], (long long)a->ne[2],
                        (long long)a->ne[3]);
    }
    return 0;
}

static inline int tsr_chk_cpy_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_readable_(c, a, "src0") || tsr_chk_tensor_(c, dst, "dst")) return -1;
    const int a_float = tsr_dtype_is_float(a->dtype), a_quant = tsr_dtype_is_quantized(a->dtype);
    if (!a_float && !a_quant)
        return tsr_chk_fail_(c, "src0 dtype %s cannot be converted", tsr_dtype_name(a->dtype));
    if (tsr_dtype_is_float(dst->dtype)) {
        /* any float or quantized source into F32; quantized into F16/BF16 too */
    } else if (tsr_dtype_is_quantized(dst->dtype)) {
        if (!a_float)
            return tsr_chk_fail_(c, "%s to %s: only F32/F16/BF16 can be quantized", tsr_dtype_name(a->dtype),
                        tsr_dtype_name(dst->dtype));
    } else {
        return tsr_chk_fail_(c, "dst dtype %s is not supported", tsr_dtype_name(dst->dtype));
    }
    if (tsr_tensor_nelements(a) != tsr_tensor_nelements(dst))
        return tsr_chk_fail_(c, "src0 has %lld elements, dst %lld", (long long)tsr_tensor_nelements(a),
                    (long long)tsr_tensor_nelements(dst));
    return 0;
}

static inline int tsr_chk_concat_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *a = n->src[0], *b = n->src[1], *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_float_(c, b, "src1") ||
        tsr_chk_float_(c, dst, "dst"))
        return -1;
    const int32_t dim = tsr_concat_params_of(n).dim;
    if (dim < 0 || dim >= TSR_MAX_DIMS) return tsr_chk_fail_(c, "dimension %d is not 0..3", (int)dim);
    int64_t want[TSR_MAX_DIMS];
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (d != dim && a->ne[d] != b->ne[d])
            return tsr_chk_fail_(c, "src0 and src1 differ in ne[%d] (%lld vs %lld)", d, (long long)a->ne[d],
                        (long long)b->ne[d]);
        want[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
    }
    return tsr_chk_shape_(c, dst, "dst", want[0], want[1], want[2], want[3]);
}

static inline int tsr_chk_argmax_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, a, "src0") || tsr_chk_i32_(c, dst, "dst")) return -1;
    int64_t rows = a->ne[1] * a->ne[2] * a->ne[3];
    if (tsr_tensor_nelements(dst) != rows)
        return tsr_chk_fail_(c, "dst has %lld elements for %lld rows", (long long)tsr_tensor_nelements(dst),
                    (long long)rows);
    return 0;
}

/* FLASH_ATTN k/v dtypes: F32, F16, BF16 (ABI 1.1) and, from ABI 1.2, the
 * 32-element block types a quantized KV cache uses (Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL). */
static inline int tsr_flash_attn_kv_dtype(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: case TSR_DTYPE_F16: case TSR_DTYPE_BF16: case TSR_DTYPE_Q8_0:
    case TSR_DTYPE_Q4_0: case TSR_DTYPE_Q4_1: case TSR_DTYPE_Q5_0: case TSR_DTYPE_Q5_1:
    case TSR_DTYPE_IQ4_NL: return 1;
    default: return 0;
    }
}

static inline int tsr_chk_kv_(tsr_checker_ *c, const tsr_tensor *t, const char *role) {
    if (tsr_chk_tensor_(c, t, role)) return -1;
    if (!tsr_flash_attn_kv_dtype(t->dtype))
        return tsr_chk_fail_(c, "%s dtype %s is not F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL", role,
                             tsr_dtype_name(t->dtype));
    return 0;
}

static inline int tsr_chk_flash_attn_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *q = n->src[0], *k = n->src[1], *v = n->src[2], *mask = tsr_chk_opt_src_(n, 3);
    const tsr_tensor *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_float_(c, q, "src0 (q)") || tsr_chk_kv_(c, k, "src1 (k)") ||
        tsr_chk_kv_(c, v, "src2 (v)") || tsr_chk_f32_(c, dst, "dst"))
        return -1;
    /* q [D, n_q, H, 1], k/v [D, n_kv, H_kv, 1] -> dst [D, H, n_q, 1] */
    int64_t D = q->ne[0], n_q = q->ne[1], H = q->ne[2];
    if (q->ne[3] != 1) return tsr_chk_fail_(c, "src0 (q) must have ne[3] = 1");
    if (tsr_chk_shape_(c, k, "src1 (k)", D, k->ne[1], k->ne[2], 1) ||
        tsr_chk_same_shape_(c, v, "src2 (v)", k))
        return -1;
    if (H % k->ne[2])
        return tsr_chk_fail_(c, "%lld query heads are not a multiple of %lld kv heads", (long long)H,
                    (long long)k->ne[2]);
    const tsr_flash_attn_params fa = tsr_flash_attn_params_of(n);
    if (fa.max_bias != 0.0f || fa.softcap != 0.0f)
        return tsr_chk_fail_(c, "max_bias = %g and softcap = %g are reserved and must be 0", (double)fa.max_bias,
                             (double)fa.softcap);
    if (mask) {
        if (tsr_chk_tensor_(c, mask, "src3 (mask)")) return -1;
        if (mask->dtype != TSR_DTYPE_F32 && mask->dtype != TSR_DTYPE_F16)
            return tsr_chk_fail_(c, "src3 (mask) dtype %s is not F32 or F16", tsr_dtype_name(mask->dtype));
        if (mask->ne[0] != k->ne[1] || mask->ne[1] < n_q || mask->ne[2] != 1 || mask->ne[3] != 1)
            return tsr_chk_fail_(c, "src3 (mask) is [%lld, %lld, %lld, %lld], needs [%lld, >= %lld, 1, 1]",
                        (long long)mask->ne[0], (long long)mask->ne[1], (long long)mask->ne[2],
                        (long long)mask->ne[3], (long long)k->ne[1], (long long)n_q);
    }
    return tsr_chk_shape_(c, dst, "dst", D, H, n_q, 1);
}

/* ABI 1.4: experts [K, N, E], activations [K, n_b, T], ids [n_used, T]
 * -> dst [N, n_used, T]; n_b is 1 or n_used. The ids' values are data:
 * each backend checks them when it reads them (plugin.h). */
static inline int tsr_chk_mul_mat_id_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *w = n->src[0], *x = n->src[1], *ids = n->src[2], *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_readable_(c, w, "src0 (experts)") || tsr_chk_f32_(c, x, "src1") ||
        tsr_chk_i32_(c, ids, "src2 (ids)") || tsr_chk_f32_(c, dst, "dst"))
        return -1;
    if (!tsr_dtype_is_float(w->dtype) && !tsr_dtype_is_quantized(w->dtype))
        return tsr_chk_fail_(c, "src0 (experts) dtype %s is not a weight type", tsr_dtype_name(w->dtype));
    if (w->ne[3] != 1 || x->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1)
        return tsr_chk_fail_(c, "src0 (experts) must be [K, N, E], src1 [K, n_b, T], src2 (ids) [n_used, T]");
    if (w->ne[0] != x->ne[0])
        return tsr_chk_fail_(c, "src0 (experts) ne[0] = %lld differs from src1 ne[0] = %lld", (long long)w->ne[0],
                             (long long)x->ne[0]);
    const int64_t n_used = ids->ne[0], T = ids->ne[1];
    if (x->ne[2] != T)
        return tsr_chk_fail_(c, "src1 has %lld tokens (ne[2]), src2 (ids) %lld (ne[1])", (long long)x->ne[2],
                             (long long)T);
    if (x->ne[1] != 1 && x->ne[1] != n_used)
        return tsr_chk_fail_(c, "src1 ne[1] = %lld is neither 1 nor the %lld experts used per token",
                             (long long)x->ne[1], (long long)n_used);
    return tsr_chk_shape_(c, dst, "dst", w->ne[1], n_used, T, 1);
}

/* ABI 1.4: src0 F32 [n, r, b2, b3] -> dst I32 [k, r, b2, b3], 1 <= k <= n. */
static inline int tsr_chk_top_k_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, a, "src0") || tsr_chk_i32_(c, dst, "dst")) return -1;
    if (dst->ne[0] > a->ne[0])
        return tsr_chk_fail_(c, "k = %lld (dst ne[0]) is more than the %lld elements of a row",
                             (long long)dst->ne[0], (long long)a->ne[0]);
    return tsr_chk_shape_(c, dst, "dst", dst->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

/* ABI 1.4: src0 F32 [n, r, b2, b3] -> dst F32 [1, r, b2, b3]. */
static inline int tsr_chk_sum_rows_(tsr_checker_ *c) {
    const tsr_tensor *a = c->node->src[0], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, a, "src0") || tsr_chk_f32_(c, dst, "dst")) return -1;
    return tsr_chk_shape_(c, dst, "dst", 1, a->ne[1], a->ne[2], a->ne[3]);
}

/* SSM_CONV (ABI 1.4): sx [K - 1 + T, C, S, 1], w [K, C, 1, 1] -> dst [C, T, S, 1]. */
static inline int tsr_chk_ssm_conv_(tsr_checker_ *c) {
    const tsr_tensor *sx = c->node->src[0], *w = c->node->src[1], *dst = c->node->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, sx, "src0 (sx)") || tsr_chk_f32_(c, w, "src1 (kernel)") ||
        tsr_chk_f32_(c, dst, "dst"))
        return -1;
    const int64_t K = w->ne[0], C = w->ne[1];
    if (w->ne[2] != 1 || w->ne[3] != 1) return tsr_chk_fail_(c, "src1 (kernel) must be [K, C, 1, 1]");
    if (sx->ne[3] != 1) return tsr_chk_fail_(c, "src0 (sx) must have ne[3] = 1");
    if (sx->ne[1] != C)
        return tsr_chk_fail_(c, "src0 (sx) has %lld channels, the kernel %lld", (long long)sx->ne[1], (long long)C);
    if (sx->ne[0] < K)
        return tsr_chk_fail_(c, "src0 (sx) holds %lld steps, fewer than the kernel's %lld", (long long)sx->ne[0],
                             (long long)K);
    return tsr_chk_shape_(c, dst, "dst", C, sx->ne[0] - K + 1, sx->ne[2], 1);
}

/* SSM_SCAN (ABI 1.4): state [N, P, H, S], xBC [P*H + 2*G*N, T, S, 1], dt [H, T, S, 1],
 * A [H] or [1, H] -> dst [P*H*T*S + N*P*H*S, 1, 1, 1]. */
static inline int tsr_chk_ssm_scan_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *s = n->src[0], *xbc = n->src[1], *dt = n->src[2], *a = n->src[3], *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, s, "src0 (state)") || tsr_chk_f32_(c, xbc, "src1 (xBC)") ||
        tsr_chk_f32_(c, dt, "src2 (dt)") || tsr_chk_f32_(c, a, "src3 (A)") || tsr_chk_f32_(c, dst, "dst"))
        return -1;
    const int64_t N = s->ne[0], P = s->ne[1], H = s->ne[2], S = s->ne[3], T = xbc->ne[1];
    if (xbc->ne[2] != S || xbc->ne[3] != 1)
        return tsr_chk_fail_(c, "src1 (xBC) is [%lld, %lld, %lld, %lld], needs [_, T, %lld, 1]",
                             (long long)xbc->ne[0], (long long)xbc->ne[1], (long long)xbc->ne[2],
                             (long long)xbc->ne[3], (long long)S);
    const int64_t bc = xbc->ne[0] - P * H;
    if (bc < 2 * N || bc % (2 * N))
        return tsr_chk_fail_(c, "src1 (xBC) rows of %lld are not P*H = %lld plus whole groups of 2*N = %lld",
                             (long long)xbc->ne[0], (long long)(P * H), (long long)(2 * N));
    const int64_t G = bc / (2 * N);
    if (H % G) return tsr_chk_fail_(c, "%lld heads are not a multiple of %lld groups", (long long)H, (long long)G);
    if (tsr_chk_shape_(c, dt, "src2 (dt)", H, T, S, 1)) return -1;
    if (tsr_tensor_nelements(a) != H || (a->ne[0] != H && a->ne[1] != H))
        return tsr_chk_fail_(c, "src3 (A) is [%lld, %lld, %lld, %lld], needs [%lld] or [1, %lld]",
                             (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3],
                             (long long)H, (long long)H);
    return tsr_chk_shape_(c, dst, "dst", P * H * T * S + N * P * H * S, 1, 1, 1);
}

/* DELTA_NET (ABI 1.5): state [Dv, Dk, H, S], qkv [2*Hk*Dk + H*Dv, T, S, 1],
 * gates [H, 2, T, S], A [H] or [1, H] -> dst [Dv*H*T*S + Dv*Dk*H*S, 1, 1, 1];
 * eps > 0 and finite scale, kv_tiled 0 or 1. */
static inline int tsr_chk_delta_net_(tsr_checker_ *c) {
    const tsr_node *n = c->node;
    const tsr_tensor *s = n->src[0], *qkv = n->src[1], *gt = n->src[2], *a = n->src[3], *dst = n->dst;
    if (tsr_chk_n_src_(c) || tsr_chk_f32_(c, s, "src0 (state)") || tsr_chk_f32_(c, qkv, "src1 (qkv)") ||
        tsr_chk_f32_(c, gt, "src2 (gates)") || tsr_chk_f32_(c, a, "src3 (A)") || tsr_chk_f32_(c, dst, "dst"))
        return -1;
    const int64_t Dv = s->ne[0], Dk = s->ne[1], H = s->ne[2], S = s->ne[3], T = qkv->ne[1];
    if (qkv->ne[2] != S || qkv->ne[3] != 1)
        return tsr_chk_fail_(c, "src1 (qkv) is [%lld, %lld, %lld, %lld], needs [_, T, %lld, 1]",
                             (long long)qkv->ne[0], (long long)qkv->ne[1], (long long)qkv->ne[2],
                             (long long)qkv->ne[3], (long long)S);
    const int64_t qk = qkv->ne[0] - H * Dv;
    if (qk < 2 * Dk || qk % (2 * Dk))
        return tsr_chk_fail_(c, "src1 (qkv) rows of %lld are not H*Dv = %lld plus whole q/k heads of 2*Dk = %lld",
                             (long long)qkv->ne[0], (long long)(H * Dv), (long long)(2 * Dk));
    const int64_t Hk = qk / (2 * Dk);
    if (H % Hk)
        return tsr_chk_fail_(c, "%lld v heads are not a multiple of %lld q/k heads", (long long)H, (long long)Hk);
    if (tsr_chk_shape_(c, gt, "src2 (gates)", H, 2, T, S)) return -1;
    if (tsr_tensor_nelements(a) != H || (a->ne[0] != H && a->ne[1] != H))
        return tsr_chk_fail_(c, "src3 (A) is [%lld, %lld, %lld, %lld], needs [%lld] or [1, %lld]",
                             (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3],
                             (long long)H, (long long)H);
    const tsr_delta_net_params p = tsr_delta_net_params_of(n);
    if (!(p.eps > 0.0f) || !(p.eps < 1.0f) || !(p.scale == p.scale) || p.scale - p.scale != 0.0f)
        return tsr_chk_fail_(c, "eps %g must be in (0, 1) and scale %g finite", (double)p.eps, (double)p.scale);
    if (p.kv_tiled != 0 && p.kv_tiled != 1) return tsr_chk_fail_(c, "kv_tiled %d is not 0 or 1", (int)p.kv_tiled);
    for (int i = 1; i < TSR_MAX_PARAMS; i++)
        if (n->iparams[i] || (i > 1 && n->fparams[i] != 0.0f))
            return tsr_chk_fail_(c, "parameter slot %d is not used by DELTA_NET and must be 0", i);
    return tsr_chk_shape_(c, dst, "dst", Dv * H * T * S + Dv * Dk * H * S, 1, 1, 1);
}

/* 0 if the node is well-formed, else -1 with a one-line reason in
 * why[why_size] ("OP 'dst name': what is wrong"); why may be NULL. */
static inline int tsr_node_check(const tsr_node *node, char *why, size_t why_size) {
    tsr_checker_ c = {node, why, why_size};
    if (why && why_size) why[0] = '\0';
    if (!node) {
        if (why && why_size) snprintf(why, why_size, "node is NULL");
        return -1;
    }
    if (node->n_src < 0 || node->n_src > TSR_MAX_SRC)
        return tsr_chk_fail_(&c, "n_src = %d is not 0..%d", (int)node->n_src, TSR_MAX_SRC);
    if (!node->dst) return tsr_chk_fail_(&c, "dst is missing");
    switch (node->op) {
    case TSR_OP_GET_ROWS: return tsr_chk_get_rows_(&c);
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_DIV: return tsr_chk_binary_broadcast_(&c);
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM: return tsr_chk_norm_(&c);
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF: return tsr_chk_unary_(&c);
    case TSR_OP_MUL_MAT: return tsr_chk_mul_mat_(&c);
    case TSR_OP_ROPE: return tsr_chk_rope_(&c);
    case TSR_OP_SOFT_MAX: return tsr_chk_soft_max_(&c);
    case TSR_OP_SWIGLU: return tsr_chk_swiglu_(&c);
    case TSR_OP_SWIGLU_OAI: return tsr_chk_swiglu_oai_(&c);
    case TSR_OP_CPY: return tsr_chk_cpy_(&c);
    case TSR_OP_CONCAT: return tsr_chk_concat_(&c);
    case TSR_OP_ARGMAX: return tsr_chk_argmax_(&c);
    case TSR_OP_FLASH_ATTN: return tsr_chk_flash_attn_(&c);
    case TSR_OP_MUL_MAT_ID: return tsr_chk_mul_mat_id_(&c);
    case TSR_OP_TOP_K: return tsr_chk_top_k_(&c);
    case TSR_OP_SUM_ROWS: return tsr_chk_sum_rows_(&c);
    case TSR_OP_SSM_CONV: return tsr_chk_ssm_conv_(&c);
    case TSR_OP_SSM_SCAN: return tsr_chk_ssm_scan_(&c);
    case TSR_OP_DELTA_NET: return tsr_chk_delta_net_(&c);
    default: return tsr_chk_fail_(&c, "op %d is not a computable op", (int)node->op);
    }
}

#undef TSR_CHECK_PRINTF_
#undef TSR_CHECK_PRINTF4_

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_PLUGIN_CHECK_H */
