/*
 * tessera bench — prompt-processing and generation speed, llama-bench style.
 *
 * For every model x device list x -ngl x thread count it runs each prompt
 * test ("pp512": decode 512 random tokens in one call from an empty cache)
 * and each generation test ("tg128": decode 128 tokens one by one from an
 * empty cache) -r times after one untimed warm-up, and prints tokens/s as
 * mean ± sample standard deviation over the repetitions.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "commands.h"

enum { MAX_LIST = 32 };

typedef enum { OUT_MD, OUT_JSON, OUT_CSV } out_format;

typedef struct int_list {
    int n;
    int v[MAX_LIST];
} int_list;

typedef struct str_list {
    int n;
    const char *v[MAX_LIST];
} str_list;

typedef struct bench_opts {
    str_list models, devices, plugin_dirs;
    int_list prompts, gens, threads, ngl;
    int reps, n_batch, warmup, verbose;
    tessera_kv_type kv_type;
    out_format out;
} bench_opts;

/* One measured test. */
typedef struct bench_result {
    const char *model_path;
    char model_name[256];
    uint64_t model_bytes, model_params;
    const char *devices;
    int ngl, threads, n_prompt, n_gen, reps;
    double ts_mean, ts_sd;
    double samples[64];
} bench_result;

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera bench -m MODEL [-m MODEL ...] [options]\n"
            "\n"
            "Measures prompt processing (ppN: N tokens in one decode call) and\n"
            "generation (tgN: N single-token decode calls) in tokens/s, as\n"
            "mean ± standard deviation over the repetitions. Lists are\n"
            "comma-separated and every combination is run.\n"
            "\n"
            "  -m, --model FILE        GGUF model (repeat for several, or a comma list)\n"
            "  -p, --n-prompt LIST     prompt sizes (default 512; 0: none)\n"
            "  -n, --n-gen LIST        generation sizes (default 128; 0: none)\n"
            "  -t, --threads LIST      CPU thread counts (default: all online CPUs)\n"
            "  -r, --repetitions N     timed runs per test (default 3, at most 64)\n"
            "  -b, --batch-size N      tokens per micro-batch (default 512)\n"
            "      --device LIST       device list as for 'tessera run' (e.g. cpu-avx0);\n"
            "                          repeat the flag to compare device lists\n"
            "  -ngl, --n-gpu-layers LIST  layers on the GPU device (default 0)\n"
            "      --kv-type TYPE      KV cache type f16 (default) or f32\n"
            "  -o, --output FORMAT     md (default), json or csv\n"
            "      --no-warmup         skip the untimed warm-up run\n"
            "      --plugin-dir DIR    also look for backend plugins in DIR\n"
            "      --verbose           progress and model details on stderr\n"
            "  -h, --help              this text\n");
}

/* "512,1024" -> list; each value in [lo, hi]. */
static int parse_int_list(const char *flag, const char *s, int lo, int hi, int_list *out) {
    out->n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ',')) {
            fprintf(stderr, "tessera bench: %s '%s': expected comma-separated integers in %d..%d\n", flag, s, lo,
                    hi);
            return -1;
        }
        if (out->n == MAX_LIST) {
            fprintf(stderr, "tessera bench: %s '%s': more than %d values\n", flag, s, MAX_LIST);
            return -1;
        }
        out->v[out->n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (out->n == 0) {
        fprintf(stderr, "tessera bench: %s: empty list\n", flag);
        return -1;
    }
    return 0;
}

static int push_str(const char *flag, str_list *l, const char *v) {
    if (l->n == MAX_LIST) {
        fprintf(stderr, "tessera bench: %s given more than %d times\n", flag, MAX_LIST);
        return -1;
    }
    l->v[l->n++] = v;
    return 0;
}

/* -m accepts a comma list too: split it in place (argv strings are ours). */
static int push_models(str_list *l, char *arg) {
    for (char *tok = strtok(arg, ","); tok; tok = strtok(NULL, ","))
        if (push_str("-m", l, tok) < 0) return -1;
    return 0;
}

