/* AVX2 + FMA + F16C build of the kernels (compiled with -mavx2 -mfma -mf16c). */
#define KERNELS_AVX512 0
#define KERNELS_NAME "avx2"
#include "kernels_impl.h"
#include "gemv_iq_impl.h"
#include "gemv_iqgrid_impl.h"
#include "gemv_kq_impl.h"
#include "gemm_q8_impl.h"
#include "gemm_q4k_impl.h"
#include "gemm_float_impl.h"

#include <stdlib.h>

void kernels_init_avx2(cpu_kernels *k) {
    kernels_fill(k);
    gemv_iq_register(k);
    gemv_iqgrid_register(k);
    gemv_kq_register(k);
    gemm_q8_register(k);
    /* The Q4_K panel GEMM of gemm_q4k_impl.h (TESSERA_AVX2_Q4K_GEMM=0 turns
     * it off): TinyLlama-shape Q4_K_M pp512 101.0 -> 107.3 t/s here. It
     * moves Gemma 3 270M's perplexity (-c 512, gpl3-12k.txt) from 14.9355
     * to 14.8195, -0.85% from llama.cpp's 14.9468. Not a kernel error: on
     * the first two chunks every Q4_K product it makes equals the plain C
     * dot on the same Q8_K activations within 1e-5 of the largest output,
     * and test_cpu_ops checks it at Gemma's shapes. Gemma's perplexity is
     * that sensitive to rounding: relative noise of 1e-7..3e-7 on the Q4_K
     * products' outputs gives 14.8611..14.9310 with the generic GEMM and
     * 14.8400, 14.9139 with this one; llama.cpp's own code paths span
     * 14.8470..14.9468 (docs/architectures.md). */
    const char *q4k = getenv("TESSERA_AVX2_Q4K_GEMM");
    if (!q4k || q4k[0] != '0') gemm_q4k_register(k);
    gemm_float_register(k);
}
