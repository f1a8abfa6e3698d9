/*
 * tessera perplexity — llama.cpp's perplexity over a text file.
 *
 * The whole text is tokenized with BOS and cut into chunks of n_ctx tokens;
 * each chunk's first token is replaced by BOS, the chunk is evaluated from an
 * empty cache, and the negative log-likelihood of the next token is averaged
 * over the second half of every chunk (positions n_ctx/2 .. n_ctx-2 predict
 * n_ctx/2+1 .. n_ctx-1). PPL = exp(mean NLL).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tessera/tessera.h>

#include "cli_util.h"
#include "commands.h"

typedef struct ppl_opts {
    const char *model;
    const char *file;
    const char *devices;
    const char *plugin_dirs[CLI_MAX_PLUGIN_DIRS];
    int n_plugin_dirs;
    long n_ctx, n_batch, n_threads, n_gpu_layers, n_chunks;
    tessera_kv_type kv_type;
    int verbose, explain;
} ppl_opts;

static void ppl_usage(FILE *out) {
    fprintf(out,
            "usage: tessera perplexity -m MODEL -f FILE [-c N] [options]\n"
            "\n"
            "Measures perplexity as llama.cpp does: chunks of N tokens (each starting\n"
            "with BOS), scored on the second half of each chunk. Prints the running\n"
            "estimate after every chunk and the final PPL.\n"
            "\n"
            "  -m, --model FILE        GGUF model\n"
            "  -f, --file FILE         text to score\n"
            "  -c, --ctx-size N        tokens per chunk (default 512, at most the model's context)\n"
            "  -b, --batch-size N      tokens per micro-batch (default: N)\n"
            "      --chunks N          score at most N chunks (default: all)\n"
            "  -t, --threads N         CPU threads (default: all)\n"
            "      --kv-type TYPE      KV cache type: f16 (default) or f32\n"
            "      --device LIST       devices to use (see 'tessera devices')\n"
            "  -ngl, --n-gpu-layers N  layers to put on the GPU device (default 0)\n"
            "      --plugin-dir DIR    also look for backend plugins in DIR\n"
            "      --verbose           model and context details on stderr\n"
            "      --explain           print where each part of the graph runs\n"
            "  -h, --help              this text\n");
}

static int ppl_parse(int argc, char **argv, ppl_opts *o) {
    const char *cmd = "tessera perplexity";
    memset(o, 0, sizeof *o);
    o->n_ctx = 512;
    o->kv_type = TESSERA_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ppl_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (!strcmp(a, "--explain")) { o->explain = 1; continue; }
        static const char *const valued[] = {"-m", "--model", "-f", "--file", "-c", "--ctx-size", "-b",
                                             "--batch-size", "--chunks", "-t", "--threads", "--kv-type",
                                             "--device", "-ngl", "--n-gpu-layers", "--plugin-dir", NULL};
        const char *v = cli_option_value(cmd, valued, argc, argv, &i);
        if (!v) return -1;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->file = v;
        else if (!strcmp(a, "--device")) o->devices = v;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = cli_flag_long(cmd, a, v, 4, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = cli_flag_long(cmd, a, v, 1, 1 << 24, &o->n_batch);
        else if (!strcmp(a, "--chunks")) rc = cli_flag_long(cmd, a, v, 1, 1 << 30, &o->n_chunks);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = cli_flag_long(cmd, a, v, 1, 1024, &o->n_threads);
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
            rc = cli_flag_long(cmd, a, v, 0, 100000, &o->n_gpu_layers);
        else if (!strcmp(a, "--kv-type")) rc = cli_flag_kv_type(cmd, v, &o->kv_type);
        else if (!strcmp(a, "--plugin-dir"))
            rc = cli_plugin_dir_add(cmd, o->plugin_dirs, &o->n_plugin_dirs, v);
        if (rc) return -1;
    }
    if (!o->model) {
        fprintf(stderr, "tessera perplexity: -m MODEL is required (see 'tessera perplexity --help')\n");
        return -1;
    }
    if (!o->file) {
        fprintf(stderr, "tessera perplexity: -f FILE is required\n");
        return -1;
    }
    if (o->n_batch == 0) o->n_batch = o->n_ctx;
    return 0;
}

/* -log softmax(logits)[target], in double. */
static double token_nll(const float *logits, int32_t n_vocab, int32_t target) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)max);
    return log(sum) - ((double)logits[target] - (double)max);
}

