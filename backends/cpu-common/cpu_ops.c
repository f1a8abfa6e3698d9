/*
 * cpu_ops — every op of the CPU plugins (cpu-avx, cpu-neon) except MUL_MAT
 * (cpu_matmul.c), FLASH_ATTN (cpu_flash_attn.c) and the mixture-of-experts
 * ops MUL_MAT_ID, TOP_K, SUM_ROWS (cpu_moe.c); ops_supports, ops_work_size
 * and ops_compute dispatch to those too. These are cheap
 * next to the matrix products, so they are plain C written for the compiler
 * to vectorize, split across threads by rows. All tensors here are F32 unless
 * the op says otherwise; strides (nb) are honoured everywhere, and rows that
 * are contiguous (the common case) go through cpu_rows.h's vector loops.
 */
#include <math.h>
#include <string.h>

#include <tessera/plugin_check.h>

#include "cpu_kernels.h"
#include "cpu_quants.h"
#include "cpu_rows.h"
#include "cpu_ssm.h"

static int is_f32(const tsr_tensor *t) { return t && t->dtype == TSR_DTYPE_F32; }
static int is_float(int32_t dt) { return dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_F16 || dt == TSR_DTYPE_BF16; }

/* Element i0 of a row of F32 data with stride nb0. */
static inline float ld(const uint8_t *row, int64_t i0, int64_t nb0) {
    float v;
    memcpy(&v, row + i0 * nb0, 4);
    return v;
}

static inline void st(uint8_t *row, int64_t i0, int64_t nb0, float v) { memcpy(row + i0 * nb0, &v, 4); }

/* 1 if n bytes at p and at q do not overlap (restrict-qualified loops). */
static inline int rows_disjoint(const uint8_t *p, const uint8_t *q, int64_t n) { return p + n <= q || q + n <= p; }

/* Row r of t as (i1, i2, i3). */
static inline void row_index(const tsr_tensor *t, int64_t r, int64_t *i1, int64_t *i2, int64_t *i3) {
    *i1 = r % t->ne[1];
    *i2 = (r / t->ne[1]) % t->ne[2];
    *i3 = r / (t->ne[1] * t->ne[2]);
}

/* This thread's share of t's rows (split_range), in order, each with its
 * (i1, i2, i3): for (row_iter it = rows_of(t, ith, nth); row_next(&it);). */
typedef struct row_iter {
    const tsr_tensor *t;
    int64_t r, end;
    int64_t i1, i2, i3;
} row_iter;

static inline row_iter rows_of(const tsr_tensor *t, int ith, int nth) {
    row_iter it = {.t = t};
    split_range(tensor_nrows(t), ith, nth, &it.r, &it.end);
    it.r--;
    return it;
}

static inline int row_next(row_iter *it) {
    if (++it->r >= it->end) return 0;
    row_index(it->t, it->r, &it->i1, &it->i2, &it->i3);
    return 1;
}

/* ---------------------------------------------------------- elementwise */

static inline float binary_one(int32_t op, float x, float y) {
    return op == TSR_OP_MUL ? x * y : op == TSR_OP_DIV ? x / y : x + y;
}

/* ADD, MUL, DIV: src1 broadcast by modulo along every dimension. */
static void op_binary(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *b = node->src[1];
    tsr_tensor *d = node->dst;
    const int32_t op = node->op;
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        const uint8_t *rb = tensor_row(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        const int64_t n = a->ne[0], nb1 = b->ne[0];
        if (a->nb[0] == 4 && b->nb[0] == 4 && d->nb[0] == 4 && nb1 == n) {
            const float *x = (const float *)ra, *y = (const float *)rb;
            float *z = (float *)rd;
            if (op == TSR_OP_MUL)
                for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i];
            else if (op == TSR_OP_DIV)
                for (int64_t i = 0; i < n; i++) z[i] = x[i] / y[i];
            else
                for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            float x = ld(ra, i, a->nb[0]), y = ld(rb, i % nb1, b->nb[0]);
            st(rd, i, d->nb[0], binary_one(op, x, y));
        }
    }
}

/* SCALE, SILU, GELU, GELU_ERF: one input, one output, same shape. silu
 * uses the same exp as the vector rows so strided and contiguous rows
 * agree, GELU_ERF the same erf (cpu_rows.h). */
static inline float silu(float x) { return x / (1.0f + exp_row_elem(-x)); }

