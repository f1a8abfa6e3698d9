/* tessera run — generate text from a prompt, streaming it as it comes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tessera/tessera.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"
#include "prompt_cache.h"

typedef struct run_opts {
    cli_params p;
    int no_echo, conversation, no_conversation, single_turn;
    const char *prompt_cache;
    int prompt_cache_ro;
    int32_t grp_attn_n, grp_attn_w;
} run_opts;

static const cli_option run_own[] = {
    {NULL, "--no-echo", NULL, "do not print the prompt before the output", CLI_SWITCH,
     CLI_OWN(run_opts, no_echo), 0, 0, NULL, 0, 0},
    {"-cnv", "--conversation", NULL,
     "conversation mode, as llama.cpp: the prompt (if any) is the first user message, sent through the "
     "chat template; then more messages are read as in 'tessera chat'",
     CLI_SWITCH, CLI_OWN(run_opts, conversation), 0, 0, NULL, 0, 0},
    {"-no-cnv", "--no-conversation", NULL, "plain text completion (the default)", CLI_SWITCH,
     CLI_OWN(run_opts, no_conversation), 0, 0, NULL, 0, 0},
    {"-st", "--single-turn", NULL, "conversation mode for one message only: answer the prompt and exit",
     CLI_SWITCH, CLI_OWN(run_opts, single_turn), 0, 0, NULL, 0, 0},
    {NULL, "--prompt-cache", "FILE",
     "keep the state after the prompt in FILE; a later run whose prompt starts the same evaluates only "
     "what is new",
     CLI_STR, CLI_OWN(run_opts, prompt_cache), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--prompt-cache-ro", NULL, "use the --prompt-cache file but do not update it", CLI_SWITCH,
     CLI_OWN(run_opts, prompt_cache_ro), 0, 0, NULL, 0, 0},
    {"-gan", "--grp-attn-n", "N",
     "Self-Extend's group factor: read past the trained context by dividing the positions of all but the "
     "last --grp-attn-w tokens by N, a window at a time (1: off; the prompt goes in -b chunks)",
     CLI_INT, CLI_OWN(run_opts, grp_attn_n), 1, 1 << 20, NULL, 0, 0},
    {"-gaw", "--grp-attn-w", "N", "Self-Extend's window, a multiple of --grp-attn-n", CLI_INT,
     CLI_OWN(run_opts, grp_attn_w), 1, 1 << 30, NULL, 0, 0},
    CLI_END,
};

static const cli_command run_cmd = {
    .name = "tessera run",
    .synopsis = "-m MODEL (-p PROMPT | -f FILE) [options]",
    .about = "Generates text after the prompt and streams it to stdout; load time and\n"
             "prompt / generation speed go to stderr. Ctrl-C stops generation.\n"
             "With -cnv (or --system, or -st) the prompt is a chat message instead.",
    .groups = CLI_G_GENERATE | CLI_G_PROMPT | CLI_G_ESCAPE | CLI_G_CHAT | CLI_G_TEMPLATE | CLI_G_GRAMMAR | CLI_G_SHIFT |
              CLI_G_SPEC,
    .own = run_own,
};

/* 0 ok, 1 help printed, -1 error printed. */
static int run_parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    cli_params_init(&o->p);
    o->p.n_predict = 128;
    o->grp_attn_n = 1;
    o->grp_attn_w = 512;
    int rc = cli_parse(&run_cmd, argc, argv, &o->p, o);
    if (rc != 0) return rc;
    if (tessera_self_extend_check(o->grp_attn_n, o->grp_attn_w) != 0) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        return -1;
    }
    if (o->grp_attn_n > 1 && (o->p.model_draft || o->p.spec_ngram || o->prompt_cache || o->p.context_shift)) {
        fprintf(stderr, "tessera run: --grp-attn-n works without %s\n",
                o->prompt_cache ? "--prompt-cache" : o->p.context_shift ? "--context-shift (it replaces it)"
                                                                        : "speculative decoding");
        return -1;
    }
    if (!o->p.model) {
        fprintf(stderr, "tessera run: -m MODEL is required (see 'tessera run --help')\n");
        return -1;
    }
    if (o->conversation && o->no_conversation) {
        fprintf(stderr, "tessera run: give either -cnv or -no-cnv, not both\n");
        return -1;
    }
    /* --system and -st only make sense in conversation mode: they ask for it. */
    if (!o->no_conversation && (o->p.system || o->single_turn)) o->conversation = 1;
    if (o->no_conversation && (o->p.system || o->p.chat_template || o->p.chat_template_file)) {
        fprintf(stderr, "tessera run: %s needs conversation mode, not -no-cnv\n",
                o->p.system ? "--system" : o->p.chat_template ? "--chat-template" : "--chat-template-file");
        return -1;
    }
    if (o->prompt_cache_ro && !o->prompt_cache) {
        fprintf(stderr, "tessera run: --prompt-cache-ro needs --prompt-cache FILE\n");
        return -1;
    }
    if (o->prompt_cache && o->conversation) {
        fprintf(stderr, "tessera run: --prompt-cache works in plain completion, not conversation mode\n");
        return -1;
    }
    if (o->single_turn && !o->p.prompt && !o->p.prompt_file) {
        fprintf(stderr, "tessera run: -st answers one prompt: give -p TEXT or -f FILE\n");
        return -1;
    }
    if (o->conversation) return 0; /* no prompt needed: messages come from stdin */
    if (!o->p.prompt && !o->p.prompt_file) {
        fprintf(stderr, "tessera run: a prompt is required: -p TEXT or -f FILE\n");
        return -1;
    }
    if (o->p.prompt && o->p.prompt_file) {
        fprintf(stderr, "tessera run: give either -p or -f, not both\n");
        return -1;
    }
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What run counts itself: the core's timings count decode calls (a
 * one-token prompt is a "generation" call there, and the last generated
 * token is never decoded), not the tokens a person asked about. */
