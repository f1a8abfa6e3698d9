/* tessera serve — an OpenAI-compatible HTTP server (serve/, the server library). */
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
#include <tessera/tessera_mtmd.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "embed_api.h"
#include "router/router.h"
#include "serve.h"

typedef struct serve_opts {
    cli_params p;
    const char *host, *api_key, *alias, *tags, *slot_save_path, *cors_origin, *reasoning_format;
    const char *gcp_route, *gcp_health; /* AIP_MODE=PREDICTION: Vertex AI's routes; NULL: off */
    int32_t no_webui, no_slots, slots, metrics, no_metrics, reasoning, kv_unified, allow_remote_media;
    int32_t port, parallel, queue, max_body;
    int32_t max_conns, max_conns_per_ip, header_timeout, body_timeout, shutdown_grace;
    serve_log_format log_format;
} serve_opts;

static int opt_log_format(const char *cmd, const char *flag, const char *value, void *dst) {
    if (!strcmp(value, "text")) *(serve_log_format *)dst = SERVE_LOG_TEXT;
    else if (!strcmp(value, "json")) *(serve_log_format *)dst = SERVE_LOG_JSON;
    else if (!strcmp(value, "off")) *(serve_log_format *)dst = SERVE_LOG_OFF;
    else return cli_bad_value(cmd, flag, value, "text, json or off");
    return 0;
}

static int opt_reasoning_format(const char *cmd, const char *flag, const char *value, void *dst) {
    if (strcmp(value, "none") && strcmp(value, "deepseek") && strcmp(value, "auto"))
        return cli_bad_value(cmd, flag, value, "none, deepseek or auto");
    *(const char **)dst = value;
    return 0;
}

static int opt_reasoning(const char *cmd, const char *flag, const char *value, void *dst) {
    if (!strcmp(value, "on")) *(int32_t *)dst = 1;
    else if (!strcmp(value, "off")) *(int32_t *)dst = 0;
    else if (!strcmp(value, "auto")) *(int32_t *)dst = -1;
    else return cli_bad_value(cmd, flag, value, "on, off or auto");
    return 0;
}

