/*
 * tessera-synth — write a synthetic llama or qwen2 GGUF of any shape and
 * weight type: random weights from a seed, the vocabulary copied from another
 * GGUF file (padded or trimmed to the requested size).
 *
 * Tensors are generated and quantized one at a time and streamed to the file,
 * so a 1.1B-parameter model needs memory for one tensor, not the model.
 * Usage: see --help.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "util/error.h"

typedef struct synth_opts {
    const char *out;
    const char *vocab_from;
    const char *arch;
    const char *type;
    int64_t dim, layers, heads, kv_heads, ffn, vocab, ctx;
    uint64_t seed;
    float rope_base;
    int tied;
    int quiet;
} synth_opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera-synth -o OUT.gguf --vocab-from FILE [options]\n"
            "\n"
            "Writes a llama/qwen2 GGUF with random (seeded) weights.\n"
            "\n"
            "  -o, --out FILE        output path (written to FILE.tmp, then renamed)\n"
            "  --vocab-from FILE     GGUF whose tokenizer.* keys are copied\n"
            "  --arch NAME           llama (default) or qwen2\n"
            "  --type TYPE           weight type of 2-D tensors: F32 (default), F16, BF16,\n"
            "                        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K,\n"
            "                        Q6_K, or the mixture Q4_K_M (Q4_K, with Q6_K for\n"
            "                        output and for attn_v/ffn_down in some layers)\n"
            "  --dim N               embedding size (default 256)\n"
            "  --layers N            blocks (default 4)\n"
            "  --heads N             attention heads (default 8)\n"
            "  --kv-heads N          KV heads (default = heads)\n"
            "  --ffn N               feed-forward size (default 768)\n"
            "  --vocab N             vocabulary size (default: the source's)\n"
            "  --ctx N               context length (default 4096)\n"
            "  --rope-base F         RoPE frequency base (default 10000)\n"
            "  --tied                no output.weight (tied to token_embd)\n"
            "  --seed N              random seed (default 42)\n"
            "  -q, --quiet           no progress on stderr\n"
            "  -h, --help            this text\n"
            "\n"
            "TinyLlama-1.1B shape: --dim 2048 --layers 22 --heads 32 --kv-heads 4 --ffn 5632 --vocab 32000\n");
}

static int parse_i64(const char *flag, const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s || v <= 0)
        return fprintf(stderr, "tessera-synth: %s expects a positive integer, got '%s'\n", flag, s), -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, synth_opts *o) {
    *o = (synth_opts){.arch = "llama", .type = "F32", .dim = 256, .layers = 4, .heads = 8,
                      .ffn = 768, .ctx = 4096, .seed = 42, .rope_base = 10000.0f};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
#define NEED_VALUE()                                                                        \
    do {                                                                                    \
        if (!v) return fprintf(stderr, "tessera-synth: %s needs a value\n", a), -1;         \
        i++;                                                                                \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "-o") || !strcmp(a, "--out")) {
            NEED_VALUE();
            o->out = v;
        } else if (!strcmp(a, "--vocab-from")) {
            NEED_VALUE();
            o->vocab_from = v;
        } else if (!strcmp(a, "--arch")) {
            NEED_VALUE();
            o->arch = v;
        } else if (!strcmp(a, "--type")) {
            NEED_VALUE();
            o->type = v;
        } else if (!strcmp(a, "--tied")) {
            o->tied = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(a, "--rope-base")) {
            NEED_VALUE();
            char *end;
            o->rope_base = strtof(v, &end);
            if (*end || o->rope_base <= 0)
                return fprintf(stderr, "tessera-synth: --rope-base expects a positive number, got '%s'\n", v), -1;
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 10);
            if (errno || *end || end == v)
                return fprintf(stderr, "tessera-synth: --seed expects an integer, got '%s'\n", v), -1;
        } else {
            int64_t *dst = !strcmp(a, "--dim")        ? &o->dim
                           : !strcmp(a, "--layers")   ? &o->layers
                           : !strcmp(a, "--heads")    ? &o->heads
                           : !strcmp(a, "--kv-heads") ? &o->kv_heads
                           : !strcmp(a, "--ffn")      ? &o->ffn
                           : !strcmp(a, "--vocab")    ? &o->vocab
                           : !strcmp(a, "--ctx")      ? &o->ctx
                                                      : NULL;
            if (!dst) return fprintf(stderr, "tessera-synth: unknown option '%s' (see --help)\n", a), -1;
            NEED_VALUE();
            if (parse_i64(a, v, &n)) return -1;
            *dst = n;
        }
#undef NEED_VALUE
    }
    if (!o->out) return fprintf(stderr, "tessera-synth: -o OUT.gguf is required\n"), -1;
    if (!o->vocab_from) return fprintf(stderr, "tessera-synth: --vocab-from FILE is required\n"), -1;
    if (strcmp(o->arch, "llama") && strcmp(o->arch, "qwen2"))
        return fprintf(stderr, "tessera-synth: --arch '%s' is not supported (llama, qwen2)\n", o->arch), -1;
    if (!o->kv_heads) o->kv_heads = o->heads;
    if (o->dim % o->heads)
        return fprintf(stderr, "tessera-synth: --dim %" PRId64 " is not a multiple of --heads %" PRId64 "\n",
                       o->dim, o->heads), -1;
    if (o->heads % o->kv_heads)
        return fprintf(stderr, "tessera-synth: --heads %" PRId64 " is not a multiple of --kv-heads %" PRId64 "\n",
                       o->heads, o->kv_heads), -1;
    if ((o->dim / o->heads) % 2)
        return fprintf(stderr, "tessera-synth: head size %" PRId64 " must be even\n", o->dim / o->heads), -1;
    return 0;
}

/* ------------------------------------------------------------ randomness */

