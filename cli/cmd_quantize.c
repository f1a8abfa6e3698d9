/* tessera quantize — convert a GGUF model's weights to another dtype. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tessera/tessera.h>
#include <tessera/tessera_gguf.h>
#include <tessera/tessera_tools.h>

#include "cli_util.h"
#include "cli_opts.h"
#include "commands.h"

/* Raised by SIGINT/SIGTERM; the quantizer polls it and removes its temporary
 * file. A signal handler can only reach a file-scope variable. */
static volatile sig_atomic_t quantize_interrupted;

static void on_signal(int sig) {
    (void)sig;
    quantize_interrupted = 1;
}

static void type_list(FILE *out) {
    fprintf(out, "\nTYPE (Q3_K, Q4_K, Q5_K are the _M mixtures):\n");
    tessera_quant_type qt;
    for (int32_t i = 0; tessera_quant_type_get(i, &qt) == 0; i++)
        fprintf(out, "  %-8s %-5s %s\n", qt.name, tessera_tensor_type_name(qt.base_type), qt.summary);
}

enum { MAX_WEIGHT_FILTERS = 256 };

typedef struct name_list {
    const char *names[MAX_WEIGHT_FILTERS];
    int n;
} name_list;

/* --tensor-type entries in command-line order, those of each
 * --tensor-type-file among them (pointing into its text, kept here). */
typedef struct tensor_type_list {
    name_list list; /* first: --tensor-type's add_name takes it as a name_list */
    char *texts[16];
    int n_texts;
} tensor_type_list;

typedef struct quantize_opts {
    int pure, allow_requantize, quiet, dry_run, leave_output;
    int32_t n_threads;
    const char *imatrix, *output_type, *token_embd_type;
    name_list include, exclude;
    tensor_type_list tensor_types;
} quantize_opts;

static int add_name(const char *cmd, const char *flag, const char *value, void *dst) {
    name_list *l = dst;
    if (l->n == MAX_WEIGHT_FILTERS) {
        fprintf(stderr, "%s: %s given more than %d times\n", cmd, flag, MAX_WEIGHT_FILTERS);
        return -1;
    }
    l->names[l->n++] = value;
    return 0;
}

/* --tensor-type-file: the file's entries, separated by spaces or newlines,
 * as --tensor-type entries at this point of the command line (as
 * llama-quantize), each checked here so that an error names the file. */
