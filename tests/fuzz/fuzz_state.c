/* Fuzz target: loading a saved context state (tessera_state_load) from
 * arbitrary bytes into a context of stories260K, then decoding, sampling
 * and saving again with what loaded.
 *
 * Input: one mode byte, then the state file. Mode bits:
 *   1  write this model's identity (arch, shape, GGUF hash) into the header
 *   2  recompute the checksum (so the payload's checks are reached)
 *   4  load into sequence 1 instead of the whole cache
 *   8  restore a sampler's state too
 *  16  decode a token after a successful load (slow: a graph per input)
 * A load must fail with an error message or leave a context that decodes.
 * FUZZ_STATE_SEEDS=DIR writes the seed corpus there (from real saves). */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

#include "state/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tessera_model *model;
static tessera_context *ctx;
static tessera_sampler *smp;
static uint8_t identity[STATE_ARCH_MAX + 3 * 4 + 8]; /* header bytes 12.. of this model's saves */

enum { ID_OFF = 12, N_CTX = 32, MAX_TOK = 64 };

static void write_seed(const char *dir, const char *name, uint8_t mode, const uint8_t *st, size_t len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fwrite(&mode, 1, 1, f);
    fwrite(st, 1, len, f);
    fclose(f);
}

/* Seeds: whole caches of 0, 5 and 12 tokens (with logits and a sampler),
 * one sequence, each under a few modes. */
static void write_seeds(const char *dir) {
    static const tessera_token toks[12] = {1, 403, 407, 261, 378, 734 % 512, 263, 290, 402, 311, 289, 260};
    const int counts[3] = {0, 5, 12};
    for (int i = 0; i < 3; i++) {
        tessera_kv_truncate(ctx, 0);
        if (counts[i] && tessera_decode(ctx, toks, counts[i], 0, 0) != 0) abort();
        for (int32_t seq = -1; seq <= 0; seq++) {
            size_t len = 0;
            uint8_t *st = tessera_state_save(ctx, seq, toks, counts[i], seq < 0 ? smp : NULL, &len);
            if (!st) abort();
            char name[64];
            snprintf(name, sizeof name, "state-%d-%s", counts[i], seq < 0 ? "all" : "seq");
            write_seed(dir, name, seq < 0 ? 8 : 4, st, len);
            snprintf(name, sizeof name, "state-%d-%s-fix", counts[i], seq < 0 ? "all" : "seq");
            write_seed(dir, name, seq < 0 ? 3 | 8 | 16 : 3 | 4, st, len);
            free(st);
        }
    }
}

static void init(void) {
    tessera_init_params ip = {0};
    if (tessera_init(&ip) != 0) abort();
    const char *dir = getenv("TESSERA_SHARED");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", dir ? dir : FUZZ_SHARED_DIR);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = "ref";
    model = tessera_model_load(path, &mp);
    if (!model) {
        fprintf(stderr, "fuzz_state: %s: %s (set TESSERA_SHARED)\n", path, tessera_last_error());
        abort();
    }
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = N_CTX;
    cp.n_threads = 1;
    ctx = tessera_context_new(model, &cp);
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.seed = 1;
    smp = tessera_sampler_new(tessera_model_n_vocab(model), &sp);
    if (!ctx || !smp) abort();
    size_t len = 0;
    uint8_t *st = tessera_state_save(ctx, -1, NULL, 0, NULL, &len);
    if (!st) abort();
    memcpy(identity, st + ID_OFF, sizeof identity);
    free(st);
    const char *seeds = getenv("FUZZ_STATE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model) init();
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size_t len = size - 1;
    uint8_t *st = malloc(len ? len : 1);
    if (!st) return 0;
    memcpy(st, data + 1, len);
    if ((mode & 1) && len >= ID_OFF + sizeof identity) memcpy(st + ID_OFF, identity, sizeof identity);
    if ((mode & 2) && len >= 8) state_put(st + len - 8, state_checksum(st, len - 8), 8);
    int32_t seq = (mode & 4) ? 1 : -1;
    tessera_token toks[MAX_TOK];
    int32_t n = -1;
    tessera_kv_truncate(ctx, 0);
    tessera_seq_remove(ctx, 1, 0);
    int rc = tessera_state_load(ctx, seq, st, len, "fuzz", toks, MAX_TOK, &n, (mode & 8) ? smp : NULL);
    if (rc != 0) {
        if (!tessera_last_error()[0]) {
            fprintf(stderr, "fuzz_state: a load failed without an error message\n");
            abort();
        }
    } else {
        if (n < 0 || n > MAX_TOK) abort();
        /* What loaded is usable: sample from the restored logits, decode one
         * more token after the cells, save again and load that back. */
        const float *l = tessera_logits(ctx, -1);
        if (l) tessera_sampler_sample(smp, l);
        int32_t len_kv = tessera_kv_len(ctx);
        tessera_token t = 1;
        if ((mode & 16) && seq < 0 && len_kv < N_CTX) tessera_decode(ctx, &t, 1, len_kv, 0);
        size_t len2 = 0;
        uint8_t *again = tessera_state_save(ctx, seq < 0 ? -1 : 1, toks, n, NULL, &len2);
        if (!again) {
            fprintf(stderr, "fuzz_state: cannot save what loaded: %s\n", tessera_last_error());
            abort();
        }
        if (tessera_state_load(ctx, seq, again, len2, "fuzz-again", toks, MAX_TOK, &n, NULL) != 0) {
            fprintf(stderr, "fuzz_state: a state saved from a loaded one does not load: %s\n",
                    tessera_last_error());
            abort();
        }
        free(again);
    }
    free(st);
    return 0;
}
