/*
 * graph — tensor arena, creation-order node list, views, and every op
 * constructor with its shape inference. Each constructor checks its sources
 * and, when they do not fit, records one message naming the op, the tensors
 * and their shapes, and returns NULL (see graph.h).
 */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "util/error.h"

enum { GRAPH_ERR_MAX = 512 };

struct graph {
    int32_t max_tensors;
    int32_t n_tensors;
    graph_tensor *tensors; /* [max_tensors]; addresses stay fixed */
    int32_t n_nodes;
    int32_t *nodes; /* indices of computed tensors, creation order */
    bool failed;
    char err[GRAPH_ERR_MAX]; /* the first error */
};


/* Names for messages. The tensor module's dtype table is the authority on
 * geometry; the graph only needs the names of the types its ops accept. */
static const char *dtype_name(int32_t dtype) {
    switch (dtype) {
    case TSR_DTYPE_F32: return "F32";
    case TSR_DTYPE_F16: return "F16";
    case TSR_DTYPE_BF16: return "BF16";
    case TSR_DTYPE_Q4_0: return "Q4_0";
    case TSR_DTYPE_Q4_1: return "Q4_1";
    case TSR_DTYPE_Q5_0: return "Q5_0";
    case TSR_DTYPE_Q5_1: return "Q5_1";
    case TSR_DTYPE_Q8_0: return "Q8_0";
    case TSR_DTYPE_Q8_1: return "Q8_1";
    case TSR_DTYPE_Q2_K: return "Q2_K";
    case TSR_DTYPE_Q3_K: return "Q3_K";
    case TSR_DTYPE_Q4_K: return "Q4_K";
    case TSR_DTYPE_Q5_K: return "Q5_K";
    case TSR_DTYPE_Q6_K: return "Q6_K";
    case TSR_DTYPE_Q8_K: return "Q8_K";
    case TSR_DTYPE_I8: return "I8";
    case TSR_DTYPE_I16: return "I16";
    case TSR_DTYPE_I32: return "I32";
    case TSR_DTYPE_I64: return "I64";
    case TSR_DTYPE_F64: return "F64";
    default: return "an unsupported type";
    }
}

/* The lower-case names of TSR_OPS (tessera/plugin.h). */
const char *graph_op_name(int32_t op) {
    const tsr_op_traits *t = tsr_op_traits_get(op);
    return t ? t->lower : "unknown-op";
}

/* --------------------------------------------------------------- errors */

/* Record the first error of the graph (and the thread's error); NULL. */
static graph_tensor *graph_fail(graph *g, const char *fmt, ...) TSR_PRINTF(2, 3);
static graph_tensor *graph_fail(graph *g, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!g->failed) {
        va_list ap2;
        va_copy(ap2, ap);
        vsnprintf(g->err, sizeof g->err, fmt, ap2);
        va_end(ap2);
        g->failed = true;
    }
    error_setv(fmt, ap);
    va_end(ap);
    return NULL;
}

/* "'name' [64, 5]" into buf: the shape up to the last dimension that is not 1. */
typedef struct shape_text {
    char s[GRAPH_NAME_MAX + 96];
} shape_text;

static shape_text describe(const graph_tensor *t) {
    shape_text out;
    int n = 1;
    for (int d = 1; d < TSR_MAX_DIMS; d++)
        if (t->t.ne[d] != 1) n = d + 1;
    int len = snprintf(out.s, sizeof out.s, "'%s' [", t->name);
    for (int d = 0; d < n && len > 0 && (size_t)len < sizeof out.s; d++)
        len += snprintf(out.s + len, sizeof out.s - (size_t)len, "%s%lld", d ? ", " : "",
                        (long long)t->t.ne[d]);
    if (len > 0 && (size_t)len < sizeof out.s)
        snprintf(out.s + len, sizeof out.s - (size_t)len, "]");
    return out;
}
#define SHAPE(t) (describe(t).s)

/* NULL sources come from an earlier failed op; keep that error. */
static bool sources_ok(graph *g, const char *op, int n, graph_tensor *const *src) {
    for (int i = 0; i < n; i++) {
        if (src[i]) continue;
        if (!g->failed) graph_fail(g, "%s: source %d is NULL", op, i);
        else error_set("%s", g->err);
        return false;
    }
    return true;
}

/* -------------------------------------------------------------- arena */

graph *graph_new(int32_t max_tensors) {
    if (max_tensors <= 0) {
        error_set("graph_new: max_tensors must be positive (got %d)", max_tensors);
        return NULL;
    }
    graph *g = calloc(1, sizeof *g);
    if (!g) goto fail;
    g->tensors = calloc((size_t)max_tensors, sizeof *g->tensors);
    g->nodes = calloc((size_t)max_tensors, sizeof *g->nodes);
    if (!g->tensors || !g->nodes) goto fail;
    g->max_tensors = max_tensors;
    return g;
fail:
    graph_free(g);
    error_set("graph_new: out of memory for %d tensors", max_tensors);
    return NULL;
}

void graph_free(graph *g) {
    if (!g) return;
    free(g->tensors);
    free(g->nodes);
    free(g);
}

int graph_check(const graph *g) {
    if (!g) return error_set("graph_check: graph is NULL");
    if (g->failed) return error_set("%s", g->err);
    return 0;
}

int32_t graph_n_tensors(const graph *g) { return g->n_tensors; }

graph_tensor *graph_tensor_at(const graph *g, int32_t i) {
    if (i < 0 || i >= g->n_tensors) return NULL;
    return &g->tensors[i];
}

int32_t graph_n_nodes(const graph *g) { return g->n_nodes; }

graph_tensor *graph_node_at(const graph *g, int32_t i) {
    if (i < 0 || i >= g->n_nodes) return NULL;
    return &g->tensors[g->nodes[i]];
}

/* Contiguous strides for dtype and ne. */
static void set_contiguous_strides(tsr_tensor *t) {
    const int64_t bs = tsr_dtype_block_size(t->dtype);
    t->nb[0] = tsr_dtype_block_bytes(t->dtype);
    t->nb[1] = t->nb[0] * (t->ne[0] / (bs > 0 ? bs : 1));
    for (int d = 2; d < TSR_MAX_DIMS; d++) t->nb[d] = t->nb[d - 1] * t->ne[d - 1];
}

