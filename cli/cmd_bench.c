/*
 * tessera bench — prompt-processing and generation speed, llama-bench style.
 *
 * For every model x device list x -ngl x thread count it runs each prompt
 * test ("pp512": decode 512 random tokens in one call from an empty cache)
 * and each generation test ("tg128": decode 128 tokens one by one from an
 * empty cache) -r times after one untimed warm-up, and prints tokens/s as
 * mean ± sample standard deviation over the repetitions. With --mmproj and
 * --image/--audio it also times the projector's encoder on each medium
 * (the graph's time per encode, as llama-mtmd-cli prints "image slice
 * encoded in N ms"), in a table of its own after the text tests.
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
#include <tessera/tessera_mtmd.h>

#include "cli_opts.h"
#include "cli_setup.h"
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
    cli_params p; /* --plugin-dir, --verbose */
    str_list models, devices;
    int_list prompts, gens, depths, threads, ngl;
    int32_t reps, n_batch;
    int32_t mmap; /* -mmp: 1 maps the file (default), 0 reads it into memory (--no-mmap) */
    int load_mode; /* -lm (LOAD_*): when given, it decides mmap and --mlock over -mmp */
    int no_warmup;
    int profile; /* --profile: per-op device times of each test's timed runs */
    tessera_kv_type cache_type[2]; /* K, V */
    tessera_flash_attn flash_attn;
    out_format out;
} bench_opts;

/* One measured test. */
typedef struct bench_result {
    const char *model_path;
    char model_name[256];
    uint64_t model_bytes, model_params;
    const char *devices;
    int ngl, threads, n_prompt, n_gen, n_depth, reps;
    uint64_t memory; /* weights + KV + compute buffers over the devices (tessera_context_memory) */
    tessera_kv_type type_k, type_v;
    tessera_flash_attn flash_attn;
    int use_mmap;
    double ts_mean, ts_sd;
    double samples[64];
} bench_result;

/* One medium's encode times (--mmproj). */
typedef struct media_result {
    char model_name[256], media_name[256];
    char devices[256]; /* a copy: printed after the model is freed */
    int threads, nx, ny, n_tokens, reps;
    double ms_mean, ms_sd;
    double samples[64];
} media_result;

/* "512,1024" -> list; each value in [lo, hi]. */
static int parse_int_list(const char *cmd, const char *flag, const char *s, int lo, int hi, int_list *out) {
    char want[96];
    snprintf(want, sizeof want, "comma-separated integers in %d..%d", lo, hi);
    out->n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ','))
            return cli_bad_value(cmd, flag, s, want);
        if (out->n == MAX_LIST) {
            fprintf(stderr, "%s: %s '%s': more than %d values\n", cmd, flag, s, MAX_LIST);
            return -1;
        }
        out->v[out->n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (out->n == 0) return cli_bad_value(cmd, flag, s, want);
    return 0;
}

static int push_str(const char *cmd, const char *flag, str_list *l, const char *v) {
    if (l->n == MAX_LIST) {
        fprintf(stderr, "%s: %s given more than %d times\n", cmd, flag, MAX_LIST);
        return -1;
    }
    l->v[l->n++] = v;
    return 0;
}

/* -m accepts a comma list too: split it in place (argv strings are ours). */
static int opt_models(const char *cmd, const char *flag, const char *value, void *dst) {
    for (char *tok = strtok((char *)value, ","); tok; tok = strtok(NULL, ","))
        if (push_str(cmd, flag, dst, tok) < 0) return -1;
    return 0;
}

static int opt_device(const char *cmd, const char *flag, const char *value, void *dst) {
    return push_str(cmd, flag, dst, value);
}

static int opt_sizes(const char *cmd, const char *flag, const char *value, void *dst) {
    return parse_int_list(cmd, flag, value, 0, 1 << 20, dst);
}

static int opt_threads(const char *cmd, const char *flag, const char *value, void *dst) {
    return parse_int_list(cmd, flag, value, 1, 1024, dst);
}

static int opt_ngl(const char *cmd, const char *flag, const char *value, void *dst) {
    return parse_int_list(cmd, flag, value, 0, 100000, dst);
}

/* -lm, llama-bench's newer spelling of how the weights are loaded (-mmp is
 * the older one); its "dio" (direct I/O) has no Tessera counterpart. */