static const cli_option serve_own[] = {
    {NULL, "--host", "ADDR[,ADDR...]",
     "addresses to listen on, comma-separated (127.0.0.1: this machine only; 127.0.0.1,::1: both loopbacks)",
     CLI_STR, CLI_OWN(serve_opts, host), 0, 0, NULL, 0, 0},
    {NULL, "--cors-origin", "ORIGINS",
     "browser origins that may call the API (CORS), comma-separated: * (any), localhost (any "
     "loopback origin) or exact origins such as https://app.example",
     CLI_STR, CLI_OWN(serve_opts, cors_origin), 0, 0, NULL, 0, 0},
    {NULL, "--no-webui", NULL, "no chat page at GET / (404)", CLI_SWITCH, CLI_OWN(serve_opts, no_webui), 0, 0,
     NULL, 0, 0},
    {NULL, "--no-slots", NULL, "no GET /slots (404)", CLI_SWITCH, CLI_OWN(serve_opts, no_slots), 0, 0, NULL, 0, 0},
    {NULL, "--slots", NULL, "GET /slots (the default; llama-server's spelling)", CLI_SWITCH,
     CLI_OWN(serve_opts, slots), 0, 0, NULL, 0, 0},
    {NULL, "--metrics", NULL, "GET /metrics (the default; llama-server's spelling)", CLI_SWITCH,
     CLI_OWN(serve_opts, metrics), 0, 0, NULL, 0, 0},
    {NULL, "--no-metrics", NULL, "no GET /metrics (404)", CLI_SWITCH, CLI_OWN(serve_opts, no_metrics), 0, 0, NULL,
     0, 0},
    {NULL, "--reasoning-format", "FORMAT",
     "thinking models' <think>...</think>: deepseek or auto (default) give it as reasoning_content, none "
     "leaves it in content",
     CLI_FN, CLI_OWN(serve_opts, reasoning_format), 0, 0, opt_reasoning_format, CLI_NO_DEFAULT, 0},
    {NULL, "--reasoning", "MODE",
     "thinking models: on or off sets the chat template's enable_thinking (a request's "
     "chat_template_kwargs still wins); auto (default) is on, as llama-server",
     CLI_FN, CLI_OWN(serve_opts, reasoning), 0, 0, opt_reasoning, CLI_NO_DEFAULT, 0},
    {NULL, "--tags", "TAGS", "comma-separated tags listed with the model in /v1/models", CLI_STR,
     CLI_OWN(serve_opts, tags), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--port", "N", "TCP port; 0: any free port, printed", CLI_INT, CLI_OWN(serve_opts, port), 0,
     65535, NULL, 0, 0},
    {"-np", "--parallel", "N", "slots: requests generated at once", CLI_INT, CLI_OWN(serve_opts, parallel),
     1, TESSERA_MAX_SEQ, NULL, 0, 0},
    {NULL, "--queue", "N", "requests that may wait for a slot before 503", CLI_INT,
     CLI_OWN(serve_opts, queue), 0, 100000, NULL, 0, 0},
    {NULL, "--api-key", "KEY", "require 'Authorization: Bearer KEY' (not for /health)", CLI_STR,
     CLI_OWN(serve_opts, api_key), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--max-body", "BYTES", "largest request body; larger: 413", CLI_INT,
     CLI_OWN(serve_opts, max_body), 1024, 1 << 30, NULL, 0, 0},
    {NULL, "--log-format", "FORMAT",
     "one line per request on stderr (time, method, path, status, tokens in/out, ms): text (default), "
     "json or off",
     CLI_FN, CLI_OWN(serve_opts, log_format), 0, 0, opt_log_format, 0, 0},
    {NULL, "--alias", "NAME[,NAME...]",
     "model name in responses (default: the file name); several: all are aliases in /v1/models and the "
     "first in alphabetical order is the id",
     CLI_STR,
     CLI_OWN(serve_opts, alias), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--max-conns", "N",
     "connections served at once (default parallel + queue + 64); over it GET /health and "
     "/metrics are still answered, anything else gets 503",
     CLI_INT, CLI_OWN(serve_opts, max_conns), 1, 100000, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--max-conns-per-ip", "N",
     "connections from one client address (default half of --max-conns; 0: no limit); over it: 429",
     CLI_INT, CLI_OWN(serve_opts, max_conns_per_ip), 0, 100000, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--header-timeout", "S",
     "seconds for a request line and headers to arrive, else 408; also the keep-alive idle time",
     CLI_INT, CLI_OWN(serve_opts, header_timeout), 1, 3600, NULL, 0, 0},
    {NULL, "--body-timeout", "S", "seconds for a body to arrive after its headers, else 408", CLI_INT,
     CLI_OWN(serve_opts, body_timeout), 1, 3600, NULL, 0, 0},
    {NULL, "--shutdown-grace", "S",
     "on SIGTERM, seconds for running requests to finish before they end with their text so far "
     "(finish_reason length); queued ones that never started get 503",
     CLI_INT, CLI_OWN(serve_opts, shutdown_grace), 0, 86400, NULL, 0, 0},
    {NULL, "--slot-save-path", "DIR",
     "directory of POST /slots/{id}?action=save|restore files (llama-server's; made when missing); "
     "without it only action=erase works",
     CLI_STR, CLI_OWN(serve_opts, slot_save_path), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {"-kvu", "--kv-unified", NULL,
     "the slots share the whole cache: each may hold up to -c positions while the cells last (when they "
     "run out, the requests in that step fail with 500); default: N / parallel each, always room",
     CLI_SWITCH, CLI_OWN(serve_opts, kv_unified), 0, 0, NULL, 0, 0},
    {NULL, "--allow-remote-media", NULL,
     "accept http(s) image URLs in requests; fetching is not built in, so such a part is still a 400 "
     "(saying so); off: a 400 saying a server does not fetch what a client names",
     CLI_SWITCH, CLI_OWN(serve_opts, allow_remote_media), 0, 0, NULL, 0, 0},
    {"-c", "--ctx-size", "N",
     "KV cache cells shared by all slots, each holding N / parallel; 0: parallel x the model's "
     "context (at most 4096 per slot)",
     CLI_INT, CLI_OWN(serve_opts, p.n_ctx), 0, 1 << 24, NULL, 0, 0},
    CLI_END,
};

static const cli_command serve_cmd = {
    .name = "tessera serve",
    .synopsis = "-m MODEL [options]",
    .about = "Serves the OpenAI API over HTTP: POST /v1/chat/completions, POST /v1/completions,\n"
             "GET /v1/models, GET /health, GET /metrics (Prometheus), llama-server's GET /props\n"
             "and GET /slots, and a chat page at GET /. Anthropic's POST /v1/messages (and\n"
             "/v1/messages/count_tokens) and OpenAI's POST /v1/responses take the chat path.\n"
             "Requests reuse a slot's cached prompt prefix unless they send \"cache_prompt\":\n"
             "false. --parallel N slots share the model and one KV cache; the requests in\n"
             "them are decoded together, one batch per step. Ctrl-C (or SIGTERM) stops\n"
             "accepting, lets running requests finish for --shutdown-grace seconds, then\n"
             "stops the server. llama-server's /completion, /infill, /tokenize and\n"
             "/detokenize answer in its shapes. With AIP_MODE=PREDICTION in the environment\n"
             "(Vertex AI, as llama-server) POST /predict (or AIP_PREDICT_ROUTE) answers\n"
             "{\"instances\": [OpenAI requests]} with {\"predictions\"}, GET AIP_HEALTH_ROUTE as\n"
             "/health, on port AIP_HTTP_PORT. Router mode: --models-dir DIR or --models-preset FILE\n"
             "serves many models, each in its own child (tessera serve --models-dir DIR --help).\n"
             "--mmproj FILE loads a multimodal projector beside the model: requests may then\n"
             "carry images (OpenAI image_url data: URLs, /completion's multimodal_data,\n"
             "Anthropic image blocks, Responses input_image); --image and --audio are\n"
             "for tessera run and chat.",
    /* CLI_G_SAMPLING: --temp, --top-k, ... are the defaults of requests that omit them */
    .groups = CLI_G_MODEL | CLI_G_DEVICE | CLI_G_CONTEXT | CLI_G_PREDICT | CLI_G_SAMPLING | CLI_G_TEMPLATE |
              CLI_G_SHIFT | CLI_G_EMBED | CLI_G_SPEC | CLI_G_LORA | CLI_G_LORA_SERVE | CLI_G_MEDIA,
    .own = serve_own,
};

/* Vertex AI runs the server with AIP_MODE=PREDICTION: its prediction route
 * (AIP_PREDICT_ROUTE, default /predict) is served, and its health route
 * (AIP_HEALTH_ROUTE) answers as /health, on AIP_HTTP_PORT when set (the
 * port Vertex AI sends to, over --port). 0, or -1 printed. */
static int gcp_environment(serve_opts *o) {
    const char *mode = getenv("AIP_MODE");
    if (!mode || strcmp(mode, "PREDICTION") != 0) return 0;
    const char *route = getenv("AIP_PREDICT_ROUTE");
    o->gcp_route = route && route[0] == '/' ? route : "/predict";
    const char *health = getenv("AIP_HEALTH_ROUTE");
    o->gcp_health = health && health[0] == '/' ? health : NULL;
    const char *port = getenv("AIP_HTTP_PORT");
    if (!port || !port[0]) return 0;
    char *end = NULL;
    long n = strtol(port, &end, 10);
    if (*end || n < 1 || n > 65535) {
        fprintf(stderr, "tessera serve: AIP_HTTP_PORT '%s' is not a port (1..65535)\n", port);
        return -1;
    }
    o->port = (int32_t)n;
    return 0;
}

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, serve_opts *o) {
    memset(o, 0, sizeof *o);
    cli_params_init(&o->p);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 4;
    o->queue = 16;
    o->max_body = 1 << 20;
    o->max_conns = o->max_conns_per_ip = -1;
    o->header_timeout = 10;
    o->body_timeout = 30;
    o->shutdown_grace = 10;
    o->cors_origin = "*";
    o->reasoning = -1;
    int rc = cli_parse(&serve_cmd, argc, argv, &o->p, o);
    o->p.sp = cli_sampling(&o->p); /* the server's defaults, lists in place */
    if (rc != 0) return rc;
    if (!o->p.model) {
        fprintf(stderr, "tessera serve: -m MODEL is required (see 'tessera serve --help')\n");
        return -1;
    }
    if (o->api_key && !o->api_key[0]) {
        fprintf(stderr, "tessera serve: --api-key is empty\n");
        return -1;
    }
    struct stat st;
    if (o->slot_save_path && stat(o->slot_save_path, &st) != 0 && mkdir(o->slot_save_path, 0700) != 0) {
        fprintf(stderr, "tessera serve: --slot-save-path %s: cannot make it: %s\n", o->slot_save_path,
                strerror(errno));
        return -1;
    }
    if (o->slot_save_path && (stat(o->slot_save_path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        fprintf(stderr, "tessera serve: --slot-save-path %s is not a directory\n", o->slot_save_path);
        return -1;
    }
    if (gcp_environment(o) != 0) return -1;
    if (o->p.n_media > 0) {
        fprintf(stderr, "tessera serve: --%s is for tessera run and chat: a server takes images in requests "
                        "(load the projector with --mmproj FILE)\n", o->p.media_kind[0] == 'a' ? "audio" : "image");
        return -1;
    }
    if (o->p.mmproj && (o->p.model_draft || o->p.spec_ngram)) {
        fprintf(stderr, "tessera serve: speculative decoding (-md, --spec-type) is not available with --mmproj: a "
                        "medium is embeddings a draft cannot decode\n");
        return -1;
    }
    if (o->p.n_predict == 0) { /* every request without max_tokens would get an empty reply */
        fprintf(stderr, "tessera serve: -n expects -1 (no limit) or an integer >= 1, got '0'\n");
        return -1;
    }
    if (o->p.n_ctx == 1) {
        fprintf(stderr, "tessera serve: -c expects 0 or an integer >= 2, got '1'\n");
        return -1;
    }
    return 0;
}

/* A second SIGINT/SIGTERM during the grace period ends it. */
static bool second_signal(void *cls) {
    struct timespec zero = {0, 0};
    return sigtimedwait((const sigset_t *)cls, NULL, &zero) > 0;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* --alias NAME[,NAME...]: the id is the first in alphabetical order (as
 * llama-server picks it), written into buf. */
static const char *model_id_of(const serve_opts *o, char *buf, size_t size) {
    if (!o->alias) return base_name(o->p.model);
    char list[512];
    snprintf(list, sizeof list, "%s", o->alias);
    char *save = NULL;
    buf[0] = '\0';
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save))
        if (*a && (!buf[0] || strcmp(a, buf) < 0)) snprintf(buf, size, "%s", a);
    return buf[0] ? buf : base_name(o->p.model);
}

_Static_assert((int)CLI_MAX_LORA <= (int)SERVE_MAX_LORA, "every --lora adapter fits the engine");

/* Load the model, its context, the embedding endpoints' context and the
 * chat template into c->api (the server serves it from serve_server_start
 * on). 0, or -1 with the error printed. */
static int load_model(serve_opts *o, serve_config *c, tessera_model **model, tessera_context **ctx, cli_chat *chat,
                      serve_embed **embed, cli_spec *spec, tessera_mtmd **mtmd) {
    const char *cmd = "tessera serve";
    serve_api *api = &c->api;
    /* The fit sizes the cache for every slot: -c 0 gives each slot the
     * training context (at most the CLI default) as far as memory allows. */
    o->p.n_seq_max = (uint32_t)o->parallel;
    int32_t fitted_ctx = o->p.n_ctx;
    *model = cli_model_load(cmd, &o->p, o->p.model, &fitted_ctx);
    if (!*model) return -1;
    long n_ctx = fitted_ctx;
    if (n_ctx / o->parallel < 2) {
        fprintf(stderr, "tessera serve: -c %ld leaves %ld positions per slot for --parallel %ld\n", n_ctx,
                n_ctx / o->parallel, (long)o->parallel);
        return -1;
    }
    cli_params no_lora = o->p; /* the adapters: loaded here, for the engine */
    no_lora.n_lora = 0;
    *ctx = cli_context_new(cmd, &no_lora, *model, (int32_t)n_ctx);
    if (!*ctx) return -1;
    c->engine.context_shift = cli_context_shift_usable(cmd, &o->p, *ctx);
    if (o->p.n_lora > 0) {
        if (cli_loras_apply(cmd, &o->p, *model, *ctx, c->engine.loras) != 0) return -1;
        c->engine.n_loras = api->n_loras = o->p.n_lora;
        for (int32_t i = 0; i < o->p.n_lora; i++) {
            c->engine.lora_paths[i] = o->p.lora[i].path;
            c->engine.lora_scales[i] = o->p.lora_init_without_apply ? 0.0f : o->p.lora[i].scale;
        }
    }
    api->model = *model;
    api->slot_ctx = c->engine.slot_ctx = (int32_t)(o->kv_unified ? n_ctx : n_ctx / o->parallel);
    /* -md / --spec-type: the draft context holds --parallel sequences too */
    cli_session target = {.model = *model, .ctx = *ctx, .n_ctx = (int32_t)n_ctx};
    if (cli_spec_open(spec, cmd, &o->p, &target) != 0) return -1;
    c->engine.spec = spec->spec;
    if (spec->spec && o->p.n_lora > 0)
        fprintf(stderr,
                "tessera serve: speculative decoding with LoRA adapters: each slot's target model verifies with "
                "its request's scales; the draft runs without adapters\n");
    const char *owner = tessera_model_meta_str(*model, "general.organization");
    if (!owner) owner = tessera_model_meta_str(*model, "general.author");
    snprintf(api->owned_by, sizeof api->owned_by, "%s", owner ? owner : "tessera");
    if (o->p.embeddings || o->p.reranking) { /* the embedding endpoints' own context (embed_api.h) */
        tessera_context *ectx = cli_context_new(cmd, &o->p, *model, (int32_t)(n_ctx / o->parallel));
        if (!ectx) return -1;
        if (!(api->embed = *embed = serve_embed_new(*model, ectx, api->model_id))) {
            tessera_context_free(ectx);
            fprintf(stderr, "tessera serve: out of memory for the embedding endpoints\n");
            return -1;
        }
    }
    if (cli_chat_setup(cmd, &o->p, *model, 1, chat) != 0) return -1;
    api->tmpl = chat->tmpl;
    if (o->p.mmproj) { /* the projector, once, beside the model: the engine thread encodes */
        tessera_mtmd_params mp = tessera_mtmd_default_params();
        mp.no_offload = o->p.no_mmproj_offload != 0;
        mp.n_threads = o->p.n_threads;
        mp.explain = o->p.explain != 0;
        if (!(*mtmd = tessera_mtmd_load(*model, o->p.mmproj, &mp))) {
            fprintf(stderr, "tessera serve: --mmproj %s: %s\n", o->p.mmproj, tessera_last_error());
            return -1;
        }
        api->mtmd = c->engine.mtmd = *mtmd;
        fprintf(stderr, "tessera serve: projector %s (%s): vision %s, audio %s\n", o->p.mmproj,
                tessera_mtmd_projector_type(*mtmd), tessera_mtmd_supports_vision(*mtmd) ? "yes" : "no",
                tessera_mtmd_supports_audio(*mtmd) ? "yes" : "no");
    }
    return 0;
}

/* A non-loopback address without --api-key: anyone who reaches it may use it. */
static void warn_open_hosts(const serve_opts *o, const serve_server *srv) {
    for (int i = 0; i < serve_server_n_hosts(srv); i++) {
        const char *h = serve_server_host(srv, i);
        if (!o->api_key && strcmp(h, "127.0.0.1") && strcmp(h, "::1") && strcmp(h, "localhost"))
            fprintf(stderr,
                    "tessera serve: warning: --host %s without --api-key: anyone who can reach it may use it\n", h);
    }
    fflush(stderr);
}

/* The server's config from the flags (the model's fields come with it). */
static void config_of(const serve_opts *o, const char *model_id, long long created, serve_config *c) {
    const int max_conns = o->max_conns > 0 ? o->max_conns : o->parallel + o->queue + 64;
    *c = (serve_config){
        .hosts = o->host,
        .http = {.port = (int)o->port,
                 .api_key = o->api_key,
                 .max_body = (size_t)o->max_body,
                 .max_connections = max_conns,
                 .max_conns_per_ip = o->max_conns_per_ip >= 0 ? o->max_conns_per_ip : (max_conns + 1) / 2,
                 .header_timeout_ms = o->header_timeout * 1000,
                 .body_timeout_ms = o->body_timeout * 1000,
                 .log_format = o->log_format,
                 .slot_save_path = o->slot_save_path,
                 .cors_origin = o->cors_origin,
                 .no_webui = o->no_webui,
                 .no_slots = o->no_slots,
                 .no_metrics = o->no_metrics,
                 .gcp_predict_route = o->gcp_route,
                 .gcp_health_route = o->gcp_health},
        .api = {.model_id = model_id,
                .aliases = o->alias,
                .tags = o->tags,
                .model_path = o->p.model,
                .created = created,
                .n_slots = (int32_t)o->parallel,
                .default_max_tokens = o->p.n_predict > 0 ? o->p.n_predict : 0,
                .sampling = &o->p.sp,
                .reasoning_format = o->reasoning_format,
                .enable_thinking = o->reasoning,
                .allow_remote_media = o->allow_remote_media != 0,
                .verbose = o->p.verbose != 0},
        .engine = {.n_slots = (int32_t)o->parallel,
                   .max_queue = (int32_t)o->queue,
                   .context_shift = o->p.context_shift,
                   .unified = o->kv_unified != 0,
                   .n_keep = o->p.n_keep},
    };
}

int cmd_serve(int argc, char **argv) {
    /* --models-dir / --models-preset: router mode (cli/router/), one child per model */
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--models-dir") || !strcmp(argv[i], "--models-preset"))
            return serve_router_main(argc, argv);
    serve_opts o;
    int pr = parse_args(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;
    /* SIGINT / SIGTERM are taken by sigwait below; every thread created after
     * this inherits the blocked mask. Writes to a gone client must not kill us. */
    sigset_t stop_sigs;
    cli_block_stop_signals(&stop_sigs);

    tessera_model *model = NULL;
    tessera_context *ctx = NULL;
    serve_server *srv = NULL;
    serve_embed *embed = NULL;
    cli_chat chat = {0};
    cli_spec spec = {0};
    tessera_mtmd *mtmd = NULL;
    int rc = 1, initialized = 0;
    if (cli_runtime_init("tessera serve", &o.p) != 0) goto done;
    initialized = 1;
    struct stat st = {0};
    stat(o.p.model, &st);
    char id_buf[256];
    serve_config cfg;
    config_of(&o, model_id_of(&o, id_buf, sizeof id_buf), (long long)st.st_mtime, &cfg);
    /* Listen first: /health says 503 while the model loads, as llama-server. */
    if (!(srv = serve_server_listen(&cfg))) goto done;
    fprintf(stderr, "tessera serve: loading %s (%.0f MiB); /health answers 503 until it is ready\n", o.p.model,
            (double)st.st_size / 1048576.0);
    if (load_model(&o, &cfg, &model, &ctx, &chat, &embed, &spec, &mtmd) != 0 ||
        serve_server_start(srv, model, ctx, embed) != 0)
        goto done;
    fprintf(stderr, "tessera serve: %s on http://%s:%d (%ld slots of %d positions, chat template %s)\n",
            cfg.api.model_id, serve_server_host(srv, 0), serve_server_port(srv, 0), (long)o.parallel,
            cfg.api.slot_ctx, chat.source);
    for (int i = 1; i < serve_server_n_hosts(srv); i++)
        fprintf(stderr, "tessera serve: also on %s port %d\n", serve_server_host(srv, i), serve_server_port(srv, i));
    warn_open_hosts(&o, srv);
    int sig = 0;
    sigwait(&stop_sigs, &sig);
    fprintf(stderr, "tessera serve: %s, no new connections; %d s for running requests (again: at once)\n",
            sig == SIGINT ? "interrupted" : "terminated", (int)o.shutdown_grace);
    fflush(stderr);
    serve_server_drain(srv, o.shutdown_grace * 1000, second_signal, &stop_sigs);
    fprintf(stderr, "tessera serve: stopping\n");
    rc = 0;
done:
    serve_server_free(srv); /* its engine first: what still waits fails, so connections end */
    tessera_mtmd_free(mtmd);
    cli_spec_close(&spec);
    cli_chat_free(&chat);
    serve_embed_free(embed);
    tessera_context_free(ctx);
    tessera_model_free(model);
    if (initialized) tessera_shutdown();
    return rc;
}
#endif