/* A fresh tensor slot (all zero but index/device/name pointer). */
static graph_tensor *slot_new(graph *g, const char *what) {
    if (g->n_tensors >= g->max_tensors)
        return graph_fail(g, "%s: graph is full (%d tensors); raise max_tensors", what,
                          g->max_tensors);
    graph_tensor *t = &g->tensors[g->n_tensors];
    memset(t, 0, sizeof *t);
    t->index = g->n_tensors++;
    t->device = -1;
    t->home_device = -1;
    t->t.name = t->name;
    return t;
}

/* Checked: dtype has a block geometry and ne[0] is a multiple of it. */
static bool dtype_shape_ok(graph *g, const char *what, int32_t dtype, const int64_t *ne) {
    const int64_t bs = tsr_dtype_block_size(dtype);
    if (bs <= 0 || tsr_dtype_block_bytes(dtype) <= 0) {
        graph_fail(g, "%s: dtype %s (%d) is not supported", what, dtype_name(dtype), dtype);
        return false;
    }
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (ne[d] <= 0) {
            graph_fail(g, "%s: dimension %d is %lld (must be positive)", what, d,
                       (long long)ne[d]);
            return false;
        }
    }
    if (ne[0] % bs != 0) {
        graph_fail(g, "%s: %s rows hold blocks of %lld but ne[0] is %lld", what,
                   dtype_name(dtype), (long long)bs, (long long)ne[0]);
        return false;
    }
    /* The byte size must fit in int64 (strides are int64). */
    int64_t bytes = tsr_dtype_block_bytes(dtype) * (ne[0] / bs);
    for (int d = 1; d < TSR_MAX_DIMS; d++) {
        if (__builtin_mul_overflow(bytes, ne[d], &bytes)) {
            graph_fail(g, "%s: [%lld, %lld, %lld, %lld] %s is too large", what,
                       (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3],
                       dtype_name(dtype));
            return false;
        }
    }
    return true;
}

/* Bytes a view with these ne/nb spans; false if that overflows or a stride
 * is negative. */
static bool view_span(int32_t dtype, const int64_t ne[4], const int64_t nb[4], uint64_t *out) {
    const int64_t bs = tsr_dtype_block_size(dtype);
    uint64_t span = (uint64_t)tsr_dtype_block_bytes(dtype), step;
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        const uint64_t count = (uint64_t)(d == 0 ? ne[0] / bs : ne[d]) - 1;
        if (nb[d] < 0 || __builtin_mul_overflow(count, (uint64_t)nb[d], &step) ||
            __builtin_add_overflow(span, step, &span))
            return false;
    }
    *out = span;
    return true;
}

/* A new contiguous tensor; op/name filled in by the caller. */
static graph_tensor *tensor_new(graph *g, const char *what, int32_t dtype, const int64_t ne[4]) {
    if (!dtype_shape_ok(g, what, dtype, ne)) return NULL;
    graph_tensor *t = slot_new(g, what);
    if (!t) return NULL;
    t->t.dtype = dtype;
    memcpy(t->t.ne, ne, sizeof t->t.ne);
    set_contiguous_strides(&t->t);
    return t;
}

graph_tensor *graph_tensor_new(graph *g, int32_t dtype, int n_dims, const int64_t *ne) {
    if (n_dims < 1 || n_dims > TSR_MAX_DIMS)
        return graph_fail(g, "graph_tensor_new: n_dims %d out of range 1..%d", n_dims,
                          TSR_MAX_DIMS);
    int64_t full[4] = {1, 1, 1, 1};
    for (int d = 0; d < n_dims; d++) full[d] = ne[d];
    graph_tensor *t = tensor_new(g, "graph_tensor_new", dtype, full);
    if (t) snprintf(t->name, sizeof t->name, "leaf-%d", t->index);
    return t;
}

graph_tensor *graph_tensor_new_1d(graph *g, int32_t dtype, int64_t ne0) {
    return graph_tensor_new(g, dtype, 1, (int64_t[]){ne0});
}
graph_tensor *graph_tensor_new_2d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1) {
    return graph_tensor_new(g, dtype, 2, (int64_t[]){ne0, ne1});
}
graph_tensor *graph_tensor_new_3d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1,
                                  int64_t ne2) {
    return graph_tensor_new(g, dtype, 3, (int64_t[]){ne0, ne1, ne2});
}
graph_tensor *graph_tensor_new_4d(graph *g, int32_t dtype, int64_t ne0, int64_t ne1,
                                  int64_t ne2, int64_t ne3) {
    return graph_tensor_new(g, dtype, 4, (int64_t[]){ne0, ne1, ne2, ne3});
}

graph_tensor *graph_tensor_set_name(graph_tensor *t, const char *fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    return t;
}

graph_tensor *graph_set_input(graph_tensor *t) {
    if (t) t->flags |= GRAPH_INPUT;
    return t;
}

graph_tensor *graph_set_output(graph_tensor *t) {
    if (t) t->flags |= GRAPH_OUTPUT;
    return t;
}

void graph_tensor_bind(graph_tensor *t, uint32_t role, int32_t home_device, tsr_buffer *buffer,
                       uint64_t offset, void *data) {
    if (!t) return;
    t->flags |= role | GRAPH_BOUND;
    t->home_device = home_device;
    t->t.buffer = buffer;
    t->t.offset = offset;
    t->t.data = data;
}

uint64_t graph_tensor_nbytes(const graph_tensor *t) {
    const int64_t bs = tsr_dtype_block_size(t->t.dtype);
    const int64_t bb = tsr_dtype_block_bytes(t->t.dtype);
    if (bs <= 0) return 0;
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (t->t.ne[d] <= 0) return 0;
    uint64_t n = (uint64_t)bb + (uint64_t)(t->t.ne[0] / bs - 1) * (uint64_t)t->t.nb[0];
    for (int d = 1; d < TSR_MAX_DIMS; d++) n += (uint64_t)(t->t.ne[d] - 1) * (uint64_t)t->t.nb[d];
    return n;
}

int64_t graph_tensor_nelements(const graph_tensor *t) { return tsr_tensor_nelements(&t->t); }

bool graph_tensor_is_contiguous(const graph_tensor *t) {
    return tsr_tensor_is_contiguous(&t->t) != 0;
}

graph_tensor *graph_tensor_storage(graph_tensor *t, uint64_t *offset) {
    if (offset) *offset = t->view_src ? t->view_offset : 0;
    return t->view_src ? t->view_src : t;
}

