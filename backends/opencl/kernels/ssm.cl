/*
 * ssm.cl - the recurrent ops of state-space models (ABI 1.4): SSM_CONV and
 * SSM_SCAN, and DELTA_NET (ABI 1.5), semantics in tessera/plugin.h. The straightforward versions
 * are ref_ssm.c (sums and the state in double); here f32, operation for
 * operation in the same order. All tensors F32, read through their
 * strides.
 */

/* k_ssm_conv: one work-item per dst element (c, t, s + S * 0):
 * d[c, t, s] = sum_k sx[t + k, c, s] * w[k, c], sx [K - 1 + T, C, S],
 * w [K, C], d [C, T, S]; summed in k order. */
kernel void k_ssm_conv(TENSOR(sx), TENSOR(w), TENSOR(d)) {
    const long c = get_global_id(0), t = get_global_id(1), s = get_global_id(2);
    if (c >= d_ne.s0 || t >= d_ne.s1 || s >= d_ne.s2) return;
    float acc = 0.0f;
    for (long k = 0; k < w_ne.s0; k++)
        acc += *(const global float *)(BASE(sx) + OFFSET(sx, t + k, c, s, 0)) *
               *(const global float *)(BASE(w) + OFFSET(w, k, c, 0, 0));
    *(global float *)(BASE(d) + OFFSET(d, c, t, s, 0)) = acc;
}

/* softplus as llama.cpp writes it: log(1 + e^x), x itself past 20. */
static inline float ssm_softplus(float x) { return x > 20.0f ? x : log1p(exp(x)); }

/* k_ssm_scan: one work-item per row (p, h, s) of the state
 * st [N, P, H, S]; xbc [P*H + 2*G*N, T, S] (x, then B [N, G], then C
 * [N, G]), dt [H, T, S], a [H] or [1, H]; d 1-D: y [P, H, T, S] then the
 * final state [N, P, H, S]. The row is copied into d's state part first
 * and updated there token by token (no limit on N; each work-item owns its
 * N contiguous floats). */
kernel void k_ssm_scan(TENSOR(st), TENSOR(xbc), TENSOR(dt), TENSOR(a), TENSOR(d)) {
    const long p = get_global_id(0), h = get_global_id(1), s = get_global_id(2);
    const long N = st_ne.s0, P = st_ne.s1, H = st_ne.s2, S = st_ne.s3, T = xbc_ne.s1;
    if (p >= P || h >= H || s >= S) return;
    const long G = (xbc_ne.s0 - P * H) / (2 * N), g = h / (H / G);
    const long xB = P * H + g * N, xC = P * H + G * N + g * N;
    const float A = *(const global float *)(BASE(a) + (a_ne.s0 == H ? OFFSET(a, h, 0, 0, 0) : OFFSET(a, 0, h, 0, 0)));
    global uchar *out = BASE(d);
    const long ds = d_nb.s0;
    global uchar *row = out + (P * H * T * S + ((s * H + h) * P + p) * N) * ds;
    for (long n = 0; n < N; n++)
        *(global float *)(row + n * ds) = *(const global float *)(BASE(st) + OFFSET(st, n, p, h, s));
    for (long t = 0; t < T; t++) {
        const float dv = ssm_softplus(*(const global float *)(BASE(dt) + OFFSET(dt, h, t, s, 0)));
        const float decay = exp(dv * A);
        const global uchar *xt = BASE(xbc) + OFFSET(xbc, 0, t, s, 0);
        const float xd = *(const global float *)(xt + (h * P + p) * xbc_nb.s0) * dv;
        float y = 0.0f;
        for (long n = 0; n < N; n++) {
            global float *hp = (global float *)(row + n * ds);
            const float hn = *hp * decay + *(const global float *)(xt + (xB + n) * xbc_nb.s0) * xd;
            *hp = hn;
            y += hn * *(const global float *)(xt + (xC + n) * xbc_nb.s0);
        }
        *(global float *)(out + (((s * T + t) * H + h) * P + p) * ds) = y;
    }
}

