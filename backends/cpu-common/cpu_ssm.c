/*
 * cpu_ssm — the recurrent ops of state-space models (ABI 1.4): SSM_CONV
 * (causal depthwise convolution over time) and SSM_SCAN (Mamba-2's
 * selective scan), and DELTA_NET (ABI 1.5, the gated delta rule of
 * Qwen3.5's Gated DeltaNet), f32 throughout as llama.cpp's CPU backend computes them.
 * Semantics in tessera/plugin.h; ref (core/src/ref/ref_ssm.c) is the
 * oracle, which carries the scan's state in double.
 */
#include <math.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "cpu_exec.h"
#include "cpu_ssm.h"

static inline float f32_at(const tsr_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    float v;
    memcpy(&v, tensor_ptr(t) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], sizeof v);
    return v;
}

/* sx [K - 1 + T, C, S], w [K, C] -> dst [C, T, S]; threads split channels. */
void cpu_ssm_conv(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *sx = node->src[0], *w = node->src[1], *d = node->dst;
    const int64_t K = w->ne[0], C = w->ne[1], T = d->ne[1], S = d->ne[2];
    int64_t lo, hi;
    split_range(C, ith, nth, &lo, &hi);
    for (int64_t s = 0; s < S; s++)
        for (int64_t c = lo; c < hi; c++) {
            float wk[16];
            const int64_t kk = K < 16 ? K : 16;
            for (int64_t k = 0; k < kk; k++) wk[k] = f32_at(w, k, c, 0, 0);
            for (int64_t t = 0; t < T; t++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc += f32_at(sx, t + k, c, s, 0) * (k < 16 ? wk[k] : f32_at(w, k, c, 0, 0));
                memcpy(tensor_ptr(d) + c * d->nb[0] + t * d->nb[1] + s * d->nb[2], &acc, sizeof acc);
            }
        }
}

static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* state [N, P, H, S], xBC [P*H + 2*G*N, T, S], dt [H, T, S], A -> dst: y
 * [P, H, T, S] then the final state [N, P, H, S] (packed; the state is
 * updated in place in dst). Threads split the heads of all sequences. */
void cpu_ssm_scan(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *st = node->src[0], *xbc = node->src[1], *dt = node->src[2], *a = node->src[3];
    const tsr_tensor *d = node->dst;
    const int64_t N = st->ne[0], P = st->ne[1], H = st->ne[2], S = st->ne[3], T = xbc->ne[1];
    const int64_t G = (xbc->ne[0] - P * H) / (2 * N), per_group = H / G;
    float *out = (float *)(void *)tensor_ptr(d); /* packed: checked in ops_supports */
    float *y_all = out, *s_all = out + P * H * T * S;
    int64_t lo, hi;
    split_range(H * S, ith, nth, &lo, &hi);
    for (int64_t hs = lo; hs < hi; hs++) {
        const int64_t ih = hs % H, s = hs / H, g = ih / per_group;
        const float A = a->ne[0] == H ? f32_at(a, ih, 0, 0, 0) : f32_at(a, 0, ih, 0, 0);
        float *h = s_all + (s * H + ih) * P * N; /* [N, P] of this head */
        for (int64_t p = 0; p < P; p++)
            for (int64_t n = 0; n < N; n++) h[p * N + n] = f32_at(st, n, p, ih, s);
        for (int64_t t = 0; t < T; t++) {
            const float dsp = softplus(f32_at(dt, ih, t, s, 0));
            const float decay = expf(dsp * A);
            const uint8_t *row = tensor_ptr(xbc) + t * xbc->nb[1] + s * xbc->nb[2];
            const int64_t e0 = xbc->nb[0];
            float *y = y_all + ((s * T + t) * H + ih) * P;
            for (int64_t p = 0; p < P; p++) {
                float xv;
                memcpy(&xv, row + (ih * P + p) * e0, sizeof xv);
                const float xd = xv * dsp;
                float *hp = h + p * N, acc = 0.0f;
                for (int64_t n = 0; n < N; n++) {
                    float B, C;
                    memcpy(&B, row + (P * H + g * N + n) * e0, sizeof B);
                    memcpy(&C, row + (P * H + G * N + g * N + n) * e0, sizeof C);
                    hp[n] = hp[n] * decay + B * xd;
                    acc += hp[n] * C;
                }
                y[p] = acc;
            }
        }
    }
}

/* ||x|| of n floats from p (stride e bytes), divided as ggml_l2_norm: by
 * max(norm, eps). */
static float l2_div(const uint8_t *p, int64_t e, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + i * e, sizeof v);
        ss += v * v;
    }
    const float norm = sqrtf(ss);
    return norm > eps ? norm : eps;
}

