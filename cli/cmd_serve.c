/* tessera serve — an OpenAI-compatible HTTP server (cli/serve/). */
#include "commands.h"

#ifndef TESSERA_HAVE_SERVE
#include <stdio.h>
#include <string.h>

/* This build has no HTTP server: --help says so and succeeds, anything else
 * is an error. */
int cmd_serve(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: tessera serve -m MODEL [--host ADDR] [--port N] [--parallel N] ...\n\n"
                   "This build of tessera has no HTTP server: rebuild with libmicrohttpd and\n"
                   "libcjson installed (meson option -Dserver=enabled).\n");
            return 0;
        }
    }
    fprintf(stderr, "tessera serve: not built in (needs libmicrohttpd and libcjson at build time)\n");
    return 2;
}
#else
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tessera/tessera.h>

#include "cli_util.h"
#include "serve/serve.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera serve -m MODEL [options]\n"
            "\n"
            "Serves the OpenAI API over HTTP: POST /v1/chat/completions, POST /v1/completions,\n"
            "GET /v1/models, GET /health, GET /metrics (Prometheus). --parallel N slots\n"
            "share the model and one KV cache; the requests in them are decoded together,\n"
            "one batch per step. Ctrl-C (or SIGTERM) stops the server.\n"
            "\n"
            "  -m, --model FILE        GGUF model\n"
            "      --host ADDR         address to listen on (default 127.0.0.1: this machine only)\n"
            "      --port N            TCP port (default 8080; 0: any free port, printed)\n"
            "  -np, --parallel N       slots: requests generated at once (default 4, at most %d)\n"
            "      --queue N           requests that may wait for a slot before 503 (default 16)\n"
            "      --api-key KEY       require 'Authorization: Bearer KEY' (not for /health)\n"
            "      --max-body BYTES    largest request body (default 1048576); larger: 413\n"
            "      --alias NAME        model name in responses (default: the file name)\n"
            "      --chat-template NAME  chatml, llama2, llama3, gemma, phi3, zephyr or mistral\n"
            "                          instead of the model's template\n"
            "  -c, --ctx-size N        KV cache cells shared by all slots; each slot holds\n"
            "                          N / parallel (default: parallel x the model's context,\n"
            "                          at most 4096 per slot)\n"
            "  -b, --batch-size N      tokens per decode step (default 512)\n"
            "  -t, --threads N         CPU threads (default: all)\n"
            "      --kv-type TYPE      KV cache type: f16 (default) or f32\n"
            "      --device LIST       devices to use, e.g. vulkan0,cpu-avx0\n"
            "  -ngl, --n-gpu-layers N  layers offloaded to the GPU device (default 0)\n"
            "      --plugin-dir DIR    also look for backend plugins in DIR\n"
            "      --verbose           model and context details on stderr\n"
            "  -h, --help              this text\n",
            TESSERA_MAX_SEQ);
}

typedef struct serve_opts {
    const char *model, *host, *api_key, *alias, *template_name, *devices, *plugin_dir;
    long port, parallel, queue, max_body, n_ctx, n_batch, n_threads, n_gpu_layers;
    tessera_kv_type kv_type;
    bool verbose;
} serve_opts;

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, serve_opts *o) {
    const char *cmd = "tessera serve";
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 4;
    o->queue = 16;
    o->max_body = 1 << 20;
    o->n_batch = 512;
    o->kv_type = TESSERA_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--verbose")) {
            o->verbose = true;
            continue;
        }
        static const char *const valued[] = {
            "-m", "--model", "--host", "--port", "-np", "--parallel", "--queue", "--api-key", "--max-body",
            "--alias", "--chat-template", "-c", "--ctx-size", "-b", "--batch-size", "-t", "--threads",
            "--kv-type", "--device", "-ngl", "--n-gpu-layers", "--plugin-dir", NULL};
        const char *v = cli_option_value(cmd, valued, argc, argv, &i);
        if (!v) return -1;
        int rc = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--host"))
            o->host = v;
        else if (!strcmp(a, "--api-key"))
            o->api_key = v;
        else if (!strcmp(a, "--alias"))
            o->alias = v;
        else if (!strcmp(a, "--chat-template"))
            o->template_name = v;
        else if (!strcmp(a, "--device"))
            o->devices = v;
        else if (!strcmp(a, "--plugin-dir"))
            o->plugin_dir = v;
        else if (!strcmp(a, "--port"))
            rc = cli_flag_long(cmd, a, v, 0, 65535, &o->port);
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel"))
            rc = cli_flag_long(cmd, a, v, 1, TESSERA_MAX_SEQ, &o->parallel);
        else if (!strcmp(a, "--queue"))
            rc = cli_flag_long(cmd, a, v, 0, 100000, &o->queue);
        else if (!strcmp(a, "--max-body"))
            rc = cli_flag_long(cmd, a, v, 1024, 1L << 30, &o->max_body);
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size"))
            rc = cli_flag_long(cmd, a, v, 2, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))
            rc = cli_flag_long(cmd, a, v, 1, 1 << 20, &o->n_batch);
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
            rc = cli_flag_long(cmd, a, v, 1, 1024, &o->n_threads);
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers"))
            rc = cli_flag_long(cmd, a, v, 0, 100000, &o->n_gpu_layers);
        else if (!strcmp(a, "--kv-type"))
            rc = cli_flag_kv_type(cmd, v, &o->kv_type);
        if (rc) return -1;
    }
    if (!o->model) {
        fprintf(stderr, "tessera serve: -m MODEL is required (see 'tessera serve --help')\n");
        return -1;
    }
    if (o->api_key && !o->api_key[0]) {
        fprintf(stderr, "tessera serve: --api-key is empty\n");
        return -1;
    }
    return 0;
}