enum { LOAD_UNSET, LOAD_MMAP, LOAD_READ, LOAD_READ_MLOCK, LOAD_MMAP_MLOCK };
static int opt_load_mode(const char *cmd, const char *flag, const char *value, void *dst) {
    int *mode = dst;
    if (!strcmp(value, "auto") || !strcmp(value, "mmap")) *mode = LOAD_MMAP;
    else if (!strcmp(value, "none")) *mode = LOAD_READ;
    else if (!strcmp(value, "mlock")) *mode = LOAD_READ_MLOCK;
    else if (!strcmp(value, "mmap+mlock")) *mode = LOAD_MMAP_MLOCK;
    else return cli_bad_value(cmd, flag, value, "auto, none, mmap, mlock or mmap+mlock");
    return 0;
}

static int opt_output(const char *cmd, const char *flag, const char *value, void *dst) {
    if (!strcmp(value, "md")) *(out_format *)dst = OUT_MD;
    else if (!strcmp(value, "json")) *(out_format *)dst = OUT_JSON;
    else if (!strcmp(value, "csv")) *(out_format *)dst = OUT_CSV;
    else return cli_bad_value(cmd, flag, value, "md, json or csv");
    return 0;
}

#define OWN(field) CLI_OWN(bench_opts, field)
static const cli_option bench_own[] = {
    {"-m", "--model", "FILE", "GGUF model (repeat for several, or a comma list)", CLI_FN, OWN(models), 0, 0,
     opt_models, CLI_NO_DEFAULT, 0},
    {"-p", "--n-prompt", "LIST", "prompt sizes (default 512; 0: none)", CLI_FN, OWN(prompts), 0, 0,
     opt_sizes, 0, 0},
    {"-n", "--n-gen", "LIST", "generation sizes (default 128; 0: none)", CLI_FN, OWN(gens), 0, 0, opt_sizes,
     0, 0},
    {"-d", "--n-depth", "LIST", "context depth: tokens already in the KV cache when each test starts (default 0)",
     CLI_FN, OWN(depths), 0, 0, opt_sizes, 0, 0},
    {"-t", "--threads", "LIST", "CPU thread counts (default: all online CPUs)", CLI_FN, OWN(threads), 0, 0,
     opt_threads, 0, 0},
    {"-r", "--repetitions", "N", "timed runs per test", CLI_INT, OWN(reps), 1, 64, NULL, 0, 0},
    {"-b", "--batch-size", "N", "tokens per micro-batch", CLI_INT, OWN(n_batch), 1, 1 << 20, NULL, 0, 0},
    {"-dev", "--device", "LIST",
     "device list as for 'tessera run' (e.g. cpu-avx0); repeat the flag to compare device lists", CLI_FN,
     OWN(devices), 0, 0, opt_device, 0, 0},
    {"-ngl", "--n-gpu-layers", "LIST", "layers on the GPU device (default 0)", CLI_FN, OWN(ngl), 0, 0,
     opt_ngl, 0, 0},
    {"-ctk", "--cache-type-k", "TYPE", "K cache type (as for 'tessera run')", CLI_KV, OWN(cache_type[0]), 0, 0,
     NULL, 0, 0},
    {"-ctv", "--cache-type-v", "TYPE", "V cache type (a quantized one needs -fa on)", CLI_KV, OWN(cache_type[1]),
     0, 0, NULL, 0, 0},
    {NULL, "--kv-type", "TYPE", "K and V cache type", CLI_KV_BOTH, OWN(cache_type), 0, 0, NULL, CLI_HIDDEN, 0},
    {"-fa", "--flash-attn", "on|off|auto", "flash attention", CLI_FA, OWN(flash_attn), 0, 0, NULL, 0, 0},
    {"-mmp", "--mmap", "0|1", "1: map the model file (default); 0: read it into memory, as 'tessera run --no-mmap'",
     CLI_INT, OWN(mmap), 0, 1, NULL, 0, 0},
    {"-lm", "--load-mode", "MODE",
     "auto or mmap: -mmp 1; none: -mmp 0; mlock: read into memory and lock it; mmap+mlock: map and lock",
     CLI_FN, OWN(load_mode), 0, 0, opt_load_mode, 0, 0},
    {"-o", "--output", "FORMAT", "md (default), json or csv", CLI_FN, OWN(out), 0, 0, opt_output, 0, 0},
    {NULL, "--no-warmup", NULL, "skip the untimed warm-up run", CLI_SWITCH, OWN(no_warmup), 0, 0, NULL, 0, 0},
    {NULL, "--profile", NULL,
     "time each op type of every test's timed runs on the devices (timestamp queries; the nodes then run one "
     "after another, so t/s drops) and print time, bytes, GB/s and FLOP/s per op (stderr)",
     CLI_SWITCH, OWN(profile), 0, 0, NULL, 0, 0},
    CLI_END,
};
#undef OWN

