/*
 * tessera_mtmd.h end to end on the synthetic LLaVA and Gemma 3 pairs against
 * llama.cpp's libmtmd (tests/data/mm): the chunks' tokens as mtmd_tokenize
 * makes them (Gemma 3's <start_of_image> / <end_of_image> around the image),
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

/* family: "llava" (projector mlp), "gemma3", "idefics3" or
 * "idefics3-1tile" (the idefics3 text model, the mmproj that does not
 * tile); causal_media forces the
 * image's rows causal where the projector says otherwise (the check that
 * gemma3's two-way attention is what makes the greedy text agree). Returns
 * the greedy tokens that agree with llama.cpp's; *logit_err (if the golden
 * has them) the largest difference from llama.cpp's logits after the prompt. */
static int run_golden(const char *family, const char *devices, const char *image, const char *gold,
                      bool causal_media, double *logit_err) {
    char model_path[512], proj_path[512];
    const bool gemma3 = !strcmp(family, "gemma3"), idefics3 = !strncmp(family, "idefics3", 8);
    snprintf(model_path, sizeof model_path, "%s/synth-%s-f32.gguf", MM_BUILD_DIR, idefics3 ? "idefics3" : family);
    snprintf(proj_path, sizeof proj_path, "%s/mmproj-synth-%s-f32.gguf", MM_BUILD_DIR, family);
    const bool qwen = !strcmp(family, "qwen2vl");
    tessera_model *m = harness_model_load(model_path, devices, NULL);
    REQUIRE(m, "model");
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 512;
    tessera_context *ctx = harness_context(m, &cp);
    tessera_mtmd *mm = tessera_mtmd_load(m, proj_path, NULL);
    REQUIRE(mm, "%s", tessera_last_error());
    EXPECT_STR(tessera_mtmd_projector_type(mm),
               gemma3 ? "gemma3" : qwen ? "qwen2.5vl_merger" : idefics3 ? "idefics3" : "mlp", "projector");
    EXPECT(tessera_mtmd_decode_flags(mm) == (gemma3 ? TESSERA_DECODE_NON_CAUSAL : 0u), "decode flags");
    tessera_media *img = tessera_media_from_file(image);
    REQUIRE(img, "%s", tessera_last_error());
    tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(mm, TESSERA_MEDIA_MARKER "Once upon a time", &img, 1, true, true);
    REQUIRE(ch, "%s", tessera_last_error());
    cJSON *g = golden(gold);
    REQUIRE(g, "golden %s", gold);
    cJSON *gch = cJSON_GetObjectItem(g, "chunks");
    /* the image's cost: libmtmd's positions (its rows, all its tiles', and
     * the text around them) less those of the prompt's text alone */
    int cost = 0;
    for (int i = 0; i < cJSON_GetArraySize(gch); i++) {
        cJSON *c = cJSON_GetArrayItem(gch, i), *n = cJSON_GetObjectItem(c, "n_tokens");
        cost += n ? n->valueint : cJSON_GetArraySize(cJSON_GetObjectItem(c, "tokens"));
    }
    tessera_token text[64];
    cost -= tessera_tokenize(m, "Once upon a time", 16, text, 64, true, true);
    EXPECT(tessera_mtmd_media_n_tokens(mm, img) == cost, "cost %d vs llama.cpp's %d",
           tessera_mtmd_media_n_tokens(mm, img), cost);
    printf("%s: the image costs %d positions as in llama.cpp's chunks\n", family, cost);
    EXPECT(tessera_mtmd_chunks_count(ch) == cJSON_GetArraySize(gch), "%d chunks vs %d",
           tessera_mtmd_chunks_count(ch), cJSON_GetArraySize(gch));
    int pos_skip = 0; /* rows the cache counts that libmtmd's positions do not */
    for (int i = 0; i < tessera_mtmd_chunks_count(ch) && i < cJSON_GetArraySize(gch); i++) {
        cJSON *c = cJSON_GetArrayItem(gch, i);
        cJSON *toks = cJSON_GetObjectItem(c, "tokens");
        if (toks) {
            int32_t n;
            const tessera_token *t = tessera_mtmd_chunk_tokens(ch, i, &n);
            EXPECT(n == cJSON_GetArraySize(toks), "chunk %d: %d tokens vs %d", i, n, cJSON_GetArraySize(toks));
            EXPECT(tessera_mtmd_chunk_medium(ch, i) == -1, "chunk %d is text", i);
            for (int k = 0; k < n && k < cJSON_GetArraySize(toks); k++)
                EXPECT(t[k] == cJSON_GetArrayItem(toks, k)->valueint, "chunk %d token %d", i, k);
        } else {
            /* its cost before encoding, and the positions it moves text on
             * by (libmtmd's n_pos: a qwen grid's longer side) */
            const int n_tok = cJSON_GetObjectItem(c, "n_tokens")->valueint, n_pos = cJSON_GetObjectItem(c, "n_pos")->valueint;
            EXPECT(tessera_mtmd_chunk_type(ch, i) == TESSERA_CHUNK_IMAGE, "chunk %d is the image", i);
            EXPECT(tessera_mtmd_chunk_n_tokens(ch, i) == n_tok, "image rows");
            int32_t gx = 0, gy = 0;
            EXPECT(tessera_mtmd_chunk_grid(mm, ch, i, &gx, &gy) == 0, "%s", tessera_last_error());
            EXPECT(gx * gy == n_tok && (gx > gy ? gx : gy) == n_pos, "grid %dx%d: %d rows, llama.cpp's n_pos %d",
                   gx, gy, n_tok, n_pos);
            pos_skip += n_tok - n_pos;
            EXPECT(tessera_mtmd_chunk_medium(ch, i) == 0, "chunk %d shows medium 0", i);
        }
    }
    int32_t n_past = 0;
    if (causal_media) { /* eval_chunks by hand, the image's rows causal */
        for (int i = 0; i < tessera_mtmd_chunks_count(ch); i++) {
            int32_t nt, cn = tessera_mtmd_chunk_n_tokens(ch, i);
            const tessera_token *t = tessera_mtmd_chunk_tokens(ch, i, &nt);
            const float *rows = t ? NULL : tessera_mtmd_encode_chunk(mm, ch, i);
            /* qwen2vl: the rows at plain 1-D positions, not their grid's */
            EXPECT((t ? tessera_decode(ctx, t, cn, n_past, 0) : tessera_decode_embd(ctx, rows, cn, n_past, 0)) == 0,
                   "%s", tessera_last_error());
            n_past += cn;
        }
    } else {
        EXPECT(tessera_mtmd_eval_chunks(mm, ctx, ch, 0, &n_past) == 0, "%s", tessera_last_error());
    }
    EXPECT(n_past - pos_skip == cJSON_GetObjectItem(g, "n_past")->valueint, "n_past %d (%d in libmtmd's positions)",
           n_past, n_past - pos_skip);
    cJSON *greedy = cJSON_GetObjectItem(g, "greedy"), *margin = cJSON_GetObjectItem(g, "greedy_margin");
    int n_vocab = tessera_model_n_vocab(m), agreed = 0;
    cJSON *l0 = cJSON_GetObjectItem(g, "logits0");
    if (l0 && logit_err) {
        const float *lg = tessera_logits(ctx, -1);
        REQUIRE(lg && cJSON_GetArraySize(l0) == n_vocab, "logits0");
        double worst = 0;
        for (int v = 0; v < n_vocab; v++) {
            double d = fabs(lg[v] - cJSON_GetArrayItem(l0, v)->valuedouble);
            if (d > worst) worst = d;
        }
        *logit_err = worst;
        printf("%s on %s%s: logits after the prompt within %.5f of llama.cpp's\n", image, devices,
               causal_media ? (qwen ? " (image rows at 1-D positions)" : " (image rows causal)") : "", worst);
    }
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
            if (!causal_media)
                EXPECT(gap < 0.01, "greedy token %d: %d vs llama.cpp's %d (its margin %.4f)", i, best, want, gap);
            break;
        }
        agreed++;
        tessera_token t = best;
        REQUIRE(tessera_decode(ctx, &t, 1, n_past++, 0) == 0, "%s", tessera_last_error());
    }
    printf("%s on %s%s: %d of %d greedy tokens as llama.cpp's\n", image, devices,
           causal_media ? (qwen ? " (image rows at 1-D positions)" : " (image rows causal)") : "", agreed,
           cJSON_GetArraySize(greedy));
    if (!causal_media) EXPECT(agreed >= 8, "only %d greedy tokens agree", agreed);
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
    return agreed;
}

