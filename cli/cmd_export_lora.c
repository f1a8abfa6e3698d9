/* tessera export-lora — merge LoRA adapters into a model (llama-export-lora). */
#include <stdio.h>

#include <tessera/tessera.h>
#include <tessera/tessera_tools.h>

#include "cli_opts.h"
#include "commands.h"

typedef struct export_opts {
    const char *out;
} export_opts;

static const cli_option export_own[] = {
    {"-o", "--output", "FILE", "the merged model (llama-export-lora's --output)", CLI_STR, CLI_OWN(export_opts, out),
     0, 0, NULL, CLI_NO_DEFAULT, 0},
    CLI_END,
};

static const cli_command export_cmd = {
    .name = "tessera export-lora",
    .synopsis = "-m BASE.gguf --lora FILE [--lora-scaled FILE SCALE]... -o OUT.gguf",
    .about = "Write OUT.gguf, the model BASE.gguf with the LoRA adapters merged into its weights:\n"
             "each adapted W becomes W + scale * alpha / rank * B A (in f32), as llama-export-lora\n"
             "does. F32 and F16 weights keep their type; a quantized or BF16 weight that an adapter\n"
             "changes is dequantized and written as F16 (llama-export-lora's rule; quantize the\n"
             "result again with 'tessera quantize' if needed); other tensors are copied. Tensors\n"
             "are sorted by name and general.file_type is 1, as llama-export-lora writes them.",
    .groups = CLI_G_MODEL | CLI_G_LORA,
    .own = export_own,
};

int cmd_export_lora(int argc, char **argv) {
    const char *cmd = export_cmd.name;
    cli_params p;
    export_opts o = {0};
    cli_params_init(&p);
    int rc = cli_parse(&export_cmd, argc, argv, &p, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!p.model || !o.out || p.n_lora == 0) {
        fprintf(stderr, "%s: -m BASE, -o OUT and at least one --lora or --lora-scaled are required (see '%s --help')\n",
                cmd, cmd);
        return 2;
    }
    const char *paths[CLI_MAX_LORA];
    float scales[CLI_MAX_LORA];
    for (int32_t i = 0; i < p.n_lora; i++) {
        paths[i] = p.lora[i].path;
        scales[i] = p.lora[i].scale;
    }
    tessera_lora_export_report r;
    if (tessera_lora_export(p.model, paths, scales, p.n_lora, o.out, &r) != 0) {
        fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
        return 1;
    }
    fprintf(stderr, "%s: wrote %s: %lld tensors, %lld with adapters merged\n", cmd, o.out, (long long)r.n_tensors,
            (long long)r.n_merged);
    return 0;
}
