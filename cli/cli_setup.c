/* Model + context set-up shared by the subcommands (see cli_setup.h). */
#include "cli_setup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tessera/tessera_devices.h>

#include "cli_util.h"

int cli_runtime_init(const char *cmd, const cli_params *p) {
    tessera_init_params ip = {.plugin_dirs = p->plugin_dirs,
                              .n_plugin_dirs = p->n_plugin_dirs,
                              .verbosity = p->verbose ? 1 : 0};
    if (tessera_init(&ip) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        return -1;
    }
    return 0;
}

/* Files above this take long enough to map and prepare to show progress. */
#define PROGRESS_MIN_BYTES (64ll << 20)

typedef struct load_progress {
    int last_pct, shown;
} load_progress;

static bool on_progress(float progress, void *user) {
    load_progress *lp = user;
    int pct = (int)(progress * 100.0f);
    if (pct != lp->last_pct) {
        fprintf(stderr, "\rloading model: %3d%%", pct);
        lp->last_pct = pct;
        lp->shown = 1;
    }
    return !tessera_aborted(); /* Ctrl-C cancels the load */
}

/* The model file exists: checked before plugin discovery for a quick, clear
 * error. Its size in *size. */
static int model_path_ok(const char *cmd, const char *path, long long *size) {
    struct stat st;
    if (!path) {
        fprintf(stderr, "%s: -m MODEL is required (see '%s --help')\n", cmd, cmd);
        return 0;
    }
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: cannot open model '%s': %s\n", cmd, path, strerror(errno));
        return 0;
    }
    *size = (long long)st.st_size;
    return 1;
}

/* The -ngl to load with. -ngl auto (the default) fits the first GPU-like
 * device among the chosen ones. Without --device, the default devices leave
 * out a GPU that is a CPU implementation (Mesa's llvmpipe/lavapipe: slower
 * than the CPU backend): auto then means 0, and an explicit -ngl N gets a
 * note saying how to use that GPU anyway, instead of the core's bare
 * "ignored". */
static int32_t default_gpu_layers(const char *cmd, const cli_params *p) {
    if (p->n_gpu_layers == 0 || (p->devices && p->devices[0])) return p->n_gpu_layers;
    tessera_device_details defaults[64], all[64];
    int32_t n = tessera_devices_default(defaults, 64);
    const tessera_device_details *cpu = NULL;
    for (int32_t i = 0; i < n; i++) {
        if (!defaults[i].is_cpu) return p->n_gpu_layers; /* a real GPU */
        if (!cpu && strcmp(defaults[i].name, "ref")) cpu = &defaults[i];
    }
    if (p->n_gpu_layers == CLI_NGL_AUTO) return 0;
    const tessera_device_details *slow = NULL;
    int32_t n_all = tessera_devices_select(NULL, all, 64);
    for (int32_t i = 0; i < n_all && !slow; i++)
        if (!all[i].is_cpu) slow = &all[i];
    if (!slow) {
        fprintf(stderr, "%s: note: -ngl %d ignored: this machine has no GPU device (see 'tessera devices')\n", cmd,
                (int)p->n_gpu_layers);
    } else {
        fprintf(stderr,
                "%s: note: -ngl %d ignored: the only GPU, %s (%s), is a CPU implementation, slower than the "
                "CPU backend, so it is not used by default; to use it anyway: --device %s%s%s -ngl %d\n",
                cmd, (int)p->n_gpu_layers, slow->name, slow->description[0] ? slow->description : "?",
                slow->name, cpu ? "," : "", cpu ? cpu->name : "", (int)p->n_gpu_layers);
    }
    return 0;
}

tessera_model *cli_model_load(const char *cmd, const cli_params *p, const char *path, int32_t *n_ctx) {
    long long size = 0;
    if (!model_path_ok(cmd, path, &size)) return NULL;
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = p->devices;
    mp.n_gpu_layers = default_gpu_layers(cmd, p);
    mp.no_mmap = p->no_mmap != 0;
    mp.use_mlock = p->use_mlock != 0;
    mp.tensor_overrides = p->overrides.n ? p->overrides.list : NULL;
    mp.n_cpu_moe = p->cpu_moe ? TESSERA_CPU_MOE_ALL : p->n_cpu_moe;
    /* -ngl auto and -c to the devices' free memory; explicit values checked */
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)(n_ctx ? *n_ctx : p->n_ctx);
    cp.n_batch = (uint32_t)p->n_batch;
    cp.type_k = p->cache_type[0];
    cp.type_v = p->cache_type[1];
    cp.swa_full = p->swa_full;
    cp.n_seq_max = p->n_seq_max;
    char report[512];
    if (tessera_params_fit(path, &mp, &cp, CLI_DEFAULT_MAX_CTX, report, sizeof report) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        return NULL;
    }
    if (p->verbose && report[0]) fprintf(stderr, "%s: %s\n", cmd, report);
    if (n_ctx) *n_ctx = (int32_t)cp.n_ctx;
    load_progress lp = {-1, 0};
    if (size > PROGRESS_MIN_BYTES && isatty(STDERR_FILENO)) {
        mp.progress = on_progress;
        mp.progress_user = &lp;
    }
    tessera_model *m = tessera_model_load(path, &mp);
    if (lp.shown) fputs("\r                    \r", stderr);
    if (!m) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        return NULL;
    }
    if (p->verbose) fprintf(stderr, "%s: model %s\n", cmd, tessera_model_desc(m));
    return m;
}

