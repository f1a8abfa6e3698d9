/*
 * clip: the LLaVA-style, Gemma 3 and Qwen2.5-VL encoders of synthetic mmproj files against
 * llama.cpp's libmtmd (the JSON files in tests/data/mm, made by its mtmd_ref.cpp): the
 * image's embedding rows within cosine 0.9999 of llama.cpp's on ref and on
 * the CPU plugin; and the mmproj reader's errors on broken files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gguf/gguf.h"
#include "harness.h"
#include "host/host.h"
#include "media/media.h"
#include "mtmd/clip.h"
#include "util/error.h"

static char *slurp(const char *path) {
    void *d;
    size_t n;
    if (media_read_file(path, 64 << 20, &d, &n) != 0) return NULL;
    ((char *)d)[n] = 0; /* media_read_file leaves a spare byte */
    return d;
}

/* The golden's media chunks (an image's tiles, in order): their rows into
 * *embd (malloc), count in *n_rows. */
static int golden_embd(const char *path, float **embd, int *n_rows, int *n_embd) {
    char *text = slurp(path);
    if (!text) return -1;
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) return error_set("%s: not JSON", path);
    *n_embd = cJSON_GetObjectItem(j, "n_embd")->valueint;
    *n_rows = 0;
    *embd = NULL;
    cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "chunks")) {
        cJSON *e = cJSON_GetObjectItem(c, "embd");
        if (!e) continue;
        float *more = realloc(*embd, (size_t)(n + cJSON_GetArraySize(e)) * sizeof(float));
        if (!more) break;
        *embd = more;
        cJSON *v;
        cJSON_ArrayForEach(v, e)(*embd)[n++] = (float)v->valuedouble;
    }
    cJSON_Delete(j);
    *n_rows = n / *n_embd;
    return n > 0 ? 0 : error_set("%s: no media chunk", path);
}

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return ab / sqrt(aa * bb + 1e-30);
}

static void check_image(const char *device, const char *proj, const char *image, const char *golden, double min_cos) {
    clip_model *c = clip_model_load(getenv("MM_PROJ") ? getenv("MM_PROJ") : proj, 128);
    REQUIRE(c, "%s", error_get());
    float *want = NULL;
    int n_rows = 0, n_embd = 0;
    REQUIRE(golden_embd(golden, &want, &n_rows, &n_embd) == 0, "%s", error_get());
    void *d;
    size_t n;
    REQUIRE(media_read_file(image, 1 << 20, &d, &n) == 0, "%s", error_get());
    media_image img;
    REQUIRE(media_image_decode(d, n, image, NULL, &img) == 0, "%s", error_get());
    free(d);
    EXPECT(clip_n_tokens(c, img.nx, img.ny) == n_rows, "tokens %d vs llama.cpp's %d",
           clip_n_tokens(c, img.nx, img.ny), n_rows);
    EXPECT(clip_n_embd_out(c) == n_embd, "width");
    host_device *dev[1] = {host_device_find(device)};
    REQUIRE(dev[0], "no device %s", device);
    float *got = calloc((size_t)n_rows * n_embd, sizeof(float));
    clip_run run = {dev, 1, 2, false, 0};
    EXPECT(clip_encode(c, &run, &img, got) == 0, "%s", error_get());
    double worst = 1;
    const int n_tiles = clip_n_tiles(c, img.nx, img.ny), per_tile = n_rows / n_tiles;
    for (int t = 0; t < n_tiles; t++) {
        double tile_worst = 1;
        for (int r = t * per_tile; r < (t + 1) * per_tile; r++) {
            double cs = cosine(got + (size_t)r * n_embd, want + (size_t)r * n_embd, n_embd);
            if (cs < tile_worst) tile_worst = cs;
        }
        if (n_tiles > 1) printf("  tile %d of %d: worst row cosine %.7f\n", t + 1, n_tiles, tile_worst);
        if (tile_worst < worst) worst = tile_worst;
    }
    if (getenv("MM_DBG"))
        for (int r = 0; r < n_rows; r++) {
            int best = 0;
            double bc = -2;
            for (int q = 0; q < n_rows; q++) {
                double cs = cosine(got + (size_t)r * n_embd, want + (size_t)q * n_embd, n_embd);
                if (cs > bc) bc = cs, best = q;
            }
            printf("row %d: self %.4f best %d %.4f\n", r, cosine(got + (size_t)r * n_embd, want + (size_t)r * n_embd, n_embd), best, bc);
        }
    printf("%s on %s: worst row cosine %.7f over %d rows (%.1f ms)\n", image, device, worst, n_rows,
           run.encode_ms);
    EXPECT(worst >= min_cos, "%s on %s: worst row cosine %.7f < %.7f", image, device, worst, min_cos);
    free(got);
    free(want);
    media_image_free(&img);
    clip_model_free(c);
}