typedef struct run_counts {
    int32_t n_prompt, n_gen;
    double prompt_ms, gen_ms;
} run_counts;

/* Decode the prompt from position from (what a prompt cache did not hold).
 * With --explain it goes in two calls (all but the last token, then the
 * last alone) so the placement of both graph shapes is printed before any
 * generated text, not in the middle of it. */
static int decode_prompt(const run_opts *o, tessera_context *ctx, const tessera_token *toks, int32_t n,
                         int32_t from) {
    if (from == n) return 0;
    if (o->p.explain && n - from > 1) {
        if (tessera_decode(ctx, toks + from, n - 1 - from, from, 0) != 0) return -1;
        return tessera_decode(ctx, toks + n - 1, 1, n - 1, 0);
    }
    return tessera_decode(ctx, toks + from, n - from, from, 0);
}

/* Self-Extend's state: the position the next token goes to and the group
 * front (tessera_self_extend). */
typedef struct run_ga {
    int32_t pos, i;
} run_ga;

/* The prompt in -b chunks, Self-Extend moving positions before each (as
 * llama.cpp's completion tool does). */
static int decode_prompt_grouped(const run_opts *o, tessera_context *ctx, const tessera_token *toks, int32_t n,
                                 run_ga *ga) {
    const int32_t b = (int32_t)tessera_context_n_batch(ctx);
    for (int32_t i = 0; i < n; i += b) {
        const int32_t c = n - i < b ? n - i : b;
        if (tessera_self_extend(ctx, 0, o->grp_attn_n, o->grp_attn_w, &ga->i, &ga->pos) != 0 ||
            tessera_decode(ctx, toks + i, c, ga->pos, 0) != 0)
            return -1;
        ga->pos += c;
    }
    return 0;
}

