/*
 * ref_check — can ref compute a node? Well-formedness is the ABI's own
 * checker (tessera/plugin_check.h, the op list of tessera/plugin.h as
 * code); what is left here is what ref implements: the dtypes it reads
 * and the ones it quantizes into.
 */
#include <stdarg.h>
#include <stdio.h>

#include <tessera/plugin_check.h>

#include "ref/ref.h"
#include "ref/ref_internal.h"
#include "tensor/dtype.h"

const char *ref_op_name(int32_t op) { return tsr_op_name(op); }

const char *ref_node_label(const tsr_node *node) {
    if (node->dst && node->dst->name && node->dst->name[0]) return node->dst->name;
    return ref_op_name(node->op);
}

__attribute__((format(printf, 4, 5))) static int fail(const tsr_node *node, char *why, size_t why_size,
                                                      const char *fmt, ...) {
    if (!why || !why_size) return -1;
    int n = snprintf(why, why_size, "%s '%s': ", ref_op_name(node->op), node->dst->name ? node->dst->name : "");
    if (n < 0 || (size_t)n >= why_size) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, why_size - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

int ref_node_check(const tsr_node *node, char *why, size_t why_size) {
    if (tsr_node_check(node, why, why_size)) return -1;
    const tsr_tensor *a = node->src[0], *dst = node->dst;
    switch (node->op) {
    case TSR_OP_GET_ROWS:
    case TSR_OP_MUL_MAT:
    case TSR_OP_MUL_MAT_ID:
    case TSR_OP_CPY:
        if (!ref_dtype_is_readable(a->dtype))
            return fail(node, why, why_size, "src0 dtype %s is not supported", dtype_name(a->dtype));
        if (node->op == TSR_OP_CPY && !ref_dtype_is_float(dst->dtype) && !ref_dtype_can_quantize(dst->dtype))
            return fail(node, why, why_size, "dst dtype %s is not supported", dtype_name(dst->dtype));
        return 0;
    default:
        return 0;
    }
}