/* GELU (tanh form) as llama.cpp's CPU backend evaluates it, like ref: x
 * rounded to fp16, the result rounded to fp16 (its table over every fp16
 * input), x or 0 beyond +-10. */
static inline float gelu_of_fp16(float h) {
    const float c = 0.7978845608028654f; /* sqrt(2/pi) */
    return fp16_round(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h))));
}

/* gelu_of_fp16 of every fp16 value, by its bits (ops_init): a row of GELU
 * is then a vector conversion to fp16 and a lookup, where tanhf per
 * element was most of a vision encoder's FFN. */
static float gelu_table[1 << 16];

void ops_init(void) {
    for (uint32_t b = 0; b < (1u << 16); b++) gelu_table[b] = gelu_of_fp16(cpu_fp16_to_f32((uint16_t)b));
}

static inline float gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return gelu_table[cpu_f32_to_fp16(x)];
}

/* z[i] = gelu(x[i]), the fp16 conversion a vector at a time (z may be x) */
static void row_gelu(const float *x, float *z, int64_t n) {
    uint16_t h[64];
    for (int64_t i0 = 0; i0 < n; i0 += 64) {
        const int64_t m = n - i0 < 64 ? n - i0 : 64;
        row_f32_to_f16(x + i0, h, m);
        for (int64_t i = 0; i < m; i++) {
            const float xi = x[i0 + i], t = gelu_table[h[i]];
            z[i0 + i] = xi <= -10.0f ? 0.0f : xi >= 10.0f ? xi : t;
        }
    }
}

static void op_unary(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    const tsr_scale_params sp = tsr_scale_params_of(node); /* SCALE's; unused by the others */
    const float s = sp.scale, bias = sp.bias;
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        const int64_t n = a->ne[0];
        if (a->nb[0] == 4 && d->nb[0] == 4) {
            const float *x = (const float *)ra;
            float *z = (float *)rd;
            switch (node->op) {
            case TSR_OP_SCALE: for (int64_t i = 0; i < n; i++) z[i] = x[i] * s + bias; break;
            case TSR_OP_SILU: row_silu(x, z, n); break;
            case TSR_OP_GELU_ERF: row_gelu_erf(x, z, n); break;
            default: row_gelu(x, z, n); break;
            }
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            float x = ld(ra, i, a->nb[0]), z;
            switch (node->op) {
            case TSR_OP_SCALE: z = x * s + bias; break;
            case TSR_OP_SILU: z = silu(x); break;
            case TSR_OP_GELU_ERF: z = gelu_erf_elem(x); break;
            default: z = gelu(x); break;
            }
            st(rd, i, d->nb[0], z);
        }
    }
}

static void op_swiglu(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *b = node->src[1];
    tsr_tensor *d = node->dst;
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3), *rb = tensor_row(b, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        if (a->nb[0] == 4 && b->nb[0] == 4 && d->nb[0] == 4) {
            row_swiglu((const float *)ra, (const float *)rb, (float *)rd, a->ne[0]);
            continue;
        }
        for (int64_t i = 0; i < a->ne[0]; i++)
            st(rd, i, d->nb[0], silu(ld(ra, i, a->nb[0])) * ld(rb, i, b->nb[0]));
    }
}

/* gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, +-limit),
 * g / (1 + e^(-alpha g)) * (u + 1), as ref (plugin.h: SWIGLU_OAI). */
static void op_swiglu_oai(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *b = node->src[1];
    tsr_tensor *d = node->dst;
    const tsr_swiglu_oai_params p = tsr_swiglu_oai_params_of(node);
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3), *rb = tensor_row(b, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        for (int64_t i = 0; i < a->ne[0]; i++) {
            float g = ld(ra, i, a->nb[0]), u = ld(rb, i, b->nb[0]);
            g = g < p.limit ? g : p.limit;
            u = u < -p.limit ? -p.limit : u > p.limit ? p.limit : u;
            st(rd, i, d->nb[0], g / (1.0f + expf(-p.alpha * g)) * (u + 1.0f));
        }
    }
}

/* ------------------------------------------------------------- norms */

