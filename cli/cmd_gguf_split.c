/* tessera gguf-split — split a GGUF model into shards or merge them back,
 * with llama-gguf-split's options and file names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>
#include <tessera/tessera_tools.h>

#include "cli_opts.h"
#include "commands.h"

typedef struct split_opts {
    int split, merge, dry_run;
    int32_t max_tensors;
    const char *max_size;
} split_opts;

static const cli_option split_own[] = {
    {NULL, "--split", NULL, "split IN into several files (the default)", CLI_SWITCH, CLI_OWN(split_opts, split),
     0, 0, NULL, 0, 0},
    {NULL, "--merge", NULL, "merge the split model whose first file is IN into OUT", CLI_SWITCH,
     CLI_OWN(split_opts, merge), 0, 0, NULL, 0, 0},
    {NULL, "--split-max-tensors", "N", "at most N tensors per file (default: 128)", CLI_INT,
     CLI_OWN(split_opts, max_tensors), 1, 1e9, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--split-max-size", "N(M|G)", "at most this much tensor data per file (500M, 2G; K too)", CLI_STR,
     CLI_OWN(split_opts, max_size), 0, 0, NULL, 0, 0},
    {NULL, "--dry-run", NULL, "print the files a split would write, write nothing", CLI_SWITCH,
     CLI_OWN(split_opts, dry_run), 0, 0, NULL, 0, 0},
    CLI_END,
};

static const cli_command split_cmd = {
    .name = "tessera gguf-split",
    .synopsis = "[options] IN OUT",
    .about = "Split the model IN into OUT-00001-of-0000N.gguf ... as llama-gguf-split does (the\n"
             "metadata in the first file; split.no, split.count and split.tensors.count in each),\n"
             "or with --merge join the split model whose first file is IN into the file OUT.\n"
             "Tessera and llama.cpp load a split model from its first file.",
    .own = split_own,
    .max_positional = 2,
};

/* "500M", "2G", "64K" or bytes -> bytes; 0 on a bad value. */
static uint64_t parse_size(const char *s) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-' || v == 0) return 0;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024ull, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024ull * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024ull * 1024 * 1024, end++;
    if (*end || v > UINT64_MAX / mul) return 0;
    return (uint64_t)v * mul;
}

int cmd_gguf_split(int argc, char **argv) {
    split_opts so = {0};
    cli_params cp;
    cli_params_init(&cp);
    int prc = cli_parse(&split_cmd, argc, argv, &cp, &so);
    if (prc != 0) return prc > 0 ? 0 : 2;
    if (cp.n_positional != 2) {
        fprintf(stderr, "tessera gguf-split: expected IN and OUT (see --help)\n");
        return 2;
    }
    if (so.split && so.merge) {
        fprintf(stderr, "tessera gguf-split: either --split or --merge, not both\n");
        return 2;
    }
    const char *in = cp.positional[0], *out = cp.positional[1];
    if (so.merge) {
        if (tessera_gguf_merge(in, out) < 0) {
            fprintf(stderr, "tessera gguf-split: %s\n", tessera_last_error());
            return 1;
        }
        fprintf(stderr, "merged %s into %s\n", in, out);
        return 0;
    }
    tessera_gguf_split_params p = {.max_tensors = so.max_tensors, .dry_run = so.dry_run != 0};
    if (so.max_size && !(p.max_bytes = parse_size(so.max_size))) {
        fprintf(stderr, "tessera gguf-split: --split-max-size '%s': expected a positive size such as 500M or 2G\n",
                so.max_size);
        return 2;
    }
    int32_t n = 0;
    if (tessera_gguf_split(in, out, &p, &n) < 0) {
        fprintf(stderr, "tessera gguf-split: %s\n", tessera_last_error());
        return 1;
    }
    for (int32_t i = 0; i < n; i++)
        printf("%s%s-%05d-of-%05d.gguf\n", so.dry_run ? "would write " : "", out, (int)i + 1, (int)n);
    return 0;
}
