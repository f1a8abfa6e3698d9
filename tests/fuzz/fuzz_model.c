/* Fuzz target: loading a model from arbitrary GGUF bytes (hparams, tensor
 * shapes, vocabulary checks), then tokenizing and detokenizing with what
 * loaded. The bytes go to a memfd so the loader maps them as it maps a file.
 * A load must either fail with an error message or give a model whose
 * vocabulary can be used without a sanitizer report. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tessera/tessera.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use_model(tessera_model *m) {
    static const char text[] = "Once upon a time, <s> there was \xe2\x96\x81 a \xff cat.\n";
    tessera_token toks[128];
    int32_t n = tessera_tokenize(m, text, sizeof text - 1, toks, 128, true, true);
    if (n == INT32_MIN) {
        fprintf(stderr, "fuzz_model: a loaded model cannot tokenize: %s\n", tessera_last_error());
        abort();
    }
    if (n > 0) {
        char out[1024];
        tessera_detokenize(m, toks, n, out, sizeof out, false, true);
    }
    int32_t nv = tessera_model_n_vocab(m);
    char piece[64];
    for (int32_t id = 0; id < nv && id < 300; id++) tessera_token_to_piece(m, id, piece, sizeof piece, true);
    tessera_token_to_piece(m, nv, piece, sizeof piece, true); /* out of range: an error, not a read */
    (void)tessera_model_desc(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int inited;
    if (!inited) {
        tessera_init_params ip = {0};
        if (tessera_init(&ip) != 0) abort();
        inited = 1;
    }
    int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t k = write(fd, data + off, size - off);
        if (k <= 0) break;
        off += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tessera_model_params mp = tessera_model_default_params();
    mp.devices = "ref";
    tessera_model *m = off == size ? tessera_model_load(path, &mp) : NULL;
    if (m) {
        use_model(m);
        tessera_model_free(m);
    } else if (!tessera_last_error()[0]) {
        fprintf(stderr, "fuzz_model: a load failed without an error message\n");
        abort();
    }
    close(fd);
    return 0;
}
