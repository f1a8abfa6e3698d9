/*
 * conf_case — one conformance case: build its tensors and data, compute it
 * with ref and on the device under test, compare, count.
 *
 * Data conversions (random f32 into F16/BF16/quantized sources, results back
 * to f32 for comparison) go through ref's CPY: the oracle converts, so the
 * suite has one definition of every dtype.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/plugin_check.h>

#include "conformance/conf_internal.h"
#include "ref/ref.h"
#include "tensor/dtype.h"
#include "util/error.h"

enum {
    CONF_MAX_FAILURES_SHOWN = 8,
    /* A case on the device taking longer than this is a hang: a deadlocked
     * or lost compute cannot be cancelled from here, so the suite reports
     * the case and exits (status 1). Generous for first-use shader builds. */
    CONF_CASE_TIMEOUT_S = 120
};

/* The case on the device right now, for the hang report. */
static const char *volatile case_on_device;

static void on_hang(int sig) {
    (void)sig;
    static const char head[] = "\nFAIL (hang) the device did not finish within 120 s: ";
    const char *name = case_on_device ? case_on_device : "?";
    ssize_t ignored = write(STDERR_FILENO, head, sizeof head - 1);
    ignored = write(STDERR_FILENO, name, strlen(name));
    ignored = write(STDERR_FILENO, "\n", 1);
    (void)ignored;
    _exit(1);
}

/* ------------------------------------------------------------------ random */

uint64_t conf_rand_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float conf_rand_uniform(uint64_t *state, float lo, float hi) {
    double u = (double)(conf_rand_next(state) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    return lo + (float)(u * (double)(hi - lo));
}

bool conf_dtype_is_quantized(int32_t dtype) { return tsr_dtype_block_size(dtype) > 1; }

int32_t conf_weight_dtype_next(int32_t prev) {
    for (int32_t dt = prev + 1; dt < TSR_DTYPE_COUNT; dt++) {
        const dtype_traits *tr = dtype_traits_get(dt);
        bool is_float = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_BF16;
        if (!tr || !tr->supported) continue;
        /* quantized: made by its quantizer, or (the grid IQ formats) from
         * random bytes with a sane scale */
        if (!is_float && !(tr->quantized && tr->to_f32 && (tr->from_f32 || conf_dtype_random_fill(dt)))) continue;
        if (tsr_dtype_block_size(dt) == 0) continue; /* the ABI header must know its geometry */
        return dt;
    }
    return -1;
}

/* ------------------------------------------------------------ building */

void conf_case_init(conf_case *c, int32_t op, const char *fmt, ...) {
    memset(c, 0, sizeof *c);
    c->node.op = op;
    c->dst.storage = -1;
    for (int i = 0; i < TSR_MAX_SRC; i++) c->src[i].storage = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->name, sizeof c->name, fmt, ap);
    va_end(ap);
}

/* Strides and storage size for a layout; returns the storage bytes. */
static uint64_t layout_tensor(tsr_tensor *t, conf_layout layout) {
    int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    int order[4] = {0, 1, 2, 3}; /* order[p]: the dimension stored p-th innermost */
    if (layout == CONF_PERMUTED) {
        order[1] = 2;
        order[2] = 1;
    } else if (layout == CONF_TRANSPOSED && bs == 1) {
        order[0] = 1;
        order[1] = 0;
    }
    const int64_t pad = layout == CONF_PADDED ? 3 * bb : 0;
    int64_t stride = bb;
    for (int p = 0; p < 4; p++) {
        int d = order[p];
        t->nb[d] = stride;
        stride *= d == 0 ? t->ne[0] / bs : t->ne[d];
        if (p == 0) stride += pad;
    }
    t->offset = layout == CONF_PADDED ? (uint64_t)(2 * bb) : 0;
    return t->offset + (uint64_t)stride + (uint64_t)pad;
}

static int32_t add_storage(conf_case *c, uint64_t size) {
    if (c->n_storage >= CONF_MAX_STORAGE) {
        c->failed_to_build = true;
        return -1;
    }
    conf_storage *s = &c->storage[c->n_storage];
    memset(s, 0, sizeof *s);
    s->size = size;
    s->init = malloc(size ? size : 1);
    if (!s->init) {
        c->failed_to_build = true;
        return -1;
    }
    memset(s->init, 0xff, size); /* NaN in every float dtype: reading a gap shows */
    return c->n_storage++;
}

static void set_shape(tsr_tensor *t, int32_t dtype, const int64_t ne[4]) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    for (int d = 0; d < 4; d++) t->ne[d] = ne[d];
    t->name = "";
}

/* A view of t with its bytes at data (for ref-side computations). */
static tsr_tensor host_view(const tsr_tensor *t, uint8_t *storage_base) {
    tsr_tensor v = *t;
    v.buffer = NULL;
    v.data = storage_base + t->offset;
    v.offset = 0;
    return v;
}

