/* tessera — one entry point; each subcommand lives in its own cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include <tessera/tessera.h>

#include "commands.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "interactive chat using the model's chat template"},
    {"embed", cmd_embed, "print the embedding of each prompt (llama-embedding)"},
    {"tokenize", cmd_tokenize, "print the token ids and pieces of a text"},
    {"perplexity", cmd_perplexity, "measure perplexity over a text file"},
    {"imatrix", cmd_imatrix, "compute an importance matrix over a text file (for quantize --imatrix)"},
    {"inspect", cmd_inspect, "print a GGUF file's header, metadata and tensors"},
    {"devices", cmd_devices, "list compute devices and backend plugins"},
    {"plugin", cmd_plugin, "check a backend plugin against the reference (plugin check PATH)"},
    {"quantize", cmd_quantize, "convert a GGUF model to another weight type"},
    {"export-lora", cmd_export_lora, "merge LoRA adapters into a model's weights"},
    {"convert", cmd_convert, "convert a Hugging Face model directory to GGUF"},
    {"gguf-split", cmd_gguf_split, "split a GGUF model into shards (llama-gguf-split), or --merge them"},
    {"bench", cmd_bench, "measure prompt and generation speed"},
    {"serve", cmd_serve, "serve an OpenAI-compatible HTTP API"},
};
enum { N_COMMANDS = sizeof commands / sizeof commands[0] };

static void usage(FILE *out) {
    fprintf(out, "usage: tessera <command> [options]\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'tessera <command> --help' describes a command's options.\n");
}

/* libtessera writes nothing itself (it is a guest in any process); the
 * tessera binary owns its process, so the library's log lines go to stderr
 * as they always did. */
static void log_to_stderr(int32_t level, const char *text, void *user) {
    (void)level;
    (void)user;
    fputs(text, stderr);
}

int main(int argc, char **argv) {
    tessera_log_set(log_to_stderr, NULL);
    /* and a plugin that crashes is named (tessera plugin check too) */
    tessera_set_crash_guard(true);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("tessera %s\n", tessera_version());
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tessera: unknown command '%s' (see 'tessera --help')\n", name);
    return 2;
}
