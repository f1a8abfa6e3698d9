/* prompt_cache — llama.cpp's --prompt-cache for 'tessera run': the state
 * after a prompt is kept in a file, and a later run whose prompt starts the
 * same evaluates only what follows the shared prefix. */
#ifndef TESSERA_CLI_PROMPT_CACHE_H
#define TESSERA_CLI_PROMPT_CACHE_H

#include <stdbool.h>

#include <tessera/tessera.h>

/* Load path (when it exists) into ctx and keep the longest prefix it shares
 * with toks[0..n). Returns the number of prompt tokens the cache holds
 * already: the caller decodes toks[ret..n) at position ret; ret == n means
 * the loaded logits are the prompt's own (nothing to evaluate). A file that
 * cannot be used (another model, other settings, corrupt) is reported on
 * stderr and ignored: 0. */
int32_t prompt_cache_load(const char *cmd, const char *path, tessera_context *ctx, const tessera_token *toks,
                          int32_t n, bool verbose);
/* Save ctx (holding the prompt toks[0..n)) to path; 0 or -1 (reported). */
int prompt_cache_save(const char *cmd, const char *path, tessera_context *ctx, const tessera_token *toks,
                      int32_t n);

#endif
