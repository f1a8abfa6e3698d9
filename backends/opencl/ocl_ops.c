/*
 * ocl_ops — one enqueue function per op: set the kernel's arguments and
 * launch it over the right index space. The kernels (kernels/ (*.cl files)) say what
 * each work-item computes; this file only sizes the launches and computes
 * the few per-node constants the CPU reference computes the same way
 * (ROPE's theta scale and YaRN dims, SOFT_MAX's ALiBi bases).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "ocl_internal.h"

#define MM_COLS 4 /* columns per MUL_MAT work-group, as in kernels/matmul.cl */

/* Kernel argument cursor: the first error sticks. */
typedef struct kargs {
    cl_kernel k;
    cl_uint i;
    cl_int err;
} kargs;

static void arg(kargs *a, size_t size, const void *value) {
    if (a->err == CL_SUCCESS) a->err = clSetKernelArg(a->k, a->i, size, value);
    a->i++;
}

static void arg_int(kargs *a, int32_t v) {
    cl_int x = v;
    arg(a, sizeof x, &x);
}

static void arg_float(kargs *a, float v) {
    cl_float x = v;
    arg(a, sizeof x, &x);
}

static void arg_long(kargs *a, int64_t v) {
    cl_long x = v;
    arg(a, sizeof x, &x);
}

/* The five arguments of TENSOR(x) in kernels/common.cl. */
static void arg_tensor(kargs *a, const tsr_tensor *t) {
    const ocl_buffer *b = (const ocl_buffer *)(const void *)t->buffer;
    cl_mem mem = b->mem;
    cl_ulong off = t->offset;
    cl_long4 ne, nb;
    for (int d = 0; d < 4; d++) {
        ne.s[d] = t->ne[d];
        nb.s[d] = t->nb[d];
    }
    arg(a, sizeof mem, &mem);
    arg(a, sizeof off, &off);
    arg(a, sizeof ne, &ne);
    arg(a, sizeof nb, &nb);
    arg_int(a, t->dtype);
}

static tsr_status launch(ocl_device *d, cl_command_queue cq, const tsr_node *node, kargs *a,
                         size_t g0, size_t g1, size_t g2, size_t l0) {
    char label[32];
    if (a->err != CL_SUCCESS) {
        ocl_log(TSR_LOG_ERROR, "%s: %s '%s': setting argument %u failed: %s",
                ocl_device_label(d, label, sizeof label), tsr_op_name(node->op),
                node->dst->name ? node->dst->name : "", (unsigned)(a->i - 1), ocl_error_name(a->err));
        return TSR_ERR_DEVICE;
    }
    size_t global[3] = {g0, g1, g2}, local[3] = {l0, 1, 1};
    if (!g0 || !g1 || !g2) return TSR_OK; /* nothing to do */
    cl_int err = clEnqueueNDRangeKernel(cq, a->k, 3, NULL, global, l0 ? local : NULL, 0, NULL, NULL);
    if (err != CL_SUCCESS) {
        ocl_log(TSR_LOG_ERROR, "%s: %s '%s': launching the kernel failed: %s",
                ocl_device_label(d, label, sizeof label), tsr_op_name(node->op),
                node->dst->name ? node->dst->name : "", ocl_error_name(err));
        return err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
                       err == CL_MEM_OBJECT_ALLOCATION_FAILURE
                   ? TSR_ERR_NO_MEMORY
                   : TSR_ERR_DEVICE;
    }
    return TSR_OK;
}

static size_t rows_of(const tsr_tensor *t) { return (size_t)(t->ne[2] * t->ne[3]); }