/* --------------------------------------------------------------- views */

/* A view of a with the given ne/nb at byte offset (relative to a's first
 * byte), checked to stay inside a's storage. */
static graph_tensor *view_new(graph *g, const char *what, graph_tensor *a, const int64_t ne[4],
                              const int64_t nb[4], uint64_t offset) {
    if (!sources_ok(g, what, 1, &a)) return NULL;
    const int64_t bs = tsr_dtype_block_size(a->t.dtype);
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (ne[d] <= 0)
            return graph_fail(g, "%s: view of %s has dimension %d = %lld", what, SHAPE(a), d,
                              (long long)ne[d]);
    if (bs <= 0 || ne[0] % bs != 0)
        return graph_fail(g, "%s: view of %s: ne[0] %lld is not a multiple of the %s block (%lld)",
                          what, SHAPE(a), (long long)ne[0], dtype_name(a->t.dtype),
                          (long long)bs);
    uint64_t base = 0;
    graph_tensor *root = graph_tensor_storage(a, &base);
    uint64_t span;
    if (!view_span(a->t.dtype, ne, nb, &span))
        return graph_fail(g, "%s: view of %s: strides (%lld, %lld, %lld, %lld) are negative or "
                             "overflow",
                          what, SHAPE(a), (long long)nb[0], (long long)nb[1], (long long)nb[2],
                          (long long)nb[3]);
    const uint64_t limit = graph_tensor_nbytes(root);
    if (offset > limit || base > limit - offset || span > limit - (base + offset))
        return graph_fail(g, "%s: view of %s at offset %llu spans %llu bytes, past the end of "
                             "'%s' (%llu bytes)",
                          what, SHAPE(a), (unsigned long long)offset, (unsigned long long)span,
                          root->name, (unsigned long long)limit);
    graph_tensor *v = slot_new(g, what);
    if (!v) return NULL;
    v->t.dtype = a->t.dtype;
    memcpy(v->t.ne, ne, sizeof v->t.ne);
    memcpy(v->t.nb, nb, sizeof v->t.nb);
    v->view_src = root;
    v->view_offset = base + offset;
    v->flags = root->flags & (GRAPH_WEIGHT | GRAPH_PERSISTENT | GRAPH_BOUND);
    v->home_device = root->home_device;
    snprintf(v->name, sizeof v->name, "%.*s (view)", GRAPH_NAME_MAX - 8, a->name);
    return v;
}

graph_tensor *graph_view_1d(graph *g, graph_tensor *a, int64_t ne0, uint64_t offset) {
    if (!sources_ok(g, "view_1d", 1, &a)) return NULL;
    const int64_t ne[4] = {ne0, 1, 1, 1};
    int64_t nb[4] = {a->t.nb[0], 0, 0, 0};
    const int64_t bs = tsr_dtype_block_size(a->t.dtype) > 0 ? tsr_dtype_block_size(a->t.dtype) : 1;
    nb[1] = (int64_t)((uint64_t)nb[0] * (uint64_t)(ne0 / bs)); /* only matters for ne1 > 1 */
    nb[2] = nb[3] = nb[1];
    return view_new(g, "view_1d", a, ne, nb, offset);
}

graph_tensor *graph_view_2d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, uint64_t nb1,
                            uint64_t offset) {
    if (!sources_ok(g, "view_2d", 1, &a)) return NULL;
    const int64_t ne[4] = {ne0, ne1, 1, 1};
    /* nb[2], nb[3] only matter for ne = 1; unsigned products cannot trap. */
    const int64_t nb[4] = {a->t.nb[0], (int64_t)nb1, (int64_t)(nb1 * (uint64_t)ne1),
                           (int64_t)(nb1 * (uint64_t)ne1)};
    return view_new(g, "view_2d", a, ne, nb, offset);
}

graph_tensor *graph_view_3d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                            uint64_t nb1, uint64_t nb2, uint64_t offset) {
    if (!sources_ok(g, "view_3d", 1, &a)) return NULL;
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    const int64_t nb[4] = {a->t.nb[0], (int64_t)nb1, (int64_t)nb2,
                           (int64_t)(nb2 * (uint64_t)ne2)};
    return view_new(g, "view_3d", a, ne, nb, offset);
}

graph_tensor *graph_view_4d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                            int64_t ne3, uint64_t nb1, uint64_t nb2, uint64_t nb3,
                            uint64_t offset) {
    if (!sources_ok(g, "view_4d", 1, &a)) return NULL;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const int64_t nb[4] = {a->t.nb[0], (int64_t)nb1, (int64_t)nb2, (int64_t)nb3};
    return view_new(g, "view_4d", a, ne, nb, offset);
}

static graph_tensor *reshape(graph *g, const char *what, graph_tensor *a, const int64_t ne[4]) {
    if (!sources_ok(g, what, 1, &a)) return NULL;
    if (!graph_tensor_is_contiguous(a))
        return graph_fail(g, "%s: %s is not contiguous (use graph_cont first)", what, SHAPE(a));
    int64_t n = 1;
    bool overflow = false;
    for (int d = 0; d < TSR_MAX_DIMS; d++) overflow |= __builtin_mul_overflow(n, ne[d], &n);
    if (ne[0] <= 0 || ne[1] <= 0 || ne[2] <= 0 || ne[3] <= 0 || overflow ||
        n != graph_tensor_nelements(a))
        return graph_fail(g, "%s: %s has %lld elements, cannot become [%lld, %lld, %lld, %lld]",
                          what, SHAPE(a), (long long)graph_tensor_nelements(a),
                          (long long)ne[0], (long long)ne[1], (long long)ne[2],
                          (long long)ne[3]);
    tsr_tensor tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.dtype = a->t.dtype;
    memcpy(tmp.ne, ne, sizeof tmp.ne);
    set_contiguous_strides(&tmp);
    return view_new(g, what, a, tmp.ne, tmp.nb, 0);
}

graph_tensor *graph_reshape_2d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1) {
    return reshape(g, "reshape_2d", a, (int64_t[]){ne0, ne1, 1, 1});
}
graph_tensor *graph_reshape_3d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2) {
    return reshape(g, "reshape_3d", a, (int64_t[]){ne0, ne1, ne2, 1});
}
graph_tensor *graph_reshape_4d(graph *g, graph_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               int64_t ne3) {
    return reshape(g, "reshape_4d", a, (int64_t[]){ne0, ne1, ne2, ne3});
}

