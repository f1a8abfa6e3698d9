/*
 * ref_rope — rotary position embedding, ggml's definition.
 *
 * src0 x [head_dim, n_head, n_tokens, b3], src1 positions I32 [n_tokens],
 * src2 optional freq factors F32 [n_dims/2].
 * For token t at position p, pair i (0 <= i < n_dims/2) turns by
 *     theta_i = p * theta_scale^i / factor_i,  theta_scale = freq_base^(-2/n_dims)
 * scaled by freq_scale (with YaRN's ramp between interpolation and
 * extrapolation when ext_factor != 0), and both outputs of the pair are
 * multiplied by attn_factor (the YaRN magnitude correction mscale).
 *   normal: pair (x[2i], x[2i+1])      NeoX: pair (x[i], x[i + n_dims/2])
 *   y0 = x0 cos - x1 sin,  y1 = x0 sin + x1 cos
 * Elements n_dims..head_dim-1 are copied unchanged.
 *
 * Like ggml, theta_i is advanced by repeated multiplication (theta *=
 * theta_scale) rather than a pow per pair: the angles match llama.cpp to the
 * last bit, which matters at large positions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "ref/ref_internal.h"
#include "util/error.h"

/* YaRN's correction dims p->corr_dims (where the correction for beta_fast
 * and beta_slow rotations falls) are computed by tsr_rope_params_of, the
 * one definition every backend uses. */

/* 1 below dims[0], 0 above dims[1], linear in between (i0 is the element
 * index of the pair's first member in normal order: pair i has i0 = 2i). */
static float yarn_ramp(const float dims[2], int64_t i0) {
    const float y = ((float)(i0 / 2) - dims[0]) / fmaxf(0.001f, dims[1] - dims[0]);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* cos/sin of pair i0/2 given its unscaled angle theta_extrap. */
static void yarn_angle(const tsr_rope_params *p, float theta_extrap, int64_t i0, float *cos_out, float *sin_out) {
    const float theta_interp = p->freq_scale * theta_extrap;
    float theta = theta_interp;
    float mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) {
        const float ramp_mix = yarn_ramp(p->corr_dims, i0) * p->ext_factor;
        theta = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= p->yarn_mscale; /* 1 + 0.1 ln(1 / freq_scale) */
    }
    *cos_out = cosf(theta) * mscale;
    *sin_out = sinf(theta) * mscale;
}

tsr_status ref_op_rope(const tsr_node *node) {
    const tsr_tensor *x = node->src[0], *pos = node->src[1], *dst = node->dst;
    const tsr_tensor *ff = node->n_src > 2 ? node->src[2] : NULL;
    const tsr_rope_params p = tsr_rope_params_of(node);
    const int64_t head_dim = x->ne[0], half = p.n_dims / 2;
    const float theta_scale = p.theta_scale; /* freq_base^(-2/n_dims) */

    /* cs[2i], cs[2i+1]: cos and sin of pair i for the current token */
    float *cs = malloc((size_t)(p.n_dims + 2 * head_dim) * sizeof *cs);
    if (!cs) {
        error_set("ref: ROPE '%s': out of memory", ref_node_label(node));
        return TSR_ERR_NO_MEMORY;
    }
    float *in = cs + p.n_dims, *out = in + head_dim;
    const uint8_t *ppos = ref_tensor_base(pos), *pff = ff ? ref_tensor_base(ff) : NULL;

    for (int64_t i3 = 0; i3 < x->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            int32_t position;
            memcpy(&position, ppos + i2 * pos->nb[0], sizeof position);
            float theta = (float)position;
            for (int64_t i = 0; i < half; i++) {
                const float factor = pff ? ref_load(TSR_DTYPE_F32, pff + i * ff->nb[0]) : 1.0f;
                yarn_angle(&p, theta / factor, 2 * i, &cs[2 * i], &cs[2 * i + 1]);
                theta *= theta_scale;
            }
            for (int64_t i1 = 0; i1 < x->ne[1]; i1++) {
                ref_row_load(x, i1, i2, i3, in);
                memcpy(out, in, (size_t)head_dim * sizeof *out); /* dims past n_dims pass through */
                for (int64_t i = 0; i < half; i++) {
                    /* the two members of pair i */
                    const int64_t j0 = p.mode == TSR_ROPE_NEOX ? i : 2 * i;
                    const int64_t j1 = p.mode == TSR_ROPE_NEOX ? i + half : 2 * i + 1;
                    const float c = cs[2 * i], s = cs[2 * i + 1];
                    out[j0] = in[j0] * c - in[j1] * s;
                    out[j1] = in[j0] * s + in[j1] * c;
                }
                ref_row_store(dst, i1, i2, i3, out);
            }
        }
    free(cs);
    return TSR_OK;
}
