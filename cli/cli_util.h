/* Helpers the tessera subcommands share: whole-file reads, option values
 * (numbers with range checks, --kv-type, --plugin-dir), Ctrl-C ->
 * tessera_abort(), UTF-8 sequence lengths.
 *
 * Functions taking `cmd` print their one error line themselves, starting
 * with cmd (e.g. "tessera run"); the others only report failure. */
#ifndef TESSERA_CLI_UTIL_H
#define TESSERA_CLI_UTIL_H

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

/* argv[*i] is an option that takes a value: it must be one of `valued`
 * (NULL-terminated). Returns the value and steps *i onto it; NULL after
 * printing "CMD: unknown option 'OPT' (see 'CMD --help')" or
 * "CMD: OPT needs a value". */
const char *cli_option_value(const char *cmd, const char *const *valued, int argc, char **argv, int *i);

enum { CLI_MAX_PLUGIN_DIRS = 16 };

/* Appends one --plugin-dir to dirs[*n] (room for CLI_MAX_PLUGIN_DIRS);
 * -1 after printing "CMD: at most 16 --plugin-dir options". */
int cli_plugin_dir_add(const char *cmd, const char **dirs, int *n, const char *dir);

/* A whole decimal integer (no trailing text) in lo..hi. 0 ok, -1 not. */
int cli_parse_long(const char *s, long lo, long hi, long *out);

/* A whole number (strtof) in lo..hi; NaN is never in range. 0 ok, -1 not. */
int cli_parse_float(const char *s, float lo, float hi, float *out);

/* cli_parse_long / cli_parse_float for the value of flag, printing
 * "CMD: FLAG expects an integer in LO..HI, got 'S'" (or "a number"). */
int cli_flag_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_flag_float(const char *cmd, const char *flag, const char *s, float lo, float hi, float *out);

/* --kv-type: f16/F16 or f32/F32; else prints "CMD: --kv-type expects f16
 * or f32, got 'S'". 0 ok, -1 error printed. */
int cli_flag_kv_type(const char *cmd, const char *s, tessera_kv_type *out);

/* From now on SIGINT calls tessera_abort(): the running decode stops and
 * the command reports the interruption itself. */
void cli_abort_on_sigint(void);

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), 0 if it is not
 * one (overlong forms, surrogates and values past U+10FFFF are not). */
size_t cli_utf8_seq_len(const unsigned char *s, size_t n);

#endif