static int score(const ppl_opts *o, tessera_model *model, tessera_context *ctx, const tessera_token *toks,
                 int32_t n_toks) {
    const int32_t n_ctx = (int32_t)o->n_ctx, n_vocab = tessera_model_n_vocab(model);
    int32_t n_chunks = n_toks / n_ctx;
    if (o->n_chunks > 0 && o->n_chunks < n_chunks) n_chunks = (int32_t)o->n_chunks;
    if (n_chunks == 0) {
        fprintf(stderr, "tessera perplexity: '%s' has %d tokens, fewer than one chunk of %d (-c)\n", o->file,
                n_toks, n_ctx);
        return 1;
    }
    tessera_token *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!chunk) {
        fprintf(stderr, "tessera perplexity: out of memory\n");
        return 1;
    }
    const int32_t first = n_ctx / 2;
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    int rc = 1;
    printf("perplexity: %d tokens, %d chunks of %d, scoring positions %d..%d\n", n_toks, n_chunks, n_ctx,
           first, n_ctx - 2);
    fflush(stdout);
    for (int32_t c = 0; c < n_chunks; c++) {
        memcpy(chunk, toks + (size_t)c * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        tessera_token bos = tessera_token_bos(model);
        if (bos >= 0) chunk[0] = bos;
        if (tessera_decode(ctx, chunk, n_ctx, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
            fprintf(stderr, "\ntessera perplexity: chunk %d: %s\n", c + 1,
                    tessera_aborted() ? "interrupted" : tessera_last_error());
            goto done;
        }
        for (int32_t j = first; j < n_ctx - 1; j++) {
            double v = token_nll(tessera_logits(ctx, j), n_vocab, chunk[j + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        printf("[%d] %.4f\n", c + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    double mean = nll / (double)count;
    double var = nll2 / (double)count - mean * mean;
    double err = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0.0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", exp(mean), exp(mean) * err);
    rc = 0;
done:
    free(chunk);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    ppl_opts o;
    int pr = ppl_parse(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;
    struct stat st;
    if (stat(o.model, &st) != 0) {
        fprintf(stderr, "tessera perplexity: cannot open model '%s': %s\n", o.model, strerror(errno));
        return 1;
    }
    size_t text_len = 0;
    char *text = cli_read_file("tessera perplexity", NULL, o.file, &text_len);
    if (!text) return 1;

    tessera_init_params ip = {.plugin_dirs = o.plugin_dirs, .n_plugin_dirs = o.n_plugin_dirs,
                              .verbosity = o.verbose};
    tessera_model *model = NULL;
    tessera_context *ctx = NULL;
    tessera_token *toks = NULL;
    int rc = 1;
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    cli_abort_on_sigint();
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = o.devices;
    mp.n_gpu_layers = (int32_t)o.n_gpu_layers;
    model = tessera_model_load(o.model, &mp);
    if (!model) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    if (o.n_ctx > tessera_model_n_ctx_train(model))
        fprintf(stderr, "tessera perplexity: warning: -c %ld exceeds the model's training context %d\n", o.n_ctx,
                tessera_model_n_ctx_train(model));
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)o.n_ctx;
    cp.n_batch = (uint32_t)o.n_batch;
    cp.n_threads = (int32_t)o.n_threads;
    cp.kv_type = o.kv_type;
    cp.explain = o.explain;
    cp.verbose = o.verbose;
    ctx = tessera_context_new(model, &cp);
    if (!ctx) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    if (text_len > (size_t)INT32_MAX) {
        fprintf(stderr, "tessera perplexity: '%s' is too large\n", o.file);
        goto done;
    }
    int32_t n = tessera_tokenize(model, text, text_len, NULL, 0, true, false);
    if (n == INT32_MIN) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    if (n < 0) n = -n;
    toks = malloc((size_t)(n > 0 ? n : 1) * sizeof *toks);
    if (!toks) {
        fprintf(stderr, "tessera perplexity: out of memory for %d tokens\n", n);
        goto done;
    }
    n = tessera_tokenize(model, text, text_len, toks, n, true, false);
    if (n < 0) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    rc = score(&o, model, ctx, toks, n);
    if (o.verbose) {
        tessera_timings t;
        tessera_context_timings(ctx, &t);
        fprintf(stderr, "tessera perplexity: %lld tokens in %.2f s (%.2f tokens/s)\n", (long long)t.n_prompt,
                t.prompt_ms / 1e3, t.prompt_ms > 0 ? 1e3 * (double)t.n_prompt / t.prompt_ms : 0.0);
    }
done:
    free(toks);
    tessera_context_free(ctx);
    tessera_model_free(model);
    tessera_shutdown();
    free(text);
    return rc;
}