/* RMS_NORM and NORM; sums in double as ggml does. */
static void op_norm(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    const float eps = tsr_norm_params_of(node).eps;
    const int64_t n = a->ne[0];
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        if (a->nb[0] == 4 && d->nb[0] == 4) { /* same sums, in ROW_LANES partial sums */
            const float *x = (const float *)ra;
            float *z = (float *)rd;
            const float mean = node->op == TSR_OP_NORM ? (float)(row_sum(x, n) / (double)n) : 0.0f;
            const float scale = 1.0f / sqrtf((float)(row_sum_sq(x, n, mean) / (double)n) + eps);
            for (int64_t i = 0; i < n; i++) z[i] = (x[i] - mean) * scale;
            continue;
        }
        float mean = 0.0f;
        if (node->op == TSR_OP_NORM) {
            double sum = 0.0;
            for (int64_t i = 0; i < n; i++) sum += ld(ra, i, a->nb[0]);
            mean = (float)(sum / (double)n);
        }
        double sum2 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float v = ld(ra, i, a->nb[0]) - mean;
            sum2 += (double)(v * v);
        }
        const float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
        for (int64_t i = 0; i < n; i++) st(rd, i, d->nb[0], (ld(ra, i, a->nb[0]) - mean) * scale);
    }
}

/* -------------------------------------------------------------- rope */

/* ROPE without YaRN extension (ext_factor == 0; others fall back to ref):
 * theta_i = pos * freq_scale * base^(-2i/n_dims) / ff_i, built up by
 * repeated multiplication by theta_scale as ggml does; values scaled by
 * attn_factor. Normal mode rotates (x[2i], x[2i+1]), NeoX (x[i], x[i+n/2]).
 * The angles depend only on the position, so each thread computes cos and
 * sin once per position into its scratch (cs, sn: n_dims/2 each) and reuses
 * them for every head of that token. */
static void rope_angles(const tsr_node *node, const tsr_rope_params *rp, int32_t p, float *cs, float *sn) {
    const tsr_tensor *ff = node->n_src > 2 ? node->src[2] : NULL;
    const int n_dims = rp->n_dims;
    const float freq_scale = rp->freq_scale, attn_factor = rp->attn_factor;
    const float theta_scale = rp->theta_scale;
    float theta = (float)p;
    for (int64_t i = 0; i < n_dims / 2; i++) {
        float f = ff ? ld(tensor_ptr(ff), i, ff->nb[0]) : 1.0f;
        float t = freq_scale * (theta / f);
        cs[i] = cosf(t) * attn_factor;
        sn[i] = sinf(t) * attn_factor;
        theta *= theta_scale;
    }
}

