/*
 * conf_gen_simple — cases for the ops that move or map elements:
 * GET_ROWS, ADD, MUL, DIV, SCALE, SILU, GELU, SWIGLU, CPY, CONCAT, ARGMAX,
 * TOP_K, SUM_ROWS.
 *
 * Shapes favour odd sizes (1, 3, 17, 33, 255) and every case family has
 * strided/permuted sources, a padded dst view, and an in-place variant where
 * the op allows it.
 */
#include <math.h>

#include "conformance/conf_internal.h"
#include "tensor/dtype.h"

#define NE(a, b, c, d) ((const int64_t[4]){a, b, c, d})
#define F32 TSR_DTYPE_F32

static const char *layout_name(conf_layout l) {
    static const char *const names[] = {"", " padded", " permuted", " transposed"};
    return names[l];
}

/* ------------------------------------------------------------- GET_ROWS */

void conf_gen_get_rows(conf_runner *r) {
    CONF_FOR_EACH_WEIGHT_DTYPE(dt) {
        const int64_t bs = tsr_dtype_block_size(dt);
        const int64_t widths[2] = {bs == 1 ? 17 : bs, bs == 1 ? 64 : 2 * bs};
        for (int w = 0; w < 2; w++)
            for (int v = 0; v < 3; v++) {
                /* v0: [n, 5] rows [3]; v1: batched [n, 33, 2] rows [7, 2];
                 * v2: padded weight rows, padded dst */
                const int64_t n = widths[w], n_rows = v == 1 ? 33 : 5, m = v == 1 ? 7 : 3;
                const int64_t b2 = v == 1 ? 2 : 1;
                const conf_layout lay = v == 2 ? CONF_PADDED : CONF_CONTIG;
                conf_case c;
                conf_case_init(&c, TSR_OP_GET_ROWS, "%s [%lld, %lld, %lld] rows [%lld, %lld]%s",
                               dtype_name(dt), (long long)n, (long long)n_rows, (long long)b2,
                               (long long)m, (long long)b2, layout_name(lay));
                c.weight_src0 = true;
                c.tol = conf_tolerance(TSR_OP_GET_ROWS, dt);
                conf_case_src(r, &c, 0, dt, NE(n, n_rows, b2, 1), lay, conf_uniform(-1, 1));
                conf_case_src(r, &c, 1, TSR_DTYPE_I32, NE(m, b2, 1, 1), CONF_CONTIG, conf_index(n_rows));
                conf_case_dst(&c, F32, NE(n, m, b2, 1), lay);
                conf_case_run(r, &c);
            }
    }
}

/* ------------------------------------------------------------- ADD, MUL */