/* Convert n contiguous f32 values into tensor t (any layout) with ref CPY. */
static int store_f32(const tsr_tensor *t, uint8_t *storage_base, const float *values) {
    tsr_tensor dst = host_view(t, storage_base);
    tsr_tensor src = {.dtype = TSR_DTYPE_F32, .ne = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]},
                      .data = (void *)values, .name = "values"};
    src.nb[0] = 4;
    for (int d = 1; d < 4; d++) src.nb[d] = src.nb[d - 1] * src.ne[d - 1];
    tsr_node cpy = {.op = TSR_OP_CPY, .n_src = 1, .dst = &dst, .src = {&src}};
    return ref_compute(&cpy, 1, NULL) == TSR_OK ? 0 : -1;
}

/* Tensor t's elements as contiguous f32 (ne order), via ref CPY; NULL on error. */
static float *load_f32(const tsr_tensor *t, uint8_t *storage_base) {
    int64_t n = tsr_tensor_nelements(t);
    float *values = malloc((size_t)n * sizeof *values);
    if (!values) return NULL;
    tsr_tensor src = host_view(t, storage_base);
    tsr_tensor dst = {.dtype = TSR_DTYPE_F32, .ne = {n, 1, 1, 1}, .nb = {4, 4 * n, 4 * n, 4 * n},
                      .data = values, .name = "values"};
    tsr_node cpy = {.op = TSR_OP_CPY, .n_src = 1, .dst = &dst, .src = {&src}};
    if (ref_compute(&cpy, 1, NULL) != TSR_OK) {
        free(values);
        return NULL;
    }
    return values;
}

static uint8_t *element_ptr(const tsr_tensor *t, uint8_t *base, int64_t i0, int64_t i1, int64_t i2,
                            int64_t i3) {
    return base + t->offset + (i0 / tsr_dtype_block_size(t->dtype)) * t->nb[0] + i1 * t->nb[1] +
           i2 * t->nb[2] + i3 * t->nb[3];
}

/* Types the host reads but cannot produce take random blocks. */
bool conf_dtype_random_fill(int32_t dtype) {
    const dtype_traits *tr = dtype_traits_get(dtype);
    uint8_t probe[512] = {0};
    return tr && tr->quantized && !tr->from_f32 && tr->block_bytes <= sizeof probe &&
           dtype_block_set_scale(dtype, probe, 1.0f) == 0;
}

/* Random bytes in every block of t, each block's scale set to a small
 * value (a random one could be inf or NaN). */
static void fill_random_blocks(conf_runner *r, const tsr_tensor *t, uint8_t *base) {
    const int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0 += bs) {
                    uint8_t *b = element_ptr(t, base, i0, i1, i2, i3);
                    for (int64_t k = 0; k < bb; k++) b[k] = (uint8_t)conf_rand_next(&r->seed);
                    dtype_block_set_scale(t->dtype, b, conf_rand_uniform(&r->seed, 0.002f, 0.02f));
                }
}

static int fill_tensor(conf_runner *r, conf_tensor *ct, uint8_t *base, conf_fill fill) {
    tsr_tensor *t = &ct->t;
    const int64_t n = tsr_tensor_nelements(t);
    if (conf_dtype_random_fill(t->dtype)) {
        fill_random_blocks(r, t, base);
        return 0;
    }
    if (t->dtype == TSR_DTYPE_I32) {
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                        int64_t range = fill.kind == CONF_FILL_INDEX && fill.range > 0 ? fill.range : 1;
                        int32_t v = (int32_t)(conf_rand_next(&r->seed) % (uint64_t)range);
                        memcpy(element_ptr(t, base, i0, i1, i2, i3), &v, sizeof v);
                    }
        return 0;
    }
    float *values = malloc((size_t)n * sizeof *values);
    if (!values) return -1;
    for (int64_t i = 0; i < n; i++) {
        if (fill.kind == CONF_FILL_MASK) {
            int64_t j = i % t->ne[0], row = (i / t->ne[0]) % t->ne[1];
            int64_t visible = t->ne[0] - fill.visible_gap + 1 + row; /* causal, KV-cache style */
            values[i] = j < visible ? conf_rand_uniform(&r->seed, fill.lo, 0.0f) : -INFINITY;
        } else {
            values[i] = conf_rand_uniform(&r->seed, fill.lo, fill.hi);
        }
    }
    int rc = store_f32(t, base, values);
    free(values);
    return rc;
}

/* A case's number in its family and its seed: from the family and the
 * number only, so --op and --case see the same data as a full run. */
static void case_seed(conf_runner *r, conf_case *c) {
    if (c->seeded) return;
    c->seeded = true;
    c->index = r->case_index++;
    uint64_t s = r->family_seed ^ ((uint64_t)(c->index + 1) * 0x9e3779b97f4a7c15ull);
    c->seed = conf_rand_next(&s);
    r->seed = c->seed;
}

