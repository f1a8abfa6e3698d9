/*
 * test_ref_ops — the ref backend's trickier ops against values worked out by
 * hand (or with a closed formula in double), and its plugin tables against
 * bad input.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "harness.h"
#include "ref/ref.h"
#include "tensor/dtype.h"
#include "util/error.h"


/* A contiguous tensor over caller memory. */
static tsr_tensor tensor(int32_t dtype, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, void *data) {
    tsr_tensor t = {.dtype = dtype, .ne = {ne0, ne1, ne2, ne3}, .data = data, .name = "t"};
    t.nb[0] = tsr_dtype_block_bytes(dtype);
    t.nb[1] = t.nb[0] * (ne0 / tsr_dtype_block_size(dtype));
    t.nb[2] = t.nb[1] * ne1;
    t.nb[3] = t.nb[2] * ne2;
    return t;
}

static tsr_status compute1(tsr_node *n) { return ref_compute(n, 1, NULL); }

/* ------------------------------------------------------------------ ROPE */

static tsr_node rope_node(tsr_tensor *dst, tsr_tensor *x, tsr_tensor *pos, tsr_tensor *ff,
                          int n_dims, int mode) {
    tsr_node n = {.op = TSR_OP_ROPE, .n_src = ff ? 3 : 2, .dst = dst, .src = {x, pos, ff}};
    const tsr_rope_params p = {.n_dims = n_dims, .mode = mode, .freq_base = 10000.0f, .freq_scale = 1.0f,
                               .attn_factor = 1.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    tsr_rope_params_put(&p, n.iparams, n.fparams);
    return n;
}

TEST(test_rope) {
    /* head_dim 4, one head, two tokens at positions 0 and 1 */
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4}, y[8];
    int32_t pos[2] = {0, 1};
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 4, 1, 2, 1, x), ty = tensor(TSR_DTYPE_F32, 4, 1, 2, 1, y);
    tsr_tensor tp = tensor(TSR_DTYPE_I32, 2, 1, 1, 1, pos);
    /* theta for pair i at position p: p * 10000^(-2i/4) -> pair 0: p, pair 1: p/100 */
    const double t0 = 1.0, t1 = 0.01;

    tsr_node n = rope_node(&ty, &tx, &tp, NULL, 4, TSR_ROPE_NORMAL);
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 4; i++) EXPECT_NEAR(y[i], x[i], 0, "position 0 is the identity");
    /* normal: pairs (x0, x1) and (x2, x3) */
    EXPECT_NEAR(y[4], 1 * cos(t0) - 2 * sin(t0), 1e-6, "normal y0");
    EXPECT_NEAR(y[5], 1 * sin(t0) + 2 * cos(t0), 1e-6, "normal y1");
    EXPECT_NEAR(y[6], 3 * cos(t1) - 4 * sin(t1), 1e-6, "normal y2");
    EXPECT_NEAR(y[7], 3 * sin(t1) + 4 * cos(t1), 1e-6, "normal y3");

    /* NeoX: pairs (x0, x2) and (x1, x3) */
    n = rope_node(&ty, &tx, &tp, NULL, 4, TSR_ROPE_NEOX);
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT_NEAR(y[4], 1 * cos(t0) - 3 * sin(t0), 1e-6, "neox y0");
    EXPECT_NEAR(y[6], 1 * sin(t0) + 3 * cos(t0), 1e-6, "neox y2");
    EXPECT_NEAR(y[5], 2 * cos(t1) - 4 * sin(t1), 1e-6, "neox y1");
    EXPECT_NEAR(y[7], 2 * sin(t1) + 4 * cos(t1), 1e-6, "neox y3");

    /* frequency factors divide theta; partial rotation copies the rest */
    float ff[1] = {4.0f};
    tsr_tensor tf = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, ff);
    n = rope_node(&ty, &tx, &tp, &tf, 2, TSR_ROPE_NORMAL);
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT_NEAR(y[4], 1 * cos(0.25) - 2 * sin(0.25), 1e-6, "freq factor 4 -> theta/4");
    EXPECT_NEAR(y[5], 1 * sin(0.25) + 2 * cos(0.25), 1e-6, "freq factor 4 -> theta/4");
    EXPECT(y[6] == 3 && y[7] == 4, "dims past n_dims copied (%g %g)", y[6], y[7]);

    /* a large position: the angle must match ggml's float recurrence */
    pos[1] = 1000;
    n = rope_node(&ty, &tx, &tp, NULL, 4, TSR_ROPE_NORMAL);
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT_NEAR(y[4], 1 * cosf(1000.0f) - 2 * sinf(1000.0f), 1e-5, "position 1000, pair 0");
    pos[1] = 1;
}