graph_tensor *graph_permute(graph *g, graph_tensor *a, int ax0, int ax1, int ax2, int ax3) {
    if (!sources_ok(g, "permute", 1, &a)) return NULL;
    const int ax[4] = {ax0, ax1, ax2, ax3};
    int seen = 0;
    for (int i = 0; i < 4; i++)
        if (ax[i] >= 0 && ax[i] < 4) seen |= 1 << ax[i];
    if (seen != 0xf)
        return graph_fail(g, "permute: %s: axes (%d, %d, %d, %d) are not a permutation of 0..3",
                          SHAPE(a), ax0, ax1, ax2, ax3);
    if (tsr_dtype_block_size(a->t.dtype) != 1 && ax0 != 0)
        return graph_fail(g, "permute: %s: cannot move dimension 0 of a block-quantized %s tensor",
                          SHAPE(a), dtype_name(a->t.dtype));
    int64_t ne[4], nb[4];
    for (int i = 0; i < 4; i++) {
        ne[ax[i]] = a->t.ne[i];
        nb[ax[i]] = a->t.nb[i];
    }
    /* view_new measures from a's first byte, which a permutation keeps. */
    graph_tensor *v = view_new(g, "permute", a, ne, nb, 0);
    return v;
}

graph_tensor *graph_transpose(graph *g, graph_tensor *a) {
    return graph_permute(g, a, 1, 0, 2, 3);
}

/* ----------------------------------------------------------------- ops */

/* A new node computed by op from src[0..n_src-1]; dst shape ne, dtype. */
static graph_tensor *node_new(graph *g, int32_t op, int32_t dtype, const int64_t ne[4],
                              int n_src, graph_tensor *const *src) {
    graph_tensor *t = tensor_new(g, graph_op_name(op), dtype, ne);
    if (!t) return NULL;
    t->op = op;
    t->n_src = n_src;
    for (int i = 0; i < n_src; i++) t->src[i] = src[i];
    g->nodes[g->n_nodes++] = t->index;
    snprintf(t->name, sizeof t->name, "%s-%d", graph_op_name(op), t->index);
    return t;
}

static bool want_dtype(graph *g, const char *op, const graph_tensor *t, int32_t dtype,
                       const char *role) {
    if (t->t.dtype == dtype) return true;
    graph_fail(g, "%s: %s %s is %s, expected %s", op, role, SHAPE(t), dtype_name(t->t.dtype),
               dtype_name(dtype));
    return false;
}

static bool same_shape(const graph_tensor *a, const graph_tensor *b) {
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->t.ne[d] != b->t.ne[d]) return false;
    return true;
}

graph_tensor *graph_get_rows(graph *g, graph_tensor *a, graph_tensor *rows) {
    graph_tensor *src[2] = {a, rows};
    if (!sources_ok(g, "get_rows", 2, src)) return NULL;
    if (!want_dtype(g, "get_rows", rows, TSR_DTYPE_I32, "row indices")) return NULL;
    if (rows->t.ne[1] != a->t.ne[2] || rows->t.ne[2] != a->t.ne[3] || rows->t.ne[3] != 1)
        return graph_fail(g, "get_rows: %s from %s: index batch dimensions must match the "
                             "table's dimensions 2 and 3",
                          SHAPE(rows), SHAPE(a));
    const int64_t ne[4] = {a->t.ne[0], rows->t.ne[0], a->t.ne[2], a->t.ne[3]};
    return node_new(g, TSR_OP_GET_ROWS, TSR_DTYPE_F32, ne, 2, src);
}

static graph_tensor *binary(graph *g, int32_t op, graph_tensor *a, graph_tensor *b) {
    const char *name = graph_op_name(op);
    graph_tensor *src[2] = {a, b};
    if (!sources_ok(g, name, 2, src)) return NULL;
    if (!want_dtype(g, name, a, TSR_DTYPE_F32, "input") ||
        !want_dtype(g, name, b, TSR_DTYPE_F32, "input"))
        return NULL;
    for (int d = 0; d < TSR_MAX_DIMS; d++)
        if (a->t.ne[d] % b->t.ne[d] != 0)
            return graph_fail(g, "%s: %s and %s: dimension %d of the second (%lld) does not "
                                 "divide the first's (%lld)",
                              name, SHAPE(a), SHAPE(b), d, (long long)b->t.ne[d],
                              (long long)a->t.ne[d]);
    return node_new(g, op, TSR_DTYPE_F32, a->t.ne, 2, src);
}

graph_tensor *graph_add(graph *g, graph_tensor *a, graph_tensor *b) {
    return binary(g, TSR_OP_ADD, a, b);
}
graph_tensor *graph_mul(graph *g, graph_tensor *a, graph_tensor *b) {
    return binary(g, TSR_OP_MUL, a, b);
}

static graph_tensor *unary(graph *g, int32_t op, graph_tensor *a) {
    const char *name = graph_op_name(op);
    if (!sources_ok(g, name, 1, &a)) return NULL;
    if (!want_dtype(g, name, a, TSR_DTYPE_F32, "input")) return NULL;
    return node_new(g, op, TSR_DTYPE_F32, a->t.ne, 1, &a);
}

