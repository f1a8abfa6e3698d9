/*
 * A model on a Vulkan device with a quantized KV cache and flash attention
 * (-ngl 99 -fa on -ctk T -ctv T) against the CPU path (the ref device, same
 * context settings), through the public API:
 *   - the cache lives on the device: tessera_context_memory shows KV bytes
 *     on vulkan0 and none elsewhere (the device writes the block types);
 *   - every logit of every prompt position within TOL of the CPU path's
 *     (TOL "-": printed, not checked: quantized weights, which ref
 *     multiplies with activations rounded to 8 bits and the device does not);
 *   - the greedy continuation equals the CPU path's, up to a near tie: a
 *     step where the two part is accepted (and ends the run) only when the
 *     CPU path's best-vs-second margin there is below twice the largest
 *     logit difference seen so far.
 * Both paths quantize the cache to the same bytes (tests/vulkan/test_vk_kv),
 * so what differs is f32 vs double summation.
 * Exit 77 when there is no Vulkan device or the model file is absent.
 *
 * usage: test_vk_kv_model MODEL.gguf KV_TYPE TOL N_GREEDY
 *   MODEL.gguf: a path, or a file name looked up in ../shared/models and
 *   then the model cache ($TESSERA_MODEL_CACHE, else ~/.cache/tessera/models)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "host/host.h"
#include "../logits_util.h"
#include "harness.h"

static const char *k_prompt = "Once upon a time, there was a little girl named Lily. She liked to play in the park with her";

typedef struct run {
    tessera_model *model;
    tessera_context *ctx;
} run;

static int32_t best_of(const float *x, int32_t n, float *margin) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    float second = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (i != best && x[i] > second) second = x[i];
    *margin = x[best] - second;
    return best;
}

static int open_run(run *r, const char *path, const char *devices, int ngl, tessera_kv_type type, uint32_t n_ctx) {
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = devices;
    mp.n_gpu_layers = ngl;
    r->model = tessera_model_load(path, &mp);
    if (!EXPECT(r->model != NULL, "%s on %s: %s", path, devices, tessera_last_error())) return -1;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    cp.flash_attn = TESSERA_FLASH_ATTN_ON;
    cp.type_k = cp.type_v = type;
    r->ctx = tessera_context_new(r->model, &cp);
    if (!EXPECT(r->ctx != NULL, "context on %s: %s", devices, tessera_last_error())) return -1;
    return 0;
}

static void close_run(run *r) {
    if (r->ctx) tessera_context_free(r->ctx);
    if (r->model) tessera_model_free(r->model);
}

/* The KV cache is all on vulkan0. */
static void check_kv_placement(const tessera_context *ctx) {
    tessera_memory mem[8];
    const int32_t n = tessera_context_memory(ctx, mem, 8);
    uint64_t on_gpu = 0, elsewhere = 0;
    for (int32_t i = 0; i < n; i++) {
        printf("memory %s: weights %.2f MiB, KV %.3f MiB, compute %.2f MiB\n", mem[i].device,
               (double)mem[i].weights / 1048576.0, (double)mem[i].kv / 1048576.0, (double)mem[i].compute / 1048576.0);
        if (!strcmp(mem[i].device, "vulkan0")) on_gpu += mem[i].kv;
        else elsewhere += mem[i].kv;
    }
    EXPECT(on_gpu != 0 && elsewhere == 0, "the KV cache is not on vulkan0 (%llu bytes there, %llu elsewhere)",
           (unsigned long long)on_gpu, (unsigned long long)elsewhere);
}

