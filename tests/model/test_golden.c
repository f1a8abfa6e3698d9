/*
 * Model goldens through the public API, on every CPU device (ref and each
 * CPU backend plugin found in the build tree):
 *   - the prompt's tokens equal llama.cpp's;
 *   - logits at every prompt position: the golden top-8 (and every logit when
 *     the golden has all_logits) within TOL;
 *   - the greedy continuation equals llama.cpp's.
 * Mode "quant" (quantized weights, where llama.cpp's SIMD kernels round
 * activations slightly differently): prints max and RMS error and requires
 * the greedy tokens to match up to the first step whose golden margin is
 * below what the measured error can move it: twice the prompt logits' max
 * error, or the largest difference between our and the golden
 * best-vs-second margin over the greedy steps so far, whichever is larger.
 * Mode "real" (the real models): the top-8 logits within TOL, and greedy as
 * in "quant" with the near-tie threshold capped at 0.1 (--tie-cap).
 *
 * usage: test_golden MODEL_NAME strict|quant|real [TOL] [--model PATH] [--golden PATH]
 *                    [--device NAME] [-ngl N]
 *   --model     the GGUF file (default ../shared/models/MODEL_NAME.gguf);
 *               a relative path is looked up in the model cache
 *               ($TESSERA_MODEL_CACHE, else ~/.cache/tessera/models)
 *   --golden    the golden file (default ../shared/golden/MODEL_NAME.jsonl),
 *               for goldens kept with the repository (tests/data)
 *   --device    run on that device only (default: every CPU device)
 *   -ngl        layers offloaded to the first non-CPU device of --device
 *   --tie-cap   the cap of the near-tie threshold in mode real (default 0.1)
 *   -fa on|off|auto  flash attention (default: the library's, auto)
 *   -ctk, -ctv  KV cache types (f16, q8_0, ...; default f16)
 *   --steps N   check only the first N greedy steps of each case (the slow
 *               devices: a CPU-emulated GPU decodes a few tokens a second)
 *   --kernels   skip (exit 77) unless the device's description names these
 *               kernels, e.g. "avx512vnni" for "(avx512vnni kernels)": a
 *               level forced by TESSERA_AVX_LEVEL is never raised above
 *               what the CPU has
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "golden.h"
#include "host/host.h"
#include "../logits_util.h"
#include "model_test.h"

typedef struct result {
    double top_err, all_err, rms;
    double margin_err; /* max |our margin - golden margin| over matched greedy steps */
    int matched, needed, n_greedy;
    int tokens_ok;
} result;

static double tie_cap = 0.1;
static tessera_context_params ctx_opts; /* -fa, -ctk, -ctv */

