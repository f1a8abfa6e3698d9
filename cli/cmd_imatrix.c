/*
 * tessera imatrix — an importance matrix over a text, as llama-imatrix
 * makes it, for `tessera quantize --imatrix` (or llama-quantize).
 *
 * The text is tokenized and cut into chunks of -c tokens exactly as
 * `tessera perplexity` does (BOS first in each chunk when the vocabulary
 * adds it); each chunk is decoded from an empty cache. Every product of a
 * layer weight ("blk.*"; output.weight too with --process-output) with
 * activations is handed over by the context's matmul observer
 * (tessera_context_set_matmul_observer: the step graph keeps those inputs
 * as outputs, so it works on every device), and per weight and column the
 * squared activations are summed and the rows counted; an expert tensor
 * keeps one sum per expert. Written in llama.cpp's GGUF imatrix format, or
 * the legacy .dat with --output-format dat; --in-file adds earlier files'
 * sums (with no -f, only combines them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/tessera.h>
#include <tessera/tessera_tools.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"

enum { MAX_IN_FILES = 64 };

typedef struct imatrix_opts {
    cli_params p;
    int32_t n_chunks, from_chunk;
    const char *out, *format;
    int process_output;
    const char *in_files[MAX_IN_FILES];
    int n_in_files;
    char *in_lists[MAX_IN_FILES]; /* the --in-file values split in place (freed at the end) */
    int n_in_lists;
} imatrix_opts;

