/*
 * example.c — a C program against an installed Tessera (pkg-config), the
 * README's "Use it from C" snippet and the proof of `meson install`:
 *
 *     cc example.c $(pkg-config --cflags --libs tessera) \
 *        -Wl,-rpath,"$(pkg-config --variable=libdir tessera)" -o example
 *     ./example MODEL.gguf "The capital of France is" 16
 *
 * It lists the devices with the plugin file each came from (stderr), then
 * prints the greedy continuation of the prompt (as `tessera run --temp 0` does).
 * The library writes nothing itself: its warnings reach stderr through the
 * log callback this program sets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

static int fail(const char *what) {
    fprintf(stderr, "example: %s: %s\n", what, tessera_last_error());
    return 1;
}

/* The library's log lines (warnings: tessera_init's default verbosity). */
static void log_line(int32_t level, const char *text, void *user) {
    (void)level;
    (void)user;
    fputs(text, stderr);
}

static void print_devices(void) {
    tessera_device_info devs[16];
    int32_t n = tessera_devices(devs, 16);
    for (int32_t i = 0; i < n && i < 16; i++)
        fprintf(stderr, "device %s (%s) from %s\n", devs[i].name, devs[i].kind, devs[i].plugin_path);
}

/* Greedy: decode the prompt, then one token at a time until n_predict or an
 * end-of-generation token. */
static int generate(tessera_model *model, tessera_context *ctx, const char *prompt, int n_predict) {
    tessera_token toks[512];
    int32_t n = tessera_tokenize(model, prompt, strlen(prompt), toks, 512, true, true);
    if (n <= 0) return fail("tokenize");
    tessera_sampler_params sp = tessera_sampler_default_params();
    sp.temp = 0;
    tessera_sampler *smp = tessera_sampler_new(tessera_model_n_vocab(model), &sp);
    if (!smp) return fail("sampler");
    int rc = tessera_decode(ctx, toks, n, 0, 0);
    for (int i = 0; rc == 0 && i < n_predict; i++) {
        tessera_token t = tessera_sampler_sample(smp, tessera_logits(ctx, -1));
        if (t < 0 || tessera_token_is_eog(model, t)) break;
        tessera_sampler_accept(smp, t);
        char piece[256];
        int32_t len = tessera_token_to_piece(model, t, piece, sizeof piece, false);
        if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
        rc = tessera_decode(ctx, &t, 1, n + i, 0);
    }
    putchar('\n');
    tessera_sampler_free(smp);
    return rc == 0 ? 0 : fail("decode");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: example MODEL.gguf PROMPT [N]\n");
        return 2;
    }
    tessera_log_set(log_line, NULL);
    if (tessera_init(NULL) != 0) return fail("init");
    print_devices();
    tessera_model_params mp = tessera_model_default_params();
    tessera_model *model = tessera_model_load(argv[1], &mp);
    if (!model) return fail(argv[1]);
    tessera_context_params cp = tessera_context_default_params();
    cp.n_ctx = 512;
    tessera_context *ctx = tessera_context_new(model, &cp);
    int rc = ctx ? generate(model, ctx, argv[2], argc > 3 ? atoi(argv[3]) : 16) : fail("context");
    tessera_context_free(ctx);
    tessera_model_free(model);
    tessera_shutdown();
    return rc;
}