conf_tensor *conf_case_src(conf_runner *r, conf_case *c, int i, int32_t dtype, const int64_t ne[4],
                           conf_layout layout, conf_fill fill) {
    case_seed(r, c);
    conf_tensor *ct = &c->src[i];
    set_shape(&ct->t, dtype, ne);
    uint64_t size = layout_tensor(&ct->t, layout);
    ct->storage = add_storage(c, size);
    if (ct->storage < 0) return ct;
    if (fill_tensor(r, ct, c->storage[ct->storage].init, fill)) c->failed_to_build = true;
    if (c->node.n_src < i + 1) c->node.n_src = i + 1;
    return ct;
}

void conf_case_src_none(conf_case *c, int i) {
    c->src[i].storage = -1;
    if (c->node.n_src < i + 1) c->node.n_src = i + 1;
}

conf_tensor *conf_case_dst(conf_case *c, int32_t dtype, const int64_t ne[4], conf_layout layout) {
    conf_tensor *ct = &c->dst;
    set_shape(&ct->t, dtype, ne);
    ct->storage = add_storage(c, layout_tensor(&ct->t, layout));
    return ct;
}

void conf_case_dst_inplace(conf_case *c, int i) {
    c->dst.t = c->src[i].t;
    c->dst.storage = c->src[i].storage;
}

void conf_case_dst_as(conf_case *c, int32_t dtype, const int64_t ne[4], bool in_place, conf_layout layout) {
    if (in_place)
        conf_case_dst_inplace(c, 0);
    else
        conf_case_dst(c, dtype, ne, layout);
}

void conf_case_next_node(conf_case *c, int32_t op) {
    if (c->n_earlier >= CONF_MAX_NODES - 1) {
        c->failed_to_build = true;
        return;
    }
    conf_node *n = &c->earlier[c->n_earlier++];
    *n = (conf_node){.node = c->node, .dst = c->dst, .tol = c->tol, .weight_src0 = c->weight_src0};
    memcpy(n->src, c->src, sizeof n->src);
    memset(&c->node, 0, sizeof c->node);
    c->node.op = op;
    c->dst.storage = -1;
    for (int i = 0; i < TSR_MAX_SRC; i++) c->src[i].storage = -1;
    c->tol = (conf_tol){0, 0, 0};
    c->weight_src0 = false;
}

void conf_case_src_from(conf_case *c, int i, int k) {
    if (k < 0 || k >= c->n_earlier) {
        c->failed_to_build = true;
        return;
    }
    c->src[i] = c->earlier[k].dst;
    if (c->node.n_src < i + 1) c->node.n_src = i + 1;
}

/* ------------------------------------------------------------- running */

/* The case's nodes in order: earlier ones, then the one built last. */
static int32_t case_nodes(const conf_case *c, conf_node *list) {
    for (int32_t k = 0; k < c->n_earlier; k++) list[k] = c->earlier[k];
    conf_node *last = &list[c->n_earlier];
    *last = (conf_node){.node = c->node, .dst = c->dst, .tol = c->tol, .weight_src0 = c->weight_src0};
    memcpy(last->src, c->src, sizeof last->src);
    return c->n_earlier + 1;
}

static bool storage_is_written(const conf_node *list, int32_t n, int32_t s) {
    for (int32_t k = 0; k < n; k++)
        if (list[k].dst.storage == s) return true;
    return false;
}

static void case_free(conf_runner *r, conf_case *c) {
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        if (st->buf) r->dev->api->buffer_free(r->dev, st->buf);
        free(st->init);
        free(st->ref_out);
        free(st->dev_out);
        memset(st, 0, sizeof *st);
    }
    c->n_storage = 0;
}

/* The ABI tensors of one node. */
typedef struct node_tensors {
    tsr_tensor src[TSR_MAX_SRC];
    tsr_tensor dst;
} node_tensors;

/* Node k with its tensors pointing into per-storage host copies. */
static tsr_node node_on_host(const conf_node *cn, node_tensors *nt, uint8_t *const bases[]) {
    tsr_node node = cn->node;
    for (int i = 0; i < TSR_MAX_SRC; i++) {
        node.src[i] = NULL;
        if (i < node.n_src && cn->src[i].storage >= 0) {
            nt->src[i] = host_view(&cn->src[i].t, bases[cn->src[i].storage]);
            node.src[i] = &nt->src[i];
        }
    }
    nt->dst = host_view(&cn->dst.t, bases[cn->dst.storage]);
    node.dst = &nt->dst;
    return node;
}

static void record(conf_runner *r, conf_case *c, int outcome, double ratio, const char *detail) {
    /* outcome: 0 pass, 1 fail, 2 unsupported */
    conf_stats *s = &r->family;
    if (outcome == 0) s->passed++;
    if (outcome == 1) s->failed++;
    if (outcome == 2) s->unsupported++;
    if (outcome != 2 && ratio > s->worst) s->worst = ratio;
    if (outcome == 1 && !r->verbose && r->family_failures_shown++ >= CONF_MAX_FAILURES_SHOWN) return;
    if (outcome == 1 || r->verbose) {
        static const char *const word[] = {"ok  ", "FAIL", "unsupported (falls back)"};
        fprintf(r->out, "    %s #%d %s%s%s (seed %016llx)\n", word[outcome], (int)c->index, c->name,
                detail[0] ? ": " : "", detail, (unsigned long long)c->seed);
    }
    if (outcome == 1 && !r->rerun_shown) {
        r->rerun_shown = true;
        fprintf(r->out, "    re-run one case: tessera plugin check %s --device %d --op %s --case %d\n",
                r->target ? r->target : "PATH", (int)r->device_index, r->family_name ? r->family_name : "?",
                (int)c->index);
    }
}

