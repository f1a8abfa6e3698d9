/* tessera embed — the embedding of each prompt (llama.cpp's llama-embedding).
 *
 * The text of -p or -f is split at --embd-separator (a newline by default);
 * each part is one input. With --pooling rank each input is a query and a
 * document joined by --cls-separator (a tab), and the output is its score. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "commands.h"

typedef struct embed_args {
    cli_params p;
    int32_t embd_norm;
    const char *format, *separator, *cls_separator;
    int verbose_prompt;
} embed_args;

static const char *const CMD = "tessera embed";

static const cli_option embed_own[] = {
    {NULL, "--embd-normalize", "N",
     "normalisation of each vector: -1 none, 0 max-abs to int16, 1 taxicab, 2 Euclidean, >2 p-norm", CLI_INT,
     CLI_OWN(embed_args, embd_norm), -1, 1000, NULL, 0, 0},
    {NULL, "--embd-output-format", "FMT", "'' (text), array ([[...], ...]) or json (OpenAI's list shape)",
     CLI_STR, CLI_OWN(embed_args, format), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--embd-separator", "STR", "what separates the inputs in the prompt (default: a newline)", CLI_STR,
     CLI_OWN(embed_args, separator), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--cls-separator", "STR", "what separates query and document with --pooling rank (default: a tab)",
     CLI_STR, CLI_OWN(embed_args, cls_separator), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--verbose-prompt", NULL, "print each input's tokens on stderr", CLI_SWITCH,
     CLI_OWN(embed_args, verbose_prompt), 0, 0, NULL, 0, 0},
    CLI_END,
};

static const cli_command embed_cmd = {
    .name = "tessera embed",
    .synopsis = "-m MODEL (-p TEXT | -f FILE) [options]",
    .about = "Print the embedding of each input (the prompt split at --embd-separator), pooled\n"
             "as --pooling or the model says, normalised as --embd-normalize says. With\n"
             "--pooling rank (a reranker) each input is QUERY<tab>DOCUMENT and the output is\n"
             "its score.",
    .groups = CLI_G_MODEL | CLI_G_DEVICE | CLI_G_CONTEXT | CLI_G_PROMPT | CLI_G_EMBED,
    .own = embed_own,
};

/* One vector as the chosen format writes it. */
static void print_vector(const embed_args *a, int index, int first, const float *v, int64_t n) {
    const int json = !strcmp(a->format, "json"), array = !strcmp(a->format, "array");
    if (json) printf("%s    {\"object\": \"embedding\", \"index\": %d, \"embedding\": [", first ? "" : ",\n", index);
    else if (array) printf("%s[", first ? "" : ",");
    else printf("embedding %d: ", index);
    for (int64_t i = 0; i < n; i++) printf(json || array ? "%s%.9g" : "%s%9.6f", i ? (json || array ? "," : " ") : "", v[i]);
    printf(json ? "]}" : array ? "]" : "\n");
}

/* Tokens of one input: a query/document pair for rank pooling. NULL after printing. */
static tessera_token *input_tokens(const embed_args *a, const tessera_model *m, int rank, const char *s, size_t len,
                                   int32_t *n) {
    const char *sep = a->cls_separator ? a->cls_separator : "\t";
    int32_t need = 0;
    for (int pass = 0; pass < 2; pass++) {
        tessera_token *toks = pass ? malloc((size_t)(need > 0 ? need : 1) * sizeof *toks) : NULL;
        if (pass && !toks) break;
        if (rank) {
            const char *cut = strstr(s, sep);
            if (!cut || (size_t)(cut - s) > len) {
                fprintf(stderr, "%s: --pooling rank: the input '%.*s' has no query/document separator (--cls-separator)\n",
                        CMD, (int)(len > 60 ? 60 : len), s);
                return NULL;
            }
            const char *doc = cut + strlen(sep);
            *n = tessera_rerank_tokens(m, s, (size_t)(cut - s), doc, len - (size_t)(doc - s), toks, need);
        } else {
            *n = tessera_tokenize(m, s, len, toks, need, true, false);
        }
        if (*n == INT32_MIN) {
            free(toks);
            break;
        }
        if (pass) return toks;
        need = *n < 0 ? -*n : *n;
    }
    fprintf(stderr, "%s: %s\n", CMD, tessera_last_error());
    return NULL;
}

