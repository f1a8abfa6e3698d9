/*
 * test_quant_policy — per-tensor type choice on a small synthetic model whose
 * rows are not multiples of 256 (so the K-quant fallbacks apply), and the
 * data written for each choice.
 *
 * Model (llama, 1 layer, rows of 96 and 80 elements):
 *   token_embd [96 x 8], output [96 x 8], blk.0.attn_norm [96],
 *   blk.0.attn_q [96 x 96], blk.0.ffn_down [96 x 96], blk.0.ffn_up [80 x 4]
 * Expected (llama.cpp's llama_tensor_get_type + fallbacks):
 *   Q4_K_M: attn_q Q4_K->Q5_0, ffn_down Q6_K->Q8_0 (use_more_bits(0,1)),
 *           output Q8_0 (row not a multiple of 256), token_embd Q5_0,
 *           ffn_up Q4_K->Q5_0->F16 (80 % 32 != 0), attn_norm F32 (copied)
 *   Q2_K:   attn_q Q2_K->Q4_0, ffn_down Q3_K->Q4_0 (llama-quantize --dry-run
 *           on rows of 96: Q2_K and Q3_K fall back to Q4_0, not IQ4_NL)
 *   TQ2_0:  attn_q TQ2_0->Q4_0
 *   Q5_K_S: attn_q Q5_K->Q5_1
 *   IQ4_XS: attn_q IQ4_XS->IQ4_NL
 *   --pure Q4_K: refused, naming the first offending tensor (output.weight
 *           in llama.cpp's order) and the block size
 * Each converted tensor must dequantize to within 15% of the source block max.
 * Also: the IQ1_S and IQ1_M mixtures choose what llama-quantize chose, per
 * tensor, on 16-layer llamas with GQA 1 and 4 (tests/data/quant-ref).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "tensor/dtype.h"
#include "harness.h"
#include "util/error.h"


typedef struct spec {
    const char *name;
    int n_dims;
    int64_t ne0, ne1;
} spec;

static const spec tensors[] = {
    {"token_embd.weight", 2, 96, 8},      {"output.weight", 2, 96, 8},
    {"blk.0.attn_norm.weight", 1, 96, 1}, {"blk.0.attn_q.weight", 2, 96, 96},
    {"blk.0.ffn_down.weight", 2, 96, 96}, {"blk.0.ffn_up.weight", 2, 80, 4},
};
enum { N_TENSORS = sizeof tensors / sizeof tensors[0] };

static float *data[N_TENSORS];

static int write_model(const char *path) {
    gguf_writer *w = gguf_writer_new();
    int rc = -1;
    if (!w) return -1;
    if (gguf_writer_set_str(w, "general.architecture", "llama", 5) ||
        gguf_writer_set_u32(w, "llama.block_count", 1) ||
        gguf_writer_set_u32(w, "llama.attention.head_count", 2) ||
        gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2))
        goto done;
    unsigned seed = 12345;
    for (int t = 0; t < N_TENSORS; t++) {
        int64_t ne[4] = {tensors[t].ne0, tensors[t].ne1, 1, 1};
        int64_t n = ne[0] * ne[1];
        data[t] = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            data[t][i] = ((float)((seed >> 8) & 0xffff) / 65535.0f - 0.5f) * 0.2f;
        }
        if (gguf_writer_add_tensor(w, tensors[t].name, TSR_DTYPE_F32, tensors[t].n_dims, ne, data[t]))
            goto done;
    }
    rc = gguf_writer_write_file(w, path);
done:
    gguf_writer_free(w);
    return rc;
}

static int quantize(const char *in, const char *out, const char *type, bool pure) {
    quant_params p = {.ftype = quant_ftype_find(type), .pure = pure, .n_threads = 3};
    return quant_model_file(in, out, &p);
}

/* dtype of name in path (after checking its data), or -1 */
static int32_t out_dtype(const char *path, const char *name) {
    gguf_file *f = gguf_open(path);
    if (!f) return -1;
    const gguf_tensor_info *t = gguf_find_tensor(f, name);
    int32_t dt = t ? t->dtype : -1;
    int idx = -1;
    for (int i = 0; i < N_TENSORS; i++)
        if (!strcmp(tensors[i].name, name)) idx = i;
    if (t && idx >= 0) {
        int64_t n = t->ne[0] * t->ne[1];
        float *y = malloc((size_t)n * sizeof *y);
        double amax = 0, err = 0;
        if (dtype_dequantize_row(dt, t->data, y, n) != 0) dt = -1;
        for (int64_t i = 0; i < n && dt >= 0; i++) {
            amax = fmax(amax, fabs(data[idx][i]));
            err = fmax(err, fabs(data[idx][i] - y[i]));
        }
        if (dt >= 0 && err > 0.15 * amax) {
            printf("     %s (%s): max error %g vs block max %g\n", name, dtype_name(dt), err, amax);
            dt = -2;
        }
        free(y);
    }
    gguf_close(f);
    return dt;
}

