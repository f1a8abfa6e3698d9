/*
 * cli_opts — the one option table of the tessera subcommands.
 *
 * Options every model-running command shares (model, devices, context,
 * prompt, sampling, chat) are defined once, in groups, in cli_opts.c and
 * parse into one cli_params. A subcommand is a cli_command: the groups it
 * takes plus a table of its own options (which parse into its own struct).
 * cli_parse() reads `--flag value`, `--flag=value` and `-f value`, prints
 * the one spelling of each error and generates --help from the tables.
 *
 * HOW TO ADD AN OPTION
 *  - one command only: add a row to that command's own table, e.g.
 *      {"-r", "--repetitions", "N", "timed runs per test", CLI_INT,
 *       CLI_OWN(bench_opts, reps), 1, 64},
 *  - several commands: add a field to cli_params and a row with its group
 *    to common_options[] in cli_opts.c (a new group: a new CLI_G_ bit, and
 *    add it to the commands that take it).
 *  Types are listed in cli_type; CLI_FN takes your own parse function.
 *  The help line is generated: spelling, value name, help text, then the
 *  default read from the destination (unless CLI_NO_DEFAULT).
 */
#ifndef TESSERA_CLI_OPTS_H
#define TESSERA_CLI_OPTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tessera/tessera.h>

#include "cli_util.h"

enum { CLI_MAX_BIAS = 64, CLI_MAX_POSITIONAL = 8, CLI_MAX_OVERRIDES = 64, CLI_MAX_BREAKERS = 32, CLI_MAX_LORA = 16,
       CLI_MAX_MEDIA = 16 };

/* -ot PATTERN=DEVICE[,PATTERN=DEVICE...] (repeatable): the rules in order,
 * NULL-terminated (tessera_model_params.tensor_overrides), their text in buf. */
typedef struct cli_overrides {
    const char *list[CLI_MAX_OVERRIDES + 1];
    int32_t n;
    char buf[4096];
    size_t used;
} cli_overrides;

/* -ngl auto (TESSERA_NGL_AUTO): as many layers as fit the GPU device. */
enum { CLI_NGL_AUTO = -1 };

/* Option groups (bits of cli_command.groups). */
enum {
    CLI_G_MODEL = 1u << 0,    /* -m */
    CLI_G_DEVICE = 1u << 1,   /* --device, -ngl, -ot, --cpu-moe, --n-cpu-moe, --plugin-dir, --explain,
                               * --no-mmap, --mlock */
    CLI_G_CONTEXT = 1u << 2,  /* -c, -b, -t, -ctk, -ctv, -fa */
    CLI_G_PROMPT = 1u << 3,   /* -p, -f */
    CLI_G_PREDICT = 1u << 4,  /* -n */
    CLI_G_SAMPLING = 1u << 5, /* --seed, --temp, --top-k, ... */
    CLI_G_CHAT = 1u << 6,     /* --system */
    CLI_G_TEMPLATE = 1u << 9, /* --chat-template */
    CLI_G_PLUGINS = 1u << 7,  /* --plugin-dir alone (commands without devices) */
    CLI_G_ESCAPE = 1u << 8,
    CLI_G_GRAMMAR = 1u << 10, /* --grammar, --grammar-file, --json-schema, --json-schema-file */
    CLI_G_SHIFT = 1u << 11,   /* --context-shift, --keep (run, chat, serve) */
    CLI_G_EMBED = 1u << 12,   /* --embeddings, --reranking, --pooling (embed, serve) */
    CLI_G_LORA = 1u << 13,    /* --lora, --lora-scaled */
    CLI_G_LORA_SERVE = 1u << 14, /* --lora-init-without-apply (serve) */
    CLI_G_MEDIA = 1u << 15,   /* --mmproj, --image, --audio, --no-mmproj-offload (run, chat) */
    CLI_G_SPEC = 1u << 16,    /* -md, --draft-max, --spec-type, ... (run, chat, serve) */
    CLI_G_ALWAYS = 1u << 31,  /* --verbose, --help, --version: every command */   /* --no-escape (else \n, \t, ... in -p and --system are processed) */
    /* What a command that loads a model and generates takes. */
    CLI_G_GENERATE = CLI_G_MODEL | CLI_G_DEVICE | CLI_G_CONTEXT | CLI_G_PREDICT | CLI_G_SAMPLING | CLI_G_LORA,
};

