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
#include "../model/model_test.h"

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
    if (!r->model) {
        printf("FAIL: %s on %s: %s\n", path, devices, tessera_last_error());
        return -1;
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    cp.flash_attn = TESSERA_FLASH_ATTN_ON;
    cp.type_k = cp.type_v = type;
    r->ctx = tessera_context_new(r->model, &cp);
    if (!r->ctx) {
        printf("FAIL: context on %s: %s\n", devices, tessera_last_error());
        return -1;
    }
    return 0;
}

static void close_run(run *r) {
    if (r->ctx) tessera_context_free(r->ctx);
    if (r->model) tessera_model_free(r->model);
}

/* 0 when the KV cache is all on vulkan0. */
static int check_kv_placement(const tessera_context *ctx) {
    tessera_memory mem[8];
    const int32_t n = tessera_context_memory(ctx, mem, 8);
    uint64_t on_gpu = 0, elsewhere = 0;
    for (int32_t i = 0; i < n; i++) {
        printf("memory %s: weights %.2f MiB, KV %.3f MiB, compute %.2f MiB\n", mem[i].device,
               (double)mem[i].weights / 1048576.0, (double)mem[i].kv / 1048576.0, (double)mem[i].compute / 1048576.0);
        if (!strcmp(mem[i].device, "vulkan0")) on_gpu += mem[i].kv;
        else elsewhere += mem[i].kv;
    }
    if (on_gpu == 0 || elsewhere != 0) {
        printf("FAIL: the KV cache is not on vulkan0 (%llu bytes there, %llu elsewhere)\n",
               (unsigned long long)on_gpu, (unsigned long long)elsewhere);
        return 1;
    }
    return 0;
}

/* Find a model: a path as given, else in ../shared/models, else the cache. */
static void model_path(const char *name, char *out, size_t size) {
    const char *shared = getenv("TESSERA_SHARED");
    snprintf(out, size, "%s", name);
    if (strchr(name, '/')) return;
    snprintf(out, size, "%s/models/%s", shared ? shared : "../shared", name);
    FILE *f = fopen(out, "rb");
    if (f) {
        fclose(f);
        return;
    }
    model_cache_path(out, size, name);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: test_vk_kv_model MODEL.gguf KV_TYPE TOL N_GREEDY\n");
        return 2;
    }
    char path[1024];
    model_path(argv[1], path, sizeof path);
    const int kv = tessera_kv_type_from_name(argv[2]);
    const bool informative = !strcmp(argv[3], "-");
    const double tol = informative ? INFINITY : atof(argv[3]);
    const int n_greedy = atoi(argv[4]);
    if (kv < 0) {
        fprintf(stderr, "unknown KV cache type '%s'\n", argv[2]);
        return 2;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("skipped: %s is absent\n", path);
        return 77;
    }
    fclose(f);
    const char *build = getenv("TESSERA_BUILD_ROOT");
    const char *dirs[1] = {build};
    tessera_init_params ip = {.plugin_dirs = dirs, .n_plugin_dirs = build ? 1 : 0};
    if (tessera_init(&ip) != 0) {
        printf("FAIL: init: %s\n", tessera_last_error());
        return 1;
    }
    if (!host_device_find("vulkan0")) {
        printf("skipped: no device vulkan0 (no Vulkan driver?)\n");
        tessera_shutdown();
        return 77;
    }

    int failures = 0;
    run cpu = {0}, gpu = {0};
    tessera_token toks[256];
    int32_t n_prompt = 0;
    if (open_run(&cpu, path, "ref", 0, (tessera_kv_type)kv, 256) || open_run(&gpu, path, "vulkan0", 99, (tessera_kv_type)kv, 256)) {
        failures++;
        goto done;
    }
    failures += check_kv_placement(gpu.ctx);
    n_prompt = tessera_tokenize(cpu.model, k_prompt, strlen(k_prompt), toks, 200, true, false);
    if (n_prompt <= 0) {
        printf("FAIL: tokenize: %s\n", tessera_last_error());
        failures++;
        goto done;
    }
    if (tessera_decode(cpu.ctx, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS) ||
        tessera_decode(gpu.ctx, toks, n_prompt, 0, TESSERA_DECODE_ALL_LOGITS)) {
        printf("FAIL: decode of the prompt: %s\n", tessera_last_error());
        failures++;
        goto done;
    }
    const int32_t nv = tessera_model_n_vocab(cpu.model);
    double err = 0.0;
    for (int32_t p = 0; p < n_prompt; p++) err = fmax(err, max_diff(tessera_logits(cpu.ctx, p), tessera_logits(gpu.ctx, p), nv));
    printf("%s, KV %s: %d prompt tokens, logits max difference %.3g (tolerance %s)\n", argv[1], argv[2],
           (int)n_prompt, err, informative ? "none: informative" : argv[3]);
    if (!(err <= tol)) failures++;

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
            failures += !tie;
            break;
        }
        matched++;
        const int32_t pos = n_prompt + i;
        if (tessera_decode(cpu.ctx, &ta, 1, pos, 0) || tessera_decode(gpu.ctx, &tb, 1, pos, 0)) {
            printf("FAIL: decode of greedy token %d: %s\n", i, tessera_last_error());
            failures++;
            break;
        }
    }
    printf("greedy: %d of %d steps the same, logit difference up to %.3g\n", matched, n_greedy, seen);
done:
    close_run(&gpu);
    close_run(&cpu);
    tessera_shutdown();
    printf("%s\n", failures ? "FAILED" : "passed");
    return failures ? 1 : 0;
}