int32_t cli_ctx_size(const tessera_model *m, int32_t n_ctx) {
    if (n_ctx > 0) return n_ctx;
    int32_t train = tessera_model_n_ctx_train(m);
    return train > 0 && train < CLI_DEFAULT_MAX_CTX ? train : CLI_DEFAULT_MAX_CTX;
}

tessera_context *cli_context_new(const char *cmd, const cli_params *p, tessera_model *m, int32_t n_ctx) {
    int32_t train = tessera_model_n_ctx_train(m);
    n_ctx = cli_ctx_size(m, n_ctx);
    if (train > 0 && n_ctx > train)
        fprintf(stderr, "%s: warning: -c %d exceeds the model's training context of %d tokens; "
                        "past it the output degrades\n", cmd, (int)n_ctx, (int)train);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)p->n_batch;
    cp.n_threads = p->n_threads;
    cp.type_k = p->cache_type[0];
    cp.type_v = p->cache_type[1];
    cp.flash_attn = p->flash_attn;
    cp.swa_full = p->swa_full;
    cp.n_seq_max = p->n_seq_max;
    cp.explain = p->explain;
    cp.verbose = p->verbose;
    cp.embeddings = p->embeddings || p->reranking;
    cp.pooling = p->reranking ? TESSERA_POOLING_RANK : p->pooling;
    tessera_context *ctx = tessera_context_new(m, &cp);
    if (!ctx) fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
    if (ctx && p->n_lora > 0 && cli_loras_apply(cmd, p, m, ctx, NULL) != 0) {
        tessera_context_free(ctx);
        return NULL;
    }
    return ctx;
}

int cli_loras_apply(const char *cmd, const cli_params *p, tessera_model *m, tessera_context *ctx,
                    tessera_lora **out) {
    tessera_lora *loras[CLI_MAX_LORA];
    float scales[CLI_MAX_LORA];
    for (int32_t i = 0; i < p->n_lora; i++) {
        loras[i] = tessera_lora_load(m, p->lora[i].path);
        if (!loras[i]) {
            fprintf(stderr, "%s: --lora: %s\n", cmd, tessera_last_error());
            while (i-- > 0) tessera_lora_free(loras[i]);
            return -1;
        }
        scales[i] = p->lora_init_without_apply ? 0.0f : p->lora[i].scale;
        if (p->verbose)
            fprintf(stderr, "%s: LoRA adapter %s: %d weights, alpha %g, scale %g\n", cmd, p->lora[i].path,
                    (int)tessera_lora_n_weights(loras[i]), (double)tessera_lora_alpha(loras[i]),
                    (double)scales[i]);
    }
    if (tessera_context_set_loras(ctx, loras, scales, p->n_lora) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        for (int32_t i = 0; i < p->n_lora; i++) tessera_lora_free(loras[i]);
        return -1;
    }
    if (out) memcpy(out, loras, (size_t)p->n_lora * sizeof *loras);
    return 0;
}

int cli_context_shift(const char *cmd, tessera_context *ctx, int32_t seq, int32_t keep, tessera_token *tokens,
                      int32_t *pos, bool verbose) {
    const int32_t before = *pos;
    if (tessera_context_shift(ctx, seq, keep, tokens, pos) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        return -1;
    }
    if (verbose) fprintf(stderr, "\n[context shift: kept %d tokens, dropped %d]\n", keep, before - *pos);
    return 0;
}

bool cli_context_shift_usable(const char *cmd, const cli_params *p, const tessera_context *ctx) {
    if (!p->context_shift) return false;
    if (tessera_context_can_shift(ctx)) return true;
    fprintf(stderr, "%s: warning: --context-shift is off: this model keeps a recurrent state, which cannot "
                    "drop positions; a full context ends the reply\n", cmd);
    return false;
}

tessera_sampler_params cli_sampling(const cli_params *p) {
    tessera_sampler_params sp = p->sp;
    sp.logit_bias = p->bias;
    sp.samplers = !p->samplers[0] ? NULL : strcmp(p->samplers, "none") ? p->samplers : "";
    if (p->dry_breakers.set) {
        sp.dry_sequence_breakers = p->dry_breakers.list;
        sp.n_dry_sequence_breakers = p->dry_breakers.n;
    }
    return sp;
}