/* Usage: test_vk_kv_model MODEL.gguf KV_TYPE TOL|- N_GREEDY (MODEL as harness_model_file finds it) */
TEST(test_vk_kv_model) {
    REQUIRE(harness_argc() >= 5, "usage: test_vk_kv_model MODEL.gguf KV_TYPE TOL N_GREEDY");
    const char *kv_name = harness_arg(2), *tol_arg = harness_arg(3);
    harness_path path = harness_model_file(harness_arg(1));
    const int kv = tessera_kv_type_from_name(kv_name);
    const bool informative = !strcmp(tol_arg, "-");
    const double tol = informative ? INFINITY : atof(tol_arg);
    const int n_greedy = atoi(harness_arg(4));
    REQUIRE(kv >= 0, "unknown KV cache type '%s'", kv_name);
    const char *build = getenv("TESSERA_BUILD_ROOT");
    const char *dirs[1] = {build};
    tessera_init_params ip = {.plugin_dirs = dirs, .n_plugin_dirs = build ? 1 : 0};
    REQUIRE(tessera_init(&ip) == 0, "init: %s", tessera_last_error());
    if (!host_device_find("vulkan0")) {
        tessera_shutdown();
        harness_skip("no device vulkan0 (no Vulkan driver?)");
    }

    run cpu = {0}, gpu = {0};
    tessera_token toks[256];
    int32_t n_prompt = 0;
    if (open_run(&cpu, path.s, "ref", 0, (tessera_kv_type)kv, 256) ||
        open_run(&gpu, path.s, "vulkan0", 99, (tessera_kv_type)kv, 256))
        goto done;
    check_kv_placement(gpu.ctx);
    n_prompt = tessera_tokenize(cpu.model, k_prompt, strlen(k_prompt), toks, 200, true, false);
    if (!EXPECT(n_prompt > 0, "tokenize: %s", tessera_last_error())) goto done;
    if (!EXPECT(!tessera_decode(cpu.ctx, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS) &&
                    !tessera_decode(gpu.ctx, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS),
                "decode of the prompt: %s", tessera_last_error()))
        goto done;
    const int32_t nv = tessera_model_n_vocab(cpu.model);
    double err = 0.0;
    for (int32_t p = 0; p < n_prompt; p++) err = fmax(err, max_diff(tessera_logits(cpu.ctx, p), tessera_logits(gpu.ctx, p), nv));
    printf("%s, KV %s: %d prompt tokens, logits max difference %.3g (tolerance %s)\n", harness_arg(1), kv_name,
           (int)n_prompt, err, informative ? "none: informative" : tol_arg);
    EXPECT(err <= tol, "prompt logits differ by %.3g, tolerance %g", err, tol);

    double seen = err;
    int matched = 0;
    for (int i = 0; i < n_greedy; i++) {
        const float *a = tessera_logits(cpu.ctx, -1), *b = tessera_logits(gpu.ctx, -1);
        seen = fmax(seen, max_diff(a, b, nv));
        float margin_a, margin_b;
        const tessera_token ta = best_of(a, nv, &margin_a), tb = best_of(b, nv, &margin_b);
        if (ta != tb) {
            const bool tie = margin_a < 2.0 * seen;
            printf("%s step %d: CPU %d, vulkan0 %d; CPU margin %.3g, logit difference so far %.3g (%s)\n",
                   tie ? "ok  " : "FAIL", i, (int)ta, (int)tb, (double)margin_a, seen,
                   tie ? "a near tie" : "not a near tie");
            EXPECT(tie, "step %d: the tokens part where it is not a near tie", i);
            break;
        }
        matched++;
        const int32_t pos = n_prompt + i;
        if (!EXPECT(!tessera_decode(cpu.ctx, &ta, 1, pos, 0) && !tessera_decode(gpu.ctx, &tb, 1, pos, 0),
                    "decode of greedy token %d: %s", i, tessera_last_error()))
            break;
    }
    printf("greedy: %d of %d steps the same, logit difference up to %.3g\n", matched, n_greedy, seen);
done:
    close_run(&gpu);
    close_run(&cpu);
    tessera_shutdown();
}

HARNESS_MAIN("vulkan kv model", HARNESS_TEST(test_vk_kv_model))