/* The special token's text for the template's bos_token / eos_token. */
static void special_text(const tessera_model *m, tessera_token id, char *buf, int32_t size) {
    buf[0] = '\0';
    if (id < 0) return;
    int32_t n = tessera_token_to_piece(m, id, buf, size - 1, true);
    buf[n > 0 ? n : 0] = '\0';
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;
    struct stat st;
    if (stat(o.model, &st) != 0) {
        fprintf(stderr, "tessera serve: cannot open model '%s': %s\n", o.model, strerror(errno));
        return 1;
    }
    /* SIGINT / SIGTERM are taken by sigwait below; every thread created after
     * this inherits the blocked mask. Writes to a gone client must not kill us. */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    const char *dirs[1] = {o.plugin_dir};
    tessera_init_params ip = {
        .plugin_dirs = dirs, .n_plugin_dirs = o.plugin_dir ? 1 : 0, .verbosity = o.verbose};
    tessera_model *model = NULL;
    tessera_context *ctx = NULL;
    serve_engine *engine = NULL;
    serve_http *http = NULL;
    int rc = 1;
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "tessera serve: %s\n", tessera_last_error());
        goto done;
    }
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = o.devices;
    mp.n_gpu_layers = (int32_t)o.n_gpu_layers;
    model = tessera_model_load(o.model, &mp);
    if (!model) {
        fprintf(stderr, "tessera serve: %s\n", tessera_last_error());
        goto done;
    }
    long n_ctx = o.n_ctx;
    if (n_ctx == 0) {
        long per_slot = tessera_model_n_ctx_train(model);
        if (per_slot > 4096 || per_slot <= 0) per_slot = 4096;
        n_ctx = per_slot * o.parallel;
    }
    if (n_ctx / o.parallel < 2) {
        fprintf(stderr, "tessera serve: -c %ld leaves %ld positions per slot for --parallel %ld\n", n_ctx,
                n_ctx / o.parallel, o.parallel);
        goto done;
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)o.n_batch;
    cp.n_threads = (int32_t)o.n_threads;
    cp.kv_type = o.kv_type;
    cp.verbose = o.verbose;
    ctx = tessera_context_new(model, &cp);
    if (!ctx) {
        fprintf(stderr, "tessera serve: %s\n", tessera_last_error());
        goto done;
    }

    serve_api api = {.model = model,
                     .model_id = o.alias ? o.alias : base_name(o.model),
                     .slot_ctx = (int32_t)(n_ctx / o.parallel)};
    if (o.template_name) {
        if (tessera_chat_format_from_name(o.template_name, &api.format) != 0) {
            fprintf(stderr, "tessera serve: --chat-template: %s\n", tessera_last_error());
            goto done;
        }
    } else {
        api.format = tessera_chat_format_detect(tessera_model_meta_str(model, "tokenizer.chat_template"));
    }
    special_text(model, tessera_token_bos(model), api.bos_text, sizeof api.bos_text);
    special_text(model, tessera_token_eos(model), api.eos_text, sizeof api.eos_text);

    serve_engine_params ep = {.model = model,
                              .ctx = ctx,
                              .n_slots = (int32_t)o.parallel,
                              .max_queue = (int32_t)o.queue,
                              .slot_ctx = api.slot_ctx};
    engine = serve_engine_new(&ep);
    if (!engine || serve_engine_start(engine) != 0) {
        fprintf(stderr, "tessera serve: cannot start the engine (out of memory or threads)\n");
        goto done;
    }
    serve_http_params hp = {.host = o.host,
                            .port = (int)o.port,
                            .api_key = o.api_key,
                            .max_body = (size_t)o.max_body,
                            .max_connections = (int)(o.parallel + o.queue + 64)};
    http = serve_http_start(&hp, engine, &api);
    if (!http) goto done;
    fprintf(stderr, "tessera serve: %s on http://%s:%d (%ld slots of %d positions, chat template %s%s)\n",
            api.model_id, o.host, serve_http_port(http), o.parallel, api.slot_ctx,
            tessera_chat_family_name(api.format.family), api.format.fallback ? " (fallback)" : "");
    if (!o.api_key && strcmp(o.host, "127.0.0.1") && strcmp(o.host, "::1") && strcmp(o.host, "localhost"))
        fprintf(stderr,
                "tessera serve: warning: --host %s without --api-key: anyone who can reach it may use it\n",
                o.host);
    fflush(stderr);
    int sig = 0;
    sigwait(&stop_sigs, &sig);
    fprintf(stderr, "tessera serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    rc = 0;
done:
    /* Engine first: it fails what is still waiting, so connections end. */
    if (engine) serve_engine_stop(engine);
    serve_http_stop(http);
    serve_engine_free(engine);
    tessera_context_free(ctx);
    tessera_model_free(model);
    tessera_shutdown();
    return rc;
}
#endif
