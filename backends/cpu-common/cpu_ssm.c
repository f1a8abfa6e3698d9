/*
 * cpu_ssm — the recurrent ops of state-space models (ABI 1.4): SSM_CONV
 * (causal depthwise convolution over time) and SSM_SCAN (Mamba-2's
 * selective scan), f32 throughout as llama.cpp's CPU backend computes them.
 * Semantics in tessera/plugin.h; ref (core/src/ref/ref_ssm.c) is the
 * oracle, which carries the scan's state in double.
 */
#include <math.h>
#include <string.h>

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
