/*
 * arm_count — drives each cpu-neon kernel (bench/arm_count.sh builds this
 * statically for aarch64 against the plugin's kernel libraries and runs it
 * under qemu with TB tracing). Between mark_begin(id) and mark_end() it
 * calls one kernel REPS times on a row of K weights; the script counts the
 * guest instructions executed between the two marks and divides by the
 * number of 32-weight blocks (x columns, x rows). Values are random bytes:
 * the kernels have no data-dependent branches on the counted paths.
 * Prints one line per case: "id level type kind units", units being
 * the number of (32-weight block x row x column) products per mark pair.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/plugin_util.h>

#include "kernels.h"

enum { K = 2048, REPS = 4 };

/* Not inlined, and with a side effect, so the trace sees each call. */
volatile int mark_sink;
__attribute__((noinline)) void mark_begin(int id) { mark_sink = id; }
__attribute__((noinline)) void mark_end(void) { mark_sink = -1; }

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

int main(void) {
    static const int32_t types[] = {TSR_DTYPE_F32, TSR_DTYPE_F16, TSR_DTYPE_BF16, TSR_DTYPE_Q4_0, TSR_DTYPE_Q4_1,
                                    TSR_DTYPE_Q5_0, TSR_DTYPE_Q5_1, TSR_DTYPE_Q8_0, TSR_DTYPE_Q2_K,
                                    TSR_DTYPE_Q3_K, TSR_DTYPE_Q4_K, TSR_DTYPE_Q5_K, TSR_DTYPE_Q6_K};
    void (*inits[3])(cpu_kernels *) = {kernels_init_neon, kernels_init_dotprod, kernels_init_i8mm};
    static uint8_t w[2][K * 4], act[4][K * 4 + 4096];
    fill(&w[0][0], sizeof w, 1);
    fill(&act[0][0], sizeof act, 2);
    int id = 0;
    for (int l = 0; l < 3; l++) {
        cpu_kernels k;
        inits[l](&k);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            int32_t ty = types[t];
            const char *tn = tsr_dtype_name(ty);
            if (ty == TSR_DTYPE_F32 || ty == TSR_DTYPE_F16 || ty == TSR_DTYPE_BF16) {
                /* finite weights and f32 activations */
                for (int i = 0; i < K; i++) {
                    if (ty == TSR_DTYPE_F32) ((float *)w[0])[i] = 1.0f;
                    else ((uint16_t *)w[0])[i] = ty == TSR_DTYPE_F16 ? 0x3c00 : 0x3f80;
                }
                for (int c = 0; c < 4; c++)
                    for (int i = 0; i < K; i++) ((float *)act[c])[i] = 0.5f;
            } else {
                fill(&w[0][0], sizeof w, 1);
                fill(&act[0][0], sizeof act, 2);
            }
            /* quant activations are act8/act8k rows of K values; stride big enough for any */
            size_t stride = sizeof act[0];
            float out[8];
            for (int nc = 1; nc <= 4; nc += 3) {
                printf("%d %s %s dot-nc%d %d\n", id, k.name, tn, nc, REPS * (K / 32) * nc);
                mark_begin(id++);
                for (int r = 0; r < REPS; r++) k.dot[ty](K, w[0], act[0], stride, nc, out);
                mark_end();
            }
            if (k.tile[ty]) {
                printf("%d %s %s tile2x2 %d\n", id, k.name, tn, REPS * (K / 32) * 4);
                mark_begin(id++);
                for (int r = 0; r < REPS; r++) k.tile[ty](K, w[0], sizeof w[0], act[0], stride, out);
                mark_end();
            }
        }
    }
    fflush(stdout);
    return 0;
}
