/*
 * The Hadamard rotation of the KV cache (kv.h: Rotation; kv_rot.c).
 *
 * 1. H for head sizes 8..256, powers of two and not (96, 160: blocks of 32;
 *    48: blocks of 16): symmetric, +-1/sqrt(n) inside its diagonal blocks
 *    and 0 outside, H.H = I within 1e-6.
 * 2. A model's graph alone on ref (mini_runner) with an F32 cache, rotation
 *    forced on against off, through both attention paths (two MUL_MATs,
 *    FLASH_ATTN): the rotated cache holds exactly H k and H v (within
 *    1e-5), and the logits of a prompt and of greedy steps after it are
 *    the same within TOL = 1e-5 (the turns only add f32 rounding; measured
 *    1.2e-6 with logits up to 3.9). Queries not turned, or outputs not
 *    turned back, are off by 2.8 and 4.5.
 * 3. Bad rotation settings are one clear error.
 * 4. A saved state records the rotation: a q8_0 cache's state (rotated K
 *    and V) loads into a q8_0 context and is refused, naming the rotation,
 *    by one whose cache is not rotated (forced here: the cache types decide
 *    it otherwise, and the types are checked first).
 *
 * usage: test_kv_rot MODEL.gguf...  (the synthetic files of tests/data)
 */

#include "harness.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kv/kv.h"
#include "mini_runner.h"
#include "host/host.h"
#include "model/model.h"
#include "model/public.h"
#include "util/error.h"
#include "../logits_util.h"

enum { N_PROMPT = 24, N_STEPS = 6, N_CTX = 64 };
static const double TOL = 1e-5;

static char **g_paths;
static int g_n_paths;

TEST(test_matrix) {
    const int32_t dims[] = {8, 32, 48, 64, 96, 128, 160, 256};
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++) {
        const int32_t D = dims[c], n = kv_rot_block(D);
        assert_true(n > 0 && D % n == 0 && (n & (n - 1)) == 0 && (D / n) % 2 == 1);
        float *h = malloc((size_t)D * D * sizeof *h);
        assert_non_null(h);
        kv_rot_fill(h, D);
        double worst = 0;
        for (int32_t i = 0; i < D; i++)
            for (int32_t j = 0; j < D; j++) {
                const float e = h[i * D + j];
                assert_true(e == h[j * D + i]);
                if (i / n != j / n) assert_true(e == 0.0f);
                else assert_true(fabs(fabs((double)e) * sqrt((double)n) - 1.0) < 1e-6);
                double dot = 0;
                for (int32_t k = 0; k < D; k++) dot += (double)h[i * D + k] * h[k * D + j];
                double err = fabs(dot - (i == j ? 1.0 : 0.0));
                if (err > worst) worst = err;
            }
        print_message("head size %3d: blocks of %3d, max |H.H - I| %.2g\n", D, n, worst);
        assert_true(worst <= 1e-6);
        free(h);
    }
    assert_int_equal(kv_rot_block(0), 0);
}

static kv_cache *new_cache(const model *m, bool fa, kv_rotation rot) {
    const model_hparams *hp = &m->hp;
    kv_cache_params kp = {.n_layer = hp->n_layer, .n_ctx = N_CTX, .n_embd_k = hp->head_dim * hp->n_head_kv,
                          .n_embd_v = hp->head_dim * hp->n_head_kv, .head_dim = hp->head_dim,
                          .dtype_k = TSR_DTYPE_F32, .dtype_v = TSR_DTYPE_F32, .flash_attn = fa, .rotation = rot};
    kv_cache *kv = kv_cache_new(&kp);
    if (!kv) fail_msg("kv cache: %s", error_get());
    assert_true(kv->rot_k == (rot == KV_ROT_ON) && kv->rot_v == (rot == KV_ROT_ON));
    return kv;
}

/* Cell cell of layer 0: the rotated cache's K (and V when stored like K)
 * row is H times the plain one, head by head. */
