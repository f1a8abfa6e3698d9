// eltwise — one invocation per dst element: ADD, MUL (src1 broadcast),
// SCALE, SILU, GELU, SWIGLU, SWIGLU_OAI (P.f[0] alpha, P.f[1] limit),
// GELU_ERF (ABI 1.6: erf as the CPU plugin's erf_row_elem computes it),
// CPY/convert (src0 may be quantized; elements pair up in flat ne order),
// GET_ROWS (src0 any dtype) and CONCAT.
// ARGMAX: one invocation per row of src0, dst I32 (first largest; NaN never
// wins; 0 when nothing beats -inf). DIV (ABI 1.4) as ADD and MUL. SUM_ROWS:
// one invocation per row, compensated (Kahan) f32 sum in index order.
// TOP_K: one invocation per element of src0 (P.u[1] counts those): its
// rank in TOP_K's order (larger first, equal values by lower index, NaN
// last), counted over its row; ranks below k write dst[rank] = its index,
// so every dst element is written exactly once. Every tensor is read and
// written through its own strides.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

// P.u[0]: the mode, P.u[1]: dst element count
const uint M_ADD = 0u, M_MUL = 1u, M_SCALE = 2u, M_SILU = 3u, M_GELU = 4u, M_SWIGLU = 5u,
           M_CPY = 6u, M_GET_ROWS = 7u, M_CONCAT = 8u, M_ARGMAX = 9u, M_DIV = 10u, M_SUM_ROWS = 11u,
           M_TOP_K = 12u, M_SWIGLU_OAI = 13u, M_GELU_ERF = 14u;

// TOP_K's order: x (at index i) ranks before y (at j)
bool ranks_before(float x, uint i, float y, uint j) {
    if (isnan(x) || isnan(y)) return isnan(x) == isnan(y) ? i < j : isnan(y);
    return x > y || (x == y && i < j);
}

float silu(float x) { return x / (1.0 + exp(-x)); }

// tanh through exp of a non-positive argument: no overflow for any x
float tanh_safe(float x) {
    float t = exp(-2.0 * abs(x));
    float r = (1.0 - t) / (1.0 + t);
    return x < 0.0 ? -r : r;
}

float gelu(float x) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876;
    return 0.5 * x * (1.0 + tanh_safe(sqrt_2_over_pi * x * (1.0 + 0.044715 * x * x)));
}

// erf(z) (GLSL has none): backends/cpu-common/cpu_rows.h's erf_row_elem,
// the same fits: z P(z^2) below |z| = 1, 1 - e^-z^2 Q(1/|z|) above (|z|
// clamped to 4, z^2 split into hi + lo). exp() is the device's; its error
// (the spec allows 3 + 2|x| ulp) stays within GELU_ERF's tolerance.
float erf_poly(float z) {
    precise float a = abs(z), t = a * a;
    precise float p = 7.875875063e-05;
    p = fma(p, t, -8.016864287e-04);
    p = fma(p, t, 5.189087423e-03);
    p = fma(p, t, -2.685421201e-02);
    p = fma(p, t, 1.128359472e-01);
    p = fma(p, t, -3.761262667e-01);
    p = fma(p, t, 1.128379166e+00);
    precise float ac = a < 1.0 ? 1.0 : (a > 4.0 ? 4.0 : a), u = 1.0 / ac;
    precise float q = 2.503254319e-02;
    q = fma(q, u, -1.478984446e-01);
    q = fma(q, u, 3.608618604e-01);
    q = fma(q, u, -4.298337486e-01);
    q = fma(q, u, 1.454773476e-01);
    q = fma(q, u, 2.825897937e-01);
    q = fma(q, u, -3.948595879e-01);
    q = fma(q, u, 2.484752126e-02);
    q = fma(q, u, 5.612146380e-01);
    q = fma(q, u, 1.516556858e-04);
    precise float hi = ac * ac, lo = fma(ac, ac, -hi);
    precise float r = a < 1.0 ? a * p : 1.0 - exp(-hi) * (1.0 - lo) * q;
    return z < 0.0 ? -r : r;
}