static int add_type_file(const char *cmd, const char *flag, const char *value, void *dst) {
    tensor_type_list *tl = dst;
    if (tl->n_texts == (int)(sizeof tl->texts / sizeof tl->texts[0])) {
        fprintf(stderr, "%s: %s given more than %d times\n", cmd, flag, tl->n_texts);
        return -1;
    }
    FILE *fp = fopen(value, "rb");
    if (!fp) {
        fprintf(stderr, "%s: %s '%s': %s\n", cmd, flag, value, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    char *text = malloc(cap);
    size_t got;
    while (text && (got = fread(text + len, 1, cap - len - 1, fp)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *more = cap < (1u << 24) ? realloc(text, cap * 2) : NULL;
            if (!more) {
                free(text);
                text = NULL;
                break;
            }
            text = more;
            cap *= 2;
        }
    }
    fclose(fp);
    if (!text) {
        fprintf(stderr, "%s: %s '%s': out of memory or larger than 16 MiB\n", cmd, flag, value);
        return -1;
    }
    text[len] = '\0';
    tl->texts[tl->n_texts++] = text;
    for (char *save = NULL, *tok = strtok_r(text, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
        tessera_quantize_params p = tessera_quantize_default_params();
        const char *one[1] = {tok};
        p.tensor_types = one;
        p.n_tensor_types = 1;
        if (tessera_quantize_check_params(&p) != 0) {
            fprintf(stderr, "%s: %s '%s': %s\n", cmd, flag, value, tessera_last_error());
            return -1;
        }
        if (add_name(cmd, "--tensor-type", tok, &tl->list) != 0) return -1;
    }
    return 0; /* an empty file is no error, as in llama-quantize */
}

static const cli_option quantize_own[] = {
    {NULL, "--pure", NULL, "every 2-D weight in TYPE's base dtype (no mixture rules)", CLI_SWITCH,
     CLI_OWN(quantize_opts, pure), 0, 0, NULL, 0, 0},
    {NULL, "--allow-requantize", NULL, "accept already-quantized input (dequantized first; loses precision)",
     CLI_SWITCH, CLI_OWN(quantize_opts, allow_requantize), 0, 0, NULL, 0, 0},
    {"-t", "--threads", "N", "worker threads (default: all CPUs)", CLI_INT, CLI_OWN(quantize_opts, n_threads),
     1, 256, NULL, CLI_NO_DEFAULT, 0},
    {"-q", "--quiet", NULL, "no progress lines", CLI_SWITCH, CLI_OWN(quantize_opts, quiet), 0, 0, NULL, 0, 0},
    {NULL, "--dry-run", NULL,
     "print each tensor's output type and size on stdout and quantize nothing (OUT may be left out)",
     CLI_SWITCH, CLI_OWN(quantize_opts, dry_run), 0, 0, NULL, 0, 0},
    {NULL, "--imatrix", "FILE",
     "importance matrix (GGUF or legacy .dat, from tessera imatrix or llama-imatrix) to weigh the quantizers by",
     CLI_STR, CLI_OWN(quantize_opts, imatrix), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--include-weights", "NAME", "use the matrix only for tensors whose name contains NAME (repeatable)",
     CLI_FN, CLI_OWN(quantize_opts, include), 0, 0, add_name, CLI_NO_DEFAULT, 0},
    {NULL, "--exclude-weights", "NAME", "do not use the matrix for tensors whose name contains NAME (repeatable)",
     CLI_FN, CLI_OWN(quantize_opts, exclude), 0, 0, add_name, CLI_NO_DEFAULT, 0},
    {NULL, "--leave-output-tensor", NULL, "leave output.weight un(re)quantized (kept in its input type)",
     CLI_SWITCH, CLI_OWN(quantize_opts, leave_output), 0, 0, NULL, 0, 0},
    {NULL, "--output-tensor-type", "ggml_type",
     "use this tensor type (q8_0, q6_k, f16, ...) for the output.weight tensor", CLI_STR,
     CLI_OWN(quantize_opts, output_type), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--token-embedding-type", "ggml_type", "use this tensor type for the token embeddings tensor",
     CLI_STR, CLI_OWN(quantize_opts, token_embd_type), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--tensor-type", "tensor_name=ggml_type",
     "quantize tensors whose name matches tensor_name (a regular expression) to ggml_type instead of "
     "the mixture's choice; repeatable, the first match wins (example: --tensor-type attn_q=q8_0)",
     CLI_FN, CLI_OWN(quantize_opts, tensor_types), 0, 0, add_name, CLI_NO_DEFAULT, 0},
    {NULL, "--tensor-type-file", "tensor_types.txt",
     "--tensor-type entries read from a file, separated by spaces or newlines (repeatable)", CLI_FN,
     CLI_OWN(quantize_opts, tensor_types), 0, 0, add_type_file, CLI_NO_DEFAULT, 0},
    CLI_END,
};

static const cli_command quantize_cmd = {
    .name = "tessera quantize",
    .synopsis = "IN.gguf OUT.gguf TYPE [options]  |  --dry-run IN.gguf [OUT.gguf] TYPE",
    .about = "Convert the weights of IN.gguf (F32, F16 or BF16) to TYPE and write OUT.gguf.\n"
             "Metadata is kept and general.file_type is set. Norms and other 1-D tensors keep\n"
             "their type. OUT is written to a temporary file beside it and renamed into place\n"
             "only when complete. See docs/quantize.md for the per-tensor rules of mixtures.",
    .own = quantize_own,
    .max_positional = 3,
    .more_help = type_list,
};

typedef struct progress_state {
    int quiet;
    uint64_t in_total, out_total;
} progress_state;

/* --dry-run: one line per tensor on stdout, llama-quantize --dry-run's
 * fields (the output type in parentheses; none for a tensor kept as is). */
static void on_plan(const tessera_quant_progress *pr, void *user) {
    progress_state *ps = user;
    ps->in_total += pr->in_bytes;
    ps->out_total += pr->from_type == pr->to_type ? pr->in_bytes : pr->out_bytes;
    printf("[%4lld/%4lld] %-40s type = %-7s size = %9.3f MiB", (long long)pr->index + 1, (long long)pr->count,
           pr->name, tessera_tensor_type_name(pr->from_type), pr->in_bytes / 1048576.0);
    if (pr->from_type != pr->to_type)
        printf(" -> %9.3f MiB (%s)", pr->out_bytes / 1048576.0, tessera_tensor_type_name(pr->to_type));
    printf("\n");
}

static void on_progress(const tessera_quant_progress *pr, void *user) {
    progress_state *ps = user;
    ps->in_total += pr->in_bytes;
    ps->out_total += pr->out_bytes;
    if (ps->quiet) return;
    fprintf(stderr, "[%3lld/%3lld] %-32s %-6s -> %-6s %9.3f MiB -> %8.3f MiB\n",
            (long long)pr->index + 1, (long long)pr->count, pr->name, tessera_tensor_type_name(pr->from_type),
            tessera_tensor_type_name(pr->to_type), pr->in_bytes / 1048576.0, pr->out_bytes / 1048576.0);
}

static int quantize_run(int argc, char **argv, quantize_opts *qop) {
    progress_state ps = {0};
    tessera_quantize_params p = tessera_quantize_default_params();
    tessera_quant_type qt;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p.n_threads = ncpu > 0 ? (int)(ncpu > 256 ? 256 : ncpu) : 1;

    quantize_opts qo = *qop;
    qo.n_threads = p.n_threads;
    cli_params cp;
    cli_params_init(&cp);
    int prc = cli_parse(&quantize_cmd, argc, argv, &cp, &qo);
    *qop = qo; /* the files' texts, freed by cmd_quantize */
    if (prc != 0) return prc > 0 ? 0 : 2;
    p.pure = qo.pure;
    p.allow_requantize = qo.allow_requantize;
    p.n_threads = qo.n_threads;
    ps.quiet = qo.quiet;
    if (qo.include.n && qo.exclude.n) {
        fprintf(stderr, "tessera quantize: give --include-weights or --exclude-weights, not both "
                        "(as llama-quantize)\n");
        return 2;
    }
    if ((qo.include.n || qo.exclude.n) && !qo.imatrix) {
        fprintf(stderr, "tessera quantize: --include-weights/--exclude-weights need --imatrix\n");
        return 2;
    }
    p.imatrix_file = qo.imatrix;
    p.include_weights = qo.include.names;
    p.n_include_weights = qo.include.n;
    p.exclude_weights = qo.exclude.names;
    p.n_exclude_weights = qo.exclude.n;
    p.tensor_types = qo.tensor_types.list.names;
    p.n_tensor_types = qo.tensor_types.list.n;
    p.output_tensor_type = qo.output_type;
    p.token_embedding_type = qo.token_embd_type;
    p.leave_output_tensor = qo.leave_output;
    const char *const *pos = cp.positional;
    int n_pos = cp.n_positional;
    if (qo.dry_run) {
        if (n_pos != 2 && n_pos != 3) {
            fprintf(stderr, "tessera quantize: --dry-run expects IN.gguf [OUT.gguf] TYPE (see --help)\n");
            return 2;
        }
        const char *type = pos[n_pos - 1];
        if (tessera_quant_type_find(type, &qt) < 0) {
            fprintf(stderr, "tessera quantize: unknown TYPE '%s' (see --help for the list)\n", type);
            return 2;
        }
        p.type = qt.name;
        if (tessera_quantize_check_params(&p) != 0) {
            fprintf(stderr, "tessera quantize: %s\n", tessera_last_error());
            return 2;
        }
        p.progress = on_plan;
        p.progress_user = &ps;
        if (tessera_quantize_dry_run(pos[0], &p) != 0) {
            fprintf(stderr, "tessera quantize: %s\n", tessera_last_error());
            return 1;
        }
        printf("dry run: %s as %s: %.2f MiB -> %.2f MiB\n", pos[0], qt.name, ps.in_total / 1048576.0,
               ps.out_total / 1048576.0);
        return 0;
    }
    if (n_pos != 3) {
        fprintf(stderr, "tessera quantize: expected IN.gguf OUT.gguf TYPE (see --help)\n");
        return 2;
    }
    if (tessera_quant_type_find(pos[2], &qt) < 0) {
        fprintf(stderr, "tessera quantize: unknown TYPE '%s' (see --help for the list)\n", pos[2]);
        return 2;
    }
    p.type = qt.name;
    if (tessera_quantize_check_params(&p) != 0) {
        fprintf(stderr, "tessera quantize: %s\n", tessera_last_error());
        return 2;
    }
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "tessera quantize: IN and OUT are the same file '%s'\n", pos[0]);
        return 2;
    }

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    quantize_interrupted = 0;
    p.type = qt.name;
    p.abort_flag = &quantize_interrupted;
    p.progress = on_progress;
    p.progress_user = &ps;

    if (!ps.quiet)
        fprintf(stderr, "quantizing %s -> %s as %s%s, %d threads%s%s\n", pos[0], pos[1], qt.name,
                p.pure ? " (pure)" : "", p.n_threads, p.imatrix_file ? ", importance matrix " : "",
                p.imatrix_file ? p.imatrix_file : "");
    int rc = tessera_quantize(pos[0], pos[1], &p);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc != 0) {
        if (quantize_interrupted) {
            fprintf(stderr, "tessera quantize: interrupted; %s not written\n", pos[1]);
            return 130;
        }
        fprintf(stderr, "tessera quantize: %s\n", tessera_last_error());
        return 1;
    }
    if (!ps.quiet)
        fprintf(stderr, "done: %.2f MiB -> %.2f MiB\n", ps.in_total / 1048576.0,
                ps.out_total / 1048576.0);
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    quantize_opts qo;
    memset(&qo, 0, sizeof qo);
    int rc = quantize_run(argc, argv, &qo);
    for (int i = 0; i < qo.tensor_types.n_texts; i++) free(qo.tensor_types.texts[i]);
    return rc;
}