static double cache_rotation_error(const kv_cache *plain, const kv_cache *rot, int32_t cell, bool v) {
    const int32_t D = rot->head_dim, n = v ? rot->n_embd_v : rot->n_embd_k;
    const float *a = (const float *)(v ? plain->layers[0].v_data : plain->layers[0].k_data) + (size_t)cell * n;
    const float *b = (const float *)(v ? rot->layers[0].v_data : rot->layers[0].k_data) + (size_t)cell * n;
    double worst = 0, norm = 0;
    for (int32_t h0 = 0; h0 < n; h0 += D)
        for (int32_t i = 0; i < D; i++) {
            double want = 0;
            for (int32_t j = 0; j < D; j++) want += (double)rot->rot[i * D + j] * a[h0 + j];
            if (fabs(want - b[h0 + i]) > worst) worst = fabs(want - b[h0 + i]);
            if (fabs(want) > norm) norm = fabs(want);
        }
    assert_true(norm > 1e-3); /* the row was written */
    return worst / norm;
}

static void run_model(const char *path, bool fa) {
    gguf_file *f = gguf_open(path);
    if (!f) fail_msg("%s", error_get());
    model_load_params lp = {.gpu_device = -1, .cpu_device = -1};
    model *m = model_load(f, &lp);
    if (!m) fail_msg("%s: %s", path, error_get());
    const int32_t nv = m->hp.n_vocab;
    kv_cache *plain = new_cache(m, fa, KV_ROT_OFF), *rot = new_cache(m, fa, KV_ROT_ON);
    float *a = malloc((size_t)N_PROMPT * nv * sizeof *a), *b = malloc((size_t)N_PROMPT * nv * sizeof *b);
    assert_true(a && b);
    int32_t tokens[N_PROMPT];
    for (int32_t i = 0; i < N_PROMPT; i++) tokens[i] = (int32_t)((i * 7919 + 13) % (nv - 3)) + 3;
    assert_int_equal(mini_forward(m, plain, tokens, N_PROMPT, 0, true, a), 0);
    assert_int_equal(mini_forward(m, rot, tokens, N_PROMPT, 0, true, b), 0);
    double worst = max_diff(a, b, (size_t)N_PROMPT * nv), scale = 0;
    for (size_t i = 0; i < (size_t)N_PROMPT * nv; i++)
        if (fabs((double)a[i]) > scale) scale = fabs((double)a[i]);
    double k_err = cache_rotation_error(plain, rot, N_PROMPT - 1, false);
    double v_err = fa ? cache_rotation_error(plain, rot, N_PROMPT - 1, true) : 0.0;
    int32_t tok = argmax(a + (size_t)(N_PROMPT - 1) * nv, nv);
    for (int32_t s = 0; s < N_STEPS; s++) {
        assert_int_equal(mini_forward(m, plain, &tok, 1, N_PROMPT + s, true, a), 0);
        assert_int_equal(mini_forward(m, rot, &tok, 1, N_PROMPT + s, true, b), 0);
        double d = max_diff(a, b, (size_t)nv);
        if (d > worst) worst = d;
        tok = argmax(a, nv);
    }
    print_message("%s (head size %d, %s): logits up to %.3g, rotated vs not %.3g; cache K %.2g, V %.2g from H x\n",
                  path, m->hp.head_dim, fa ? "flash attention" : "two products", scale, worst, k_err, v_err);
    assert_true(k_err <= 1e-5 && v_err <= 1e-5);
    assert_true(worst <= TOL);
    free(a);
    free(b);
    kv_cache_free(plain);
    kv_cache_free(rot);
    model_free(m);
}

TEST(test_models) {
    for (int i = 0; i < g_n_paths; i++) {
        run_model(g_paths[i], false);
        run_model(g_paths[i], true);
    }
}