TEST(test_rope_yarn) {
    /* n_dims 64, base 10000, n_ctx_orig 4096, beta_fast 32, beta_slow 1:
     * correction dims floor(10.47) = 10 and ceil(22.5) = 23, so pair 0 is
     * pure extrapolation (theta = p) and pair 31 pure interpolation
     * (theta = p * freq_scale * base^(-62/64)); both scaled by
     * mscale = 1 + 0.1 ln(1/freq_scale). */
    enum { D = 64 };
    float x[D], y[D];
    for (int i = 0; i < D; i++) x[i] = i % 2 ? 0.0f : 1.0f; /* (1, 0) pairs: y = (cos, sin) * mscale */
    int32_t pos[1] = {7};
    tsr_tensor tx = tensor(TSR_DTYPE_F32, D, 1, 1, 1, x), ty = tensor(TSR_DTYPE_F32, D, 1, 1, 1, y);
    tsr_tensor tp = tensor(TSR_DTYPE_I32, 1, 1, 1, 1, pos);
    tsr_node n = rope_node(&ty, &tx, &tp, NULL, D, TSR_ROPE_NORMAL);
    n.iparams[TSR_ROPE_I_N_CTX_ORIG] = 4096;
    n.fparams[TSR_ROPE_F_FREQ_SCALE] = 0.25f;
    n.fparams[TSR_ROPE_F_EXT_FACTOR] = 1.0f;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const double mscale = 1.0 + 0.1 * log(4.0);
    const double theta31 = 7.0 * 0.25 * pow(10000.0, -62.0 / 64.0);
    EXPECT_NEAR(y[0], cos(7.0) * mscale, 1e-5, "yarn pair 0 (extrapolated) cos");
    EXPECT_NEAR(y[1], sin(7.0) * mscale, 1e-5, "yarn pair 0 (extrapolated) sin");
    EXPECT_NEAR(y[62], cos(theta31) * mscale, 1e-5, "yarn pair 31 (interpolated) cos");
    EXPECT_NEAR(y[63], sin(theta31) * mscale, 1e-5, "yarn pair 31 (interpolated) sin");
}

/* -------------------------------------------------------------- SOFT_MAX */

TEST(test_soft_max) {
    /* two rows of 3; mask row 0 hides the last entry */
    float x[6] = {1, 2, 3, 1, 2, 3}, y[6];
    float mask[6] = {0, 0, -INFINITY, 0, -1, 0};
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, x), ty = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, y);
    tsr_tensor tm = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, mask);
    tsr_node n = {.op = TSR_OP_SOFT_MAX, .n_src = 2, .dst = &ty, .src = {&tx, &tm}};
    n.fparams[TSR_SOFT_MAX_F_SCALE] = 0.5f;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    /* row 0: softmax(0.5, 1, -inf) */
    double z0 = exp(0.5) + exp(1.0);
    EXPECT_NEAR(y[0], exp(0.5) / z0, 1e-6, "row 0 [0]");
    EXPECT_NEAR(y[1], exp(1.0) / z0, 1e-6, "row 0 [1]");
    EXPECT(y[2] == 0.0f, "masked entry is exactly 0 (%g)", y[2]);
    /* row 1: softmax(0.5, 1 - 1, 1.5) */
    double z1 = exp(0.5) + exp(0.0) + exp(1.5);
    EXPECT_NEAR(y[3], exp(0.5) / z1, 1e-6, "row 1 [0]");
    EXPECT_NEAR(y[4], exp(0.0) / z1, 1e-6, "row 1 [1]");
    EXPECT_NEAR(y[5], exp(1.5) / z1, 1e-6, "row 1 [2]");

    /* F16 mask, broadcast over 4 heads with ALiBi (max_bias 8: slopes
     * 2^-2, 2^-4, 2^-6, 2^-8 for heads 0..3) */
    float xa[8] = {0}, ya[8];
    uint16_t mh[2] = {f32_to_fp16(0.0f), f32_to_fp16(-1.0f)};
    tsr_tensor txa = tensor(TSR_DTYPE_F32, 2, 1, 4, 1, xa), tya = tensor(TSR_DTYPE_F32, 2, 1, 4, 1, ya);
    tsr_tensor tmh = tensor(TSR_DTYPE_F16, 2, 1, 1, 1, mh);
    tsr_node na = {.op = TSR_OP_SOFT_MAX, .n_src = 2, .dst = &tya, .src = {&txa, &tmh}};
    na.fparams[TSR_SOFT_MAX_F_SCALE] = 1.0f;
    na.fparams[TSR_SOFT_MAX_F_MAX_BIAS] = 8.0f;
    EXPECT(compute1(&na) == TSR_OK, "%s", error_get());
    for (int h = 0; h < 4; h++) {
        double slope = pow(2.0, -2.0 * (h + 1));
        EXPECT_NEAR(ya[2 * h + 1], exp(-slope) / (1 + exp(-slope)), 1e-6, "alibi head");
    }
}

/* ------------------------------------------------------- RMS_NORM, NORM */

TEST(test_norms) {
    float x[4] = {3, 4, 0, 0}, y[4];
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, x), ty = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, y);
    tsr_node n = {.op = TSR_OP_RMS_NORM, .n_src = 1, .dst = &ty, .src = {&tx}};
    n.fparams[TSR_NORM_F_EPS] = 0.0f;
    x[2] = 1;
    x[3] = -1;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT_NEAR(y[0], 3 / sqrt(12.5), 1e-6, "rms_norm [3, 4]");
    EXPECT_NEAR(y[1], 4 / sqrt(12.5), 1e-6, "rms_norm [3, 4]");
    EXPECT_NEAR(y[2], 1, 1e-6, "rms_norm [1, -1]");
    EXPECT_NEAR(y[3], -1, 1e-6, "rms_norm [1, -1]");

    /* in place, with eps */
    n.fparams[TSR_NORM_F_EPS] = 1.0f;
    ty = tx;
    n.dst = &ty;
    x[0] = 3;
    x[1] = 4;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT_NEAR(x[0], 3 / sqrt(13.5), 1e-6, "rms_norm in place, eps 1");

    float a[4] = {1, 2, 3, 4}, b[4];
    tsr_tensor ta = tensor(TSR_DTYPE_F32, 4, 1, 1, 1, a), tb = tensor(TSR_DTYPE_F32, 4, 1, 1, 1, b);
    tsr_node nn = {.op = TSR_OP_NORM, .n_src = 1, .dst = &tb, .src = {&ta}};
    nn.fparams[TSR_NORM_F_EPS] = 1e-5f;
    EXPECT(compute1(&nn) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 4; i++) EXPECT_NEAR(b[i], (a[i] - 2.5) / sqrt(1.25 + 1e-5), 1e-6, "norm");
}

