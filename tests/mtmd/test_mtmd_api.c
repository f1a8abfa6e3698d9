/*
 * tessera_mtmd.h end to end on the synthetic LLaVA pair against llama.cpp's
 * libmtmd (tests/data/mm): the chunks' tokens as mtmd_tokenize makes them,
 * the image's cost before encoding, greedy text after the image (up to
 * near-ties), the cache by content hash, and the API's errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <tessera/tessera_mtmd.h>

#include "harness.h"
#include "media/media.h"

static cJSON *golden(const char *path) {
    void *d;
    size_t n;
    if (media_read_file(path, 64 << 20, &d, &n) != 0) return NULL;
    ((char *)d)[n] = 0;
    cJSON *j = cJSON_Parse(d);
    free(d);
    return j;
}

static void run_golden(const char *devices, const char *image, const char *gold) {
    tessera_model *m = harness_model_load(MM_BUILD_DIR "/synth-llava-f32.gguf", devices, NULL);
    REQUIRE(m, "model");
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 512;
    tessera_context *ctx = harness_context(m, &cp);
    tessera_mtmd *mm = tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-llava-f32.gguf", NULL);
    REQUIRE(mm, "%s", tessera_last_error());
    EXPECT_STR(tessera_mtmd_projector_type(mm), "mlp", "projector");
    tessera_media *img = tessera_media_from_file(image);
    REQUIRE(img, "%s", tessera_last_error());
    EXPECT(tessera_mtmd_media_n_tokens(mm, img) == 16, "cost %d", tessera_mtmd_media_n_tokens(mm, img));
    tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(mm, TESSERA_MEDIA_MARKER "Once upon a time", &img, 1, true, true);
    REQUIRE(ch, "%s", tessera_last_error());
    cJSON *g = golden(gold);
    REQUIRE(g, "golden %s", gold);
    cJSON *gch = cJSON_GetObjectItem(g, "chunks");
    EXPECT(tessera_mtmd_chunks_count(ch) == cJSON_GetArraySize(gch), "%d chunks vs %d",
           tessera_mtmd_chunks_count(ch), cJSON_GetArraySize(gch));
    for (int i = 0; i < tessera_mtmd_chunks_count(ch) && i < cJSON_GetArraySize(gch); i++) {
        cJSON *c = cJSON_GetArrayItem(gch, i);
        cJSON *toks = cJSON_GetObjectItem(c, "tokens");
        if (toks) {
            int32_t n;
            const tessera_token *t = tessera_mtmd_chunk_tokens(ch, i, &n);
            EXPECT(n == cJSON_GetArraySize(toks), "chunk %d: %d tokens vs %d", i, n, cJSON_GetArraySize(toks));
            for (int k = 0; k < n && k < cJSON_GetArraySize(toks); k++)
                EXPECT(t[k] == cJSON_GetArrayItem(toks, k)->valueint, "chunk %d token %d", i, k);
        } else {
            EXPECT(tessera_mtmd_chunk_type(ch, i) == TESSERA_CHUNK_IMAGE, "chunk %d is the image", i);
            EXPECT(tessera_mtmd_chunk_n_tokens(ch, i) == cJSON_GetObjectItem(c, "n_tokens")->valueint,
                   "image rows");
        }
    }
    int32_t n_past = 0;
    EXPECT(tessera_mtmd_eval_chunks(mm, ctx, ch, 0, &n_past) == 0, "%s", tessera_last_error());
    EXPECT(n_past == cJSON_GetObjectItem(g, "n_past")->valueint, "n_past %d", n_past);
    cJSON *greedy = cJSON_GetObjectItem(g, "greedy"), *margin = cJSON_GetObjectItem(g, "greedy_margin");
    int n_vocab = tessera_model_n_vocab(m), agreed = 0;
    for (int i = 0; i < cJSON_GetArraySize(greedy); i++) {
        const float *lg = tessera_logits(ctx, -1);
        REQUIRE(lg, "%s", tessera_last_error());
        int best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        int want = cJSON_GetArrayItem(greedy, i)->valueint;
        if (best != want) {
            /* a near-tie in llama.cpp's logits may go either way: stop there */
            double gap = cJSON_GetArrayItem(margin, i)->valuedouble;
            EXPECT(gap < 0.01, "greedy token %d: %d vs llama.cpp's %d (its margin %.4f)", i, best, want, gap);
            break;
        }
        agreed++;
        tessera_token t = best;
        REQUIRE(tessera_decode(ctx, &t, 1, n_past++, 0) == 0, "%s", tessera_last_error());
    }
    printf("%s on %s: %d of %d greedy tokens as llama.cpp's\n", image, devices, agreed, cJSON_GetArraySize(greedy));
    EXPECT(agreed >= 8, "only %d greedy tokens agree", agreed);
    /* the same image again: from the cache, the same rows */
    int img_chunk = 1;
    const float *a = tessera_mtmd_encode_chunk(mm, ch, img_chunk);
    EXPECT(a && tessera_mtmd_last_encode_ms(mm) == 0, "cached encode");
    tessera_media *again = tessera_media_from_file(image);
    EXPECT_STR(tessera_media_hash(again), tessera_media_hash(img), "content hash");
    tessera_media_free(again);
    cJSON_Delete(g);
    tessera_mtmd_chunks_free(ch);
    tessera_media_free(img);
    tessera_mtmd_free(mm);
    tessera_context_free(ctx);
    tessera_model_free(m);
}

TEST(greedy_after_image) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    run_golden("ref", MM_DATA_DIR "/sq56.png", MM_DATA_DIR "/synth-llava-sq56.json");
    const char *cpu = harness_cpu_plugin();
    if (cpu) run_golden(cpu, MM_DATA_DIR "/sq56.png", MM_DATA_DIR "/synth-llava-sq56.json");
    tessera_shutdown();
}

TEST(errors) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    tessera_model *m = harness_model_load(MM_BUILD_DIR "/synth-llava-f32.gguf", "ref", NULL);
    REQUIRE(m, "model");
    tessera_mtmd *mm = tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-llava-f32.gguf", NULL);
    REQUIRE(mm, "%s", tessera_last_error());
    tessera_media *img = tessera_media_from_file(MM_DATA_DIR "/sq56.png");
    REQUIRE(img, "%s", tessera_last_error());
    EXPECT_ERROR(tessera_mtmd_tokenize(mm, "no marker", &img, 1, true, true) == NULL, tessera_last_error(),
                 "0 media markers", "marker count");
    EXPECT_ERROR(tessera_media_from_file(MM_DATA_DIR "/missing.png") == NULL, tessera_last_error(), "missing.png",
                 "missing file");
    EXPECT_ERROR(tessera_media_from_buffer("GIF89a", 6, "tiny.gif") == NULL, tessera_last_error(), "tiny.gif",
                 "truncated gif");
    EXPECT_ERROR(tessera_mtmd_load(m, MM_BUILD_DIR "/synth-llava-f32.gguf", NULL) == NULL, tessera_last_error(),
                 "not an mmproj", "text model as mmproj");
    tessera_media_free(img);
    tessera_mtmd_free(mm);
    tessera_model_free(m);
    tessera_shutdown();
}

HARNESS_MAIN("mtmd_api", HARNESS_TEST(greedy_after_image), HARNESS_TEST(errors))