static void op_rope(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *pos = node->src[1];
    tsr_tensor *d = node->dst;
    const tsr_rope_params rp = tsr_rope_params_of(node);
    const int64_t n_dims = rp.n_dims, half = n_dims / 2;
    const int neox = rp.mode == TSR_ROPE_NEOX;
    const int64_t head_dim = a->ne[0];
    float *cs = (float *)(ex->work + (size_t)ith * ((size_t)n_dims * 4 + 64)), *sn = cs + half;
    int have = 0;
    int32_t have_pos = 0;
    int64_t lo, hi;
    split_range(tensor_nrows(a), ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_index(a, r, &i1, &i2, &i3);
        int32_t p;
        memcpy(&p, tensor_ptr(pos) + i2 * pos->nb[0], 4);
        if (!have || p != have_pos) {
            rope_angles(node, &rp, p, cs, sn);
            have = 1;
            have_pos = p;
        }
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        if (a->nb[0] == 4 && d->nb[0] == 4 && rows_disjoint(ra, rd, head_dim * 4)) {
            const float *restrict x = (const float *)ra;
            float *restrict z = (float *)rd;
            if (neox) {
                for (int64_t i = 0; i < half; i++) {
                    float x0 = x[i], x1 = x[i + half];
                    z[i] = x0 * cs[i] - x1 * sn[i];
                    z[i + half] = x0 * sn[i] + x1 * cs[i];
                }
            } else {
                for (int64_t i = 0; i < half; i++) {
                    float x0 = x[2 * i], x1 = x[2 * i + 1];
                    z[2 * i] = x0 * cs[i] - x1 * sn[i];
                    z[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
                }
            }
            for (int64_t i = n_dims; i < head_dim; i++) z[i] = x[i];
            continue;
        }
        for (int64_t i = 0; i < half; i++) {
            int64_t j0 = neox ? i : 2 * i, j1 = neox ? i + half : 2 * i + 1;
            float x0 = ld(ra, j0, a->nb[0]), x1 = ld(ra, j1, a->nb[0]);
            st(rd, j0, d->nb[0], x0 * cs[i] - x1 * sn[i]);
            st(rd, j1, d->nb[0], x0 * sn[i] + x1 * cs[i]);
        }
        for (int64_t i0 = n_dims; i0 < head_dim; i0++) st(rd, i0, d->nb[0], ld(ra, i0, a->nb[0]));
    }
}

/* ------------------------------------------------------------ softmax */

static inline float mask_at(const tsr_tensor *m, const uint8_t *row, int64_t i) {
    if (m->dtype == TSR_DTYPE_F16) {
        uint16_t h;
        memcpy(&h, row + i * m->nb[0], 2);
        return cpu_fp16_to_f32(h);
    }
    return ld(row, i, m->nb[0]);
}

/* exp(tmp[i] - mx) in place, returning the sum: the plugin's vector kernel
 * when it has one, else cpu_rows.h's. */
static double softmax_exp(cpu_exec *ex, float *tmp, int64_t n, float mx) {
    return ex->exp_sub_sum ? ex->exp_sub_sum(tmp, n, mx) : row_exp_sub_sum(tmp, n, mx);
}

static void op_soft_max(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0];
    const tsr_tensor *mask = node->n_src > 1 ? node->src[1] : NULL;
    tsr_tensor *d = node->dst;
    const float scale = tsr_soft_max_params_of(node).scale;
    const int64_t n = a->ne[0];
    float *tmp = (float *)(ex->work + (size_t)ith * ((size_t)n * 4 + 64));
    const int contiguous = a->nb[0] == 4 && d->nb[0] == 4 &&
                           (!mask || mask->nb[0] == tsr_dtype_block_bytes(mask->dtype));
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        const uint8_t *rm = mask ? tensor_row(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]) : NULL;
        float mx;
        if (contiguous) { /* the loop below, vectorized: tmp = x*scale + mask, then its max */
            const float *x = (const float *)ra;
            if (!rm) {
                for (int64_t i = 0; i < n; i++) tmp[i] = x[i] * scale;
            } else if (mask->dtype == TSR_DTYPE_F16) {
                row_f16_to_f32((const uint16_t *)rm, tmp, n);
                for (int64_t i = 0; i < n; i++) tmp[i] = x[i] * scale + tmp[i];
            } else {
                const float *m = (const float *)rm;
                for (int64_t i = 0; i < n; i++) tmp[i] = x[i] * scale + m[i];
            }
            mx = row_max(tmp, n);
        } else {
            mx = -INFINITY;
            for (int64_t i = 0; i < n; i++) {
                float v = ld(ra, i, a->nb[0]) * scale + (rm ? mask_at(mask, rm, i) : 0.0f);
                tmp[i] = v;
                mx = v > mx ? v : mx;
            }
        }
        double sum = 0.0;
        if (mx == -INFINITY) { /* fully masked row: ggml yields zeros */
            for (int64_t i = 0; i < n; i++) tmp[i] = 0.0f;
        } else { /* exp(-inf) = 0: a causal mask's -inf tail needs no exp */
            const int64_t live = row_len_before_ninf(tmp, n);
            sum = softmax_exp(ex, tmp, live, mx);
            for (int64_t i = live; i < n; i++) tmp[i] = 0.0f;
        }
        const float inv = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
        if (d->nb[0] == 4) {
            float *z = (float *)rd;
            for (int64_t i = 0; i < n; i++) z[i] = tmp[i] * inv;
        } else {
            for (int64_t i = 0; i < n; i++) st(rd, i, d->nb[0], tmp[i] * inv);
        }
    }
}

/* ----------------------------------------------------------- get_rows */