/* ------------------------------------------------------------- GET_ROWS */

/* GET_ROWS of rows[0..n_rows) from n_src rows of 32 elements of dtype at
 * src into out (F32), on ref: its status. */
static tsr_status get_rows_32(int32_t dtype, void *src, int64_t n_src, int32_t *rows, int64_t n_rows, float *out) {
    tsr_tensor tw = tensor(dtype, 32, n_src, 1, 1, src), tr = tensor(TSR_DTYPE_I32, n_rows, 1, 1, 1, rows);
    tsr_tensor to = tensor(TSR_DTYPE_F32, 32, n_rows, 1, 1, out);
    tsr_node n = {.op = TSR_OP_GET_ROWS, .n_src = 2, .dst = &to, .src = {&tw, &tr}};
    return compute1(&n);
}

TEST(test_get_rows_quantized) {
    /* Q8_0: two rows of one block each; d = 0.5 and 2, q = j - 16 */
    uint8_t q8[2 * 34];
    for (int r = 0; r < 2; r++) {
        uint16_t d = f32_to_fp16(r ? 2.0f : 0.5f);
        memcpy(q8 + 34 * r, &d, 2);
        for (int j = 0; j < 32; j++) q8[34 * r + 2 + j] = (uint8_t)(int8_t)(j - 16);
    }
    int32_t rows[3] = {1, 0, 1};
    float out[3 * 32];
    EXPECT(get_rows_32(TSR_DTYPE_Q8_0, q8, 2, rows, 3, out) == TSR_OK, "%s", error_get());
    for (int j = 0; j < 32; j++) {
        EXPECT_NEAR(out[j], 2.0 * (j - 16), 0, "Q8_0 row 1");
        EXPECT_NEAR(out[32 + j], 0.5 * (j - 16), 0, "Q8_0 row 0");
    }

    /* Q4_0: element j in the low nibble of qs[j], j + 16 in the high nibble;
     * value (q - 8) * d */
    uint8_t q4[18];
    uint16_t d = f32_to_fp16(0.25f);
    memcpy(q4, &d, 2);
    for (int j = 0; j < 16; j++) q4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    int32_t row0[1] = {0};
    float out4[32];
    EXPECT(get_rows_32(TSR_DTYPE_Q4_0, q4, 1, row0, 1, out4) == TSR_OK, "%s", error_get());
    for (int j = 0; j < 16; j++) {
        EXPECT_NEAR(out4[j], 0.25 * (j - 8), 0, "Q4_0 low nibbles");
        EXPECT_NEAR(out4[16 + j], 0.25 * (15 - j - 8), 0, "Q4_0 high nibbles");
    }

    /* an index outside the rows is an error, not a read past the end */
    rows[1] = 2;
    EXPECT(get_rows_32(TSR_DTYPE_Q8_0, q8, 2, rows, 3, out) == TSR_ERR_INVALID,
           "row index 2 of 2 rows must be rejected");
    EXPECT(strstr(error_get(), "row index 2") != NULL, "message names the index: %s", error_get());
    rows[1] = -1;
    EXPECT(get_rows_32(TSR_DTYPE_Q8_0, q8, 2, rows, 3, out) == TSR_ERR_INVALID, "row index -1 must be rejected");
}

/* -------------------------------------------------------------- MUL_MAT */

TEST(test_mul_mat_broadcast) {
    /* w: one matrix per weight batch, 2 batches: [[1, 2], [3, 4]] and [[0, 1], [1, 0]]
     * (rows m of length K = 2); x: 4 batches of one column; r2 = 4 / 2 = 2, so
     * x batches 0, 1 use w batch 0, batches 2, 3 use w batch 1 */
    float w[8] = {1, 2, 3, 4, 0, 1, 1, 0};
    float x[8] = {1, 1, 2, -1, 5, 7, -3, 2};
    float y[8];
    tsr_tensor tw = tensor(TSR_DTYPE_F32, 2, 2, 2, 1, w), tx = tensor(TSR_DTYPE_F32, 2, 1, 4, 1, x);
    tsr_tensor ty = tensor(TSR_DTYPE_F32, 2, 1, 4, 1, y);
    tsr_node n = {.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &ty, .src = {&tw, &tx}};
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const float want[8] = {3, 7, 0, 2, 7, 5, 2, -3};
    for (int i = 0; i < 8; i++) EXPECT_NEAR(y[i], want[i], 0, "mul_mat broadcast element");

    /* F16 weights, a transposed (non-contiguous) activation view */
    uint16_t wh[4];
    for (int i = 0; i < 4; i++) wh[i] = f32_to_fp16(w[i]);
    float xt[4] = {1, 2, -1, 3}; /* stored [n][k] transposed: x[k, n] at xt[k * 2 + n] */
    tsr_tensor twh = tensor(TSR_DTYPE_F16, 2, 2, 1, 1, wh);
    tsr_tensor txt = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, xt);
    txt.nb[0] = 8; /* k stride */
    txt.nb[1] = 4; /* n stride */
    float y2[4];
    tsr_tensor ty2 = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, y2);
    tsr_node n2 = {.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &ty2, .src = {&twh, &txt}};
    EXPECT(compute1(&n2) == TSR_OK, "%s", error_get());
    /* column n=0: x = (1, -1); n=1: x = (2, 3) */
    const float want2[4] = {1 * 1 + 2 * -1, 3 * 1 + 4 * -1, 1 * 2 + 2 * 3, 3 * 2 + 4 * 3};
    for (int i = 0; i < 4; i++) EXPECT_NEAR(y2[i], want2[i], 0, "mul_mat F16 x transposed view");
}