/* k_delta_net (ABI 1.5): one work-item per column (i, h, s) of the gated
 * delta rule's state: column i of head h evolves on its own (u[i], the
 * Dk entries S[i, n] and y[i] need no other column). st [Dv, Dk, H, S];
 * x [2*Hk*Dk + H*Dv, T, S] (q [Dk, Hk], k [Dk, Hk], v [Dv, H]); gt
 * [H, 2, T, S] (beta logits, then the decay inputs); a [H] or [1, H];
 * d 1-D: y [Dv, H, T, S] then the final state [Dv, Dk, H, S], updated
 * in place there. Each work-item computes q's and k's norms itself (Dk
 * products each, per token), as ref_op_delta_net does per head. */
kernel void k_delta_net(TENSOR(st), TENSOR(x), TENSOR(gt), TENSOR(a), TENSOR(d), float eps, float scale,
                        int tiled) {
    const long i = get_global_id(0), h = get_global_id(1), s = get_global_id(2);
    const long Dv = st_ne.s0, Dk = st_ne.s1, H = st_ne.s2, S = st_ne.s3, T = x_ne.s1;
    if (i >= Dv || h >= H || s >= S) return;
    const long Hk = (x_ne.s0 - H * Dv) / (2 * Dk), j = tiled ? h % Hk : h / (H / Hk);
    const long q0 = j * Dk, k0 = (Hk + j) * Dk, v0 = 2 * Hk * Dk + h * Dv;
    const float A = *(const global float *)(BASE(a) + (a_ne.s0 == H ? OFFSET(a, h, 0, 0, 0) : OFFSET(a, 0, h, 0, 0)));
    global uchar *out = BASE(d);
    const long ds = d_nb.s0, e = x_nb.s0;
    global uchar *col = out + (Dv * H * T * S + (s * H + h) * Dk * Dv + i) * ds; /* S[i, n] at n * Dv */
    for (long n = 0; n < Dk; n++)
        *(global float *)(col + n * Dv * ds) = *(const global float *)(BASE(st) + OFFSET(st, i, n, h, s));
    for (long t = 0; t < T; t++) {
        const global uchar *xt = BASE(x) + OFFSET(x, 0, t, s, 0);
        float qq = 0.0f, kk = 0.0f;
        for (long n = 0; n < Dk; n++) {
            const float qv = *(const global float *)(xt + (q0 + n) * e);
            const float kv = *(const global float *)(xt + (k0 + n) * e);
            qq += qv * qv;
            kk += kv * kv;
        }
        const float qs = scale / fmax(sqrt(qq), eps), ks = 1.0f / fmax(sqrt(kk), eps);
        const float decay = exp(A * ssm_softplus(*(const global float *)(BASE(gt) + OFFSET(gt, h, 1, t, s))));
        const float beta = 1.0f / (1.0f + exp(-*(const global float *)(BASE(gt) + OFFSET(gt, h, 0, t, s))));
        float sk = 0.0f;
        for (long n = 0; n < Dk; n++) {
            global float *sp = (global float *)(col + n * Dv * ds);
            const float sn = *sp * decay;
            *sp = sn;
            sk += sn * (*(const global float *)(xt + (k0 + n) * e) * ks);
        }
        const float u = beta * (*(const global float *)(xt + (v0 + i) * e) - sk);
        float y = 0.0f;
        for (long n = 0; n < Dk; n++) {
            global float *sp = (global float *)(col + n * Dv * ds);
            const float sn = *sp + *(const global float *)(xt + (k0 + n) * e) * ks * u;
            *sp = sn;
            y += sn * (*(const global float *)(xt + (q0 + n) * e) * qs);
        }
        *(global float *)(out + (((s * T + t) * H + h) * Dv + i) * ds) = y;
    }
}