static void op_get_rows(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *idx = node->src[1];
    tsr_tensor *d = node->dst;
    const int64_t n = a->ne[0];
    float *tmp = (float *)(ex->work + (size_t)ith * ((size_t)n * 4 + 64));
    for (row_iter it = rows_of(d, ith, nth); row_next(&it);) {
        const int64_t i = it.i1, j = it.i2, k = it.i3; /* dst row (i, j, k) */
        int32_t row;
        memcpy(&row, tensor_ptr(idx) + i * idx->nb[0] + j * idx->nb[1] + k * idx->nb[2], 4);
        uint8_t *rd = tensor_row(d, i, j, k);
        if (row < 0 || row >= a->ne[1]) { /* bad index: error, never a wild read */
            exec_fail(ex, TSR_ERR_INVALID);
            for (int64_t e = 0; e < n; e++) st(rd, e, d->nb[0], 0.0f);
            continue;
        }
        const uint8_t *ra = tensor_row(a, row, j, k);
        float *out = d->nb[0] == 4 ? (float *)rd : tmp;
        cpu_quants_row_to_f32(a->dtype, ra, out, n);
        if (out == tmp)
            for (int64_t e = 0; e < n; e++) st(rd, e, d->nb[0], tmp[e]);
    }
}

/* ---------------------------------------------------------------- cpy */

static inline float load_float(int32_t dt, const uint8_t *p) {
    uint16_t h;
    switch (dt) {
    case TSR_DTYPE_F16: memcpy(&h, p, 2); return cpu_fp16_to_f32(h);
    case TSR_DTYPE_BF16: memcpy(&h, p, 2); return cpu_bf16_to_f32(h);
    default: { float v; memcpy(&v, p, 4); return v; }
    }
}

static inline void store_float(int32_t dt, uint8_t *p, float v) {
    uint16_t h;
    switch (dt) {
    case TSR_DTYPE_F16: h = cpu_f32_to_fp16(v); memcpy(p, &h, 2); return;
    case TSR_DTYPE_BF16: h = cpu_f32_to_bf16(v); memcpy(p, &h, 2); return;
    default: memcpy(p, &v, 4); return;
    }
}

/* Index (i[0], i[1], i[2], i[3]) of element number e (in ne order). */
static inline void elem_index(const tsr_tensor *t, int64_t e, int64_t i[4]) {
    for (int k = 0; k < 3; k++) {
        i[k] = e % t->ne[k];
        e /= t->ne[k];
    }
    i[3] = e;
}

/* Converts n floats from src (dtype sdt, stride snb) to dst (ddt, dnb):
 * store_float(load_float()) element by element, with fast paths for
 * contiguous rows. tmp holds n floats. */
static void cpy_float_row(int32_t sdt, const uint8_t *src, int64_t snb, int32_t ddt, uint8_t *dst, int64_t dnb,
                          int64_t n, float *tmp) {
    const int64_t ss = tsr_dtype_block_bytes(sdt), ds = tsr_dtype_block_bytes(ddt);
    if (sdt == ddt && snb == ss && dnb == ds) {
        memmove(dst, src, (size_t)(n * ss));
        return;
    }
    /* a strided F32 source into a contiguous F16 row (the transposed V
     * cache copy): gathered into tmp first, then converted as a row */
    if (sdt == TSR_DTYPE_F32 && snb != 4 && ddt == TSR_DTYPE_F16 && dnb == 2) {
        for (int64_t i = 0; i < n; i++) tmp[i] = ld(src, i, snb);
        src = (const uint8_t *)tmp;
        snb = 4;
    }
    if (snb == ss && dnb == ds && rows_disjoint(src, dst, n * (ss > ds ? ss : ds))) {
        if (sdt == TSR_DTYPE_F32 && ddt == TSR_DTYPE_F16) {
            row_f32_to_f16((const float *)src, (uint16_t *)dst, n);
            return;
        }
        if (sdt == TSR_DTYPE_F16 && ddt == TSR_DTYPE_F32) {
            row_f16_to_f32((const uint16_t *)src, (float *)dst, n);
            return;
        }
    }
    for (int64_t i = 0; i < n; i++) store_float(ddt, dst + i * dnb, load_float(sdt, src + i * snb));
}

/* CPY between F32/F16/BF16 (any shapes with equal counts, any strides) and
 * quantized -> F32 (rows of src0 to rows of dst of the same length). */