graph_tensor *graph_scale(graph *g, graph_tensor *a, float scale, float bias) {
    graph_tensor *t = unary(g, TSR_OP_SCALE, a);
    if (t) tsr_scale_params_put(&(tsr_scale_params){.scale = scale, .bias = bias}, t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_mul_mat(graph *g, graph_tensor *w, graph_tensor *x) {
    graph_tensor *src[2] = {w, x};
    if (!sources_ok(g, "mul_mat", 2, src)) return NULL;
    if (w->t.ne[0] != x->t.ne[0])
        return graph_fail(g, "mul_mat: %s x %s: inner dimensions differ (%lld vs %lld)",
                          SHAPE(w), SHAPE(x), (long long)w->t.ne[0], (long long)x->t.ne[0]);
    if (!want_dtype(g, "mul_mat", x, TSR_DTYPE_F32, "activations")) return NULL;
    if (w->t.nb[0] != tsr_dtype_block_bytes(w->t.dtype))
        return graph_fail(g, "mul_mat: weights %s: rows must be contiguous", SHAPE(w));
    if (x->t.ne[2] % w->t.ne[2] != 0 || x->t.ne[3] % w->t.ne[3] != 0)
        return graph_fail(g, "mul_mat: %s x %s: batch dimensions of the weights do not divide "
                             "those of the activations",
                          SHAPE(w), SHAPE(x));
    const int64_t ne[4] = {w->t.ne[1], x->t.ne[1], x->t.ne[2], x->t.ne[3]};
    return node_new(g, TSR_OP_MUL_MAT, TSR_DTYPE_F32, ne, 2, src);
}

graph_tensor *graph_rms_norm(graph *g, graph_tensor *a, float eps) {
    graph_tensor *t = unary(g, TSR_OP_RMS_NORM, a);
    if (t) tsr_norm_params_put(&(tsr_norm_params){.eps = eps}, t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_norm(graph *g, graph_tensor *a, float eps) {
    graph_tensor *t = unary(g, TSR_OP_NORM, a);
    if (t) tsr_norm_params_put(&(tsr_norm_params){.eps = eps}, t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_rope(graph *g, graph_tensor *a, graph_tensor *pos, graph_tensor *freq_factors,
                         const graph_rope_params *p) {
    graph_tensor *src[2] = {a, pos};
    if (!sources_ok(g, "rope", 2, src)) return NULL;
    if (!p) return graph_fail(g, "rope: %s: parameters are NULL", SHAPE(a));
    if (!want_dtype(g, "rope", a, TSR_DTYPE_F32, "input") ||
        !want_dtype(g, "rope", pos, TSR_DTYPE_I32, "positions"))
        return NULL;
    if (a->t.ne[3] != 1)
        return graph_fail(g, "rope: %s must be [head_dim, n_head, n_tokens]", SHAPE(a));
    if (pos->t.ne[0] != a->t.ne[2] || pos->t.ne[1] != 1 || pos->t.ne[2] != 1 || pos->t.ne[3] != 1)
        return graph_fail(g, "rope: positions %s must be [%lld] for input %s", SHAPE(pos),
                          (long long)a->t.ne[2], SHAPE(a));
    if (p->n_dims <= 0 || p->n_dims % 2 != 0 || p->n_dims > a->t.ne[0])
        return graph_fail(g, "rope: %s: n_dims %d must be even and in 2..%lld", SHAPE(a),
                          p->n_dims, (long long)a->t.ne[0]);
    if (p->mode != TSR_ROPE_NORMAL && p->mode != TSR_ROPE_NEOX)
        return graph_fail(g, "rope: %s: unknown mode %d", SHAPE(a), p->mode);
    if (freq_factors) {
        if (!want_dtype(g, "rope", freq_factors, TSR_DTYPE_F32, "frequency factors"))
            return NULL;
        if (freq_factors->t.ne[0] < p->n_dims / 2)
            return graph_fail(g, "rope: frequency factors %s: need %d entries (n_dims/2)",
                              SHAPE(freq_factors), p->n_dims / 2);
    }
    graph_tensor *all[3] = {a, pos, freq_factors};
    graph_tensor *t = node_new(g, TSR_OP_ROPE, TSR_DTYPE_F32, a->t.ne, 3, all);
    if (!t) return NULL;
    const tsr_rope_params rp = {
        .n_dims = p->n_dims, .mode = p->mode, .n_ctx_orig = p->n_ctx_orig,
        .freq_base = p->freq_base, .freq_scale = p->freq_scale, .ext_factor = p->ext_factor,
        .attn_factor = p->attn_factor, .beta_fast = p->beta_fast, .beta_slow = p->beta_slow,
    };
    tsr_rope_params_put(&rp, t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_soft_max(graph *g, graph_tensor *a, graph_tensor *mask, float scale,
                             float max_bias) {
    if (!sources_ok(g, "soft_max", 1, &a)) return NULL;
    if (!want_dtype(g, "soft_max", a, TSR_DTYPE_F32, "input")) return NULL;
    if (mask) {
        if (mask->t.dtype != TSR_DTYPE_F32 && mask->t.dtype != TSR_DTYPE_F16)
            return graph_fail(g, "soft_max: mask %s is %s, expected F32 or F16", SHAPE(mask),
                              dtype_name(mask->t.dtype));
        if (mask->t.ne[0] != a->t.ne[0] || mask->t.ne[1] < a->t.ne[1] ||
            a->t.ne[2] % mask->t.ne[2] != 0 || a->t.ne[3] % mask->t.ne[3] != 0)
            return graph_fail(g, "soft_max: mask %s does not cover input %s", SHAPE(mask),
                              SHAPE(a));
    }
    graph_tensor *src[2] = {a, mask};
    graph_tensor *t = node_new(g, TSR_OP_SOFT_MAX, TSR_DTYPE_F32, a->t.ne, 2, src);
    if (t)
        tsr_soft_max_params_put(&(tsr_soft_max_params){.scale = scale, .max_bias = max_bias}, t->iparams,
                                t->fparams);
    return t;
}

graph_tensor *graph_silu(graph *g, graph_tensor *a) { return unary(g, TSR_OP_SILU, a); }
graph_tensor *graph_gelu(graph *g, graph_tensor *a) { return unary(g, TSR_OP_GELU, a); }
graph_tensor *graph_gelu_erf(graph *g, graph_tensor *a) { return unary(g, TSR_OP_GELU_ERF, a); }

graph_tensor *graph_swiglu(graph *g, graph_tensor *a, graph_tensor *b) {
    graph_tensor *src[2] = {a, b};
    if (!sources_ok(g, "swiglu", 2, src)) return NULL;
    if (!want_dtype(g, "swiglu", a, TSR_DTYPE_F32, "input") ||
        !want_dtype(g, "swiglu", b, TSR_DTYPE_F32, "input"))
        return NULL;
    if (!same_shape(a, b))
        return graph_fail(g, "swiglu: %s and %s: shapes differ", SHAPE(a), SHAPE(b));
    return node_new(g, TSR_OP_SWIGLU, TSR_DTYPE_F32, a->t.ne, 2, src);
}

graph_tensor *graph_swiglu_oai(graph *g, graph_tensor *gate, graph_tensor *up, float alpha, float limit) {
    graph_tensor *src[2] = {gate, up};
    if (!sources_ok(g, "swiglu_oai", 2, src)) return NULL;
    if (!want_dtype(g, "swiglu_oai", gate, TSR_DTYPE_F32, "gate") ||
        !want_dtype(g, "swiglu_oai", up, TSR_DTYPE_F32, "up"))
        return NULL;
    if (!same_shape(gate, up))
        return graph_fail(g, "swiglu_oai: %s and %s: shapes differ", SHAPE(gate), SHAPE(up));
    /* tsr_node_check's rule: finite and > 0 */
    if (!(alpha > 0.0f && alpha <= 3.0e38f && limit > 0.0f && limit <= 3.0e38f))
        return graph_fail(g, "swiglu_oai: alpha %g and limit %g must be finite and > 0", (double)alpha,
                          (double)limit);
    graph_tensor *t = node_new(g, TSR_OP_SWIGLU_OAI, TSR_DTYPE_F32, gate->t.ne, 2, src);
    if (t) tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = alpha, .limit = limit}, t->iparams, t->fparams);
    return t;
}

/* CPY may read F32/F16/BF16 or a quantized type, and write F32/F16/BF16 or
 * (from a float type) a quantized type. */
static bool is_float_dtype(int32_t d) {
    return d == TSR_DTYPE_F32 || d == TSR_DTYPE_F16 || d == TSR_DTYPE_BF16;
}

static bool cpy_dtypes_ok(graph *g, const graph_tensor *a, int32_t dst_dtype) {
    const bool ok = is_float_dtype(dst_dtype) ? tsr_dtype_block_size(a->t.dtype) > 0
                                              : (is_float_dtype(a->t.dtype) &&
                                                 tsr_dtype_block_size(dst_dtype) > 0);
    if (!ok)
        graph_fail(g, "cpy: %s: cannot convert %s to %s", SHAPE(a), dtype_name(a->t.dtype),
                   dtype_name(dst_dtype));
    return ok;
}

graph_tensor *graph_cpy(graph *g, graph_tensor *a, graph_tensor *dst) {
    graph_tensor *src[2] = {a, dst};
    if (!sources_ok(g, "cpy", 2, src)) return NULL;
    if (graph_tensor_nelements(a) != graph_tensor_nelements(dst))
        return graph_fail(g, "cpy: %s into %s: element counts differ (%lld vs %lld)", SHAPE(a),
                          SHAPE(dst), (long long)graph_tensor_nelements(a),
                          (long long)graph_tensor_nelements(dst));
    if (!cpy_dtypes_ok(g, a, dst->t.dtype)) return NULL;
    graph_tensor *t = slot_new(g, "cpy");
    if (!t) return NULL;
    /* The node is dst's bytes: same dtype, shape, strides and storage. */
    t->t.dtype = dst->t.dtype;
    memcpy(t->t.ne, dst->t.ne, sizeof t->t.ne);
    memcpy(t->t.nb, dst->t.nb, sizeof t->t.nb);
    uint64_t off = 0;
    t->view_src = graph_tensor_storage(dst, &off);
    t->view_offset = off;
    t->home_device = t->view_src->home_device;
    t->op = TSR_OP_CPY;
    t->n_src = 1;
    t->src[0] = a;
    g->nodes[g->n_nodes++] = t->index;
    snprintf(t->name, sizeof t->name, "cpy-%d", t->index);
    return t;
}

graph_tensor *graph_cast(graph *g, graph_tensor *a, int32_t dtype) {
    if (!sources_ok(g, "cast", 1, &a)) return NULL;
    if (!cpy_dtypes_ok(g, a, dtype)) return NULL;
    return node_new(g, TSR_OP_CPY, dtype, a->t.ne, 1, &a);
}

graph_tensor *graph_cont(graph *g, graph_tensor *a) {
    if (!sources_ok(g, "cont", 1, &a)) return NULL;
    return graph_cast(g, a, a->t.dtype);
}

graph_tensor *graph_concat(graph *g, graph_tensor *a, graph_tensor *b, int dim) {
    graph_tensor *src[2] = {a, b};
    if (!sources_ok(g, "concat", 2, src)) return NULL;
    if (dim < 0 || dim >= TSR_MAX_DIMS)
        return graph_fail(g, "concat: %s and %s: dimension %d out of range 0..3", SHAPE(a),
                          SHAPE(b), dim);
    if (!want_dtype(g, "concat", a, TSR_DTYPE_F32, "input") ||
        !want_dtype(g, "concat", b, TSR_DTYPE_F32, "input"))
        return NULL;
    int64_t ne[4];
    for (int d = 0; d < TSR_MAX_DIMS; d++) {
        if (d != dim && a->t.ne[d] != b->t.ne[d])
            return graph_fail(g, "concat: %s and %s along %d: dimension %d differs (%lld vs %lld)",
                              SHAPE(a), SHAPE(b), dim, d, (long long)a->t.ne[d],
                              (long long)b->t.ne[d]);
        ne[d] = d == dim ? a->t.ne[d] + b->t.ne[d] : a->t.ne[d];
    }
    graph_tensor *t = node_new(g, TSR_OP_CONCAT, TSR_DTYPE_F32, ne, 2, src);
    if (t) tsr_concat_params_put(&(tsr_concat_params){.dim = dim}, t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_argmax(graph *g, graph_tensor *a) {
    if (!sources_ok(g, "argmax", 1, &a)) return NULL;
    if (!want_dtype(g, "argmax", a, TSR_DTYPE_F32, "input")) return NULL;
    if (a->t.ne[2] != 1 || a->t.ne[3] != 1)
        return graph_fail(g, "argmax: %s must be 2-dimensional [n, rows]", SHAPE(a));
    const int64_t ne[4] = {a->t.ne[1], 1, 1, 1};
    return node_new(g, TSR_OP_ARGMAX, TSR_DTYPE_I32, ne, 1, &a);
}

graph_tensor *graph_ssm_conv(graph *g, graph_tensor *sx, graph_tensor *kernel) {
    graph_tensor *src[2] = {sx, kernel};
    if (!sources_ok(g, "ssm_conv", 2, src)) return NULL;
    if (!want_dtype(g, "ssm_conv", sx, TSR_DTYPE_F32, "input") ||
        !want_dtype(g, "ssm_conv", kernel, TSR_DTYPE_F32, "kernel"))
        return NULL;
    const int64_t K = kernel->t.ne[0], C = kernel->t.ne[1];
    if (kernel->t.ne[2] != 1 || kernel->t.ne[3] != 1 || sx->t.ne[3] != 1 || sx->t.ne[1] != C || sx->t.ne[0] < K)
        return graph_fail(g, "ssm_conv: input %s does not fit kernel %s (needs [>= K, C, S] and [K, C])",
                          SHAPE(sx), SHAPE(kernel));
    const int64_t ne[4] = {C, sx->t.ne[0] - K + 1, sx->t.ne[2], 1};
    return node_new(g, TSR_OP_SSM_CONV, TSR_DTYPE_F32, ne, 2, src);
}

graph_tensor *graph_ssm_scan(graph *g, graph_tensor *state, graph_tensor *xbc, graph_tensor *dt,
                             graph_tensor *a) {
    graph_tensor *src[4] = {state, xbc, dt, a};
    if (!sources_ok(g, "ssm_scan", 4, src)) return NULL;
    for (int i = 0; i < 4; i++)
        if (!want_dtype(g, "ssm_scan", src[i], TSR_DTYPE_F32, "input")) return NULL;
    const int64_t N = state->t.ne[0], P = state->t.ne[1], H = state->t.ne[2], S = state->t.ne[3];
    const int64_t T = xbc->t.ne[1], bc = xbc->t.ne[0] - P * H;
    if (xbc->t.ne[2] != S || xbc->t.ne[3] != 1 || bc < 2 * N || bc % (2 * N) != 0 || H % (bc / (2 * N)) != 0)
        return graph_fail(g, "ssm_scan: xBC %s does not fit state %s (needs [P*H + 2*G*N, T, S], H %% G == 0)",
                          SHAPE(xbc), SHAPE(state));
    if (dt->t.ne[0] != H || dt->t.ne[1] != T || dt->t.ne[2] != S || dt->t.ne[3] != 1)
        return graph_fail(g, "ssm_scan: dt %s is not [%lld, %lld, %lld]", SHAPE(dt), (long long)H, (long long)T,
                          (long long)S);
    if (graph_tensor_nelements(a) != H || (a->t.ne[0] != H && a->t.ne[1] != H))
        return graph_fail(g, "ssm_scan: A %s is not [%lld] or [1, %lld]", SHAPE(a), (long long)H, (long long)H);
    const int64_t ne[4] = {P * H * T * S + N * P * H * S, 1, 1, 1};
    return node_new(g, TSR_OP_SSM_SCAN, TSR_DTYPE_F32, ne, 4, src);
}

graph_tensor *graph_delta_net(graph *g, graph_tensor *state, graph_tensor *qkv, graph_tensor *gates, graph_tensor *a,
                              float eps, float scale, bool kv_tiled) {
    graph_tensor *src[4] = {state, qkv, gates, a};
    if (!sources_ok(g, "delta_net", 4, src)) return NULL;
    for (int i = 0; i < 4; i++)
        if (!want_dtype(g, "delta_net", src[i], TSR_DTYPE_F32, "input")) return NULL;
    const int64_t Dv = state->t.ne[0], Dk = state->t.ne[1], H = state->t.ne[2], S = state->t.ne[3];
    const int64_t T = qkv->t.ne[1], qk = qkv->t.ne[0] - H * Dv;
    if (qkv->t.ne[2] != S || qkv->t.ne[3] != 1 || qk < 2 * Dk || qk % (2 * Dk) != 0 || H % (qk / (2 * Dk)) != 0)
        return graph_fail(g, "delta_net: qkv %s does not fit state %s (needs [2*Hk*Dk + H*Dv, T, S], H %% Hk == 0)",
                          SHAPE(qkv), SHAPE(state));
    if (gates->t.ne[0] != H || gates->t.ne[1] != 2 || gates->t.ne[2] != T || gates->t.ne[3] != S)
        return graph_fail(g, "delta_net: gates %s is not [%lld, 2, %lld, %lld]", SHAPE(gates), (long long)H,
                          (long long)T, (long long)S);
    if (graph_tensor_nelements(a) != H || (a->t.ne[0] != H && a->t.ne[1] != H))
        return graph_fail(g, "delta_net: A %s is not [%lld] or [1, %lld]", SHAPE(a), (long long)H, (long long)H);
    if (!(eps > 0.0f && eps < 1.0f && scale == scale && scale - scale == 0.0f))
        return graph_fail(g, "delta_net: eps %g must be in (0, 1) and scale %g finite", (double)eps, (double)scale);
    const int64_t ne[4] = {Dv * H * T * S + Dv * Dk * H * S, 1, 1, 1};
    graph_tensor *t = node_new(g, TSR_OP_DELTA_NET, TSR_DTYPE_F32, ne, 4, src);
    if (t)
        tsr_delta_net_params_put(&(tsr_delta_net_params){.eps = eps, .scale = scale, .kv_tiled = kv_tiled},
                                 t->iparams, t->fparams);
    return t;
}

graph_tensor *graph_flash_attn(graph *g, graph_tensor *q, graph_tensor *k, graph_tensor *v,
                               graph_tensor *mask, float scale) {
    graph_tensor *src[4] = {q, k, v, mask};
    if (!sources_ok(g, "flash_attn", 3, src)) return NULL;
    if (!want_dtype(g, "flash_attn", q, TSR_DTYPE_F32, "q")) return NULL;
    for (int i = 1; i < 3; i++)
        if (!tsr_flash_attn_kv_dtype(src[i]->t.dtype))
            return graph_fail(g, "flash_attn: %s %s is %s, expected F32, F16, BF16 or a KV block type",
                              i == 1 ? "k" : "v", SHAPE(src[i]), dtype_name(src[i]->t.dtype));
    const int64_t D = q->t.ne[0], n_q = q->t.ne[1], H = q->t.ne[2];
    if (q->t.ne[3] != 1 || k->t.ne[3] != 1 || v->t.ne[3] != 1 || k->t.ne[0] != D ||
        v->t.ne[0] != D || !same_shape(k, v) || k->t.ne[2] <= 0 || H % k->t.ne[2] != 0)
        return graph_fail(g, "flash_attn: q %s, k %s, v %s: expected q [D, n_q, H], k and v "
                             "[D, n_kv, H_kv] with H a multiple of H_kv",
                          SHAPE(q), SHAPE(k), SHAPE(v));
    if (mask) {
        if (mask->t.dtype != TSR_DTYPE_F32 && mask->t.dtype != TSR_DTYPE_F16)
            return graph_fail(g, "flash_attn: mask %s is %s, expected F32 or F16", SHAPE(mask),
                              dtype_name(mask->t.dtype));
        if (mask->t.ne[0] != k->t.ne[1] || mask->t.ne[1] < n_q)
            return graph_fail(g, "flash_attn: mask %s does not cover %lld keys x %lld queries",
                              SHAPE(mask), (long long)k->t.ne[1], (long long)n_q);
    }
    const int64_t ne[4] = {D, H, n_q, 1};
    graph_tensor *t = node_new(g, TSR_OP_FLASH_ATTN, TSR_DTYPE_F32, ne, 4, src);
    if (t) tsr_flash_attn_params_put(&(tsr_flash_attn_params){.scale = scale}, t->iparams, t->fparams);
    return t;
}

/* ----------------------------------------------- mixture of experts (1.4) */

graph_tensor *graph_mul_mat_id(graph *g, graph_tensor *experts, graph_tensor *x, graph_tensor *ids) {
    graph_tensor *src[3] = {experts, x, ids};
    if (!sources_ok(g, "mul_mat_id", 3, src)) return NULL;
    if (!want_dtype(g, "mul_mat_id", x, TSR_DTYPE_F32, "activations") ||
        !want_dtype(g, "mul_mat_id", ids, TSR_DTYPE_I32, "expert ids"))
        return NULL;
    const int32_t wt = experts->t.dtype;
    if (!is_float_dtype(wt) && !tsr_dtype_is_quantized(wt))
        return graph_fail(g, "mul_mat_id: experts %s are %s, expected a weight type", SHAPE(experts),
                          dtype_name(wt));
    if (experts->t.nb[0] != tsr_dtype_block_bytes(wt))
        return graph_fail(g, "mul_mat_id: experts %s: rows must be contiguous", SHAPE(experts));
    if (experts->t.ne[3] != 1 || x->t.ne[3] != 1 || ids->t.ne[2] != 1 || ids->t.ne[3] != 1)
        return graph_fail(g, "mul_mat_id: experts %s, activations %s, ids %s: expected [K, N, E], "
                             "[K, n_b, T] and [n_used, T]",
                          SHAPE(experts), SHAPE(x), SHAPE(ids));
    if (experts->t.ne[0] != x->t.ne[0])
        return graph_fail(g, "mul_mat_id: experts %s x activations %s: inner dimensions differ (%lld vs %lld)",
                          SHAPE(experts), SHAPE(x), (long long)experts->t.ne[0], (long long)x->t.ne[0]);
    const int64_t n_used = ids->t.ne[0], T = ids->t.ne[1];
    if (x->t.ne[2] != T)
        return graph_fail(g, "mul_mat_id: activations %s have %lld tokens, ids %s %lld", SHAPE(x),
                          (long long)x->t.ne[2], SHAPE(ids), (long long)T);
    if (x->t.ne[1] != 1 && x->t.ne[1] != n_used)
        return graph_fail(g, "mul_mat_id: activations %s: ne[1] must be 1 or the %lld experts per token of ids %s",
                          SHAPE(x), (long long)n_used, SHAPE(ids));
    const int64_t ne[4] = {experts->t.ne[1], n_used, T, 1};
    return node_new(g, TSR_OP_MUL_MAT_ID, TSR_DTYPE_F32, ne, 3, src);
}

graph_tensor *graph_top_k(graph *g, graph_tensor *a, int64_t k) {
    if (!sources_ok(g, "top_k", 1, &a)) return NULL;
    if (!want_dtype(g, "top_k", a, TSR_DTYPE_F32, "input")) return NULL;
    if (k < 1 || k > a->t.ne[0])
        return graph_fail(g, "top_k: %s: k = %lld is not 1..%lld", SHAPE(a), (long long)k, (long long)a->t.ne[0]);
    const int64_t ne[4] = {k, a->t.ne[1], a->t.ne[2], a->t.ne[3]};
    return node_new(g, TSR_OP_TOP_K, TSR_DTYPE_I32, ne, 1, &a);
}

graph_tensor *graph_sum_rows(graph *g, graph_tensor *a) {
    if (!sources_ok(g, "sum_rows", 1, &a)) return NULL;
    if (!want_dtype(g, "sum_rows", a, TSR_DTYPE_F32, "input")) return NULL;
    const int64_t ne[4] = {1, a->t.ne[1], a->t.ne[2], a->t.ne[3]};
    return node_new(g, TSR_OP_SUM_ROWS, TSR_DTYPE_F32, ne, 1, &a);
}

graph_tensor *graph_div(graph *g, graph_tensor *a, graph_tensor *b) { return binary(g, TSR_OP_DIV, a, b); }

graph_tensor *graph_sigmoid(graph *g, graph_tensor *a) {
    if (!sources_ok(g, "sigmoid", 1, &a)) return NULL;
    if (!want_dtype(g, "sigmoid", a, TSR_DTYPE_F32, "input")) return NULL;
    graph_tensor *c = graph_tensor_is_contiguous(a) ? a : graph_cont(g, a);
    const int64_t n = graph_tensor_nelements(a);
    graph_tensor *x = graph_reshape_2d(g, c, 1, n);       /* [1, n]        */
    graph_tensor *zero = graph_scale(g, x, 0.0f, 0.0f);   /* [1, n] of 0   */
    graph_tensor *pair = graph_concat(g, x, zero, 0);     /* [2, n]: (a, 0) */
    graph_tensor *sm = graph_soft_max(g, pair, NULL, 1.0f, 0.0f);
    if (!sm) return NULL;
    graph_tensor *first = graph_view_2d(g, sm, 1, n, sm->t.nb[1], 0); /* e^a / (e^a + 1) */
    graph_tensor *out = graph_cont(g, first);
    return out ? graph_reshape_4d(g, out, a->t.ne[0], a->t.ne[1], a->t.ne[2], a->t.ne[3]) : NULL;
}

void graph_node_to_tsr(const graph_tensor *t, tsr_node *out) {
    memset(out, 0, sizeof *out);
    out->op = t->op;
    out->n_src = t->n_src;
    /* The ABI hands plugins a writable dst; the graph owns it. */
    out->dst = (tsr_tensor *)&t->t;
    for (int i = 0; i < t->n_src && i < TSR_MAX_SRC; i++)
        out->src[i] = t->src[i] ? &t->src[i]->t : NULL;
    memcpy(out->iparams, t->iparams, sizeof out->iparams);
    memcpy(out->fparams, t->fparams, sizeof out->fparams);
}
