/* prompt_cache — see prompt_cache.h. */
#include "prompt_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int32_t prompt_cache_load(const char *cmd, const char *path, tessera_context *ctx, const tessera_token *toks,
                          int32_t n, bool verbose) {
    if (access(path, F_OK) != 0) {
        if (verbose) fprintf(stderr, "%s: prompt cache %s does not exist yet: it will be written\n", cmd, path);
        return 0;
    }
    int32_t cap = (int32_t)tessera_context_n_ctx(ctx);
    tessera_token *cached = malloc((size_t)cap * sizeof *cached);
    int32_t nc = 0;
    if (!cached) return 0;
    if (tessera_state_load_file(ctx, -1, path, cached, cap, &nc, NULL) != 0) {
        fprintf(stderr, "%s: prompt cache not used: %s\n", cmd, tessera_last_error());
        tessera_kv_truncate(ctx, 0);
        free(cached);
        return 0;
    }
    int32_t k = 0;
    while (k < n && k < nc && cached[k] == toks[k]) k++;
    free(cached);
    /* The saved logits belong to the cached prompt's last token: they serve
     * only when that prompt is exactly this one. Otherwise at least the last
     * token is evaluated again for its logits. */
    if (!(k == n && nc == n) && k > n - 1) k = n - 1;
    tessera_kv_truncate(ctx, k);
    /* A sliding-window layer may have dropped what the token after the
     * prefix would see: then the cache forgot everything. */
    int32_t held = tessera_kv_len(ctx);
    return held < k ? held : k;
}

int prompt_cache_save(const char *cmd, const char *path, tessera_context *ctx, const tessera_token *toks,
                      int32_t n) {
    if (tessera_state_save_file(ctx, -1, path, toks, n, NULL) != 0) {
        fprintf(stderr, "%s: cannot save the prompt cache: %s\n", cmd, tessera_last_error());
        return -1;
    }
    return 0;
}
