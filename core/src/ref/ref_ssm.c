/*
 * ref_ssm — the recurrent ops of state-space models (ABI 1.4): SSM_CONV,
 * the causal depthwise convolution over time of Mamba-2 and LFM2's short
 * convolutions, and SSM_SCAN, Mamba-2's selective scan. Semantics in
 * tessera/plugin.h; both follow llama.cpp's ggml_ssm_conv and
 * ggml_ssm_scan (Mamba-2 form: one scalar A per head).
 *
 * Both are pure: they read the previous state as a source and give the
 * next one in their output; the model's graph copies it back into the
 * recurrent-state cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "util/error.h"

static float f32_at(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float v;
    memcpy(&v, ref_tensor_base(t) + ref_offset(t, i0, i1, i2, i3), sizeof v);
    return v;
}

static void f32_put(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
    memcpy(ref_tensor_base(t) + ref_offset(t, i0, i1, i2, i3), &v, sizeof v);
}

/* sx [K - 1 + T, C, S], w [K, C] -> dst [C, T, S]:
 * dst[c, t, s] = sum_k sx[t + k, c, s] * w[k, c] (summed in double). */
tsr_status ref_op_ssm_conv(const tsr_node *node) {
    const tsr_tensor *sx = node->src[0], *w = node->src[1], *dst = node->dst;
    const int64_t K = w->ne[0], C = w->ne[1], T = dst->ne[1], S = dst->ne[2];
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < C; c++) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; k++) acc += (double)f32_at(sx, t + k, c, s, 0) * f32_at(w, k, c, 0, 0);
                f32_put(dst, c, t, s, 0, (float)acc);
            }
    return TSR_OK;
}

/* softplus as llama.cpp writes it: log(1 + e^x), x itself past 20. */
static double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }

/* state [N, P, H, S], xBC [P*H + 2*G*N, T, S], dt [H, T, S], A [H] or [1, H]
 * -> dst [P*H*T*S + N*P*H*S]: y [P, H, T, S] then the final state. The
 * state is carried in double through the tokens of one call. */
tsr_status ref_op_ssm_scan(const tsr_node *node) {
    const tsr_tensor *st = node->src[0], *xbc = node->src[1], *dt = node->src[2], *a = node->src[3];
    const tsr_tensor *dst = node->dst;
    const int64_t N = st->ne[0], P = st->ne[1], H = st->ne[2], S = st->ne[3], T = xbc->ne[1];
    const int64_t G = (xbc->ne[0] - P * H) / (2 * N), heads_per_group = H / G;
    const int64_t y_elems = P * H * T * S;
    double *h = malloc((size_t)(N * P) * sizeof *h);
    if (!h) {
        error_set("ref: SSM_SCAN '%s': out of memory for a state of %lld", ref_node_label(node),
                  (long long)(N * P));
        return TSR_ERR_NO_MEMORY;
    }
    uint8_t *out = ref_tensor_base(dst);
    for (int64_t s = 0; s < S; s++)
        for (int64_t ih = 0; ih < H; ih++) {
            const int64_t g = ih / heads_per_group;
            const double A = a->ne[0] == H ? f32_at(a, ih, 0, 0, 0) : f32_at(a, 0, ih, 0, 0);
            for (int64_t p = 0; p < P; p++)
                for (int64_t n = 0; n < N; n++) h[p * N + n] = f32_at(st, n, p, ih, s);
            for (int64_t t = 0; t < T; t++) {
                const double d = softplus(f32_at(dt, ih, t, s, 0));
                const double decay = exp(d * A);
                for (int64_t p = 0; p < P; p++) {
                    const double xd = (double)f32_at(xbc, ih * P + p, t, s, 0) * d;
                    double y = 0.0;
                    for (int64_t n = 0; n < N; n++) {
                        const double B = f32_at(xbc, P * H + g * N + n, t, s, 0);
                        const double Cv = f32_at(xbc, P * H + G * N + g * N + n, t, s, 0);
                        h[p * N + n] = h[p * N + n] * decay + B * xd;
                        y += h[p * N + n] * Cv;
                    }
                    const float yf = (float)y;
                    const int64_t iy = ((s * T + t) * H + ih) * P + p;
                    memcpy(out + iy * dst->nb[0], &yf, sizeof yf);
                }
            }
            for (int64_t p = 0; p < P; p++)
                for (int64_t n = 0; n < N; n++) {
                    const float v = (float)h[p * N + n];
                    const int64_t is = y_elems + ((s * H + ih) * P + p) * N + n;
                    memcpy(out + is * dst->nb[0], &v, sizeof v);
                }
        }
    free(h);
    return TSR_OK;
}

