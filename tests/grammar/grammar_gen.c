/*
 * grammar_gen — generation under a grammar through the public API only,
 * for the end-to-end tests and the tokens/s measurement.
 *
 *   grammar_gen MODEL PROMPT_FILE MODE SPEC TEMP SEED N_PREDICT
 *
 * MODE: none (SPEC ignored), gbnf (SPEC: a GBNF file), schema (SPEC: a
 * JSON Schema file), json (SPEC ignored: any JSON object). The prompt is
 * tokenized with special tokens parsed and no BOS added. Prints the
 * generated text on stdout, and on stderr one line
 *   tokens N gen_ms G sample_ms S sample_cpu_ms U attach_ms A complete C
 * (gen_ms: wall time of the generation loop; sample_ms / sample_cpu_ms:
 * wall and thread CPU time inside tessera_sampler_sample; attach_ms:
 * tessera_sampler_set_grammar; C: 1 when the output ended because the
 * grammar was complete).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/tessera.h>

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double now_ms(void) {
    return clock_ms(CLOCK_MONOTONIC);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr,
                "usage: grammar_gen MODEL PROMPT_FILE none|gbnf|schema|json SPEC TEMP SEED N_PREDICT\n");
        return 2;
    }
    const char *mode = argv[3];
    size_t prompt_len = 0, spec_len = 0;
    char *prompt = read_all(argv[2], &prompt_len);
    char *spec = strcmp(mode, "gbnf") && strcmp(mode, "schema") ? NULL : read_all(argv[4], &spec_len);
    if (!prompt || (!spec && (!strcmp(mode, "gbnf") || !strcmp(mode, "schema")))) {
        fprintf(stderr, "grammar_gen: cannot read the prompt or spec file\n");
        return 2;
    }
    int rc = 1;
    tessera_model *model = NULL;
    tessera_context *ctx = NULL;
    tessera_sampler *smp = NULL;
    tessera_grammar *gr = NULL;
    tessera_token *toks = NULL;
    if (tessera_init(NULL) != 0) goto fail;
    tessera_model_params mp = tessera_model_default_params();
    model = tessera_model_load(argv[1], &mp);
    if (!model) goto fail;
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 1024;
    ctx = tessera_context_new(model, &cp);
    if (!ctx) goto fail;
    if (!strcmp(mode, "gbnf"))
        gr = tessera_grammar_parse(spec, spec_len, NULL);
    else if (!strcmp(mode, "schema"))
        gr = tessera_grammar_from_json_schema(spec, spec_len);
    else if (!strcmp(mode, "json"))
        gr = tessera_grammar_json_object();
    if (strcmp(mode, "none") && !gr) goto fail;
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = (float)atof(argv[5]);
    sp.seed = (uint32_t)strtoul(argv[6], NULL, 10);
    long n_predict = strtol(argv[7], NULL, 10);
    smp = tessera_sampler_new(tessera_model_n_vocab(model), &sp);
    if (!smp) goto fail;
    int32_t n = -tessera_tokenize(model, prompt, prompt_len, NULL, 0, false, true);
    toks = malloc((size_t)(n > 0 ? n : 1) * sizeof *toks);
    if (n <= 0 || !toks || tessera_tokenize(model, prompt, prompt_len, toks, n, false, true) != n) goto fail;
    for (int32_t i = 0; i < n; i++)
        tessera_sampler_accept(smp, toks[i]);
    /* After the prompt: the grammar starts with the reply. */
    double attach_ms = now_ms();
    if (gr && tessera_sampler_set_grammar(smp, model, gr) != 0) goto fail;
    attach_ms = now_ms() - attach_ms;
    if (tessera_decode(ctx, toks, n, 0, 0) != 0) goto fail;
    double gen_ms = 0, sample_ms = 0, sample_cpu_ms = 0;
    long produced = 0;
    int complete = 0;
    int32_t pos = n;
    char piece[512];
    for (long i = 0; i < n_predict; i++) {
        double t0 = now_ms(), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        tessera_token t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
        sample_cpu_ms += clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        sample_ms += now_ms() - t0;
        if (t < 0) goto fail;
        tessera_sampler_accept(smp, t);
        if (tessera_token_is_eog(model, t)) {
            complete = gr ? tessera_sampler_grammar_complete(smp) : 1;
            gen_ms += now_ms() - t0;
            break;
        }
        int32_t len = tessera_token_to_piece(model, t, piece, sizeof piece, false);
        if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
        produced++;
        if (tessera_decode(ctx, &t, 1, pos++, 0) != 0) goto fail;
        gen_ms += now_ms() - t0;
    }
    fflush(stdout);
    fprintf(stderr, "tokens %ld gen_ms %.1f sample_ms %.1f sample_cpu_ms %.1f attach_ms %.1f complete %d\n",
            produced, gen_ms, sample_ms, sample_cpu_ms, attach_ms, complete);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "grammar_gen: %s\n", tessera_last_error());
    free(toks);
    tessera_grammar_free(gr);
    tessera_sampler_free(smp);
    tessera_context_free(ctx);
    tessera_model_free(model);
    tessera_shutdown();
    free(prompt);
    free(spec);
    return rc;
}
