/* Helpers the tessera subcommands share (see cli_util.h). */
#include "cli_util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { READ_CHUNK = 65536 };

char *cli_file_load(const char *path, size_t *len, cli_read_status *status) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        *status = CLI_READ_CANNOT_OPEN;
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + READ_CHUNK + 1 > cap) {
            cap = cap ? cap * 2 : 2 * READ_CHUNK;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(fp);
                *status = CLI_READ_NO_MEMORY;
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, READ_CHUNK, fp);
        n += r;
        if (r < READ_CHUNK) break; /* end of file or an error */
    }
    if (ferror(fp)) {
        int err = errno; /* the read's reason, not what cleaning up leaves */
        free(buf);
        fclose(fp);
        errno = err;
        *status = CLI_READ_IO_ERROR;
        return NULL;
    }
    fclose(fp);
    buf[n] = '\0';
    *len = n;
    *status = CLI_READ_OK;
    return buf;
}

char *cli_read_file(const char *cmd, const char *what, const char *path, size_t *len) {
    cli_read_status status;
    char *buf = cli_file_load(path, len, &status);
    if (status == CLI_READ_CANNOT_OPEN)
        fprintf(stderr, "%s: cannot open %s%s'%s': %s\n", cmd, what ? what : "", what ? " " : "", path,
                strerror(errno));
    else if (status == CLI_READ_IO_ERROR)
        fprintf(stderr, "%s: error reading '%s'\n", cmd, path);
    else if (status == CLI_READ_NO_MEMORY)
        fprintf(stderr, "%s: out of memory reading '%s'\n", cmd, path);
    return buf;
}

int cli_plugin_dir_add(const char *cmd, const char **dirs, int *n, const char *dir) {
    if (*n == CLI_MAX_PLUGIN_DIRS) {
        fprintf(stderr, "%s: at most %d --plugin-dir options\n", cmd, CLI_MAX_PLUGIN_DIRS);
        return -1;
    }
    dirs[(*n)++] = dir;
    return 0;
}

int cli_parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_parse_float(const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

static void abort_on_signal(int sig) {
    (void)sig;
    tessera_abort();
}

void cli_abort_on_sigint(void) {
    signal(SIGINT, abort_on_signal);
}

size_t cli_utf8_seq_len(const unsigned char *s, size_t n) {
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) len = 2, cp = s[0] & 0x1F;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) len = 3, cp = s[0] & 0x0F;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

char *cli_utf8_clean(const char *s, size_t n, size_t *out_len) {
    char *out = malloc(3 * n + 1); /* one byte becomes at most three */
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t len = cli_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (len == 0) {
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
            continue;
        }
        memcpy(out + k, s + i, len);
        k += len;
        i += len;
    }
    out[k] = '\0';
    if (out_len) *out_len = k;
    return out;
}

void cli_block_stop_signals(sigset_t *stop) {
    sigemptyset(stop);
    sigaddset(stop, SIGINT);
    sigaddset(stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, stop, NULL);
    signal(SIGPIPE, SIG_IGN);
}
