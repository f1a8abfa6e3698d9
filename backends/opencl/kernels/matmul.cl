/*
 * matmul.cl - MUL_MAT: d[m, n, b2, b3] = sum_k w[k, m, b2/r2, b3/r3] * x[k, n, b2, b3]
 *
 * w: F32, F16, BF16 or a quantized type (rows of whole blocks); x, d: F32.
 * One work-group of WG items per (m, 4 columns n0..n0+3, batch b2 + B2 * b3):
 * item lid takes k-chunks lid, lid + WG, ... of the weight row, dequantizes
 * each once (32 elements for block types, one element for plain types) and
 * multiplies it with the up to four activation columns; the partial sums
 * meet in local memory. The straightforward version is ref_matmul.c (double
 * sums); here sums are f32.
 */
#define MM_COLS 4

kernel void k_mul_mat(TENSOR(w), TENSOR(x), TENSOR(d), long r2, long r3, int quant) {
    local float scratch[MM_COLS][WG];
    const int lid = get_local_id(0);
    const long m = get_group_id(0), n0 = get_group_id(1) * MM_COLS, b23 = get_group_id(2);
    const long b2 = b23 % d_ne.s2, b3 = b23 / d_ne.s2;
    const long K = w_ne.s0, N = d_ne.s1;
    const int cols = (int)min((long)MM_COLS, N - n0);
    const global uchar *wrow = BASE(w) + m * w_nb.s1 + (b2 / r2) * w_nb.s2 + (b3 / r3) * w_nb.s3;
    const global uchar *xcol[MM_COLS];
    for (int j = 0; j < MM_COLS; j++)
        xcol[j] = BASE(x) + OFFSET(x, 0, n0 + min(j, cols - 1), b2, b3);
    float acc[MM_COLS] = {0.0f, 0.0f, 0.0f, 0.0f};

    if (quant) {
        float wv[32];
        for (long c = lid; c < K / 32; c += WG) {
            dequant32(wrow, w_type, c, wv);
            for (int j = 0; j < cols; j++) {
                const global uchar *xp = xcol[j] + 32 * c * x_nb.s0;
                float s = 0.0f;
                for (int e = 0; e < 32; e++) s += wv[e] * *(const global float *)(xp + e * x_nb.s0);
                acc[j] += s;
            }
        }
    } else {
        for (long k = lid; k < K; k += WG) {
            float wk = load_float(w_type, wrow + k * w_nb.s0);
            for (int j = 0; j < cols; j++) acc[j] += wk * *(const global float *)(xcol[j] + k * x_nb.s0);
        }
    }

    for (int j = 0; j < MM_COLS; j++) scratch[j][lid] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s /= 2) {
        if (lid < s)
            for (int j = 0; j < MM_COLS; j++) scratch[j][lid] += scratch[j][lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int j = lid; j < cols; j += WG)
        *(global float *)(BASE(d) + OFFSET(d, m, n0 + j, b2, b3)) = scratch[j][0];
}
