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

int32_t conf_weight_dtypes(int32_t *out, int32_t max) {
    int32_t n = 0;
    for (int32_t dt = 0; dt < TSR_DTYPE_COUNT && n < max; dt++) {
        const dtype_traits *tr = dtype_traits_get(dt);
        bool is_float = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_BF16;
        if (!tr || !tr->supported) continue;
        if (!is_float && !(tr->quantized && tr->to_f32 && tr->from_f32)) continue;
        if (tsr_dtype_block_size(dt) == 0) continue; /* the ABI header must know its geometry */
        out[n++] = dt;
    }
    return n;
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

static int fill_tensor(conf_runner *r, conf_tensor *ct, uint8_t *base, conf_fill fill) {
    tsr_tensor *t = &ct->t;
    const int64_t n = tsr_tensor_nelements(t);
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

conf_tensor *conf_case_src(conf_runner *r, conf_case *c, int i, int32_t dtype, const int64_t ne[4],
                           conf_layout layout, conf_fill fill) {
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

/* ------------------------------------------------------------- running */

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

typedef struct node_tensors {
    tsr_tensor src[TSR_MAX_SRC];
    tsr_tensor dst;
} node_tensors;

/* c->node with its tensors pointing into per-storage host copies. */
static tsr_node node_on_host(conf_case *c, node_tensors *nt, uint8_t *const bases[]) {
    tsr_node node = c->node;
    for (int i = 0; i < TSR_MAX_SRC; i++) {
        node.src[i] = NULL;
        if (i < node.n_src && c->src[i].storage >= 0) {
            nt->src[i] = host_view(&c->src[i].t, bases[c->src[i].storage]);
            node.src[i] = &nt->src[i];
        }
    }
    nt->dst = host_view(&c->dst.t, bases[c->dst.storage]);
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
        fprintf(r->out, "    %s %s%s%s\n", word[outcome], c->name, detail[0] ? ": " : "", detail);
    }
}

/* Bytes of the dst storage that hold dst's elements. */
static uint8_t *coverage_mask(const conf_case *c) {
    const tsr_tensor *t = &c->dst.t;
    const conf_storage *s = &c->storage[c->dst.storage];
    uint8_t *mask = calloc(s->size ? s->size : 1, 1);
    if (!mask) return NULL;
    int64_t bs = tsr_dtype_block_size(t->dtype), bb = tsr_dtype_block_bytes(t->dtype);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0 += bs)
                    memset(element_ptr(t, mask, i0, i1, i2, i3), 1, (size_t)bb);
    return mask;
}

/* Allowed error for one element. */
static double allowed(const conf_tol *tol, double want, double max_want) {
    return tol->abs + tol->rel * fabs(want) + tol->norm * max_want;
}

/* Compare float values; returns 0 pass / 1 fail, worst ratio and detail. */
static int compare_values(const conf_case *c, const float *want, const float *got, int64_t n,
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
            double diff = fabs(g - w), lim = exact ? 0.0 : allowed(&c->tol, w, max_want);
            ratio = diff == 0.0 ? 0.0 : lim > 0.0 ? diff / lim : INFINITY;
        }
        if (ratio > worst || worst_i < 0) {
            worst = ratio;
            worst_i = i;
        }
    }
    *ratio_out = worst;
    if (worst_i >= 0 && (worst > 1.0 || isnan(worst))) {
        const tsr_tensor *t = &c->dst.t;
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
static int compare_quantized(const conf_case *c, const float *want, const float *got,
                             const float *source, int64_t n, double *ratio_out, char *detail,
                             size_t detail_size) {
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
    (void)c;
    if (!(ratio <= 1.0)) {
        snprintf(detail, detail_size,
                 "quantization error rms %.3g max %.3g, ref's rms %.3g max %.3g", rms_dev, max_dev,
                 rms_ref, max_ref);
        return 1;
    }
    return 0;
}

static int compare_i32(const conf_case *c, const uint8_t *want_base, const uint8_t *got_base,
                       double *ratio, char *detail, size_t detail_size) {
    const tsr_tensor *t = &c->dst.t;
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

/* Everything the device wrote, judged; 0 pass / 1 fail. */
static int judge(conf_runner *r, conf_case *c, double *ratio, char *detail, size_t detail_size) {
    *ratio = 0.0;
    /* sources must come back untouched (unless dst shares their storage) */
    for (int32_t s = 0; s < c->n_storage; s++) {
        if (s == c->dst.storage) continue;
        if (memcmp(c->storage[s].dev_out, c->storage[s].init, c->storage[s].size)) {
            snprintf(detail, detail_size, "the device modified a source buffer (storage %d)", (int)s);
            *ratio = INFINITY;
            return 1;
        }
    }
    const conf_storage *ds = &c->storage[c->dst.storage];
    uint8_t *mask = coverage_mask(c);
    if (!mask) {
        snprintf(detail, detail_size, "out of memory while comparing");
        return 1;
    }
    for (uint64_t b = 0; b < ds->size; b++)
        if (!mask[b] && ds->dev_out[b] != ds->ref_out[b]) {
            snprintf(detail, detail_size, "byte %llu of dst's buffer lies outside dst and was changed",
                     (unsigned long long)b);
            free(mask);
            *ratio = INFINITY;
            return 1;
        }
    free(mask);

    const tsr_tensor *t = &c->dst.t;
    if (t->dtype == TSR_DTYPE_I32) return compare_i32(c, ds->ref_out, ds->dev_out, ratio, detail, detail_size);

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
        const conf_tensor *s0 = &c->src[0];
        source = load_f32(&s0->t, c->storage[s0->storage].init);
        if (!source) {
            snprintf(detail, detail_size, "cannot convert src0 to f32: %s", error_get());
            goto done;
        }
        rc = compare_quantized(c, want, got, source, n, ratio, detail, detail_size);
        goto done;
    }
    rc = compare_values(c, want, got, n, r->exact, ratio, detail, detail_size);
    if (rc == 0 && r->exact && memcmp(ds->dev_out, ds->ref_out, ds->size)) {
        snprintf(detail, detail_size, "values equal but bytes differ (NaN payload or -0)");
        rc = 1;
    }
done:
    free(want);
    free(got);
    free(source);
    return rc;
}

/* Compute the case with ref on host copies (ref_out). */
static int run_ref(conf_case *c, char *detail, size_t detail_size) {
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
    node_tensors nt;
    tsr_node node = node_on_host(c, &nt, bases);
    if (ref_compute(&node, 1, NULL) != TSR_OK) {
        snprintf(detail, detail_size, "the case is broken, ref cannot compute it: %s", error_get());
        return -1;
    }
    return 0;
}

typedef enum { DEV_DONE, DEV_DECLINED, DEV_ERROR } dev_result;

/* Upload, ask supports_op, compute, read back into dev_out. */
static dev_result run_device(conf_runner *r, conf_case *c, char *detail, size_t detail_size) {
    const tsr_device_api *api = r->dev->api;
    const tsr_queue_api *q = r->queue->api;
    bool host_weight = c->weight_src0 && r->info.reads_host_memory && c->src[0].storage >= 0 &&
                       c->src[0].storage != c->dst.storage;
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        st->dev_out = malloc(st->size ? st->size : 1);
        if (!st->dev_out) {
            snprintf(detail, detail_size, "out of memory");
            return DEV_ERROR;
        }
        memcpy(st->dev_out, st->init, st->size);
        if (host_weight && s == c->src[0].storage) continue; /* read in place, like an mmap'd weight */
        tsr_status rc = api->buffer_alloc(r->dev, st->size ? st->size : 1, &st->buf);
        if (rc != TSR_OK || !st->buf) {
            st->buf = NULL;
            snprintf(detail, detail_size, "buffer_alloc(%llu) failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
        rc = q->write(r->queue, st->buf, 0, st->init, st->size);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue write of %llu bytes failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
    }
    node_tensors nt;
    tsr_node node = c->node;
    conf_tensor *all[TSR_MAX_SRC + 1];
    tsr_tensor *out[TSR_MAX_SRC + 1];
    for (int i = 0; i < TSR_MAX_SRC; i++) {
        all[i] = i < node.n_src && c->src[i].storage >= 0 ? &c->src[i] : NULL;
        out[i] = &nt.src[i];
        node.src[i] = all[i] ? out[i] : NULL;
    }
    all[TSR_MAX_SRC] = &c->dst;
    out[TSR_MAX_SRC] = &nt.dst;
    node.dst = &nt.dst;
    for (int i = 0; i <= TSR_MAX_SRC; i++) {
        if (!all[i]) continue;
        conf_storage *st = &c->storage[all[i]->storage];
        *out[i] = all[i]->t;
        if (!st->buf) { /* plain host memory */
            out[i]->buffer = NULL;
            out[i]->data = st->dev_out + all[i]->t.offset;
            out[i]->offset = 0;
            continue;
        }
        out[i]->buffer = st->buf;
        out[i]->offset = all[i]->t.offset;
        uint8_t *host = r->info.host_visible && api->buffer_host_ptr
                            ? api->buffer_host_ptr(r->dev, st->buf) : NULL;
        out[i]->data = host ? host + all[i]->t.offset : NULL;
    }
    if (!api->supports_op(r->dev, &node)) return DEV_DECLINED;
    if (c->expect_decline) {
        snprintf(detail, detail_size, "supports_op accepted a malformed node");
        return DEV_ERROR;
    }
    tsr_status rc = q->compute(r->queue, &node, 1);
    if (rc == TSR_OK) rc = q->synchronize(r->queue);
    if (rc != TSR_OK) {
        snprintf(detail, detail_size, "supports_op said yes but compute failed with status %d", (int)rc);
        return DEV_ERROR;
    }
    for (int32_t s = 0; s < c->n_storage; s++) {
        conf_storage *st = &c->storage[s];
        if (!st->buf) continue;
        rc = q->read(r->queue, st->buf, 0, st->dev_out, st->size);
        if (rc != TSR_OK) {
            snprintf(detail, detail_size, "queue read of %llu bytes failed with status %d",
                     (unsigned long long)st->size, (int)rc);
            return DEV_ERROR;
        }
    }
    return DEV_DONE;
}

void conf_case_run(conf_runner *r, conf_case *c) {
    char detail[512] = "";
    double ratio = 0.0;
    if (c->failed_to_build || c->dst.storage < 0) {
        snprintf(detail, sizeof detail, "could not build the case (out of memory or a bad dtype)");
        record(r, c, 1, INFINITY, detail);
        case_free(r, c);
        return;
    }
    if (c->expect_decline) {
        uint8_t *bases[CONF_MAX_STORAGE];
        for (int32_t s = 0; s < c->n_storage; s++) bases[s] = c->storage[s].init;
        node_tensors nt;
        tsr_node node = node_on_host(c, &nt, bases);
        if (ref_node_check(&node, NULL, 0) == 0) {
            record(r, c, 1, INFINITY, "suite bug: ref accepts this 'malformed' node");
        } else {
            dev_result d = run_device(r, c, detail, sizeof detail);
            /* declining is the right answer: count it as a pass */
            record(r, c, d == DEV_DECLINED ? 0 : 1, d == DEV_DECLINED ? 0.0 : INFINITY,
                   d == DEV_DECLINED ? "declined" : detail);
        }
        case_free(r, c);
        return;
    }
    if (run_ref(c, detail, sizeof detail)) {
        record(r, c, 1, INFINITY, detail);
        case_free(r, c);
        return;
    }
    /* the report so far reaches the terminal even if the device hangs */
    fflush(r->out);
    case_on_device = c->name;
    signal(SIGALRM, on_hang);
    alarm(CONF_CASE_TIMEOUT_S);
    dev_result dr = run_device(r, c, detail, sizeof detail);
    alarm(0);
    case_on_device = NULL;
    switch (dr) {
    case DEV_DECLINED: record(r, c, 2, 0.0, ""); break;
    case DEV_ERROR: record(r, c, 1, INFINITY, detail); break;
    case DEV_DONE: {
        int failed = judge(r, c, &ratio, detail, sizeof detail);
        if (!failed && r->verbose) snprintf(detail, sizeof detail, "%.3g x allowed", ratio);
        record(r, c, failed, ratio, detail);
        break;
    }
    }
    case_free(r, c);
}