/* DELTA_NET: state [Dv, Dk, H, S], qkv [2*Hk*Dk + H*Dv, T, S], gates
 * [H, 2, T, S], A -> dst: y [Dv, H, T, S] then the final state
 * [Dv, Dk, H, S] (packed; the state is updated in place in dst, rows of
 * Dv floats, so the inner loops run over contiguous v). Threads split the
 * heads of all sequences. The straightforward version is ref_op_delta_net
 * (the same loops in double); the per-token order of this one is
 *   S *= decay; u = beta (v - S^T k'); S += k' u^T; y = S^T q'
 * over the Dk rows of S, each Dv long. */
void cpu_delta_net(const tsr_node *node, int ith, int nth) {
    const tsr_tensor *st = node->src[0], *qkv = node->src[1], *gt = node->src[2], *a = node->src[3];
    const tsr_tensor *d = node->dst;
    const tsr_delta_net_params p = tsr_delta_net_params_of(node);
    const int64_t Dv = st->ne[0], Dk = st->ne[1], H = st->ne[2], S = st->ne[3], T = qkv->ne[1];
    const int64_t Hk = (qkv->ne[0] - H * Dv) / (2 * Dk), per = H / Hk;
    float *out = (float *)(void *)tensor_ptr(d); /* packed: checked in ops_supports */
    float *y_all = out, *s_all = out + Dv * H * T * S;
    const int64_t e0 = qkv->nb[0];
    int64_t lo, hi;
    split_range(H * S, ith, nth, &lo, &hi);
    for (int64_t hs = lo; hs < hi; hs++) {
        const int64_t h = hs % H, s = hs / H, j = p.kv_tiled ? h % Hk : h / per;
        const float A = a->ne[0] == H ? f32_at(a, h, 0, 0, 0) : f32_at(a, 0, h, 0, 0);
        float *m = s_all + (s * H + h) * Dk * Dv; /* [Dv, Dk] of this head */
        for (int64_t n = 0; n < Dk; n++)
            for (int64_t i = 0; i < Dv; i++) m[n * Dv + i] = f32_at(st, i, n, h, s);
        for (int64_t t = 0; t < T; t++) {
            const uint8_t *row = tensor_ptr(qkv) + t * qkv->nb[1] + s * qkv->nb[2];
            const uint8_t *q = row + j * Dk * e0, *k = row + (Hk + j) * Dk * e0, *v = row + (2 * Hk * Dk + h * Dv) * e0;
            const float qs = p.scale / l2_div(q, e0, Dk, p.eps), ks = 1.0f / l2_div(k, e0, Dk, p.eps);
            const float decay = expf(A * softplus(f32_at(gt, h, 1, t, s)));
            const float beta = 1.0f / (1.0f + expf(-f32_at(gt, h, 0, t, s)));
            float *y = y_all + ((s * T + t) * H + h) * Dv;
            /* y holds u first: v - S^T k', then beta times it */
            for (int64_t i = 0; i < Dv; i++) memcpy(&y[i], v + i * e0, sizeof y[i]);
            for (int64_t n = 0; n < Dk; n++) {
                float kn;
                memcpy(&kn, k + n * e0, sizeof kn);
                kn *= ks;
                float *mr = m + n * Dv;
                for (int64_t i = 0; i < Dv; i++) {
                    mr[i] *= decay;
                    y[i] -= mr[i] * kn;
                }
            }
            for (int64_t i = 0; i < Dv; i++) y[i] *= beta;
            /* S += k' u^T and y = S^T q', one row of S at a time; y's
             * slot takes the output after u is used up, so u is kept
             * in the first pass's order: accumulate y separately */
            float acc[64];
            for (int64_t i0 = 0; i0 < Dv; i0 += 64) {
                const int64_t nb = Dv - i0 < 64 ? Dv - i0 : 64;
                for (int64_t i = 0; i < nb; i++) acc[i] = 0.0f;
                for (int64_t n = 0; n < Dk; n++) {
                    float kn, qn;
                    memcpy(&kn, k + n * e0, sizeof kn);
                    memcpy(&qn, q + n * e0, sizeof qn);
                    kn *= ks, qn *= qs;
                    float *mr = m + n * Dv + i0;
                    const float *u = y + i0;
                    for (int64_t i = 0; i < nb; i++) {
                        mr[i] += kn * u[i];
                        acc[i] += mr[i] * qn;
                    }
                }
                for (int64_t i = 0; i < nb; i++) y[i0 + i] = acc[i];
            }
        }
    }
}