/* Mark the bytes of storage s that hold some node's dst elements. */
static void cover_dst(const conf_tensor *dst, uint8_t *mask) {
    const tsr_tensor *t = &dst->t;
    int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0 += bs)
                    memset(element_ptr(t, mask, i0, i1, i2, i3), 1, (size_t)bb);
}

/* Allowed error for one element. */
static double allowed(const conf_tol *tol, double want, double max_want) {
    return tol->abs + tol->rel * fabs(want) + tol->norm * max_want;
}

/* One unit in the last place of want in a 16-bit dst format: a device
 * whose f32 result differs from ref's by a hair may round to the
 * neighbouring F16/BF16 value. 0 for F32 dst. */
static double dst_ulp(int32_t dtype, double want) {
    const int mant = dtype == TSR_DTYPE_F16 ? 10 : dtype == TSR_DTYPE_BF16 ? 7 : -1;
    if (mant < 0) return 0.0;
    int e;
    frexp(fabs(want), &e); /* |want| = f * 2^e, f in [0.5, 1) */
    const int min_e = dtype == TSR_DTYPE_F16 ? -13 : -125; /* subnormal spacing */
    return ldexp(1.0, (e - 1 > min_e ? e - 1 : min_e) - mant);
}

/* Compare float values; returns 0 pass / 1 fail, worst ratio and detail. */
static int compare_values(const conf_node *cn, const float *want, const float *got, int64_t n,
                          bool exact, double *ratio_out, char *detail, size_t detail_size) {
    double max_want = 0.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(want[i]) && fabs(want[i]) > max_want) max_want = fabs(want[i]);
    double worst = 0.0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n; i++) {
        double w = want[i], g = got[i], ratio;
        if (isnan(w) || isnan(g)) {
            ratio = isnan(w) && isnan(g) ? 0.0 : INFINITY;
        } else if (isinf(w) || isinf(g)) {
            ratio = w == g ? 0.0 : INFINITY;
        } else {
            double diff = fabs(g - w);
            double lim = exact ? 0.0 : allowed(&cn->tol, w, max_want) + dst_ulp(cn->dst.t.dtype, w);
            ratio = diff == 0.0 ? 0.0 : lim > 0.0 ? diff / lim : INFINITY;
        }
        if (ratio > worst || worst_i < 0) {
            worst = ratio;
            worst_i = i;
        }
    }
    *ratio_out = worst;
    if (worst_i >= 0 && worst > 1.0) {
        const tsr_tensor *t = &cn->dst.t;
        int64_t i = worst_i;
        snprintf(detail, detail_size,
                 "element %lld [%lld,%lld,%lld,%lld] = %.9g, ref %.9g (error %.3g, %.3g x allowed)",
                 (long long)i, (long long)(i % t->ne[0]), (long long)(i / t->ne[0] % t->ne[1]),
                 (long long)(i / t->ne[0] / t->ne[1] % t->ne[2]),
                 (long long)(i / t->ne[0] / t->ne[1] / t->ne[2]), (double)got[i], (double)want[i],
                 fabs((double)got[i] - (double)want[i]), worst);
        return 1;
    }
    return 0;
}

/* Quantized dst (CPY into a quantized type): quantizers may round
 * differently, so judge the quantization error against the f32 source:
 * RMS error within 5% of ref's and max error within 2x ref's. */
static int compare_quantized(const float *want, const float *got, const float *source, int64_t n,
                             double *ratio_out, char *detail, size_t detail_size) {
    double se_ref = 0, se_dev = 0, max_ref = 0, max_dev = 0;
    for (int64_t i = 0; i < n; i++) {
        double er = fabs((double)want[i] - source[i]), ed = fabs((double)got[i] - source[i]);
        if (isnan(ed)) ed = INFINITY;
        se_ref += er * er;
        se_dev += ed * ed;
        if (er > max_ref) max_ref = er;
        if (ed > max_dev) max_dev = ed;
    }
    double rms_ref = sqrt(se_ref / (double)n), rms_dev = sqrt(se_dev / (double)n);
    double lim_rms = 1.05 * rms_ref + 1e-6, lim_max = 2.0 * max_ref + 1e-6;
    double ratio = fmax(rms_dev / lim_rms, max_dev / lim_max);
    *ratio_out = ratio;
    if (!(ratio <= 1.0)) {
        snprintf(detail, detail_size, "quantization error rms %.3g max %.3g, ref's rms %.3g max %.3g",
                 rms_dev, max_dev, rms_ref, max_ref);
        return 1;
    }
    return 0;
}

