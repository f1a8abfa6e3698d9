/* Helpers the tessera subcommands share: whole-file reads, number parsing
 * with range checks (for cli_opts), --plugin-dir lists, Ctrl-C ->
 * tessera_abort(), UTF-8 sequence lengths.
 *
 * Functions taking `cmd` print their one error line themselves, starting
 * with cmd (e.g. "tessera run"); the others only report failure. */
#ifndef TESSERA_CLI_UTIL_H
#define TESSERA_CLI_UTIL_H

#include <signal.h>
#include <stddef.h>

#include <tessera/tessera.h>

/* Why cli_file_load failed. */
typedef enum cli_read_status {
    CLI_READ_OK,
    CLI_READ_CANNOT_OPEN, /* errno says why */
    CLI_READ_IO_ERROR,    /* errno says why */
    CLI_READ_NO_MEMORY,
} cli_read_status;

/* The whole file, malloc'd and NUL-terminated (the NUL not counted in
 * *len). NULL on failure, with *status set and errno kept from the failing
 * call. Prints nothing. */
char *cli_file_load(const char *path, size_t *len, cli_read_status *status);

/* cli_file_load, printing on failure one of
 *   "CMD: cannot open WHAT 'PATH': reason"   (what NULL: "cannot open 'PATH'")
 *   "CMD: error reading 'PATH'"
 *   "CMD: out of memory reading 'PATH'"  */
char *cli_read_file(const char *cmd, const char *what, const char *path, size_t *len);

enum { CLI_MAX_PLUGIN_DIRS = 16 };

/* Appends one --plugin-dir to dirs[*n] (room for CLI_MAX_PLUGIN_DIRS);
 * -1 after printing "CMD: at most 16 --plugin-dir options". */
int cli_plugin_dir_add(const char *cmd, const char **dirs, int *n, const char *dir);

/* A whole decimal integer (no trailing text) in lo..hi. 0 ok, -1 not. */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* A whole number (strtof) in lo..hi; NaN is never in range. 0 ok, -1 not. */
int cli_parse_float(const char *s, float lo, float hi, float *out);

/* From now on SIGINT calls tessera_abort(): the running decode stops and
 * the command reports the interruption itself. */
void cli_abort_on_sigint(void);

/* A server's signals: SIGINT and SIGTERM blocked in this thread and every
 * thread it starts after this (one sigwait(stop) takes them), SIGPIPE
 * ignored (a write to a client that left must not end the process). */
void cli_block_stop_signals(sigset_t *stop);

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), 0 if it is not
 * one (overlong forms, surrogates and values past U+10FFFF are not). */
size_t cli_utf8_seq_len(const unsigned char *s, size_t n);
/* A NUL-terminated copy of s[0..n) in which each byte that does not start
 * a valid sequence is U+FFFD (a reply cut inside a character, a byte token
 * of a model); its length in *out_len. NULL when out of memory. */
char *cli_utf8_clean(const char *s, size_t n, size_t *out_len);

#endif