tessera_sampler *cli_sampler_new(const char *cmd, const cli_params *p, const tessera_model *m, int32_t n_ctx) {
    tessera_sampler_params sp = cli_sampling(p);
    if (sp.penalty_last_n < 0) sp.penalty_last_n = n_ctx;
    if (sp.dry_penalty_last_n < 0) sp.dry_penalty_last_n = n_ctx;
    tessera_sampler *s = tessera_sampler_new_model(m, &sp);
    if (!s) fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
    return s;
}

int cli_grammar_attach(const char *cmd, const cli_params *p, const tessera_model *m, tessera_sampler *s) {
    const struct {
        const char *flag, *value;
        int file, schema;
    } srcs[] = {{"--grammar", p->grammar, 0, 0},
                {"--grammar-file", p->grammar_file, 1, 0},
                {"--json-schema", p->json_schema, 0, 1},
                {"--json-schema-file", p->json_schema_file, 1, 1}};
    int pick = -1;
    for (int i = 0; i < 4; i++) {
        if (!srcs[i].value) continue;
        if (pick >= 0) {
            fprintf(stderr, "%s: give only one of %s and %s\n", cmd, srcs[pick].flag, srcs[i].flag);
            return -1;
        }
        pick = i;
    }
    if (pick < 0) return 0;
    size_t len = strlen(srcs[pick].value);
    char *file = NULL;
    if (srcs[pick].file) {
        const char *what = srcs[pick].schema ? "JSON Schema file" : "grammar file";
        file = cli_read_file(cmd, what, srcs[pick].value, &len);
        if (!file) return -1;
    }
    const char *text = file ? file : srcs[pick].value;
    tessera_grammar *g = srcs[pick].schema ? tessera_grammar_from_json_schema(text, len)
                                           : tessera_grammar_parse(text, len, NULL);
    int rc = g ? tessera_sampler_set_grammar(s, m, g) : -1;
    if (rc != 0) {
        if (file)
            fprintf(stderr, "%s: %s '%s': %s\n", cmd, srcs[pick].flag, srcs[pick].value,
                    tessera_last_error());
        else
            fprintf(stderr, "%s: %s: %s\n", cmd, srcs[pick].flag, tessera_last_error());
    }
    tessera_grammar_free(g);
    free(file);
    return rc;
}

int cli_session_open(cli_session *s, const char *cmd, const cli_params *p) {
    memset(s, 0, sizeof *s);
    long long size;
    if (!model_path_ok(cmd, p->model, &size)) return -1;
    if (cli_runtime_init(cmd, p) < 0) return -1;
    s->initialized = 1;
    int32_t n_ctx = p->n_ctx;
    s->model = cli_model_load(cmd, p, p->model, &n_ctx);
    if (!s->model) return -1;
    s->ctx = cli_context_new(cmd, p, s->model, n_ctx);
    if (!s->ctx) return -1;
    s->n_ctx = (int32_t)tessera_context_n_ctx(s->ctx);
    return 0;
}

void cli_session_close(cli_session *s) {
    tessera_context_free(s->ctx);
    tessera_model_free(s->model);
    if (s->initialized) tessera_shutdown();
    memset(s, 0, sizeof *s);
}

int cli_spec_open(cli_spec *out, const char *cmd, const cli_params *p, cli_session *s) {
    memset(out, 0, sizeof *out);
    if (!p->model_draft && !p->spec_ngram) return 0;
    if (p->model_draft && p->spec_ngram) {
        fprintf(stderr, "%s: give either -md FILE or --spec-type ngram-simple, not both\n", cmd);
        return -1;
    }
    if (p->model_draft) {
        cli_params pd = *p;
        if (p->devices_draft) pd.devices = p->devices_draft;
        pd.n_gpu_layers = p->n_gpu_layers_draft;
        /* --lora, -ot and --cpu-moe are the target's (llama.cpp has draft
         * flags of its own for the last two): the draft runs plain */
        pd.n_lora = 0;
        memset(&pd.overrides, 0, sizeof pd.overrides);
        pd.cpu_moe = 0;
        pd.n_cpu_moe = 0;
        int32_t n_ctx = s->n_ctx;
        out->draft_model = cli_model_load(cmd, &pd, p->model_draft, &n_ctx);
        if (!out->draft_model) return -1;
        if (tessera_spec_compatible(s->model, out->draft_model) != 0) {
            fprintf(stderr, "%s: -md %s: %s\n", cmd, p->model_draft, tessera_last_error());
            cli_spec_close(out);
            return -1;
        }
        out->draft_ctx = cli_context_new(cmd, &pd, out->draft_model, s->n_ctx);
        if (!out->draft_ctx) {
            cli_spec_close(out);
            return -1;
        }
    }
    out->spec = tessera_spec_new(s->ctx, out->draft_ctx, &p->spec);
    if (!out->spec) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        cli_spec_close(out);
        return -1;
    }
    if (p->verbose)
        fprintf(stderr, "%s: speculative decoding with %s, up to %d tokens a step\n", cmd,
                p->model_draft ? p->model_draft : "n-grams of the text", p->spec.n_max);
    return 0;
}