static int compare_i32(const conf_node *cn, const uint8_t *want_base, const uint8_t *got_base,
                       double *ratio, char *detail, size_t detail_size) {
    const tsr_tensor *t = &cn->dst.t;
    int64_t flat = 0;
    *ratio = 0.0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++, flat++) {
                    int32_t w, g;
                    memcpy(&w, element_ptr(t, (uint8_t *)want_base, i0, i1, i2, i3), 4);
                    memcpy(&g, element_ptr(t, (uint8_t *)got_base, i0, i1, i2, i3), 4);
                    if (w != g) {
                        *ratio = INFINITY;
                        snprintf(detail, detail_size, "element %lld = %d, ref %d", (long long)flat,
                                 (int)g, (int)w);
                        return 1;
                    }
                }
    return 0;
}

/* One node's dst values, judged; 0 pass / 1 fail. */
static int judge_node(conf_runner *r, const conf_case *c, const conf_node *cn, double *ratio,
                      char *detail, size_t detail_size) {
    const conf_storage *ds = &c->storage[cn->dst.storage];
    const tsr_tensor *t = &cn->dst.t;
    *ratio = 0.0;
    if (t->dtype == TSR_DTYPE_I32) return compare_i32(cn, ds->ref_out, ds->dev_out, ratio, detail, detail_size);

    int64_t n = tsr_tensor_nelements(t);
    float *want = load_f32(t, ds->ref_out), *got = load_f32(t, ds->dev_out), *source = NULL;
    int rc = 1;
    if (!want || !got) {
        snprintf(detail, detail_size, "cannot convert dst to f32: %s", error_get());
        goto done;
    }
    if (conf_dtype_is_quantized(t->dtype) && !r->exact) {
        if (memcmp(ds->dev_out, ds->ref_out, ds->size) == 0) {
            rc = 0; /* same bytes as ref's quantizer */
            goto done;
        }
        const conf_tensor *s0 = &cn->src[0];
        source = load_f32(&s0->t, c->storage[s0->storage].ref_out);
        if (!source) {
            snprintf(detail, detail_size, "cannot convert src0 to f32: %s", error_get());
            goto done;
        }
        rc = compare_quantized(want, got, source, n, ratio, detail, detail_size);
        goto done;
    }
    rc = compare_values(cn, want, got, n, r->exact, ratio, detail, detail_size);
done:
    free(want);
    free(got);
    free(source);
    return rc;
}

/* Everything the device wrote, judged; 0 pass / 1 fail. */
static int judge(conf_runner *r, conf_case *c, const conf_node *list, int32_t n_nodes,
                 double *ratio, char *detail, size_t detail_size) {
    *ratio = 0.0;
    for (int32_t s = 0; s < c->n_storage; s++) {
        const conf_storage *st = &c->storage[s];
        if (!storage_is_written(list, n_nodes, s)) {
            /* sources come back untouched */
            if (memcmp(st->dev_out, st->init, st->size)) {
                snprintf(detail, detail_size, "the device modified a source buffer (storage %d)", (int)s);
                *ratio = INFINITY;
                return 1;
            }
            continue;
        }
        /* bytes of a dst buffer outside every dst stay as they were */
        uint8_t *mask = calloc(st->size ? st->size : 1, 1);
        if (!mask) {
            snprintf(detail, detail_size, "out of memory while comparing");
            return 1;
        }
        for (int32_t k = 0; k < n_nodes; k++)
            if (list[k].dst.storage == s) cover_dst(&list[k].dst, mask);
        for (uint64_t b = 0; b < st->size; b++)
            if (!mask[b] && st->dev_out[b] != st->ref_out[b]) {
                snprintf(detail, detail_size, "byte %llu of a dst buffer lies outside dst and was changed",
                         (unsigned long long)b);
                free(mask);
                *ratio = INFINITY;
                return 1;
            }
        free(mask);
        if (r->exact && memcmp(st->dev_out, st->ref_out, st->size)) {
            snprintf(detail, detail_size, "bytes differ from ref's (storage %d)", (int)s);
            *ratio = INFINITY;
            /* fall through to the values for a more precise message */
        }
    }
    int failed = *ratio > 0.0;
    for (int32_t k = 0; k < n_nodes; k++) {
        double node_ratio = 0.0;
        char node_detail[400] = "";
        if (judge_node(r, c, &list[k], &node_ratio, node_detail, sizeof node_detail)) {
            if (n_nodes > 1)
                snprintf(detail, detail_size, "node %d (%s): %s", (int)k, ref_op_name(list[k].node.op),
                         node_detail);
            else
                snprintf(detail, detail_size, "%s", node_detail);
            *ratio = fmax(*ratio, node_ratio);
            return 1;
        }
        if (node_ratio > *ratio) *ratio = node_ratio;
    }
    return failed;
}

