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

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_ocl_golden MODEL_NAME strict|quant TOL N_GPU_LAYERS [CPU_DEVICE]\n");
        return 2;
    }
    const char *name = argv[1];
    const bool quant = !strcmp(argv[2], "quant");
    const double tol = atof(argv[3]);
    const int ngl = atoi(argv[4]);
    const char *shared = getenv("TESSERA_SHARED"), *build = getenv("TESSERA_BUILD_ROOT");
    if (!shared || !build) {
        printf("skip: TESSERA_SHARED and TESSERA_BUILD_ROOT must be set\n");
        return 77;
    }
    char path[1024], gpath[1024];
    snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    snprintf(gpath, sizeof gpath, "%s/golden/%s.jsonl", shared, name);
    golden_case *cases;
    int n_cases = golden_load(gpath, &cases);
    if (n_cases <= 0) return 1;

    const char *dirs[1] = {build};
    host_options ho = {.plugin_dirs = dirs, .n_plugin_dirs = 1, .only_plugin_dirs = true};
    if (host_init(&ho) != 0 || tessera_init(NULL) != 0) {
        fprintf(stderr, "init: %s\n", tessera_last_error());
        return 1;
    }
    if (!host_device_find("opencl0")) {
        printf("skip: no OpenCL device (see 'tessera devices' for the reason)\n");
        golden_free(cases, n_cases);
        tessera_shutdown();
        return 77;
    }
    const char *cpu = argc > 5 ? argv[5] : "ref";
    if (!host_device_find(cpu)) {
        printf("skip: no CPU device '%s'\n", cpu);
        golden_free(cases, n_cases);
        tessera_shutdown();
        return 77;
    }
    char devices[64];
    snprintf(devices, sizeof devices, "opencl0,%s", cpu);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = ngl;
    tessera_model *m = tessera_model_load(path, &mp);
    int failures = 0;
    if (!m) {
        printf("FAIL %s: %s\n", name, tessera_last_error());
        failures++;
    } else {
        printf("%s on %s, -ngl %d (%s)\n", name, devices, ngl, quant ? "quant" : "strict");
        for (int c = 0; c < n_cases; c++) failures += run_case(m, &cases[c], quant, tol, c) != 1;
        tessera_model_free(m);
    }
    golden_free(cases, n_cases);
    tessera_shutdown();
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
