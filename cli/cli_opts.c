/* The shared option table and the one parser of the tessera subcommands
 * (see cli_opts.h; how to add an option is written there). */
#include "cli_opts.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define P(field) offsetof(cli_params, field)
#define CLI_KV_TYPES "f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl"

/* -ngl N or auto. */
static int parse_ngl(const char *cmd, const char *flag, const char *v, void *dst) {
    long x;
    if (!strcmp(v, "auto")) {
        *(int32_t *)dst = CLI_NGL_AUTO;
        return 0;
    }
    if (cli_parse_long(v, 0, 100000, &x) != 0) return cli_bad_value(cmd, flag, v, "auto or an integer in 0..100000");
    *(int32_t *)dst = (int32_t)x;
    return 0;
}

/* --spec-type: llama.cpp's comma-separated list; none, draft-simple (the
 * draft model of -md, which needs no --spec-type) and ngram-simple are
 * ours. */
static int parse_spec_type(const char *cmd, const char *flag, const char *v, void *dst) {
    int ngram = 0;
    for (const char *t = v; *t;) {
        size_t n = strcspn(t, ",");
        if (n == 12 && !strncmp(t, "ngram-simple", n)) ngram = 1;
        else if (!(n == 4 && !strncmp(t, "none", n)) && !(n == 12 && !strncmp(t, "draft-simple", n)))
            return cli_bad_value(cmd, flag, v, "none, draft-simple or ngram-simple (a comma-separated list)");
        t += n + (t[n] == ',');
    }
    *(int *)dst = ngram;
    return 0;
}

/* -ot PATTERN=DEVICE[,...]: each comma-separated rule appended, as
 * llama.cpp splits its value. A rule without '=' is refused here; the
 * pattern and the device are checked when the model loads. */
static int parse_override(const char *cmd, const char *flag, const char *v, void *dst) {
    cli_overrides *o = dst;
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (len == 0 || !eq || eq == p || eq == p + len - 1)
            return cli_bad_value(cmd, flag, v, "PATTERN=DEVICE[,PATTERN=DEVICE...], e.g. '\\.ffn_.*_exps\\.=CPU'");
        if (o->n == CLI_MAX_OVERRIDES || o->used + len + 1 > sizeof o->buf) {
            fprintf(stderr, "%s: %s: more than %d rules or %zu bytes of them\n", cmd, flag, CLI_MAX_OVERRIDES,
                    sizeof o->buf);
            return -1;
        }
        char *t = o->buf + o->used;
        memcpy(t, p, len);
        t[len] = '\0';
        o->used += len + 1;
        o->list[o->n++] = t;
        o->list[o->n] = NULL;
        p = end ? end + 1 : p + len;
    }
    return 0;
}

/* --pooling none|mean|cls|last|rank (llama.cpp's names). */
static int parse_pooling(const char *cmd, const char *flag, const char *v, void *dst) {
    int32_t x = tessera_pooling_from_name(v);
    if (x < 0) return cli_bad_value(cmd, flag, v, "none, mean, cls, last or rank");
    *(int32_t *)dst = x;
    return 0;
}

/* --samplers NAMES (';'-separated, llama.cpp's names) and --sampling-seq
 * LETTERS: kept in llama.cpp's spelling of names. */
static int parse_order(const char *cmd, const char *flag, const char *v, char *dst, bool letters) {
    if (tessera_sampler_order(v, letters, dst, 256) < 0) {
        fprintf(stderr, "%s: %s: %s\n", cmd, flag, tessera_last_error());
        return -1;
    }
    if (!*dst) strcpy(dst, "none"); /* "" is the default order: keep "no step" apart */
    return 0;
}
static int parse_samplers(const char *cmd, const char *flag, const char *v, void *dst) {
    return parse_order(cmd, flag, v, dst, false);
}
static int parse_sampling_seq(const char *cmd, const char *flag, const char *v, void *dst) {
    return parse_order(cmd, flag, v, dst, true);
}

/* --dry-sequence-breaker STRING (repeatable): the first replaces llama.cpp's
 * defaults; "none" means no breaker at all. */
static int parse_breaker(const char *cmd, const char *flag, const char *v, void *dst) {
    struct cli_breakers *b = dst;
    if (!b->set) b->n = 0;
    b->set = 1;
    if (!strcmp(v, "none")) {
        b->n = 0;
        return 0;
    }
    if (!*v) return cli_bad_value(cmd, flag, v, "a non-empty string (or none)");
    if (b->n >= CLI_MAX_BREAKERS) {
        fprintf(stderr, "%s: %s given more than %d times\n", cmd, flag, CLI_MAX_BREAKERS);
        return -1;
    }
    b->list[b->n++] = v;
    return 0;
}

/* --image FILE / --audio FILE: append to cli_params.media (dst is the
 * params; the kind is the flag's). */
static int parse_media(const char *cmd, const char *flag, const char *value, void *dst) {
    cli_params *p = dst;
    if (p->n_media == CLI_MAX_MEDIA) {
        fprintf(stderr, "%s: %s: at most %d media in one prompt\n", cmd, flag, CLI_MAX_MEDIA);
        return -1;
    }
    p->media_kind[p->n_media] = strstr(flag, "audio") ? 'a' : 'i';
    p->media[p->n_media++] = value;
    return 0;
}

/* The shared options, by group. Rows of one group stay together: --help
 * prints them under the group's heading in this order. */