/* Compute the case with ref on host copies (ref_out). */
static int run_ref(conf_case *c, const conf_node *list, int32_t n_nodes, char *detail,
                   size_t detail_size) {
    uint8_t *bases[CONF_MAX_STORAGE] = {0};
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        st->ref_out = malloc(st->size ? st->size : 1);
        if (!st->ref_out) {
            snprintf(detail, detail_size, "out of memory");
            return -1;
        }
        memcpy(st->ref_out, st->init, st->size);
        bases[s] = st->ref_out;
    }
    node_tensors nt[CONF_MAX_NODES];
    tsr_node nodes[CONF_MAX_NODES];
    for (int32_t k = 0; k < n_nodes; k++) nodes[k] = node_on_host(&list[k], &nt[k], bases);
    if (ref_compute(nodes, n_nodes, NULL) != TSR_OK) {
        snprintf(detail, detail_size, "the case is broken, ref cannot compute it: %s", error_get());
        return -1;
    }
    return 0;
}

/* DEV_REFUSED: compute() failed with TSR_ERR_INVALID on a bad_data case. */
typedef enum { DEV_DONE, DEV_DECLINED, DEV_ERROR, DEV_REFUSED } dev_result;

/* Storage s is passed as plain host memory (a weight read in place). */
static bool storage_in_host_memory(const conf_runner *r, const conf_node *list, int32_t n_nodes,
                                   int32_t s) {
    if (!r->info.reads_host_memory || storage_is_written(list, n_nodes, s)) return false;
    for (int32_t k = 0; k < n_nodes; k++)
        if (list[k].weight_src0 && list[k].src[0].storage == s) return true;
    return false;
}

/* The device-side view of a tensor: in its buffer, or in host memory. */
static void device_tensor(const conf_runner *r, const conf_case *c, const conf_tensor *ct,
                          tsr_tensor *out) {
    const conf_storage *st = &c->storage[ct->storage];
    *out = ct->t;
    if (!st->buf) {
        out->buffer = NULL;
        out->data = st->dev_out + ct->t.offset;
        out->offset = 0;
        return;
    }
    out->buffer = st->buf;
    out->offset = ct->t.offset;
    uint8_t *host = r->info.host_visible && r->dev->api->buffer_host_ptr
                        ? r->dev->api->buffer_host_ptr(r->dev, st->buf) : NULL;
    out->data = host ? host + ct->t.offset : NULL;
}

/* Nodes [k0, k1) that the device declined, computed by ref between the
 * device's runs: bring every buffer back, compute on the host copies, put
 * what ref wrote back in the device's buffers. */
static int run_fallback(conf_runner *r, conf_case *c, const conf_node *list, int32_t k0, int32_t k1,
                        char *detail, size_t detail_size) {
    const tsr_queue_api *q = r->queue->api;
    uint8_t *bases[CONF_MAX_STORAGE] = {0};
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        bases[s] = st->dev_out;
        if (!st->buf) continue;
        tsr_status rc = q->read(r->queue, st->buf, 0, st->dev_out, st->size);
        if (rc == TSR_OK) rc = q->synchronize(r->queue);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue read before a fallback failed with status %d", (int)rc);
            return -1;
        }
    }
    node_tensors nt[CONF_MAX_NODES];
    tsr_node nodes[CONF_MAX_NODES];
    for (int32_t k = k0; k < k1; k++) nodes[k - k0] = node_on_host(&list[k], &nt[k - k0], bases);
    if (ref_compute(nodes, k1 - k0, NULL) != TSR_OK) {
        snprintf(detail, detail_size, "ref could not compute the declined nodes: %s", error_get());
        return -1;
    }
    for (int32_t k = k0; k < k1; k++) {
        conf_storage *st = &c->storage[list[k].dst.storage];
        if (!st->buf) continue;
        tsr_status rc = q->write(r->queue, st->buf, 0, st->dev_out, st->size);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue write after a fallback failed with status %d", (int)rc);
            return -1;
        }
    }
    return 0;
}

/* Every storage of the case in a device buffer holding its initial bytes
 * (or, for host-memory storage, the host copy dev_out alone). */