static int is_value_flag(const char *a) {
    static const char *const flags[] = {"-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-t", "--threads",
                                        "-r", "--repetitions", "-b", "--batch-size", "--device", "-ngl",
                                        "--n-gpu-layers", "--kv-type", "-o", "--output", "--plugin-dir"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strcmp(a, flags[i])) return 1;
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->prompts = (int_list){1, {512}};
    o->gens = (int_list){1, {128}};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = (int_list){1, {ncpu > 0 ? (int)ncpu : 1}};
    o->ngl = (int_list){1, {0}};
    o->reps = 3;
    o->n_batch = 512;
    o->warmup = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--no-warmup")) { o->warmup = 0; continue; }
        if (!strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (!is_value_flag(a)) {
            fprintf(stderr, "tessera bench: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tessera bench: %s needs a value (see --help)\n", a);
            return -1;
        }
        char *v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) rc = push_models(&o->models, v);
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) rc = parse_int_list(a, v, 0, 1 << 20, &o->prompts);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) rc = parse_int_list(a, v, 0, 1 << 20, &o->gens);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) rc = parse_int_list(a, v, 1, 1024, &o->threads);
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers")) rc = parse_int_list(a, v, 0, 100000, &o->ngl);
        else if (!strcmp(a, "--device")) rc = push_str(a, &o->devices, v);
        else if (!strcmp(a, "--plugin-dir")) rc = push_str(a, &o->plugin_dirs, v);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions") || !strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            int_list one;
            int is_r = a[1] == 'r' || a[2] == 'r';
            rc = parse_int_list(a, v, 1, is_r ? 64 : 1 << 20, &one);
            if (!rc && one.n != 1) {
                fprintf(stderr, "tessera bench: %s takes one value, got '%s'\n", a, v);
                rc = -1;
            }
            if (!rc) *(is_r ? &o->reps : &o->n_batch) = one.v[0];
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16")) o->kv_type = TESSERA_KV_F16;
            else if (!strcmp(v, "f32")) o->kv_type = TESSERA_KV_F32;
            else {
                fprintf(stderr, "tessera bench: --kv-type '%s': expected f16 or f32\n", v);
                rc = -1;
            }
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!strcmp(v, "md")) o->out = OUT_MD;
            else if (!strcmp(v, "json")) o->out = OUT_JSON;
            else if (!strcmp(v, "csv")) o->out = OUT_CSV;
            else {
                fprintf(stderr, "tessera bench: -o '%s': expected md, json or csv\n", v);
                rc = -1;
            }
        } else {
            fprintf(stderr, "tessera bench: unknown option '%s' (see --help)\n", a);
            rc = -1;
        }
        if (rc) return -1;
    }
    if (o->models.n == 0) {
        fprintf(stderr, "tessera bench: no model given (-m FILE; see --help)\n");
        return -1;
    }
    for (int i = 0; i < o->models.n; i++) {
        if (access(o->models.v[i], R_OK) != 0) {
            fprintf(stderr, "tessera bench: cannot read model '%s': %s\n", o->models.v[i], strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------ timing */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static tessera_token random_token(int32_t n_vocab) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (tessera_token)(rng_state % (uint64_t)n_vocab);
}

/* Decode n random tokens in one call from an empty cache; seconds or < 0. */
static double run_prompt(tessera_context *ctx, int32_t n_vocab, tessera_token *buf, int n) {
    for (int i = 0; i < n; i++) buf[i] = random_token(n_vocab);
    if (tessera_kv_truncate(ctx, 0) != 0) return -1.0;
    double t0 = now_s();
    if (tessera_decode(ctx, buf, n, 0, 0) != 0) return -1.0;
    return now_s() - t0;
}

/* Decode n tokens one at a time from an empty cache; seconds or < 0. */
static double run_gen(tessera_context *ctx, int32_t n_vocab, tessera_token first, int n) {
    if (tessera_kv_truncate(ctx, 0) != 0) return -1.0;
    tessera_token tok = first >= 0 ? first : random_token(n_vocab);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (tessera_decode(ctx, &tok, 1, i, 0) != 0) return -1.0;
        tok = random_token(n_vocab);
    }
    return now_s() - t0;
}

static void summarize(bench_result *r) {
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < r->reps; i++) sum += r->samples[i];
    r->ts_mean = sum / r->reps;
    for (int i = 0; i < r->reps; i++) sq += (r->samples[i] - r->ts_mean) * (r->samples[i] - r->ts_mean);
    r->ts_sd = r->reps > 1 ? sqrt(sq / (r->reps - 1)) : 0.0;
}