static int generate(const run_opts *o, tessera_model *model, tessera_context *ctx, tessera_spec *spec,
                    const char *prompt, size_t prompt_len, run_counts *cnt) {
    int32_t n_ctx = (int32_t)tessera_context_n_ctx(ctx);
    int32_t n = tessera_tokenize(model, prompt, prompt_len, NULL, 0, true, true);
    if (n == INT32_MIN) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        return 1;
    }
    if (n < 0) n = -n;
    if (n == 0) {
        fprintf(stderr, "tessera run: the prompt gives no tokens\n");
        return 1;
    }
    if (n >= n_ctx) {
        fprintf(stderr, "tessera run: the prompt has %d tokens, the context only %d (-c)\n", n, n_ctx);
        return 1;
    }
    /* The whole text: the prompt, then each token as it is printed (the
     * speculation drafts from it), with room for a step's tokens. */
    tessera_token *toks = malloc(((size_t)n_ctx + 300) * sizeof *toks);
    tessera_sampler *smp = cli_sampler_new("tessera run", &o->p, model, n_ctx);
    int rc = 1;
    if (!toks || !smp) {
        if (smp) fprintf(stderr, "tessera run: out of memory\n");
        goto done;
    }
    tessera_tokenize(model, prompt, prompt_len, toks, n, true, true);
    for (int32_t i = 0; i < n; i++) tessera_sampler_accept(smp, toks[i]);
    if (cli_grammar_attach("tessera run", &o->p, model, smp) != 0) goto done;
    if (o->p.verbose)
        fprintf(stderr, "tessera run: prompt of %d tokens, seed %u\n", n, tessera_sampler_seed(smp));
    /* With --explain the placement comes first, then the text. */
    if (!o->no_echo && !o->p.explain) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    double t0 = now_ms();
    int32_t from = o->prompt_cache ? prompt_cache_load("tessera run", o->prompt_cache, ctx, toks, n, o->p.verbose) : 0;
    if (o->prompt_cache && o->p.verbose)
        fprintf(stderr, "tessera run: prompt cache: %d of %d prompt tokens reused, %d evaluated\n", from, n,
                n - from);
    run_ga ga = {0, 0};
    if ((o->grp_attn_n > 1 ? decode_prompt_grouped(o, ctx, toks, n, &ga) : decode_prompt(o, ctx, toks, n, from)) !=
        0) {
        if (tessera_aborted()) {
            rc = 130;
            goto done;
        }
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    cnt->n_prompt = n - from;
    cnt->prompt_ms = now_ms() - t0;
    if (o->prompt_cache && !o->prompt_cache_ro && from < n)
        prompt_cache_save("tessera run", o->prompt_cache, ctx, toks, n);
    if (!o->no_echo && o->p.explain) {
        fflush(stderr);
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    t0 = now_ms();
    /* toks[0..nh): the text; the cache holds all but its last token once
     * the queue of picked tokens (q) is printed. */
    int32_t nh = n;
    const int32_t keep = tessera_shift_keep(o->p.n_keep, n, toks[0] == tessera_token_bos(model));
    int eot = 0;
    char piece[256];
    tessera_token q[260];
    int32_t nq = 0, qi = 0;
    rc = 0;
    q[nq++] = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
    if (q[0] >= 0) tessera_sampler_accept(smp, q[0]);
    while (o->p.n_predict < 0 || cnt->n_gen < o->p.n_predict) {
        if (qi == nq) {
            if (tessera_aborted()) {
                rc = 130;
                break;
            }
            int32_t cached = nh - 1;
            if (cached >= n_ctx && (!o->p.context_shift || o->grp_attn_n > 1)) {
                fprintf(stderr, "\ntessera run: context full (%d tokens), stopping\n", n_ctx);
                break;
            }
            if (cached >= n_ctx) {
                const tessera_token last = toks[nh - 1];
                if (cli_context_shift("tessera run", ctx, 0, keep, toks, &cached, o->p.verbose) != 0) {
                    rc = 1;
                    break;
                }
                toks[cached] = last;
                nh = cached + 1;
            }
            nq = qi = 0;
            if (spec) {
                const int32_t left = o->p.n_predict < 0 ? 256 : o->p.n_predict - cnt->n_gen;
                nq = tessera_spec_step(spec, 0, smp, toks, nh, q, left < 256 ? left : 256, NULL);
            } else if (o->grp_attn_n > 1) {
                if (tessera_self_extend(ctx, 0, o->grp_attn_n, o->grp_attn_w, &ga.i, &ga.pos) == 0 &&
                    tessera_decode(ctx, &toks[nh - 1], 1, ga.pos, 0) == 0) {
                    ga.pos++;
                    nq = 1;
                }
            } else if (tessera_decode(ctx, &toks[nh - 1], 1, nh - 1, 0) == 0) {
                nq = 1;
            }
            if (nq <= 0) {
                if (tessera_aborted()) {
                    rc = 130;
                    break;
                }
                fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
                rc = 1;
                break;
            }
            if (!spec) {
                q[0] = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
                if (q[0] >= 0) tessera_sampler_accept(smp, q[0]);
            }
        }
        tessera_token t = q[qi++];
        if (t < 0) {
            fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
            rc = 1;
            goto done;
        }
        if (tessera_token_is_eog(model, t)) {
            eot = 1;
            break;
        }
        cnt->n_gen++;
        toks[nh++] = t;
        int32_t len = tessera_token_to_piece(model, t, piece, sizeof piece, false);
        if (len > 0) {
            fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
        }
    }
    cnt->gen_ms = now_ms() - t0;
    fputc('\n', stdout);
    fflush(stdout);
    /* As llama.cpp: the model ended the text (on stderr: stdout is the text). */
    if (eot) fputs("[end of text]\n", stderr);
done:
    tessera_sampler_free(smp);
    free(toks);
    return rc;
}

/* --verbose: what one decoding step asked of the devices, averaged over
 * the generation steps (one submission and nothing but inputs up and the
 * kept logits down is the goal at -ngl 99). */
static void print_step_stats(const tessera_context *ctx) {
    tessera_step_stats st;
    tessera_context_step_stats(ctx, &st);
    if (st.n_steps <= 0) return;
    const double n = (double)st.n_steps;
    fprintf(stderr,
            "per decoding step: %.2f submissions (%.2f computes, %.2f replayed), %.2f copies up (%.0f B), "
            "%.2f reads back (%.0f B), %.2f waits; %lld splits; graph built %lld of %lld steps\n",
            (double)st.n_submits / n, (double)st.n_computes / n, (double)st.n_replayed / n, (double)st.n_uploads / n,
            (double)st.upload_bytes / n, (double)st.n_reads / n, (double)st.read_bytes / n, (double)st.n_waits / n,
            (long long)st.n_splits, (long long)st.n_graphs_built, (long long)st.n_steps);
}

static void print_counts(const tessera_context *ctx, const run_counts *c, bool verbose) {
    tessera_timings t;
    tessera_context_timings(ctx, &t);
    fprintf(stderr, "\n");
    fprintf(stderr, "load time:   %10.2f ms\n", t.load_ms);
    fprintf(stderr, "prompt:      %10.2f ms / %d tokens (%.2f tokens/s)\n", c->prompt_ms, (int)c->n_prompt,
            c->prompt_ms > 0 ? 1e3 * c->n_prompt / c->prompt_ms : 0.0);
    fprintf(stderr, "generation:  %10.2f ms / %d tokens (%.2f tokens/s)\n", c->gen_ms, (int)c->n_gen,
            c->gen_ms > 0 ? 1e3 * c->n_gen / c->gen_ms : 0.0);
    if (verbose) print_step_stats(ctx);
}

int cmd_run(int argc, char **argv) {
    const char *cmd = "tessera run";
    run_opts o;
    int pr = run_parse(argc, argv, &o);
    if (pr != 0) return pr > 0 ? 0 : 2;
    if (o.conversation) {
        if (o.p.prompt && o.p.prompt_file) {
            fprintf(stderr, "tessera run: give either -p or -f, not both\n");
            return 2;
        }
        return chat_run(cmd, &o.p, !o.single_turn);
    }

    size_t prompt_len = 0;
    char *prompt = cli_prompt_text(cmd, &o.p, 1, &prompt_len);
    if (!prompt) return 1;
    cli_abort_on_sigint();
    cli_session s;
    int rc = 1;
    if (cli_session_open(&s, cmd, &o.p) == 0) {
        run_counts cnt = {0};
        if (o.p.profile && tessera_context_set_profiling(s.ctx, true) > 0)
            fprintf(stderr, "tessera run: --profile: some devices cannot time their work (counted, not timed)\n");
        cli_spec sp;
        rc = cli_spec_open(&sp, cmd, &o.p, &s) != 0 ? 1 : generate(&o, s.model, s.ctx, sp.spec, prompt, prompt_len, &cnt);
        if (rc == 130) fprintf(stderr, "tessera run: interrupted\n");
        if (rc == 0 || rc == 130) print_counts(s.ctx, &cnt, o.p.verbose);
        if ((rc == 0 || rc == 130) && o.p.verbose) cli_spec_print_stats(cmd, &sp);
        cli_spec_close(&sp);
        if ((rc == 0 || rc == 130) && o.p.profile) cli_print_profile(stderr, "the prompt and the generation", s.ctx);
    }
    cli_session_close(&s);
    free(prompt);
    return rc;
}