TEST(test_bad) {
    kv_cache_params kp = {.n_layer = 1, .n_ctx = 8, .n_embd_k = 64, .n_embd_v = 64, .head_dim = 0,
                          .dtype_k = TSR_DTYPE_Q8_0, .dtype_v = TSR_DTYPE_F16};
    /* a block-type K is rotated: that needs the head size */
    assert_null(kv_cache_new(&kp));
    assert_non_null(strstr(error_get(), "head size"));
    kp.rotation = KV_ROT_OFF; /* forced off: no head size needed */
    kv_cache *kv = kv_cache_new(&kp);
    assert_non_null(kv);
    assert_false(kv->rot_k || kv->rot_v);
    assert_null(kv->rot);
    kv_cache_free(kv);
    kp.rotation = (kv_rotation)7;
    assert_null(kv_cache_new(&kp));
    assert_non_null(strstr(error_get(), "rotation 7"));
    kp.rotation = KV_ROT_AUTO;
    kp.head_dim = 32;
    kv = kv_cache_new(&kp);
    assert_non_null(kv);
    assert_true(kv->rot_k && !kv->rot_v && kv->rot && kv->head_dim == 32);
    kv_cache_free(kv);
}

static tessera_context *q8_context(tessera_model *tm) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    cp.kv_type = TESSERA_KV_Q8_0;
    cp.flash_attn = TESSERA_FLASH_ATTN_ON;
    tessera_context *ctx = tessera_context_new(tm, &cp);
    if (!ctx) fail_msg("context: %s", tessera_last_error());
    assert_true(ctx->kv->rot_k && ctx->kv->rot_v);
    return ctx;
}

TEST(test_state) {
    host_options ho = {.only_plugin_dirs = true};
    tessera_init_params ip = {0};
    if (host_init(&ho) != 0 || tessera_init(&ip) != 0) fail_msg("init: %s", tessera_last_error());
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = "ref";
    tessera_model *tm = tessera_model_load(g_paths[0], &mp);
    if (!tm) fail_msg("%s: %s", g_paths[0], tessera_last_error());
    tessera_context *a = q8_context(tm), *b = q8_context(tm);
    tessera_token toks[8];
    for (int32_t i = 0; i < 8; i++) toks[i] = 3 + i;
    assert_int_equal(tessera_decode(a, toks, 8, 0, 0), 0);
    size_t len = 0;
    void *data = tessera_state_save(a, -1, toks, 8, NULL, &len);
    assert_non_null(data);
    int32_t n = 0;
    tessera_token got[8];
    assert_int_equal(tessera_state_load(b, -1, data, len, "q8.state", got, 8, &n, NULL), 0);
    assert_int_equal(n, 8);
    b->kv->rot_k = false; /* as if the cache had been made with the rotation off */
    assert_int_not_equal(tessera_state_load(b, -1, data, len, "q8.state", got, 8, &n, NULL), 0);
    print_message("%s\n", tessera_last_error());
    assert_non_null(strstr(tessera_last_error(), "q8.state"));
    assert_non_null(strstr(tessera_last_error(), "K cache's heads are Hadamard-rotated there, not here"));
    b->kv->rot_k = true;
    b->kv->rot_v = false;
    assert_int_not_equal(tessera_state_load(b, -1, data, len, "q8.state", got, 8, &n, NULL), 0);
    assert_non_null(strstr(tessera_last_error(), "V cache's heads"));
    b->kv->rot_v = true;
    free(data);
    tessera_context_free(a);
    tessera_context_free(b);
    tessera_model_free(tm);
    tessera_shutdown();
}

/* Usage: test_kv_rot MODEL.gguf... (each must exist, else the test skips) */
FIXTURE(setup) {
    REQUIRE(g_n_paths >= 1, "usage: test_kv_rot MODEL.gguf...");
    for (int i = 0; i < g_n_paths; i++) harness_require_file(g_paths[i]);
    return 0;
}

int main(int argc, char **argv) {
    g_paths = argv + 1;
    g_n_paths = argc - 1;
    const struct CMUnitTest tests[] = {HARNESS_TEST(test_matrix), HARNESS_TEST(test_bad), HARNESS_TEST(test_models),
                                       HARNESS_TEST(test_state)};
    return HARNESS_RUN_GROUP("kv rotation", tests, setup, NULL, argc, argv);
}