static const cli_option common_options[] = {
    {"-m", "--model", "FILE", "GGUF model file", CLI_STR, P(model), 0, 0, NULL, CLI_NO_DEFAULT,
     CLI_G_MODEL},

    {"-p", "--prompt", "TEXT", "prompt text", CLI_STR, P(prompt), 0, 0, NULL, CLI_NO_DEFAULT,
     CLI_G_PROMPT},
    {"-f", "--file", "FILE", "read the prompt from FILE", CLI_STR, P(prompt_file), 0, 0, NULL,
     CLI_NO_DEFAULT, CLI_G_PROMPT},
    {NULL, "--no-escape", NULL,
     "take -p and --system as written (by default \\n, \\t, \\\\, \\\", \\', \\xNN are processed)",
     CLI_SWITCH, P(no_escape), 0, 0, NULL, 0, CLI_G_ESCAPE},

    {"-dev", "--device", "LIST",
     "devices to use, in order, e.g. vulkan0,cpu-avx0 (see 'tessera devices'; default: GPU, best "
     "CPU, ref)",
     CLI_STR, P(devices), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_DEVICE},
    {"-ngl", "--n-gpu-layers", "N|auto",
     "layers whose weights go on the first GPU device; auto: as many as fit its free memory (default: "
     "auto)", CLI_FN, P(n_gpu_layers), 0, 0, parse_ngl, CLI_NO_DEFAULT, CLI_G_DEVICE},
    {"-ot", "--override-tensor", "PATTERN=DEVICE,...",
     "keep the weights whose name matches PATTERN (a regular expression) on DEVICE: CPU (host memory) or "
     "the GPU device; the first matching rule wins, before -ngl (repeatable)",
     CLI_FN, P(overrides), 0, 0, parse_override, CLI_NO_DEFAULT, CLI_G_DEVICE},
    {"-cmoe", "--cpu-moe", NULL, "keep every layer's experts (ffn_*_exps) in host memory, computed on the CPU",
     CLI_SWITCH, P(cpu_moe), 0, 0, NULL, 0, CLI_G_DEVICE},
    {"-ncmoe", "--n-cpu-moe", "N", "keep the experts of the first N layers in host memory", CLI_INT,
     P(n_cpu_moe), 0, INT32_MAX, NULL, 0, CLI_G_DEVICE},
    {NULL, "--plugin-dir", "DIR", "also look for backend plugins in DIR (repeatable)", CLI_DIR,
     P(plugin_dirs), 0, 0, NULL, 0, CLI_G_DEVICE | CLI_G_PLUGINS},
    {NULL, "--explain", NULL, "print where each part of the graph runs (stderr)", CLI_SWITCH,
     P(explain), 0, 0, NULL, 0, CLI_G_DEVICE},
    {NULL, "--profile", NULL,
     "time each op type on the devices (timestamp queries) and print time, bytes, GB/s and FLOP/s per op "
     "(stderr)", CLI_SWITCH, P(profile), 0, 0, NULL, 0, CLI_G_DEVICE},

    {NULL, "--lora", "FILE", "apply the LoRA adapter FILE (a GGUF adapter; repeatable, or FILE1,FILE2)", CLI_LORA,
     P(lora), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_LORA},
    {NULL, "--lora-scaled", "FILE SCALE",
     "apply the LoRA adapter FILE times SCALE (repeatable; also llama.cpp's FILE:SCALE,FILE2:SCALE2)",
     CLI_LORA_SCALED, P(lora), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_LORA},
    {NULL, "--lora-init-without-apply", NULL,
     "load the adapters at scale 0 (POST /lora-adapters or a request's 'lora' applies them)", CLI_SWITCH,
     P(lora_init_without_apply), 0, 0, NULL, 0, CLI_G_LORA_SERVE},

    {NULL, "--no-mmap", NULL, "read the weights into memory instead of mapping the file", CLI_SWITCH,
     P(no_mmap), 0, 0, NULL, 0, CLI_G_DEVICE},
    {NULL, "--mlock", NULL, "keep the weights in RAM (mlock; a refusal is a warning)", CLI_SWITCH,
     P(use_mlock), 0, 0, NULL, 0, CLI_G_DEVICE},

    {"-c", "--ctx-size", "N", "context size in tokens; 0: the model's training context, at most 4096",
     CLI_INT, P(n_ctx), 0, 1 << 24, NULL, 0, CLI_G_CONTEXT},
    {"-b", "--batch-size", "N", "prompt tokens per micro-batch", CLI_INT, P(n_batch), 1, 1 << 20, NULL,
     0, CLI_G_CONTEXT},
    {"-t", "--threads", "N", "CPU threads (default: all online CPUs)", CLI_INT, P(n_threads), 1, 1024, NULL,
     CLI_NO_DEFAULT, CLI_G_CONTEXT},
    {"-ctk", "--cache-type-k", "TYPE", "K cache type: " CLI_KV_TYPES, CLI_KV, P(cache_type[0]), 0, 0, NULL, 0,
     CLI_G_CONTEXT},
    {"-ctv", "--cache-type-v", "TYPE", "V cache type (a quantized one needs -fa on)", CLI_KV, P(cache_type[1]), 0,
     0, NULL, 0, CLI_G_CONTEXT},
    {NULL, "--kv-type", "TYPE", "K and V cache type", CLI_KV_BOTH, P(cache_type), 0, 0, NULL, CLI_HIDDEN,
     CLI_G_CONTEXT},
    {"-fa", "--flash-attn", "on|off|auto",
     "attention as one FLASH_ATTN op (stores V like K); auto: where every device computes it", CLI_FA,
     P(flash_attn), 0, 0, NULL, 0, CLI_G_CONTEXT},
    {NULL, "--swa-full", NULL,
     "sliding-window layers keep the whole context (default: their window, plus a batch, per sequence)",
     CLI_SWITCH, P(swa_full), 0, 0, NULL, 0, CLI_G_CONTEXT},
    {NULL, "--context-shift", NULL,
     "when the context is full, keep the first --keep tokens, drop half of the rest and go on (default: "
     "stop)", CLI_SWITCH, P(context_shift), 0, 0, NULL, 0, CLI_G_SHIFT},
    {NULL, "--keep", "N", "tokens of the prompt a context shift keeps (after BOS); -1: the whole prompt",
     CLI_INT, P(n_keep), -1, INT32_MAX, NULL, 0, CLI_G_SHIFT},

    {"-n", "--n-predict", "N", "tokens to generate (serve: for a request that sends no max_tokens); -1: until the end of text "
     "or a full context",
     CLI_INT, P(n_predict), -1, INT32_MAX, NULL, 0, CLI_G_PREDICT},

    {NULL, "--seed", "N", "sampling seed; -1: random (printed with --verbose)", CLI_SEED, P(sp.seed), 0,
     0, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--temp", "T", "temperature; <= 0: greedy", CLI_FLOAT, P(sp.temp), -INFINITY, INFINITY, NULL,
     0, CLI_G_SAMPLING},
    {NULL, "--top-k", "N", "keep the N most likely tokens; <= 0: off", CLI_INT, P(sp.top_k), INT32_MIN,
     INT32_MAX, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--top-p", "P", "keep the smallest set of tokens with mass >= P; 1: off", CLI_FLOAT,
     P(sp.top_p), 0, 1, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--min-p", "P", "drop tokens below P x the most likely one's probability; 0: off",
     CLI_FLOAT, P(sp.min_p), 0, 1, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--typical", "P", "locally typical sampling; 1: off", CLI_FLOAT, P(sp.typical_p), 0, 1, NULL,
     0, CLI_G_SAMPLING},
    {NULL, "--repeat-penalty", "R", "penalize repeated tokens; 1: off", CLI_FLOAT, P(sp.penalty_repeat),
     0, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--repeat-last-n", "N", "tokens the penalties look back at; 0: off, -1: the context size",
     CLI_INT, P(sp.penalty_last_n), -1, INT32_MAX, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--presence-penalty", "P", "subtract P from the logit of every token already seen; 0: off",
     CLI_FLOAT, P(sp.penalty_present), -INFINITY, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--frequency-penalty", "F", "subtract F per occurrence of a token already seen; 0: off",
     CLI_FLOAT, P(sp.penalty_freq), -INFINITY, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--logit-bias", "ID(+|-)B", "add B to token ID's logit, e.g. 15043+1.5 or 2-inf (repeatable)",
     CLI_BIAS, P(bias), 0, 0, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--samplers", "SAMPLERS",
     "samplers in the order they run, separated by ';' (default: "
     "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)",
     CLI_FN, P(samplers), 0, 0, parse_samplers, CLI_NO_DEFAULT, CLI_G_SAMPLING},
    {"--sampler-seq", "--sampling-seq", "SEQUENCE",
     "the same as letters: e penalties, d dry, s top_n_sigma, k top_k, y typ_p, p top_p, m min_p, x xtc, t "
     "temperature (default: edskypmxt)",
     CLI_FN, P(samplers), 0, 0, parse_sampling_seq, CLI_NO_DEFAULT, CLI_G_SAMPLING},
    {"--top-nsigma", "--top-n-sigma", "N", "keep logits within N standard deviations of the best; <= 0: off",
     CLI_FLOAT, P(sp.top_n_sigma), -INFINITY, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--xtc-probability", "P", "chance that XTC drops the most likely tokens; 0: off", CLI_FLOAT,
     P(sp.xtc_probability), 0, 1, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--xtc-threshold", "T",
     "XTC drops every token at least T likely but the least likely of them; > 0.5: off", CLI_FLOAT,
     P(sp.xtc_threshold), 0, 1, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dry-multiplier", "M", "DRY repetition penalty multiplier; 0: off", CLI_FLOAT, P(sp.dry_multiplier), 0,
     INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dry-base", "B", "DRY base: a repeat of n tokens costs M x B^(n - allowed length)", CLI_FLOAT,
     P(sp.dry_base), 0, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dry-allowed-length", "N", "repeats this long go unpenalized by DRY", CLI_INT,
     P(sp.dry_allowed_length), 0, INT32_MAX, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dry-penalty-last-n", "N", "tokens DRY looks back at; 0: off, -1: the context size", CLI_INT,
     P(sp.dry_penalty_last_n), -1, INT32_MAX, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dry-sequence-breaker", "STRING",
     "add a DRY sequence breaker, replacing the defaults ('\\n', ':', '\"', '*'); none: no breakers (repeatable)",
     CLI_FN, P(dry_breakers), 0, 0, parse_breaker, CLI_NO_DEFAULT, CLI_G_SAMPLING},
    {NULL, "--dynatemp-range", "R", "dynamic temperature: between temp - R and temp + R by entropy; 0: off",
     CLI_FLOAT, P(sp.dynatemp_range), 0, INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--dynatemp-exp", "E", "dynamic temperature exponent", CLI_FLOAT, P(sp.dynatemp_exponent), 0, INFINITY,
     NULL, 0, CLI_G_SAMPLING},
    {NULL, "--mirostat", "N",
     "Mirostat sampling: 0 off, 1 Mirostat, 2 Mirostat 2.0 (top-k, top-p, typical and the other samplers are "
     "then ignored)",
     CLI_INT, P(sp.mirostat), 0, 2, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--mirostat-lr", "ETA", "Mirostat learning rate, parameter eta", CLI_FLOAT, P(sp.mirostat_eta), 0,
     INFINITY, NULL, 0, CLI_G_SAMPLING},
    {NULL, "--mirostat-ent", "TAU", "Mirostat target entropy, parameter tau", CLI_FLOAT, P(sp.mirostat_tau), 0,
     INFINITY, NULL, 0, CLI_G_SAMPLING},

    {NULL, "--grammar", "GBNF", "only output the grammar allows (llama.cpp's GBNF, start rule 'root')",
     CLI_STR, P(grammar), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_GRAMMAR},
    {NULL, "--grammar-file", "FILE", "--grammar, read from FILE", CLI_STR, P(grammar_file), 0, 0, NULL,
     CLI_NO_DEFAULT, CLI_G_GRAMMAR},
    {"-j", "--json-schema", "JSON", "only JSON that the JSON Schema allows", CLI_STR, P(json_schema), 0, 0,
     NULL, CLI_NO_DEFAULT, CLI_G_GRAMMAR},
    {"-jf", "--json-schema-file", "FILE", "--json-schema, read from FILE", CLI_STR, P(json_schema_file), 0,
     0, NULL, CLI_NO_DEFAULT, CLI_G_GRAMMAR},

    {NULL, "--chat-template", "NAME|JINJA",
     "chat template instead of the model's: chatml, llama2, llama3, gemma, phi3, zephyr, mistral, or "
     "Jinja text", CLI_STR, P(chat_template), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_TEMPLATE},
    {NULL, "--chat-template-file", "FILE", "Jinja chat template instead of the model's", CLI_STR,
     P(chat_template_file), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_TEMPLATE},
    {"-sys", "--system", "TEXT", "system message", CLI_STR, P(system), 0, 0, NULL, CLI_NO_DEFAULT,
     CLI_G_CHAT},

    {NULL, "--embeddings", NULL, "an embedding model: serve /v1/embeddings (not completions)", CLI_SWITCH,
     P(embeddings), 0, 0, NULL, 0, CLI_G_EMBED},
    {NULL, "--embedding", NULL, "--embeddings", CLI_SWITCH, P(embeddings), 0, 0, NULL, CLI_HIDDEN, CLI_G_EMBED},
    {NULL, "--reranking", NULL, "a reranker: serve /v1/rerank (pooling rank)", CLI_SWITCH, P(reranking), 0, 0,
     NULL, 0, CLI_G_EMBED},
    {NULL, "--rerank", NULL, "--reranking", CLI_SWITCH, P(reranking), 0, 0, NULL, CLI_HIDDEN, CLI_G_EMBED},
    {NULL, "--pooling", "none|mean|cls|last|rank", "how token vectors become one (default: the model's)",
     CLI_FN, P(pooling), 0, 0, parse_pooling, CLI_NO_DEFAULT, CLI_G_EMBED},

    {"-md", "--model-draft", "FILE",
     "draft model for speculative decoding: a small model with the target's vocabulary drafts tokens the "
     "target verifies in one batch (the output is the target's; not with --mmproj, nor with run's -i)",
     CLI_STR, P(model_draft), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_SPEC},
    {NULL, "--spec-draft-model", "FILE", "-md", CLI_STR, P(model_draft), 0, 0, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {"-devd", "--device-draft", "LIST", "devices of the draft model (default: --device's)", CLI_STR,
     P(devices_draft), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_SPEC},
    {NULL, "--spec-draft-device", "LIST", "-devd", CLI_STR, P(devices_draft), 0, 0, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {"-ngld", "--gpu-layers-draft", "N|auto", "draft model layers on the GPU device (default: auto)", CLI_FN,
     P(n_gpu_layers_draft), 0, 0, parse_ngl, CLI_NO_DEFAULT, CLI_G_SPEC},
    {NULL, "--n-gpu-layers-draft", "N|auto", "-ngld", CLI_FN, P(n_gpu_layers_draft), 0, 0, parse_ngl,
     CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--spec-draft-ngl", "N|auto", "-ngld", CLI_FN, P(n_gpu_layers_draft), 0, 0, parse_ngl, CLI_HIDDEN,
     CLI_G_SPEC},
    {NULL, "--draft-max", "N", "most tokens drafted per step", CLI_INT, P(spec.n_max), 1, 256, NULL, 0,
     CLI_G_SPEC},
    {NULL, "--draft", "N", "--draft-max", CLI_INT, P(spec.n_max), 1, 256, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--draft-n", "N", "--draft-max", CLI_INT, P(spec.n_max), 1, 256, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--spec-draft-n-max", "N", "--draft-max", CLI_INT, P(spec.n_max), 1, 256, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--draft-min", "N", "a shorter draft is not verified", CLI_INT, P(spec.n_min), 0, 256, NULL, 0,
     CLI_G_SPEC},
    {NULL, "--draft-n-min", "N", "--draft-min", CLI_INT, P(spec.n_min), 0, 256, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--spec-draft-n-min", "N", "--draft-min", CLI_INT, P(spec.n_min), 0, 256, NULL, CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--draft-p-min", "P", "the draft model stops before a token it gives less than P", CLI_FLOAT,
     P(spec.p_min), 0, 1, NULL, 0, CLI_G_SPEC},
    {NULL, "--spec-draft-p-min", "P", "--draft-p-min", CLI_FLOAT, P(spec.p_min), 0, 1, NULL, CLI_HIDDEN,
     CLI_G_SPEC},
    {NULL, "--spec-type", "TYPE",
     "ngram-simple: draft from an earlier occurrence of the text's last n-gram (prompt lookup, no draft "
     "model); draft-simple: the -md model; none",
     CLI_FN, P(spec_ngram), 0, 0, parse_spec_type, CLI_NO_DEFAULT, CLI_G_SPEC},
    {NULL, "--spec-ngram-simple-size-n", "N", "n-gram looked up for ngram-simple", CLI_INT, P(spec.ngram_n), 1,
     1024, NULL, 0, CLI_G_SPEC},
    {NULL, "--spec-ngram-size-n", "N", "--spec-ngram-simple-size-n", CLI_INT, P(spec.ngram_n), 1, 1024, NULL,
     CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--spec-ngram-simple-size-m", "N", "most tokens an n-gram drafts", CLI_INT, P(spec.ngram_m), 1, 1024,
     NULL, 0, CLI_G_SPEC},
    {NULL, "--spec-ngram-size-m", "N", "--spec-ngram-simple-size-m", CLI_INT, P(spec.ngram_m), 1, 1024, NULL,
     CLI_HIDDEN, CLI_G_SPEC},
    {NULL, "--mmproj", "FILE", "multimodal projector (llama.cpp's mmproj GGUF) for --image and --audio",
     CLI_STR, P(mmproj), 0, 0, NULL, CLI_NO_DEFAULT, CLI_G_MEDIA},
    {NULL, "--image", "FILE",
     "an image for the prompt (JPEG, PNG, WebP, BMP, GIF; repeatable): each goes where the prompt says "
     "<__media__>, or before the prompt when it has no marker", CLI_FN, 0, 0, 0, parse_media, CLI_NO_DEFAULT,
     CLI_G_MEDIA},
    {NULL, "--audio", "FILE", "a sound for the prompt (WAV, FLAC, MP3; repeatable), as --image", CLI_FN, 0, 0, 0,
     parse_media, CLI_NO_DEFAULT, CLI_G_MEDIA},
    {NULL, "--no-mmproj-offload", NULL, "run the multimodal encoder on the CPU, not the GPU", CLI_SWITCH,
     P(no_mmproj_offload), 0, 0, NULL, 0, CLI_G_MEDIA},

    {NULL, "--verbose", NULL, "model, context, device and speed details on stderr", CLI_SWITCH,
     P(verbose), 0, 0, NULL, 0, CLI_G_ALWAYS},
};
enum { N_COMMON = sizeof common_options / sizeof common_options[0] };

static const struct {
    unsigned group;
    const char *heading;
} group_headings[] = {
    {CLI_G_MODEL, "model"},
    {CLI_G_LORA | CLI_G_LORA_SERVE, "LoRA adapters"},
    {CLI_G_PROMPT | CLI_G_ESCAPE, "prompt"},
    {CLI_G_DEVICE | CLI_G_PLUGINS, "devices"},
    {CLI_G_CONTEXT | CLI_G_SHIFT, "context"},
    {CLI_G_PREDICT, "generation"},
    {CLI_G_SAMPLING, "sampling (llama.cpp's order and defaults)"},
    {CLI_G_GRAMMAR, "constrained output"},
    {CLI_G_CHAT | CLI_G_TEMPLATE, "chat"},
    {CLI_G_EMBED, "embeddings"},
    {CLI_G_SPEC, "speculative decoding"},
    {CLI_G_MEDIA, "images and sounds"},
    {CLI_G_ALWAYS, "general"},
};

void cli_params_init(cli_params *p) {
    memset(p, 0, sizeof *p);
    p->n_batch = 512;
    p->n_gpu_layers = CLI_NGL_AUTO;
    p->pooling = TESSERA_POOLING_UNSPECIFIED;
    p->cache_type[0] = p->cache_type[1] = TESSERA_KV_F16;
    p->flash_attn = TESSERA_FLASH_ATTN_OFF;
    p->n_predict = -1;
    p->sp = tessera_sampler_default_params();
    p->sp.logit_bias = p->bias;
    p->n_gpu_layers_draft = CLI_NGL_AUTO;
    p->spec = tessera_spec_default_params();
}

int cli_bad_value(const char *cmd, const char *flag, const char *value, const char *want) {
    fprintf(stderr, "%s: %s expects %s, got '%s'\n", cmd, flag, want, value);
    return -1;
}

/* ------------------------------------------------------------ lookup */

static int spelled(const cli_option *o, const char *name) {
    return (o->short_name && !strcmp(o->short_name, name)) || (o->long_name && !strcmp(o->long_name, name));
}

static const cli_option *own_find(const cli_command *cmd, const char *name) {
    for (const cli_option *o = cmd->own; o && (o->short_name || o->long_name); o++)
        if (spelled(o, name)) return o;
    return NULL;
}

/* A shared row is hidden by an own row with one of its spellings. */
static int shadowed(const cli_command *cmd, const cli_option *o) {
    return (o->short_name && own_find(cmd, o->short_name)) || (o->long_name && own_find(cmd, o->long_name));
}

static unsigned groups_of(const cli_command *cmd) {
    return cmd->groups | CLI_G_ALWAYS;
}

static const cli_option *find(const cli_command *cmd, const char *name) {
    const cli_option *o = own_find(cmd, name);
    if (o) return o;
    for (int i = 0; i < N_COMMON; i++)
        if ((common_options[i].group & groups_of(cmd)) && spelled(&common_options[i], name))
            return &common_options[i];
    return NULL;
}

/* ------------------------------------------------------------ values */

static int parse_int(const char *cmd, const char *flag, const char *v, const cli_option *o, int32_t *dst) {
    long x;
    if (cli_parse_long(v, (long)o->lo, (long)o->hi, &x) == 0) {
        *dst = (int32_t)x;
        return 0;
    }
    char want[96];
    if (o->lo <= INT32_MIN && o->hi >= INT32_MAX) snprintf(want, sizeof want, "an integer");
    else if (o->hi >= INT32_MAX) snprintf(want, sizeof want, "an integer >= %.0f", o->lo);
    else snprintf(want, sizeof want, "an integer in %.0f..%.0f", o->lo, o->hi);
    return cli_bad_value(cmd, flag, v, want);
}

static int parse_float(const char *cmd, const char *flag, const char *v, const cli_option *o, float *dst) {
    if (cli_parse_float(v, (float)o->lo, (float)o->hi, dst) == 0) return 0;
    char want[96];
    if (isinf(o->lo) && isinf(o->hi)) snprintf(want, sizeof want, "a number");
    else if (isinf(o->hi)) snprintf(want, sizeof want, "a number >= %g", o->lo);
    else snprintf(want, sizeof want, "a number in %g..%g", o->lo, o->hi);
    return cli_bad_value(cmd, flag, v, want);
}

/* -1 (llama.cpp's "random") or 0..4294967295. */
static int parse_seed(const char *cmd, const char *flag, const char *v, uint32_t *dst) {
    if (!strcmp(v, "-1")) {
        *dst = TESSERA_SEED_RANDOM;
        return 0;
    }
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || *v == '-' || *v == '+' || x > UINT32_MAX)
        return cli_bad_value(cmd, flag, v, "-1 (random) or an integer in 0..4294967295");
    *dst = (uint32_t)x;
    return 0;
}

/* "ID+B" or "ID-B" (B may be "inf"), llama.cpp's --logit-bias syntax. */
static int parse_bias(const char *cmd, const char *flag, const char *v, cli_params *p) {
    if (p->sp.n_logit_bias >= CLI_MAX_BIAS) {
        fprintf(stderr, "%s: at most %d %s options\n", cmd, CLI_MAX_BIAS, flag);
        return -1;
    }
    const char *want = "TOKEN+BIAS or TOKEN-BIAS (e.g. 15043+1.5, 2-inf)";
    char *end;
    errno = 0;
    long id = strtol(v, &end, 10);
    if (errno || end == v || *v == '-' || *v == '+' || id > INT32_MAX || (*end != '+' && *end != '-'))
        return cli_bad_value(cmd, flag, v, want);
    float sign = *end == '-' ? -1.0f : 1.0f, b;
    const char *num = end + 1;
    if (!strcmp(num, "inf")) b = INFINITY;
    else if (*num == '+' || *num == '-' || cli_parse_float(num, -INFINITY, INFINITY, &b) != 0)
        return cli_bad_value(cmd, flag, v, want);
    p->bias[p->sp.n_logit_bias++] = (tessera_logit_bias){.token = (tessera_token)id, .bias = sign * b};
    return 0;
}

static const char *const fa_names[] = {[TESSERA_FLASH_ATTN_OFF] = "off", [TESSERA_FLASH_ATTN_ON] = "on",
                                       [TESSERA_FLASH_ATTN_AUTO] = "auto"};

const char *cli_flash_attn_name(tessera_flash_attn fa) {
    return (unsigned)fa <= TESSERA_FLASH_ATTN_AUTO ? fa_names[fa] : "?";
}

int cli_parse_flash_attn(const char *cmd, const char *flag, const char *v, tessera_flash_attn *out) {
    for (int i = 0; i <= TESSERA_FLASH_ATTN_AUTO; i++)
        if (!strcmp(v, fa_names[i])) {
            *out = (tessera_flash_attn)i;
            return 0;
        }
    return cli_bad_value(cmd, flag, v, "on, off or auto");
}

static int apply(const char *cmd, const cli_option *o, const char *flag, const char *v, cli_params *p,
                 void *own) {
    char *dst = (char *)(o->group ? (void *)p : own) + o->offset;
    switch (o->type) {
    case CLI_SWITCH: *(int *)dst = 1; return 0;
    case CLI_STR: *(const char **)dst = v; return 0;
    case CLI_INT: return parse_int(cmd, flag, v, o, (int32_t *)dst);
    case CLI_FLOAT: return parse_float(cmd, flag, v, o, (float *)dst);
    case CLI_SEED: return parse_seed(cmd, flag, v, (uint32_t *)dst);
    case CLI_KV:
    case CLI_KV_BOTH: {
        int t = tessera_kv_type_from_name(v);
        if (t < 0) return cli_bad_value(cmd, flag, v, "a KV cache type (" CLI_KV_TYPES ")");
        ((tessera_kv_type *)dst)[0] = (tessera_kv_type)t;
        if (o->type == CLI_KV_BOTH) ((tessera_kv_type *)dst)[1] = (tessera_kv_type)t;
        return 0;
    }
    case CLI_FA: return cli_parse_flash_attn(cmd, flag, v, (tessera_flash_attn *)dst);
    case CLI_BIAS: return parse_bias(cmd, flag, v, p);
    case CLI_DIR: {
        int n = p->n_plugin_dirs;
        int rc = cli_plugin_dir_add(cmd, p->plugin_dirs, &n, v);
        p->n_plugin_dirs = n;
        return rc;
    }
    case CLI_LORA:
    case CLI_LORA_SCALED: return 0; /* cli_parse takes them: they may have two values */
    case CLI_FN: return o->fn(cmd, flag, v, dst);
    }
    return -1;
}

/* --lora FILE and --lora-scaled FILE SCALE (llama.cpp's older spelling,
 * two arguments), or llama.cpp's current lists: --lora F1,F2 and
 * --lora-scaled F1:S1,F2:S2 (also as --flag=LIST). *i is the flag's index
 * and moves past what was taken. */
static int lora_add(const char *cmd, const char *flag, cli_params *p, const char *path, size_t len, float scale) {
    if (p->n_lora >= CLI_MAX_LORA) {
        fprintf(stderr, "%s: at most %d LoRA adapters (--lora, --lora-scaled)\n", cmd, CLI_MAX_LORA);
        return -1;
    }
    if (len == 0) return cli_bad_value(cmd, flag, path, "a file name");
    /* The copy lives as long as the process, as argv does; a static list
     * holds it so that LeakSanitizer sees it reachable at exit. */
    static char *kept[4 * CLI_MAX_LORA];
    static size_t n_kept;
    char *copy = strndup(path, len);
    if (!copy) return fprintf(stderr, "%s: out of memory\n", cmd), -1;
    if (n_kept < sizeof kept / sizeof kept[0]) kept[n_kept++] = copy;
    p->lora[p->n_lora++] = (cli_lora){.path = copy, .scale = scale};
    return 0;
}

static int parse_lora(const char *cmd, const char *flag, int scaled, int argc, char **argv, int *i,
                      const char *inline_value, cli_params *p) {
    const char *v = inline_value;
    if (!v) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "%s: option %s needs %s\n", cmd, flag, scaled ? "FILE SCALE or FILE:SCALE" : "FILE");
            return -1;
        }
        v = argv[++*i];
    }
    /* the two-argument form: FILE, then a number */
    float scale;
    if (scaled && !inline_value && *i + 1 < argc && cli_parse_float(argv[*i + 1], -INFINITY, INFINITY, &scale) == 0) {
        ++*i;
        return lora_add(cmd, flag, p, v, strlen(v), scale);
    }
    for (const char *item = v; *item;) {
        const char *end = strchr(item, ',');
        size_t len = end ? (size_t)(end - item) : strlen(item);
        scale = 1.0f;
        if (scaled) {
            const char *colon = memrchr(item, ':', len);
            char num[64];
            size_t nl = colon ? len - (size_t)(colon - item) - 1 : 0;
            if (!colon || nl == 0 || nl >= sizeof num)
                return cli_bad_value(cmd, flag, v, "FILE SCALE, or FILE:SCALE[,FILE:SCALE...] (e.g. a.gguf:0.5)");
            memcpy(num, colon + 1, nl);
            num[nl] = '\0';
            if (cli_parse_float(num, -INFINITY, INFINITY, &scale) != 0)
                return cli_bad_value(cmd, flag, num, "a SCALE (a number, e.g. 0.5)");
            len = (size_t)(colon - item);
        }
        if (lora_add(cmd, flag, p, item, len, scale) != 0) return -1;
        item += (end ? (size_t)(end - item) + 1 : strlen(item));
    }
    return 0;
}

