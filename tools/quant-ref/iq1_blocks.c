/*
 * iq1_blocks — random rows, importance weights and ggml_quantize_chunk's
 * IQ1_S/IQ1_M bytes, made by RUNNING ggml through ggml.h (no llama.cpp
 * source read), for comparing quant_iq1.c block by block. Not built:
 *   cc -O2 -o /tmp/iq1_blocks tools/quant-ref/iq1_blocks.c -I$P/ggml/include \
 *      -L$P/build/bin -lggml-base -Wl,-rpath,$P/build/bin -lm
 *   /tmp/iq1_blocks OUT ROWS N SEED   (odd SEED: some zero weights)
 * Records: {u32 type, u32 rows, u32 n, f32 x[rows*n], f32 qw[n], bytes}.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
static uint64_t rng = 0x1234abcd5678ull;
static uint64_t next(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float uni(float lo, float hi) { return lo + (float)((double)(next() >> 11) * (1.0 / 9007199254740992.0) * (hi - lo)); }
int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int rows = atoi(argv[2]), n = atoi(argv[3]);
    rng ^= (uint64_t)atoi(argv[4]);
    FILE *f = fopen(argv[1], "wb");
    enum ggml_type types[] = {GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M};
    float *x = malloc(sizeof(float) * rows * n), *qw = malloc(sizeof(float) * n);
    uint8_t *q = malloc((size_t)rows * n);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            float v = uni(-1, 1);
            int kind = r % 8;
            if (kind == 0) v = uni(-1, 1) + uni(-1, 1) + uni(-1, 1);
            if (kind == 2 && next() % 64 == 0) v *= 20;
            if (kind == 3) v = next() % 3 ? v * 0.02f : v;
            if (kind == 4 && (j / 32) % 3 == 1) v = 0;
            if (kind == 5 && (j / 256) % 2 == 1) v = 0;
            if (kind == 6) v = (float)((int)(v * 4)) / 4;
            if (kind == 7 && (j / 16) % 5 == 2) v = 1e-12f * v;
            x[r * n + j] = v * 0.05f;
        }
    for (int j = 0; j < n; j++) qw[j] = uni(0.01f, 1) * uni(0.01f, 1) * 3;
    for (int j = 0; j < n; j++) if (atoi(argv[4]) % 2 && next() % 16 == 0) qw[j] = 0;
    for (int t = 0; t < 2; t++) {
        size_t bytes = ggml_quantize_chunk(types[t], x, q, 0, rows, n, qw);
        uint32_t hdr[3] = {(uint32_t)types[t], (uint32_t)rows, (uint32_t)n};
        fwrite(hdr, 4, 3, f);
        fwrite(x, 4, (size_t)rows * n, f);
        fwrite(qw, 4, n, f);
        fwrite(q, 1, bytes, f);
    }
    fclose(f);
    return 0;
}