static dev_result upload_storage(conf_runner *r, conf_case *c, const conf_node *list, int32_t n_nodes, char *detail,
                                 size_t detail_size) {
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        st->dev_out = malloc(st->size ? st->size : 1);
        if (!st->dev_out) {
            snprintf(detail, detail_size, "out of memory");
            return DEV_ERROR;
        }
        memcpy(st->dev_out, st->init, st->size);
        if (storage_in_host_memory(r, list, n_nodes, s)) continue; /* like an mmap'd weight */
        tsr_status rc = r->dev->api->buffer_alloc(r->dev, st->size ? st->size : 1, &st->buf);
        if (rc != TSR_OK || !st->buf) {
            st->buf = NULL;
            snprintf(detail, detail_size, "buffer_alloc(%llu) failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
        rc = r->queue->api->write(r->queue, st->buf, 0, st->init, st->size);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue write of %llu bytes failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
    }
    return DEV_DONE;
}

/* The case's nodes over the device's buffers (tensors in nt). */
static void device_nodes(conf_runner *r, conf_case *c, const conf_node *list, int32_t n_nodes, node_tensors *nt,
                         tsr_node *nodes) {
    for (int32_t k = 0; k < n_nodes; k++) {
        const conf_node *cn = &list[k];
        nodes[k] = cn->node;
        for (int i = 0; i < TSR_MAX_SRC; i++) {
            nodes[k].src[i] = NULL;
            if (i < cn->node.n_src && cn->src[i].storage >= 0) {
                device_tensor(r, c, &cn->src[i], &nt[k].src[i]);
                nodes[k].src[i] = &nt[k].src[i];
            }
        }
        device_tensor(r, c, &cn->dst, &nt[k].dst);
        nodes[k].dst = &nt[k].dst;
    }
}

/* As the host does: validate, then ask supports_op (into on_device). A
 * single node or a malformed one declined is DEV_DECLINED; a GRAPH case
 * whose device declines some nodes goes on (they run on ref). */
static dev_result ask_device(conf_runner *r, conf_case *c, const tsr_node *nodes, int32_t n_nodes, bool *on_device,
                             int32_t *n_on, char *detail, size_t detail_size) {
    *n_on = 0;
    for (int32_t k = 0; k < n_nodes; k++) {
        char why[256];
        if (!c->expect_decline && tsr_node_check(&nodes[k], why, sizeof why)) {
            snprintf(detail, detail_size, "suite bug: the ABI checker rejects node %d: %s", (int)k, why);
            return DEV_ERROR;
        }
        r->declined[0] = '\0';
        conf_backend_asking(r->declined, sizeof r->declined, &nodes[k]);
        on_device[k] = r->dev->api->supports_op(r->dev, &nodes[k]) != 0;
        conf_backend_asking(NULL, 0, NULL);
        *n_on += on_device[k];
        if (!on_device[k] && (n_nodes == 1 || c->expect_decline)) return DEV_DECLINED;
    }
    if (*n_on == 0) return DEV_DECLINED;
    if (c->expect_decline) {
        snprintf(detail, detail_size, "supports_op accepted a malformed node");
        return DEV_ERROR;
    }
    return DEV_DONE;
}

/* Each run of consecutive nodes on the device or on ref, in order. */
static dev_result compute_runs(conf_runner *r, conf_case *c, const conf_node *list, tsr_node *nodes, int32_t n_nodes,
                               const bool *on_device, char *detail, size_t detail_size) {
    for (int32_t k0 = 0; k0 < n_nodes;) {
        int32_t k1 = k0;
        while (k1 < n_nodes && on_device[k1] == on_device[k0]) k1++;
        if (on_device[k0]) {
            tsr_status rc = r->queue->api->compute(r->queue, nodes + k0, k1 - k0);
            if (rc == TSR_OK) rc = r->queue->api->synchronize(r->queue);
            if (rc == TSR_ERR_INVALID && c->bad_data) {
                snprintf(detail, detail_size, "refused");
                return DEV_REFUSED;
            }
            if (rc != TSR_OK) {
                snprintf(detail, detail_size, "supports_op said yes but compute failed with status %d", (int)rc);
                return DEV_ERROR;
            }
        } else if (run_fallback(r, c, list, k0, k1, detail, detail_size)) {
            return DEV_ERROR;
        }
        k0 = k1;
    }
    return DEV_DONE;
}

/* Every device buffer read back into its storage's dev_out. */
static dev_result read_back(conf_runner *r, conf_case *c, char *detail, size_t detail_size) {
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        if (!st->buf) continue;
        tsr_status rc = r->queue->api->read(r->queue, st->buf, 0, st->dev_out, st->size);
        if (rc == TSR_OK) rc = r->queue->api->synchronize(r->queue);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue read of %llu bytes failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
    }
    return DEV_DONE;
}

/* Upload, validate and ask supports_op for every node, compute them (the
 * declined ones of a GRAPH case on ref), read back into dev_out. */
static dev_result run_device(conf_runner *r, conf_case *c, const conf_node *list, int32_t n_nodes,
                             char *detail, size_t detail_size) {
    node_tensors nt[CONF_MAX_NODES];
    tsr_node nodes[CONF_MAX_NODES];
    bool on_device[CONF_MAX_NODES];
    int32_t n_on = 0;
    dev_result res = upload_storage(r, c, list, n_nodes, detail, detail_size);
    if (res != DEV_DONE) return res;
    device_nodes(r, c, list, n_nodes, nt, nodes);
    res = ask_device(r, c, nodes, n_nodes, on_device, &n_on, detail, detail_size);
    if (res != DEV_DONE) return res;
    res = compute_runs(r, c, list, nodes, n_nodes, on_device, detail, detail_size);
    if (res != DEV_DONE) return res;
    if (n_on < n_nodes)
        snprintf(detail, detail_size, "%d of %d nodes fell back to ref", (int)(n_nodes - n_on), (int)n_nodes);
    return read_back(r, c, detail, detail_size);
}

