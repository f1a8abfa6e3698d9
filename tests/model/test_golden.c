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
 *   --tie-floor the least near-tie threshold in modes quant and real
 *               (default 0): the margin change one rounding flip of an
 *               8-bit activation can make at any step, which the prompt's
 *               error need not show (it flips at one position or another)
 *   -fa on|off|auto  flash attention (default: the library's, auto)
 *   -ctk, -ctv  KV cache types (f16, q8_0, ...; default f16)
 *   --lora PATH SCALE  a LoRA adapter in use (repeatable; the golden made
 *               with llama.cpp's llama_set_adapters_lora: tests/lora)
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

static double tie_cap = 0.1, tie_floor = 0.0;
static tessera_context_params ctx_opts; /* -fa, -ctk, -ctv */
enum { MAX_LORA = 8 };
static const char *lora_paths[MAX_LORA]; /* --lora PATH SCALE */
static float lora_scales[MAX_LORA];
static tessera_lora *loras[MAX_LORA]; /* of the model being tested */
static int n_lora;

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
    if (!ctx || tessera_context_set_loras(ctx, loras, lora_scales, n_lora) != 0) {
        printf("  context: %s\n", tessera_last_error());
        tessera_context_free(ctx);
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
            if (tie < tie_floor) tie = tie_floor;
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

/* The command line: test_golden MODEL_NAME strict|quant|real [TOL] [--model M] [--golden PATH]
 * [--device NAME] [--kernels K] [--tie-cap X] [--tie-floor X] [-ngl N] [--cpu-moe] [--steps N]
 * [-fa on|off|auto] [-ctk T] [-ctv T];
 * sets tie_cap, tie_floor and ctx_opts. */
typedef struct golden_args {
    const char *name, *mode, *model_arg, *golden_arg, *device, *kernels;
    double tol;
    int32_t ngl, steps, n_cpu_moe;
} golden_args;

static void parse_args(golden_args *a) {
    REQUIRE(harness_argc() >= 3, "usage: test_golden MODEL_NAME strict|quant|real [TOL] [--model M] "
                                 "[--golden PATH] [--device NAME] [-ngl N]");
    *a = (golden_args){.name = harness_arg(1), .mode = harness_arg(2), .tol = 1e-3, .steps = -1};
    ctx_opts = tessera_context_default_params();
    for (int i = 3; i < harness_argc(); i++) {
        const char *arg = harness_arg(i), *next = harness_arg(i + 1);
        if (!strcmp(arg, "--model") && next)
            a->model_arg = harness_arg(++i);
        else if (!strcmp(arg, "--golden") && next)
            a->golden_arg = harness_arg(++i);
        else if (!strcmp(arg, "--device") && next)
            a->device = harness_arg(++i);
        else if (!strcmp(arg, "--tie-cap") && next)
            tie_cap = atof(harness_arg(++i));
        else if (!strcmp(arg, "--tie-floor") && next)
            tie_floor = atof(harness_arg(++i));
        else if (!strcmp(arg, "--kernels") && next)
            a->kernels = harness_arg(++i);
        else if (!strcmp(arg, "-ngl") && next)
            a->ngl = atoi(harness_arg(++i));
        else if (!strcmp(arg, "--lora") && next && harness_arg(i + 2)) {
            REQUIRE(n_lora < MAX_LORA, "more than %d --lora", MAX_LORA);
            lora_paths[n_lora] = harness_arg(++i);
            lora_scales[n_lora++] = (float)atof(harness_arg(++i));
        } else if (!strcmp(arg, "--steps") && next)
            a->steps = atoi(harness_arg(++i));
        else if (!strcmp(arg, "--cpu-moe"))
            a->n_cpu_moe = TESSERA_CPU_MOE_ALL;
        else if (!strcmp(arg, "-fa") && next) {
            const char *v = harness_arg(++i);
            REQUIRE(!strcmp(v, "on") || !strcmp(v, "off") || !strcmp(v, "auto"), "-fa %s is not on, off or auto", v);
            ctx_opts.flash_attn = !strcmp(v, "on") ? TESSERA_FLASH_ATTN_ON
                                  : !strcmp(v, "off") ? TESSERA_FLASH_ATTN_OFF : TESSERA_FLASH_ATTN_AUTO;
        } else if ((!strcmp(arg, "-ctk") || !strcmp(arg, "-ctv")) && next) {
            int t = tessera_kv_type_from_name(next);
            REQUIRE(t >= 0, "%s %s is not a KV cache type", arg, next);
            *(arg[3] == 'k' ? &ctx_opts.type_k : &ctx_opts.type_v) = (tessera_kv_type)t;
            i++;
        } else
            a->tol = atof(arg);
    }
}

/* The model's cases on each device asked for (every CPU device by default). */
TEST(test_golden) {
    golden_args a;
    parse_args(&a);
    const char *name = a.name, *mode = a.mode, *device = a.device, *kernels = a.kernels;
    const double tol = a.tol;
    harness_path path = harness_model_file(a.model_arg ? a.model_arg : name);
    harness_path gpath = a.golden_arg ? harness_file(a.golden_arg) : harness_golden_file(name);
    golden_case *cases;
    int n_cases = golden_load(gpath.s, &cases);
    REQUIRE(n_cases > 0, "%s: no golden cases", gpath.s);
    for (int c = 0; a.steps >= 0 && c < n_cases; c++)
        if (cases[c].n_greedy > a.steps) cases[c].n_greedy = a.steps;

    harness_host_start();
    int n_dev = 0;
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
        mp.n_gpu_layers = a.ngl;
        mp.n_cpu_moe = a.n_cpu_moe;
        tessera_model *m = tessera_model_load(path.s, &mp);
        if (!m) {
            ADD_FAILURE("%s on %s: %s", name, dev->name, tessera_last_error());
            continue;
        }
        for (int i = 0; i < n_lora; i++) {
            harness_path lp = harness_file(lora_paths[i]);
            loras[i] = tessera_lora_load(m, lp.s);
            REQUIRE(loras[i], "%s", tessera_last_error());
        }
        for (int c = 0; c < n_cases; c++) {
            result r;
            if (run_case(m, &cases[c], mode, &r) != 0) {
                ADD_FAILURE("%s on %s, case %d", name, dev->name, c);
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
            EXPECT(ok, "%s on %s, case %d (line above)", name, dev->name, c);
        }
        tessera_model_free(m);
    }
    printf("%d device(s), tolerance %g (%s)\n", n_dev, tol, mode);
    golden_free(cases, n_cases);
    tessera_shutdown();
    if (n_dev == 0) harness_skip("device %s is not available", device ? device : "(any CPU)");
}

HARNESS_MAIN("golden", HARNESS_TEST(test_golden))
