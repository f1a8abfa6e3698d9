/*
 * The decoding API's contract with stories260K on ref: micro-batches give
 * the same logits as one batch, rewinding re-uses the cache prefix, the
 * context-full / bad-token / bad-position / logits-index errors are clear
 * one-line messages and leave the context usable, tokenize / detokenize
 * round-trip, and the F32 cache option works.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "host/host.h"
#include "../logits_util.h"
#include "model_test.h"


static tessera_context *new_ctx(tessera_model *m, uint32_t n_ctx, uint32_t n_batch, tessera_kv_type kv) {
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 1;
    cp.kv_type = kv;
    tessera_context *ctx = tessera_context_new(m, &cp);
    EXPECT(ctx, "context: %s", tessera_last_error());
    return ctx;
}

static void expect_error(int rc, const char *what, const char *needle) {
    EXPECT_ERROR(rc != 0, tessera_last_error(), needle, "%s", what);
}

TEST(test_api) {
    harness_path model = harness_model_file("stories260K");
    const char *path = model.s;
    /* Only the built-in ref backend: nothing is searched for. */
    host_options ho = {.only_plugin_dirs = true};
    REQUIRE(host_init(&ho) == 0, "host init: %s", tessera_last_error());
    tessera_init_params ip = {0};
    REQUIRE(tessera_init(&ip) == 0, "init: %s", tessera_last_error());
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = "ref";
    tessera_model *m = tessera_model_load(path, &mp);
    if (!m) {
        ADD_FAILURE("load: %s", tessera_last_error());
        return;
    }
    const int nv = tessera_model_n_vocab(m);
    printf("model: %s\n", tessera_model_desc(m));
    EXPECT(nv == 512 && tessera_model_n_layer(m) == 5 && tessera_model_n_embd(m) == 64, "model properties");
    EXPECT(!strcmp(tessera_model_arch(m), "llama"), "arch %s", tessera_model_arch(m));
    EXPECT(tessera_model_meta_str(m, "general.architecture") &&
              !strcmp(tessera_model_meta_str(m, "general.architecture"), "llama"),
           "meta_str");
    EXPECT(tessera_model_meta_str(m, "no.such.key") == NULL, "meta_str of a missing key");

    /* Tokens. */
    const char *text = "One day, a girl named Sue found a big box in her room. She";
    tessera_token toks[64];
    int32_t n = tessera_tokenize(m, text, strlen(text), toks, 64, true, false);
    EXPECT(n == 27 && toks[0] == tessera_token_bos(m), "tokenize gave %d tokens", n);
    EXPECT(tessera_tokenize(m, text, strlen(text), toks, 3, true, false) == -27, "too small a buffer");
    char buf[256];
    /* Without BOS the space SentencePiece prefixed is removed again (as in
     * llama.cpp; after a dropped BOS it stays). */
    int32_t len = tessera_detokenize(m, toks + 1, n - 1, buf, sizeof buf, false, false);
    EXPECT(len == (int32_t)strlen(text) && !strcmp(buf, text), "detokenize: '%s'", buf);
    EXPECT(tessera_detokenize(m, toks + 1, n - 1, buf, 4, false, false) == -(int32_t)(strlen(text) + 1),
           "detokenize with a small buffer");
    len = tessera_token_to_piece(m, toks[1], buf, sizeof buf, false);
    EXPECT(len > 0, "token_to_piece");
    EXPECT(tessera_token_to_piece(m, 99999, buf, sizeof buf, false) == INT32_MIN, "bad id piece");
    EXPECT(tessera_token_is_eog(m, tessera_token_eos(m)), "EOS ends generation");

    /* One batch vs micro-batches of 4 and of 1. */
    float *all = malloc((size_t)n * nv * sizeof(float));
    tessera_context *ctx = new_ctx(m, 64, 512, TESSERA_KV_F16);
    EXPECT(tessera_decode(ctx, toks, n, 0, TESSERA_DECODE_ALL_LOGITS) == 0, "decode: %s", tessera_last_error());
    for (int i = 0; i < n; i++) memcpy(all + (size_t)i * nv, tessera_logits(ctx, i), nv * sizeof(float));
    EXPECT(tessera_kv_len(ctx) == n, "kv len %d", tessera_kv_len(ctx));
    tessera_context *small = new_ctx(m, 64, 4, TESSERA_KV_F16);
    EXPECT(tessera_context_n_batch(small) == 4, "n_batch");
    EXPECT(tessera_decode(small, toks, n, 0, TESSERA_DECODE_ALL_LOGITS) == 0, "micro-batches: %s",
           tessera_last_error());
    double d = 0;
    for (int i = 0; i < n; i++) {
        double e = max_diff(all + (size_t)i * nv, tessera_logits(small, i), nv);
        if (e > d) d = e;
    }
    EXPECT(d < 1e-4, "micro-batches of 4 differ by %g", d);
    printf("ok   micro-batches of 4 vs one batch: max diff %.3g\n", d);
    /* Token by token. */
    tessera_kv_truncate(small, 0);
    EXPECT(tessera_kv_len(small) == 0, "truncate to 0");
    for (int i = 0; i < n; i++) EXPECT(tessera_decode(small, &toks[i], 1, i, 0) == 0, "token %d", i);
    d = max_diff(all + (size_t)(n - 1) * nv, tessera_logits(small, -1), nv);
    EXPECT(d < 1e-4, "token by token differs by %g", d);
    printf("ok   token by token vs one batch: max diff %.3g\n", d);
    /* Only the last row is kept without the flag. */
    tessera_kv_truncate(small, 0);
    EXPECT(tessera_decode(small, toks, n, 0, 0) == 0, "decode: %s", tessera_last_error());
    EXPECT(tessera_logits(small, -1) != NULL, "last logits");
    expect_error(tessera_logits(small, 0) ? 0 : -1, "logits of an unkept row", "not kept");
    expect_error(tessera_logits(small, 99) ? 0 : -1, "logits index", "outside");

    /* Rewind: decode the last 5 tokens again from position n-5. */
    EXPECT(tessera_decode(ctx, toks + n - 5, 5, n - 5, 0) == 0, "rewind: %s", tessera_last_error());
    d = max_diff(all + (size_t)(n - 1) * nv, tessera_logits(ctx, -1), nv);
    EXPECT(d < 1e-4 && tessera_kv_len(ctx) == n, "rewind differs by %g", d);
    printf("ok   rewind to position %d: max diff %.3g\n", n - 5, d);

    /* Errors leave the context usable. */
    tessera_context *tiny = new_ctx(m, 32, 512, TESSERA_KV_F16);
    EXPECT(tessera_decode(tiny, toks, n, 0, 0) == 0, "decode: %s", tessera_last_error());
    expect_error(tessera_decode(tiny, toks, n, n, 0), "context full", "context full");
    EXPECT(tessera_kv_len(tiny) == n, "cache after context full: %d", tessera_kv_len(tiny));
    tessera_context_free(tiny);
    expect_error(tessera_decode(ctx, toks, 2, n + 3, 0), "position past the cache", "position");
    tessera_token bad = nv + 3;
    expect_error(tessera_decode(ctx, &bad, 1, n, 0), "token out of range", "out of range");
    expect_error(tessera_decode(ctx, toks, 0, 0, 0), "no tokens", "no tokens");
    EXPECT(tessera_decode(ctx, toks, n, 0, TESSERA_DECODE_ALL_LOGITS) == 0, "decode after errors");
    d = max_diff(all, tessera_logits(ctx, 0), nv);
    EXPECT(d == 0, "decode after errors differs by %g", d);

    /* The F32 cache: close to the F16 one, not identical. */
    tessera_context *f32 = new_ctx(m, 64, 512, TESSERA_KV_F32);
    EXPECT(tessera_decode(f32, toks, n, 0, 0) == 0, "F32 cache decode");
    d = max_diff(all + (size_t)(n - 1) * nv, tessera_logits(f32, -1), nv);
    EXPECT(d > 0 && d < 0.1, "F32 vs F16 cache: %g", d);
    printf("ok   F32 vs F16 cache: max diff %.3g\n", d);

    /* Flash attention (V stored like K) with F16 and BF16 caches: close to
     * the two-MUL_MAT attention, not identical. */
    const tessera_kv_type fa_types[] = {TESSERA_KV_F16, TESSERA_KV_BF16};
    for (int i = 0; i < 2; i++) {
        tessera_context_params fp = tessera_context_default_params();
        fp.n_ctx = 64;
        fp.n_threads = 1;
        fp.type_k = fp.type_v = fa_types[i];
        fp.flash_attn = TESSERA_FLASH_ATTN_ON;
        tessera_context *fa = tessera_context_new(m, &fp);
        EXPECT(fa && tessera_decode(fa, toks, n, 0, 0) == 0, "flash attention %s: %s",
               tessera_kv_type_name(fa_types[i]), tessera_last_error());
        if (fa) {
            d = max_diff(all + (size_t)(n - 1) * nv, tessera_logits(fa, -1), nv);
            EXPECT(d < (i == 0 ? 0.02 : 0.1), "flash attention %s vs F16: %g", tessera_kv_type_name(fa_types[i]), d);
            printf("ok   flash attention, %s cache vs F16 without: max diff %.3g\n", tessera_kv_type_name(fa_types[i]), d);
        }
        tessera_context_free(fa);
    }

    /* Bad parameters. */
    tessera_context_params cp = tessera_context_default_params();
    cp.kv_type = (tessera_kv_type)42;
    expect_error(tessera_context_new(m, &cp) ? 0 : -1, "bad KV type", "KV cache type");
    cp = tessera_context_default_params();
    cp.type_v = TESSERA_KV_Q8_0;
    expect_error(tessera_context_new(m, &cp) ? 0 : -1, "quantized V without flash attention", "-fa on");
    cp.flash_attn = TESSERA_FLASH_ATTN_ON; /* stories260K's heads of 8 hold no 32-value block */
    expect_error(tessera_context_new(m, &cp) ? 0 : -1, "Q8_0 V with heads of 8", "multiple of 32");
    cp = tessera_context_default_params();
    cp.flash_attn = (tessera_flash_attn)9;
    expect_error(tessera_context_new(m, &cp) ? 0 : -1, "bad flash_attn", "flash_attn");
    tessera_model_params bad_mp = tessera_model_default_params();
    bad_mp.devices = "nosuch0";
    expect_error(tessera_model_load(path, &bad_mp) ? 0 : -1, "unknown device", "nosuch0");
    expect_error(tessera_model_load("/nonexistent/model.gguf", NULL) ? 0 : -1, "missing file",
                 "/nonexistent/model.gguf");

    tessera_timings t;
    tessera_context_timings(ctx, &t);
    EXPECT(t.n_prompt > 0 && t.prompt_ms > 0, "timings");

    tessera_context_free(f32);
    tessera_context_free(small);
    tessera_context_free(ctx);
    tessera_model_free(m);
    tessera_shutdown();
    free(all);
}

HARNESS_MAIN("model api", HARNESS_TEST(test_api))