/* ------------------------------------------------------------ parsing */

int cli_parse(const cli_command *cmd, int argc, char **argv, cli_params *p, void *own) {
    const char *name = cmd->name;
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] == '\0') {
            if (p->n_positional >= cmd->max_positional || p->n_positional >= CLI_MAX_POSITIONAL) {
                fprintf(stderr, "%s: unexpected argument '%s' (see '%s --help')\n", name, a, name);
                return -1;
            }
            p->positional[p->n_positional++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            options_done = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_print_help(cmd, p, own, stdout);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("tessera %s\n", tessera_version());
            return 1;
        }
        /* --flag=value */
        char flag[64];
        const char *inline_value = NULL, *eq = strchr(a, '=');
        size_t flen = strlen(a);
        if (a[1] == '-' && eq) {
            inline_value = eq + 1;
            flen = (size_t)(eq - a);
        }
        const cli_option *o = NULL;
        if (flen < sizeof flag) {
            memcpy(flag, a, flen);
            flag[flen] = '\0';
            o = find(cmd, flag);
        }
        if (!o) {
            fprintf(stderr, "%s: unknown option '%.*s' (see '%s --help')\n", name, (int)flen, a, name);
            return -1;
        }
        if (o->type == CLI_SWITCH) {
            if (inline_value) {
                fprintf(stderr, "%s: option %s takes no value\n", name, flag);
                return -1;
            }
            if (apply(name, o, flag, NULL, p, own) < 0) return -1;
            continue;
        }
        if (o->type == CLI_LORA || o->type == CLI_LORA_SCALED) {
            if (parse_lora(name, flag, o->type == CLI_LORA_SCALED, argc, argv, &i, inline_value, p) != 0) return -1;
            continue;
        }
        const char *v = inline_value;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "%s: option %s needs a value (%s)\n", name, flag, o->metavar);
                return -1;
            }
            v = argv[++i];
        }
        if (apply(name, o, flag, v, p, own) < 0) return -1;
    }
    p->sp.logit_bias = p->bias;
    return 0;
}

