// ssm_conv — SSM_CONV (ABI 1.4), the causal depthwise convolution over
// time of Mamba-2 and LFM2: one invocation per dst element (c, t, s),
//   dst[c, t, s] = sum_k sx[t + k, c, s] * w[k, c]
// with sx [K - 1 + T, C, S] and w [K, C], all F32 read through their
// strides; an f32 sum in k order (ref_ssm.c sums in double; K is 3 or 4).
// P.u[1]: dst element count.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;

void main() {
    uint i = group_linear() * 64u + gl_LocalInvocationID.x;
    if (i >= P.u[1]) return;
    uvec4 di = unflat(i, P.ne[4]); // (c, t, s, 0)
    precise float acc = 0.0;
    for (uint k = 0u; k < P.ne[1].x; k++)
        acc += t0_float(DT_F32, elem_off(0u, uvec4(di.y + k, di.x, di.z, 0u))) *
               t1_float(DT_F32, elem_off(1u, uvec4(k, di.x, 0u, 0u)));
    store_dst(elem_off(4u, di), acc);
}