// 0.5 x (1 + erf(x / sqrt 2)), as ref writes it
float gelu_erf(float x) { return 0.5 * x * (1.0 + erf_poly(x * 0.70710678118654752440)); }

void main() {
    uint i = group_linear() * 256u + gl_LocalInvocationID.x;
    if (i >= P.u[1]) return;
    uint mode = P.u[0];
    if (mode == M_TOP_K) {
        uvec4 si = unflat(i, P.ne[0]); // element (i0, row) of src0
        float x = load0(si);
        uint rank = 0u;
        for (uint j = 0u; j < P.ne[0].x; j++)
            if (ranks_before(load0(uvec4(j, si.yzw)), j, x, si.x)) rank++;
        if (rank < P.ne[4].x) t4.d[elem_off(4u, uvec4(rank, si.yzw)) >> 2] = si.x;
        return;
    }
    uvec4 di = unflat(i, P.ne[4]);
    float v;
    if (mode == M_SUM_ROWS) {
        precise float sum = 0.0, c = 0.0;
        for (uint k = 0u; k < P.ne[0].x; k++) {
            precise float y = load0(uvec4(k, di.yzw)) - c;
            precise float t = sum + y;
            c = (t - sum) - y;
            sum = t;
        }
        store_dst(elem_off(4u, di), sum);
        return;
    }
    if (mode == M_ARGMAX) {
        uvec4 r = unflat(i * P.ne[0].x, P.ne[0]); // (0, i1, i2, i3) of row i
        float best = uintBitsToFloat(0xff800000u);
        uint best_k = 0u;
        for (uint k = 0u; k < P.ne[0].x; k++) {
            float x = load0(uvec4(k, r.yzw));
            if (x > best) {
                best = x;
                best_k = k;
            }
        }
        t4.d[elem_off(4u, di) >> 2] = best_k;
        return;
    }
    if (mode == M_CPY) {
        v = load0(unflat(i, P.ne[0]));
    } else if (mode == M_GET_ROWS) {
        // rows I32 [m, b2, b3]: dst[:, i1, i2, i3] = src0[:, rows[i1, i2, i3], i2, i3]
        int r = int(t1_u32(P.off[1] + di.y * P.nb[1].x + di.z * P.nb[1].y + di.w * P.nb[1].z));
        if (r < 0 || uint(r) >= P.ne[0].y)
            v = uintBitsToFloat(0x7fc00000u); // out of range: NaN shows it
        else
            v = load0(uvec4(di.x, uint(r), di.z, di.w));
    } else if (mode == M_CONCAT) {
        uint dim = uint(P.ip[0]);
        uvec4 n0 = P.ne[0];
        if (di[dim] < n0[dim]) {
            v = load0(di);
        } else {
            uvec4 dj = di;
            dj[dim] -= n0[dim];
            v = load1(dj);
        }
    } else {
        float a = load0(di);
        if (mode == M_ADD) v = a + load1(di % P.ne[1]);
        else if (mode == M_MUL) v = a * load1(di % P.ne[1]);
        else if (mode == M_DIV) v = a / load1(di % P.ne[1]);
        else if (mode == M_SCALE) v = a * P.fp[0] + P.fp[1];
        else if (mode == M_SILU) v = silu(a);
        else if (mode == M_GELU) v = gelu(a);
        else if (mode == M_GELU_ERF) v = gelu_erf(a);
        else if (mode == M_SWIGLU_OAI) {
            // gpt-oss's clamps as ref writes them (min() and clamp() leave
            // NaN undefined), then ref's order of float operations
            float lim = P.f[1], b = load1(di);
            float g = a < lim ? a : lim, u = b < -lim ? -lim : (b > lim ? lim : b);
            v = g / (1.0 + exp(-P.f[0] * g)) * (u + 1.0);
        } else v = silu(a) * load1(di); // M_SWIGLU
    }
    store_dst(elem_off(4u, di), v);
}