static int run_case(tessera_model *m, const golden_case *g, const char *mode, result *r) {
    memset(r, 0, sizeof *r);
    const int32_t nv = tessera_model_n_vocab(m);
    tessera_token toks[512];
    int32_t n = tessera_tokenize(m, g->prompt, strlen(g->prompt), toks, 512, true, g->special != 0);
    r->tokens_ok = n == g->n_tokens && !memcmp(toks, g->tokens, (size_t)n * sizeof *toks);
    if (!r->tokens_ok) printf("  tokens differ: got %d tokens, golden %d\n", n, g->n_tokens);

    tessera_context_params cp = ctx_opts;
    cp.n_ctx = (uint32_t)(g->n_tokens + g->n_greedy + 1);
    if (cp.n_ctx < 64) cp.n_ctx = 64;
    cp.n_threads = 2;
    tessera_context *ctx = tessera_context_new(m, &cp);
    if (!ctx) {
        printf("  context: %s\n", tessera_last_error());
        return -1;
    }
    /* The golden tokens, so a tokenizer difference does not hide the rest. */
    if (tessera_decode(ctx, g->tokens, g->n_tokens, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
        printf("  decode: %s\n", tessera_last_error());
        tessera_context_free(ctx);
        return -1;
    }
    double sq = 0;
    int64_t cnt = 0;
    const int verbose = getenv("TESSERA_GOLDEN_VERBOSE") != NULL;
    for (int32_t p = 0; p < g->n_tokens; p++) {
        const float *lg = tessera_logits(ctx, p);
        if (verbose)
            for (int k = 0; k < GOLDEN_TOP; k++)
                printf("  pos %d top %d: token %d golden %.4f ours %.4f\n", p, k, g->top[p * GOLDEN_TOP + k].id,
                       g->top[p * GOLDEN_TOP + k].logit, lg[g->top[p * GOLDEN_TOP + k].id]);
        for (int k = 0; k < GOLDEN_TOP; k++) {
            const golden_top *t = &g->top[p * GOLDEN_TOP + k];
            double e = fabs((double)lg[t->id] - t->logit);
            if (e > r->top_err) r->top_err = e;
            if (!g->all) {
                sq += e * e;
                cnt++;
            }
        }
        if (g->all && g->n_vocab == nv)
            for (int32_t i = 0; i < nv; i++) {
                double e = fabs((double)lg[i] - g->all[(size_t)p * (size_t)nv + (size_t)i]);
                if (e > r->all_err) r->all_err = e;
                sq += e * e;
                cnt++;
            }
    }
    r->rms = cnt ? sqrt(sq / (double)cnt) : 0;
    /* A token can only flip where the golden gap between the best and the
     * second-best logit is at most the change of that gap: 2 x the logit
     * error (each of the two logits moves by at most the error). The gap's
     * change is measured too: at every greedy step that matched, our gap vs
     * the golden one (greedy_margin). */
    double err = r->top_err > r->all_err ? r->top_err : r->all_err;
    double gap_err = 2.0 * err;
    r->n_greedy = g->n_greedy;
    r->needed = g->n_greedy;
    const float *lg = tessera_logits(ctx, -1);
    for (int32_t i = 0; i < g->n_greedy; i++) {
        tessera_token tok = argmax(lg, nv);
        if (tok != g->greedy[i]) {
            if (verbose)
                printf("  greedy step %d: token %d (%.4f) where the golden has %d (%.4f, golden margin %.4f)\n", i,
                       tok, lg[tok], g->greedy[i], lg[g->greedy[i]], i < g->n_margin ? g->margin[i] : 0.0);
            /* A different token is tolerated (quant mode) only where the
             * golden itself was a near tie compared with our error. */
            double tie = !strcmp(mode, "real") && gap_err > tie_cap ? tie_cap : gap_err;
            if (strcmp(mode, "strict") != 0 && i < g->n_margin && g->margin[i] < tie) r->needed = i;
            break;
        }
        float second = -INFINITY;
        for (int32_t j = 0; j < nv; j++)
            if (j != tok && lg[j] > second) second = lg[j];
        if (verbose && i < g->n_margin)
            printf("  greedy step %d: token %d, margin %.4f, golden %.4f\n", i, tok, lg[tok] - second, g->margin[i]);
        if (i < g->n_margin) {
            double e = fabs((double)(lg[tok] - second) - g->margin[i]);
            if (e > r->margin_err) r->margin_err = e;
            if (e > gap_err) gap_err = e;
        }
        r->matched++;
        if (tessera_decode(ctx, &tok, 1, g->n_tokens + i, 0) != 0) {
            printf("  decode: %s\n", tessera_last_error());
            tessera_context_free(ctx);
            return -1;
        }
        lg = tessera_logits(ctx, -1);
    }
    tessera_context_free(ctx);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: test_golden MODEL_NAME strict|quant|real [TOL] [--model PATH] [--golden PATH] "
                        "[--device NAME] [-ngl N]\n");
        return 2;
    }
    const char *name = argv[1], *mode = argv[2];
    double tol = 1e-3;
    const char *model_arg = NULL, *golden_arg = NULL, *device = NULL, *kernels = NULL;
    int32_t ngl = 0, steps = -1;
    ctx_opts = tessera_context_default_params();
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model_arg = argv[++i];
        else if (!strcmp(argv[i], "--golden") && i + 1 < argc)
            golden_arg = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--tie-cap") && i + 1 < argc)
            tie_cap = atof(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
            kernels = argv[++i];
        else if (!strcmp(argv[i], "-ngl") && i + 1 < argc)
            ngl = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-fa") && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto")) {
                fprintf(stderr, "test_golden: -fa %s is not on, off or auto\n", v);
                return 2;
            }
            ctx_opts.flash_attn = !strcmp(v, "on") ? TESSERA_FLASH_ATTN_ON
                                  : !strcmp(v, "off") ? TESSERA_FLASH_ATTN_OFF : TESSERA_FLASH_ATTN_AUTO;
        }
        else if ((!strcmp(argv[i], "-ctk") || !strcmp(argv[i], "-ctv")) && i + 1 < argc) {
            int t = tessera_kv_type_from_name(argv[i + 1]);
            if (t < 0) {
                fprintf(stderr, "test_golden: %s %s is not a KV cache type\n", argv[i], argv[i + 1]);
                return 2;
            }
            *(argv[i][3] == 'k' ? &ctx_opts.type_k : &ctx_opts.type_v) = (tessera_kv_type)t;
            i++;
        }
        else
            tol = atof(argv[i]);
    }
    const char *shared = getenv("TESSERA_SHARED");
    const char *build = getenv("TESSERA_BUILD_ROOT");
    if (!shared) shared = "../shared";
    char path[1024], gpath[1024];
    if (model_arg)
        model_cache_path(path, sizeof path, model_arg);
    else
        snprintf(path, sizeof path, "%s/models/%s.gguf", shared, name);
    if (golden_arg)
        snprintf(gpath, sizeof gpath, "%s", golden_arg);
    else
        snprintf(gpath, sizeof gpath, "%s/golden/%s.jsonl", shared, name);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        fprintf(stderr, "FAIL %s: model %s is missing (run scripts/fetch-models.sh)\n", name, path);
        return 1;
    }
    fclose(probe);
    golden_case *cases;
    int n_cases = golden_load(gpath, &cases);
    if (n_cases <= 0) return 1;
    for (int c = 0; steps >= 0 && c < n_cases; c++)
        if (cases[c].n_greedy > steps) cases[c].n_greedy = steps;

    /* The plugins built in this tree, and nothing installed elsewhere. */
    const char *dirs[1] = {build};
    host_options ho = {.plugin_dirs = dirs, .n_plugin_dirs = build ? 1 : 0, .only_plugin_dirs = true};
    if (host_init(&ho) != 0) {
        fprintf(stderr, "host init: %s\n", tessera_last_error());
        return 1;
    }
    tessera_init_params ip = {0};
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "init: %s\n", tessera_last_error());
        return 1;
    }
    int failures = 0, n_dev = 0;
    for (int32_t d = 0; d < host_device_count(); d++) {
        host_device *dev = host_device_get(d);
        if (device ? strncmp(dev->name, device, strlen(dev->name)) != 0 : dev->info.kind != TSR_DEVICE_CPU)
            continue;
        if (kernels) {
            char want[64];
            snprintf(want, sizeof want, "(%s kernels)", kernels);
            if (!dev->info.description || !strstr(dev->info.description, want)) {
                printf("SKIP: %s runs %s, not %s kernels (this CPU lacks them)\n", dev->name,
                       dev->info.description ? dev->info.description : "?", kernels);
                continue;
            }
        }
        n_dev++;
        tessera_model_params mp = tessera_model_default_params();
        mp.devices = device ? device : dev->name;
        mp.n_gpu_layers = ngl;
        tessera_model *m = tessera_model_load(path, &mp);
        if (!m) {
            printf("FAIL %s on %s: %s\n", name, dev->name, tessera_last_error());
            failures++;
            continue;
        }
        for (int c = 0; c < n_cases; c++) {
            result r;
            if (run_case(m, &cases[c], mode, &r) != 0) {
                printf("FAIL %s on %s, case %d\n", name, dev->name, c);
                failures++;
                continue;
            }
            int ok;
            if (!strcmp(mode, "quant"))
                ok = r.tokens_ok && r.matched >= r.needed;
            else if (!strcmp(mode, "real"))
                ok = r.tokens_ok && r.matched >= r.needed && r.top_err <= tol;
            else
                ok = r.tokens_ok && r.top_err <= tol && r.all_err <= tol && r.matched == r.n_greedy;
            printf("%s %s on %s, case %d (%d tokens): tokens %s, top-8 max err %.3g, all-logits max err %.3g, "
                   "RMS %.3g, greedy margin err %.3g, greedy %d/%d matched (%d required)\n",
                   ok ? "ok  " : "FAIL", name, dev->name, c, cases[c].n_tokens, r.tokens_ok ? "same" : "DIFFER",
                   r.top_err, r.all_err, r.rms, r.margin_err, r.matched, r.n_greedy, r.needed);
            failures += !ok;
        }
        tessera_model_free(m);
    }
    printf("%d device(s), tolerance %g (%s)\n", n_dev, tol, mode);
    if (n_dev == 0) {
        printf("SKIP: device %s is not available\n", device ? device : "(any CPU)");
        golden_free(cases, n_cases);
        tessera_shutdown();
        return 77;
    }
    golden_free(cases, n_cases);
    tessera_shutdown();
    return failures ? 1 : 0;
}