static void op_cpy(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    const int64_t n = a->ne[0];
    float *tmp = (float *)(ex->work + (size_t)ith * ((size_t)n * 4 + 64));
    int64_t lo, hi;
    if (!is_float(d->dtype)) { /* into a KV cache block type: contiguous f32 rows of dst's width */
        const int64_t w = d->ne[0];
        split_range(tensor_nrows(d), ith, nth, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) {
            int64_t e1, e2, e3;
            row_index(d, r, &e1, &e2, &e3);
            cpu_quants_row_from_f32(d->dtype, (const float *)tensor_ptr(a) + r * w, tensor_row(d, e1, e2, e3), w);
        }
        return;
    }
    split_range(tensor_nrows(a), ith, nth, &lo, &hi);
    if (!is_float(a->dtype)) {
        for (int64_t r = lo; r < hi; r++) {
            int64_t i1, i2, i3;
            row_index(a, r, &i1, &i2, &i3);
            cpu_quants_row_to_f32(a->dtype, tensor_row(a, i1, i2, i3), tmp, n);
            int64_t e1, e2, e3;
            row_index(d, r, &e1, &e2, &e3);
            uint8_t *rd = tensor_row(d, e1, e2, e3);
            for (int64_t i = 0; i < n; i++) st(rd, i, d->nb[0], tmp[i]);
        }
        return;
    }
    for (int64_t r = lo; r < hi; r++) {
        int64_t i1, i2, i3;
        row_index(a, r, &i1, &i2, &i3);
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        /* elements r*n .. r*n+n-1 in dst's ne order: runs along dst rows
         * (one run when the rows line up) */
        int64_t done = 0;
        while (done < n) {
            int64_t e[4];
            elem_index(d, r * n + done, e);
            int64_t run = d->ne[0] - e[0] < n - done ? d->ne[0] - e[0] : n - done;
            uint8_t *pd = tensor_row(d, e[1], e[2], e[3]) + e[0] * d->nb[0];
            cpy_float_row(a->dtype, ra + done * a->nb[0], a->nb[0], d->dtype, pd, d->nb[0], run, tmp);
            done += run;
        }
    }
}

/* ------------------------------------------------------ concat, argmax */