/* splitmix64: tiny, well mixed, the same on every machine. */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-a, a): a = std * sqrt(3) gives standard deviation std. */
static void fill_uniform(float *x, int64_t n, float std, uint64_t *state) {
    float a = std * 1.7320508f;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = (float)((2.0 * u - 1.0) * a);
    }
}

/* ---------------------------------------------------------------- tensors */

typedef struct synth_tensor {
    char name[64];
    int32_t dtype;
    int n_dims;
    int64_t ne[2];
    float std;  /* 0: all ones (norm weights) */
} synth_tensor;

/* llama.cpp's Q4_K_M rule for which layers get more bits: the first and last
 * eighth of the layers, and every third one in between. */
static int use_more_bits(int64_t il, int64_t n) {
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

static int32_t pick_type(const synth_opts *o, int32_t base, int mix, const char *what, int64_t il) {
    if (!mix) return base;
    if (!strcmp(what, "output")) return TSR_DTYPE_Q6_K;
    if ((!strcmp(what, "attn_v") || !strcmp(what, "ffn_down")) && use_more_bits(il, o->layers))
        return TSR_DTYPE_Q6_K;
    return base;
}

static int add_tensor(synth_tensor *ts, int *n, const char *name, int32_t dtype, int n_dims,
                      int64_t ne0, int64_t ne1, float std) {
    synth_tensor *t = &ts[(*n)++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = n_dims == 1 ? TSR_DTYPE_F32 : dtype;
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->std = std;
    if (n_dims == 2 && dtype_row_bytes(t->dtype, ne0) == 0) {
        fprintf(stderr, "tessera-synth: tensor '%s': row of %" PRId64 " elements cannot be stored as %s "
                        "(block size %" PRId64 ")\n",
                name, ne0, dtype_name(t->dtype), dtype_traits_get(t->dtype)->block_size);
        return -1;
    }
    return 0;
}

static int plan_tensors(const synth_opts *o, int32_t base, int mix, synth_tensor *ts, int *n) {
    const int64_t E = o->dim, D = o->dim / o->heads, Hkv = o->kv_heads, F = o->ffn, V = o->vocab;
    const float s_in = 1.0f / sqrtf((float)E), s_ff = 1.0f / sqrtf((float)F);
    char name[64];
    *n = 0;
    if (add_tensor(ts, n, "token_embd.weight", base, 2, E, V, 1.0f)) return -1;
    for (int64_t il = 0; il < o->layers; il++) {
#define T(suffix, what, nd, a, b, std)                                                          \
    do {                                                                                        \
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", il, suffix);                          \
        if (add_tensor(ts, n, name, pick_type(o, base, mix, what, il), nd, a, b, std)) return -1; \
    } while (0)
        T("attn_norm.weight", "norm", 1, E, 1, 0.0f);
        T("attn_q.weight", "attn_q", 2, E, E, s_in);
        T("attn_k.weight", "attn_k", 2, E, D * Hkv, s_in);
        T("attn_v.weight", "attn_v", 2, E, D * Hkv, s_in);
        if (!strcmp(o->arch, "qwen2")) {
            T("attn_q.bias", "bias", 1, E, 1, 0.02f);
            T("attn_k.bias", "bias", 1, D * Hkv, 1, 0.02f);
            T("attn_v.bias", "bias", 1, D * Hkv, 1, 0.02f);
        }
        T("attn_output.weight", "attn_output", 2, E, E, s_in);
        T("ffn_norm.weight", "norm", 1, E, 1, 0.0f);
        T("ffn_gate.weight", "ffn_gate", 2, E, F, s_in);
        T("ffn_up.weight", "ffn_up", 2, E, F, s_in);
        T("ffn_down.weight", "ffn_down", 2, F, E, s_ff);
#undef T
    }
    if (add_tensor(ts, n, "output_norm.weight", base, 1, E, 1, 0.0f)) return -1;
    if (!o->tied && add_tensor(ts, n, "output.weight", pick_type(o, base, mix, "output", 0), 2, E, V, s_in))
        return -1;
    return 0;
}

/* ------------------------------------------------------------ vocabulary */

/* Copy tokenizer.* keys; resize the token arrays to n_vocab (extra tokens
 * are "[PAD<i>]", type UNUSED, score 0). */
static int copy_vocab(gguf_writer *w, const gguf_file *src, int64_t *n_vocab) {
    gguf_type et;
    uint64_t n_src;
    const void *data;
    if (gguf_get_arr(src, "tokenizer.ggml.tokens", &et, &n_src, &data) != 0) return -1;
    if (*n_vocab == 0) *n_vocab = (int64_t)n_src;
    uint64_t n = (uint64_t)*n_vocab;
    for (int64_t i = 0; i < gguf_kv_count(src); i++) {
        const char *key = gguf_kv_key(src, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        if (!strcmp(key, "tokenizer.ggml.tokens") || !strcmp(key, "tokenizer.ggml.scores") ||
            !strcmp(key, "tokenizer.ggml.token_type"))
            continue;
        if (gguf_writer_copy_kv(w, src, i) != 0) return -1;
    }
    gguf_str *strs = calloc(n, sizeof *strs);
    char *pad = calloc(n, 16);
    float *scores = calloc(n, sizeof *scores);
    int32_t *types = calloc(n, sizeof *types);
    int rc = -1;
    if (!strs || !pad || !scores || !types) {
        error_set("out of memory for %" PRIu64 " tokens", n);
        goto done;
    }
    gguf_type st = GGUF_TYPE_FLOAT32, tt = GGUF_TYPE_INT32;
    uint64_t n_scores = 0, n_types = 0;
    const void *sdata = NULL, *tdata = NULL;
    if (gguf_find_key(src, "tokenizer.ggml.scores") >= 0 &&
        gguf_get_arr(src, "tokenizer.ggml.scores", &st, &n_scores, &sdata) != 0)
        goto done;
    if (gguf_find_key(src, "tokenizer.ggml.token_type") >= 0 &&
        gguf_get_arr(src, "tokenizer.ggml.token_type", &tt, &n_types, &tdata) != 0)
        goto done;
    for (uint64_t i = 0; i < n; i++) {
        if (i < n_src) {
            if (gguf_get_arr_str(src, "tokenizer.ggml.tokens", i, &strs[i]) != 0) goto done;
        } else {
            int len = snprintf(pad + i * 16, 16, "[PAD%" PRIu64 "]", i);
            strs[i] = (gguf_str){pad + i * 16, (uint64_t)len};
        }
        scores[i] = 0.0f;
        if (i < n_scores && st == GGUF_TYPE_FLOAT32) memcpy(&scores[i], (const char *)sdata + 4 * i, 4);
        types[i] = i < n_src ? 1 : 5; /* NORMAL, UNUSED */
        if (i < n_types && tt == GGUF_TYPE_INT32) memcpy(&types[i], (const char *)tdata + 4 * i, 4);
    }
    if (gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, n) != 0) goto done;
    if (sdata && gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, n) != 0) goto done;
    if (gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, n) != 0) goto done;
    rc = 0;
done:
    free(strs);
    free(pad);
    free(scores);
    free(types);
    return rc;
}

/* -------------------------------------------------------------- writing */

static int write_metadata(gguf_writer *w, const synth_opts *o, int32_t file_type) {
    char key[128], name[128];
    const char *a = o->arch;
    snprintf(name, sizeof name, "synthetic-%s-%" PRId64 "x%" PRId64, a, o->layers, o->dim);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    int rc = gguf_writer_set_str(w, "general.architecture", a, strlen(a)) ||
             gguf_writer_set_str(w, "general.name", name, strlen(name)) ||
             gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type) ||
             gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)o->ctx) ||
             gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)o->dim) ||
             gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o->layers) ||
             gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)o->ffn) ||
             gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)(o->dim / o->heads)) ||
             gguf_writer_set_f32(w, KEY("rope.freq_base"), o->rope_base) ||
             gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)o->heads) ||
             gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)o->kv_heads) ||
             gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
