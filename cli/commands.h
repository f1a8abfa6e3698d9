/*
 * The tessera binary's subcommands: one file each (cmd_<name>.c), each a
 * function taking the arguments after the subcommand name (argv[0] is the
 * subcommand) and returning the process exit status.
 */
#ifndef TESSERA_CLI_COMMANDS_H
#define TESSERA_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_plugin(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_export_lora(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_gguf_split(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* The chat of `tessera chat` for other commands (run -cnv): p->prompt or
 * p->prompt_file, when set, is the first message; interactive: then read
 * more from stdin. Returns the exit status. */
struct cli_params;
int chat_run(const char *cmd, const struct cli_params *p, int interactive);

#endif