void cli_spec_close(cli_spec *sp) {
    tessera_spec_free(sp->spec);
    tessera_context_free(sp->draft_ctx);
    tessera_model_free(sp->draft_model);
    memset(sp, 0, sizeof *sp);
}

void cli_spec_print_stats(const char *cmd, const cli_spec *sp) {
    if (!sp->spec) return;
    tessera_spec_stats st;
    tessera_spec_stats_get(sp->spec, -1, &st);
    fprintf(stderr, "%s: speculative: %lld steps, drafted %lld, accepted %lld (acceptance rate %.3f)\n", cmd,
            (long long)st.n_steps, (long long)st.n_drafted, (long long)st.n_accepted,
            st.n_drafted ? (double)st.n_accepted / (double)st.n_drafted : 0.0);
}

char *cli_prompt_text(const char *cmd, const cli_params *p, int escapes, size_t *len) {
    if (p->prompt_file) return cli_read_file(cmd, "prompt file", p->prompt_file, len);
    const char *src = p->prompt ? p->prompt : "";
    char *s = strdup(src);
    if (!s) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        return NULL;
    }
    *len = escapes && !p->no_escape ? cli_unescape(s) : strlen(s);
    return s;
}

/* The special token's text, for the template's bos_token / eos_token. */
static void special_text(const tessera_model *m, tessera_token id, char *buf, int32_t size) {
    buf[0] = '\0';
    if (id < 0) return;
    int32_t n = tessera_token_to_piece(m, id, buf, size - 1, true);
    buf[n > 0 ? n : 0] = '\0';
}

int cli_chat_setup(const char *cmd, const cli_params *p, const tessera_model *m, int quiet, cli_chat *out) {
    memset(out, 0, sizeof *out);
    char bos[256], eos[256];
    special_text(m, tessera_token_bos(m), bos, sizeof bos);
    special_text(m, tessera_token_eos(m), eos, sizeof eos);
    if (p->chat_template_file && p->chat_template) {
        fprintf(stderr, "%s: give --chat-template or --chat-template-file, not both\n", cmd);
        return -1;
    }
    if (p->chat_template_file) {
        size_t len;
        char *text = cli_read_file(cmd, "--chat-template-file", p->chat_template_file, &len);
        if (!text) return -1;
        out->tmpl = tessera_chat_template_new(text, len, bos, eos);
        free(text);
        if (!out->tmpl) {
            fprintf(stderr, "%s: --chat-template-file %s: %s\n", cmd, p->chat_template_file, tessera_last_error());
            return -1;
        }
        snprintf(out->source, sizeof out->source, "%s", p->chat_template_file);
    } else if (p->chat_template) {
        /* a built-in name, or the Jinja text itself (as llama.cpp takes it) */
        /* a template's text (as llama-server takes it); a name has no spaces */
        bool jinja = strstr(p->chat_template, "{{") || strstr(p->chat_template, "{%") ||
                     strpbrk(p->chat_template, " \n");
        out->tmpl = jinja ? tessera_chat_template_new(p->chat_template, strlen(p->chat_template), bos, eos)
                          : tessera_chat_template_builtin(p->chat_template, bos, eos);
        if (!out->tmpl) {
            fprintf(stderr, "%s: --chat-template: %s\n", cmd, tessera_last_error());
            return -1;
        }
        snprintf(out->source, sizeof out->source, "%s", jinja ? "--chat-template" : p->chat_template);
    } else {
        bool fallback;
        out->tmpl = tessera_chat_template_from_model(m, &fallback);
        if (!out->tmpl) {
            fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
            return -1;
        }
        snprintf(out->source, sizeof out->source, "%s", fallback ? "chatml (fallback)" : "model");
        if (fallback && !quiet)
            fprintf(stderr, tessera_model_meta_str(m, "tokenizer.chat_template")
                                ? "%s: note: the model's chat template cannot be used (%s); using ChatML "
                                  "(--chat-template-file to choose)\n"
                                : "%s: note: the model has no chat template; using ChatML "
                                  "(--chat-template-file to choose)%.0s\n",
                    cmd, tessera_last_error());
    }
    return 0;
}

void cli_chat_free(cli_chat *c) {
    tessera_chat_template_free(c->tmpl);
    c->tmpl = NULL;
}