#undef KEY
    return rc ? -1 : 0;
}

/* llama.cpp's LLAMA_FTYPE numbers for general.file_type. */
static int32_t file_type_of(int32_t dtype, int mix) {
    if (mix) return 15; /* MOSTLY_Q4_K_M */
    switch (dtype) {
    case TSR_DTYPE_F32: return 0;
    case TSR_DTYPE_F16: return 1;
    case TSR_DTYPE_Q4_0: return 2;
    case TSR_DTYPE_Q4_1: return 3;
    case TSR_DTYPE_Q8_0: return 7;
    case TSR_DTYPE_Q5_0: return 8;
    case TSR_DTYPE_Q5_1: return 9;
    case TSR_DTYPE_Q2_K: return 10;
    case TSR_DTYPE_Q3_K: return 11; /* Q3_K_S */
    case TSR_DTYPE_Q4_K: return 14; /* Q4_K_S */
    case TSR_DTYPE_Q5_K: return 16; /* Q5_K_S */
    case TSR_DTYPE_Q6_K: return 18;
    case TSR_DTYPE_BF16: return 32;
    default: return 0;
    }
}

/* Generate one tensor row block by row block into its final type. */
static void *make_tensor(const synth_tensor *t, uint64_t seed, int idx, uint64_t *size) {
    const dtype_traits *tr = dtype_traits_get(t->dtype);
    int64_t rows = t->n_dims == 2 ? t->ne[1] : 1;
    size_t row_bytes = dtype_row_bytes(t->dtype, t->ne[0]);
    *size = (uint64_t)row_bytes * (uint64_t)rows;
    unsigned char *out = malloc(*size);
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    if (!out || !row) {
        free(out);
        free(row);
        return NULL;
    }
    uint64_t state = seed ^ (0x5851f42d4c957f2dull * (uint64_t)(idx + 1));
    for (int64_t r = 0; r < rows; r++) {
        if (t->std == 0.0f)
            for (int64_t i = 0; i < t->ne[0]; i++) row[i] = 1.0f;
        else
            fill_uniform(row, t->ne[0], t->std, &state);
        if (t->dtype == TSR_DTYPE_F32)
            memcpy(out + (size_t)r * row_bytes, row, row_bytes);
        else
            tr->from_f32(row, out + (size_t)r * row_bytes, t->ne[0]);
    }
    free(row);
    return out;
}

