/*
 * common.cl - what every kernel shares: how a tensor is passed, and loads
 * and stores of the plain dtypes.
 *
 * A tensor travels as five kernel arguments (TENSOR(x) below): the buffer,
 * the byte offset of element (0,0,0,0) in it, ne and nb as in tessera/plugin.h
 * (innermost first, strides in bytes) and the dtype (GGUF numbers). Kernels
 * honour nb, so every source may be a strided or permuted view.
 *
 * F16 is read with vload_half and written with vstore_half_rte, which are
 * core OpenCL: devices without cl_khr_fp16 work, all arithmetic is F32.
 *
 * Helpers are "static inline": OpenCL C 1.2 follows C99, where a plain
 * inline function has no external definition and a compiler that declines
 * to inline it fails to link the program.
 */
#define DT_F32 0
#define DT_F16 1
#define DT_Q4_0 2
#define DT_Q4_1 3
#define DT_Q5_0 6
#define DT_Q5_1 7
#define DT_Q8_0 8
#define DT_Q2_K 10
#define DT_Q3_K 11
#define DT_Q4_K 12
#define DT_Q5_K 13
#define DT_Q6_K 14
#define DT_IQ2_XXS 16
#define DT_IQ2_XS 17
#define DT_IQ3_XXS 18
#define DT_IQ1_S 19
#define DT_IQ4_NL 20
#define DT_IQ3_S 21
#define DT_IQ2_S 22
#define DT_IQ4_XS 23
#define DT_I32 26
#define DT_IQ1_M 29
#define DT_BF16 30
#define DT_MXFP4 39

#define TENSOR(x) global uchar *x##_buf, ulong x##_off, long4 x##_ne, long4 x##_nb, int x##_type
#define BASE(x) (x##_buf + x##_off)

/* Byte offset of element (i0, i1, i2, i3) of a plain-dtype tensor. */
#define OFFSET(x, i0, i1, i2, i3) \
    ((i0) * x##_nb.s0 + (i1) * x##_nb.s1 + (i2) * x##_nb.s2 + (i3) * x##_nb.s3)

static inline float load_f16(const global uchar *p) { return vload_half(0, (const global half *)p); }

static inline float load_bf16(const global uchar *p) {
    return as_float((uint)(*(const global ushort *)p) << 16);
}

/* One element of dtype F32, F16 or BF16 at p. */
static inline float load_float(int type, const global uchar *p) {
    if (type == DT_F16) return load_f16(p);
    if (type == DT_BF16) return load_bf16(p);
    return *(const global float *)p;
}

/* f32 -> bf16, round to nearest even; NaNs stay quiet NaNs. */
static inline ushort f32_to_bf16(float v) {
    uint x = as_uint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40);
    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* Store v at p as F32, F16 (round to nearest even) or BF16. */
static inline void store_float(int type, global uchar *p, float v) {
    if (type == DT_F16) vstore_half_rte(v, 0, (global half *)p);
    else if (type == DT_BF16) *(global ushort *)p = f32_to_bf16(v);
    else *(global float *)p = v;
}

/* Split a flat element index (i0 fastest) into coordinates of shape ne. */
static inline long4 unflatten(long flat, long4 ne) {
    long4 i;
    i.s0 = flat % ne.s0;
    flat /= ne.s0;
    i.s1 = flat % ne.s1;
    flat /= ne.s1;
    i.s2 = flat % ne.s2;
    i.s3 = flat / ne.s2;
    return i;
}