/* --------------------------------------------- mixture of experts (1.4) */

TEST(test_mul_mat_id) {
    /* 3 experts of [K = 2, N = 2]: e0 = [[1, 0], [0, 1]] (identity), e1 =
     * [[1, 1], [1, -1]], e2 = [[2, 0], [0, 3]] (rows n of length K) */
    float w[12] = {1, 0, 0, 1, 1, 1, 1, -1, 2, 0, 0, 3};
    /* two tokens, one row each (n_b = 1): (1, 2) and (3, -1) */
    float x[4] = {1, 2, 3, -1};
    /* token 0 picks e2, e0; token 1 picks e1, e1 (a repeat) */
    int32_t ids[4] = {2, 0, 1, 1};
    float y[8];
    tsr_tensor tw = tensor(TSR_DTYPE_F32, 2, 2, 3, 1, w), tx = tensor(TSR_DTYPE_F32, 2, 1, 2, 1, x);
    tsr_tensor ti = tensor(TSR_DTYPE_I32, 2, 2, 1, 1, ids), ty = tensor(TSR_DTYPE_F32, 2, 2, 2, 1, y);
    tsr_node n = {.op = TSR_OP_MUL_MAT_ID, .n_src = 3, .dst = &ty, .src = {&tw, &tx, &ti}};
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const float want[8] = {2, 6, 1, 2, 2, 4, 2, 4};
    for (int i = 0; i < 8; i++) EXPECT_NEAR(y[i], want[i], 0, "mul_mat_id n_b = 1 element %d", i);

    /* n_b = n_used: slot s reads row s of its token */
    float x2[8] = {1, 2, 5, 7, 3, -1, 0, 1};
    tsr_tensor tx2 = tensor(TSR_DTYPE_F32, 2, 2, 2, 1, x2);
    n.src[1] = &tx2;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const float want2[8] = {2, 6, 5, 7, 2, 4, 1, -1};
    for (int i = 0; i < 8; i++) EXPECT_NEAR(y[i], want2[i], 0, "mul_mat_id n_b = n_used element %d", i);

    /* Q8_0 experts meet Q8_0-rounded activations, as in MUL_MAT */
    float wq[3 * 32], xq[32];
    for (int i = 0; i < 3 * 32; i++) wq[i] = (float)((i * 7) % 11) - 5.0f;
    for (int i = 0; i < 32; i++) xq[i] = 0.1f * (float)i - 1.3f;
    uint8_t wb[3 * 34];
    dtype_traits_get(TSR_DTYPE_Q8_0)->from_f32(wq, wb, 3 * 32);
    int32_t id1[1] = {2};
    float y1[1], ym[3];
    tsr_tensor tqw = tensor(TSR_DTYPE_Q8_0, 32, 1, 3, 1, wb), tqx = tensor(TSR_DTYPE_F32, 32, 1, 1, 1, xq);
    tsr_tensor tid = tensor(TSR_DTYPE_I32, 1, 1, 1, 1, id1), ty1 = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, y1);
    tsr_node nq = {.op = TSR_OP_MUL_MAT_ID, .n_src = 3, .dst = &ty1, .src = {&tqw, &tqx, &tid}};
    EXPECT(compute1(&nq) == TSR_OK, "%s", error_get());
    tsr_tensor tmw = tensor(TSR_DTYPE_Q8_0, 32, 3, 1, 1, wb), tym = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, ym);
    tsr_node nm = {.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &tym, .src = {&tmw, &tqx}};
    EXPECT(compute1(&nm) == TSR_OK, "%s", error_get());
    EXPECT(y1[0] == ym[2], "Q8_0 expert 2 gives %.9g, MUL_MAT row 2 %.9g", y1[0], ym[2]);

    /* an id out of range is an error naming the slot and token, not a read */
    ids[3] = 3;
    n.src[1] = &tx;
    EXPECT(compute1(&n) == TSR_ERR_INVALID, "id 3 of 3 experts accepted");
    EXPECT(strstr(error_get(), "expert id 3 of slot 1 of token 1") != NULL, "message: %s", error_get());
    ids[3] = -1;
    EXPECT(compute1(&n) == TSR_ERR_INVALID, "id -1 accepted");

    /* malformed: n_b neither 1 nor n_used; tokens disagree */
    tsr_tensor tx3 = tensor(TSR_DTYPE_F32, 2, 3, 2, 1, x2);
    n.src[1] = &tx3;
    ids[3] = 0;
    EXPECT(compute1(&n) == TSR_ERR_INVALID && strstr(error_get(), "neither 1 nor"), "n_b 3: %s", error_get());
    tsr_tensor tx4 = tensor(TSR_DTYPE_F32, 2, 1, 1, 1, x);
    n.src[1] = &tx4;
    EXPECT(compute1(&n) == TSR_ERR_INVALID && strstr(error_get(), "tokens"), "T mismatch: %s", error_get());
}

