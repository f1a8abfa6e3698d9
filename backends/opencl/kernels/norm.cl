/*
 * norm.cl - row reductions: RMS_NORM, NORM, SOFT_MAX.
 *
 * One work-group of WG items per row (group (i1, i2 + ne2 * i3)); item lid
 * handles elements lid, lid + WG, ... and sums meet in local memory. Each
 * item reads an element before it writes the same element, so dst may alias
 * src0. (The straightforward version: ref_ops_norm.c, sums in double; here
 * f32 partial sums, within the suite's tolerance.)
 */

/* Sum of v over the work-group; every item gets the result. */
static inline float group_sum(local float *scratch, float v) {
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s /= 2) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

static inline float group_max(local float *scratch, float v) {
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s /= 2) {
        if (lid < s) scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* rms = 0: x - mean(x) first (NORM); 1: no centering (RMS_NORM) */
kernel void k_norm(TENSOR(a), TENSOR(d), float eps, int rms) {
    local float scratch[WG];
    const int lid = get_local_id(0);
    long i1 = get_group_id(1), i23 = get_group_id(2);
    long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    const global uchar *x = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    global uchar *y = BASE(d) + OFFSET(d, 0, i1, i2, i3);
    const long n = a_ne.s0;
    float mean = 0.0f;
    if (!rms) {
        float s = 0.0f;
        for (long i = lid; i < n; i += WG) s += load_float(a_type, x + i * a_nb.s0);
        mean = group_sum(scratch, s) / (float)n;
    }
    float s2 = 0.0f;
    for (long i = lid; i < n; i += WG) {
        float v = load_float(a_type, x + i * a_nb.s0) - mean;
        s2 += v * v;
    }
    const float scale = 1.0f / sqrt(group_sum(scratch, s2) / (float)n + eps);
    for (long i = lid; i < n; i += WG)
        store_float(d_type, y + i * d_nb.s0, (load_float(a_type, x + i * a_nb.s0) - mean) * scale);
}

/* each row: softmax(x * scale + slope * mask); mask [n, >= rows, m2, m3]
 * broadcast over dims 2 and 3; slope is ALiBi's for head i2 (1 when
 * max_bias is 0). A row that is all -inf becomes zeros, as in ref. */
kernel void k_soft_max(TENSOR(a), TENSOR(m), TENSOR(d), int has_mask, float scale,
                       float max_bias, float m0, float m1, int n_head_log2) {
    local float scratch[WG];
    const int lid = get_local_id(0);
    long i1 = get_group_id(1), i23 = get_group_id(2);
    long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    const global uchar *x = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    global uchar *y = BASE(d) + OFFSET(d, 0, i1, i2, i3);
    const global uchar *mrow = has_mask ? BASE(m) + OFFSET(m, 0, i1, i2 % m_ne.s2, i3 % m_ne.s3) : 0;
    const long n = a_ne.s0;
    float slope = 1.0f;
    if (max_bias > 0.0f)
        slope = i2 < n_head_log2 ? pow(m0, (float)(i2 + 1)) : pow(m1, (float)(2 * (i2 - n_head_log2) + 1));

    float mx = -INFINITY;
    for (long i = lid; i < n; i += WG) {
        float v = load_float(a_type, x + i * a_nb.s0) * scale;
        if (has_mask) v += slope * load_float(m_type, mrow + i * m_nb.s0);
        mx = fmax(mx, v);
    }
    mx = group_max(scratch, mx);
    float sum = 0.0f;
    if (mx != -INFINITY)
        for (long i = lid; i < n; i += WG) {
            float v = load_float(a_type, x + i * a_nb.s0) * scale;
            if (has_mask) v += slope * load_float(m_type, mrow + i * m_nb.s0);
            sum += exp(v - mx);
        }
    sum = group_sum(scratch, sum);
    const float inv = mx == -INFINITY ? 0.0f : 1.0f / sum;
    for (long i = lid; i < n; i += WG) {
        float v = load_float(a_type, x + i * a_nb.s0) * scale;
        if (has_mask) v += slope * load_float(m_type, mrow + i * m_nb.s0);
        store_float(d_type, y + i * d_nb.s0, mx == -INFINITY ? 0.0f : exp(v - mx) * inv);
    }
}