TEST(embeddings_match_llama_cpp) {
    if (!strstr(media_formats(), "png")) harness_skip("built without libpng: the test images are PNGs");
    harness_host_start();
    /* MM_DEVICES (a comma list, e.g. vulkan0): those instead of ref and the CPU plugin */
    const char *devs[8] = {"ref", harness_cpu_plugin()};
    int n_devs = 2;
    char list[256] = "";
    if (getenv("MM_DEVICES")) {
        snprintf(list, sizeof list, "%s", getenv("MM_DEVICES"));
        n_devs = 0;
        for (char *save = NULL, *d = strtok_r(list, ",", &save); d && n_devs < 8; d = strtok_r(NULL, ",", &save)) {
            if (!host_device_find(d)) harness_skip("no device %s in this build or machine", d);
            devs[n_devs++] = d;
        }
    }
    for (int i = 0; i < n_devs; i++) {
        if (!devs[i]) continue;
        /* the image at the encoder's size: no resampling in play */
        const char *llava = MM_BUILD_DIR "/mmproj-synth-llava-f32.gguf";
        check_image(devs[i], llava, getenv("MM_IMG") ? getenv("MM_IMG") : MM_DATA_DIR "/sq56.png",
                    getenv("MM_GOLD") ? getenv("MM_GOLD") : MM_DATA_DIR "/synth-llava-sq56.json", 0.9999);
        /* Gemma 3: SigLIP, the 4x4 pool, the soft-embedding norm */
        const char *g3 = MM_BUILD_DIR "/mmproj-synth-gemma3-f32.gguf";
        check_image(devs[i], g3, MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-gemma3-sq224.json", 0.99999);
        /* images of other shapes: fitted keeping their aspect (Pillow's
         * bicubic), centred, padded with the mean colour (LLaVA) or black */
        static const char *const shapes[][3] = {
            {"llava", "wide.png", "wide"},          {"llava", "wide300.png", "300x180"},
            {"gemma3", "wide300.png", "wide"},      {"llava", "img180x300.png", "180x300"},
            {"gemma3", "img180x300.png", "180x300"}, {"llava", "img57x23.png", "57x23"},
            {"gemma3", "img57x23.png", "57x23"},    {"llava", "img1000x40.png", "1000x40"},
            {"gemma3", "img1000x40.png", "1000x40"},
        };
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            char img[512], gold[512];
            snprintf(img, sizeof img, "%s/%s", MM_DATA_DIR, shapes[k][1]);
            snprintf(gold, sizeof gold, "%s/synth-%s-%s.json", MM_DATA_DIR, shapes[k][0], shapes[k][2]);
            check_image(devs[i], !strcmp(shapes[k][0], "llava") ? llava : g3, img, gold, 0.9999);
        }
        /* Qwen2.5-VL: 224x224 is 8x8 cells as it is (64 rows, 2x2 windows of
         * 4x4 cells); 300x180 is 11x6 cells (66 rows), scaled into 308x168
         * keeping its aspect and padded */
        const char *q2 = MM_BUILD_DIR "/mmproj-synth-qwen2vl-f32.gguf";
        check_image(devs[i], q2, MM_DATA_DIR "/sq224.png", MM_DATA_DIR "/synth-qwen2vl-sq224.json", 0.99999);
        check_image(devs[i], q2, MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-qwen2vl-wide.json", 0.99999);
        /* Qwen2-VL: LayerNorms, quick-GELU FFN, every block full attention */
        check_image(devs[i], MM_BUILD_DIR "/mmproj-synth-qwen2vl1-f32.gguf", MM_DATA_DIR "/sq224.png",
                    MM_DATA_DIR "/synth-qwen2vl1-sq224.json", 0.99999);
        /* SmolVLM / Idefics3: 300x180 fitted to 192, 3x2 tiles of 64 and the
         * global view (Lanczos resizes); 64x64 with the mmproj that does not
         * tile: one tile and the global view, both the image itself */
        const char *i3 = MM_BUILD_DIR "/mmproj-synth-idefics3-f32.gguf";
        check_image(devs[i], i3, MM_DATA_DIR "/wide300.png", MM_DATA_DIR "/synth-idefics3-wide.json", 0.99999);
        check_image(devs[i], MM_BUILD_DIR "/mmproj-synth-idefics3-1tile-f32.gguf", MM_DATA_DIR "/sq64.png",
                    MM_DATA_DIR "/synth-idefics3-1tile-sq64.json", 0.99999);
    }
    tessera_shutdown();
}

TEST(broken_mmproj) {
    clip_model *c = clip_model_load(MM_BUILD_DIR "/mmproj-synth-llava-f32.gguf", 256);
    EXPECT_ERROR(c == NULL, error_get(), "not this model's mmproj", "width mismatch");
    c = clip_model_load(MM_BUILD_DIR "/synth-llava-f32.gguf", 0);
    EXPECT_ERROR(c == NULL, error_get(), "not an mmproj", "a text model");
    /* a copy with one tensor's shape changed and one key dropped */
    static const struct broken { const char *src, *drop_key, *bad_tensor, *needle; } cases[] = {
        {"llava", "clip.vision.patch_size", NULL, "clip.vision.patch_size"},
        {"llava", NULL, "v.blk.1.attn_k.weight", "v.blk.1.attn_k.weight"},
        {"llava", NULL, "mm.0.bias", "mm.0.bias"},
        {"gemma3", "mm.soft_emb_norm.weight", NULL, "mm.soft_emb_norm.weight"},
        {"gemma3", NULL, "mm.input_projection.weight", "mm.input_projection.weight"},
        {"gemma3", "v.post_ln.weight", NULL, "v.post_ln.weight"},
        {"gemma3", NULL, "v.position_embd.weight", "v.position_embd.weight"},
        {"qwen2vl", "clip.vision.n_wa_pattern", NULL, "clip.vision.n_wa_pattern"},
        {"qwen2vl", "v.blk.2.ffn_gate.weight", NULL, "v.blk.2.ffn_gate.weight"},
        {"qwen2vl", NULL, "v.blk.1.attn_k.weight", "v.blk.1.attn_k.weight"},
        {"qwen2vl", NULL, "v.blk.0.attn_q.bias", "v.blk.0.attn_q.bias"},
        {"idefics3", "mm.model.fc.weight", NULL, "mm.model.fc.weight"},
        {"idefics3", "clip.vision.projector.scale_factor", NULL, "clip.vision.projector.scale_factor"},
        {"idefics3", "v.post_ln.weight", NULL, "v.post_ln.weight"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char src[512];
        snprintf(src, sizeof src, "%s/mmproj-synth-%s-f32.gguf", MM_BUILD_DIR, cases[k].src);
        gguf_file *f = gguf_open(src);
        REQUIRE(f, "%s", error_get());
        gguf_writer *w = gguf_writer_new();
        for (int64_t i = 0; i < gguf_kv_count(f); i++)
            if (!cases[k].drop_key || strcmp(gguf_kv_key(f, i), cases[k].drop_key) != 0) gguf_writer_copy_kv(w, f, i);
        for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor_info *t = gguf_tensor(f, i);
            if (cases[k].drop_key && !strcmp(t->name, cases[k].drop_key)) continue;
            int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
            if (cases[k].bad_tensor && !strcmp(t->name, cases[k].bad_tensor)) {
                if (ne[1] > 1) ne[1] /= 2;
                else ne[0] /= 2;
            }
            gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, ne, t->data);
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/broken-%zu.gguf", harness_tmpdir(), k);
        REQUIRE(gguf_writer_write_file(w, path) == 0, "%s", error_get());
        gguf_writer_free(w);
        gguf_close(f);
        c = clip_model_load(path, 0);
        EXPECT_ERROR(c == NULL, error_get(), cases[k].needle, "case %zu", k);
        clip_model_free(c);
    }
    /* gemma3's pool needs a multiple of 4 patches a side */
    gguf_file *f = gguf_open(MM_BUILD_DIR "/mmproj-synth-gemma3-f32.gguf");
    REQUIRE(f, "%s", error_get());
    gguf_writer *w = gguf_writer_new();
    for (int64_t i = 0; i < gguf_kv_count(f); i++)
        if (strcmp(gguf_kv_key(f, i), "clip.vision.image_size") != 0) gguf_writer_copy_kv(w, f, i);
    gguf_writer_set_u32(w, "clip.vision.image_size", 14 * 6);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor_info *t = gguf_tensor(f, i);
        gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->ne, t->data);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/broken-pool.gguf", harness_tmpdir());
    REQUIRE(gguf_writer_write_file(w, path) == 0, "%s", error_get());
    gguf_writer_free(w);
    gguf_close(f);
    c = clip_model_load(path, 0);
    EXPECT_ERROR(c == NULL, error_get(), "multiple of 4 patches", "gemma3 image size");
    clip_model_free(c);
    c = clip_model_load(MM_BUILD_DIR "/mmproj-synth-gemma3-f32.gguf", 64);
    EXPECT_ERROR(c == NULL, error_get(), "not this model's mmproj", "gemma3 width mismatch");
    c = clip_model_load(MM_BUILD_DIR "/mmproj-synth-qwen2vl-f32.gguf", 64);
    EXPECT_ERROR(c == NULL, error_get(), "not this model's mmproj", "qwen2vl width mismatch");
}