TEST(test_top_k_sum_rows_div) {
    /* ties go to the lower index; NaN ranks below -inf */
    float a[12] = {1, 3, 3, -INFINITY, NAN, 2, /* row 1: */ NAN, NAN, 0, -0.0f, 5, -INFINITY};
    int32_t ids[8];
    tsr_tensor ta = tensor(TSR_DTYPE_F32, 6, 2, 1, 1, a), ti = tensor(TSR_DTYPE_I32, 4, 2, 1, 1, ids);
    tsr_node n = {.op = TSR_OP_TOP_K, .n_src = 1, .dst = &ti, .src = {&ta}};
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const int32_t want[8] = {1, 2, 5, 0, 4, 2, 3, 5};
    for (int i = 0; i < 8; i++) EXPECT(ids[i] == want[i], "top_k slot %d: %d, want %d", i, ids[i], want[i]);
    /* all 6 of row 1: ... then -inf, then the NaNs by index */
    int32_t all[12];
    tsr_tensor tall = tensor(TSR_DTYPE_I32, 6, 2, 1, 1, all);
    n.dst = &tall;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const int32_t want_all[6] = {4, 2, 3, 5, 0, 1};
    for (int i = 0; i < 6; i++) EXPECT(all[6 + i] == want_all[i], "top_k 6 of 6, slot %d: %d", i, all[6 + i]);
    tsr_tensor t7 = tensor(TSR_DTYPE_I32, 7, 2, 1, 1, all);
    n.dst = &t7;
    EXPECT(compute1(&n) == TSR_ERR_INVALID, "k 7 of a row of 6 accepted");

    /* sum_rows over a strided (transposed) view: columns of [[1, 2], [3, 4], [5, 6]] */
    float m[6] = {1, 2, 3, 4, 5, 6}, s[2];
    tsr_tensor tm = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, m), ts = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, s);
    tm.nb[0] = 8, tm.nb[1] = 4;
    tsr_node ns = {.op = TSR_OP_SUM_ROWS, .n_src = 1, .dst = &ts, .src = {&tm}};
    EXPECT(compute1(&ns) == TSR_OK, "%s", error_get());
    EXPECT(s[0] == 9 && s[1] == 12, "sum_rows %g %g", s[0], s[1]);

    /* div broadcasts a column: each row over its sum */
    float w[6] = {1, 3, 4, 2, 2, 4}, sum[2] = {8, 8}, q[6];
    tsr_tensor tw = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, w), tsum = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, sum);
    tsr_tensor tq = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, q);
    tsr_node nd = {.op = TSR_OP_DIV, .n_src = 2, .dst = &tq, .src = {&tw, &tsum}};
    EXPECT(compute1(&nd) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 6; i++) EXPECT(q[i] == w[i] / 8.0f, "div %d: %g", i, q[i]);
}

/* ---------------------------------------------------- unary and friends */

TEST(test_unary) {
    float x[3] = {1.0f, -2.0f, 0.5f}, y[3], g[3] = {2.0f, 3.0f, -1.0f};
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, x), ty = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, y);
    tsr_tensor tg = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, g);
    tsr_node n = {.op = TSR_OP_SILU, .n_src = 1, .dst = &ty, .src = {&tx}};
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 3; i++) EXPECT_NEAR(y[i], x[i] / (1 + exp(-x[i])), 1e-6, "silu");
    n.op = TSR_OP_GELU;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    /* llama.cpp's CPU GELU: tanh form over fp16-rounded input, fp16 result */
    for (int i = 0; i < 3; i++) {
        double v = fp16_to_f32(f32_to_fp16(x[i]));
        float want = fp16_to_f32(f32_to_fp16((float)(0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))))));
        EXPECT_NEAR(y[i], want, 1e-6, "gelu");
    }
    /* the exact GELU, x Phi(x) (Phi from a table): 1.5e-4 from the tanh
     * form at x = 1, so the tanh form would fail here */
    n.op = TSR_OP_GELU_ERF;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    const double gelu_erf_want[3] = {0.8413447460685429, -0.0455002638963584, 0.3457312306370066};
    for (int i = 0; i < 3; i++) EXPECT_NEAR(y[i], gelu_erf_want[i], 2e-7, "gelu_erf %d: %.9g", i, y[i]);
    tsr_node s = {.op = TSR_OP_SWIGLU, .n_src = 2, .dst = &ty, .src = {&tx, &tg}};
    EXPECT(compute1(&s) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 3; i++) EXPECT_NEAR(y[i], x[i] / (1 + exp(-x[i])) * g[i], 1e-6, "swiglu");
    {
        /* gpt-oss's clamp: the gate only from above, up both ways */
        float og[3] = {-9.0f, 0.5f, 9.0f}, ou[3] = {-9.0f, 2.0f, 9.0f}, oy[3];
        tsr_tensor tgo = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, og), tuo = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, ou);
        tsr_tensor tyo = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, oy);
        tsr_node so = {.op = TSR_OP_SWIGLU_OAI, .n_src = 2, .dst = &tyo, .src = {&tgo, &tuo}};
        so.fparams[TSR_SWIGLU_OAI_F_ALPHA] = 1.702f;
        so.fparams[TSR_SWIGLU_OAI_F_LIMIT] = 7.0f;
        EXPECT(compute1(&so) == TSR_OK, "%s", error_get());
        const double want[3] = {-9.0 / (1 + exp(1.702 * 9.0)) * (-7.0 + 1), 0.5 / (1 + exp(-1.702 * 0.5)) * 3.0,
                                7.0 / (1 + exp(-1.702 * 7.0)) * 8.0};
        for (int i = 0; i < 3; i++) EXPECT_NEAR(oy[i], want[i], 1e-5, "swiglu_oai %d", i);
    }
    tsr_node sc = {.op = TSR_OP_SCALE, .n_src = 1, .dst = &ty, .src = {&tx}};
    sc.fparams[TSR_SCALE_F_SCALE] = 3.0f;
    sc.fparams[TSR_SCALE_F_BIAS] = -1.0f;
    EXPECT(compute1(&sc) == TSR_OK, "%s", error_get());
    EXPECT(y[0] == 2.0f && y[1] == -7.0f && y[2] == 0.5f, "scale 3x-1: %g %g %g", y[0], y[1], y[2]);

    /* ADD broadcasting a [3] row over [3, 2] */
    float a[6] = {1, 2, 3, 4, 5, 6}, sum[6];
    tsr_tensor ta = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, a), ts = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, sum);
    tsr_node add = {.op = TSR_OP_ADD, .n_src = 2, .dst = &ts, .src = {&ta, &tg}};
    EXPECT(compute1(&add) == TSR_OK, "%s", error_get());
    EXPECT(sum[0] == 3 && sum[3] == 6 && sum[5] == 5, "add broadcast: %g %g %g", sum[0], sum[3], sum[5]);
}

