/* tessera tokenize — print the token ids (and pieces) of a text.
 *
 * Only the vocabulary is loaded (gguf + vocab, no weights), so this also
 * works on vocabulary-only GGUF files such as llama.cpp's ggml-vocab-*. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera_vocab.h>

#include "cli_opts.h"
#include "cli_util.h"
#include "commands.h"

/* Whole file into a malloc'd buffer (NUL-terminated for convenience); NULL
 * with the reason printed. */
static char *read_file(const char *path, size_t *len) {
    cli_read_status status;
    char *buf = cli_file_load(path, len, &status);
    const char *why = status == CLI_READ_CANNOT_OPEN ? "cannot open: "
                      : status == CLI_READ_IO_ERROR  ? "read error: "
                      : status == CLI_READ_NO_MEMORY ? "out of memory reading the file"
                                                     : NULL;
    if (!buf && why)
        fprintf(stderr, "tessera tokenize: %s: %s%s\n", path, why,
                status == CLI_READ_NO_MEMORY ? "" : strerror(errno));
    return buf;
}

/* The tokens of text[0..len) into *out (malloc'd), their number in *n. 0;
 * -1 with tessera_last_error(); -2 out of memory, the error printed. */
static int tokenize_all(const tessera_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, tessera_token **out, int32_t *n) {
    /* a token covers at least one byte, plus BOS/EOS: one call is enough */
    int32_t cap = len < (size_t)INT32_MAX - 16 ? (int32_t)len + 16 : INT32_MAX;
    for (int tries = 0; tries < 2; tries++) {
        tessera_token *toks = malloc((size_t)cap * sizeof *toks);
        if (!toks) break;
        int32_t got = tessera_vocab_tokenize(v, text, len, toks, cap, add_special, parse_special);
        if (got >= 0) {
            *out = toks;
            *n = got;
            return 0;
        }
        free(toks);
        if (got == INT32_MIN) return -1;
        cap = -got; /* the count needed: the second try fits */
    }
    fprintf(stderr, "tessera tokenize: out of memory for %d tokens\n", (int)cap);
    return -2;
}

/* A piece on one line: control bytes escaped (\n, \t, \r, \xNN, and a
 * backslash as \\), and so are bytes that are not valid UTF-8 (byte-fallback
 * tokens, partial characters). */
static void print_piece(const char *piece, size_t n) {
    const unsigned char *s = (const unsigned char *)piece;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = cli_utf8_seq_len(s + i, n - i);
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (len == 0 || c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else {
            fwrite(s + i, 1, len, stdout);
            i += len;
            continue;
        }
        i++;
    }
}

typedef struct tokenize_args {
    cli_params p;
    int ids_only, no_bos, parse_special;
} tokenize_args;

static const cli_option tokenize_own[] = {
    {NULL, "--ids", NULL, "print only the id list: [1, 2, 3]", CLI_SWITCH, CLI_OWN(tokenize_args, ids_only),
     0, 0, NULL, 0, 0},
    {NULL, "--no-bos", NULL, "do not add BOS (and EOS) even if the vocabulary does", CLI_SWITCH,
     CLI_OWN(tokenize_args, no_bos), 0, 0, NULL, 0, 0},
    {NULL, "--parse-special", NULL, "turn special-token text such as <s> into its token", CLI_SWITCH,
     CLI_OWN(tokenize_args, parse_special), 0, 0, NULL, 0, 0},
    CLI_END,
};

static const cli_command tokenize_cmd = {
    .name = "tessera tokenize",
    .synopsis = "-m MODEL (-p TEXT | -f FILE) [options]",
    .about = "Print the tokens of a text, one per line as  id -> 'piece'. Only the\n"
             "vocabulary is read, so vocabulary-only GGUF files work too.",
    .groups = CLI_G_MODEL | CLI_G_PROMPT,
    .own = tokenize_own,
    .epilog = "Pieces are printed with control characters and bytes that are not valid\n"
              "UTF-8 escaped (\\n, \\t, \\r, \\xNN; a backslash as \\\\).\n",
};

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, tokenize_args *a) {
    memset(a, 0, sizeof *a);
    cli_params_init(&a->p);
    int rc = cli_parse(&tokenize_cmd, argc, argv, &a->p, a);
    if (rc != 0) return rc;
    if (!a->p.model) {
        fprintf(stderr, "tessera tokenize: -m MODEL is required (see 'tessera tokenize --help')\n");
        return -1;
    }
    if (!a->p.prompt == !a->p.prompt_file) {
        fprintf(stderr, "tessera tokenize: give exactly one of -p TEXT or -f FILE\n");
        return -1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;

    int status = 1;
    tessera_vocab *v = NULL;
    char *file_text = NULL;
    tessera_token *toks = NULL;
    int32_t n_toks = 0;
    const char *text = a.p.prompt;
    size_t len = a.p.prompt ? strlen(a.p.prompt) : 0;
    if (a.p.prompt_file) {
        file_text = read_file(a.p.prompt_file, &len);
        if (!file_text) goto done;
        text = file_text;
    }
    v = tessera_vocab_load(a.p.model);
    if (!v) goto fail;
    int trc = tokenize_all(v, text, len, !a.no_bos, a.parse_special, &toks, &n_toks);
    if (trc == -1) goto fail;
    if (trc != 0) goto done;

    if (a.ids_only) {
        putchar('[');
        for (int32_t i = 0; i < n_toks; i++) printf(i ? ", %d" : "%d", (int)toks[i]);
        puts("]");
    } else {
        for (int32_t i = 0; i < n_toks; i++) {
            size_t plen = 0;
            const char *piece = tessera_vocab_piece(v, toks[i], true, &plen);
            printf("%d -> '", (int)toks[i]);
            if (piece) print_piece(piece, plen);
            puts("'");
        }
    }
    status = fflush(stdout) == 0 ? 0 : 1;
    if (status) fprintf(stderr, "tessera tokenize: error writing the output\n");
    goto done;
fail:
    fprintf(stderr, "tessera tokenize: %s\n", tessera_last_error());
done:
    free(toks);
    tessera_vocab_free(v);
    free(file_text);
    return status;
}
