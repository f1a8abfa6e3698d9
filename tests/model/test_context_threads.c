/*
 * test_context_threads — two contexts with different thread counts decode
 * at the same time, each on its own thread, and get exactly the logits each
 * gets alone.
 *
 * The thread count is the context's (tessera_context_params.n_threads,
 * tessera_context_set_threads): it reaches the CPU plugin's queues through
 * the scheduler (ABI 1.1 set_n_threads), not a process-wide field each
 * decode rewrote. Runs synth-s-Q4_0 (quantized products) on the first CPU
 * plugin device (cpu-avx0 or cpu-neon0; skipped without one), with the
 * plugin's FORCE_THREADS set so even these small nodes use every thread.
 * Meant for ASan and TSan builds as well: the concurrent rounds are where a
 * shared count or pool would race.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"
#include "host/host.h"

enum { N_STEPS = 8, N_ROUNDS = 3, MAX_TOKENS = 64 };

typedef struct run {
    tessera_context *ctx;
    const tessera_token *prompt;
    int32_t n_prompt;
    int32_t n_vocab;
    float *logits; /* (n_prompt + N_STEPS) rows of n_vocab */
    char error[256];
} run;


/* The prompt with every row's logits, then N_STEPS greedy tokens one at a
 * time; every row of logits goes to r->logits. */
static void *decode_run(void *arg) {
    run *r = arg;
    const int32_t nv = r->n_vocab;
    r->error[0] = 0;
    if (tessera_kv_truncate(r->ctx, 0) != 0 ||
        tessera_decode(r->ctx, r->prompt, r->n_prompt, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
        snprintf(r->error, sizeof r->error, "prompt: %s", tessera_last_error());
        return NULL;
    }
    for (int32_t i = 0; i < r->n_prompt; i++)
        memcpy(r->logits + (size_t)i * nv, tessera_logits(r->ctx, i), (size_t)nv * sizeof(float));
    for (int32_t s = 0; s < N_STEPS; s++) {
        const float *last = r->logits + (size_t)(r->n_prompt + s - 1) * nv;
        tessera_token next = 0;
        for (int32_t v = 1; v < nv; v++)
            if (last[v] > last[next]) next = v;
        if (tessera_decode(r->ctx, &next, 1, r->n_prompt + s, 0) != 0) {
            snprintf(r->error, sizeof r->error, "step %d: %s", s, tessera_last_error());
            return NULL;
        }
        memcpy(r->logits + (size_t)(r->n_prompt + s) * nv, tessera_logits(r->ctx, -1), (size_t)nv * sizeof(float));
    }
    return NULL;
}

TEST(test_context_threads) {
    harness_path path = harness_model_file("synth-s-Q4_0");
    harness_host_start();
    const char *device = NULL, *build = getenv("TESSERA_BUILD_ROOT");
    for (int32_t d = 0; d < host_device_count() && !device; d++) {
        const char *name = host_device_get(d)->name;
        if (!strcmp(name, "cpu-avx0") || !strcmp(name, "cpu-neon0")) device = name;
    }
    if (!device)
        harness_skip("no CPU plugin device (cpu-avx0, cpu-neon0) in %s", build ? build : "(no TESSERA_BUILD_ROOT)");
    tessera_model *m = harness_model_load(path.s, device, NULL);
    const char *text = "One day, a girl named Sue found a big box in her room. She";
    tessera_token prompt[MAX_TOKENS];
    int32_t n_prompt = tessera_tokenize(m, text, strlen(text), prompt, MAX_TOKENS, true, false);
    REQUIRE(n_prompt >= 2, "tokenize gave %d tokens", n_prompt);
    const int32_t nv = tessera_model_n_vocab(m);
    const size_t rows = (size_t)(n_prompt + N_STEPS), bytes = rows * (size_t)nv * sizeof(float);

    /* context 0: 1 thread; context 1: 3 threads (set after creation, the
     * other way a context gets its count) */
    run runs[2];
    float *alone[2];
    for (int c = 0; c < 2; c++) {
        tessera_context_params cp = tessera_context_default_params();
        cp.n_ctx = 128;
        cp.n_threads = 1;
        runs[c] = (run){.prompt = prompt, .n_prompt = n_prompt, .n_vocab = nv, .logits = calloc(rows, (size_t)nv * 4)};
        runs[c].ctx = tessera_context_new(m, &cp);
        alone[c] = calloc(rows, (size_t)nv * 4);
        REQUIRE(runs[c].ctx && runs[c].logits && alone[c], "context: %s", tessera_last_error());
    }
    REQUIRE(tessera_context_set_threads(runs[1].ctx, 3) == 0, "set_threads: %s", tessera_last_error());
    printf("model %s on %s, %d prompt tokens + %d steps; contexts with 1 and 3 threads\n", tessera_model_desc(m),
           device, n_prompt, N_STEPS);

    for (int c = 0; c < 2; c++) {
        decode_run(&runs[c]);
        EXPECT(!runs[c].error[0], "alone, context %d: %s", c, runs[c].error);
        memcpy(alone[c], runs[c].logits, bytes);
    }
    const int failures_before = harness_failures();
    for (int round = 0; round < N_ROUNDS && harness_failures() == failures_before; round++) {
        pthread_t th[2];
        for (int c = 0; c < 2; c++) memset(runs[c].logits, 0, bytes);
        for (int c = 0; c < 2; c++)
            REQUIRE(pthread_create(&th[c], NULL, decode_run, &runs[c]) == 0, "pthread_create");
        for (int c = 0; c < 2; c++) pthread_join(th[c], NULL);
        for (int c = 0; c < 2; c++) {
            char label[64];
            snprintf(label, sizeof label, "round %d, context %d (%d thread%s)", round, c, c ? 3 : 1, c ? "s" : "");
            if (runs[c].error[0]) ADD_FAILURE("%s: %s", label, runs[c].error);
            else if (memcmp(runs[c].logits, alone[c], bytes) != 0)
                ADD_FAILURE("%s: logits differ from the same context decoding alone", label);
            else printf("ok   %s: the logits it gets alone\n", label);
        }
    }
    for (int c = 0; c < 2; c++) {
        tessera_context_free(runs[c].ctx);
        free(runs[c].logits);
        free(alone[c]);
    }
    tessera_model_free(m);
    tessera_shutdown();
}

HARNESS_MAIN("context threads", HARNESS_TEST(test_context_threads))