/* ------------------------------------------------- SSM_CONV, SSM_SCAN */

TEST(test_ssm) {
    /* SSM_CONV, K 2, one channel: sx [1, 2, 3] (one step of state, two new)
     * with kernel [10, 1] -> [1*10 + 2*1, 2*10 + 3*1] (a correlation: w[0]
     * meets the oldest input) */
    float sx[3] = {1, 2, 3}, w[2] = {10, 1}, y[2];
    tsr_tensor tsx = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, sx), tw = tensor(TSR_DTYPE_F32, 2, 1, 1, 1, w);
    tsr_tensor ty = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, y);
    tsr_node cn = {.op = TSR_OP_SSM_CONV, .n_src = 2, .dst = &ty, .src = {&tsx, &tw}};
    EXPECT(compute1(&cn) == TSR_OK, "%s", error_get());
    EXPECT(y[0] == 12.0f && y[1] == 23.0f, "ssm_conv gave %g %g, want 12 23", y[0], y[1]);

    /* SSM_SCAN, N = P = H = G = 1, two tokens, state 0.5, A -1, dt 0 (so
     * softplus = ln 2 and the decay exp(-ln 2) = 1/2):
     *   t0 x 1, B 2, C 3:  h = 0.5/2 + 2*1*ln2 = 1.6362944, y = 3h = 4.9088831
     *   t1 x -1, B 1, C 1: h = 1.6362944/2 - ln2 = 0.125,    y = 0.125 */
    float st[1] = {0.5f}, xbc[6] = {1, 2, 3, -1, 1, 1}, dt[2] = {0, 0}, a[1] = {-1}, out[3];
    tsr_tensor ts = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, st), tx = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, xbc);
    tsr_tensor tdt = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, dt), ta = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, a);
    tsr_tensor to = tensor(TSR_DTYPE_F32, 3, 1, 1, 1, out);
    tsr_node sn = {.op = TSR_OP_SSM_SCAN, .n_src = 4, .dst = &to, .src = {&ts, &tx, &tdt, &ta}};
    EXPECT(compute1(&sn) == TSR_OK, "%s", error_get());
    EXPECT(fabsf(out[0] - 4.9088831f) < 1e-6f, "y0 = %.7f, want 4.9088831", out[0]);
    EXPECT(fabsf(out[1] - 0.125f) < 1e-6f, "y1 = %.7f, want 0.125", out[1]);
    EXPECT(fabsf(out[2] - 0.125f) < 1e-6f, "final state = %.7f, want 0.125", out[2]);
}

/* ------------------------------------------------------------ DELTA_NET */

TEST(test_delta_net) {
    /* Dk 2, Dv 1, one head, two tokens of the same q (3, 4) -> q' (0.6, 0.8),
     * k (0, 2) -> k' (0, 1), v 2, b 0 (beta 1/2), a 0 with A -1 (decay
     * exp(-ln 2) = 1/2), from the state (0.5, 0.5):
     *   t0: S = (0.25, 0.25), u = (2 - 0.25)/2 = 0.875, S = (0.25, 1.125), y = 1.05
     *   t1: S = (0.125, 0.5625), u = 0.71875, S = (0.125, 1.28125), y = 1.1
     * With kv_tiled or not, one q/k head serves every v head. */
    float st[2] = {0.5f, 0.5f}, qkv[10] = {3, 4, 0, 2, 2, 3, 4, 0, 2, 2}, gates[4] = {0, 0, 0, 0}, a[1] = {-1};
    float out[4];
    tsr_tensor ts = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, st), tq = tensor(TSR_DTYPE_F32, 5, 2, 1, 1, qkv);
    tsr_tensor tg = tensor(TSR_DTYPE_F32, 1, 2, 2, 1, gates), ta = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, a);
    tsr_tensor to = tensor(TSR_DTYPE_F32, 4, 1, 1, 1, out);
    tsr_node n = {.op = TSR_OP_DELTA_NET, .n_src = 4, .dst = &to, .src = {&ts, &tq, &tg, &ta}};
    tsr_delta_net_params_put(&(tsr_delta_net_params){.eps = 1e-6f, .scale = 1.0f}, n.iparams, n.fparams);
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT(fabsf(out[0] - 1.05f) < 1e-6f && fabsf(out[1] - 1.1f) < 1e-6f, "y = %.7f %.7f, want 1.05 1.1", out[0],
           out[1]);
    EXPECT(fabsf(out[2] - 0.125f) < 1e-6f && fabsf(out[3] - 1.28125f) < 1e-6f,
           "final state = %.7f %.7f, want 0.125 1.28125", out[2], out[3]);
    /* a zero q: divided by eps, not by 0 (y 0, no NaN) */
    qkv[5] = qkv[6] = 0;
    EXPECT(compute1(&n) == TSR_OK && out[1] == 0.0f, "y1 with q = 0 is %g, want 0", out[1]);
}

/* ------------------------------------------------- CPY, CONCAT, ARGMAX */

