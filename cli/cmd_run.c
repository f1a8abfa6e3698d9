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
#include <tessera/tessera_mtmd.h>

#include "cli_opts.h"
#include "cli_setup.h"
#include "cli_util.h"
#include "commands.h"
#include "prompt_cache.h"

enum { RUN_MAX_REVERSE = 8 };

typedef struct run_opts {
    cli_params p;
    int no_echo, conversation, no_conversation, single_turn;
    const char *prompt_cache;
    int prompt_cache_ro, prompt_cache_all;
    int32_t grp_attn_n, grp_attn_w;
    /* llama-completion's interactive mode: -r ends a turn (or the run when
     * not interactive), the person's line goes in between --in-prefix and
     * --in-suffix */
    int interactive, interactive_first, in_prefix_bos;
    const char *in_prefix, *in_suffix;
    struct run_reverse {
        const char *list[RUN_MAX_REVERSE];
        int n;
    } reverse;
} run_opts;

/* -r PROMPT (repeatable). */
static int parse_reverse(const char *cmd, const char *flag, const char *v, void *dst) {
    struct run_reverse *r = dst;
    if (!*v) return cli_bad_value(cmd, flag, v, "a non-empty text");
    if (r->n == RUN_MAX_REVERSE) {
        fprintf(stderr, "%s: %s given more than %d times\n", cmd, flag, RUN_MAX_REVERSE);
        return -1;
    }
    r->list[r->n++] = v;
    return 0;
}

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
    {NULL, "--prompt-cache-all", NULL,
     "save the generated text to the --prompt-cache file as well (not with -i)", CLI_SWITCH,
     CLI_OWN(run_opts, prompt_cache_all), 0, 0, NULL, 0, 0},
    {"-i", "--interactive", NULL,
     "interactive completion: at a reverse prompt or the end of text, read a line from stdin and go on (an "
     "empty input ends the run at end of file)",
     CLI_SWITCH, CLI_OWN(run_opts, interactive), 0, 0, NULL, 0, 0},
    {"-if", "--interactive-first", NULL, "interactive, and wait for input right after the prompt", CLI_SWITCH,
     CLI_OWN(run_opts, interactive_first), 0, 0, NULL, 0, 0},
    {"-r", "--reverse-prompt", "PROMPT",
     "halt generation at PROMPT, return control in interactive mode (repeatable)", CLI_FN,
     CLI_OWN(run_opts, reverse), 0, 0, parse_reverse, CLI_NO_DEFAULT, 0},
    {NULL, "--in-prefix", "STRING", "string to prefix user inputs with (default: empty)", CLI_STR,
     CLI_OWN(run_opts, in_prefix), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--in-suffix", "STRING", "string to suffix after user inputs with (default: empty)", CLI_STR,
     CLI_OWN(run_opts, in_suffix), 0, 0, NULL, CLI_NO_DEFAULT, 0},
    {NULL, "--in-prefix-bos", NULL, "prefix BOS to user inputs, preceding the --in-prefix string", CLI_SWITCH,
     CLI_OWN(run_opts, in_prefix_bos), 0, 0, NULL, 0, 0},
    {"-gan", "--grp-attn-n", "N",
     "Self-Extend's group factor: read past the trained context by dividing the positions of all but the "
     "last --grp-attn-w tokens by N, a window at a time (1: off; the prompt goes in -b chunks; not with -i, --mmproj or speculative decoding)",
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
             "With -cnv (or --system, or -st) the prompt is a chat message instead.\n"
             "Speculative decoding (-md, --spec-type) and Self-Extend (--grp-attn-n)\n"
             "work without -i/-if and --mmproj; speculation also without\n"
             "--prompt-cache-all.",
    .groups = CLI_G_GENERATE | CLI_G_PROMPT | CLI_G_ESCAPE | CLI_G_CHAT | CLI_G_TEMPLATE | CLI_G_GRAMMAR | CLI_G_SHIFT |
              CLI_G_MEDIA | CLI_G_SPEC,
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
    if (o->interactive_first) o->interactive = 1;
    if (o->prompt_cache_all && !o->prompt_cache) {
        fprintf(stderr, "tessera run: --prompt-cache-all needs --prompt-cache FILE\n");
        return -1;
    }
    if (o->prompt_cache_all && (o->interactive || o->prompt_cache_ro)) {
        fprintf(stderr, "tessera run: --prompt-cache-all works neither with -i nor with --prompt-cache-ro\n");
        return -1;
    }
    if (o->interactive && o->conversation) {
        fprintf(stderr, "tessera run: -i is plain-completion interactive mode; -cnv is the chat one: give one\n");
        return -1;
    }
    if (o->prompt_cache && o->conversation) {
        fprintf(stderr, "tessera run: --prompt-cache works in plain completion, not conversation mode\n");
        return -1;
    }
    if (o->p.n_media > 0 && !o->p.mmproj) {
        fprintf(stderr, "tessera run: --%s needs --mmproj FILE (the model's multimodal projector)\n",
                o->p.media_kind[0] == 'a' ? "audio" : "image");
        return -1;
    }
    /* Self-Extend and speculation keep one text in one sequence: neither
     * takes a person's turns (-i) nor media chunks (--mmproj) yet, and a
     * speculative step leaves verified tokens past where -n or -r stops,
     * which --prompt-cache-all would save as the text. */
    const bool spec = o->p.model_draft || o->p.spec_ngram;
    if ((o->grp_attn_n > 1 || spec) && !o->conversation && (o->interactive || o->p.mmproj)) {
        fprintf(stderr, "tessera run: %s works without %s\n", o->grp_attn_n > 1 ? "--grp-attn-n" : "speculative decoding",
                o->interactive ? (o->interactive_first ? "-if" : "-i") : "--mmproj");
        return -1;
    }
    if (spec && o->prompt_cache_all) {
        fprintf(stderr, "tessera run: speculative decoding works without --prompt-cache-all\n");
        return -1;
    }
    if (o->p.mmproj && o->prompt_cache) {
        fprintf(stderr, "tessera run: --prompt-cache does not hold media yet: give either --mmproj or "
                        "--prompt-cache\n");
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

/* Every token the context holds, for --prompt-cache-all. */
typedef struct run_tokens {
    tessera_token *t;
    int32_t n, cap;
} run_tokens;

static int tokens_push(run_tokens *a, const tessera_token *t, int32_t n) {
    if (a->n + n > a->cap) {
        int32_t cap = a->cap ? a->cap : 256;
        while (cap < a->n + n) cap *= 2;
        tessera_token *nt = realloc(a->t, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        a->t = nt;
        a->cap = cap;
    }
    memcpy(a->t + a->n, t, (size_t)n * sizeof *t);
    a->n += n;
    return 0;
}

/* Does the text generated so far (its last bytes in tail) end with a
 * reverse prompt? */
static bool at_reverse_prompt(const run_opts *o, const char *tail, size_t n) {
    for (int i = 0; i < o->reverse.n; i++) {
        size_t rl = strlen(o->reverse.list[i]);
        if (rl <= n && !memcmp(tail + n - rl, o->reverse.list[i], rl)) return true;
    }
    return false;
}

/* Interactive mode's turn: --in-prefix, a line from stdin (echoed when
 * stdin is no terminal, as llama-completion does), --in-suffix, all
 * decoded from *pos. 1: end of input (stop), 0: go on, -1: error. */
static int user_turn(const run_opts *o, tessera_model *model, tessera_context *ctx, tessera_sampler *smp,
                     int32_t *pos, run_tokens *all) {
    if (o->in_prefix) fputs(o->in_prefix, stdout);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = getline(&line, &cap, stdin);
    if (len < 0) {
        free(line);
        fputs("EOF by user\n", stdout); /* as llama-completion */
        return 1;
    }
    if (!isatty(STDIN_FILENO)) fwrite(line, 1, (size_t)len, stdout); /* with its newline */
    if (o->in_suffix) fputs(o->in_suffix, stdout);
    fflush(stdout);
    /* As llama-completion: prefix, line and suffix tokenized apart (the
     * prefix and suffix with special tokens parsed), then joined. */
    const char *parts[3] = {o->in_prefix ? o->in_prefix : "", line, o->in_suffix ? o->in_suffix : ""};
    /* The line without its newline, as llama-completion's reader gives it. */
    if (len > 0 && line[len - 1] == '\n') len--;
    if (len > 0 && line[len - 1] == '\r') len--;
    size_t lens[3] = {strlen(parts[0]), (size_t)len, strlen(parts[2])};
    int rc = -1;
    tessera_token *toks = NULL;
    toks = malloc(((size_t)len + lens[0] + lens[2] + 4) * sizeof *toks);
    if (!toks) goto done;
    int32_t k = 0;
    if (o->in_prefix_bos && tessera_token_bos(model) >= 0) toks[k++] = tessera_token_bos(model);
    for (int i = 0; i < 3; i++) {
        if (!lens[i]) continue;
        int32_t m = tessera_tokenize(model, parts[i], lens[i], toks + k, (int32_t)(len + lens[0] + lens[2] + 3) - k,
                                     false, i != 1);
        if (m < 0) {
            fprintf(stderr, "\ntessera run: %s\n", m == INT32_MIN ? tessera_last_error() : "input too long");
            goto done;
        }
        k += m;
    }
    if (*pos + k >= (int32_t)tessera_context_n_ctx(ctx)) {
        fprintf(stderr, "\ntessera run: the input does not fit the context (-c)\n");
        rc = 1;
    } else if (k > 0 && tessera_decode(ctx, toks, k, *pos, 0) != 0) {
        fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
    } else {
        for (int32_t i = 0; i < k; i++) tessera_sampler_accept(smp, toks[i]);
        *pos += k;
        rc = all && tokens_push(all, toks, k) < 0 ? -1 : 0;
    }
done:
    free(toks);
    free(line);
    return rc;
}

/* The prompt with its media (--mmproj): chunks of text and media, the
 * media where the prompt says <__media__> (before it when it has no
 * marker, as llama-mtmd-cli). */
typedef struct run_media {
    tessera_mtmd *mm;
    tessera_media *media[CLI_MAX_MEDIA];
    int32_t n_media;
    tessera_mtmd_chunks *chunks;
} run_media;

static void run_media_free(run_media *rm) {
    tessera_mtmd_chunks_free(rm->chunks);
    for (int32_t i = 0; i < rm->n_media; i++) tessera_media_free(rm->media[i]);
    tessera_mtmd_free(rm->mm);
}

static int run_media_open(const run_opts *o, tessera_model *model, const char *prompt, size_t prompt_len,
                          run_media *rm) {
    memset(rm, 0, sizeof *rm);
    tessera_mtmd_params mp = tessera_mtmd_default_params();
    mp.no_offload = o->p.no_mmproj_offload != 0;
    mp.n_threads = o->p.n_threads;
    mp.explain = o->p.explain != 0;
    rm->mm = tessera_mtmd_load(model, o->p.mmproj, &mp);
    if (!rm->mm) return fprintf(stderr, "tessera run: --mmproj: %s\n", tessera_last_error()), -1;
    for (int32_t i = 0; i < o->p.n_media; i++) {
        tessera_media *m = tessera_media_from_file(o->p.media[i]);
        if (!m) return fprintf(stderr, "tessera run: --%s: %s\n", o->p.media_kind[i] == 'a' ? "audio" : "image",
                               tessera_last_error()), -1;
        rm->media[rm->n_media++] = m;
    }
    char *text = malloc(prompt_len + 1 + (size_t)rm->n_media * sizeof TESSERA_MEDIA_MARKER);
    if (!text) return fprintf(stderr, "tessera run: out of memory\n"), -1;
    text[0] = 0;
    int markers = 0;
    for (const char *p = prompt; (p = strstr(p, TESSERA_MEDIA_MARKER)) != NULL; p++) markers++;
    if (markers == 0)
        for (int32_t i = 0; i < rm->n_media; i++) strcat(text, TESSERA_MEDIA_MARKER);
    strncat(text, prompt, prompt_len);
    rm->chunks = tessera_mtmd_tokenize(rm->mm, text, rm->media, rm->n_media, true, true);
    free(text);
    if (!rm->chunks) return fprintf(stderr, "tessera run: %s\n", tessera_last_error()), -1;
    return 0;
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

/* A decoding step failed: 130 after Ctrl-C, else 1 with the reason printed. */
static int step_failed(void) {
    if (tessera_aborted()) return 130;
    fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
    return 1;
}

static int generate(const run_opts *o, tessera_model *model, tessera_context *ctx, tessera_spec *spec,
                    const char *prompt, size_t prompt_len, run_counts *cnt) {
    int32_t n_ctx = (int32_t)tessera_context_n_ctx(ctx);
    run_media rm = {0};
    if (o->p.mmproj && run_media_open(o, model, prompt, prompt_len, &rm) != 0) {
        run_media_free(&rm);
        return 1;
    }
    int32_t n = rm.chunks ? tessera_mtmd_chunks_n_tokens(rm.chunks)
                          : tessera_tokenize(model, prompt, prompt_len, NULL, 0, true, true);
    if (n == INT32_MIN) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        run_media_free(&rm);
        return 1;
    }
    if (n < 0) n = -n;
    if (n == 0) {
        fprintf(stderr, "tessera run: the prompt gives no tokens\n");
        run_media_free(&rm);
        return 1;
    }
    if (n >= n_ctx) {
        fprintf(stderr, "tessera run: the prompt has %d tokens, the context only %d (-c)\n", n, n_ctx);
        run_media_free(&rm);
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
    if (rm.chunks) {
        /* the text tokens in place, media positions as -1 (only the
         * sampler's penalties and the first token are read from toks) */
        int32_t k = 0;
        for (int32_t c = 0; c < tessera_mtmd_chunks_count(rm.chunks); c++) {
            int32_t nt, cn = tessera_mtmd_chunk_n_tokens(rm.chunks, c);
            const tessera_token *t = tessera_mtmd_chunk_tokens(rm.chunks, c, &nt);
            for (int32_t i = 0; i < cn; i++) toks[k++] = t ? t[i] : -1;
        }
    } else {
        tessera_tokenize(model, prompt, prompt_len, toks, n, true, true);
    }
    for (int32_t i = 0; i < n; i++)
        if (toks[i] >= 0) tessera_sampler_accept(smp, toks[i]);
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
    int dec;
    if (rm.chunks) dec = tessera_mtmd_eval_chunks(rm.mm, ctx, rm.chunks, 0, NULL);
    else if (o->grp_attn_n > 1) dec = decode_prompt_grouped(o, ctx, toks, n, &ga);
    else dec = decode_prompt(o, ctx, toks, n, from);
    if (dec != 0) {
        if (tessera_aborted()) {
            rc = 130;
            goto done;
        }
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    /* the draft model reads the prompt too, timed with it as llama.cpp does */
    if (spec && tessera_spec_prefill(spec, 0, toks, n) != 0) {
        fprintf(stderr, "tessera run: %s\n", tessera_last_error());
        goto done;
    }
    cnt->n_prompt = n - from;
    cnt->prompt_ms = now_ms() - t0;
    if (rm.chunks && o->p.verbose)
        fprintf(stderr, "tessera run: %d media (%s projector), last encode %.2f ms\n", rm.n_media,
                tessera_mtmd_projector_type(rm.mm), tessera_mtmd_last_encode_ms(rm.mm));
    if (o->prompt_cache && !o->prompt_cache_ro && from < n)
        prompt_cache_save("tessera run", o->prompt_cache, ctx, toks, n);
    if (!o->no_echo && o->p.explain) {
        fflush(stderr);
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    t0 = now_ms();
    /* pos: the tokens the cache holds, the next one's position but with
     * Self-Extend (ga.pos). With speculation toks[0..nh) is the text, and
     * the cache holds all but its last token once the queue of picked
     * tokens (q) is printed; fresh: the context's last logits are the next
     * token's (the prompt, a plain decode or a user turn gave them). */
    int32_t pos = n, nh = n;
    const int32_t keep = tessera_shift_keep(o->p.n_keep, n, toks[0] == tessera_token_bos(model));
    int eot = 0;
    char piece[256];
    char tail[512]; /* the last bytes generated in this turn, for -r */
    size_t n_tail = 0;
    int32_t turn_gen = 0;
    run_tokens all = {0};
    tessera_token q[260];
    int32_t nq = 0, qi = 0;
    bool fresh = true;
    rc = 0;
    if (o->prompt_cache_all && tokens_push(&all, toks, n) < 0) rc = 1;
    if (rc == 0 && o->interactive_first) {
        int u = user_turn(o, model, ctx, smp, &pos, NULL);
        if (u != 0) rc = u < 0 ? 1 : 0;
        if (u != 0) goto finish;
    }
    while (o->p.n_predict < 0 || turn_gen < o->p.n_predict) {
        if (tessera_aborted()) {
            rc = 130;
            break;
        }
        tessera_token t;
        if (qi < nq) {
            t = q[qi++];
        } else if (fresh || !spec) {
            t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
            if (t >= 0) tessera_sampler_accept(smp, t);
            fresh = false;
        } else { /* a speculative step decodes the text's last token */
            int32_t cached = nh - 1;
            if (cached >= n_ctx && !o->p.context_shift) {
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
            const int32_t left = o->p.n_predict < 0 ? 256 : o->p.n_predict - turn_gen;
            nq = tessera_spec_step(spec, 0, smp, toks, nh, q, left < 256 ? left : 256, NULL);
            qi = 0;
            if (nq <= 0) {
                nq = 0;
                rc = step_failed();
                break;
            }
            t = q[qi++];
        }
        if (t < 0) {
            fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
            rc = 1;
            break;
        }
        if (tessera_token_is_eog(model, t)) {
            if (!o->interactive) {
                eot = 1;
                break;
            }
            goto hand_over; /* llama-completion hands over at the end of text */
        }
        cnt->n_gen++;
        turn_gen++;
        if (spec) toks[nh++] = t;
        if (o->prompt_cache_all && tokens_push(&all, &t, 1) < 0) {
            rc = 1;
            break;
        }
        int32_t len = tessera_token_to_piece(model, t, piece, sizeof piece, false);
        if (len > 0) {
            fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
            if (n_tail + (size_t)len > sizeof tail) { /* keep the newest half */
                size_t drop = n_tail + (size_t)len - sizeof tail / 2;
                if (drop > n_tail) drop = n_tail;
                memmove(tail, tail + drop, n_tail - drop);
                n_tail -= drop;
            }
            if ((size_t)len <= sizeof tail - n_tail) {
                memcpy(tail + n_tail, piece, (size_t)len);
                n_tail += (size_t)len;
            }
        }
        bool limit = o->p.n_predict >= 0 && turn_gen == o->p.n_predict;
        if ((o->reverse.n > 0 && at_reverse_prompt(o, tail, n_tail)) || (limit && o->interactive)) {
            /* -r halts generation; interactive mode (neither speculation
             * nor Self-Extend, run_parse) hands over there and at the -n
             * limit of a turn */
            if (!o->interactive) break;
            if (tessera_decode(ctx, &t, 1, pos, 0) != 0) { /* the token the model said goes in first */
                fprintf(stderr, "\ntessera run: %s\n", tessera_last_error());
                rc = 1;
                break;
            }
            pos++;
        hand_over:;
            int u = user_turn(o, model, ctx, smp, &pos, NULL);
            if (u != 0) {
                rc = u < 0 ? 1 : 0;
                break;
            }
            n_tail = 0;
            turn_gen = 0;
            fresh = true;
            continue;
        }
        if (limit) break;
        if (spec) continue; /* the queue, or the next step that decodes t */
        if (pos >= n_ctx && (!o->p.context_shift || o->grp_attn_n > 1)) {
            fprintf(stderr, "\ntessera run: context full (%d tokens), stopping\n", n_ctx);
            break;
        }
        if (pos >= n_ctx && cli_context_shift("tessera run", ctx, 0, keep, NULL, &pos, o->p.verbose) != 0) {
            rc = 1;
            break;
        }
        int drc = o->grp_attn_n > 1 ? tessera_self_extend(ctx, 0, o->grp_attn_n, o->grp_attn_w, &ga.i, &ga.pos) : 0;
        if (drc == 0) drc = tessera_decode(ctx, &t, 1, o->grp_attn_n > 1 ? ga.pos++ : pos, 0);
        if (drc != 0) {
            rc = step_failed();
            break;
        }
        pos++;
        fresh = true;
    }
finish:
    cnt->gen_ms = now_ms() - t0;
    fputc('\n', stdout);
    fflush(stdout);
    /* As llama.cpp: the model ended the text (on stderr: stdout is the text). */
    if (eot) fputs("[end of text]\n", stderr);
    /* --prompt-cache-all: the generated tokens too (all but the last, which
     * was never decoded). */
    if (o->prompt_cache_all && rc == 0 && all.n > 1 && all.n - 1 > n)
        prompt_cache_save("tessera run", o->prompt_cache, ctx, all.t, all.n - 1);
    free(all.t);
done:
    tessera_sampler_free(smp);
    free(toks);
    run_media_free(&rm);
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
        o.p.context_shift = cli_context_shift_usable(cmd, &o.p, s.ctx);
        if (o.grp_attn_n > 1 && !tessera_context_can_shift(s.ctx)) {
            fprintf(stderr, "tessera run: --grp-attn-n: %s keeps a recurrent state, whose positions cannot be "
                            "regrouped; Self-Extend needs a model of attention layers only\n", o.p.model);
            cli_session_close(&s);
            free(prompt);
            return 1;
        }
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