/* ------------------------------------------------------------ --help */

enum { HELP_COL = 28, HELP_WIDTH = 80 };

/* The "(default: X)" of a row, read from its destination; "" when none. */
static void default_text(const cli_option *o, const cli_params *p, const void *own, char *buf, size_t size) {
    buf[0] = '\0';
    if (o->flags & CLI_NO_DEFAULT) return;
    if (!own && !o->group) return;
    const char *src = (const char *)(o->group ? (const void *)p : own) + o->offset;
    switch (o->type) {
    case CLI_STR: {
        const char *s = *(const char *const *)src;
        if (s) snprintf(buf, size, " (default: %s)", s);
        break;
    }
    case CLI_INT: snprintf(buf, size, " (default: %d)", (int)*(const int32_t *)src); break;
    case CLI_FLOAT: snprintf(buf, size, " (default: %g)", (double)*(const float *)src); break;
    case CLI_SEED: {
        uint32_t s = *(const uint32_t *)src;
        if (s == TESSERA_SEED_RANDOM) snprintf(buf, size, " (default: -1)");
        else snprintf(buf, size, " (default: %u)", s);
        break;
    }
    case CLI_KV:
    case CLI_KV_BOTH: snprintf(buf, size, " (default: %s)", tessera_kv_type_name(*(const tessera_kv_type *)src)); break;
    case CLI_FA: snprintf(buf, size, " (default: %s)", cli_flash_attn_name(*(const tessera_flash_attn *)src)); break;
    default: break;
    }
}

