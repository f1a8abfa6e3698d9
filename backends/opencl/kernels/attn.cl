/*
 * attn.cl - FLASH_ATTN, fused attention with an online softmax.
 *
 * q [D, n_q, H, 1] F32, k/v [D, n_kv, H_kv, 1] F32/F16/BF16, mask optional
 * [n_kv, >= n_q] F32/F16 -> d [D, H, n_q, 1]. Work-item (h, i) computes query
 * i of head h against kv head h / (H / H_kv) in one pass over the keys,
 * keeping the running maximum, the running sum of weights and the weighted
 * sum of values (rescaled whenever the maximum grows). D <= ATTN_MAX_D.
 * A query whose every score is -inf gets zeros, as in ref_attn.c (the
 * straightforward two-pass version).
 */
#define ATTN_MAX_D 256

kernel void k_flash_attn(TENSOR(q), TENSOR(k), TENSOR(v), TENSOR(m), TENSOR(d), int has_mask,
                         float scale) {
    const long h = get_global_id(0), i = get_global_id(1);
    const long D = q_ne.s0, n_q = q_ne.s1, H = q_ne.s2, n_kv = k_ne.s1;
    if (h >= H || i >= n_q) return;
    const long g = h / (H / k_ne.s2);
    const global uchar *qrow = BASE(q) + OFFSET(q, 0, i, h, 0);
    float acc[ATTN_MAX_D];
    for (long e = 0; e < D; e++) acc[e] = 0.0f;
    float mx = -INFINITY, sum = 0.0f;
    for (long j = 0; j < n_kv; j++) {
        float s = 0.0f;
        if (has_mask) s = load_float(m_type, BASE(m) + OFFSET(m, j, i, 0, 0));
        if (s == -INFINITY) continue;
        const global uchar *krow = BASE(k) + OFFSET(k, 0, j, g, 0);
        float dot = 0.0f;
        for (long e = 0; e < D; e++)
            dot += load_float(q_type, qrow + e * q_nb.s0) * load_float(k_type, krow + e * k_nb.s0);
        s += scale * dot;
        if (s == -INFINITY) continue;
        const global uchar *vrow = BASE(v) + OFFSET(v, 0, j, g, 0);
        if (s > mx) {
            /* a new maximum: rescale what was summed so far */
            float r = exp(mx - s);
            sum *= r;
            for (long e = 0; e < D; e++) acc[e] *= r;
            mx = s;
        }
        float p = exp(s - mx);
        sum += p;
        for (long e = 0; e < D; e++) acc[e] += p * load_float(v_type, vrow + e * v_nb.s0);
    }
    global uchar *out = BASE(d) + OFFSET(d, 0, h, i, 0);
    for (long e = 0; e < D; e++) store_float(d_type, out + e * d_nb.s0, sum > 0.0f ? acc[e] / sum : 0.0f);
}