static int add_in_file(const char *cmd, const char *flag, const char *value, void *dst) {
    imatrix_opts *o = (imatrix_opts *)((char *)dst - offsetof(imatrix_opts, in_files));
    /* comma-separated, as llama-imatrix */
    char *copy = o->n_in_lists < MAX_IN_FILES ? strdup(value) : NULL;
    if (!copy) {
        fprintf(stderr, "%s: %s: more than %d files\n", cmd, flag, MAX_IN_FILES);
        return -1;
    }
    o->in_lists[o->n_in_lists++] = copy;
    for (char *save = NULL, *f = strtok_r(copy, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        if (o->n_in_files == MAX_IN_FILES) {
            fprintf(stderr, "%s: %s: more than %d files\n", cmd, flag, MAX_IN_FILES);
            return -1;
        }
        o->in_files[o->n_in_files++] = f;
    }
    return 0;
}

static const cli_option imatrix_own[] = {
    {"-o", "--output", "FILE", "where to write the matrix (default: imatrix.gguf)", CLI_STR,
     CLI_OWN(imatrix_opts, out), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--output-format", "FMT", "gguf (llama.cpp's current format) or dat (the legacy one)", CLI_STR,
     CLI_OWN(imatrix_opts, format), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--chunks", "N", "process at most N chunks; 0: all", CLI_INT, CLI_OWN(imatrix_opts, n_chunks), 0,
     1 << 30, NULL, 0, 0},
    {NULL, "--chunk", "N", "start at chunk N (0-based; llama-imatrix's --from-chunk)", CLI_INT,
     CLI_OWN(imatrix_opts, from_chunk), 0, 1 << 30, NULL, 0, 0},
    {NULL, "--from-chunk", "N", NULL, CLI_INT, CLI_OWN(imatrix_opts, from_chunk), 0, 1 << 30, NULL,
     CLI_HIDDEN, 0},
    {NULL, "--process-output", NULL, "also collect output.weight's inputs", CLI_SWITCH,
     CLI_OWN(imatrix_opts, process_output), 0, 0, NULL, 0, 0},
    {NULL, "--in-file", "FILE", "add an earlier matrix (GGUF or .dat; repeatable, or comma-separated)", CLI_FN,
     CLI_OWN(imatrix_opts, in_files), 0, 0, add_in_file, CLI_NO_DEFAULT, 0},
    CLI_END,
};

static const cli_command imatrix_cmd = {
    .name = "tessera imatrix",
    .synopsis = "-m MODEL -f TEXT [-o FILE] [-c N] [--chunks N] [options]",
    .about = "Computes an importance matrix over TEXT as llama-imatrix does: chunks of -c\n"
             "tokens (each starting with BOS when the vocabulary adds it); per layer weight\n"
             "and column the sum of squared activations and the number of rows. Progress\n"
             "per chunk on stderr. The file is for 'tessera quantize --imatrix' or\n"
             "llama-quantize --imatrix. With --in-file and no -f, only combines files.",
    .groups = CLI_G_MODEL | CLI_G_DEVICE | CLI_G_CONTEXT | CLI_G_PROMPT,
    .own = imatrix_own,
};

typedef struct collect {
    tessera_imatrix *im;
    bool process_output;
    int failed;
} collect;

static void on_matmul(const tessera_matmul_input *in, void *user) {
    collect *c = user;
    const bool layer = !strncmp(in->weight, "blk.", 4);
    if (!layer && !(c->process_output && !strcmp(in->weight, "output.weight"))) return;
    if (tessera_imatrix_add(c->im, in) != 0) c->failed = 1;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int compute(const imatrix_opts *o, cli_session *s, tessera_imatrix *im) {
    const char *cmd = "tessera imatrix";
    int rc = 1;
    size_t text_len = 0;
    tessera_token *toks = NULL, *chunk = NULL;
    char *text = cli_read_file(cmd, NULL, o->p.prompt_file, &text_len);
    if (!text) return 1;
    if (text_len > (size_t)INT32_MAX) {
        fprintf(stderr, "%s: '%s' is too large\n", cmd, o->p.prompt_file);
        goto done;
    }
    int32_t n = tessera_tokenize(s->model, text, text_len, NULL, 0, true, false);
    if (n == INT32_MIN) goto api_fail;
    if (n < 0) n = -n;
    toks = malloc((size_t)(n > 0 ? n : 1) * sizeof *toks);
    if (!toks) goto oom;
    if ((n = tessera_tokenize(s->model, text, text_len, toks, n, true, false)) < 0) goto api_fail;
    const int32_t n_ctx = (int32_t)o->p.n_ctx;
    int32_t n_chunks = n / n_ctx - o->from_chunk;
    if (o->n_chunks > 0 && o->n_chunks < n_chunks) n_chunks = o->n_chunks;
    if (n_chunks <= 0) {
        fprintf(stderr, "%s: '%s' has %d tokens: no chunk of %d (-c) from chunk %d\n", cmd, o->p.prompt_file, n,
                n_ctx, o->from_chunk);
        goto done;
    }
    if (!(chunk = malloc((size_t)n_ctx * sizeof *chunk))) goto oom;
    collect c = {.im = im, .process_output = o->process_output};
    if (tessera_context_set_matmul_observer(s->ctx, on_matmul, &c) != 0) goto api_fail;
    fprintf(stderr, "%s: %d tokens, computing over %d chunks of %d\n", cmd, n, n_chunks, n_ctx);
    const double t0 = seconds();
    for (int32_t k = 0; k < n_chunks; k++) {
        memcpy(chunk, toks + (size_t)(o->from_chunk + k) * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        const tessera_token bos = tessera_token_bos(s->model);
        if (bos >= 0 && tessera_vocab_adds_bos(s->model)) chunk[0] = bos;
        /* all rows only when the output weight is collected (llama-imatrix
         * computes every row's logits) */
        if (tessera_decode(s->ctx, chunk, n_ctx, 0, o->process_output ? TESSERA_DECODE_ALL_LOGITS : 0) != 0) {
            fprintf(stderr, "\n%s: chunk %d: %s\n", cmd, k + 1, tessera_aborted() ? "interrupted" : tessera_last_error());
            goto done;
        }
        if (c.failed) goto api_fail;
        const double el = seconds() - t0;
        fprintf(stderr, "[%d/%d] %.2f s per chunk, ETA %.1f s\n", k + 1, n_chunks, el / (k + 1),
                el / (k + 1) * (n_chunks - k - 1));
    }
    tessera_context_set_matmul_observer(s->ctx, NULL, NULL);
    if (tessera_imatrix_note(im, o->p.prompt_file, n_chunks, n_ctx) != 0) goto api_fail;
    rc = 0;
    goto done;
oom:
    fprintf(stderr, "%s: out of memory\n", cmd);
    goto done;
api_fail:
    fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
done:
    free(chunk);
    free(toks);
    free(text);
    return rc;
}

static void free_in_lists(imatrix_opts *o) {
    for (int i = 0; i < o->n_in_lists; i++) free(o->in_lists[i]);
    o->n_in_lists = 0;
}

static int run_imatrix(imatrix_opts *o);

int cmd_imatrix(int argc, char **argv) {
    imatrix_opts o;
    memset(&o, 0, sizeof o);
    cli_params_init(&o.p);
    o.p.n_ctx = 512;
    o.p.n_batch = 0;
    int pr = cli_parse(&imatrix_cmd, argc, argv, &o.p, &o);
    if (pr != 0) {
        free_in_lists(&o);
        return pr > 0 ? 0 : 2;
    }
    int rc = run_imatrix(&o);
    free_in_lists(&o);
    return rc;
}

static int run_imatrix(imatrix_opts *o) {
    const char *cmd = "tessera imatrix";
    const char *out = o->out ? o->out : "imatrix.gguf";
    bool legacy = false;
    if (o->format && !strcmp(o->format, "dat"))
        legacy = true;
    else if (o->format && strcmp(o->format, "gguf") != 0) {
        fprintf(stderr, "%s: --output-format expects gguf or dat, got '%s'\n", cmd, o->format);
        return 2;
    }
    if (!o->p.prompt_file && o->n_in_files == 0) {
        fprintf(stderr, "%s: -f TEXT is required (or --in-file files to combine; see --help)\n", cmd);
        return 2;
    }
    if (o->p.prompt) {
        fprintf(stderr, "%s: -p is not used: the text comes from -f TEXT\n", cmd);
        return 2;
    }
    if (o->p.prompt_file && !o->p.model) {
        fprintf(stderr, "%s: -m MODEL is required with -f\n", cmd);
        return 2;
    }
    if (o->p.n_ctx < 2) {
        fprintf(stderr, "%s: -c expects an integer >= 2, got '%d'\n", cmd, (int)o->p.n_ctx);
        return 2;
    }
    if (o->p.n_batch == 0) o->p.n_batch = o->p.n_ctx;

    int rc = 1;
    cli_session s;
    bool open = false;
    tessera_imatrix *im = tessera_imatrix_new();
    if (!im) goto api_fail;
    for (int i = 0; i < o->n_in_files; i++) {
        if (tessera_imatrix_load(im, o->in_files[i]) != 0) goto api_fail;
        fprintf(stderr, "%s: added %s\n", cmd, o->in_files[i]);
    }
    if (o->p.prompt_file) {
        cli_abort_on_sigint();
        if (cli_session_open(&s, cmd, &o->p) < 0) goto done;
        open = true;
        if (compute(o, &s, im) != 0) goto done;
    }
    if (tessera_imatrix_save(im, out, legacy) != 0) goto api_fail;
    fprintf(stderr, "%s: wrote %lld entries over %lld chunks to %s\n", cmd, (long long)tessera_imatrix_n_entries(im),
            (long long)tessera_imatrix_n_chunks(im), out);
    rc = 0;
    goto done;
api_fail:
    fprintf(stderr, "%s: %s\n", cmd, tessera_last_error());
done:
    if (open) cli_session_close(&s);
    tessera_imatrix_free(im);
    return rc;
}