TEST(test_cpy_concat_argmax) {
    float x[2] = {1.0f / 3.0f, -65504.0f * 2};
    uint16_t h[2];
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 2, 1, 1, 1, x), th = tensor(TSR_DTYPE_F16, 2, 1, 1, 1, h);
    tsr_node n = {.op = TSR_OP_CPY, .n_src = 1, .dst = &th, .src = {&tx}};
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    EXPECT(h[0] == 0x3555, "1/3 in F16 is 0x3555 (got 0x%04x)", h[0]);
    EXPECT(h[1] == 0xfc00, "-131008 overflows F16 to -inf (got 0x%04x)", h[1]);

    /* F32 -> Q8_0 through CPY gives the dtype module's bytes */
    float v[32];
    for (int i = 0; i < 32; i++) v[i] = sinf((float)i);
    uint8_t q_cpy[34], q_direct[34];
    tsr_tensor tv = tensor(TSR_DTYPE_F32, 32, 1, 1, 1, v), tq = tensor(TSR_DTYPE_Q8_0, 32, 1, 1, 1, q_cpy);
    tsr_node nq = {.op = TSR_OP_CPY, .n_src = 1, .dst = &tq, .src = {&tv}};
    EXPECT(compute1(&nq) == TSR_OK, "%s", error_get());
    dtype_traits_get(TSR_DTYPE_Q8_0)->from_f32(v, q_direct, 32);
    EXPECT(memcmp(q_cpy, q_direct, 34) == 0, "CPY F32->Q8_0 bytes equal from_f32's");

    /* CONCAT along dim 1: [2, 1] + [2, 2] -> [2, 3] */
    float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}, c[6];
    tsr_tensor ta = tensor(TSR_DTYPE_F32, 2, 1, 1, 1, a), tb = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, b);
    tsr_tensor tc = tensor(TSR_DTYPE_F32, 2, 3, 1, 1, c);
    tsr_node cn = {.op = TSR_OP_CONCAT, .n_src = 2, .dst = &tc, .src = {&ta, &tb}};
    cn.iparams[TSR_CONCAT_I_DIM] = 1;
    EXPECT(compute1(&cn) == TSR_OK, "%s", error_get());
    for (int i = 0; i < 6; i++) EXPECT(c[i] == (float)(i + 1), "concat element %d = %g", i, c[i]);

    /* ARGMAX: first of equal maxima; -inf rows give 0 */
    float m[6] = {1, 5, 5, -INFINITY, -INFINITY, -INFINITY};
    int32_t idx[2] = {-1, -1};
    tsr_tensor tm = tensor(TSR_DTYPE_F32, 3, 2, 1, 1, m), ti = tensor(TSR_DTYPE_I32, 2, 1, 1, 1, idx);
    tsr_node an = {.op = TSR_OP_ARGMAX, .n_src = 1, .dst = &ti, .src = {&tm}};
    EXPECT(compute1(&an) == TSR_OK, "%s", error_get());
    EXPECT(idx[0] == 1 && idx[1] == 0, "argmax: %d %d", idx[0], idx[1]);
}

/* ----------------------------------------------------------- FLASH_ATTN */

TEST(test_flash_attn) {
    /* D 1, two query heads sharing one kv head (GQA), two keys:
     * head 0: q = 1, scores (0, ln 3) -> weights (1/4, 3/4) -> 0.25*4 + 0.75*8 = 7
     * head 1: q = 0, scores (0, 0) -> (1/2, 1/2) -> 6
     * a second query row with the second key masked -> v0 = 4 for both heads */
    float q[4] = {1, 1, 0, 0};  /* [D=1, n_q=2, H=2]: q[iq + 2*h] */
    float k[2] = {0, logf(3)}, v[2] = {4, 8};
    float mask[4] = {0, 0, 0, -INFINITY};
    float out[4];
    tsr_tensor tq = tensor(TSR_DTYPE_F32, 1, 2, 2, 1, q), tk = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, k);
    tsr_tensor tv = tensor(TSR_DTYPE_F32, 1, 2, 1, 1, v), tm = tensor(TSR_DTYPE_F32, 2, 2, 1, 1, mask);
    tsr_tensor to = tensor(TSR_DTYPE_F32, 1, 2, 2, 1, out); /* [D, H, n_q] */
    tsr_node n = {.op = TSR_OP_FLASH_ATTN, .n_src = 4, .dst = &to, .src = {&tq, &tk, &tv, &tm}};
    n.fparams[TSR_FLASH_ATTN_F_SCALE] = 1.0f;
    EXPECT(compute1(&n) == TSR_OK, "%s", error_get());
    /* out[h + 2*iq] */
    EXPECT_NEAR(out[0], 7.0, 1e-5, "query 0 head 0");
    EXPECT_NEAR(out[1], 6.0, 1e-5, "query 0 head 1");
    EXPECT_NEAR(out[2], 4.0, 1e-6, "query 1 head 0 (masked)");
    EXPECT_NEAR(out[3], 4.0, 1e-6, "query 1 head 1 (masked)");
}

/* -------------------------------------------------- plugin and bad input */

