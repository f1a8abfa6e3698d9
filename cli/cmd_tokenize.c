/* tessera tokenize — print the token ids (and pieces) of a text.
 *
 * Only the vocabulary is loaded (gguf + vocab, no weights), so this also
 * works on vocabulary-only GGUF files such as llama.cpp's ggml-vocab-*. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "gguf/gguf.h"
#include "util/error.h"
#include "vocab/vocab.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tessera tokenize -m MODEL (-p TEXT | -f FILE) [options]\n"
            "\n"
            "Print the tokens of a text, one per line as  id -> 'piece'.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH     GGUF file holding the vocabulary\n"
            "  -p, --prompt TEXT    text to tokenize\n"
            "  -f, --file PATH      read the text from a file\n"
            "      --ids            print only the id list: [1, 2, 3]\n"
            "      --no-bos         do not add BOS (and EOS) even if the vocabulary does\n"
            "      --parse-special  turn special-token text such as <s> into its token\n"
            "  -h, --help           show this help\n"
            "\n"
            "Pieces are printed with control characters and bytes that are not valid\n"
            "UTF-8 escaped (\\n, \\t, \\r, \\xNN; a backslash as \\\\).\n");
}

/* Whole file into a malloc'd buffer (NUL-terminated for convenience); NULL
 * with the reason in error_get(). */
static char *read_file(const char *path, size_t *len) {
    cli_read_status status;
    char *buf = cli_file_load(path, len, &status);
    if (status == CLI_READ_CANNOT_OPEN) error_set("%s: cannot open: %s", path, strerror(errno));
    else if (status == CLI_READ_IO_ERROR) error_set("%s: read error: %s", path, strerror(errno));
    else if (status == CLI_READ_NO_MEMORY) error_set("%s: out of memory reading the file", path);
    return buf;
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
    const char *model;
    const char *prompt;
    const char *file;
    bool ids_only;
    bool no_bos;
    bool parse_special;
} tokenize_args;

/* 0 ok, 1 help printed, -1 error printed. */
static int parse_args(int argc, char **argv, tokenize_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(arg, "-m") || !strcmp(arg, "--model") || !strcmp(arg, "-p") ||
                   !strcmp(arg, "--prompt") || !strcmp(arg, "-f") || !strcmp(arg, "--file")) {
            if (!has_value) {
                fprintf(stderr, "tessera tokenize: flag %s needs a value\n", arg);
                return -1;
            }
            const char *v = argv[++i];
            if (arg[1] == 'm' || !strcmp(arg, "--model")) a->model = v;
            else if (arg[1] == 'p' || !strcmp(arg, "--prompt")) a->prompt = v;
            else a->file = v;
        } else if (!strcmp(arg, "--ids")) {
            a->ids_only = true;
        } else if (!strcmp(arg, "--no-bos")) {
            a->no_bos = true;
        } else if (!strcmp(arg, "--parse-special")) {
            a->parse_special = true;
        } else {
            fprintf(stderr, "tessera tokenize: unknown flag '%s' (see tessera tokenize --help)\n",
                    arg);
            return -1;
        }
    }
    if (!a->model) {
        fprintf(stderr, "tessera tokenize: missing -m MODEL (see tessera tokenize --help)\n");
        return -1;
    }
    if (!a->prompt == !a->file) {
        fprintf(stderr, "tessera tokenize: give exactly one of -p TEXT or -f FILE\n");
        return -1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_args a = {0};
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) return rc > 0 ? 0 : 2;

    int status = 1;
    gguf_file *f = NULL;
    vocab *v = NULL;
    char *file_text = NULL;
    vocab_tokens toks = {0};
    const char *text = a.prompt;
    size_t len = a.prompt ? strlen(a.prompt) : 0;
    if (a.file) {
        file_text = read_file(a.file, &len);
        if (!file_text) goto fail;
        text = file_text;
    }
    f = gguf_open(a.model);
    if (!f) goto fail;
    v = vocab_load(f);
    if (!v) {
        error_wrap("%s", a.model);
        goto fail;
    }
    if (vocab_tokenize(v, text, len, !a.no_bos, a.parse_special, &toks) < 0) goto fail;

    if (a.ids_only) {
        putchar('[');
        for (size_t i = 0; i < toks.n; i++) printf(i ? ", %d" : "%d", (int)toks.ids[i]);
        puts("]");
    } else {
        for (size_t i = 0; i < toks.n; i++) {
            size_t plen = 0;
            const char *piece = vocab_token_piece(v, toks.ids[i], true, &plen);
            printf("%d -> '", (int)toks.ids[i]);
            if (piece) print_piece(piece, plen);
            puts("'");
        }
    }
    status = fflush(stdout) == 0 ? 0 : 1;
    if (status) fprintf(stderr, "tessera tokenize: error writing the output\n");
    goto done;
fail:
    fprintf(stderr, "tessera tokenize: %s\n", error_get());
done:
    vocab_tokens_free(&toks);
    vocab_free(v);
    gguf_close(f);
    free(file_text);
    return status;
}