/* A LoRA adapter of --lora (scale 1) or --lora-scaled FILE SCALE. */
typedef struct cli_lora {
    const char *path;
    float scale;
} cli_lora;

/* The values of the shared options. cli_params_init() sets the defaults;
 * a command may change a default before cli_parse(). */
typedef struct cli_params {
    const char *model;
    /* prompt */
    const char *prompt, *prompt_file;
    int no_escape;
    /* devices */
    const char *devices;
    const char *plugin_dirs[CLI_MAX_PLUGIN_DIRS];
    int32_t n_plugin_dirs;
    int32_t n_gpu_layers; /* CLI_NGL_AUTO: fit to the device (the default) */
    /* weights placed by name: -ot rules; --cpu-moe (every block's experts
     * in host memory) or --n-cpu-moe N (the first N blocks') */
    cli_overrides overrides;
    int cpu_moe;
    int32_t n_cpu_moe;
    /* LoRA adapters, in order (--lora, --lora-scaled); loaded with the
     * context (cli_context_new), applied unless lora_init_without_apply
     * (serve: then at scale 0 until a request or POST /lora-adapters) */
    cli_lora lora[CLI_MAX_LORA];
    int32_t n_lora;
    int lora_init_without_apply;
    int explain;
    int profile; /* --profile: time each op on the devices (cli_print_profile) */
    /* model memory: --no-mmap, --mlock */
    int no_mmap, use_mlock;
    /* context: n_ctx 0 is the model's training context, at most 4096 */
    int32_t n_ctx, n_batch, n_threads;
    tessera_kv_type cache_type[2]; /* K, V (-ctk, -ctv; --kv-type sets both) */
    tessera_flash_attn flash_attn;
    int swa_full;
    /* a full context drops half of what follows the first n_keep tokens
     * (-1: the whole prompt) and goes on */
    int context_shift;
    int32_t n_keep;
    uint32_t n_seq_max; /* not an option: serve sets it to --parallel */
    /* embeddings: --embeddings, --reranking (rank pooling), --pooling (a
     * tessera_pooling, -1: the file's) */
    int embeddings, reranking;
    int32_t pooling;
    /* generation */
    int32_t n_predict;
    /* sp.logit_bias points at bias[]; sp.penalty_last_n -1 is the context
     * size (cli_sampler_new resolves it) */
    tessera_sampler_params sp;
    tessera_logit_bias bias[CLI_MAX_BIAS];
    /* --samplers / --sampling-seq in llama.cpp's names ("": the default
     * order); --dry-sequence-breaker's list (set: the defaults were
     * replaced; "none" leaves it empty). cli_sampler_new points sp at them. */
    char samplers[256];
    struct cli_breakers {
        const char *list[CLI_MAX_BREAKERS];
        int32_t n;
        int set;
    } dry_breakers;
    /* constrained output: at most one of these */
    const char *grammar, *grammar_file, *json_schema, *json_schema_file;
    /* chat */
    const char *chat_template, *chat_template_file, *system;
    int verbose;
    /* speculative decoding: a draft model (-md, on -devd with -ngld layers
     * offloaded) or n-grams (--spec-type ngram-simple); spec holds
     * --draft-max, --draft-min, --draft-p-min and the n-gram sizes */
    const char *model_draft, *devices_draft;
    int32_t n_gpu_layers_draft;
    int spec_ngram;
    tessera_spec_params spec;
    /* multimodal: the projector and the media in the order given (--image
     * and --audio append to media[], kind 'i' or 'a') */
    const char *mmproj;
    const char *media[CLI_MAX_MEDIA];
    char media_kind[CLI_MAX_MEDIA];
    int32_t n_media;
    int no_mmproj_offload;
    /* Arguments that are not options (FILE for inspect, ...). */
    const char *positional[CLI_MAX_POSITIONAL];
    int n_positional;
} cli_params;