TEST(test_plugin_tables) {
    EXPECT(ref_plugin_entry((TSR_ABI_MAJOR + 1) << 16) == NULL, "another ABI major is refused");
    const tsr_plugin *p = ref_plugin_entry(TSR_ABI_VERSION);
    EXPECT(p && !strcmp(p->name, "ref"), "plugin named ref");
    if (!p) return;
    volatile int abort_flag = 0;
    tsr_host host = {.struct_size = sizeof host, .abi_version = TSR_ABI_VERSION,
                     .abort_flag = &abort_flag, .n_threads = 1};
    char reason[64];
    EXPECT(p->init(&host, reason, sizeof reason) == TSR_OK, "init");
    EXPECT(p->device_count() == 1 && p->device_get(1) == NULL, "one device");
    tsr_device *dev = p->device_get(0);
    tsr_device_info info = {.struct_size = sizeof info};
    EXPECT(dev->api->get_info(dev, &info) == TSR_OK, "get_info");
    EXPECT(info.kind == TSR_DEVICE_CPU && info.host_visible && info.reads_host_memory,
           "CPU, host-visible, reads host memory");

    tsr_buffer *buf = NULL;
    EXPECT(dev->api->buffer_alloc(dev, 100, &buf) == TSR_OK && buf, "buffer_alloc");
    void *host_ptr = dev->api->buffer_host_ptr(dev, buf);
    EXPECT(host_ptr && ((uintptr_t)host_ptr % 64) == 0, "buffers are 64-byte aligned");
    tsr_queue *q = NULL;
    EXPECT(dev->api->queue_create(dev, &q) == TSR_OK && q, "queue_create");
    uint8_t bytes[16] = {1, 2, 3};
    EXPECT(q->api->write(q, buf, 96, bytes, 4) == TSR_OK, "write at the end");
    EXPECT(q->api->write(q, buf, 97, bytes, 4) == TSR_ERR_INVALID, "write past the end refused");
    EXPECT(q->api->read(q, buf, UINT64_MAX, bytes, 2) == TSR_ERR_INVALID, "read at a huge offset refused");

    /* a node in a ref buffer (data NULL, buffer + offset) */
    float ones[4] = {1, 1, 1, 1};
    EXPECT(q->api->write(q, buf, 0, ones, sizeof ones) == TSR_OK, "upload");
    tsr_tensor a = tensor(TSR_DTYPE_F32, 4, 1, 1, 1, NULL), d = a;
    a.buffer = buf;
    d.buffer = buf;
    d.offset = 32;
    tsr_node n = {.op = TSR_OP_SCALE, .n_src = 1, .dst = &d, .src = {&a}};
    n.fparams[TSR_SCALE_F_SCALE] = 2.0f;
    EXPECT(q->api->compute(q, &n, 1) == TSR_OK && q->api->synchronize(q) == TSR_OK, "compute in buffer");
    float back[4] = {0};
    EXPECT(q->api->read(q, buf, 32, back, sizeof back) == TSR_OK && back[3] == 2.0f, "result read back");

    /* supports_op: unsupported dtypes and malformed nodes */
    uint8_t iq[66] = {0};
    float x[256], y[1];
    /* built by hand: number 31 was a repacked type GGUF removed; no one
     * knows its geometry */
    tsr_tensor w = {.dtype = 31, .ne = {256, 1, 1, 1}, .nb = {66, 66, 66, 66}, .data = iq};
    tsr_tensor tx = tensor(TSR_DTYPE_F32, 256, 1, 1, 1, x);
    tsr_tensor ty = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, y);
    tsr_node mm = {.op = TSR_OP_MUL_MAT, .n_src = 2, .dst = &ty, .src = {&w, &tx}};
    EXPECT(dev->api->supports_op(dev, &mm) == 0, "weights of a removed dtype are declined");
    char why[256];
    EXPECT(ref_node_check(&mm, why, sizeof why) != 0 && strstr(why, "MUL_MAT"), "reason: %s", why);
    tsr_node bad = {.op = 999, .n_src = 1, .dst = &ty, .src = {&ty}};
    EXPECT(dev->api->supports_op(dev, &bad) == 0, "unknown op declined");
    bad.op = TSR_OP_ADD;
    bad.n_src = 9;
    EXPECT(dev->api->supports_op(dev, &bad) == 0, "n_src 9 declined");
    tsr_node no_dst = {.op = TSR_OP_SILU, .n_src = 1, .dst = NULL, .src = {&ty}};
    EXPECT(dev->api->supports_op(dev, &no_dst) == 0, "missing dst declined");
    EXPECT(ref_compute(&no_dst, 1, NULL) == TSR_ERR_INVALID, "missing dst is an error, not a crash");
    /* strides whose byte offsets would overflow int64 are refused up front */
    tsr_tensor huge = tensor(TSR_DTYPE_F32, 4, 1 << 20, 1, 1, x);
    huge.nb[1] = INT64_C(1) << 47;
    tsr_node hn = {.op = TSR_OP_SILU, .n_src = 1, .dst = &huge, .src = {&huge}};
    EXPECT(ref_node_check(&hn, why, sizeof why) != 0 && strstr(why, "spans"), "huge span: %s", why);
    tsr_tensor nowhere = tensor(TSR_DTYPE_F32, 1, 1, 1, 1, NULL);
    tsr_node unbound = {.op = TSR_OP_SILU, .n_src = 1, .dst = &ty, .src = {&nowhere}};
    EXPECT(ref_compute(&unbound, 1, NULL) == TSR_ERR_INVALID, "tensor without memory is an error");
    EXPECT(strstr(error_get(), "src0") != NULL, "message names src0: %s", error_get());

    /* the abort flag stops before the next node */
    abort_flag = 1;
    EXPECT(q->api->compute(q, &n, 1) == TSR_ERR_ABORTED, "abort flag honoured");
    abort_flag = 0;

    q->api->destroy(q);
    dev->api->buffer_free(dev, buf);
    p->shutdown();
}

HARNESS_MAIN("ref ops", HARNESS_TEST(test_rope), HARNESS_TEST(test_rope_yarn), HARNESS_TEST(test_soft_max),
             HARNESS_TEST(test_norms), HARNESS_TEST(test_get_rows_quantized), HARNESS_TEST(test_mul_mat_broadcast),
             HARNESS_TEST(test_unary), HARNESS_TEST(test_cpy_concat_argmax), HARNESS_TEST(test_flash_attn),
             HARNESS_TEST(test_plugin_tables), HARNESS_TEST(test_mul_mat_id),
             HARNESS_TEST(test_top_k_sum_rows_div), HARNESS_TEST(test_ssm),
             HARNESS_TEST(test_delta_net))
