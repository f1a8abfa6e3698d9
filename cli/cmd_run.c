/* tessera run — generate text from a prompt, streaming it as it comes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "cli_util.h"
#include "commands.h"

typedef struct run_opts {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    const char *devices;
    const char *plugin_dirs[CLI_MAX_PLUGIN_DIRS];
    int n_plugin_dirs;
    long n_predict, n_threads, n_ctx, n_batch, n_gpu_layers;
    tessera_kv_type kv_type;
    tessera_sampler_params sp;
    int verbose, explain, no_echo;
} run_opts;

static void run_usage(FILE *out) {
    fprintf(out,
            "usage: tessera run -m MODEL (-p PROMPT | -f FILE) [options]\n"
            "\n"
            "Generates text after the prompt and streams it to stdout; load time and\n"
            "prompt / generation speed go to stderr. Ctrl-C stops generation.\n"
            "\n"
            "  -m, --model FILE        GGUF model\n"
            "  -p, --prompt TEXT       prompt text\n"
            "  -f, --file FILE         read the prompt from FILE\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1: until the\n"
            "                          end of text or the context is full)\n"
            "  -t, --threads N         CPU threads (default: all)\n"
            "  -c, --ctx-size N        context size (default: the model's, at most 4096)\n"
            "  -b, --batch-size N      prompt tokens per micro-batch (default 512)\n"
            "      --seed N            sampling seed (default: random)\n"
            "      --temp T            temperature (default 0.8; 0: greedy)\n"
            "      --top-k N           top-k (default 40; 0: off)\n"
            "      --top-p P           top-p (default 0.95; 1: off)\n"
            "      --min-p P           min-p (default 0.05; 0: off)\n"
            "      --repeat-penalty R  repetition penalty (default 1: off)\n"
            "      --repeat-last-n N   tokens the penalty looks back at (default 64)\n"
            "      --kv-type TYPE      KV cache type: f16 (default) or f32\n"
            "      --device LIST       devices to use, e.g. vulkan0,cpu-avx0 (see\n"
            "                          'tessera devices')\n"
            "  -ngl, --n-gpu-layers N  layers to put on the GPU device (default 0)\n"
            "      --plugin-dir DIR    also look for backend plugins in DIR\n"
            "      --no-echo           do not print the prompt before the output\n"
            "      --verbose           model, context and device details on stderr\n"
            "      --explain           print where each part of the graph runs\n"
            "  -h, --help              this text\n");
}

/* 0 ok, 1 help printed, -1 error printed. */
static int run_parse(int argc, char **argv, run_opts *o) {
    const char *cmd = "tessera run";
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_batch = 512;
    o->kv_type = TESSERA_KV_F16;
    o->sp = tessera_sampler_default_params();
    long seed = -1, last_n = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            run_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (!strcmp(a, "--explain")) { o->explain = 1; continue; }
        if (!strcmp(a, "--no-echo")) { o->no_echo = 1; continue; }
        /* Everything else takes a value. */
        static const char *const valued[] = {
            "-m", "--model", "-p", "--prompt", "-f", "--file", "-n", "--n-predict", "-t", "--threads",
            "-c", "--ctx-size", "-b", "--batch-size", "--seed", "--temp", "--top-k", "--top-p",
            "--min-p", "--repeat-penalty", "--repeat-last-n", "--kv-type", "--device", "-ngl",
            "--n-gpu-layers", "--plugin-dir", NULL};
        const char *v = cli_option_value(cmd, valued, argc, argv, &i);
        if (!v) return -1;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->prompt_file = v;
        else if (!strcmp(a, "--device")) o->devices = v;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            rc = cli_flag_long(cmd, a, v, -1, INT32_MAX, &o->n_predict);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = cli_flag_long(cmd, a, v, 1, 1024, &o->n_threads);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = cli_flag_long(cmd, a, v, 1, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = cli_flag_long(cmd, a, v, 1, 1 << 20, &o->n_batch);
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
            rc = cli_flag_long(cmd, a, v, 0, 100000, &o->n_gpu_layers);
        else if (!strcmp(a, "--seed")) rc = cli_flag_long(cmd, a, v, 0, (long)UINT32_MAX - 1, &seed);
        else if (!strcmp(a, "--temp")) rc = cli_flag_float(cmd, a, v, 0.0f, 1e6f, &o->sp.temp);
        else if (!strcmp(a, "--top-k")) {
            long k = 0;
            rc = cli_flag_long(cmd, a, v, 0, INT32_MAX, &k);
            if (rc == 0) o->sp.top_k = (int32_t)k;
        } else if (!strcmp(a, "--top-p")) rc = cli_flag_float(cmd, a, v, 0.0f, 1.0f, &o->sp.top_p);
        else if (!strcmp(a, "--min-p")) rc = cli_flag_float(cmd, a, v, 0.0f, 1.0f, &o->sp.min_p);
        else if (!strcmp(a, "--repeat-penalty"))
            rc = cli_flag_float(cmd, a, v, 0.0f, 1e6f, &o->sp.penalty_repeat);
        else if (!strcmp(a, "--repeat-last-n")) rc = cli_flag_long(cmd, a, v, 0, INT32_MAX, &last_n);
        else if (!strcmp(a, "--kv-type")) rc = cli_flag_kv_type(cmd, v, &o->kv_type);
        else if (!strcmp(a, "--plugin-dir"))
            rc = cli_plugin_dir_add(cmd, o->plugin_dirs, &o->n_plugin_dirs, v);
        if (rc) return -1;
    }
    if (seed >= 0) o->sp.seed = (uint32_t)seed;
    if (last_n >= 0) o->sp.penalty_last_n = (int32_t)last_n;
    if (!o->model) {
        fprintf(stderr, "tessera run: -m MODEL is required (see 'tessera run --help')\n");
        return -1;
    }
    if (!o->prompt && !o->prompt_file) {
        fprintf(stderr, "tessera run: a prompt is required: -p TEXT or -f FILE\n");
        return -1;
    }
    if (o->prompt && o->prompt_file) {
        fprintf(stderr, "tessera run: give either -p or -f, not both\n");
        return -1;
    }
    return 0;
}