/* Run the device part with the hang watchdog armed. */
static dev_result run_device_watched(conf_runner *r, conf_case *c, const conf_node *list,
                                     int32_t n_nodes, char *detail, size_t detail_size) {
    fflush(r->out); /* the report so far reaches the terminal even if the device hangs */
    case_on_device = c->name;
    if (r->shared) {
        r->shared->case_index = c->index;
        r->shared->case_seed = c->seed;
        snprintf(r->shared->case_name, sizeof r->shared->case_name, "%s", c->name);
    }
    /* with --no-fork this is the caller's process: its SIGALRM handler is
     * put back after the case */
    struct sigaction watchdog, before;
    memset(&watchdog, 0, sizeof watchdog);
    watchdog.sa_handler = on_hang;
    sigemptyset(&watchdog.sa_mask);
    sigaction(SIGALRM, &watchdog, &before);
    alarm(CONF_CASE_TIMEOUT_S);
    dev_result d = run_device(r, c, list, n_nodes, detail, detail_size);
    alarm(0);
    sigaction(SIGALRM, &before, NULL);
    case_on_device = NULL;
    if (r->shared) r->shared->case_index = -1;
    return d;
}

void conf_case_run(conf_runner *r, conf_case *c) {
    case_seed(r, c);
    if (r->only_case >= 0 && c->index != r->only_case) {
        case_free(r, c);
        return;
    }
    char detail[512] = "";
    double ratio = 0.0;
    conf_node list[CONF_MAX_NODES];
    const int32_t n_nodes = case_nodes(c, list);
    bool built = !c->failed_to_build;
    for (int32_t k = 0; k < n_nodes && built; k++) built = list[k].dst.storage >= 0;
    if (!built) {
        snprintf(detail, sizeof detail, "could not build the case (out of memory or a bad dtype)");
        record(r, c, 1, INFINITY, detail);
        case_free(r, c);
        return;
    }
    if (c->expect_decline) {
        uint8_t *bases[CONF_MAX_STORAGE];
        for (int32_t s = 0; s < c->n_storage; s++) bases[s] = c->storage[s].init;
        node_tensors nt;
        tsr_node node = node_on_host(&list[n_nodes - 1], &nt, bases);
        const tsr_plugin *p = r->backend->plugin;
        if (tsr_node_check(&node, detail, sizeof detail) == 0) {
            record(r, c, 1, INFINITY, "suite bug: the ABI checker accepts this 'malformed' node");
        } else if (TSR_ABI_MINOR_OF(p->abi_version) >= 1) {
            /* A 1.1 host validates every node first: the device is never
             * asked about this one, whatever it would answer. */
            record(r, c, 0, 0.0, r->verbose ? detail : "");
        } else {
            /* built for 1.0 hosts, which did not validate: must decline */
            dev_result d = run_device_watched(r, c, list, n_nodes, detail, sizeof detail);
            /* declining is the right answer: count it as a pass */
            record(r, c, d == DEV_DECLINED ? 0 : 1, d == DEV_DECLINED ? 0.0 : INFINITY,
                   d == DEV_DECLINED ? "declined" : detail);
        }
        case_free(r, c);
        return;
    }
    if (c->bad_data) {
        /* ref must refuse it; the device refuses it or writes zeros */
        if (!run_ref(c, list, n_nodes, detail, sizeof detail)) {
            record(r, c, 1, INFINITY, "suite bug: ref computes this case of bad data");
            case_free(r, c);
            return;
        }
        const conf_node *last = &list[n_nodes - 1];
        float *zeros = calloc((size_t)tsr_tensor_nelements(&last->dst.t), sizeof *zeros);
        const int stored = zeros ? store_f32(&last->dst.t, c->storage[last->dst.storage].ref_out, zeros) : -1;
        free(zeros);
        if (stored) {
            record(r, c, 1, INFINITY, "out of memory");
            case_free(r, c);
            return;
        }
        detail[0] = '\0';
    } else if (run_ref(c, list, n_nodes, detail, sizeof detail)) {
        record(r, c, 1, INFINITY, detail);
        case_free(r, c);
        return;
    }
    switch (run_device_watched(r, c, list, n_nodes, detail, sizeof detail)) {
    case DEV_DECLINED: record(r, c, 2, 0.0, r->declined); break;
    case DEV_ERROR: record(r, c, 1, INFINITY, detail); break;
    case DEV_REFUSED: record(r, c, 0, 0.0, r->verbose ? detail : ""); break;
    case DEV_DONE: {
        int failed = judge(r, c, list, n_nodes, &ratio, detail, sizeof detail);
        if (!failed && r->verbose) snprintf(detail, sizeof detail, "%.3g x allowed", ratio);
        record(r, c, failed, ratio, detail);
        break;
    }
    }
    case_free(r, c);
}
