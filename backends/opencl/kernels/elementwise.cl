/*
 * elementwise.cl - ADD, MUL, DIV (src1 broadcast), SCALE, SILU, GELU,
 * GELU_ERF, SWIGLU, SWIGLU_OAI, CONCAT.
 *
 * Work-item (i0, i1, i2 + ne2 * i3) of dst's shape computes that one element;
 * it reads its sources before writing, so dst may alias src0 in place.
 */
/* k_binary's modes (ocl_ops.c: op_binary) */
#define BIN_ADD 0
#define BIN_MUL 1
#define BIN_DIV 2
/* k_unary's modes (ocl_ops.c: op_unary; modes, not op numbers, which live
 * in plugin.h alone) */
#define UN_SCALE 0
#define UN_SILU 1
#define UN_GELU 2
#define UN_GELU_ERF 3

/* The dst coordinates of this work-item, or 0 when it is past the end. */
static inline int item_coords(long4 ne, long *i0, long *i1, long *i2, long *i3) {
    *i0 = get_global_id(0);
    *i1 = get_global_id(1);
    long i23 = get_global_id(2);
    *i2 = i23 % ne.s2;
    *i3 = i23 / ne.s2;
    return *i0 < ne.s0 && *i1 < ne.s1 && *i3 < ne.s3;
}

kernel void k_binary(TENSOR(a), TENSOR(b), TENSOR(d), int mode) {
    long i0, i1, i2, i3;
    if (!item_coords(d_ne, &i0, &i1, &i2, &i3)) return;
    float x = load_float(a_type, BASE(a) + OFFSET(a, i0, i1, i2, i3));
    float y = load_float(b_type, BASE(b) + OFFSET(b, i0 % b_ne.s0, i1 % b_ne.s1, i2 % b_ne.s2,
                                                  i3 % b_ne.s3));
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3),
                mode == BIN_MUL ? x * y : mode == BIN_DIV ? x / y : x + y);
}

static inline float silu(float x) { return x / (1.0f + exp(-x)); }

static inline float gelu(float x) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanh(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}

/* the exact GELU as ref writes it, with OpenCL C's erf */
static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erf(x * 0.70710678118654752440f)); }

kernel void k_unary(TENSOR(a), TENSOR(d), int mode, float p0, float p1) {
    long i0, i1, i2, i3;
    if (!item_coords(d_ne, &i0, &i1, &i2, &i3)) return;
    float x = load_float(a_type, BASE(a) + OFFSET(a, i0, i1, i2, i3));
    float y = mode == UN_SCALE ? x * p0 + p1 : mode == UN_SILU ? silu(x) : mode == UN_GELU ? gelu(x) : gelu_erf(x);
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3), y);
}

kernel void k_swiglu(TENSOR(a), TENSOR(b), TENSOR(d)) {
    long i0, i1, i2, i3;
    if (!item_coords(d_ne, &i0, &i1, &i2, &i3)) return;
    float x = load_float(a_type, BASE(a) + OFFSET(a, i0, i1, i2, i3));
    float g = load_float(b_type, BASE(b) + OFFSET(b, i0, i1, i2, i3));
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3), silu(x) * g);
}

/* gpt-oss's clamped SwiGLU, a the gate and b up (plugin.h: SWIGLU_OAI):
 * g = min(a, limit), u = clamp(b, -limit, limit), g / (1 + e^(-alpha g)) * (u + 1),
 * in ref's order of float operations. */
kernel void k_swiglu_oai(TENSOR(a), TENSOR(b), TENSOR(d), float alpha, float limit) {
    long i0, i1, i2, i3;
    if (!item_coords(d_ne, &i0, &i1, &i2, &i3)) return;
    float g = load_float(a_type, BASE(a) + OFFSET(a, i0, i1, i2, i3));
    float u = load_float(b_type, BASE(b) + OFFSET(b, i0, i1, i2, i3));
    g = g < limit ? g : limit;
    u = u < -limit ? -limit : u > limit ? limit : u;
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3), g / (1.0f + exp(-alpha * g)) * (u + 1.0f));
}

/* dst = a followed by b along dimension dim */
kernel void k_concat(TENSOR(a), TENSOR(b), TENSOR(d), int dim) {
    long i0, i1, i2, i3;
    if (!item_coords(d_ne, &i0, &i1, &i2, &i3)) return;
    long4 i = (long4)(i0, i1, i2, i3);
    long along = dim == 0 ? i.s0 : dim == 1 ? i.s1 : dim == 2 ? i.s2 : i.s3;
    long a_len = dim == 0 ? a_ne.s0 : dim == 1 ? a_ne.s1 : dim == 2 ? a_ne.s2 : a_ne.s3;
    float v;
    if (along < a_len) {
        v = load_float(a_type, BASE(a) + OFFSET(a, i.s0, i.s1, i.s2, i.s3));
    } else {
        long4 j = i;
        if (dim == 0) j.s0 -= a_len;
        else if (dim == 1) j.s1 -= a_len;
        else if (dim == 2) j.s2 -= a_len;
        else j.s3 -= a_len;
        v = load_float(b_type, BASE(b) + OFFSET(b, j.s0, j.s1, j.s2, j.s3));
    }
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3), v);
}
