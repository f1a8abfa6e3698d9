/*
 * rope.cl - rotary position embedding, ggml's definition (see ref_rope.c).
 *
 * x [head_dim, n_head, n_tokens, b3], pos I32 [n_tokens], ff optional F32
 * frequency factors [n_dims/2]. Work-item (p, i1, i2 + n_tokens * i3): for
 * p < n_dims/2 it turns pair p (reading both members before writing them, so
 * dst may alias x); for p >= n_dims/2 it copies element n_dims + p - n_dims/2.
 * theta_p = pos * theta_scale^p / factor_p is advanced by repeated
 * multiplication, as ggml does, so angles match llama.cpp's bit for bit.
 * corr0/corr1: YaRN's correction dims (computed on the host like ref).
 */
kernel void k_rope(TENSOR(x), TENSOR(pos), TENSOR(ff), TENSOR(d), int has_ff, int n_dims,
                   int neox, float theta_scale, float freq_scale, float ext_factor,
                   float attn_factor, float corr0, float corr1) {
    long p = get_global_id(0), i1 = get_global_id(1), i23 = get_global_id(2);
    long i2 = i23 % x_ne.s2, i3 = i23 / x_ne.s2;
    const long half_dims = n_dims / 2;
    if (p >= half_dims + (x_ne.s0 - n_dims) || i1 >= x_ne.s1 || i3 >= x_ne.s3) return;
    if (p >= half_dims) {
        long e = n_dims + (p - half_dims);
        float v = load_float(x_type, BASE(x) + OFFSET(x, e, i1, i2, i3));
        store_float(d_type, BASE(d) + OFFSET(d, e, i1, i2, i3), v);
        return;
    }
    int position = *(const global int *)(BASE(pos) + i2 * pos_nb.s0);
    float theta = (float)position;
    for (long k = 0; k < p; k++) theta *= theta_scale;
    if (has_ff) theta /= *(const global float *)(BASE(ff) + p * ff_nb.s0);

    /* YaRN: mix interpolated and extrapolated angles by a ramp over dims */
    float theta_interp = freq_scale * theta, angle = theta_interp, mscale = attn_factor;
    if (ext_factor != 0.0f) {
        float y = ((float)p - corr0) / fmax(0.001f, corr1 - corr0);
        float ramp_mix = (1.0f - fmin(1.0f, fmax(0.0f, y))) * ext_factor;
        angle = theta_interp * (1.0f - ramp_mix) + theta * ramp_mix;
        mscale *= 1.0f + 0.1f * log(1.0f / freq_scale);
    }
    float c = cos(angle) * mscale, s = sin(angle) * mscale;

    long j0 = neox ? p : 2 * p, j1 = neox ? p + half_dims : 2 * p + 1;
    float v0 = load_float(x_type, BASE(x) + OFFSET(x, j0, i1, i2, i3));
    float v1 = load_float(x_type, BASE(x) + OFFSET(x, j1, i1, i2, i3));
    store_float(d_type, BASE(d) + OFFSET(d, j0, i1, i2, i3), v0 * c - v1 * s);
    store_float(d_type, BASE(d) + OFFSET(d, j1, i1, i2, i3), v0 * s + v1 * c);
}
