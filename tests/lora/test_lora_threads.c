/*
 * test_lora_threads — threads sharing one model load and free LoRA
 * adapters and read its metadata at the same time, while another thread
 * decodes with its own context and an adapter of its own: every load
 * succeeds, and the decoding thread's logits are the ones it gets alone.
 *
 * The model's adapter list and metadata cache change after loading
 * (tessera_lora_load, tessera_lora_free, tessera_model_meta_str), so they
 * are guarded by the model's lock; this is the test for that (meant for
 * ASan builds too, where an unguarded realloc of the list shows).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "harness.h"

enum { N_LOADERS = 3, N_LOADS = 12, MAX_TOKENS = 64 };

typedef struct loader {
    tessera_model *model;
    const char *adapter;
    int32_t n_weights; /* of every adapter it loaded (-1: they differed) */
    char error[256];
} loader;

static void *load_free(void *arg) {
    loader *l = arg;
    tessera_lora *held[N_LOADS];
    l->n_weights = 0;
    for (int i = 0; i < N_LOADS; i++) {
        held[i] = tessera_lora_load(l->model, l->adapter);
        if (!held[i]) {
            snprintf(l->error, sizeof l->error, "load %d: %s", i, tessera_last_error());
            for (int j = 0; j < i; j++) tessera_lora_free(held[j]);
            return NULL;
        }
        const int32_t n = tessera_lora_n_weights(held[i]);
        l->n_weights = i == 0 || n == l->n_weights ? n : -1;
        if (!tessera_model_meta_str(l->model, "general.architecture")) {
            snprintf(l->error, sizeof l->error, "general.architecture not read");
            return NULL;
        }
        if (i % 3 == 2) { /* free some while the other threads load */
            tessera_lora_free(held[i - 1]);
            held[i - 1] = NULL;
        }
    }
    for (int i = 0; i < N_LOADS; i++) tessera_lora_free(held[i]);
    return NULL;
}

typedef struct decoder {
    tessera_context *ctx;
    const tessera_token *prompt;
    int32_t n_prompt, n_vocab;
    float *logits;
    char error[256];
} decoder;

static void *decode_prompt(void *arg) {
    decoder *d = arg;
    if (tessera_kv_truncate(d->ctx, 0) != 0 ||
        tessera_decode(d->ctx, d->prompt, d->n_prompt, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
        snprintf(d->error, sizeof d->error, "decode: %s", tessera_last_error());
        return NULL;
    }
    for (int32_t i = 0; i < d->n_prompt; i++)
        memcpy(d->logits + (size_t)i * d->n_vocab, tessera_logits(d->ctx, i), (size_t)d->n_vocab * sizeof(float));
    return NULL;
}

TEST(test_lora_threads) {
    REQUIRE(harness_arg(1) && harness_arg(2), "usage: test_lora_threads BASE.gguf ADAPTER.gguf");
    harness_path base = harness_file(harness_arg(1));
    harness_path adapter = harness_file(harness_arg(2));
    harness_host_start();
    tessera_model *m = harness_model_load(base.s, "ref", NULL);
    tessera_lora *own = tessera_lora_load(m, adapter.s);
    REQUIRE(own, "adapter: %s", tessera_last_error());
    const char *text = "One day, a girl named Sue found a big box in her room.";
    tessera_token prompt[MAX_TOKENS];
    const int32_t n_prompt = tessera_tokenize(m, text, strlen(text), prompt, MAX_TOKENS, true, false);
    REQUIRE(n_prompt >= 2, "tokenize gave %d tokens", n_prompt);
    const int32_t nv = tessera_model_n_vocab(m);
    const size_t bytes = (size_t)n_prompt * (size_t)nv * sizeof(float);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 1;
    decoder d = {.ctx = tessera_context_new(m, &cp), .prompt = prompt, .n_prompt = n_prompt, .n_vocab = nv,
                 .logits = malloc(bytes)};
    float *alone = malloc(bytes);
    REQUIRE(d.ctx && d.logits && alone, "context: %s", tessera_last_error());
    const float scale = 1.0f;
    REQUIRE(tessera_context_set_loras(d.ctx, &own, &scale, 1) == 0, "set_loras: %s", tessera_last_error());
    decode_prompt(&d);
    REQUIRE(!d.error[0], "alone: %s", d.error);
    memcpy(alone, d.logits, bytes);
    memset(d.logits, 0, bytes);

    loader ls[N_LOADERS];
    pthread_t th[N_LOADERS + 1];
    for (int i = 0; i < N_LOADERS; i++) {
        ls[i] = (loader){.model = m, .adapter = adapter.s};
        REQUIRE(pthread_create(&th[i], NULL, load_free, &ls[i]) == 0, "pthread_create");
    }
    REQUIRE(pthread_create(&th[N_LOADERS], NULL, decode_prompt, &d) == 0, "pthread_create");
    for (int i = 0; i <= N_LOADERS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_LOADERS; i++) {
        EXPECT(!ls[i].error[0], "loader %d: %s", i, ls[i].error);
        EXPECT(ls[i].n_weights == tessera_lora_n_weights(own), "loader %d: adapters of %d weights, want %d", i,
               ls[i].n_weights, tessera_lora_n_weights(own));
    }
    EXPECT(!d.error[0], "decoding beside the loaders: %s", d.error);
    EXPECT(memcmp(d.logits, alone, bytes) == 0, "the logits beside the loaders differ from alone");
    printf("%d threads loaded and freed %d adapters each beside a decoding context: logits as alone\n", N_LOADERS,
           N_LOADS);
    tessera_context_free(d.ctx);
    free(d.logits);
    free(alone);
    tessera_model_free(m); /* frees `own` */
    tessera_shutdown();
}

HARNESS_MAIN("lora threads", HARNESS_TEST(test_lora_threads))
