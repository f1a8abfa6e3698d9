/* AVX-512 build with VNNI: u8 x s8 dot products in one vpdpbusd, and the
 * packed-panel GEMM of the quantized types built on it. */
#define KERNELS_AVX512 1
#define KERNELS_VNNI 1
#define KERNELS_NAME "avx512vnni"
#include "kernels_impl.h"
#include "gemv_iq_impl.h"
#include "gemv_iqgrid_impl.h"
#include "gemm_q8_impl.h"
#include "gemm_float_impl.h"

void kernels_init_avx512vnni(cpu_kernels *k) {
    kernels_fill(k);
    gemv_iq_register(k);
    gemv_iqgrid_register(k);
    gemm_q8_register(k);
    gemm_float_register(k);
}
