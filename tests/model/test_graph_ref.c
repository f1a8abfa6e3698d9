/*
 * The llama graph alone on the ref backend (no scheduler, no tokenizer):
 * feed the golden token ids of ../shared/golden/<model>.jsonl and compare the
 * logits at every prompt position and the greedy continuation.
 *
 * usage: test_graph_ref MODEL_NAME [f16|f32] [TOLERANCE]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "golden.h"
#include "gguf/gguf.h"
#include "kv/kv.h"
#include "mini_runner.h"
#include "model/model.h"
#include "util/error.h"
#include "../logits_util.h"

/* Usage: test_graph_ref [MODEL_NAME [f32|f16 [TOL]]] (default stories260K, F16 cache, 1e-3) */
TEST(test_graph_ref) {
    const char *name = harness_argc() > 1 ? harness_arg(1) : "stories260K";
    int kv_f32 = harness_argc() > 2 && !strcmp(harness_arg(2), "f32");
    double tol = harness_argc() > 3 ? atof(harness_arg(3)) : 1e-3;
    harness_path path = harness_model_file(name), gpath = harness_golden_file(name);
    golden_case *cases;
    int n_cases = golden_load(gpath.s, &cases);
    REQUIRE(n_cases > 0, "%s: no golden cases", gpath.s);
    gguf_file *f = gguf_open(path.s);
    REQUIRE(f != NULL, "%s", error_get());
    model_load_params lp = {.gpu_device = -1, .cpu_device = -1};
    model *m = model_load(f, &lp);
    REQUIRE(m != NULL, "%s", error_get());
    const int32_t nv = m->hp.n_vocab;
    for (int c = 0; c < n_cases; c++) {
        golden_case *g = &cases[c];
        kv_cache_params kp = {.n_layer = m->hp.n_layer, .n_ctx = g->n_tokens + g->n_greedy + 1,
                              .n_embd_k = m->hp.head_dim * m->hp.n_head_kv,
                              .n_embd_v = m->hp.head_dim * m->hp.n_head_kv,
                              .dtype_k = kv_f32 ? TSR_DTYPE_F32 : TSR_DTYPE_F16,
                              .dtype_v = kv_f32 ? TSR_DTYPE_F32 : TSR_DTYPE_F16};
        kv_cache *kv = kv_cache_new(&kp);
        float *logits = malloc((size_t)g->n_tokens * (size_t)nv * sizeof(float));
        REQUIRE(kv && logits && mini_forward(m, kv, g->tokens, g->n_tokens, 0, true, logits) == 0,
                "%s case %d: %s", name, c, error_get());
        double top_err = 0, all_err = 0;
        for (int32_t p = 0; p < g->n_tokens; p++) {
            for (int k = 0; k < GOLDEN_TOP; k++) {
                const golden_top *t = &g->top[p * GOLDEN_TOP + k];
                double e = fabs((double)logits[(size_t)p * nv + t->id] - t->logit);
                if (e > top_err) top_err = e;
            }
            if (getenv("GOLDEN_DEBUG")) {
                double pe = 0;
                for (int k = 0; k < GOLDEN_TOP; k++) {
                    const golden_top *t = &g->top[p * GOLDEN_TOP + k];
                    double e = fabs((double)logits[(size_t)p * nv + t->id] - t->logit);
                    if (e > pe) pe = e;
                }
                printf("  pos %d: top-8 err %.3g\n", p, pe);
            }
            if (g->all && g->n_vocab == nv)
                for (int32_t i = 0; i < nv; i++) {
                    double e = fabs((double)logits[(size_t)p * nv + i] - g->all[(size_t)p * nv + i]);
                    if (e > all_err) all_err = e;
                }
        }
        /* Greedy continuation, one token at a time. */
        int32_t tok = argmax(logits + (size_t)(g->n_tokens - 1) * nv, nv);
        int matched = 0;
        for (int32_t i = 0; i < g->n_greedy; i++) {
            if (tok != g->greedy[i]) break;
            matched++;
            REQUIRE(mini_forward(m, kv, &tok, 1, g->n_tokens + i, false, logits) == 0, "%s: %s", name, error_get());
            tok = argmax(logits, nv);
        }
        int ok = top_err <= tol && (!g->all || all_err <= tol) && matched == g->n_greedy;
        printf("%s %s case %d (%d tokens): top-8 max err %.3g, all-logits max err %.3g, greedy %d/%d\n",
               ok ? "ok  " : "FAIL", name, c, g->n_tokens, top_err, all_err, matched, g->n_greedy);
        EXPECT(ok, "%s case %d (line above)", name, c);
        free(logits);
        kv_cache_free(kv);
    }
    model_free(m);
    golden_free(cases, n_cases);
}

HARNESS_MAIN("graph vs goldens", HARNESS_TEST(test_graph_ref))
