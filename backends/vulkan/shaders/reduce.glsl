// reduce.glsl — workgroup-wide sum and max over WG invocations (64 unless
// the shader defines WG first). With USE_SUBGROUPS each subgroup reduces in
// registers and one value per subgroup goes through shared memory; without,
// a shared-memory tree (for devices without subgroup arithmetic). The
// shader enables the subgroup extensions itself (before any code).
#ifndef WG
#define WG 64
#endif
layout(local_size_x = WG) in;

#ifdef USE_SUBGROUPS
shared float red[WG];

float wg_sum(float v) {
    v = subgroupAdd(v);
    if (subgroupElect()) red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) s += red[i];
    barrier();
    return s;
}

float wg_max(float v) {
    v = subgroupMax(v);
    if (subgroupElect()) red[gl_SubgroupID] = v;
    barrier();
    float s = red[0];
    for (uint i = 1u; i < gl_NumSubgroups; i++) s = max(s, red[i]);
    barrier();
    return s;
}
#else
shared float red[WG];

float wg_sum(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float wg_max(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) red[lid] = max(red[lid], red[lid + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}
#endif
