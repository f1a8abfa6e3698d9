/*
 * test_ocl_golden — llama.cpp's goldens with layers offloaded to the OpenCL
 * device (opencl0, e.g. PoCL), the rest on the best CPU backend.
 *
 * For each golden case: the prompt's logits (golden top-8) within TOL, and
 * the greedy continuation equal to llama.cpp's. Mode "quant" (quantized
 * weights: llama.cpp rounds activations to 8 bits, the OpenCL kernels do
 * not) requires the greedy tokens to match up to the first step whose golden
 * margin is below the measured error, as tests/model/test_golden.c does.
 *
 * usage: test_ocl_golden MODEL_NAME strict|quant TOL N_GPU_LAYERS [CPU_DEVICE]
 * CPU_DEVICE computes the layers not offloaded: "ref" (the default; exact,
 * so any error measured is the OpenCL device's) or e.g. "cpu-avx0".
 * Exits 77 (skipped) when no OpenCL device is present. TESSERA_TEST_KV_F32=1
 * uses an F32 KV cache (to tell F16 rounding effects from kernel errors).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "golden.h"
#include "harness.h"
#include "host/host.h"
#include "../logits_util.h"

/* Returns 1 if the case passes, 0 if not, -1 on an API failure. */
static int run_case(tessera_model *m, const golden_case *g, bool quant, double tol, int c) {
    const int32_t nv = tessera_model_n_vocab(m);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)(g->n_tokens + g->n_greedy + 1);
    cp.n_threads = 2;
    if (getenv("TESSERA_TEST_KV_F32")) cp.kv_type = TESSERA_KV_F32; /* (for investigating errors) */
    tessera_context *ctx = tessera_context_new(m, &cp);
    if (!ctx || tessera_decode(ctx, g->tokens, g->n_tokens, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
        printf("  case %d: %s\n", c, tessera_last_error());
        if (ctx) tessera_context_free(ctx);
        return -1;
    }
    double err = 0;
    for (int32_t p = 0; p < g->n_tokens; p++) {
        const float *lg = tessera_logits(ctx, p);
        for (int k = 0; k < GOLDEN_TOP; k++) {
            const golden_top *t = &g->top[p * GOLDEN_TOP + k];
            double e = fabs((double)lg[t->id] - t->logit);
            if (e > err) err = e;
        }
    }
    const double prompt_err = err;
    int matched = 0, needed = g->n_greedy;
    const float *lg = tessera_logits(ctx, -1);
    for (int32_t i = 0; i < g->n_greedy; i++) {
        tessera_token tok = argmax(lg, nv);
        if (tok != g->greedy[i]) {
            if (quant && i < g->n_margin && g->margin[i] < err) needed = i;
            break;
        }
        float second = -INFINITY;
        for (int32_t j = 0; j < nv; j++)
            if (j != tok && lg[j] > second) second = lg[j];
        if (i < g->n_margin) {
            double e = fabs((double)(lg[tok] - second) - g->margin[i]);
            if (e > err) err = e;
        }
        matched++;
        if (tessera_decode(ctx, &tok, 1, g->n_tokens + i, 0) != 0) {
            printf("  case %d: decode: %s\n", c, tessera_last_error());
            tessera_context_free(ctx);
            return -1;
        }
        lg = tessera_logits(ctx, -1);
    }
    tessera_context_free(ctx);
    int ok = quant ? matched >= needed : prompt_err <= tol && matched == g->n_greedy;
    printf("  %s case %d (%d tokens): top-8 max err %.3g (tolerance %g), greedy %d/%d matched (%d required)\n",
           ok ? "ok  " : "FAIL", c, g->n_tokens, prompt_err, quant ? INFINITY : tol, matched, g->n_greedy,
           quant ? needed : g->n_greedy);
    return ok;
}

TEST(test_ocl_golden) {
    REQUIRE(harness_argc() >= 5, "usage: test_ocl_golden MODEL_NAME strict|quant TOL N_GPU_LAYERS [CPU_DEVICE]");
    const char *name = harness_arg(1);
    const bool quant = !strcmp(harness_arg(2), "quant");
    const double tol = atof(harness_arg(3));
    const int ngl = atoi(harness_arg(4));
    harness_path path = harness_model_file(name), gpath = harness_golden_file(name);
    golden_case *cases;
    int n_cases = golden_load(gpath.s, &cases);
    REQUIRE(n_cases > 0, "%s: no golden cases", gpath.s);

    harness_host_start();
    const char *cpu = harness_arg(5) ? harness_arg(5) : "ref";
    if (!host_device_find("opencl0") || !host_device_find(cpu)) {
        golden_free(cases, n_cases);
        tessera_shutdown();
        harness_skip("no OpenCL device (see 'tessera devices' for the reason) or no CPU device '%s'", cpu);
    }
    char devices[64];
    snprintf(devices, sizeof devices, "opencl0,%s", cpu);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = ngl;
    tessera_model *m = tessera_model_load(path.s, &mp);
    if (EXPECT(m != NULL, "%s: %s", name, tessera_last_error())) {
        printf("%s on %s, -ngl %d (%s)\n", name, devices, ngl, quant ? "quant" : "strict");
        for (int c = 0; c < n_cases; c++) EXPECT(run_case(m, &cases[c], quant, tol, c) == 1, "case %d (line above)", c);
        tessera_model_free(m);
    }
    golden_free(cases, n_cases);
    tessera_shutdown();
}

HARNESS_MAIN("opencl golden", HARNESS_TEST(test_ocl_golden))
