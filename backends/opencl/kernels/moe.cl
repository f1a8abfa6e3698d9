/*
 * moe.cl - the mixture-of-experts ops of ABI 1.4: MUL_MAT_ID, TOP_K and
 * SUM_ROWS (DIV is k_binary's, elementwise.cl).
 *
 * k_mul_mat_id: d[n, s, t] = sum_k w[k, n, e] * x[k, s % n_b, t], e = ids[s, t];
 * w [K, N, E] F32, F16, BF16 or a quantized type (rows of whole blocks), x
 * F32 [K, n_b, T], ids I32 [n_used, T], d F32 [N, n_used, T]. One work-group
 * of WG items per output element, as k_mul_mat's with one column: item lid
 * takes k-chunks lid, lid + WG, ... (32 elements for block types), partial
 * sums meet in local memory. An id outside 0..E-1 cannot be reported from a
 * kernel: that slot's row is written as 0 and nothing is read through it.
 * The straightforward version is ref_matmul.c (double sums); here f32.
 */
kernel void k_mul_mat_id(TENSOR(w), TENSOR(x), TENSOR(ids), TENSOR(d), int quant) {
    local float scratch[WG];
    const int lid = get_local_id(0);
    const long n = get_group_id(0), s = get_group_id(1), t = get_group_id(2);
    const long K = w_ne.s0, E = w_ne.s2;
    global uchar *out = BASE(d) + OFFSET(d, n, s, t, 0);
    const int e = *(const global int *)(BASE(ids) + OFFSET(ids, s, t, 0, 0));
    if (e < 0 || e >= E) {
        if (lid == 0) *(global float *)out = 0.0f;
        return;
    }
    const global uchar *wrow = BASE(w) + n * w_nb.s1 + e * w_nb.s2;
    const global uchar *xrow = BASE(x) + OFFSET(x, 0, s % x_ne.s1, t, 0);
    float acc = 0.0f;
    if (quant) {
        float wv[32];
        for (long c = lid; c < K / 32; c += WG) {
            dequant32(wrow, w_type, c, wv);
            const global uchar *xp = xrow + 32 * c * x_nb.s0;
            float sum = 0.0f;
            for (int i = 0; i < 32; i++) sum += wv[i] * *(const global float *)(xp + i * x_nb.s0);
            acc += sum;
        }
    } else {
        for (long k = lid; k < K; k += WG)
            acc += load_float(w_type, wrow + k * w_nb.s0) * *(const global float *)(xrow + k * x_nb.s0);
    }
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = WG / 2; h > 0; h /= 2) {
        if (lid < h) scratch[lid] += scratch[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) *(global float *)out = scratch[0];
}

/* TOP_K's order: x (at index i) ranks before y (at j): larger first, equal
 * values by lower index, NaN after every number. */
static inline int ranks_before(float x, long i, float y, long j) {
    if (isnan(x) || isnan(y)) return isnan(x) == isnan(y) ? i < j : isnan(y);
    return x > y || (x == y && i < j);
}

/* k_top_k: work-item (i0, i1, i2 + ne2 * i3) of a's shape counts how many
 * elements of its row rank before it; a rank below k writes d[rank] = i0, so
 * each element of d is written once (ranks are a permutation). */
kernel void k_top_k(TENSOR(a), TENSOR(d)) {
    const long i0 = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    const long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (i0 >= a_ne.s0 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    const global uchar *row = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    const float x = *(const global float *)(row + i0 * a_nb.s0);
    long rank = 0;
    for (long j = 0; j < a_ne.s0; j++)
        rank += ranks_before(*(const global float *)(row + j * a_nb.s0), j, x, i0);
    if (rank < d_ne.s0) *(global int *)(BASE(d) + OFFSET(d, rank, i1, i2, i3)) = (int)i0;
}

/* k_sum_rows: one work-item per row, a compensated (Kahan) f32 sum in
 * index order (the program is built without fast-math options). */
kernel void k_sum_rows(TENSOR(a), TENSOR(d)) {
    const long i1 = get_global_id(1), i23 = get_global_id(2);
    const long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (get_global_id(0) != 0 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    const global uchar *row = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    float sum = 0.0f, c = 0.0f;
    for (long k = 0; k < a_ne.s0; k++) {
        const float y = *(const global float *)(row + k * a_nb.s0) - c;
        const float t = sum + y;
        c = (t - sum) - y;
        sum = t;
    }
    *(global float *)(BASE(d) + OFFSET(d, 0, i1, i2, i3)) = sum;
}