int main(int argc, char **argv) {
    synth_opts o;
    if (parse_args(argc, argv, &o) != 0) return 2;
    int mix = !strcmp(o.type, "Q4_K_M") || !strcmp(o.type, "q4_k_m");
    int32_t base = mix ? TSR_DTYPE_Q4_K : dtype_from_name(o.type);
    const dtype_traits *tr = base >= 0 ? dtype_traits_get(base) : NULL;
    if (!tr || !tr->supported || (base != TSR_DTYPE_F32 && !tr->from_f32)) {
        fprintf(stderr, "tessera-synth: --type '%s' cannot be produced (see --help)\n", o.type);
        return 2;
    }
    gguf_file *src = gguf_open(o.vocab_from);
    if (!src) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        return 1;
    }
    gguf_writer *w = gguf_writer_new();
    synth_tensor *ts = calloc((size_t)(o.layers * 16 + 8), sizeof *ts);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", o.out);
    FILE *fp = NULL;
    int n = 0, rc = 1;
    if (!w || !ts) {
        fprintf(stderr, "tessera-synth: out of memory\n");
        goto done;
    }
    if (write_metadata(w, &o, file_type_of(base, mix)) != 0 || copy_vocab(w, src, &o.vocab) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    if (plan_tensors(&o, base, mix, ts, &n) != 0) goto done;
    for (int i = 0; i < n; i++) {
        if (gguf_writer_add_tensor(w, ts[i].name, ts[i].dtype, ts[i].n_dims, ts[i].ne, NULL) != 0) {
            fprintf(stderr, "tessera-synth: %s\n", error_get());
            goto done;
        }
    }
    fp = fopen(tmp, "wb");
    if (!fp) {
        fprintf(stderr, "tessera-synth: cannot write '%s': %s\n", tmp, strerror(errno));
        goto done;
    }
    if (gguf_writer_begin(w, fp) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    for (int i = 0; i < n; i++) {
        uint64_t size;
        void *data = make_tensor(&ts[i], o.seed, i, &size);
        if (!data) {
            fprintf(stderr, "tessera-synth: out of memory for tensor '%s'\n", ts[i].name);
            goto done;
        }
        int wrc = gguf_writer_write_tensor_data(w, fp, i, data, size);
        free(data);
        if (wrc != 0) {
            fprintf(stderr, "tessera-synth: %s\n", error_get());
            goto done;
        }
        if (!o.quiet) fprintf(stderr, "\rtessera-synth: %d/%d tensors", i + 1, n);
    }
    if (gguf_writer_finish(w, fp) != 0) {
        fprintf(stderr, "tessera-synth: %s\n", error_get());
        goto done;
    }
    if (fclose(fp) != 0) {
        fp = NULL;
        fprintf(stderr, "tessera-synth: writing '%s' failed: %s\n", tmp, strerror(errno));
        goto done;
    }
    fp = NULL;
    if (rename(tmp, o.out) != 0) {
        fprintf(stderr, "tessera-synth: cannot rename '%s' to '%s': %s\n", tmp, o.out, strerror(errno));
        goto done;
    }
    if (!o.quiet) fprintf(stderr, "\ntessera-synth: wrote %s\n", o.out);
    rc = 0;
done:
    if (fp) fclose(fp);
    if (rc != 0) unlink(tmp);
    free(ts);
    gguf_writer_free(w);
    gguf_close(src);
    return rc;
}