/* n f32 values from src (elements sb bytes apart) to dst (db apart) */
static void copy_f32(uint8_t *dst, int64_t db, const uint8_t *src, int64_t sb, int64_t n) {
    if (db == 4 && sb == 4) {
        memcpy(dst, src, (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * db, src + i * sb, 4);
}

/* dst's row (i1, i2, i3) is a row of a, of b, or (dim 0) a's then b's:
 * copied a row at a time (the 2-D rope of Qwen2.5-VL's encoder concatenates
 * views four times per q and k, where the element loop below was a fifth
 * of its encode) */
static void op_concat(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0], *b = node->src[1];
    tsr_tensor *d = node->dst;
    const int dim = tsr_concat_params_of(node).dim; /* 0..3: the checker's */
    for (row_iter it = rows_of(d, ith, nth); row_next(&it);) {
        int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        uint8_t *rd = tensor_row(d, i1, i2, i3);
        if (dim == 0) {
            copy_f32(rd, d->nb[0], tensor_row(a, i1, i2, i3), a->nb[0], a->ne[0]);
            copy_f32(rd + a->ne[0] * d->nb[0], d->nb[0], tensor_row(b, i1, i2, i3), b->nb[0], b->ne[0]);
            continue;
        }
        int64_t *at = dim == 1 ? &i1 : dim == 2 ? &i2 : &i3;
        const tsr_tensor *s = a;
        if (*at >= a->ne[dim]) {
            s = b;
            *at -= a->ne[dim];
        }
        copy_f32(rd, d->nb[0], tensor_row(s, i1, i2, i3), s->nb[0], d->ne[0]);
    }
}

static void op_argmax(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *a = node->src[0];
    tsr_tensor *d = node->dst;
    for (row_iter it = rows_of(a, ith, nth); row_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const uint8_t *ra = tensor_row(a, i1, i2, i3);
        int32_t best = 0;
        float bv = ld(ra, 0, a->nb[0]);
        for (int64_t i = 1; i < a->ne[0]; i++) {
            float v = ld(ra, i, a->nb[0]);
            if (v > bv) {
                bv = v;
                best = (int32_t)i;
            }
        }
        int64_t e[4];
        elem_index(d, it.r, e);
        memcpy(tensor_row(d, e[1], e[2], e[3]) + e[0] * d->nb[0], &best, 4);
    }
}

/* -------------------------------------------------------- dispatch */

/* Elements in row-major order without gaps (nb as if freshly allocated). */
static int is_packed(const tsr_tensor *t) {
    int64_t nb = 4;
    for (int i = 0; i < 4; i++) {
        if (t->ne[i] > 1 && t->nb[i] != nb) return 0;
        nb *= t->ne[i];
    }
    return 1;
}

static int fa_kv_readable(const tsr_tensor *t) {
    if (!tsr_flash_attn_kv_dtype(t->dtype) || !cpu_quants_row_supported(t->dtype)) return 0;
    return t->nb[0] == tsr_dtype_block_bytes(t->dtype) && t->ne[0] % tsr_dtype_block_size(t->dtype) == 0;
}

/* Every refusal below says why (tsr_node_decline: shown by --explain). */
#define NO(...) tsr_node_decline(node, why, why_size, __VA_ARGS__)

static const char *dt(const tsr_tensor *t) { return t ? tsr_dtype_name(t->dtype) : "none"; }

/* src0 and dst F32 (the ops whose kernels read and write F32 only). */
static int f32_src0_dst(const tsr_node *node, char *why, size_t why_size) {
    const tsr_tensor *a = node->src[0], *d = node->dst;
    if (!is_f32(a) || !is_f32(d)) return NO("F32 only (src0 %s, dst %s)", dt(a), dt(d));
    return 1;
}

/*
 * Capability only: what these kernels compute. Shapes, source counts,
 * broadcast rules, parameter ranges and the dtypes an op allows at all are
 * tsr_node_check's (tessera/plugin_check.h), which the host runs before it
 * asks; it runs again here first so a 1.0 host, which did not validate,
 * cannot hand the kernels a malformed node.
 */
int ops_supports(const cpu_kernels *k, const tsr_node *node, char *why, size_t why_size) {
    if (tsr_node_check(node, why, why_size)) return 0; /* malformed: the ABI 1.1 checker's reason */
    const tsr_tensor *d = node->dst, *a = node->src[0], *b = node->src[1];
    switch (node->op) {
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_DIV:
    case TSR_OP_SWIGLU:
    case TSR_OP_SWIGLU_OAI:
    case TSR_OP_CONCAT:
        if (!is_f32(a) || !is_f32(b) || !is_f32(d))
            return NO("F32 only (src0 %s, src1 %s, dst %s)", dt(a), dt(b), dt(d));
        return 1;
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF:
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM:
        return f32_src0_dst(node, why, why_size);
    case TSR_OP_MUL_MAT_ID: return mul_mat_id_supports(k, node, why, why_size);
    case TSR_OP_TOP_K:
    case TSR_OP_SUM_ROWS: return 1; /* F32 (and I32 ids) is all the checker allows */
    case TSR_OP_ROPE: {
        const tsr_rope_params rp = tsr_rope_params_of(node);
        if (!f32_src0_dst(node, why, why_size)) return 0;
        if (rp.ext_factor != 0.0f) return NO("YaRN (ext_factor %g) is left to ref", (double)rp.ext_factor);
        return 1;
    }
    case TSR_OP_SOFT_MAX: {
        const float max_bias = tsr_soft_max_params_of(node).max_bias;
        if (!f32_src0_dst(node, why, why_size)) return 0;
        if (max_bias != 0.0f) return NO("ALiBi (max_bias %g) is left to ref", (double)max_bias);
        return 1;
    }
    case TSR_OP_GET_ROWS:
        if (!is_f32(d)) return NO("dst must be F32 (dst %s)", dt(d));
        if (!cpu_quants_row_supported(a->dtype)) return NO("rows of %s are not converted here", dt(a));
        if (a->nb[0] != tsr_dtype_block_bytes(a->dtype)) return NO("src0 rows are not contiguous");
        return 1;
    case TSR_OP_CPY:
        if (is_float(a->dtype) && is_float(d->dtype)) return 1;
        if (cpu_quants_from_f32_supported(d->dtype)) { /* packed f32 rows, quantized a block at a time */
            if (!is_f32(a) || !is_packed(a)) return NO("only packed F32 is converted into %s (src0 %s)", dt(d), dt(a));
            return 1;
        }
        /* quantized -> F32 row by row */
        if (!cpu_quants_row_supported(a->dtype) || !is_f32(d))
            return NO("converting %s into %s is not implemented here", dt(a), dt(d));
        if (d->ne[0] != a->ne[0]) return NO("src0 and dst rows differ in length");
        return 1;
    case TSR_OP_ARGMAX:
        if (!is_f32(a)) return NO("src0 must be F32 (%s)", dt(a));
        return 1;
    case TSR_OP_FLASH_ATTN: {
        const tsr_tensor *k = b, *v = node->src[2];
        if (!is_f32(a)) return NO("needs F32 q (%s)", dt(a));
        if (!fa_kv_readable(k) || !fa_kv_readable(v)) return NO("k/v rows of %s/%s are not read here", dt(k), dt(v));
        return 1;
    }
    case TSR_OP_SSM_CONV: return 1; /* F32 by the rules */
    case TSR_OP_SSM_SCAN:
    case TSR_OP_DELTA_NET:
        if (!is_packed(d)) return NO("dst must be packed");
        return 1;
    default:
        return NO("not implemented on the CPU");
    }
}

#undef NO

size_t ops_work_size(const cpu_kernels *k, const tsr_node *node, int nth) {
    const tsr_tensor *a = node->src[0];
    switch (node->op) {
    case TSR_OP_MUL_MAT_ID: return mul_mat_id_work_size(k, node, nth);
    case TSR_OP_SOFT_MAX:
    case TSR_OP_GET_ROWS:
    case TSR_OP_CPY: return (size_t)nth * ((size_t)(a->ne[0] > node->dst->ne[0] ? a->ne[0] : node->dst->ne[0]) * 4 + 64);
    case TSR_OP_FLASH_ATTN: return flash_attn_work_size(node, nth);
    case TSR_OP_ROPE: return (size_t)nth * ((size_t)tsr_rope_params_of(node).n_dims * 4 + 64);
    default: return 0;
    }
}

void ops_compute(cpu_exec *ex, const tsr_node *node, int ith, int nth) {
    switch (node->op) {
    case TSR_OP_ADD:
    case TSR_OP_MUL:
    case TSR_OP_DIV: op_binary(node, ith, nth); break;
    case TSR_OP_SCALE:
    case TSR_OP_SILU:
    case TSR_OP_GELU:
    case TSR_OP_GELU_ERF: op_unary(node, ith, nth); break;
    case TSR_OP_SWIGLU: op_swiglu(node, ith, nth); break;
    case TSR_OP_SWIGLU_OAI: op_swiglu_oai(node, ith, nth); break;
    case TSR_OP_RMS_NORM:
    case TSR_OP_NORM: op_norm(node, ith, nth); break;
    case TSR_OP_ROPE: op_rope(ex, node, ith, nth); break;
    case TSR_OP_SOFT_MAX: op_soft_max(ex, node, ith, nth); break;
    case TSR_OP_GET_ROWS: op_get_rows(ex, node, ith, nth); break;
    case TSR_OP_CPY: op_cpy(ex, node, ith, nth); break;
    case TSR_OP_CONCAT: op_concat(node, ith, nth); break;
    case TSR_OP_ARGMAX: op_argmax(node, ith, nth); break;
    case TSR_OP_FLASH_ATTN: flash_attn_compute(ex, node, ith, nth); break;
    case TSR_OP_MUL_MAT_ID: mul_mat_id_compute(ex, node, ith, nth); break;
    case TSR_OP_TOP_K: top_k_compute(ex, node, ith, nth); break;
    case TSR_OP_SUM_ROWS: sum_rows_compute(ex, node, ith, nth); break;
    case TSR_OP_SSM_CONV: cpu_ssm_conv(node, ith, nth); break;
    case TSR_OP_SSM_SCAN: cpu_ssm_scan(node, ith, nth); break;
    case TSR_OP_DELTA_NET: cpu_delta_net(node, ith, nth); break;
    default: exec_fail(ex, TSR_ERR_UNSUPPORTED); break;
    }
}

double ops_cost(const tsr_node *node) {
    const double out = (double)tsr_tensor_nelements(node->dst);
    switch (node->op) {
    case TSR_OP_FLASH_ATTN: return out * (double)node->src[1]->ne[1] * 2.0;
    case TSR_OP_MUL_MAT_ID: return out * (double)node->src[0]->ne[0]; /* multiply-adds */
    case TSR_OP_DELTA_NET: /* four passes over each head's Dk x Dv state per token */
        return 4.0 * (double)node->src[0]->ne[0] * (double)node->src[0]->ne[1] * (double)node->src[0]->ne[2] *
               (double)node->src[1]->ne[1] * (double)node->src[1]->ne[2];
    default: return out;
    }
}
