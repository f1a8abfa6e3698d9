/* AVX2 + FMA + F16C build of the kernels (compiled with -mavx2 -mfma -mf16c). */
#define KERNELS_AVX512 0
#define KERNELS_NAME "avx2"
#include "kernels_impl.h"
#include "gemv_kq_impl.h"
#include "gemm_q8_impl.h"
#include "gemm_q4k_impl.h"
#include "gemm_float_impl.h"

void kernels_init_avx2(cpu_kernels *k) {
    kernels_fill(k);
    gemv_kq_register(k);
    gemm_q8_register(k);
    gemm_q4k_register(k);
    gemm_float_register(k);
}