static tsr_status op_binary(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_BINARY], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->dst);
    arg_int(&a, n->op == TSR_OP_MUL ? 1 : n->op == TSR_OP_DIV ? 2 : 0); /* BIN_* in kernels/elementwise.cl */
    return launch(d, cq, n, &a, (size_t)n->dst->ne[0], (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_unary(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_UNARY], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->dst);
    /* UN_* in kernels/elementwise.cl */
    arg_int(&a, n->op == TSR_OP_SCALE ? 0 : n->op == TSR_OP_SILU ? 1 : n->op == TSR_OP_GELU ? 2 : 3);
    const tsr_scale_params sp = tsr_scale_params_of(n); /* SCALE's; the others ignore them */
    arg_float(&a, sp.scale);
    arg_float(&a, sp.bias);
    return launch(d, cq, n, &a, (size_t)n->dst->ne[0], (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_swiglu(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_SWIGLU], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->dst);
    return launch(d, cq, n, &a, (size_t)n->dst->ne[0], (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_swiglu_oai(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_SWIGLU_OAI], 0, CL_SUCCESS};
    const tsr_swiglu_oai_params p = tsr_swiglu_oai_params_of(n);
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->dst);
    arg_float(&a, p.alpha);
    arg_float(&a, p.limit);
    return launch(d, cq, n, &a, (size_t)n->dst->ne[0], (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_concat(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_CONCAT], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->dst);
    arg_int(&a, tsr_concat_params_of(n).dim);
    return launch(d, cq, n, &a, (size_t)n->dst->ne[0], (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_get_rows(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    bool quant = ocl_dtype_is_quant(n->src[0]->dtype);
    kargs a = {d->kernels[quant ? OCL_K_GET_ROWS_QUANT : OCL_K_GET_ROWS_FLOAT], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->dst);
    size_t g0 = (size_t)(quant ? n->dst->ne[0] / 32 : n->dst->ne[0]);
    return launch(d, cq, n, &a, g0, (size_t)n->dst->ne[1], rows_of(n->dst), 0);
}

static tsr_status op_cpy(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *src = n->src[0], *dst = n->dst;
    if (ocl_dtype_is_kv_block(dst->dtype)) { /* one work-item per block of dst */
        kargs a = {d->kernels[OCL_K_CPY_QUANT], 0, CL_SUCCESS};
        arg_tensor(&a, src);
        arg_tensor(&a, dst);
        return launch(d, cq, n, &a, (size_t)(dst->ne[0] / 32), (size_t)dst->ne[1], rows_of(dst), 0);
    }
    bool quant = ocl_dtype_is_quant(src->dtype);
    kargs a = {d->kernels[quant ? OCL_K_CPY_DEQUANT : OCL_K_CPY_FLOAT], 0, CL_SUCCESS};
    arg_tensor(&a, src);
    arg_tensor(&a, n->dst);
    size_t g0 = (size_t)(quant ? src->ne[0] / 32 : src->ne[0]);
    return launch(d, cq, n, &a, g0, (size_t)src->ne[1], rows_of(src), 0);
}

static tsr_status op_argmax(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_ARGMAX], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->dst);
    return launch(d, cq, n, &a, (size_t)d->wg, (size_t)n->src[0]->ne[1], rows_of(n->src[0]),
                  (size_t)d->wg);
}

static tsr_status op_norm(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    kargs a = {d->kernels[OCL_K_NORM], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->dst);
    arg_float(&a, tsr_norm_params_of(n).eps);
    arg_int(&a, n->op == TSR_OP_RMS_NORM);
    return launch(d, cq, n, &a, (size_t)d->wg, (size_t)n->src[0]->ne[1], rows_of(n->src[0]),
                  (size_t)d->wg);
}

/* ALiBi's bases as ggml defines them (tsr_soft_max_params_of). */
static tsr_status op_soft_max(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *x = n->src[0], *mask = n->n_src > 1 ? n->src[1] : NULL;
    const tsr_soft_max_params sm = tsr_soft_max_params_of(n);
    kargs a = {d->kernels[OCL_K_SOFT_MAX], 0, CL_SUCCESS};
    arg_tensor(&a, x);
    arg_tensor(&a, mask ? mask : x); /* a stand-in when there is no mask */
    arg_tensor(&a, n->dst);
    arg_int(&a, mask != NULL);
    arg_float(&a, sm.scale);
    arg_float(&a, sm.max_bias);
    arg_float(&a, sm.m0);
    arg_float(&a, sm.m1);
    arg_int(&a, (int32_t)sm.n_head_log2);
    return launch(d, cq, n, &a, (size_t)d->wg, (size_t)x->ne[1], rows_of(x), (size_t)d->wg);
}

static tsr_status op_rope(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *x = n->src[0], *ff = n->n_src > 2 ? n->src[2] : NULL;
    const tsr_rope_params rp = tsr_rope_params_of(n); /* theta scale and YaRN dims included */
    const int32_t n_dims = rp.n_dims;
    kargs a = {d->kernels[OCL_K_ROPE], 0, CL_SUCCESS};
    arg_tensor(&a, x);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, ff ? ff : n->src[1]); /* a stand-in when there are no factors */
    arg_tensor(&a, n->dst);
    arg_int(&a, ff != NULL);
    arg_int(&a, n_dims);
    arg_int(&a, rp.mode == TSR_ROPE_NEOX);
    arg_float(&a, rp.theta_scale);
    arg_float(&a, rp.freq_scale);
    arg_float(&a, rp.ext_factor);
    arg_float(&a, rp.attn_factor);
    arg_float(&a, rp.corr_dims[0]);
    arg_float(&a, rp.corr_dims[1]);
    size_t g0 = (size_t)(n_dims / 2 + (x->ne[0] - n_dims));
    return launch(d, cq, n, &a, g0, (size_t)x->ne[1], rows_of(x), 0);
}

static tsr_status op_mul_mat(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *w = n->src[0], *x = n->src[1], *dst = n->dst;
    kargs a = {d->kernels[OCL_K_MUL_MAT], 0, CL_SUCCESS};
    arg_tensor(&a, w);
    arg_tensor(&a, x);
    arg_tensor(&a, dst);
    arg_long(&a, x->ne[2] / w->ne[2]);
    arg_long(&a, x->ne[3] / w->ne[3]);
    arg_int(&a, ocl_dtype_is_quant(w->dtype));
    size_t cols = (size_t)((dst->ne[1] + MM_COLS - 1) / MM_COLS);
    return launch(d, cq, n, &a, (size_t)d->wg * (size_t)dst->ne[0], cols, rows_of(dst), (size_t)d->wg);
}

bool ocl_moe_grouped(const ocl_device *d, const tsr_node *node) {
    if (node->op != TSR_OP_MUL_MAT_ID || node->src[0]->ne[2] > OCL_MOE_MAX_EXPERTS || d->max_wg < 64) return false;
    const char *forced = getenv("TESSERA_OPENCL_MOE");
    if (forced && strcmp(forced, "grouped") == 0) return true;
    if (forced && strcmp(forced, "token") == 0) return false;
    return node->src[2]->ne[1] > OCL_MOE_MIN_TOKENS;
}

/* Prompts: the pairs listed per expert into the queue's scratch, then the
 * tiled product over the lists (kernels/moe.cl); scratch words: offsets
 * E + 1, the list, the tile count and two words per tile. */
static tsr_status op_mul_mat_id_grouped(ocl_device *d, ocl_queue *q, const tsr_node *n) {
    const tsr_tensor *w = n->src[0], *ids = n->src[2], *dst = n->dst;
    const int64_t E = w->ne[2], pairs = ids->ne[0] * ids->ne[1];
    const int64_t max_tiles = pairs / OCL_MOE_TILE + E;
    cl_mem lists = ocl_queue_scratch(q, (uint64_t)(E + 1 + pairs + 1 + 2 * max_tiles) * sizeof(cl_uint));
    if (!lists) return TSR_ERR_NO_MEMORY;
    kargs g = {d->kernels[OCL_K_MOE_GROUP], 0, CL_SUCCESS};
    arg_tensor(&g, ids);
    arg_tensor(&g, dst);
    arg(&g, sizeof lists, &lists);
    arg_long(&g, E);
    const size_t wg = (size_t)d->wg;
    tsr_status st = launch(d, q->cq, n, &g, wg, 1, 1, wg);
    if (st != TSR_OK) return st;
    kargs a = {d->kernels[OCL_K_MUL_MAT_ID_TILED], 0, CL_SUCCESS};
    arg_tensor(&a, w);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, dst);
    arg(&a, sizeof lists, &lists);
    arg_long(&a, E);
    arg_int(&a, ocl_dtype_is_quant(w->dtype));
    const size_t row_tiles = (size_t)((w->ne[1] + OCL_MOE_TILE - 1) / OCL_MOE_TILE);
    return launch(d, q->cq, n, &a, 64 * row_tiles, (size_t)max_tiles, 1, 64);
}

/* One work-group per output element (kernels/moe.cl); prompts grouped by
 * expert (ocl_moe_grouped). */
static tsr_status op_mul_mat_id(ocl_device *d, ocl_queue *q, const tsr_node *n) {
    if (ocl_moe_grouped(d, n)) return op_mul_mat_id_grouped(d, q, n);
    const tsr_tensor *w = n->src[0], *dst = n->dst;
    kargs a = {d->kernels[OCL_K_MUL_MAT_ID], 0, CL_SUCCESS};
    arg_tensor(&a, w);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->src[2]);
    arg_tensor(&a, dst);
    arg_int(&a, ocl_dtype_is_quant(w->dtype));
    return launch(d, q->cq, n, &a, (size_t)d->wg * (size_t)dst->ne[0], (size_t)dst->ne[1], (size_t)dst->ne[2],
                  (size_t)d->wg);
}

