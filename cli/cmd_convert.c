/* tessera convert — a Hugging Face model directory to GGUF. The converter
 * is a Python program (tools/convert/tessera_convert.py: numpy and PyPI's
 * gguf write the file); this command finds it and runs it with the same
 * arguments, so its exit status and its one-line errors are the command's. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "tessera/tessera.h"

static const char usage[] =
    "usage: tessera convert MODEL_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0] [--vocab-only] [--mmproj]\n"
    "\n"
    "Convert a Hugging Face model directory (config.json, model.safetensors or the\n"
    "shards model.safetensors.index.json names, tokenizer.model or tokenizer.json,\n"
    "tokenizer_config.json and its chat template) to a GGUF file, as llama.cpp's\n"
    "convert_hf_to_gguf.py does: the same keys and tensors (byte for byte; tested at\n"
    "f16 and bf16). Architectures: llama (Llama, Mistral, Mixtral), qwen2, qwen3,\n"
    "qwen2moe, qwen3moe, olmoe, gemma3, phi3, granite, granitemoe, smollm3,\n"
    "gpt-oss (also with OpenAI's MXFP4 experts), lfm2, mamba2, granitehybrid,\n"
    "bert, nomic-bert, mistral3, qwen35, qwen35moe (these three also from their\n"
    "vision-language checkpoints: the text model), qwen2vl (Qwen2-VL, Qwen2.5-VL:\n"
    "the text model), qwen3next; see docs/convert.md.\n"
    "--outtype: f16 (the default), f32, bf16 or q8_0; 1-D tensors, biases, MoE\n"
    "routers and the recurrent layers' convolutions and A, D, norms stay f32.\n"
    "\n"
    "The converter is tools/convert/tessera_convert.py, run with python3 (or\n"
    "$TESSERA_PYTHON); it needs PyPI's numpy and gguf, and sentencepiece for a\n"
    "tokenizer.model: pip install numpy gguf sentencepiece. $TESSERA_CONVERT_SCRIPT\n"
    "names another copy of it.\n"
    "\n"
    "options:\n"
    "  -o, --outfile FILE    the GGUF file to write (required)\n"
    "  --outtype TYPE        f32, f16 (default), bf16 or q8_0\n"
    "  --vocab-only          write the vocabulary and the keys only, no tensors\n"
    "  --mmproj              write the vision tower and projector of a vision-language\n"
    "                        checkpoint as an mmproj file instead, as llama.cpp's\n"
    "                        converter does (Qwen2-VL: qwen2vl_merger; Qwen2.5-VL:\n"
    "                        qwen2.5vl_merger; Mistral 3's Pixtral: pixtral;\n"
    "                        Qwen3.5's: qwen3vl_merger)\n"
    "  -h, --help            this text\n"
    "  --version             the version of tessera\n";

/* The options are checked here, before Python runs, so that --help,
 * --version and a mistyped flag answer as every other command does even
 * where numpy or gguf are missing. 0: run the converter, else the exit
 * status (1 + the answer given). */
static int check_args(int argc, char **argv, int *exit_code) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return *exit_code = 0, 1;
        }
        if (!strcmp(a, "--version")) {
            printf("tessera %s\n", tessera_version());
            return *exit_code = 0, 1;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--outfile") || !strcmp(a, "--output") || !strcmp(a, "--outtype")) {
            if (i + 1 == argc) {
                fprintf(stderr, "tessera convert: %s needs a value (see 'tessera convert --help')\n", a);
                return *exit_code = 2, 1;
            }
            i++;
        } else if (!strcmp(a, "--vocab-only") || !strcmp(a, "--mmproj")) {
            continue;
        } else if (a[0] == '-' && a[1]) {
            size_t len = strcspn(a, "=");
            fprintf(stderr, "tessera convert: unknown option '%.*s' (see 'tessera convert --help')\n", (int)len, a);
            return *exit_code = 2, 1;
        }
    }
    return 0;
}

/* The converter: $TESSERA_CONVERT_SCRIPT, the installed copy beside the
 * binary (../share/tessera), or the source tree's. */
static const char *script_path(char *buf, size_t size) {
    const char *env = getenv("TESSERA_CONVERT_SCRIPT");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, size, "%s/../share/tessera/tessera_convert.py", exe);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
#ifdef TESSERA_CONVERT_SOURCE
    if (access(TESSERA_CONVERT_SOURCE, R_OK) == 0) return TESSERA_CONVERT_SOURCE;
#endif
    return NULL;
}

int cmd_convert(int argc, char **argv) {
    int exit_code;
    if (check_args(argc, argv, &exit_code)) return exit_code;
    char buf[PATH_MAX + 64];
    const char *script = script_path(buf, sizeof buf);
    if (!script) {
        fprintf(stderr, "tessera convert: the converter tessera_convert.py is not installed beside tessera "
                        "(share/tessera); set TESSERA_CONVERT_SCRIPT to its path\n");
        return 1;
    }
    const char *python = getenv("TESSERA_PYTHON");
    if (!python || !*python) python = "python3";
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, "tessera convert: out of memory\n");
        return 1;
    }
    args[0] = (char *)python;
    args[1] = (char *)script;
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    fflush(NULL);
    execvp(python, args);
    fprintf(stderr, "tessera convert: cannot run %s: %s (set TESSERA_PYTHON to a Python 3 with numpy, gguf and "
                    "sentencepiece: pip install numpy gguf sentencepiece)\n",
            python, strerror(errno));
    free(args);
    return 1;
}