TEST(test_quant_policy) {
    char dir[] = "/tmp/tessera-policy-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    char in[256], out[256], line[256];
    snprintf(in, sizeof in, "%s/odd.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    REQUIRE(write_model(in) == 0, "cannot write the test model: %s", error_get());
    static const struct {
        const char *type, *tensor;
        int32_t want;
    } cases[] = {
        {"Q4_K_M", "blk.0.attn_q.weight", TSR_DTYPE_Q5_0},
        {"Q4_K_M", "blk.0.ffn_down.weight", TSR_DTYPE_Q8_0},
        {"Q4_K_M", "output.weight", TSR_DTYPE_Q8_0},
        {"Q4_K_M", "token_embd.weight", TSR_DTYPE_Q5_0},
        {"Q4_K_M", "blk.0.ffn_up.weight", TSR_DTYPE_F16},
        {"Q4_K_M", "blk.0.attn_norm.weight", TSR_DTYPE_F32},
        {"Q2_K", "blk.0.attn_q.weight", TSR_DTYPE_Q4_0},
        {"Q2_K", "blk.0.ffn_down.weight", TSR_DTYPE_Q4_0},
        {"TQ2_0", "blk.0.attn_q.weight", TSR_DTYPE_Q4_0},
        {"Q5_K_S", "blk.0.attn_q.weight", TSR_DTYPE_Q5_1},
        {"IQ4_XS", "blk.0.attn_q.weight", TSR_DTYPE_IQ4_NL},
        {"Q8_0", "output.weight", TSR_DTYPE_Q8_0},
        {"Q4_0", "output.weight", TSR_DTYPE_Q8_0},
    };
    const char *done_type = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(done_type, cases[i].type) != 0) {
            if (quantize(in, out, cases[i].type, false) != 0) {
                ADD_FAILURE("quantize %s: %s", cases[i].type, error_get());
                continue;
            }
            done_type = cases[i].type;
        }
        int32_t got = out_dtype(out, cases[i].tensor);
        snprintf(line, sizeof line, "%-6s %-24s -> %-6s (want %s)", cases[i].type, cases[i].tensor,
                 got >= 0 ? dtype_name(got) : "error", dtype_name(cases[i].want));
        EXPECT(got == cases[i].want, "%s", line);
    }
    unlink(out);
    int rc = quantize(in, out, "Q4_K", true);
    snprintf(line, sizeof line, "--pure Q4_K refused: %s", error_get());
    EXPECT(rc != 0 && strstr(error_get(), "'output.weight'") && strstr(error_get(), "256") && access(out, F_OK) != 0,
           "%s", line);
    unlink(in);
    rmdir(dir);
    for (int t = 0; t < N_TENSORS; t++) free(data[t]);
}

/* The IQ1_S and IQ1_M mixtures against llama-quantize's own choices on
 * 16-layer llamas with GQA 1 and 4 (tests/data/quant-ref/iq1-mixtures.txt:
 * "model LAYERS HEADS KV_HEADS TYPE", then "tensor type" in its order). */
TEST(test_iq1_mixtures) {
    harness_path path = harness_source_file("tests/data/quant-ref/iq1-mixtures.txt");
    FILE *f = fopen(path.s, "r");
    REQUIRE(f != NULL, "cannot open %s", path.s);
    char line[256], name[128], type[32];
    quant_model_info info = {.arch = "llama", .has_output = true, .has_imatrix = true};
    quant_rule_state st = {0};
    const quant_ftype *ft = NULL;
    int checked = 0, models = 0;
    while (fgets(line, sizeof line, f)) {
        int layers, heads, kv;
        if (line[0] == '#') continue;
        if (sscanf(line, "model %d %d %d %31s", &layers, &heads, &kv, type) == 4) {
            info.n_layer = info.n_attention_wv = layers;
            info.n_head = heads;
            info.n_head_kv = kv;
            memset(&st, 0, sizeof st);
            ft = quant_ftype_find(type);
            REQUIRE(ft != NULL, "no ftype %s", type);
            models++;
            continue;
        }
        if (sscanf(line, "%127s %31s", name, type) != 2 || !ft) continue;
        const int64_t ne[4] = {256, 256, 1, 1};
        const int32_t got = quant_mixture_dtype(ft, &info, &st, name, ne);
        EXPECT(!strcasecmp(dtype_name(got), type), "%s (GQA %d): %s -> %s, llama-quantize %s", ft->name,
               info.n_head / info.n_head_kv, name, dtype_name(got), type);
        checked++;
    }
    fclose(f);
    printf("IQ1 mixtures: %d tensors of %d models as llama-quantize\n", checked, models);
    EXPECT(models == 4 && checked > 100, "%d models, %d tensors read", models, checked);
}

HARNESS_MAIN("policy: all choices as llama.cpp", HARNESS_TEST(test_quant_policy), HARNESS_TEST(test_iq1_mixtures))