/* One work-item per element of src0 (its rank in the row). */
static tsr_status op_top_k(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *x = n->src[0];
    kargs a = {d->kernels[OCL_K_TOP_K], 0, CL_SUCCESS};
    arg_tensor(&a, x);
    arg_tensor(&a, n->dst);
    return launch(d, cq, n, &a, (size_t)x->ne[0], (size_t)x->ne[1], rows_of(x), 0);
}

/* One work-item per row. */
static tsr_status op_sum_rows(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *x = n->src[0];
    kargs a = {d->kernels[OCL_K_SUM_ROWS], 0, CL_SUCCESS};
    arg_tensor(&a, x);
    arg_tensor(&a, n->dst);
    return launch(d, cq, n, &a, 1, (size_t)x->ne[1], rows_of(x), 0);
}

/* One work-item per dst element (kernels/ssm.cl). */
static tsr_status op_ssm_conv(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *dst = n->dst;
    kargs a = {d->kernels[OCL_K_SSM_CONV], 0, CL_SUCCESS};
    arg_tensor(&a, n->src[0]);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, dst);
    return launch(d, cq, n, &a, (size_t)dst->ne[0], (size_t)dst->ne[1], (size_t)dst->ne[2], 0);
}

/* One work-item per row (p, h, s) of the state (kernels/ssm.cl). */
static tsr_status op_ssm_scan(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *st = n->src[0];
    kargs a = {d->kernels[OCL_K_SSM_SCAN], 0, CL_SUCCESS};
    for (int i = 0; i < 4; i++) arg_tensor(&a, n->src[i]);
    arg_tensor(&a, n->dst);
    return launch(d, cq, n, &a, (size_t)st->ne[1], (size_t)st->ne[2], (size_t)st->ne[3], 0);
}