/* Qwen2-VL's dynamic resolution: the cells libmtmd gave these image sizes
 * (its chunks' nx, ny through mtmd_image_tokens_get_nx/_ny; min 8 cells,
 * max 4096, tests/data/mm/README.md). */
TEST(qwen2vl_grid) {
    clip_model *c = clip_model_load(MM_BUILD_DIR "/mmproj-synth-qwen2vl-f32.gguf", 128);
    REQUIRE(c, "%s", error_get());
    static const int32_t cases[][4] = {
        {300, 180, 11, 6}, {224, 224, 8, 8}, {40, 30, 4, 3},       {64, 64, 3, 3},       {42, 42, 3, 3},
        {70, 50, 4, 3},    {100, 20, 7, 2},  {20, 100, 2, 7},      {2400, 1600, 78, 52}, {4000, 3000, 73, 55},
        {3000, 200, 107, 7},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t gx, gy;
        clip_grid(c, cases[k][0], cases[k][1], &gx, &gy);
        EXPECT(gx == cases[k][2] && gy == cases[k][3], "%dx%d: %dx%d cells, llama.cpp %dx%d", cases[k][0],
               cases[k][1], gx, gy, cases[k][2], cases[k][3]);
        EXPECT(clip_n_tokens(c, cases[k][0], cases[k][1]) == cases[k][2] * cases[k][3], "%dx%d: rows",
               cases[k][0], cases[k][1]);
    }
    clip_model_free(c);
}

HARNESS_MAIN("clip", HARNESS_TEST(embeddings_match_llama_cpp), HARNESS_TEST(broken_mmproj),
             HARNESS_TEST(qwen2vl_grid))
