/* AVX2 + FMA + F16C build of the kernels (compiled with -mavx2 -mfma -mf16c). */
#define KERNELS_AVX512 0
#define KERNELS_NAME "avx2"
#include "kernels_impl.h"
#include "gemv_kq_impl.h"
#include "gemm_q8_impl.h"
#include "gemm_q4k_impl.h"
#include "gemm_float_impl.h"

#include <stdlib.h>

void kernels_init_avx2(cpu_kernels *k) {
    kernels_fill(k);
    gemv_kq_register(k);
    gemm_q8_register(k);
    /* The Q4_K panel GEMM of gemm_q4k_impl.h is off until it is found out:
     * with it, Gemma 3 270M's perplexity (-c 512, gpl3-12k.txt) moves from
     * 14.9355 to 14.8195, -0.85% from llama.cpp's 14.9468 instead of -0.08%,
     * far more than a rounding order can; TESSERA_AVX2_Q4K_GEMM=1 turns it
     * on to debug it. */
    const char *q4k = getenv("TESSERA_AVX2_Q4K_GEMM");
    if (q4k && q4k[0] == '1') gemm_q4k_register(k);
    gemm_float_register(k);
}
