/*
 * quant.cl - CPY of float values into the KV cache's block types: Q8_0,
 * Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL (the layouts are in dequant.cl).
 *
 * The quantizers are ref's (core/src/tensor/quant_legacy.c, which follows
 * llama.cpp's reference quantizers) operation for operation, so that a
 * device cache holds the bytes a CPU cache would: no fused multiply-adds
 * (FP_CONTRACT OFF), a cast that truncates where ref's truncates, round()
 * (halves away from zero) where ref calls roundf, and the same order of
 * sums. Divisions are correctly rounded where the device offers it
 * (-cl-fp32-correctly-rounded-divide-sqrt, see ocl_program.c); elsewhere a
 * scale may differ from ref's in its last bit.
 */

/* Write the F16 value v at p (2-byte aligned: block fields are). */
static inline void put_f16(global uchar *p, float v) { vstore_half_rte(v, 0, (global half *)p); }

static inline void put_u32(global uchar *p, uint v) {
    p[0] = (uchar)v;
    p[1] = (uchar)(v >> 8);
    p[2] = (uchar)(v >> 16);
    p[3] = (uchar)(v >> 24);
}

/* Element of largest magnitude, sign kept (the first one on ties). */
static inline float signed_absmax32(const float *x) {
#pragma OPENCL FP_CONTRACT OFF
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabs(x[j])) {
            amax = fabs(x[j]);
            mx = x[j];
        }
    return mx;
}

static inline void min_max32(const float *x, float *lo, float *hi) {
    float mn = FLT_MAX, mx = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < mn) mn = x[j];
        if (x[j] > mx) mx = x[j];
    }
    *lo = mn;
    *hi = mx;
}

/* Q4_0 (zero 8) or Q5_0 (zero 16): d = signed absmax / -zero,
 * q = min(2 * zero - 1, trunc(x / d + zero + 0.5)). */
static void quant_sym(const float *x, global uchar *b, int zero) {
#pragma OPENCL FP_CONTRACT OFF
    const float d = signed_absmax32(x) / (float)(-zero);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float off = (float)zero + 0.5f;
    put_f16(b, d);
    global uchar *qs = b + (zero == 8 ? 2 : 6);
    uint qh = 0;
    for (int j = 0; j < 16; j++) {
        const int q0 = min(2 * zero - 1, (int)(x[j] * id + off));
        const int q1 = min(2 * zero - 1, (int)(x[16 + j] * id + off));
        qs[j] = (uchar)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= (uint)((q0 >> 4) & 1) << j;
        qh |= (uint)((q1 >> 4) & 1) << (j + 16);
    }
    if (zero == 16) put_u32(b + 2, qh);
}

/* Q4_1 (levels 15) or Q5_1 (levels 31): d = (max - min) / levels, m = min,
 * q = trunc((x - min) / d + 0.5), clamped to 15 for Q4_1 only (as ref). */
static void quant_affine(const float *x, global uchar *b, int levels) {
#pragma OPENCL FP_CONTRACT OFF
    float mn, mx;
    min_max32(x, &mn, &mx);
    const float d = (mx - mn) / (float)levels;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    put_f16(b + 2, mn);
    global uchar *qs = b + (levels == 15 ? 4 : 8);
    uint qh = 0;
    for (int j = 0; j < 16; j++) {
        int q0 = (int)((x[j] - mn) * id + 0.5f);
        int q1 = (int)((x[16 + j] - mn) * id + 0.5f);
        if (levels == 15) {
            q0 = min(15, q0);
            q1 = min(15, q1);
        }
        qs[j] = (uchar)((q0 & 0xF) | ((q1 & 0xF) << 4));
        qh |= (uint)((q0 >> 4) & 1) << j;
        qh |= (uint)((q1 >> 4) & 1) << (j + 16);
    }
    if (levels == 31) put_u32(b + 4, qh);
}

/* Q8_0: d = absmax / 127, q = round(x / d). */
static void quant_q8_0(const float *x, global uchar *b) {
#pragma OPENCL FP_CONTRACT OFF
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = fabs(x[j]);
        amax = amax > v ? amax : v;
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(b, d);
    global char *qs = (global char *)(b + 2);
    for (int j = 0; j < 32; j++) qs[j] = (char)(int)round(x[j] * id);
}