/* Embed each input of text and print it; 0 or 1. */
static int embed_all(const embed_args *a, tessera_context *ctx, const tessera_model *m, char *text) {
    const char *sep = a->separator ? a->separator : "\n";
    const int32_t pooling = tessera_context_pooling(ctx), rank = pooling == TESSERA_POOLING_RANK;
    const int json = !strcmp(a->format, "json"), array = !strcmp(a->format, "array");
    if (json) printf("{\n  \"object\": \"list\",\n  \"data\": [\n");
    if (array) printf("[");
    int index = 0, rc = 0;
    for (char *s = text; s && rc == 0;) {
        char *end = *sep ? strstr(s, sep) : NULL;
        size_t len = end ? (size_t)(end - s) : strlen(s);
        char *next = end ? end + strlen(sep) : NULL;
        if (len == 0) { /* empty inputs (a trailing newline) are skipped, as llama-embedding does */
            s = next;
            continue;
        }
        int32_t n = 0;
        tessera_token *toks = input_tokens(a, m, rank, s, len, &n);
        if (!toks) return 1;
        if (a->verbose_prompt) {
            fprintf(stderr, "%s: input %d: %d tokens:", CMD, index, n);
            for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", toks[i]);
            fprintf(stderr, "\n");
        }
        int64_t cap = (pooling == TESSERA_POOLING_NONE ? (int64_t)n : 1) *
                      (tessera_embed_dim(ctx) > tessera_model_n_embd(m) ? tessera_embed_dim(ctx) : tessera_model_n_embd(m));
        float *v = malloc((size_t)cap * sizeof *v);
        int64_t got = v ? tessera_embed(ctx, toks, n, a->embd_norm, v, cap) : -1;
        if (got < 0) {
            fprintf(stderr, "%s: input %d: %s\n", CMD, index, v ? tessera_last_error() : "out of memory");
            rc = 1;
        } else if (rank && !json && !array) {
            printf("rerank score %d: %8.3f\n", index, v[0]);
        } else {
            int64_t dim = pooling == TESSERA_POOLING_NONE ? tessera_model_n_embd(m) : got;
            for (int64_t r = 0; r < got / dim; r++) print_vector(a, index, index == 0 && r == 0, v + r * dim, dim);
        }
        free(v);
        free(toks);
        index++;
        s = next;
    }
    if (json) printf("\n  ]\n}\n");
    if (array) printf("]\n");
    return rc;
}

int cmd_embed(int argc, char **argv) {
    embed_args a = {.embd_norm = 2, .format = ""};
    cli_params_init(&a.p);
    a.p.embeddings = 1;
    int rc = cli_parse(&embed_cmd, argc, argv, &a.p, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (!a.p.model) return fprintf(stderr, "%s: -m MODEL is required (see 'tessera embed --help')\n", CMD), 2;
    if (!a.p.prompt == !a.p.prompt_file)
        return fprintf(stderr, "%s: give exactly one of -p TEXT or -f FILE\n", CMD), 2;
    if (*a.format && strcmp(a.format, "json") && strcmp(a.format, "array"))
        return cli_bad_value(CMD, "--embd-output-format", a.format, "'', array or json"), 2;
    cli_session s = {0};
    int status = 1;
    char *text = NULL;
    if (cli_session_open(&s, CMD, &a.p) != 0) goto done;
    size_t text_len = 0;
    text = cli_prompt_text(CMD, &a.p, 1, &text_len);
    if (!text) goto done;
    if (tessera_context_pooling(s.ctx) < 0) {
        fprintf(stderr, "%s: the context gives no embeddings\n", CMD);
        goto done;
    }
    status = embed_all(&a, s.ctx, s.model, text);
done:
    free(text);
    cli_session_close(&s);
    return status;
}