typedef enum cli_type {
    CLI_SWITCH, /* no value: sets an int to 1 */
    CLI_STR,    /* const char * */
    CLI_INT,    /* int32_t in lo..hi */
    CLI_FLOAT,  /* float in lo..hi, never NaN */
    CLI_SEED,   /* uint32_t; -1 (as llama.cpp) is TESSERA_SEED_RANDOM */
    CLI_KV,     /* tessera_kv_type: f16, f32, bf16, q8_0, ... */
    CLI_KV_BOTH, /* tessera_kv_type[2]: both set to one type */
    CLI_FA,     /* tessera_flash_attn: on, off or auto */
    CLI_BIAS,   /* appends ID+B / ID-B to cli_params.bias */
    CLI_DIR,    /* appends to cli_params.plugin_dirs */
    CLI_LORA,   /* appends FILE to cli_params.lora (scale 1) */
    CLI_LORA_SCALED, /* takes two values, FILE SCALE: appends to cli_params.lora */
    CLI_FN,     /* fn(cmd, flag, value, dst) parses; 0 ok, -1 error printed */
} cli_type;

typedef int (*cli_parse_fn)(const char *cmd, const char *flag, const char *value, void *dst);

/* Row flags. */
enum {
    CLI_NO_DEFAULT = 1u << 0, /* help shows no "(default: ...)" */
    CLI_HIDDEN = 1u << 1,     /* parsed, not listed in --help */
};

typedef struct cli_option {
    const char *short_name; /* "-m", "-ngl" or NULL */
    const char *long_name;  /* "--model" or NULL */
    const char *metavar;    /* value name in help ("FILE"); NULL for a switch */
    const char *help;
    cli_type type;
    size_t offset; /* of the destination in cli_params (group rows) or the command's struct */
    double lo, hi; /* CLI_INT / CLI_FLOAT range */
    cli_parse_fn fn;
    unsigned flags;
    unsigned group; /* 0 in a command's own table */
} cli_option;

/* The destination of an own-table row: CLI_OWN(my_struct, field). */
#define CLI_OWN(type, field) offsetof(type, field)
/* End of an own table. */
#define CLI_END {0}

typedef struct cli_command {
    const char *name;     /* "tessera run": errors start with it */
    const char *synopsis; /* after "usage: tessera run " */
    const char *about;    /* a paragraph for --help */
    unsigned groups;
    const cli_option *own; /* ends with CLI_END; may be NULL */
    int max_positional;    /* non-option arguments allowed */
    const char *epilog;    /* text after the options in --help, or NULL */
    void (*more_help)(FILE *out); /* prints more of --help after epilog, or NULL */
} cli_command;

void cli_params_init(cli_params *p);

/* Parse argv[1..argc) (argv[0] is the command name). Returns 0 ok, 1 when
 * --help or --version was printed (exit 0), -1 after printing one error
 * line (exit 2). own: the struct the command's own rows write into. */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli_params *p, void *own);

/* The --help text of cmd, generated from its tables. */
void cli_print_help(const cli_command *cmd, const cli_params *p, const void *own, FILE *out);

/* A value error for flag, printed as every command prints one:
 * "tessera CMD: FLAG expects WANT, got 'VALUE'". Returns -1. */
int cli_bad_value(const char *cmd, const char *flag, const char *value, const char *want);

/* -fa's value: "on", "off" or "auto" (0; else -1 after cli_bad_value), and
 * its name. */
/* --profile's table for a context whose profiling was on (cli_profile.c). */
void cli_print_profile(FILE *out, const char *what, const tessera_context *ctx);

int cli_parse_flash_attn(const char *cmd, const char *flag, const char *value, tessera_flash_attn *out);
const char *cli_flash_attn_name(tessera_flash_attn fa);

/* Process llama.cpp's escapes in place (\n \t \r \\ \" \' \a \b \f \v \?
 * \0-\7 octal, \xNN); an unknown escape is kept as written. Returns the
 * new length. */
size_t cli_unescape(char *s);

#endif