static void gen_binary(conf_runner *r, int32_t op) {
    static const int64_t shapes[][2][4] = {
        {{17, 3, 2, 1}, {17, 3, 2, 1}}, {{17, 3, 2, 1}, {17, 1, 1, 1}},
        {{17, 3, 2, 1}, {1, 3, 1, 1}},  {{17, 3, 2, 1}, {1, 1, 1, 1}},
        {{255, 5, 1, 1}, {255, 1, 1, 1}}, {{33, 7, 3, 2}, {33, 1, 3, 1}},
        {{1, 1, 1, 1}, {1, 1, 1, 1}},   {{64, 4, 2, 3}, {64, 4, 1, 3}},
    };
    const char *name = tsr_op_name(op);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 4; v++) {
            /* v0 contiguous; v1 src0 permuted, src1 padded, dst padded;
             * v2 src0 transposed; v3 in place on src0 */
            const int64_t *a = shapes[s][0], *b = shapes[s][1];
            if (v == 2 && a[1] == 1) continue; /* nothing to transpose */
            conf_case c;
            static const char *const vname[] = {"", " permuted/padded", " transposed", " in place"};
            conf_case_init(&c, op, "%s [%lld, %lld, %lld, %lld] + [%lld, %lld, %lld, %lld]%s", name,
                           (long long)a[0], (long long)a[1], (long long)a[2], (long long)a[3],
                           (long long)b[0], (long long)b[1], (long long)b[2], (long long)b[3], vname[v]);
            c.tol = conf_tolerance(op, F32);
            conf_layout la = v == 1 ? CONF_PERMUTED : v == 2 ? CONF_TRANSPOSED : CONF_CONTIG;
            conf_case_src(r, &c, 0, F32, a, la, conf_uniform(-1, 1));
            /* DIV's divisors stay away from 0 (the quotient's rounding is relative) */
            const conf_fill fb = op == TSR_OP_DIV ? conf_uniform(0.25f, 2.0f) : conf_uniform(-1, 1);
            conf_case_src(r, &c, 1, F32, b, v == 1 ? CONF_PADDED : CONF_CONTIG, fb);
            conf_case_dst_as(&c, F32, a, v == 3, v == 1 ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

void conf_gen_add(conf_runner *r) { gen_binary(r, TSR_OP_ADD); }
void conf_gen_mul(conf_runner *r) { gen_binary(r, TSR_OP_MUL); }
void conf_gen_div(conf_runner *r) { gen_binary(r, TSR_OP_DIV); }

/* --------------------------------- SCALE, SILU, GELU, GELU_ERF (unary) */

static void gen_unary(conf_runner *r, int32_t op, const char *name, float lo, float hi) {
    static const int64_t shapes[][4] = {{1, 1, 1, 1}, {17, 3, 1, 1}, {255, 4, 2, 1}, {4096, 2, 1, 1}};
    static const float params[][2] = {{0.5f, 0.0f}, {-2.0f, 1.5f}};
    const int n_params = op == TSR_OP_SCALE ? 2 : 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int p = 0; p < n_params; p++)
            for (int v = 0; v < 4; v++) {
                /* v0 contiguous, v1 permuted source + padded dst, v2 in place,
                 * v3 F16 source and dst */
                const int64_t *ne = shapes[s];
                conf_case c;
                static const char *const vname[] = {"", " permuted/padded", " in place", " F16"};
                conf_case_init(&c, op, "%s [%lld, %lld, %lld]%s%s", name, (long long)ne[0],
                               (long long)ne[1], (long long)ne[2], op == TSR_OP_SCALE ?
                               (p ? " x*-2+1.5" : " x*0.5") : "", vname[v]);
                c.tol = conf_tolerance(op, F32);
                /* SCALE's parameters; the other unary ops have none and ignore them */
                const tsr_scale_params sp = {.scale = params[p][0], .bias = params[p][1]};
                tsr_scale_params_put(&sp, c.node.iparams, c.node.fparams);
                const int32_t dt = v == 3 ? TSR_DTYPE_F16 : F32;
                conf_case_src(r, &c, 0, dt, ne, v == 1 ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(lo, hi));
                conf_case_dst_as(&c, dt, ne, v == 2, v == 1 ? CONF_PADDED : CONF_CONTIG);
                conf_case_run(r, &c);
            }
}

void conf_gen_scale(conf_runner *r) { gen_unary(r, TSR_OP_SCALE, "SCALE", -1, 1); }
void conf_gen_silu(conf_runner *r) { gen_unary(r, TSR_OP_SILU, "SILU", -6, 6); }
void conf_gen_gelu(conf_runner *r) { gen_unary(r, TSR_OP_GELU, "GELU", -5, 5); }
/* past -6 the exact GELU is below 1e-8, where float's 1 + erf has no digits left */
void conf_gen_gelu_erf(conf_runner *r) { gen_unary(r, TSR_OP_GELU_ERF, "GELU_ERF", -6, 6); }

/* --------------------------------------------------------------- SWIGLU */

void conf_gen_swiglu(conf_runner *r) {
    static const int64_t shapes[][4] = {{1, 1, 1, 1}, {17, 3, 1, 1}, {255, 4, 2, 1}, {768, 5, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            /* v0 contiguous, v1 padded gate/up views (as from a fused
             * projection) and permuted dst, v2 in place on the gate */
            const int64_t *ne = shapes[s];
            conf_case c;
            static const char *const vname[] = {"", " padded/permuted", " in place"};
            conf_case_init(&c, TSR_OP_SWIGLU, "SWIGLU [%lld, %lld, %lld]%s", (long long)ne[0],
                           (long long)ne[1], (long long)ne[2], vname[v]);
            c.tol = conf_tolerance(TSR_OP_SWIGLU, F32);
            conf_layout l = v == 1 ? CONF_PADDED : CONF_CONTIG;
            conf_case_src(r, &c, 0, F32, ne, l, conf_uniform(-6, 6));
            conf_case_src(r, &c, 1, F32, ne, l, conf_uniform(-2, 2));
            conf_case_dst_as(&c, F32, ne, v == 2, v == 1 ? CONF_PERMUTED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ----------------------------------------------------------- SWIGLU_OAI */

/* gate and up over (-10, 10) so both clamps are met, at gpt-oss's alpha
 * and limit and at a small limit that clamps most values. */
void conf_gen_swiglu_oai(conf_runner *r) {
    static const int64_t shapes[][4] = {{1, 1, 1, 1}, {17, 3, 1, 1}, {255, 4, 2, 1}};
    static const float lim[2][2] = {{1.702f, 7.0f}, {0.5f, 1.5f}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            /* v0 contiguous, v1 padded sources and permuted dst, v2 in place */
            const int64_t *ne = shapes[s];
            const float *p = lim[v == 2];
            conf_case c;
            static const char *const vname[] = {"", " padded/permuted", " in place, limit 1.5"};
            conf_case_init(&c, TSR_OP_SWIGLU_OAI, "SWIGLU_OAI [%lld, %lld, %lld]%s", (long long)ne[0],
                           (long long)ne[1], (long long)ne[2], vname[v]);
            tsr_swiglu_oai_params_put(&(tsr_swiglu_oai_params){.alpha = p[0], .limit = p[1]}, c.node.iparams,
                                      c.node.fparams);
            c.tol = conf_tolerance(TSR_OP_SWIGLU_OAI, F32);
            conf_layout l = v == 1 ? CONF_PADDED : CONF_CONTIG;
            conf_case_src(r, &c, 0, F32, ne, l, conf_uniform(-10, 10));
            conf_case_src(r, &c, 1, F32, ne, l, conf_uniform(-10, 10));
            conf_case_dst_as(&c, F32, ne, v == 2, v == 1 ? CONF_PERMUTED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ------------------------------------------------------------------ CPY */

static void cpy_case(conf_runner *r, int32_t from, conf_layout from_lay, const int64_t *from_ne,
                     int32_t to, conf_layout to_lay, const int64_t *to_ne) {
    conf_case c;
    conf_case_init(&c, TSR_OP_CPY, "%s [%lld, %lld, %lld]%s -> %s [%lld, %lld, %lld]%s",
                   dtype_name(from), (long long)from_ne[0], (long long)from_ne[1],
                   (long long)from_ne[2], layout_name(from_lay), dtype_name(to), (long long)to_ne[0],
                   (long long)to_ne[1], (long long)to_ne[2], layout_name(to_lay));
    c.tol = conf_tolerance(TSR_OP_CPY, conf_dtype_is_quantized(from) ? from : to);
    conf_case_src(r, &c, 0, from, from_ne, from_lay, conf_uniform(-2, 2));
    conf_case_dst(&c, to, to_ne, to_lay);
    conf_case_run(r, &c);
}

void conf_gen_cpy(conf_runner *r) {
    static const int32_t floats[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const int32_t from = floats[a], to = floats[b];
            cpy_case(r, from, CONF_CONTIG, NE(17, 3, 2, 1), to, CONF_CONTIG, NE(17, 3, 2, 1));
            cpy_case(r, from, CONF_PERMUTED, NE(255, 4, 3, 1), to, CONF_CONTIG, NE(255, 4, 3, 1));
            /* into a slot of a persistent tensor (KV cache style) */
            cpy_case(r, from, CONF_CONTIG, NE(64, 5, 1, 1), to, CONF_PADDED, NE(64, 5, 1, 1));
            /* into a transposed view (llama.cpp's V cache layout) */
            cpy_case(r, from, CONF_CONTIG, NE(33, 7, 1, 1), to, CONF_TRANSPOSED, NE(33, 7, 1, 1));
            /* different shapes, same element count */
            cpy_case(r, from, CONF_TRANSPOSED, NE(34, 3, 1, 1), to, CONF_CONTIG, NE(17, 6, 1, 1));
        }
    CONF_FOR_EACH_WEIGHT_DTYPE(q) {
        if (!conf_dtype_is_quantized(q)) continue;
        const int64_t bs = tsr_dtype_block_size(q);
        const int64_t n0 = bs == 32 ? 96 : bs;
        if (!conf_dtype_random_fill(q)) { /* into q: where the host has its quantizer */
            cpy_case(r, TSR_DTYPE_F32, CONF_CONTIG, NE(n0, 3, 1, 1), q, CONF_CONTIG, NE(n0, 3, 1, 1));
            cpy_case(r, TSR_DTYPE_F16, CONF_PERMUTED, NE(n0, 2, 3, 1), q, CONF_CONTIG, NE(n0, 2, 3, 1));
            cpy_case(r, TSR_DTYPE_F32, CONF_CONTIG, NE(n0, 4, 1, 1), q, CONF_PADDED, NE(n0, 4, 1, 1));
        }
        cpy_case(r, q, CONF_CONTIG, NE(n0, 3, 1, 1), TSR_DTYPE_F32, CONF_CONTIG, NE(n0, 3, 1, 1));
        cpy_case(r, q, CONF_PADDED, NE(n0, 2, 2, 1), TSR_DTYPE_F32, CONF_PERMUTED, NE(n0, 2, 2, 1));
    }
}

/* --------------------------------------------------------------- CONCAT */

void conf_gen_concat(conf_runner *r) {
    for (int dim = 0; dim < 4; dim++)
        for (int v = 0; v < 2; v++) {
            int64_t a[4] = {17, 3, 2, 2}, b[4] = {17, 3, 2, 2}, d[4];
            b[dim] = dim == 0 ? 5 : 1 + dim;
            for (int i = 0; i < 4; i++) d[i] = i == dim ? a[i] + b[i] : a[i];
            conf_case c;
            conf_case_init(&c, TSR_OP_CONCAT, "CONCAT dim %d [17, 3, 2, 2] + [%lld, %lld, %lld, %lld]%s",
                           dim, (long long)b[0], (long long)b[1], (long long)b[2], (long long)b[3],
                           v ? " permuted/padded" : "");
            c.tol = conf_tolerance(TSR_OP_CONCAT, F32);
            tsr_concat_params_put(&(tsr_concat_params){.dim = dim}, c.node.iparams, c.node.fparams);
            conf_case_src(r, &c, 0, F32, a, v ? CONF_PERMUTED : CONF_CONTIG, conf_uniform(-1, 1));
            conf_case_src(r, &c, 1, F32, b, v ? CONF_PADDED : CONF_CONTIG, conf_uniform(-1, 1));
            conf_case_dst(&c, F32, d, v ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* --------------------------------------------------------------- ARGMAX */

void conf_gen_argmax(conf_runner *r) {
    static const int64_t shapes[][4] = {
        {1, 1, 1, 1}, {17, 3, 1, 1}, {255, 4, 1, 1}, {4096, 2, 1, 1}, {512, 3, 2, 1},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 2; v++) {
            const int64_t *ne = shapes[s];
            const int64_t rows = ne[1] * ne[2] * ne[3];
            conf_case c;
            conf_case_init(&c, TSR_OP_ARGMAX, "ARGMAX [%lld, %lld, %lld]%s", (long long)ne[0],
                           (long long)ne[1], (long long)ne[2], v ? " padded" : "");
            c.tol = conf_tolerance(TSR_OP_ARGMAX, F32);
            conf_case_src(r, &c, 0, F32, ne, v ? CONF_PADDED : CONF_CONTIG, conf_uniform(-10, 10));
            conf_case_dst(&c, TSR_DTYPE_I32, NE(rows, 1, 1, 1), CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ---------------------------------------------------------------- TOP_K */

/* Round src0's values to multiples of step (ties), then put -inf and NaN
 * in the first row when special: TOP_K's order must hold for them too. */
static void top_k_values(conf_case *c, float step, bool special) {
    const conf_tensor *ct = &c->src[0];
    if (ct->storage < 0) return;
    uint8_t *base = c->storage[ct->storage].init + ct->t.offset;
    const tsr_tensor *t = &ct->t;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    float *p = (float *)(void *)(base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
                    if (step > 0) *p = roundf(*p / step) * step;
                    if (special && i1 == 0 && i2 == 0 && i3 == 0 && i0 % 3 == 1) *p = i0 % 2 ? NAN : -INFINITY;
                }
}

void conf_gen_top_k(conf_runner *r) {
    /* [n, rows]: expert counts (8, 60, 128) and odd sizes; k from 1 to n */
    static const int64_t shapes[][5] = {
        /* n, rows, b2, k, layout (0 contig, 1 padded, 2 permuted) */
        {1, 1, 1, 1, 0},   {8, 5, 1, 2, 0},    {8, 3, 1, 8, 1},   {60, 7, 1, 4, 0},
        {128, 33, 1, 8, 0}, {17, 3, 2, 5, 2},  {128, 4, 1, 1, 1}, {255, 2, 1, 13, 0},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            /* v0 distinct values, v1 many ties, v2 ties with -inf and NaN */
            const int64_t *sh = shapes[s];
            const conf_layout lay = sh[4] == 1 ? CONF_PADDED : sh[4] == 2 ? CONF_PERMUTED : CONF_CONTIG;
            static const char *const vname[] = {"", " ties", " ties, -inf, NaN"};
            conf_case c;
            conf_case_init(&c, TSR_OP_TOP_K, "TOP_K %lld of [%lld, %lld, %lld]%s%s", (long long)sh[3],
                           (long long)sh[0], (long long)sh[1], (long long)sh[2], layout_name(lay), vname[v]);
            c.tol = conf_tolerance(TSR_OP_TOP_K, F32);
            conf_case_src(r, &c, 0, F32, NE(sh[0], sh[1], sh[2], 1), lay, conf_uniform(-4, 4));
            top_k_values(&c, v ? 0.5f : 0.0f, v == 2);
            conf_case_dst(&c, TSR_DTYPE_I32, NE(sh[3], sh[1], sh[2], 1), lay == CONF_PADDED ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}

/* ------------------------------------------------------------- SUM_ROWS */

void conf_gen_sum_rows(conf_runner *r) {
    static const int64_t shapes[][4] = {{1, 1, 1, 1}, {8, 5, 1, 1}, {17, 3, 2, 1}, {255, 4, 1, 2}, {4096, 2, 1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int v = 0; v < 3; v++) {
            /* v0 contiguous, v1 permuted source and padded dst, v2 transposed source */
            const int64_t *ne = shapes[s];
            if (v == 2 && ne[1] == 1) continue;
            const conf_layout la = v == 1 ? CONF_PERMUTED : v == 2 ? CONF_TRANSPOSED : CONF_CONTIG;
            conf_case c;
            conf_case_init(&c, TSR_OP_SUM_ROWS, "SUM_ROWS [%lld, %lld, %lld, %lld]%s", (long long)ne[0],
                           (long long)ne[1], (long long)ne[2], (long long)ne[3], layout_name(la));
            c.tol = conf_tolerance(TSR_OP_SUM_ROWS, F32);
            conf_case_src(r, &c, 0, F32, ne, la, conf_uniform(-1, 1));
            conf_case_dst(&c, F32, NE(1, ne[1], ne[2], ne[3]), v == 1 ? CONF_PADDED : CONF_CONTIG);
            conf_case_run(r, &c);
        }
}