/* One work-item per column (i, h, s) of the delta rule's state
 * (kernels/ssm.cl). */
static tsr_status op_delta_net(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *st = n->src[0];
    const tsr_delta_net_params p = tsr_delta_net_params_of(n);
    kargs a = {d->kernels[OCL_K_DELTA_NET], 0, CL_SUCCESS};
    for (int i = 0; i < 4; i++) arg_tensor(&a, n->src[i]);
    arg_tensor(&a, n->dst);
    arg_float(&a, p.eps);
    arg_float(&a, p.scale);
    arg_int(&a, p.kv_tiled);
    return launch(d, cq, n, &a, (size_t)st->ne[0], (size_t)st->ne[2], (size_t)st->ne[3], 0);
}

static tsr_status op_flash_attn(ocl_device *d, cl_command_queue cq, const tsr_node *n) {
    const tsr_tensor *q = n->src[0], *mask = n->n_src > 3 ? n->src[3] : NULL;
    kargs a = {d->kernels[OCL_K_FLASH_ATTN], 0, CL_SUCCESS};
    arg_tensor(&a, q);
    arg_tensor(&a, n->src[1]);
    arg_tensor(&a, n->src[2]);
    arg_tensor(&a, mask ? mask : q);
    arg_tensor(&a, n->dst);
    arg_int(&a, mask != NULL);
    arg_float(&a, tsr_flash_attn_params_of(n).scale);
    return launch(d, cq, n, &a, (size_t)q->ne[2], (size_t)q->ne[1], 1, 0);
}

tsr_status ocl_op_enqueue(ocl_device *d, ocl_queue *q, const tsr_node *node) {
    cl_command_queue cq = q->cq;
    switch (node->op) {
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_DIV: return op_binary(d, cq, node);
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF: return op_unary(d, cq, node);
    case TSR_OP_SWIGLU: return op_swiglu(d, cq, node);
    case TSR_OP_SWIGLU_OAI: return op_swiglu_oai(d, cq, node);
    case TSR_OP_CONCAT: return op_concat(d, cq, node);
    case TSR_OP_GET_ROWS: return op_get_rows(d, cq, node);
    case TSR_OP_CPY: return op_cpy(d, cq, node);
    case TSR_OP_ARGMAX: return op_argmax(d, cq, node);
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM: return op_norm(d, cq, node);
    case TSR_OP_SOFT_MAX: return op_soft_max(d, cq, node);
    case TSR_OP_ROPE: return op_rope(d, cq, node);
    case TSR_OP_MUL_MAT: return op_mul_mat(d, cq, node);
    case TSR_OP_FLASH_ATTN: return op_flash_attn(d, cq, node);
    case TSR_OP_MUL_MAT_ID: return op_mul_mat_id(d, q, node);
    case TSR_OP_TOP_K: return op_top_k(d, cq, node);
    case TSR_OP_SUM_ROWS: return op_sum_rows(d, cq, node);
    case TSR_OP_SSM_CONV: return op_ssm_conv(d, cq, node);
    case TSR_OP_SSM_SCAN: return op_ssm_scan(d, cq, node);
    case TSR_OP_DELTA_NET: return op_delta_net(d, cq, node);
    default: return TSR_ERR_UNSUPPORTED;
    }
}
