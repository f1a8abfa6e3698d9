// rope — rotary position embedding, one invocation per row (head i1 of
// token i2). Like ref and ggml, theta_i advances by repeated
// multiplication with theta_scale (computed on the host with powf), so the
// angles are the same floats; sin and cos come from sincos_acc below, not
// the driver's (whose accuracy Vulkan leaves loose), after an exact
// reduction of the angle. With USE_F64 (devices with shaderFloat64) they
// are computed in double and rounded once, which gives the correctly
// rounded floats libm gives ref: q and k then round to the same F16 values
// in the cache as on the CPU.
//   P.u: [0] n_dims, [1] 1 = NeoX pairs (i, i + n_dims/2), [2] freq factors bound,
//        [3] 1 = fused with the CPY of the result (vk_fused.c): the rotated
//        rows go to t3 (F32, the ROPE's dst) and, converted, to t4 (the
//        CPY's dst, F32/F16/BF16: the KV cache), element for element in
//        flat order as the CPY pairs them
//   P.f: [0] theta_scale, [1] [2] YaRN correction dims, [3] YaRN mscale factor
//   P.fp: the node's fparams ([1] freq_scale, [2] ext_factor, [3] attn_factor)
// The straightforward version: ref_rope.c.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

// sin and cos of x: reduce by pi/2 with a three-part constant (exact for
// the angles rope meets), then minimax polynomials on [-pi/4, pi/4].
void sincos_acc(float x, out float s, out float c) {
    float ax = abs(x);
    float j = floor(ax * 0.63661977236758134308 + 0.5);
    precise float r = ((ax - j * 1.5703125) - j * 4.837512969970703125e-4) - j * 7.54978995489188216e-8;
    float z = r * r;
    float sp = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    float cp = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    uint q = uint(j) & 3u;
    if (q == 0u) { s = sp; c = cp; }
    else if (q == 1u) { s = cp; c = -sp; }
    else if (q == 2u) { s = -sp; c = -cp; }
    else { s = -cp; c = sp; }
    if (x < 0.0) s = -s;
}

#ifdef USE_F64
// sin and cos in double: reduce by pi/2 (fdlibm's two-part constant: the
// first part has 33 bits, so j * PIO2_1 is exact), then Taylor series to
// the 1/17! and 1/18! terms on [-pi/4, pi/4] (error below 1e-16).
void sincos_f64(float xf, out float s, out float c) {
    double x = double(xf);
    double j = floor(x * 0.63661977236758134308LF + 0.5LF);
    precise double r = (x - j * 1.57079632673412561417LF) - j * 6.07710050650619224932e-11LF;
    double z = r * r;
    double sp = r * (1.0LF + z * (-1.0LF / 6.0LF + z * (1.0LF / 120.0LF + z * (-1.0LF / 5040.0LF +
                z * (1.0LF / 362880.0LF + z * (-1.0LF / 39916800.0LF + z * (1.0LF / 6227020800.0LF +
                z * (-1.0LF / 1307674368000.0LF + z * (1.0LF / 355687428096000.0LF)))))))));
    double cp = 1.0LF + z * (-0.5LF + z * (1.0LF / 24.0LF + z * (-1.0LF / 720.0LF + z * (1.0LF / 40320.0LF +
                z * (-1.0LF / 3628800.0LF + z * (1.0LF / 479001600.0LF + z * (-1.0LF / 87178291200.0LF +
                z * (1.0LF / 20922789888000.0LF + z * (-1.0LF / 6402373705728000.0LF)))))))));
    int q = int(j) & 3;
    double sd, cd;
    if (q == 0) { sd = sp; cd = cp; }
    else if (q == 1) { sd = cp; cd = -sp; }
    else if (q == 2) { sd = -sp; cd = -cp; }
    else { sd = -cp; cd = sp; }
    s = float(sd);
    c = float(cd);
}
#endif

// Store rotated element a (in x's shape): to the ROPE's dst, or when fused
// to its dst (t3, F32) and to the CPY's dst at the same flat index, rounded
// from the same f32 as the CPY rounds what it reads from t3.
void put(uvec4 a, float y) {
    if (P.u[3] == 0u) {
        store_dst(elem_off(4u, a), y);
        return;
    }
    t3.d[elem_off(3u, a) >> 2] = floatBitsToUint(y);
    uvec4 ne = P.ne[0];
    uint i = a.x + ne.x * (a.y + ne.y * (a.z + ne.z * a.w));
    store_dst(elem_off(4u, unflat(i, P.ne[4])), y);
}

void main() {
    uint row = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
    uvec4 ne = P.ne[0];
    if (row >= ne.y * ne.z * ne.w) return;
    uvec4 r = unflat(row * ne.x, ne); // (0, head, token, i3)
    uint n_dims = P.u[0], half_ = n_dims / 2u;
    bool neox = P.u[1] != 0u;
    float freq_scale = P.fp[1], ext_factor = P.fp[2], attn_factor = P.fp[3];
    int pos = int(t1_u32(P.off[1] + r.z * P.nb[1].x));
    precise float theta = float(pos);
    for (uint i = 0u; i < half_; i++) {
        float factor = P.u[2] != 0u ? t2_float(DT_F32, P.off[2] + i * P.nb[2].x) : 1.0;
#ifdef USE_F64
        precise float theta_extrap = float(double(theta) / double(factor)); // correctly rounded
#else
        precise float theta_extrap = theta / factor;
#endif
        precise float theta_interp = freq_scale * theta_extrap;
        precise float th = theta_interp;
        float mscale = attn_factor;
        if (ext_factor != 0.0) {
            float y = (float(i) - P.f[1]) / max(0.001, P.f[2] - P.f[1]);
            float ramp_mix = (1.0 - min(1.0, max(0.0, y))) * ext_factor;
            th = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= P.f[3];
        }
        float sn, cs;
#ifdef USE_F64
        sincos_f64(th, sn, cs);
#else
        sincos_acc(th, sn, cs);
#endif
        precise float cs_m = cs * mscale, sn_m = sn * mscale;
        cs = cs_m;
        sn = sn_m;
        uint j0 = neox ? i : 2u * i, j1 = neox ? i + half_ : 2u * i + 1u;
        uvec4 a = uvec4(j0, r.yzw), b = uvec4(j1, r.yzw);
        float x0 = load0(a), x1 = load0(b);
        // precise: no fused multiply-add, the same two roundings as ref
        precise float y0 = x0 * cs - x1 * sn;
        precise float y1 = x0 * sn + x1 * cs;
        put(a, y0);
        put(b, y1);
        theta *= P.f[0];
    }
    for (uint i = n_dims; i < ne.x; i++) {
        uvec4 a = uvec4(i, r.yzw);
        put(a, load0(a));
    }
}