/* The L2 norm of n floats of src1 from element i0 of column (t, s), as
 * ggml_l2_norm divides: by max(norm, eps). */
static double l2_div(const tsr_tensor *x, int64_t i0, int64_t n, int64_t t, int64_t s, double eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double v = f32_at(x, i0 + i, t, s, 0);
        ss += v * v;
    }
    const double norm = sqrt(ss);
    return norm > eps ? norm : eps;
}

/* DELTA_NET (ABI 1.5), the gated delta rule: state [Dv, Dk, H, S], qkv
 * [2*Hk*Dk + H*Dv, T, S], gates [H, 2, T, S] (b, then a), A [H] or [1, H]
 * -> dst [Dv*H*T*S + Dv*Dk*H*S]: y [Dv, H, T, S] then the final state.
 * Per head the state S[i, n] (i < Dv, n < Dk) is carried in double:
 *   S = exp(A softplus(a)) S;  u = sigmoid(b) (v - S k');  S += u k'^T;  y = S q'
 * with q', k' the L2-normalised q and k (q' times scale). llama.cpp writes
 * the same as ggml_l2_norm on q and k and its fused gated delta net op. */
tsr_status ref_op_delta_net(const tsr_node *node) {
    const tsr_tensor *st = node->src[0], *qkv = node->src[1], *gt = node->src[2], *a = node->src[3];
    const tsr_tensor *dst = node->dst;
    const tsr_delta_net_params p = tsr_delta_net_params_of(node);
    const int64_t Dv = st->ne[0], Dk = st->ne[1], H = st->ne[2], S = st->ne[3], T = qkv->ne[1];
    const int64_t Hk = (qkv->ne[0] - H * Dv) / (2 * Dk), per = H / Hk;
    const int64_t y_elems = Dv * H * T * S;
    double *m = malloc((size_t)(Dv * Dk + 2 * Dk + Dv) * sizeof *m);
    if (!m) {
        error_set("ref: DELTA_NET '%s': out of memory for a state of %lld", ref_node_label(node),
                  (long long)(Dv * Dk));
        return TSR_ERR_NO_MEMORY;
    }
    double *qn = m + Dv * Dk, *kn = qn + Dk, *u = kn + Dk;
    uint8_t *out = ref_tensor_base(dst);
    for (int64_t s = 0; s < S; s++)
        for (int64_t h = 0; h < H; h++) {
            const int64_t j = p.kv_tiled ? h % Hk : h / per;
            const int64_t q0 = j * Dk, k0 = Hk * Dk + j * Dk, v0 = 2 * Hk * Dk + h * Dv;
            const double A = a->ne[0] == H ? f32_at(a, h, 0, 0, 0) : f32_at(a, 0, h, 0, 0);
            for (int64_t n = 0; n < Dk; n++)
                for (int64_t i = 0; i < Dv; i++) m[n * Dv + i] = f32_at(st, i, n, h, s);
            for (int64_t t = 0; t < T; t++) {
                const double qd = l2_div(qkv, q0, Dk, t, s, p.eps), kd = l2_div(qkv, k0, Dk, t, s, p.eps);
                for (int64_t n = 0; n < Dk; n++) {
                    qn[n] = f32_at(qkv, q0 + n, t, s, 0) / qd * p.scale;
                    kn[n] = f32_at(qkv, k0 + n, t, s, 0) / kd;
                }
                const double decay = exp(A * softplus(f32_at(gt, h, 1, t, s)));
                const double beta = 1.0 / (1.0 + exp(-(double)f32_at(gt, h, 0, t, s)));
                for (int64_t i = 0; i < Dv; i++) {
                    double sk = 0.0;
                    for (int64_t n = 0; n < Dk; n++) sk += (m[n * Dv + i] *= decay) * kn[n];
                    u[i] = beta * (f32_at(qkv, v0 + i, t, s, 0) - sk);
                }
                for (int64_t i = 0; i < Dv; i++) {
                    double y = 0.0;
                    for (int64_t n = 0; n < Dk; n++) y += (m[n * Dv + i] += kn[n] * u[i]) * qn[n];
                    const float yf = (float)y;
                    const int64_t iy = ((s * T + t) * H + h) * Dv + i;
                    memcpy(out + iy * dst->nb[0], &yf, sizeof yf);
                }
            }
            for (int64_t n = 0; n < Dk; n++)
                for (int64_t i = 0; i < Dv; i++) {
                    const float v = (float)m[n * Dv + i];
                    const int64_t is = y_elems + ((s * H + h) * Dk + n) * Dv + i;
                    memcpy(out + is * dst->nb[0], &v, sizeof v);
                }
        }
    free(m);
    return TSR_OK;
}