TEST(greedy_after_image) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    run_golden("llava", "ref", MM_DATA_DIR "/sq56.png", MM_DATA_DIR "/synth-llava-sq56.json", false, NULL);
    const char *cpu = harness_cpu_plugin();
    if (cpu) run_golden("llava", cpu, MM_DATA_DIR "/sq56.png", MM_DATA_DIR "/synth-llava-sq56.json", false, NULL);
    tessera_shutdown();
}

TEST(greedy_after_image_gemma3) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    /* the image's rows read both ways, as llama.cpp decodes them: its
     * logits, and measurably not those of causal rows */
    double err = 1e9, err_causal = 0;
    run_golden("gemma3", "ref", MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-gemma3-sq224.json", false, &err);
    run_golden("gemma3", "ref", MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-gemma3-sq224.json", true, &err_causal);
    EXPECT(err < 1e-3, "logits %.5f from llama.cpp's", err);
    EXPECT(err_causal > 10 * err, "causal image rows: logits %.5f from llama.cpp's (two-way: %.5f)", err_causal, err);
    const char *cpu = harness_cpu_plugin();
    if (cpu) {
        run_golden("gemma3", cpu, MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-gemma3-sq224.json", false, &err);
        EXPECT(err < 1e-3, "%s: logits %.5f from llama.cpp's", cpu, err);
    }
    tessera_shutdown();
}

TEST(greedy_after_image_idefics3) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    /* 300x180: 3x2 tiles and the global view, text between them */
    double err = 1e9;
    run_golden("idefics3", "ref", MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-idefics3-wide.json", false, &err);
    EXPECT(err < 1e-3, "logits %.5f from llama.cpp's", err);
    /* an mmproj that does not tile: one tile and the global view */
    run_golden("idefics3-1tile", "ref", MM_DATA_DIR "/sq64.png", MM_DATA_DIR "/synth-idefics3-1tile-sq64.json", false,
               &err);
    EXPECT(err < 1e-3, "logits %.5f from llama.cpp's", err);
    const char *cpu = harness_cpu_plugin();
    if (cpu) {
        run_golden("idefics3", cpu, MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-idefics3-wide.json", false, &err);
        EXPECT(err < 1e-3, "%s: logits %.5f from llama.cpp's", cpu, err);
    }
    /* without a cache each tile is encoded alone: the rows of the whole
     * medium's encode, tile by tile */
    tessera_model *m = harness_model_load(MM_BUILD_DIR "/synth-idefics3-f32.gguf", "ref", NULL);
    REQUIRE(m, "model");
    tessera_mtmd_params mp = tessera_mtmd_default_params();
    tessera_mtmd *whole = tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-idefics3-f32.gguf", &mp);
    mp.cache_size = 0;
    tessera_mtmd *alone = tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-idefics3-f32.gguf", &mp);
    REQUIRE(whole && alone, "%s", tessera_last_error());
    tessera_media *img = tessera_media_from_file(MM_DATA_DIR "/wide300.png");
    REQUIRE(img, "%s", tessera_last_error());
    tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(whole, TESSERA_MEDIA_MARKER, &img, 1, false, true);
    REQUIRE(ch, "%s", tessera_last_error());
    int tiles = 0;
    for (int i = 0; i < tessera_mtmd_chunks_count(ch); i++) {
        if (tessera_mtmd_chunk_type(ch, i) != TESSERA_CHUNK_IMAGE) continue;
        const size_t n = (size_t)tessera_mtmd_chunk_n_tokens(ch, i) * (size_t)tessera_model_n_embd(m);
        const float *a = tessera_mtmd_encode_chunk(whole, ch, i), *b = tessera_mtmd_encode_chunk(alone, ch, i);
        REQUIRE(a && b, "%s", tessera_last_error());
        EXPECT(tessera_mtmd_last_encode_ms(alone) > 0, "tile %d encoded", tiles);
        double worst = 0;
        for (size_t k = 0; k < n; k++) worst = fmax(worst, fabs(a[k] - b[k]));
        EXPECT(worst < 1e-5, "tile %d: alone differs by %g", tiles, worst);
        tiles++;
    }
    EXPECT(tiles == 7, "%d tiles", tiles);
    tessera_mtmd_chunks_free(ch);
    tessera_media_free(img);
    tessera_mtmd_free(whole);
    tessera_mtmd_free(alone);
    tessera_model_free(m);
    /* the tokens around the global view must be the model's */
    m = harness_model_load(MM_BUILD_DIR "/synth-llava-f32.gguf", "ref", NULL);
    REQUIRE(m, "model");
    EXPECT_ERROR(tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-idefics3-f32.gguf", NULL) == NULL,
                 tessera_last_error(), "no such token", "idefics3 mmproj on a vocabulary without its tokens");
    tessera_model_free(m);
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
    /* rows that attend both ways must fit one batch */
    m = harness_model_load(MM_BUILD_DIR "/synth-gemma3-f32.gguf", "ref", NULL);
    REQUIRE(m, "model");
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 8;
    tessera_context *ctx = harness_context(m, &cp);
    float *rows = calloc(16 * (size_t)tessera_model_n_embd(m), sizeof(float));
    EXPECT_ERROR(tessera_decode_embd(ctx, rows, 16, 0, TESSERA_DECODE_NON_CAUSAL) != 0, tessera_last_error(),
                 "-b is 8", "two-way rows over a batch");
    EXPECT(tessera_decode_embd(ctx, rows, 8, 0, TESSERA_DECODE_NON_CAUSAL) == 0, "%s", tessera_last_error());
    free(rows);
    tessera_context_free(ctx);
    tessera_model_free(m);
    tessera_shutdown();
}

TEST(greedy_after_image_qwen2vl) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    /* the rows at their grid's M-RoPE positions and text after them at
     * t0 + max(cells across, down), as libmtmd: its logits; and measurably
     * not those of rows at plain 1-D positions */
    double err = 1e9, err_flat = 0, err_wide = 1e9;
    run_golden("qwen2vl", "ref", MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-qwen2vl-sq224.json", false, &err);
    run_golden("qwen2vl", "ref", MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-qwen2vl-sq224.json", true, &err_flat);
    EXPECT(err < 2e-3, "logits %.5f from llama.cpp's", err);
    EXPECT(err_flat > 10 * err, "1-D positions: logits %.5f from llama.cpp's (grid: %.5f)", err_flat, err);
    /* 300x180: 11x6 cells, text on 11 positions past the image's first */
    run_golden("qwen2vl", "ref", MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-qwen2vl-wide.json", false, &err_wide);
    EXPECT(err_wide < 1e-3, "wide: logits %.5f from llama.cpp's", err_wide);
    const char *cpu = harness_cpu_plugin();
    if (cpu) {
        run_golden("qwen2vl", cpu, MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-qwen2vl-sq224.json", false, &err);
        EXPECT(err < 2e-3, "%s: logits %.5f from llama.cpp's", cpu, err);
        run_golden("qwen2vl", cpu, MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-qwen2vl-wide.json", false,
                   &err_wide);
        EXPECT(err_wide < 1e-3, "%s: wide: logits %.5f from llama.cpp's", cpu, err_wide);
    }
    tessera_shutdown();
}

/* The rope offset an image grid leaves (model/mrope.c) follows the cache:
 * rewinding to just after the image keeps it, rewinding to before the
 * image drops it, and what would carry it wrong (moving positions, saving
 * the sequence's state) is refused by name. */
static void last_logits(tessera_context *ctx, float *out, int n) {
    const float *lg = tessera_logits(ctx, -1);
    REQUIRE(lg, "%s", tessera_last_error());
    memcpy(out, lg, (size_t)n * sizeof *out);
}

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    return d;
}

TEST(qwen2vl_positions_follow_the_cache) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    tessera_model *m = harness_model_load(MM_BUILD_DIR "/synth-qwen2vl-f32.gguf", "ref", NULL);
    REQUIRE(m, "model");
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 256;
    tessera_context *ctx = harness_context(m, &cp), *plain = harness_context(m, &cp);
    tessera_mtmd *mm = tessera_mtmd_load(m, MM_BUILD_DIR "/mmproj-synth-qwen2vl-f32.gguf", NULL);
    REQUIRE(mm, "%s", tessera_last_error());
    tessera_media *img = tessera_media_from_file(MM_DATA_DIR "/wide300.png");
    REQUIRE(img, "%s", tessera_last_error());
    tessera_mtmd_chunks *ch = tessera_mtmd_tokenize(mm, "A" TESSERA_MEDIA_MARKER "Once upon a time", &img, 1, true, true);
    REQUIRE(ch && tessera_mtmd_chunks_count(ch) == 3, "chunks");
    const int nv = tessera_model_n_vocab(m);
    float *l1 = malloc((size_t)nv * sizeof(float)), *l2 = malloc((size_t)nv * sizeof(float));
    int32_t n0, n2, n_past = 0;
    const tessera_token *t0 = tessera_mtmd_chunk_tokens(ch, 0, &n0), *t2 = tessera_mtmd_chunk_tokens(ch, 2, &n2);
    const int32_t n_img = tessera_mtmd_chunk_n_tokens(ch, 1);
    EXPECT(n_img == 66, "11x6 cells: %d rows", n_img);
    EXPECT(tessera_mtmd_eval_chunks(mm, ctx, ch, 0, &n_past) == 0, "%s", tessera_last_error());
    EXPECT(n_past == n0 + n_img + n2, "n_past %d", n_past);
    last_logits(ctx, l1, nv);
    /* back to the last prompt token: the image's offset holds */
    EXPECT(tessera_decode(ctx, t2 + n2 - 1, 1, n_past - 1, 0) == 0, "%s", tessera_last_error());
    last_logits(ctx, l2, nv);
    EXPECT(max_diff(l1, l2, nv) < 1e-4, "re-decoded after the image: %.6f apart", max_diff(l1, l2, nv));
    /* back to before the image: the text goes on at plain positions, as in
     * a context that never saw it */
    EXPECT(tessera_decode(ctx, t2, n2, n0, 0) == 0, "%s", tessera_last_error());
    last_logits(ctx, l1, nv);
    tessera_token *both = malloc((size_t)(n0 + n2) * sizeof *both);
    memcpy(both, t0, (size_t)n0 * sizeof *both);
    memcpy(both + n0, t2, (size_t)n2 * sizeof *both);
    EXPECT(tessera_decode(plain, both, n0 + n2, 0, 0) == 0, "%s", tessera_last_error());
    last_logits(plain, l2, nv);
    EXPECT(max_diff(l1, l2, nv) < 1e-4, "rewound before the image: %.6f from plain text", max_diff(l1, l2, nv));
    /* with the image again: moving positions and saving state are refused */
    EXPECT(tessera_mtmd_eval_chunks(mm, ctx, ch, 0, &n_past) == 0, "%s", tessera_last_error());
    EXPECT_ERROR(tessera_seq_add(ctx, 0, n0 + n_img, n_past, 5) != 0, tessera_last_error(), "M-RoPE", "move");
    size_t len = 0;
    void *st = tessera_state_save(ctx, 0, NULL, 0, NULL, &len);
    EXPECT_ERROR(st == NULL, tessera_last_error(), "M-RoPE", "state save");
    free(st);
    /* and gone with the sequence */
    EXPECT(tessera_seq_remove(ctx, 0, 0) == 0, "%s", tessera_last_error());
    st = tessera_state_save(ctx, 0, NULL, 0, NULL, &len);
    EXPECT(st != NULL, "state save of an emptied sequence: %s", tessera_last_error());
    free(st);
    free(both);
    free(l1);
    free(l2);
    tessera_mtmd_chunks_free(ch);
    tessera_media_free(img);
    tessera_mtmd_free(mm);
    tessera_context_free(plain);
    tessera_context_free(ctx);
    tessera_model_free(m);
    tessera_shutdown();
}

HARNESS_MAIN("mtmd_api", HARNESS_TEST(greedy_after_image), HARNESS_TEST(greedy_after_image_gemma3),
             HARNESS_TEST(greedy_after_image_qwen2vl), HARNESS_TEST(qwen2vl_positions_follow_the_cache),
             HARNESS_TEST(greedy_after_image_idefics3), HARNESS_TEST(errors))
