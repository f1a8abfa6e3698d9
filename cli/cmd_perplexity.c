/*
 * tessera perplexity — llama.cpp's perplexity over a text file.
 *
 * The whole text is tokenized (with BOS when the vocabulary adds it) and cut
 * into chunks of n_ctx tokens; each chunk's first token is replaced by BOS
 * (when the vocabulary adds it), the chunk is evaluated from an
 * empty cache, and the negative log-likelihood of the next token is averaged
 * over the second half of every chunk (positions n_ctx/2 .. n_ctx-2 predict
 * n_ctx/2+1 .. n_ctx-1). PPL = exp(mean NLL).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <tessera/tessera.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"

typedef struct ppl_opts {
    cli_params p;
    int32_t n_chunks;
} ppl_opts;

static const cli_option ppl_own[] = {
    {NULL, "--chunks", "N", "score at most N chunks; 0: all", CLI_INT, CLI_OWN(ppl_opts, n_chunks), 0,
     1 << 30, NULL, 0, 0},
    CLI_END,
};

static const cli_command ppl_cmd = {
    .name = "tessera perplexity",
    .synopsis = "-m MODEL -f FILE [-c N] [options]",
    .about = "Measures perplexity as llama.cpp does: chunks of -c tokens (each starting\n"
             "with BOS), scored on the second half of each chunk. Prints the running\n"
             "estimate after every chunk and the final PPL. -b is -c unless given.",
    .groups = CLI_G_MODEL | CLI_G_DEVICE | CLI_G_CONTEXT | CLI_G_PROMPT | CLI_G_LORA,
    .own = ppl_own,
};

static int ppl_parse(int argc, char **argv, ppl_opts *o) {
    memset(o, 0, sizeof *o);
    cli_params_init(&o->p);
    o->p.n_ctx = 512;
    o->p.n_batch = 0;
    int rc = cli_parse(&ppl_cmd, argc, argv, &o->p, o);
    if (rc != 0) return rc;
    if (!o->p.model) {
        fprintf(stderr, "tessera perplexity: -m MODEL is required (see 'tessera perplexity --help')\n");
        return -1;
    }
    if (!o->p.prompt_file) {
        fprintf(stderr, "tessera perplexity: -f FILE is required\n");
        return -1;
    }
    if (o->p.prompt) {
        fprintf(stderr, "tessera perplexity: -p is not used: the text comes from -f FILE\n");
        return -1;
    }
    if (o->p.n_ctx < 4) {
        fprintf(stderr, "tessera perplexity: -c expects an integer >= 4, got '%d'\n", (int)o->p.n_ctx);
        return -1;
    }
    if (o->p.n_batch == 0) o->p.n_batch = o->p.n_ctx;
    return 0;
}

/* -log softmax(logits)[target], in double. */
static double token_nll(const float *logits, int32_t n_vocab, int32_t target) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - (double)max);
    return log(sum) - ((double)logits[target] - (double)max);
}

static int score(const ppl_opts *o, tessera_model *model, tessera_context *ctx, const tessera_token *toks,
                 int32_t n_toks) {
    const int32_t n_ctx = (int32_t)o->p.n_ctx, n_vocab = tessera_model_n_vocab(model);
    int32_t n_chunks = n_toks / n_ctx;
    if (o->n_chunks > 0 && o->n_chunks < n_chunks) n_chunks = (int32_t)o->n_chunks;
    if (n_chunks == 0) {
        fprintf(stderr, "tessera perplexity: '%s' has %d tokens, fewer than one chunk of %d (-c)\n", o->p.prompt_file,
                n_toks, n_ctx);
        return 1;
    }
    tessera_token *chunk = malloc((size_t)n_ctx * sizeof *chunk);
    if (!chunk) {
        fprintf(stderr, "tessera perplexity: out of memory\n");
        return 1;
    }
    const int32_t first = n_ctx / 2;
    double nll = 0.0, nll2 = 0.0;
    int64_t count = 0;
    int rc = 1;
    printf("perplexity: %d tokens, %d chunks of %d, scoring positions %d..%d\n", n_toks, n_chunks, n_ctx,
           first, n_ctx - 2);
    fflush(stdout);
    for (int32_t c = 0; c < n_chunks; c++) {
        memcpy(chunk, toks + (size_t)c * (size_t)n_ctx, (size_t)n_ctx * sizeof *chunk);
        /* As llama.cpp: BOS starts each chunk only when the vocabulary adds
         * BOS at all (SmolLM2's does not). */
        tessera_token bos = tessera_token_bos(model);
        if (bos >= 0 && tessera_vocab_adds_bos(model)) chunk[0] = bos;
        if (tessera_decode(ctx, chunk, n_ctx, 0, TESSERA_DECODE_ALL_LOGITS) != 0) {
            fprintf(stderr, "\ntessera perplexity: chunk %d: %s\n", c + 1,
                    tessera_aborted() ? "interrupted" : tessera_last_error());
            goto done;
        }
        for (int32_t j = first; j < n_ctx - 1; j++) {
            double v = token_nll(tessera_logits(ctx, j), n_vocab, chunk[j + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        printf("[%d] %.4f\n", c + 1, exp(nll / (double)count));
        fflush(stdout);
    }
    double mean = nll / (double)count;
    double var = nll2 / (double)count - mean * mean;
    double err = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0.0;
    printf("Final estimate: PPL = %.4f +/- %.5f\n", exp(mean), exp(mean) * err);
    rc = 0;
done:
    free(chunk);
    return rc;
}

int cmd_perplexity(int argc, char **argv) {
    const char *cmd = "tessera perplexity";
    ppl_opts o;
    int pr = ppl_parse(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;
    size_t text_len = 0;
    char *text = NULL;
    tessera_token *toks = NULL;
    cli_session s;
    int rc = 1;
    cli_abort_on_sigint();
    if (cli_session_open(&s, cmd, &o.p) < 0) goto done;
    text = cli_read_file(cmd, NULL, o.p.prompt_file, &text_len);
    if (!text) goto done;
    if (text_len > (size_t)INT32_MAX) {
        fprintf(stderr, "tessera perplexity: '%s' is too large\n", o.p.prompt_file);
        goto done;
    }
    int32_t n = tessera_tokenize(s.model, text, text_len, NULL, 0, true, false);
    if (n == INT32_MIN) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    if (n < 0) n = -n;
    toks = malloc((size_t)(n > 0 ? n : 1) * sizeof *toks);
    if (!toks) {
        fprintf(stderr, "tessera perplexity: out of memory for %d tokens\n", n);
        goto done;
    }
    n = tessera_tokenize(s.model, text, text_len, toks, n, true, false);
    if (n < 0) {
        fprintf(stderr, "tessera perplexity: %s\n", tessera_last_error());
        goto done;
    }
    rc = score(&o, s.model, s.ctx, toks, n);
    if (o.p.verbose) {
        tessera_timings t;
        tessera_context_timings(s.ctx, &t);
        fprintf(stderr, "tessera perplexity: %lld tokens in %.2f s (%.2f tokens/s)\n", (long long)t.n_prompt,
                t.prompt_ms / 1e3, t.prompt_ms > 0 ? 1e3 * (double)t.n_prompt / t.prompt_ms : 0.0);
    }
done:
    free(toks);
    cli_session_close(&s);
    free(text);
    return rc;
}
