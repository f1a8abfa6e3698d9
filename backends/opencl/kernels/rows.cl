/*
 * rows.cl - ops that move data: GET_ROWS, CPY (float <-> float, quantized ->
 * F32), ARGMAX.
 */

/* a [n, r, b2, b3], rows I32 [m, b2, b3] -> d [n, m, b2, b3], one element per
 * work-item (i0, i1, i2 + b2 * i3). An index outside 0..r-1 (bad data) reads
 * as zeros instead of touching memory it does not own. */
kernel void k_get_rows_float(TENSOR(a), TENSOR(rows), TENSOR(d)) {
    long i0 = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    long i2 = i23 % d_ne.s2, i3 = i23 / d_ne.s2;
    if (i0 >= d_ne.s0 || i1 >= d_ne.s1 || i3 >= d_ne.s3) return;
    int r = *(const global int *)(BASE(rows) + OFFSET(rows, i1, i2, i3, 0));
    float v = r >= 0 && r < a_ne.s1 ? load_float(a_type, BASE(a) + OFFSET(a, i0, r, i2, i3)) : 0.0f;
    store_float(d_type, BASE(d) + OFFSET(d, i0, i1, i2, i3), v);
}

/* The same for a quantized a: work-item (c, i1, i2 + b2 * i3) writes the 32
 * elements of chunk c. */
kernel void k_get_rows_quant(TENSOR(a), TENSOR(rows), TENSOR(d)) {
    long c = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    long i2 = i23 % d_ne.s2, i3 = i23 / d_ne.s2;
    if (c >= d_ne.s0 / 32 || i1 >= d_ne.s1 || i3 >= d_ne.s3) return;
    int r = *(const global int *)(BASE(rows) + OFFSET(rows, i1, i2, i3, 0));
    float v[32];
    if (r >= 0 && r < a_ne.s1) {
        dequant32(BASE(a) + r * a_nb.s1 + i2 * a_nb.s2 + i3 * a_nb.s3, a_type, c, v);
    } else {
        for (int j = 0; j < 32; j++) v[j] = 0.0f;
    }
    for (int j = 0; j < 32; j++)
        store_float(d_type, BASE(d) + OFFSET(d, 32 * c + j, i1, i2, i3), v[j]);
}

/* Element (i0..i3) of a goes to the element of d with the same flat index
 * (ne order, i0 fastest); either side may be a strided view. */
kernel void k_cpy_float(TENSOR(a), TENSOR(d)) {
    long i0 = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (i0 >= a_ne.s0 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    long flat = i0 + a_ne.s0 * (i1 + a_ne.s1 * (i2 + a_ne.s2 * i3));
    long4 j = unflatten(flat, d_ne);
    float v = load_float(a_type, BASE(a) + OFFSET(a, i0, i1, i2, i3));
    store_float(d_type, BASE(d) + OFFSET(d, j.s0, j.s1, j.s2, j.s3), v);
}

/* Quantized a to a float d: work-item (c, i1, i2 + ne2 * i3) of a converts
 * chunk c of row (i1, i2, i3). */
kernel void k_cpy_dequant(TENSOR(a), TENSOR(d)) {
    long c = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    if (c >= a_ne.s0 / 32 || i1 >= a_ne.s1 || i3 >= a_ne.s3) return;
    float v[32];
    dequant32(BASE(a) + i1 * a_nb.s1 + i2 * a_nb.s2 + i3 * a_nb.s3, a_type, c, v);
    long flat = 32 * c + a_ne.s0 * (i1 + a_ne.s1 * (i2 + a_ne.s2 * i3));
    for (int k = 0; k < 32; k++) {
        long4 j = unflatten(flat + k, d_ne);
        store_float(d_type, BASE(d) + OFFSET(d, j.s0, j.s1, j.s2, j.s3), v[k]);
    }
}

/* One work-group of WG items per row of a (group (i1, i2 + ne2 * i3)): the
 * index of the largest element, the first on ties; NaNs never win; 0 when
 * no element is larger than -inf. */
kernel void k_argmax(TENSOR(a), TENSOR(d)) {
    local float best_v[WG];
    local int best_i[WG];
    const int lid = get_local_id(0);
    long i1 = get_group_id(1), i23 = get_group_id(2);
    long i2 = i23 % a_ne.s2, i3 = i23 / a_ne.s2;
    const global uchar *row = BASE(a) + OFFSET(a, 0, i1, i2, i3);
    float bv = -INFINITY;
    int bi = -1;
    for (long i0 = lid; i0 < a_ne.s0; i0 += WG) {
        float x = load_float(a_type, row + i0 * a_nb.s0);
        if (x > bv) { bv = x; bi = (int)i0; }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s /= 2) {
        if (lid < s) {
            float ov = best_v[lid + s];
            int oi = best_i[lid + s];
            if (oi >= 0 && (best_i[lid] < 0 || ov > best_v[lid] ||
                            (ov == best_v[lid] && oi < best_i[lid]))) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        long r = i1 + a_ne.s1 * (i2 + a_ne.s2 * i3);
        long4 j = unflatten(r, d_ne);
        *(global int *)(BASE(d) + OFFSET(d, j.s0, j.s1, j.s2, j.s3)) = best_i[0] < 0 ? 0 : best_i[0];
    }
}