static const cli_command bench_cmd = {
    .name = "tessera bench",
    .synopsis = "-m MODEL [-m MODEL ...] [options]",
    .about = "Measures prompt processing (ppN: N tokens in one decode call) and\n"
             "generation (tgN: N single-token decode calls) in tokens/s, as\n"
             "llama-bench does; with -d D both start with D tokens already in the\n"
             "context (\"pp512 @ d4096\"), filled before the timing. Results are\n"
             "mean ± standard deviation over the repetitions. Lists are\n"
             "comma-separated and every combination is run. With --mmproj and\n"
             "--image/--audio, each medium's encode time (ms, the encoder graph's)\n"
             "is measured too, in a table after the text tests.",
    .groups = CLI_G_PLUGINS | CLI_G_MEDIA,
    .own = bench_own,
};

static int parse_args(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    cli_params_init(&o->p);
    o->prompts = (int_list){1, {512}};
    o->gens = (int_list){1, {128}};
    o->depths = (int_list){1, {0}};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = (int_list){1, {ncpu > 0 ? (int)ncpu : 1}};
    o->ngl = (int_list){1, {0}};
    o->reps = 3;
    o->n_batch = 512;
    o->mmap = 1;
    o->cache_type[0] = o->cache_type[1] = TESSERA_KV_F16;
    o->flash_attn = TESSERA_FLASH_ATTN_OFF;
    int rc = cli_parse(&bench_cmd, argc, argv, &o->p, o);
    if (rc != 0) return rc;
    if (o->load_mode != LOAD_UNSET) {
        o->mmap = o->load_mode == LOAD_MMAP || o->load_mode == LOAD_MMAP_MLOCK;
        o->p.use_mlock = o->load_mode == LOAD_READ_MLOCK || o->load_mode == LOAD_MMAP_MLOCK;
    }
    if (o->models.n == 0) {
        fprintf(stderr, "tessera bench: -m MODEL is required (see 'tessera bench --help')\n");
        return -1;
    }
    if (o->p.n_media > 0 && !o->p.mmproj) {
        fprintf(stderr, "tessera bench: --image/--audio need --mmproj FILE (the projector that encodes them)\n");
        return -1;
    }
    if (o->p.mmproj && o->p.n_media == 0) {
        fprintf(stderr, "tessera bench: --mmproj: give the media to encode with --image FILE or --audio FILE\n");
        return -1;
    }
    if (o->p.mmproj && o->out == OUT_CSV) {
        fprintf(stderr, "tessera bench: --mmproj: encode times have no CSV columns; use -o md or -o json\n");
        return -1;
    }
    for (int i = 0; i < o->models.n; i++) {
        if (access(o->models.v[i], R_OK) != 0) {
            fprintf(stderr, "tessera bench: cannot open model '%s': %s\n", o->models.v[i], strerror(errno));
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

/* Fill the cache with depth random tokens (untimed). The tests then rewind
 * to depth, so this runs once per depth, or again whenever a sliding-window
 * layer has dropped positions that depth would still see. */
static int fill_depth(tessera_context *ctx, int32_t n_vocab, int depth) {
    if (tessera_kv_truncate(ctx, 0) != 0) return -1;
    if (depth == 0) return 0;
    tessera_token *buf = malloc((size_t)depth * sizeof *buf);
    if (!buf) return -1;
    for (int i = 0; i < depth; i++) buf[i] = random_token(n_vocab);
    int rc = tessera_decode(ctx, buf, depth, 0, 0);
    free(buf);
    return rc;
}

/* Forget what the last test added after depth. A model with sliding-window
 * layers may have dropped positions the next token at depth needs; then the
 * truncation cleared everything and depth is filled again (untimed). */
static int rewind_to_depth(tessera_context *ctx, int32_t n_vocab, int depth) {
    if (tessera_kv_truncate(ctx, depth) != 0) return -1;
    return tessera_kv_len(ctx) == depth ? 0 : fill_depth(ctx, n_vocab, depth);
}

/* Decode n random tokens in one call after the depth tokens already in the
 * cache; seconds or < 0. */
static double run_prompt(tessera_context *ctx, int32_t n_vocab, tessera_token *buf, int n, int depth) {
    for (int i = 0; i < n; i++) buf[i] = random_token(n_vocab);
    if (rewind_to_depth(ctx, n_vocab, depth) != 0) return -1.0;
    double t0 = now_s();
    if (tessera_decode(ctx, buf, n, depth, 0) != 0) return -1.0;
    return now_s() - t0;
}

/* Decode n tokens one at a time after the depth tokens; seconds or < 0. */
static double run_gen(tessera_context *ctx, int32_t n_vocab, tessera_token first, int n, int depth) {
    if (rewind_to_depth(ctx, n_vocab, depth) != 0) return -1.0;
    tessera_token tok = first >= 0 ? first : random_token(n_vocab);
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (tessera_decode(ctx, &tok, 1, depth + i, 0) != 0) return -1.0;
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

/* "pp512", "tg128", "pp512 @ d4096" as llama-bench names them. */
static void test_name(const bench_result *r, char *buf, size_t size) {
    int n = r->n_prompt > 0 ? snprintf(buf, size, "pp%d", r->n_prompt) : snprintf(buf, size, "tg%d", r->n_gen);
    if (r->n_depth > 0 && n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " @ d%d", r->n_depth);
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

/* The markdown table shows type_k, type_v and fa (as llama-bench) when one
 * of them is not the default. */
static int md_cache_columns;

static void print_header(out_format fmt) {
    if (fmt == OUT_MD) {
        printf("| model | size | params | devices | ngl | threads |%s memory | test | t/s |\n",
               md_cache_columns ? " type_k | type_v | fa |" : "");
        printf("| --- | ---: | ---: | --- | ---: | ---: |%s ---: | ---: | ---: |\n",
               md_cache_columns ? " --- | --- | ---: |" : "");
    } else if (fmt == OUT_CSV) {
        printf("model,model_size,model_n_params,devices,n_gpu_layers,n_threads,type_k,type_v,flash_attn,memory_bytes,"
               "n_prompt,n_gen,n_depth,reps,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
    fflush(stdout);
}

static void print_result(out_format fmt, const bench_result *r, int first) {
    char size[32], test[32], mem[32];
    human_size(r->model_bytes, size, sizeof size);
    human_size(r->memory, mem, sizeof mem);
    test_name(r, test, sizeof test);
    if (fmt == OUT_MD) {
        double params = (double)r->model_params;
        char cache[64] = "";
        if (md_cache_columns)
            snprintf(cache, sizeof cache, " %s | %s | %s |", tessera_kv_type_name(r->type_k),
                     tessera_kv_type_name(r->type_v), cli_flash_attn_name(r->flash_attn));
        printf("| %s | %s | %.2f %s | %s | %d | %d |%s %s | %s | %.2f ± %.2f |\n", r->model_name, size,
               params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M", r->devices, r->ngl, r->threads,
               cache, mem, test, r->ts_mean, r->ts_sd);
    } else if (fmt == OUT_CSV) {
        printf("\"%s\",%llu,%llu,\"%s\",%d,%d,%s,%s,%s,%llu,%d,%d,%d,%d,%.4f,%.4f\n", r->model_name,
               (unsigned long long)r->model_bytes, (unsigned long long)r->model_params, r->devices, r->ngl, r->threads,
               tessera_kv_type_name(r->type_k), tessera_kv_type_name(r->type_v), cli_flash_attn_name(r->flash_attn),
               (unsigned long long)r->memory, r->n_prompt, r->n_gen, r->n_depth, r->reps, r->ts_mean, r->ts_sd);
    } else {
        printf("%s  {\"model\": ", first ? "" : ",\n");
        json_str(stdout, r->model_name);
        printf(", \"model_path\": ");
        json_str(stdout, r->model_path);
        printf(", \"model_size\": %llu, \"model_n_params\": %llu, \"devices\": ", (unsigned long long)r->model_bytes,
               (unsigned long long)r->model_params);
        json_str(stdout, r->devices);
        printf(", \"memory_bytes\": %llu, \"use_mmap\": %s", (unsigned long long)r->memory,
               r->use_mmap ? "true" : "false");
        printf(", \"n_gpu_layers\": %d, \"n_threads\": %d, \"type_k\": \"%s\", \"type_v\": \"%s\", \"flash_attn\": \"%s\", "
               "\"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
               "\"test\": \"%s\", \"avg_ts\": %.4f, \"stddev_ts\": %.4f, \"samples_ts\": [",
               r->ngl, r->threads, tessera_kv_type_name(r->type_k), tessera_kv_type_name(r->type_v),
               cli_flash_attn_name(r->flash_attn), r->n_prompt, r->n_gen, r->n_depth, test, r->ts_mean, r->ts_sd);
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
static int list_max(const int_list *l) {
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

/* The context every test of a run fits in: the deepest depth, then the
 * longest prompt or generation. */
static int bench_ctx_size(const bench_opts *o) {
    int max_p = list_max(&o->prompts), max_n = list_max(&o->gens);
    return list_max(&o->depths) + (max_p > max_n ? max_p : max_n) + 1;
}

static int bench_threads(const bench_opts *o, tessera_model *model, bench_result *proto, int threads,
                         int *first) {
    const int max_p = list_max(&o->prompts);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)bench_ctx_size(o);
    cp.n_batch = (uint32_t)o->n_batch;
    cp.n_threads = threads;
    cp.type_k = o->cache_type[0];
    cp.type_v = o->cache_type[1];
    cp.flash_attn = o->flash_attn;
    cp.verbose = o->p.verbose != 0;
    tessera_context *ctx = tessera_context_new(model, &cp);
    if (!ctx) {
        fprintf(stderr, "tessera bench: %s: %s\n", proto->model_path, tessera_last_error());
        return -1;
    }
    tessera_memory mem[16];
    int32_t n_mem = tessera_context_memory(ctx, mem, 16);
    proto->memory = 0;
    for (int32_t i = 0; i < n_mem; i++) proto->memory += mem[i].weights + mem[i].kv + mem[i].compute;
    const int32_t n_vocab = tessera_model_n_vocab(model);
    const tessera_token bos = tessera_token_bos(model);
    tessera_token *buf = malloc((size_t)(max_p > 0 ? max_p : 1) * sizeof *buf);
    int rc = buf ? 0 : -1;

    for (int di = 0; di < o->depths.n && rc == 0; di++) {
        const int depth = o->depths.v[di];
        if (fill_depth(ctx, n_vocab, depth) != 0) {
            fprintf(stderr, "tessera bench: %s: filling a context depth of %d with %d threads: %s\n", proto->model_path,
                    depth, threads, tessera_last_error());
            rc = -1;
            break;
        }
        for (int kind = 0; kind < 2 && rc == 0; kind++) {
            const int_list *sizes = kind == 0 ? &o->prompts : &o->gens;
            for (int s = 0; s < sizes->n && rc == 0; s++) {
                int n = sizes->v[s];
                if (n <= 0) continue;
                bench_result r = *proto;
                r.threads = threads;
                r.n_prompt = kind == 0 ? n : 0;
                r.n_gen = kind == 1 ? n : 0;
                r.n_depth = depth;
                r.reps = o->reps;
                if (!o->no_warmup) { /* as llama-bench: a short untimed run first */
                    double w = kind == 0 ? run_prompt(ctx, n_vocab, buf, n < 32 ? n : 32, depth)
                                         : run_gen(ctx, n_vocab, bos, 1, depth);
                    if (w < 0) rc = -1;
                }
                if (o->profile && rc == 0 && tessera_context_set_profiling(ctx, true) > 0)
                    fprintf(stderr, "tessera bench: --profile: some devices cannot time their work\n");
                for (int i = 0; i < o->reps && rc == 0; i++) {
                    double sec = kind == 0 ? run_prompt(ctx, n_vocab, buf, n, depth) : run_gen(ctx, n_vocab, bos, n, depth);
                    if (sec < 0) rc = -1;
                    else r.samples[i] = (double)n / (sec > 1e-9 ? sec : 1e-9);
                    if (o->p.verbose && rc == 0)
                        fprintf(stderr, "bench: %s %s%d d=%d t=%d run %d: %.2f t/s\n", r.model_name, kind ? "tg" : "pp",
                                n, depth, threads, i + 1, r.samples[i]);
                }
                if (rc) {
                    fprintf(stderr, "tessera bench: %s: %s%d at depth %d with %d threads: %s\n", proto->model_path,
                            kind ? "tg" : "pp", n, depth, threads, tessera_last_error());
                    break;
                }
                if (o->profile) {
                    char what[64], label[384];
                    test_name(&r, what, sizeof what);
                    snprintf(label, sizeof label, "%s %s (%d runs, %d threads)", r.model_name, what, o->reps, threads);
                    cli_print_profile(stderr, label, ctx);
                    tessera_context_set_profiling(ctx, false);
                }
                summarize(&r);
                if (*first) print_header(o->out); /* not before an error: only with a result */
                print_result(o->out, &r, *first);
                *first = 0;
            }
        }
    }
    free(buf);
    tessera_context_free(ctx);
    return rc;
}

/* ------------------------------------------------------------- media */

static void summarize_ms(media_result *r) {
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < r->reps; i++) sum += r->samples[i];
    r->ms_mean = sum / r->reps;
    for (int i = 0; i < r->reps; i++) sq += (r->samples[i] - r->ms_mean) * (r->samples[i] - r->ms_mean);
    r->ms_sd = r->reps > 1 ? sqrt(sq / (r->reps - 1)) : 0.0;
}

/* Encode each medium -r times (after one untimed encode) with threads
 * threads; the projector keeps no cache, so every encode runs the graph. */
static int bench_media(const bench_opts *o, tessera_model *model, const bench_result *proto, int threads,
                       media_result *out, int *n_out) {
    tessera_mtmd_params mp = tessera_mtmd_default_params();
    mp.no_offload = o->p.no_mmproj_offload != 0;
    mp.n_threads = threads;
    mp.cache_size = 0;
    tessera_mtmd *mm = tessera_mtmd_load(model, o->p.mmproj, &mp);
    if (!mm) return fprintf(stderr, "tessera bench: --mmproj %s: %s\n", o->p.mmproj, tessera_last_error()), -1;
    int rc = 0;
    for (int32_t k = 0; k < o->p.n_media && rc == 0 && *n_out < MAX_LIST * MAX_LIST; k++) {
        const char *flag = o->p.media_kind[k] == 'a' ? "--audio" : "--image";
        tessera_media *media = tessera_media_from_file(o->p.media[k]);
        tessera_mtmd_chunks *chunks = media ? tessera_mtmd_tokenize(mm, TESSERA_MEDIA_MARKER, &media, 1, false, true)
                                            : NULL;
        int32_t c = -1;
        for (int32_t i = 0; chunks && i < tessera_mtmd_chunks_count(chunks); i++)
            if (tessera_mtmd_chunk_type(chunks, i) != TESSERA_CHUNK_TEXT) c = i;
        if (c < 0) {
            fprintf(stderr, "tessera bench: %s %s: %s\n", flag, o->p.media[k], tessera_last_error());
            rc = -1;
        }
        media_result r = {.threads = threads, .reps = o->reps};
        snprintf(r.model_name, sizeof r.model_name, "%s", proto->model_name);
        snprintf(r.devices, sizeof r.devices, "%s", proto->devices);
        snprintf(r.media_name, sizeof r.media_name, "%s", base_name(o->p.media[k]));
        if (rc == 0) {
            r.nx = tessera_media_nx(media);
            r.ny = tessera_media_ny(media);
            r.n_tokens = tessera_mtmd_chunk_n_tokens(chunks, c);
        }
        for (int i = o->no_warmup ? 0 : -1; i < o->reps && rc == 0; i++) {
            if (!tessera_mtmd_encode_chunk(mm, chunks, c)) {
                fprintf(stderr, "tessera bench: %s %s: %s\n", flag, o->p.media[k], tessera_last_error());
                rc = -1;
            } else if (i >= 0) {
                r.samples[i] = tessera_mtmd_last_encode_ms(mm);
                if (o->p.verbose)
                    fprintf(stderr, "bench: %s %s t=%d run %d: %.2f ms\n", r.model_name, r.media_name, threads, i + 1,
                            r.samples[i]);
            }
        }
        if (rc == 0) {
            summarize_ms(&r);
            out[(*n_out)++] = r;
        }
        tessera_mtmd_chunks_free(chunks);
        tessera_media_free(media);
    }
    tessera_mtmd_free(mm);
    return rc;
}

static void print_media(out_format fmt, const media_result *r, int n, int first_json) {
    if (fmt == OUT_MD && n > 0) {
        printf("%s| model | devices | threads | media | size | tokens | encode ms |\n"
               "| --- | --- | ---: | --- | ---: | ---: | ---: |\n", first_json ? "" : "\n");
        for (int i = 0; i < n; i++)
            printf("| %s | %s | %d | %s | %dx%d | %d | %.2f ± %.2f |\n", r[i].model_name, r[i].devices, r[i].threads,
                   r[i].media_name, r[i].nx, r[i].ny, r[i].n_tokens, r[i].ms_mean, r[i].ms_sd);
    } else if (fmt == OUT_JSON) {
        for (int i = 0; i < n; i++) {
            printf("%s  {\"model\": ", first_json && i == 0 ? "[\n" : ",\n");
            json_str(stdout, r[i].model_name);
            printf(", \"devices\": ");
            json_str(stdout, r[i].devices);
            printf(", \"n_threads\": %d, \"test\": \"encode\", \"media\": ", r[i].threads);
            json_str(stdout, r[i].media_name);
            printf(", \"width\": %d, \"height\": %d, \"n_tokens\": %d, \"avg_ms\": %.4f, \"stddev_ms\": %.4f, "
                   "\"samples_ms\": [", r[i].nx, r[i].ny, r[i].n_tokens, r[i].ms_mean, r[i].ms_sd);
            for (int k = 0; k < r[i].reps; k++) printf("%s%.4f", k ? ", " : "", r[i].samples[k]);
            printf("]}");
        }
    }
    fflush(stdout);
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;

    if (cli_runtime_init("tessera bench", &o.p) != 0) return 1;
    signal(SIGINT, on_sigint);
    if (o.devices.n == 0) o.devices = (str_list){1, {NULL}};

    int status = 0, first = 1;
    media_result *media = o.p.mmproj ? calloc(MAX_LIST * MAX_LIST, sizeof *media) : NULL;
    int n_media = 0;
    if (o.p.mmproj && !media) {
        fprintf(stderr, "tessera bench: out of memory\n");
        return 1;
    }
    md_cache_columns = o.cache_type[0] != TESSERA_KV_F16 || o.cache_type[1] != TESSERA_KV_F16 ||
                       o.flash_attn != TESSERA_FLASH_ATTN_OFF;
    for (int m = 0; m < o.models.n && !status; m++) {
        for (int d = 0; d < o.devices.n && !status; d++) {
            for (int g = 0; g < o.ngl.n && !status; g++) {
                cli_params lp = o.p;
                lp.devices = o.devices.v[d];
                lp.n_gpu_layers = o.ngl.v[g];
                /* the fit checks the context and cache the tests will make */
                lp.n_ctx = bench_ctx_size(&o);
                lp.n_batch = o.n_batch;
                lp.no_mmap = !o.mmap;
                lp.cache_type[0] = o.cache_type[0];
                lp.cache_type[1] = o.cache_type[1];
                tessera_model *model = cli_model_load("tessera bench", &lp, o.models.v[m], NULL);
                if (!model) {
                    status = 1;
                    break;
                }
                bench_result proto;
                memset(&proto, 0, sizeof proto);
                proto.model_path = o.models.v[m];
                snprintf(proto.model_name, sizeof proto.model_name, "%s", base_name(o.models.v[m]));
                proto.model_bytes = tessera_model_size_bytes(model);
                proto.model_params = tessera_model_n_params(model);
                proto.devices = tessera_model_devices(model); /* those used, not those asked for */
                proto.ngl = o.ngl.v[g];
                proto.type_k = o.cache_type[0];
                proto.type_v = o.cache_type[1];
                proto.flash_attn = o.flash_attn;
                proto.use_mmap = o.mmap;
                if (o.p.verbose) fprintf(stderr, "bench: %s: %s\n", proto.model_name, tessera_model_desc(model));
                for (int t = 0; t < o.threads.n && !status; t++) {
                    if (bench_threads(&o, model, &proto, o.threads.v[t], &first) != 0) status = 1;
                    else if (media && bench_media(&o, model, &proto, o.threads.v[t], media, &n_media) != 0) status = 1;
                }
                tessera_model_free(model);
                if (tessera_aborted()) status = 130;
            }
        }
    }
    print_media(o.out, media, n_media, first);
    if (n_media > 0) first = 0;
    free(media);
    if (o.out == OUT_JSON && !first) printf("\n]\n");
    else if (o.out == OUT_JSON && status == 0) printf("[]\n");
    tessera_shutdown();
    return status;
}