typedef struct progress_state {
    int shown;
    int last_pct;
} progress_state;

static bool on_progress(float p, void *user) {
    progress_state *st = user;
    int pct = (int)(p * 100.0f);
    if (pct != st->last_pct) {
        fprintf(stderr, "\rloading model: %3d%%", pct);
        st->last_pct = pct;
        st->shown = 1;
    }
    return !tessera_aborted();
}

static void print_timings(const tessera_context *ctx) {
    tessera_timings t;
    tessera_context_timings(ctx, &t);
    fprintf(stderr, "\n");
    fprintf(stderr, "load time:   %10.2f ms\n", t.load_ms);
    fprintf(stderr, "prompt:      %10.2f ms / %lld tokens (%.2f tokens/s)\n", t.prompt_ms,
            (long long)t.n_prompt, t.prompt_ms > 0 ? 1e3 * (double)t.n_prompt / t.prompt_ms : 0.0);
    fprintf(stderr, "generation:  %10.2f ms / %lld tokens (%.2f tokens/s)\n", t.gen_ms, (long long)t.n_gen,
            t.gen_ms > 0 ? 1e3 * (double)t.n_gen / t.gen_ms : 0.0);
}

static int generate(const run_opts *o, tessera_model *model, tessera_context *ctx, const char *prompt,
                    size_t prompt_len) {
    int32_t n_ctx = (int32_t)tessera_context_n_ctx(ctx);
    int32_t n = tessera_tokenize(model, prompt, prompt_len, NULL, 0, true, true);
    if (n == INT32_MIN) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        return 1;
    }
    if (n < 0) n = -n;
    if (n == 0) {
        fprintf(stderr, "tessera run: the prompt gives no tokens\n");
        return 1;
    }
    if (n >= n_ctx) {
        fprintf(stderr, "tessera run: the prompt has %d tokens, the context only %d (-c)\n", n, n_ctx);
        return 1;
    }
    tessera_token *toks = malloc((size_t)n * sizeof *toks);
    tessera_sampler *smp = tessera_sampler_new(tessera_model_n_vocab(model), &o->sp);
    int rc = 1;
    if (!toks || !smp) {
        fprintf(stderr, "tessera run: %s\n", smp ? "out of memory" : tessera_last_error());
        goto done;
    }
    tessera_tokenize(model, prompt, prompt_len, toks, n, true, true);
    for (int32_t i = 0; i < n; i++) tessera_sampler_accept(smp, toks[i]);
    if (o->verbose)
        fprintf(stderr, "tessera run: prompt of %d tokens, seed %u\n", n, tessera_sampler_seed(smp));
    if (!o->no_echo) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    if (tessera_decode(ctx, toks, n, 0, 0) != 0) {
        if (tessera_aborted()) {
            rc = 130;
            goto done;
        }
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    int32_t pos = n;
    char piece[256];
    for (long i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
        if (tessera_aborted()) {
            rc = 130;
            goto done;
        }
        tessera_token t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
        tessera_sampler_accept(smp, t);
        if (tessera_token_is_eog(model, t)) break;
        int32_t len = tessera_token_to_piece(model, t, piece, sizeof piece, false);
        if (len > 0) {
            fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
        }
        if (o->n_predict >= 0 && i + 1 == o->n_predict) break;
        if (pos >= n_ctx) {
            fprintf(stderr, "\ntessera run: context full (%d tokens), stopping\n", n_ctx);
            break;
        }
        if (tessera_decode(ctx, &t, 1, pos, 0) != 0) {
            if (tessera_aborted()) {
                rc = 130;
                goto done;
            }
            fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
            goto done;
        }
        pos++;
    }
    rc = 0;
done:
    fputc('\n', stdout);
    fflush(stdout);
    tessera_sampler_free(smp);
    free(toks);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    int pr = run_parse(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;

    struct stat st;
    if (stat(o.model, &st) != 0) {
        fprintf(stderr, "tessera run: cannot open model '%s': %s\n", o.model, strerror(errno));
        return 1;
    }
    char *file_prompt = NULL;
    size_t prompt_len = 0;
    if (o.prompt_file) {
        file_prompt = cli_read_file("tessera run", "prompt file", o.prompt_file, &prompt_len);
        if (!file_prompt) return 1;
    } else {
        prompt_len = strlen(o.prompt);
    }
    const char *prompt = file_prompt ? file_prompt : o.prompt;

    tessera_init_params ip = {.plugin_dirs = o.plugin_dirs, .n_plugin_dirs = o.n_plugin_dirs,
                              .verbosity = o.verbose};
    tessera_model *model = NULL;
    tessera_context *ctx = NULL;
    int rc = 1;
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    cli_abort_on_sigint();
    progress_state ps = {0, -1};
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = o.devices;
    mp.n_gpu_layers = (int32_t)o.n_gpu_layers;
    /* A progress line only for models that take a moment to map. */
    if (st.st_size > (64 << 20) && isatty(STDERR_FILENO)) {
        mp.progress = on_progress;
        mp.progress_user = &ps;
    }
    model = tessera_model_load(o.model, &mp);
    if (ps.shown) fprintf(stderr, "\n");
    if (!model) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    if (o.verbose) fprintf(stderr, "tessera run: model %s\n", tessera_model_desc(model));
    tessera_context_params cp = tessera_context_default_params();
    long n_ctx = o.n_ctx;
    if (n_ctx == 0) {
        n_ctx = tessera_model_n_ctx_train(model);
        if (n_ctx > 4096) n_ctx = 4096;
    }
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)o.n_batch;
    cp.n_threads = (int32_t)o.n_threads;
    cp.kv_type = o.kv_type;
    cp.explain = o.explain;
    cp.verbose = o.verbose;
    ctx = tessera_context_new(model, &cp);
    if (!ctx) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    rc = generate(&o, model, ctx, prompt, prompt_len);
    if (rc == 130) fprintf(stderr, "\ntessera run: interrupted\n");
    if (rc == 0 || rc == 130) print_timings(ctx);
done:
    tessera_context_free(ctx);
    tessera_model_free(model);
    tessera_shutdown();
    free(file_prompt);
    return rc;
}
