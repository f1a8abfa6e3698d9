/*
 * attn.cl - FLASH_ATTN, fused attention with an online softmax.
 *
 * q [D, n_q, H, 1] F32, k/v [D, n_kv, H_kv, 1] F32/F16/BF16 or a KV cache
 * block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: rows of whole blocks,
 * dequantized 32 elements at a time with dequant32), mask optional
 * [n_kv, >= n_q] F32/F16 -> d [D, H, n_q, 1]. Work-item (h, i) computes query
 * i of head h against kv head h / (H / H_kv) in one pass over the keys,
 * keeping the running maximum, the running sum of weights and the weighted
 * sum of values (rescaled whenever the maximum grows). D <= ATTN_MAX_D.
 * A query whose every score is -inf gets zeros, as in ref_attn.c (the
 * straightforward two-pass version).
 */
#define ATTN_MAX_D 256

/* Elements 32c .. 32c+n-1 of a k or v row into out: loaded one by one
 * (stride nb0) for a float type, dequantized for a block type (n = 32). */
static inline void kv_chunk(const global uchar *row, int type, long nb0, long c, int n, float *out) {
    if (type == DT_F32 || type == DT_F16 || type == DT_BF16) {
        for (int j = 0; j < n; j++) out[j] = load_float(type, row + (32 * c + j) * nb0);
    } else {
        dequant32(row, type, c, out);
    }
}

kernel void k_flash_attn(TENSOR(q), TENSOR(k), TENSOR(v), TENSOR(m), TENSOR(d), int has_mask,
                         float scale) {
    const long h = get_global_id(0), i = get_global_id(1);
    const long D = q_ne.s0, n_q = q_ne.s1, H = q_ne.s2, n_kv = k_ne.s1;
    if (h >= H || i >= n_q) return;
    const long g = h / (H / k_ne.s2), n_chunks = (D + 31) / 32;
    const global uchar *qrow = BASE(q) + OFFSET(q, 0, i, h, 0);
    float qf[ATTN_MAX_D], acc[ATTN_MAX_D], t[32];
    for (long e = 0; e < D; e++) {
        qf[e] = load_float(q_type, qrow + e * q_nb.s0);
        acc[e] = 0.0f;
    }
    float mx = -INFINITY, sum = 0.0f;
    for (long j = 0; j < n_kv; j++) {
        float s = 0.0f;
        if (has_mask) s = load_float(m_type, BASE(m) + OFFSET(m, j, i, 0, 0));
        if (s == -INFINITY) continue;
        const global uchar *krow = BASE(k) + j * k_nb.s1 + g * k_nb.s2;
        float dot = 0.0f;
        for (long c = 0; c < n_chunks; c++) {
            const int n = (int)min(32L, D - 32 * c);
            kv_chunk(krow, k_type, k_nb.s0, c, n, t);
            for (int e = 0; e < n; e++) dot += qf[32 * c + e] * t[e];
        }
        s += scale * dot;
        if (s == -INFINITY) continue;
        if (s > mx) {
            /* a new maximum: rescale what was summed so far */
            float r = exp(mx - s);
            sum *= r;
            for (long e = 0; e < D; e++) acc[e] *= r;
            mx = s;
        }
        float p = exp(s - mx);
        sum += p;
        const global uchar *vrow = BASE(v) + j * v_nb.s1 + g * v_nb.s2;
        for (long c = 0; c < n_chunks; c++) {
            const int n = (int)min(32L, D - 32 * c);
            kv_chunk(vrow, v_type, v_nb.s0, c, n, t);
            for (int e = 0; e < n; e++) acc[32 * c + e] += p * t[e];
        }
    }
    global uchar *out = BASE(d) + OFFSET(d, 0, h, i, 0);
    for (long e = 0; e < D; e++) store_float(d_type, out + e * d_nb.s0, sum > 0.0f ? acc[e] / sum : 0.0f);
}