/* Words of text from column col, wrapped at HELP_WIDTH, continuation lines
 * at HELP_COL. */
static void print_wrapped(FILE *out, int col, const char *text) {
    const char *s = text;
    while (*s) {
        const char *w = s;
        while (*w == ' ') w++;
        const char *e = w;
        while (*e && *e != ' ') e++;
        int len = (int)(e - w);
        if (col > HELP_COL && col + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else if (col > HELP_COL) {
            fputc(' ', out);
            col++;
        }
        fwrite(w, 1, (size_t)len, out);
        col += len;
        s = e;
    }
    fputc('\n', out);
}

static void print_row(FILE *out, const cli_option *o, const cli_params *p, const void *own) {
    char head[96], dflt[160], text[512];
    int n;
    if (o->short_name && o->long_name) n = snprintf(head, sizeof head, "  %s, %s", o->short_name, o->long_name);
    else n = snprintf(head, sizeof head, "      %s", o->short_name ? o->short_name : o->long_name);
    if (o->metavar && n < (int)sizeof head) snprintf(head + n, sizeof head - (size_t)n, " %s", o->metavar);
    default_text(o, p, own, dflt, sizeof dflt);
    snprintf(text, sizeof text, "%s%s", o->help, dflt);
    fputs(head, out);
    int col = (int)strlen(head);
    if (col + 2 > HELP_COL) {
        fprintf(out, "\n%*s", HELP_COL, "");
    } else {
        fprintf(out, "%*s", HELP_COL - col, "");
    }
    print_wrapped(out, HELP_COL, text);
}

void cli_print_help(const cli_command *cmd, const cli_params *p, const void *own, FILE *out) {
    fprintf(out, "usage: %s %s\n", cmd->name, cmd->synopsis);
    if (cmd->about) fprintf(out, "\n%s\n", cmd->about);
    if (cmd->own && (cmd->own->short_name || cmd->own->long_name)) {
        fprintf(out, "\noptions:\n");
        for (const cli_option *o = cmd->own; o->short_name || o->long_name; o++)
            if (!(o->flags & CLI_HIDDEN)) print_row(out, o, p, own);
    }
    unsigned groups = groups_of(cmd);
    for (size_t g = 0; g < sizeof group_headings / sizeof group_headings[0]; g++) {
        int printed = 0;
        for (int i = 0; i < N_COMMON; i++) {
            const cli_option *o = &common_options[i];
            if (!(o->group & groups & group_headings[g].group) || shadowed(cmd, o) || (o->flags & CLI_HIDDEN))
                continue;
            /* A row of several groups is listed under the first one taken. */
            int earlier = 0;
            for (size_t h = 0; h < g; h++) earlier |= (o->group & groups & group_headings[h].group) != 0;
            if (earlier) continue;
            if (!printed++) fprintf(out, "\n%s:\n", group_headings[g].heading);
            print_row(out, o, p, own);
        }
        if (group_headings[g].group == CLI_G_ALWAYS) {
            if (!printed) fprintf(out, "\n%s:\n", group_headings[g].heading);
            fprintf(out, "  -h, --help%*sthis text\n", HELP_COL - 12, "");
            fprintf(out, "      --version%*sprint the version and exit\n", HELP_COL - 15, "");
        }
    }
    fprintf(out, "\nValues may follow the flag (--ctx-size 2048) or an '=' (--ctx-size=2048).\n");
    if (cmd->epilog) fprintf(out, "\n%s", cmd->epilog);
    if (cmd->more_help) cmd->more_help(out);
}

/* ------------------------------------------------------------ escapes */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t cli_unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        if (*r != '\\' || !r[1]) {
            *w++ = *r++;
            continue;
        }
        char c = r[1], out;
        r += 2;
        switch (c) {
        case 'n': out = '\n'; break;
        case 't': out = '\t'; break;
        case 'r': out = '\r'; break;
        case 'a': out = '\a'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'v': out = '\v'; break;
        case '\\': out = '\\'; break;
        case '\'': out = '\''; break;
        case '"': out = '"'; break;
        case '?': out = '?'; break;
        case 'x':
            if (hexval(r[0]) >= 0 && hexval(r[1]) >= 0) {
                out = (char)(hexval(r[0]) * 16 + hexval(r[1]));
                r += 2;
                break;
            }
            *w++ = '\\'; /* not an escape: kept as written */
            out = c;
            break;
        default:
            *w++ = '\\';
            out = c;
            break;
        }
        *w++ = out;
    }
    *w = '\0';
    return (size_t)(w - s);
}