/* ------------------------------------------------------------ output */

static void human_size(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= (1ull << 30)) snprintf(buf, size, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else snprintf(buf, size, "%.2f MiB", (double)bytes / (double)(1ull << 20));
}

static void test_name(const bench_result *r, char *buf, size_t size) {
    if (r->n_prompt > 0) snprintf(buf, size, "pp%d", r->n_prompt);
    else snprintf(buf, size, "tg%d", r->n_gen);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void print_header(out_format fmt) {
    if (fmt == OUT_MD) {
        printf("| model | size | params | devices | ngl | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    } else if (fmt == OUT_CSV) {
        printf("model,model_size,model_n_params,devices,n_gpu_layers,n_threads,n_prompt,n_gen,reps,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
    fflush(stdout);
}

static void print_result(out_format fmt, const bench_result *r, int first) {
    char size[32], test[32];
    human_size(r->model_bytes, size, sizeof size);
    test_name(r, test, sizeof test);
    if (fmt == OUT_MD) {
        double params = (double)r->model_params;
        printf("| %s | %s | %.2f %s | %s | %d | %d | %s | %.2f ± %.2f |\n", r->model_name, size,
               params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M", r->devices, r->ngl, r->threads, test, r->ts_mean, r->ts_sd);
    } else if (fmt == OUT_CSV) {
        printf("\"%s\",%llu,%llu,\"%s\",%d,%d,%d,%d,%d,%.4f,%.4f\n", r->model_name, (unsigned long long)r->model_bytes,
               (unsigned long long)r->model_params, r->devices, r->ngl, r->threads, r->n_prompt, r->n_gen, r->reps,
               r->ts_mean, r->ts_sd);
    } else {
        printf("%s  {\"model\": ", first ? "" : ",\n");
        json_str(stdout, r->model_name);
        printf(", \"model_path\": ");
        json_str(stdout, r->model_path);
        printf(", \"model_size\": %llu, \"model_n_params\": %llu, \"devices\": ", (unsigned long long)r->model_bytes,
               (unsigned long long)r->model_params);
        json_str(stdout, r->devices);
        printf(", \"n_gpu_layers\": %d, \"n_threads\": %d, \"n_prompt\": %d, \"n_gen\": %d, \"test\": \"%s\", "
               "\"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
               r->ngl, r->threads, r->n_prompt, r->n_gen, test, r->ts_mean, r->ts_sd);
        for (int i = 0; i < r->reps; i++) printf("%s%.4f", i ? ", " : "", r->samples[i]);
        printf("]}");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------- running */

static void on_sigint(int sig) {
    (void)sig;
    tessera_abort();
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* Run every test of one loaded model with one thread count. Returns 0, or
 * -1 after printing the error. */
static int bench_threads(const bench_opts *o, tessera_model *model, bench_result *proto, int threads,
                         int *first) {
    int max_p = 0, max_n = 0;
    for (int i = 0; i < o->prompts.n; i++) max_p = o->prompts.v[i] > max_p ? o->prompts.v[i] : max_p;
    for (int i = 0; i < o->gens.n; i++) max_n = o->gens.v[i] > max_n ? o->gens.v[i] : max_n;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)((max_p > max_n ? max_p : max_n) + 1);
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = threads;
    cp.kv_type = o->kv_type;
    cp.verbose = o->verbose != 0;
    tessera_context *ctx = tessera_context_new(model, &cp);
    if (!ctx) {
        fprintf(stderr, "tessera bench: %s: %s\n", proto->model_path, tessera_last_error());
        return -1;
    }
    const int32_t n_vocab = tessera_model_n_vocab(model);
    const tessera_token bos = tessera_token_bos(model);
    tessera_token *buf = malloc((size_t)(max_p > 0 ? max_p : 1) * sizeof *buf);
    int rc = buf ? 0 : -1;

    for (int kind = 0; kind < 2 && rc == 0; kind++) {
        const int_list *sizes = kind == 0 ? &o->prompts : &o->gens;
        for (int s = 0; s < sizes->n && rc == 0; s++) {
            int n = sizes->v[s];
            if (n <= 0) continue;
            bench_result r = *proto;
            r.threads = threads;
            r.n_prompt = kind == 0 ? n : 0;
            r.n_gen = kind == 1 ? n : 0;
            r.reps = o->reps;
            if (o->warmup) { /* as llama-bench: a short untimed run first */
                double w = kind == 0 ? run_prompt(ctx, n_vocab, buf, n < 32 ? n : 32) : run_gen(ctx, n_vocab, bos, 1);
                if (w < 0) rc = -1;
            }
            for (int i = 0; i < o->reps && rc == 0; i++) {
                double sec = kind == 0 ? run_prompt(ctx, n_vocab, buf, n) : run_gen(ctx, n_vocab, bos, n);
                if (sec < 0) rc = -1;
                else r.samples[i] = (double)n / (sec > 1e-9 ? sec : 1e-9);
                if (o->verbose && rc == 0)
                    fprintf(stderr, "bench: %s %s%d t=%d run %d: %.2f t/s\n", r.model_name, kind ? "tg" : "pp", n,
                            threads, i + 1, r.samples[i]);
            }
            if (rc) {
                fprintf(stderr, "tessera bench: %s: %s%d with %d threads: %s\n", proto->model_path, kind ? "tg" : "pp",
                        n, threads, tessera_last_error());
                break;
            }
            summarize(&r);
            print_result(o->out, &r, *first);
            *first = 0;
        }
    }
    free(buf);
    tessera_context_free(ctx);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;

    tessera_init_params ip = {.plugin_dirs = o.plugin_dirs.v, .n_plugin_dirs = o.plugin_dirs.n,
                              .verbosity = o.verbose};
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "tessera bench: %s\n", tessera_last_error());
        return 1;
    }
    signal(SIGINT, on_sigint);
    if (o.devices.n == 0) o.devices = (str_list){1, {NULL}};

    int status = 0, first = 1;
    print_header(o.out);
    for (int m = 0; m < o.models.n && !status; m++) {
        for (int d = 0; d < o.devices.n && !status; d++) {
            for (int g = 0; g < o.ngl.n && !status; g++) {
                tessera_model_params mp = tessera_model_default_params();
                mp.devices = o.devices.v[d];
                mp.n_gpu_layers = o.ngl.v[g];
                tessera_model *model = tessera_model_load(o.models.v[m], &mp);
                if (!model) {
                    fprintf(stderr, "tessera bench: %s: %s\n", o.models.v[m], tessera_last_error());
                    status = 1;
                    break;
                }
                bench_result proto;
                memset(&proto, 0, sizeof proto);
                proto.model_path = o.models.v[m];
                snprintf(proto.model_name, sizeof proto.model_name, "%s", base_name(o.models.v[m]));
                proto.model_bytes = tessera_model_size_bytes(model);
                proto.model_params = tessera_model_n_params(model);
                proto.devices = o.devices.v[d] ? o.devices.v[d] : "default";
                proto.ngl = o.ngl.v[g];
                if (o.verbose) fprintf(stderr, "bench: %s: %s\n", proto.model_name, tessera_model_desc(model));
                for (int t = 0; t < o.threads.n && !status; t++)
                    if (bench_threads(&o, model, &proto, o.threads.v[t], &first) != 0) status = 1;
                tessera_model_free(model);
                if (tessera_aborted()) status = 130;
            }
        }
    }
    if (o.out == OUT_JSON) printf("%s]\n", first ? "" : "\n");
    tessera_shutdown();
    return status;
}