/* Index of the IQ4_NL codebook value nearest x (ties go up unless strictly
 * nearer the lower value, as ref). */
static int iq4nl_index(float x) {
#pragma OPENCL FP_CONTRACT OFF
    if (x <= (float)iq4nl_values[0]) return 0;
    if (x >= (float)iq4nl_values[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < (float)iq4nl_values[mid]) hi = mid;
        else lo = mid;
    }
    return x - (float)iq4nl_values[hi - 1] < (float)iq4nl_values[hi] - x ? hi - 1 : hi;
}

/* sum(w q x) and sum(w q q), w = x^2, for the codes chosen at inverse scale id. */
static void iq4nl_fit(const float *x, float id, float *sumqx, float *sumq2) {
#pragma OPENCL FP_CONTRACT OFF
    float sx = 0.0f, s2 = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float q = (float)iq4nl_values[iq4nl_index(id * x[j])];
        const float w = x[j] * x[j];
        sx += w * q * x[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* IQ4_NL: the x^2-weighted least-squares scale, best of 15 starting scales. */
static void quant_iq4_nl(const float *x, global uchar *b) {
#pragma OPENCL FP_CONTRACT OFF
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabs(x[j]) > amax) {
            amax = fabs(x[j]);
            mx = x[j];
        }
    float scale = 0.0f;
    if (amax >= 1e-15f) {
        const float v0 = (float)iq4nl_values[0];
        float sumqx, sumq2;
        iq4nl_fit(x, 1.0f / (-mx / v0), &sumqx, &sumq2);
        float d = sumqx / sumq2, best = d * sumqx;
        for (int itry = -7; itry <= 7; itry++) {
            iq4nl_fit(x, (float)(itry + iq4nl_values[0]) / mx, &sumqx, &sumq2);
            if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scale = d;
    }
    put_f16(b, scale);
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uchar)(iq4nl_index(id * x[j]) | (iq4nl_index(id * x[16 + j]) << 4));
}

/* Bytes of one block of a KV cache block type. */
static inline long kv_block_bytes(int type) {
    switch (type) {
    case DT_Q4_0: case DT_IQ4_NL: return BYTES_Q4_0;
    case DT_Q4_1: return BYTES_Q4_1;
    case DT_Q5_0: return BYTES_Q5_0;
    case DT_Q5_1: return BYTES_Q5_1;
    default: return BYTES_Q8_0;
    }
}

/* Float a (any layout) into a block-type d: work-item (c, i1, i2 + ne2 * i3)
 * of d quantizes block c of d's row (i1, i2, i3) from the 32 elements of a
 * with the same flat indices (ne order, i0 fastest). */
kernel void k_cpy_quant(TENSOR(a), TENSOR(d)) {
    const long c = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    const long i2 = i23 % d_ne.s2, i3 = i23 / d_ne.s2;
    if (c >= d_ne.s0 / 32 || i1 >= d_ne.s1 || i3 >= d_ne.s3) return;
    long4 s = unflatten(32 * c + d_ne.s0 * (i1 + d_ne.s1 * (i2 + d_ne.s2 * i3)), a_ne);
    float x[32];
    for (int j = 0; j < 32; j++) {
        x[j] = load_float(a_type, BASE(a) + OFFSET(a, s.s0, s.s1, s.s2, s.s3));
        /* the next element of a in ne order */
        if (++s.s0 == a_ne.s0) {
            s.s0 = 0;
            if (++s.s1 == a_ne.s1) {
                s.s1 = 0;
                if (++s.s2 == a_ne.s2) {
                    s.s2 = 0;
                    s.s3++;
                }
            }
        }
    }
    global uchar *b = BASE(d) + i1 * d_nb.s1 + i2 * d_nb.s2 + i3 * d_nb.s3 + c * kv_block_bytes(d_type);
    switch (d_type) {
    case DT_Q8_0: quant_q8_0(x, b); break;
    case DT_Q4_0: quant_sym(x, b, 8); break;
    case DT_Q5_0: quant_sym(x, b, 16); break;
    case DT_Q4_1: quant_affine(x, b, 15); break;
    case DT_Q5_1: quant_affine(x, b, 31); break;
    case DT_IQ4_NL: quant_iq4_nl(x, b); break;
    default: break;
    }
}
